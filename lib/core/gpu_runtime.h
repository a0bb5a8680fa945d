// The few CUDA runtime calls core needs (device count, device memory, copies). Built
// against cudart when DTRAIN_WITH_CUDA is on (lib/core/cuda/), otherwise answers "no GPU".
#pragma once
#include <cstddef>
#include <string>

namespace dt::gpu {

int device_count();                // 0 when there is no usable GPU (any CUDA error)
std::string availability_note();   // why there is no GPU, for error messages
void* device_alloc(int device, size_t bytes);  // nullptr when the device is out of memory
void device_free(int device, void* ptr);
void copy_to_device(int device, void* dst, const void* src, size_t bytes);
void copy_to_host(int device, void* dst, const void* src, size_t bytes);
void memset_zero(int device, void* dst, size_t bytes);

}  // namespace dt::gpu
