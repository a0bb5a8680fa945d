// Elementwise math the compiler can vectorize, for the CPU kernels whose cost would
// otherwise be a scalar libm call per element (attention's softmax, GELU, SiLU and SwiGLU).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace dt::kernels::cpu {

// exp for x <= ~88 that the compiler vectorizes. x = n ln2 + r with
// |r| <= ln2 / 2, e^r by its degree-7 Taylor polynomial (truncation < 1e-8 relative), 2^n
// written into the exponent bits: within 1.3 ulp of e^x. Below -87 it returns 0, where
// e^x is under the smallest normal float anyway.
inline float exp_approx(float x) {
  float xc = std::max(x, -87.0f);
  float n = std::nearbyint(xc * 1.44269504f);
  float r = xc - n * 0.693359375f;  // ln2 split in two so n * hi is exact for |n| < 2^15
  r = r + n * 2.12194440e-4f;       // ... and the small remainder restores the rest
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return x < -87.0f ? 0.0f : p * two_n;
}

// tanh(u) = 1 - 2 / (e^(2u) + 1); exactly +-1 for |u| >= 9, where tanh rounds to +-1 in
// f32 anyway (GELU's backward multiplies 1 - t^2 by x^3-sized factors, so "almost 1" would
// show). Absolute error ~2e-7.
inline float tanh_approx(float u) {
  float c = std::min(std::max(u, -9.0f), 9.0f);
  float t = 1.0f - 2.0f / (exp_approx(2.0f * c) + 1.0f);
  return std::fabs(u) >= 9.0f ? std::copysign(1.0f, u) : t;
}

// The logistic function for SiLU and SwiGLU, on exp_approx so that their loops vectorize
// (with libm's exp SwiGLU took 7x its bytes' time, a Llama block's costliest pass after the
// GEMMs): within 2 ulp. Below -88 e^-v would overflow the approximation; the logistic is
// under 1e-38 there, and 1 / (1 + e^88) gives that.
inline float sigmoid(float v) { return 1.0f / (1.0f + exp_approx(std::min(-v, 88.0f))); }

}  // namespace dt::kernels::cpu
