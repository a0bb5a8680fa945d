#include "comm/nccl/nccl_api.h"

#include <string>

#include "core/error.h"
#include "core/shared_library.h"

#ifndef DTRAIN_NCCL_LIBRARY_DIR
#define DTRAIN_NCCL_LIBRARY_DIR ""
#endif

namespace dt::comm {
namespace {

EntryPoints<NcclApi> load() {
  EntryPoints<NcclApi> out;
  SharedLibrary lib = out.open("NCCL", "DTRAIN_NCCL_LIBRARY", "libnccl.so." + std::to_string(NCCL_MAJOR),
                               DTRAIN_NCCL_LIBRARY_DIR);
  if (!lib.loaded()) return out;
#define DT_NCCL_LOOKUP(name) out.find(lib, out.api.name, "NCCL", #name);
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
  static const EntryPoints<NcclApi> loaded = load();
  return loaded.get(DT_ERR_COMM);
}

}  // namespace dt::comm
