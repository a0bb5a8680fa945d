// NCCL, loaded on first use (core/shared_library.h says why it is not linked). The entry
// points the nccl backend calls are listed once, in DT_NCCL_ENTRY_POINTS; each becomes a
// member of NcclApi with nccl.h's own type, so a call reads `nccl().ncclAllReduce(...)` and
// the compiler checks it against the header.
//
// Where it is looked for: DTRAIN_NCCL_LIBRARY (a path) when set, else libnccl.so.<the major
// version built against> as the dynamic loader finds it (LD_LIBRARY_PATH: the pip wheel's
// nvidia/nccl/lib, for instance), else in the folder where the build found NCCL. The library
// loaded must have that major version.
#pragma once
#include <nccl.h>

namespace dt::comm {

#define DT_NCCL_ENTRY_POINTS(X) \
  X(ncclGetVersion)             \
  X(ncclGetErrorString)         \
  X(ncclGetUniqueId)            \
  X(ncclCommInitRankConfig)     \
  X(ncclCommGetAsyncError)      \
  X(ncclCommFinalize)           \
  X(ncclCommDestroy)            \
  X(ncclCommAbort)              \
  X(ncclGroupStart)             \
  X(ncclGroupEnd)               \
  X(ncclAllReduce)              \
  X(ncclAllGather)              \
  X(ncclReduceScatter)          \
  X(ncclBroadcast)              \
  X(ncclReduce)                 \
  X(ncclSend)                   \
  X(ncclRecv)

struct NcclApi {
#define DT_NCCL_MEMBER(name) decltype(&::name) name = nullptr;
  DT_NCCL_ENTRY_POINTS(DT_NCCL_MEMBER)
#undef DT_NCCL_MEMBER
};

// The loaded table. Throws dt::Error COMM, naming every place tried and the variable that
// points elsewhere, when NCCL cannot be loaded, lacks an entry point or has another major
// version. Thread-safe; loads once per process.
const NcclApi& nccl();

}  // namespace dt::comm
