// The CPU op table: every entry points at a launcher in this folder.
#include "kernels/cpu/cpu_ops.h"

namespace dt::kernels {

const OpTable& cpu_op_table() {
  static const OpTable table = [] {
    OpTable t;
    t.device_name = "cpu";
    t.matmul = cpu::matmul;
    t.softmax_forward = cpu::softmax_forward;
    t.softmax_backward = cpu::softmax_backward;
    t.cast = cpu::cast;
    // norms, activations, embedding, elementwise
    t.layernorm_forward = cpu::layernorm_forward;
    t.layernorm_backward = cpu::layernorm_backward;
    t.rmsnorm_forward = cpu::rmsnorm_forward;
    t.rmsnorm_backward = cpu::rmsnorm_backward;
    t.gelu_forward = cpu::gelu_forward;
    t.gelu_backward = cpu::gelu_backward;
    t.silu_forward = cpu::silu_forward;
    t.silu_backward = cpu::silu_backward;
    t.swiglu_forward = cpu::swiglu_forward;
    t.swiglu_backward = cpu::swiglu_backward;
    t.embedding_forward = cpu::embedding_forward;
    t.embedding_backward = cpu::embedding_backward;
    t.fill = cpu::fill;
    t.scale = cpu::scale;
    t.add = cpu::add;
    t.bias_add = cpu::bias_add;
    t.bias_backward = cpu::bias_backward;
    t.sum_squares = cpu::sum_squares;
    // attention, loss, optimizers, reduce
    t.attention_forward = cpu::attention_forward;
    t.attention_backward = cpu::attention_backward;
    t.cross_entropy_forward = cpu::cross_entropy_forward;
    t.cross_entropy_backward = cpu::cross_entropy_backward;
    t.cross_entropy_shard_max = cpu::cross_entropy_shard_max;
    t.cross_entropy_shard_forward = cpu::cross_entropy_shard_forward;
    t.cross_entropy_shard_backward = cpu::cross_entropy_shard_backward;
    t.adamw_update = cpu::adamw_update;
    t.sgd_update = cpu::sgd_update;
    t.reduce = cpu::reduce;
    return t;
  }();
  return table;
}

}  // namespace dt::kernels
