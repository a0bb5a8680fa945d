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
    // -- norms, activations, embedding, elementwise (helper A adds entries here)
    // -- attention, loss, optimizers, reduce (helper B adds entries here)
    t.attention_forward = cpu::attention_forward;
    t.attention_backward = cpu::attention_backward;
    return t;
  }();
  return table;
}

}  // namespace dt::kernels
