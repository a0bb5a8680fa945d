#include "comm/nccl/nccl_api.h"

#include <string>

#include "core/error.h"
#include "core/shared_library.h"

#ifndef DTRAIN_NCCL_LIBRARY_DIR
#define DTRAIN_NCCL_LIBRARY_DIR ""
#endif

namespace dt::comm {
namespace {

struct Loaded {
  NcclApi api;
  std::string error;  // empty when NCCL loaded whole and of the major version built against
};

Loaded load() {
  Loaded out;
  SharedLibrary lib = SharedLibrary::open(library_candidates(
      "DTRAIN_NCCL_LIBRARY", "libnccl.so." + std::to_string(NCCL_MAJOR), DTRAIN_NCCL_LIBRARY_DIR));
  if (!lib.loaded()) {
    out.error = "NCCL could not be loaded (" + lib.why() +
                "); set DTRAIN_NCCL_LIBRARY to its path, or add its folder to LD_LIBRARY_PATH";
    return out;
  }
#define DT_NCCL_LOOKUP(name)                                                        \
  out.api.name = reinterpret_cast<decltype(out.api.name)>(lib.symbol(#name));       \
  if (!out.api.name && out.error.empty()) out.error = "NCCL: " + lib.why();
  DT_NCCL_ENTRY_POINTS(DT_NCCL_LOOKUP)
#undef DT_NCCL_LOOKUP
  if (!out.error.empty()) return out;
  // The structs and enums compiled in (ncclConfig_t above all) are this major version's.
  int version = 0;
  if (out.api.ncclGetVersion(&version) != ncclSuccess || version / 10000 != NCCL_MAJOR)
    out.error = "NCCL at " + lib.path() + " is version " + std::to_string(version) + "; libdtrain was built against " +
                std::to_string(NCCL_MAJOR) + ".x (set DTRAIN_NCCL_LIBRARY to a " + std::to_string(NCCL_MAJOR) +
                ".x library)";
  return out;
}

}  // namespace

const NcclApi& nccl() {
  static const Loaded loaded = load();
  if (!loaded.error.empty()) fail(DT_ERR_COMM, loaded.error);
  return loaded.api;
}

}  // namespace dt::comm
