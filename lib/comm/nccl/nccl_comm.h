// The nccl backend: a Communicator over GPU buffers. Operations are enqueued on the
// communicator's own side stream (so they overlap compute on other streams), behind an
// event on the device's compute stream (core/gpu_runtime.h) so that they see every kernel
// issued before them. A Work waits on an event recorded after them, polling NCCL's
// asynchronous error state and aborting the communicator at the deadline instead of hanging.
//
// Communicators are non-blocking (config.blocking = 0): creation and every call may return
// ncclInProgress, and completion is polled with ncclCommGetAsyncError.
//
// Threads: drive each communicator from its own thread (the trainer runs one thread per
// rank). An issue returns only once NCCL has launched the operation, and the first
// operation of a communicator waits for every peer to connect, so one thread that issues on
// the communicator of rank 0 and then of rank 1 waits forever on the first.
//
// Teardown: destroying a communicator flushes it (ncclCommFinalize, polled until ready)
// and frees it; one that fails or does not flush within 10 s is aborted instead. A Work
// destroyed before it was waited for waits first (its buffers may still be in use).
#pragma once
#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace dt::comm {

struct NcclOptions {
  double timeout_s = 300.0;
};

// One communicator per GPU of this process, over all of them (ncclCommInitAll-style, but
// non-blocking): rank i drives devices[i].
std::vector<std::unique_ptr<Communicator>> make_nccl_comms(const std::vector<int>& devices, const std::string& axis,
                                                           const NcclOptions& options);

// One rank per process: rank 0 makes the unique id and `bootstrap` (any backend's
// communicator over the same ranks, e.g. MPI's) broadcasts it; this rank drives `device`.
std::unique_ptr<Communicator> make_nccl_comm(Communicator& bootstrap, int device, const NcclOptions& options);

// NCCL communicators of this process made and not yet destroyed or aborted (leak checks).
int nccl_live_communicators();

}  // namespace dt::comm
