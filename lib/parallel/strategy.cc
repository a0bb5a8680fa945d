#include "parallel/strategy.h"

#include "core/device_scope.h"
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

void all_reduce_grads(comm::Communicator& group, const nn::ParamList& params, Tensor& flat, Device device) {
  if (params.empty()) return;
  int64_t n = 0;
  for (const nn::Parameter* p : params) n += p->grad.numel();
  const DType dtype = params[0]->grad.dtype();
  if (!flat.defined() || flat.numel() < n || flat.dtype() != dtype)
    flat = Tensor::uninit({n}, dtype, device, MemTag::Grad);
  ScopedDevice on(device);
  auto each = [&](bool pack) {
    int64_t at = 0;
    for (nn::Parameter* p : params) {
      Tensor view = flat.slice0(at, at + p->grad.numel()).reshape(p->grad.shape());
      if (pack)
        copy_tensor(p->grad, view);
      else
        copy_tensor(view, p->grad);
      at += p->grad.numel();
    }
  };
  each(true);
  group.all_reduce(flat.raw(), flat.raw(), n, dtype, comm::ReduceOp::Sum);
  each(false);
}

}  // namespace dt::parallel
