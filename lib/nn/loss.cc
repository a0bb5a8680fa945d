#include "nn/loss.h"

#include "core/device_scope.h"
#include "core/error.h"
#include "core/tensor_copy.h"
#include "kernels/ops.h"
#include "nn/module.h"

namespace dt::nn {

double cross_entropy_loss(const Tensor& logits, const Tensor& targets, int32_t ignore_index, CrossEntropyState& s) {
  const int64_t R = logits.rows();
  DT_CHECK(targets.dtype() == DType::I32 && targets.numel() == R,
           "targets: expected i32 with " + std::to_string(R) + " elements (one per logits row), got " +
               shape_str(targets.shape()));
  ScopedDevice on(logits.device());
  ensure(s.losses, {R});
  // Targets come from the host; the kernel reads them where the logits are (a small copy).
  kernels::cross_entropy_forward(flat2d(logits), to_device(targets.reshape({R}), logits.device()), ignore_index,
                                 s.losses);
  // The mean's denominator and the sum are host loops: targets and losses are small.
  const Tensor host_t = to_device(targets, Device::cpu()), host_l = to_device(s.losses, Device::cpu());
  const int32_t* t = host_t.data<int32_t>();
  const float* l = host_l.data<float>();
  s.count = 0;
  double sum = 0;
  for (int64_t r = 0; r < R; ++r) {
    if (t[r] == ignore_index) continue;
    ++s.count;
    sum += l[r];
  }
  return s.count ? sum / static_cast<double>(s.count) : 0.0;
}

void cross_entropy_loss_backward(const Tensor& logits, const Tensor& targets, int32_t ignore_index,
                                 CrossEntropyState& s, Tensor& dlogits, float grad_scale) {
  const int64_t R = logits.rows();
  ScopedDevice on(logits.device());
  fill_mean_loss_grads(s, R, grad_scale);
  ensure(dlogits, logits.shape(), logits.dtype());
  Tensor d2 = flat2d(dlogits);
  kernels::cross_entropy_backward(flat2d(logits), to_device(targets.reshape({R}), logits.device()), s.dlosses,
                                 ignore_index, d2);
}

void fill_mean_loss_grads(CrossEntropyState& s, int64_t rows, float grad_scale) {
  ensure(s.dlosses, {rows});
  // d mean / d loss_r = 1 / count for every counted row; the kernels zero ignored rows.
  kernels::fill(s.dlosses, s.count ? grad_scale / static_cast<float>(s.count) : 0.0f);
}

double mse_loss(const Tensor& pred, const Tensor& target, MSEState& s) {
  ScopedDevice on(pred.device());
  DT_CHECK(pred.shape() == target.shape(),
           "mse: target shape " + shape_str(target.shape()) + " differs from pred " + shape_str(pred.shape()));
  ensure(s.diff, pred.shape());
  kernels::cast(to_device(target, pred.device()), s.diff);
  kernels::scale(s.diff, -1.0f);
  kernels::add(pred, s.diff, s.diff);
  return kernels::sum_squares(s.diff) / static_cast<double>(pred.numel());
}

void mse_loss_backward(MSEState& s, Tensor& dpred, float grad_scale) {
  ScopedDevice on(s.diff.device());
  ensure(dpred, s.diff.shape());
  kernels::cast(s.diff, dpred);
  kernels::scale(dpred, 2.0f * grad_scale / static_cast<float>(s.diff.numel()));
}

}  // namespace dt::nn
