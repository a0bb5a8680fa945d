#include "core/error.h"
#include "kernels/ops.h"

namespace dt::kernels {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Prod: return "prod";
  }
  return "unknown";
}

const OpTable& op_table(Device device) {
  if (device.type == DeviceType::CPU) return cpu_op_table();
  fail(DT_ERR_UNSUPPORTED, "no kernels for " + device.str() + " in this build (CUDA kernels land with kernels/cuda)");
}

}  // namespace dt::kernels
