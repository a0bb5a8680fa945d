#include "kernels/cuda/cublas_api.h"

#include <string>

#include "core/error.h"
#include "core/shared_library.h"

#ifndef DTRAIN_CUDA_LIBRARY_DIR
#define DTRAIN_CUDA_LIBRARY_DIR ""
#endif

namespace dt::kernels::cuda {
namespace {

#define DT_STRINGIFY_EXPANDED(x) DT_STRINGIFY(x)
#define DT_STRINGIFY(x) #x

struct Loaded {
  CublasApi api;
  std::string error;  // empty when every entry point was found
};

Loaded load() {
  Loaded out;
  SharedLibrary lib = SharedLibrary::open(library_candidates(
      "DTRAIN_CUBLAS_LIBRARY", "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR), DTRAIN_CUDA_LIBRARY_DIR));
  if (!lib.loaded()) {
    out.error = "cuBLAS could not be loaded (" + lib.why() +
                "); set DTRAIN_CUBLAS_LIBRARY to its path, or add its folder to LD_LIBRARY_PATH";
    return out;
  }
  // The symbol is the macro-expanded name (cublasCreate -> cublasCreate_v2), as the header
  // declares it.
#define DT_CUBLAS_LOOKUP(name, type)                                                           \
  out.api.name = reinterpret_cast<decltype(out.api.name)>(lib.symbol(DT_STRINGIFY_EXPANDED(name))); \
  if (!out.api.name && out.error.empty()) out.error = "cuBLAS: " + lib.why();
  DT_CUBLAS_ENTRY_POINTS(DT_CUBLAS_LOOKUP)
#undef DT_CUBLAS_LOOKUP
  return out;
}

}  // namespace

const CublasApi& cublas() {
  static const Loaded loaded = load();
  if (!loaded.error.empty()) fail(DT_ERR_UNSUPPORTED, loaded.error);
  return loaded.api;
}

}  // namespace dt::kernels::cuda
