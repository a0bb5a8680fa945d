// CPU launchers: one per op, each in its own file beside its kernel. They implement the
// OpTable interface of kernels/ops.h (see there for each op's contract) and receive
// validated arguments only.
#pragma once
#include "kernels/ops.h"

namespace dt::kernels::cpu {

// One launcher per op of DT_KERNEL_OPS, each of the type ops.h declares it with.
#define DT_DECLARE_LAUNCHER(name) decltype(::dt::kernels::name) name;
DT_KERNEL_OPS(DT_DECLARE_LAUNCHER)
#undef DT_DECLARE_LAUNCHER

}  // namespace dt::kernels::cpu
