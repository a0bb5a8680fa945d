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

EntryPoints<CublasApi> load() {
  EntryPoints<CublasApi> out;
  SharedLibrary lib = out.open("cuBLAS", "DTRAIN_CUBLAS_LIBRARY", "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR),
                               DTRAIN_CUDA_LIBRARY_DIR);
  if (!lib.loaded()) return out;
  // The symbol is the macro-expanded name (cublasCreate -> cublasCreate_v2), as the header
  // declares it.
#define DT_CUBLAS_LOOKUP(name, type) out.find(lib, out.api.name, "cuBLAS", DT_STRINGIFY_EXPANDED(name));
  DT_CUBLAS_ENTRY_POINTS(DT_CUBLAS_LOOKUP)
#undef DT_CUBLAS_LOOKUP
  return out;
}

}  // namespace

const CublasApi& cublas() {
  static const EntryPoints<CublasApi> loaded = load();
  return loaded.get(DT_ERR_UNSUPPORTED);
}

}  // namespace dt::kernels::cuda
