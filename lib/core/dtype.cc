#include "core/dtype.h"

#include "core/error.h"

namespace dt {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: return 4;
    case DType::BF16: case DType::F16: return 2;
    case DType::I64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
  }
  return "unknown";
}

bool dtype_valid(int32_t raw) { return raw >= DT_F32 && raw <= DT_I64; }

DType dtype_from_raw(int32_t raw, const char* arg_name) {
  if (!dtype_valid(raw))
    invalid(std::string(arg_name) + ": unknown dtype " + std::to_string(raw) +
            "; accepted: DT_F32 (1), DT_BF16 (2), DT_F16 (3), DT_I32 (4), DT_I64 (5)");
  return static_cast<DType>(raw);
}

uint16_t f32_to_f16_bits(float f) {
  uint32_t u = f32_bits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((abs >> 13) & 0x3ffu);  // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: overflow to Inf
  if (abs >= 0x38800000u) {                        // normal half (>= 2^-14)
    uint32_t rounded = abs + 0x0fffu + ((abs >> 13) & 1u);
    return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
  }
  if (abs < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25): zero
  // Subnormal half: value = m * 2^-24, m = round(abs_value * 2^24), ties to even.
  uint32_t exp = abs >> 23;
  uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126 - exp;  // 2^(exp-127) * mant/2^23 * 2^24 = mant >> (126 - exp)
  uint32_t half_ulp = 1u << (shift - 1);
  uint32_t m = mant >> shift;
  uint32_t rest = mant & ((1u << shift) - 1u);
  if (rest > half_ulp || (rest == half_ulp && (m & 1u))) ++m;
  return sign | static_cast<uint16_t>(m);
}

float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return bits_f32(sign);
  float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24, exact
  return sign ? -v : v;
}

}  // namespace dt
