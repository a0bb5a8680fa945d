// Out-of-line template bodies for dtype.h.
#pragma once
#include "core/error.h"

namespace dt {

template <class Fn> void dispatch_float(DType t, Fn&& fn) {
  switch (t) {
    case DType::F32: fn(float{}); return;
    case DType::BF16: fn(bf16{}); return;
    case DType::F16: fn(f16{}); return;
    default:
      invalid(std::string("dtype ") + dtype_name(t) + " is not a floating type; accepted: f32, bf16, f16");
  }
}

}  // namespace dt
