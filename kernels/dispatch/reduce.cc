// reduce: validation and dispatch. It works on raw buffers (the collectives' staging
// memory), so there is no tensor to take the device from: the caller names it.
#include "kernels/check.h"

namespace dt::kernels {

void reduce(ReduceOp op, DType dtype, Device device, const void* const* srcs, int nsrc, void* dst, int64_t count) {
  auto raw_op = static_cast<int32_t>(op);
  DT_CHECK(raw_op >= 0 && raw_op <= static_cast<int32_t>(ReduceOp::Prod),
           "reduce: op is " + std::to_string(raw_op) + "; accepted: sum (0), avg (1), max (2), min (3), prod (4)");
  dtype_from_raw(static_cast<int32_t>(dtype), "reduce: dtype");
  DT_CHECK(nsrc >= 1, "reduce: nsrc is " + std::to_string(nsrc) + "; accepted: >= 1");
  DT_CHECK(count >= 0, "reduce: count is " + std::to_string(count) + "; accepted: >= 0");
  DT_CHECK(srcs != nullptr, "reduce: srcs is null; required: an array of nsrc buffer pointers");
  // A zero-length reduction touches no buffer, so only then may the buffers be null.
  if (count > 0) {
    for (int i = 0; i < nsrc; ++i)
      DT_CHECK(srcs[i] != nullptr, "reduce: srcs[" + std::to_string(i) + "] is null; required: a buffer of " +
                                       std::to_string(count) + " " + dtype_name(dtype) + " elements");
    DT_CHECK(dst != nullptr, "reduce: dst is null; required: a buffer of " + std::to_string(count) + " " +
                                 dtype_name(dtype) + " elements");
  }
  require_available(device);               // UNSUPPORTED for a GPU this machine lacks
  const OpTable& table = op_table(device);  // UNSUPPORTED for a device without kernels
  if (!table.reduce) fail(DT_ERR_UNSUPPORTED, std::string("op reduce has no kernel on ") + table.device_name);
  table.reduce(op, dtype, device, srcs, nsrc, dst, count);
}

}  // namespace dt::kernels
