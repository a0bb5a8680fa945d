#include "parallel/strategy.h"

#include "core/tensor_copy.h"

namespace dt::parallel {

double exact_sum(comm::Communicator& group, double x, Device device) {
  float v[2] = {static_cast<float>(x), 0.0f};
  v[1] = static_cast<float>(x - static_cast<double>(v[0]));
  if (device.type == DeviceType::CPU) {
    group.all_reduce(v, v, 2, DType::F32, comm::ReduceOp::Sum);
  } else {
    Tensor buf = Tensor::uninit({2}, DType::F32, device);
    copy_between(device, buf.raw(), Device::cpu(), v, sizeof v);
    group.all_reduce(buf.raw(), buf.raw(), 2, DType::F32, comm::ReduceOp::Sum);
    copy_between(Device::cpu(), v, device, buf.raw(), sizeof v);
  }
  return static_cast<double>(v[0]) + static_cast<double>(v[1]);
}

}  // namespace dt::parallel
