// The CPU op table: every entry points at a launcher in this folder.
#include "kernels/cpu/cpu_ops.h"

namespace dt::kernels {

const OpTable& cpu_op_table() {
  static const OpTable table = [] {
    OpTable t;
    t.device_name = "cpu";
#define DT_FILL_ENTRY(name) t.name = cpu::name;
    DT_KERNEL_OPS(DT_FILL_ENTRY)
#undef DT_FILL_ENTRY
    return t;
  }();
  return table;
}

}  // namespace dt::kernels
