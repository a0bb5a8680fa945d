#include "nn/vocab_parallel.h"

#include <cmath>

#include "core/device_scope.h"
#include "core/error.h"
#include "core/tensor_copy.h"
#include "kernels/ops.h"

namespace dt::nn {

VocabSlice vocab_slice(int64_t vocab, const TpGroup& tp) {
  const int64_t n = tp.size(), rows = (vocab + n - 1) / n;
  DT_CHECK(vocab > (n - 1) * rows, "vocab_size = " + std::to_string(vocab) + " over tp = " + std::to_string(n) +
                                       ": the last rank's slice would hold no id; accepted: vocab_size > " +
                                       std::to_string((n - 1) * rows));
  VocabSlice v;
  v.vocab = vocab;
  v.rows = rows;
  v.begin = tp.rank() * rows;
  v.valid = std::min(rows, vocab - v.begin);
  return v;
}

ShardSpec vocab_spec() { return ShardSpec{0, "tp", {}, true}; }

Tensor slice_ids(const Tensor& host_ids, const VocabSlice& v, Device device) {
  Tensor out = Tensor::uninit(host_ids.shape(), DType::I32);
  const int32_t* in = host_ids.data<int32_t>();
  int32_t* o = out.data<int32_t>();
  for (int64_t i = 0; i < host_ids.numel(); ++i) {
    const int64_t id = in[i] - v.begin;
    o[i] = id >= 0 && id < v.valid ? static_cast<int32_t>(id) : -1;
  }
  return to_device(out, device, MemTag::Activation);
}

double vocab_parallel_cross_entropy(const TpGroup& tp, const VocabSlice& v, const Tensor& logits,
                                    const Tensor& targets, int32_t ignore_index, CrossEntropyState& s) {
  const int64_t R = logits.rows();
  DT_CHECK(targets.dtype() == DType::I32 && targets.numel() == R,
           "targets: expected i32 with " + std::to_string(R) + " elements (one per logits row), got " +
               shape_str(targets.shape()));
  ScopedDevice on(logits.device());
  const Tensor l2 = flat2d(logits), tg = to_device(targets.reshape({R}), logits.device());
  Tensor& mx = ensure(s.max, {R});
  kernels::cross_entropy_shard_max(l2, v.valid, mx);
  if (tp.size() > 1) tp.comm->all_reduce(mx.raw(), mx.raw(), R, DType::F32, kernels::ReduceOp::Max);
  Tensor& part = ensure(s.partial, {R, 2});
  kernels::cross_entropy_shard_forward(l2, tg, v.begin, v.valid, ignore_index, mx, part);
  all_reduce_sum(tp, part);
  // The rest on the host: R rows of three numbers.
  const Tensor hm = to_device(mx, Device::cpu()), hp = to_device(part, Device::cpu());
  const Tensor ht = to_device(targets, Device::cpu());
  const float *m = hm.data<float>(), *p = hp.data<float>();
  const int32_t* t = ht.data<int32_t>();
  Tensor lse = Tensor::uninit({R}, DType::F32);
  float* l = lse.data<float>();
  s.count = 0;
  double sum = 0;
  for (int64_t r = 0; r < R; ++r) {
    l[r] = m[r] + std::log(p[2 * r]);
    if (t[r] == ignore_index) continue;
    ++s.count;
    sum += static_cast<double>(l[r]) - static_cast<double>(p[2 * r + 1]);
  }
  s.lse = to_device(lse, logits.device(), MemTag::Activation);
  return s.count ? sum / static_cast<double>(s.count) : 0.0;
}

void vocab_parallel_cross_entropy_backward(const VocabSlice& v, const Tensor& logits, const Tensor& targets,
                                           int32_t ignore_index, CrossEntropyState& s, Tensor& dlogits,
                                           float grad_scale) {
  const int64_t R = logits.rows();
  ScopedDevice on(logits.device());
  fill_mean_loss_grads(s, R, grad_scale);
  ensure(dlogits, logits.shape(), logits.dtype());
  Tensor d2 = flat2d(dlogits);
  kernels::cross_entropy_shard_backward(flat2d(logits), to_device(targets.reshape({R}), logits.device()), v.begin,
                                        v.valid, ignore_index, s.lse, s.dlosses, d2);
}

}  // namespace dt::nn
