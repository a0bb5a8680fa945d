// The few CUDA runtime calls core needs (device count, device memory, copies, the compute
// stream). Built against cudart when DTRAIN_WITH_CUDA is on (lib/core/cuda/), otherwise
// every call answers "no GPU" (UNSUPPORTED) and device_count() is 0.
//
// Streams: each device has ONE compute stream, shared by every thread of the process
// (created on first use, non-blocking with respect to the legacy default stream). Every
// kernel, memset and copy of libdtrain is issued on it, so work on a device runs in issue
// order and the caching allocator may hand a freed block to the next request at once: any
// later use is ordered after the earlier one by the stream. Ranks of a mesh sit on
// different GPUs, so they do not serialize on one stream; NCCL runs on its own side stream
// and orders itself against this one with events (comm/nccl).
#pragma once
#include <cstddef>
#include <string>

namespace dt::gpu {

int device_count();                // 0 when there is no usable GPU (any CUDA error)
std::string availability_note();   // why there is no GPU, for error messages
void* device_alloc(int device, size_t bytes);  // nullptr when the device is out of memory
void device_free(int device, void* ptr);

// The device's compute stream (a cudaStream_t) and makes `device` current on this thread.
void* compute_stream(int device);
// Blocks until every operation issued on the device's compute stream has finished, and
// throws INTERNAL with the first asynchronous kernel error, if any.
void synchronize(int device);

// Synchronous copies (return when the bytes have arrived). Host memory is pageable; copies
// of 1 MiB or more go through pinned staging buffers, two in flight, so the host-side
// memcpy of one chunk overlaps the DMA of the previous.
void copy_to_device(int device, void* dst, const void* src, size_t bytes);
void copy_to_host(int device, void* dst, const void* src, size_t bytes);
// Device to device on the compute stream (same device), asynchronous.
void copy_device(int device, void* dst, const void* src, size_t bytes);
void memset_zero(int device, void* dst, size_t bytes);  // asynchronous, on the compute stream

}  // namespace dt::gpu
