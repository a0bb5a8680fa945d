// Element types and the conversions between them. bf16 and f16 are stored as uint16_t
// bit patterns; compute always happens in f32.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "dtrain/dtrain.h"

namespace dt {

enum class DType : int32_t { F32 = DT_F32, BF16 = DT_BF16, F16 = DT_F16, I32 = DT_I32, I64 = DT_I64 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
bool dtype_valid(int32_t raw);
inline bool is_floating(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }
DType dtype_from_raw(int32_t raw, const char* arg_name);  // throws naming the accepted values

struct bf16 { uint16_t bits; };
struct f16 { uint16_t bits; };

inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// f32 -> bf16, round to nearest, ties to even; NaN stays a (quiet) NaN of the same sign.
// Written as a select, not an early return: GCC then vectorizes the loops that call it (with
// the branch, AdamW's bf16 parameter copy and every bf16 cast ran one element at a time).
inline uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = f32_bits(f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t quiet_nan = (u >> 16) | 0x0040u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}
inline float bf16_bits_to_f32(uint16_t b) { return bits_f32(static_cast<uint32_t>(b) << 16); }

// f32 <-> IEEE half, round to nearest even, with subnormals, Inf and NaN handled.
uint16_t f32_to_f16_bits(float f);
float f16_bits_to_f32(uint16_t h);

// Typed load/store used by kernels templated over the storage type.
inline float to_f32(float v) { return v; }
inline float to_f32(bf16 v) { return bf16_bits_to_f32(v.bits); }
inline float to_f32(f16 v) { return f16_bits_to_f32(v.bits); }
template <class T> inline T from_f32(float v);
template <> inline float from_f32<float>(float v) { return v; }
template <> inline bf16 from_f32<bf16>(float v) { return bf16{f32_to_bf16_bits(v)}; }
template <> inline f16 from_f32<f16>(float v) { return f16{f32_to_f16_bits(v)}; }

// Calls fn with a value of the storage type matching a floating dtype:
//   dispatch_float(t, [&](auto tag) { using T = decltype(tag); ... });
template <class Fn> void dispatch_float(DType t, Fn&& fn);

}  // namespace dt

#include "core/dtype_dispatch.inl"
