// CUDA launchers: one per op, each in its own .cu file beside its kernels. They implement
// the OpTable interface of kernels/ops.h (see there for each op's contract), receive
// validated arguments only, and enqueue on the device's compute stream (gpu_runtime.h).
// Ops that return a value to the host (sum_squares) or reject bad indices the way the CPU
// does (cross_entropy, embedding) synchronize; the rest return before the GPU finishes.
#pragma once
#include "kernels/ops.h"

namespace dt::kernels::cuda {

const OpTable& cuda_op_table();

void matmul(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha, float beta);

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y,
                       Tensor& mean, Tensor& rstd);
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor& dx, Tensor& dweight, Tensor& dbias);
void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor& rstd);
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                      Tensor& dweight);

void gelu_forward(const Tensor& x, Tensor& y);
void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx);
void silu_forward(const Tensor& x, Tensor& y);
void silu_backward(const Tensor& x, const Tensor& dy, Tensor& dx);
void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& y);
void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy, Tensor& dgate, Tensor& dup);

void softmax_forward(const Tensor& x, Tensor& y);
void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx);
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out, Tensor& lse);
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& dout, float scale, Tensor& dq, Tensor& dk, Tensor& dv);

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int32_t ignore_index, Tensor& losses);
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& dlosses,
                            int32_t ignore_index, Tensor& dlogits);
void cross_entropy_shard_max(const Tensor& logits, int64_t valid, Tensor& row_max);
void cross_entropy_shard_forward(const Tensor& logits, const Tensor& targets, int64_t vocab_begin, int64_t valid,
                                 int32_t ignore_index, const Tensor& row_max, Tensor& partial);
void cross_entropy_shard_backward(const Tensor& logits, const Tensor& targets, int64_t vocab_begin, int64_t valid,
                                  int32_t ignore_index, const Tensor& lse, const Tensor& dlosses, Tensor& dlogits);

void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out);
void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable);

void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p, Tensor& param_copy);
void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdParams& p, Tensor& param_copy);

void cast(const Tensor& src, Tensor& dst);
void fill(Tensor& x, float value);
void scale(Tensor& x, float alpha);
void add(const Tensor& a, const Tensor& b, Tensor& out);
void bias_add(Tensor& y, const Tensor& bias);
void bias_backward(const Tensor& dy, Tensor& dbias);
double sum_squares(const Tensor& x);
// Not in the op table (nn/rope.cc owns rope and computes its tables): x [B, T, H, D] on a
// GPU rotated in place by cos/sin tables of T * D / 2 floats in host memory.
void rope_rotate(Tensor& x, const float* cos_table, const float* sin_table);

void reduce(ReduceOp op, DType dtype, Device device, const void* const* srcs, int nsrc, void* dst, int64_t count);

}  // namespace dt::kernels::cuda
