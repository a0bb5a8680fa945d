// The CUDA op table: every entry points at a launcher in this folder (one .cu per op).
#include "kernels/cuda/cuda_ops.h"

namespace dt::kernels::cuda {

const OpTable& cuda_op_table() {
  static const OpTable table = [] {
    OpTable t;
    t.device_name = "cuda";
#define DT_FILL_ENTRY(name) t.name = name;
    DT_KERNEL_OPS(DT_FILL_ENTRY)
#undef DT_FILL_ENTRY
    return t;
  }();
  return table;
}

}  // namespace dt::kernels::cuda
