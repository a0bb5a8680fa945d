// cast: validation and dispatch.
#include "kernels/check.h"

namespace dt::kernels {

void cast(const Tensor& src, Tensor& dst) {
  const char* op = "cast";
  require_defined(op, {src, "src"});
  require_same_device(op, {{src, "src"}, {dst, "dst"}});
  DT_CHECK(src.numel() == dst.numel(), "cast: dst has " + std::to_string(dst.numel()) +
                                           " elements; required: " + std::to_string(src.numel()) + ", as src");
  DT_BACKEND(src, cast)(src, dst);
}

}  // namespace dt::kernels
