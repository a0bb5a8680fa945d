#include "core/error.h"
#include "kernels/ops.h"
#ifdef DTRAIN_HAVE_CUDA
#include "kernels/cuda/cuda_ops.h"
#endif

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
#ifdef DTRAIN_HAVE_CUDA
  return cuda::cuda_op_table();
#else
  fail(DT_ERR_UNSUPPORTED, "no kernels for " + device.str() + " in this build (built with DTRAIN_WITH_CUDA=OFF)");
#endif
}

}  // namespace dt::kernels
