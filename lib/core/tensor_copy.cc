#include "core/tensor_copy.h"

#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/gpu_runtime.h"

namespace dt {

void copy_tensor(const Tensor& src, Tensor& dst) {
  DT_CHECK(src.defined() && dst.defined(), "copy_tensor: src and dst must be defined tensors");
  DT_CHECK(src.dtype() == dst.dtype() && src.numel() == dst.numel(),
           std::string("copy_tensor: dst is ") + dtype_name(dst.dtype()) + " " + shape_str(dst.shape()) +
               "; required: the dtype and element count of src, " + dtype_name(src.dtype()) + " " +
               shape_str(src.shape()));
  copy_between(dst.device(), dst.raw(), src.device(), src.raw(), src.nbytes());
}

void copy_between(Device d, void* dst, Device s, const void* src, size_t n) {
  if (n == 0 || (src == dst && s == d)) return;
  if (s.type == DeviceType::CPU && d.type == DeviceType::CPU) std::memcpy(dst, src, n);
  else if (s.type == DeviceType::CPU) gpu::copy_to_device(d.index, dst, src, n);
  else if (d.type == DeviceType::CPU) gpu::copy_to_host(s.index, dst, src, n);
  else if (s == d) gpu::copy_device(d.index, dst, src, n);
  else {  // two GPUs: through the host (staged both ways); rare, and never on a hot path
    std::vector<char> host(n);
    gpu::copy_to_host(s.index, host.data(), src, n);
    gpu::copy_to_device(d.index, dst, host.data(), n);
  }
}

void copy_bytes(Device device, void* dst, const void* src, size_t n) { copy_between(device, dst, device, src, n); }

Tensor to_device(const Tensor& src, Device device, MemTag tag) {
  if (src.device() == device) return src;
  Tensor out = Tensor::uninit(src.shape(), src.dtype(), device, tag);
  copy_tensor(src, out);
  return out;
}

}  // namespace dt
