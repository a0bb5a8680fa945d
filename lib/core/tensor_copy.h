// Copies between devices. The op table's cast converts dtypes on one device; these move
// bytes between devices (host <-> GPU, GPU <-> GPU), keeping the dtype.
#pragma once
#include "core/tensor.h"

namespace dt {

// dst = src, element for element: same dtype and element count, any devices. Returns once
// dst may be read (a copy to the host has arrived; one on a GPU is ordered on its stream).
void copy_tensor(const Tensor& src, Tensor& dst);

// n bytes from src to dst, both on `device` (memcpy on the CPU; on a GPU, ordered on its
// compute stream).
void copy_bytes(Device device, void* dst, const void* src, size_t n);
// n bytes from src on `src_device` to dst on `dst_device`, any pair; returns once dst may
// be read (as copy_tensor).
void copy_between(Device dst_device, void* dst, Device src_device, const void* src, size_t n);

// `src` on `device`: src itself when it is already there, else a new copy counted as `tag`.
Tensor to_device(const Tensor& src, Device device, MemTag tag = MemTag::Workspace);

}  // namespace dt
