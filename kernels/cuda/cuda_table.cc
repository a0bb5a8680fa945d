// The CUDA op table: every entry points at a launcher in this folder (one .cu per op).
#include "kernels/cuda/cuda_ops.h"

namespace dt::kernels::cuda {

const OpTable& cuda_op_table() {
  static const OpTable table = [] {
    OpTable t;
    t.device_name = "cuda";
    t.matmul = matmul;
    t.softmax_forward = softmax_forward;
    t.softmax_backward = softmax_backward;
    t.cast = cast;
    t.layernorm_forward = layernorm_forward;
    t.layernorm_backward = layernorm_backward;
    t.rmsnorm_forward = rmsnorm_forward;
    t.rmsnorm_backward = rmsnorm_backward;
    t.gelu_forward = gelu_forward;
    t.gelu_backward = gelu_backward;
    t.silu_forward = silu_forward;
    t.silu_backward = silu_backward;
    t.swiglu_forward = swiglu_forward;
    t.swiglu_backward = swiglu_backward;
    t.embedding_forward = embedding_forward;
    t.embedding_backward = embedding_backward;
    t.fill = fill;
    t.scale = scale;
    t.add = add;
    t.bias_add = bias_add;
    t.bias_backward = bias_backward;
    t.sum_squares = sum_squares;
    t.attention_forward = attention_forward;
    t.attention_backward = attention_backward;
    t.cross_entropy_forward = cross_entropy_forward;
    t.cross_entropy_backward = cross_entropy_backward;
    t.cross_entropy_shard_max = cross_entropy_shard_max;
    t.cross_entropy_shard_forward = cross_entropy_shard_forward;
    t.cross_entropy_shard_backward = cross_entropy_shard_backward;
    t.adamw_update = adamw_update;
    t.sgd_update = sgd_update;
    t.reduce = reduce;
    return t;
  }();
  return table;
}

}  // namespace dt::kernels::cuda
