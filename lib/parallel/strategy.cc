#include "parallel/strategy.h"

#include "core/device_scope.h"
#include "core/tensor_copy.h"

namespace dt::parallel {

void exact_sum(comm::Communicator& group, double* x, size_t n, Device device) {
  if (n == 0) return;
  std::vector<float> v(2 * n);  // each x as hi, lo
  for (size_t i = 0; i < n; ++i) {
    v[2 * i] = static_cast<float>(x[i]);
    v[2 * i + 1] = static_cast<float>(x[i] - static_cast<double>(v[2 * i]));
  }
  const size_t bytes = v.size() * sizeof(float);
  if (device.type == DeviceType::CPU) {
    group.all_reduce(v.data(), v.data(), static_cast<int64_t>(v.size()), DType::F32, comm::ReduceOp::Sum);
  } else {
    Tensor buf = Tensor::uninit({static_cast<int64_t>(v.size())}, DType::F32, device);
    copy_between(device, buf.raw(), Device::cpu(), v.data(), bytes);
    group.all_reduce(buf.raw(), buf.raw(), static_cast<int64_t>(v.size()), DType::F32, comm::ReduceOp::Sum);
    copy_between(Device::cpu(), v.data(), device, buf.raw(), bytes);
  }
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<double>(v[2 * i]) + static_cast<double>(v[2 * i + 1]);
}

double exact_sum(comm::Communicator& group, double x, Device device) {
  exact_sum(group, &x, 1, device);
  return x;
}

void all_reduce_grads(comm::Communicator& group, const nn::ParamList& params, Tensor& flat, Device device) {
  if (params.empty()) return;
  int64_t n = 0;
  for (const nn::Parameter* p : params) n += p->grad.numel();
  const DType dtype = params[0]->grad.dtype();
  if (!flat.defined() || flat.numel() < n || flat.dtype() != dtype)
    flat = Tensor::uninit({n}, dtype, device, MemTag::CommBuffer);  // a staging copy, not gradient state
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
