#include "nn/rope.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#ifdef DTRAIN_HAVE_CUDA
#include "kernels/cuda/cuda_ops.h"
#endif

namespace dt::nn {

const char* rope_scaling_name(RopeScalingKind k) {
  switch (k) {
    case RopeScalingKind::Linear: return "linear";
    case RopeScalingKind::Llama3: return "llama3";
    default: return "none";
  }
}

double RopeSpec::inv_freq(int64_t i, int64_t D) const {
  const double f = std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / static_cast<double>(D));
  const RopeScaling& s = scaling;
  if (s.kind == RopeScalingKind::Linear) return f / s.factor;
  if (s.kind != RopeScalingKind::Llama3) return f;
  // Wavelengths longer than the original context / low_freq_factor are slowed by factor,
  // shorter than it / high_freq_factor kept, and blended linearly in between.
  const double pi = 3.14159265358979323846, old_ctx = static_cast<double>(s.original_context);
  const double wavelen = 2.0 * pi / f, low_wavelen = old_ctx / s.low_freq_factor,
               high_wavelen = old_ctx / s.high_freq_factor;
  if (wavelen > low_wavelen) return f / s.factor;
  if (wavelen < high_wavelen) return f;
  const double smooth = (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * f / s.factor + smooth * f;
}

// sign = +1 rotates forward, -1 backward.
static void rotate(Tensor& x, const RopeSpec& rope, const int64_t* positions, int64_t pos0, double sign) {
  DT_CHECK(is_floating(x.dtype()) && x.ndim() == 4, std::string("rope: x must be f32, bf16 or f16 [B, T, H, D], got ") +
                                                       dtype_name(x.dtype()) + " " + shape_str(x.shape()));
  const int64_t B = x.dim(0), T = x.dim(1), H = x.dim(2), D = x.dim(3), half = D / 2;
  DT_CHECK(D % 2 == 0, "rope: head dim " + std::to_string(D) + " must be even");
  // One table of cos/sin per (t, i), computed in double so every caller gets the same bits.
  std::vector<float> cs(static_cast<size_t>(T * half)), sn(cs.size());
  std::vector<double> freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) freq[static_cast<size_t>(i)] = rope.inv_freq(i, D);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      double angle = static_cast<double>(positions ? positions[t] : pos0 + t) * freq[static_cast<size_t>(i)];
      cs[t * half + i] = static_cast<float>(std::cos(angle));
      sn[t * half + i] = static_cast<float>(sign * std::sin(angle));
    }
#ifdef DTRAIN_HAVE_CUDA
  if (x.device().type == DeviceType::CUDA) return kernels::cuda::rope_rotate(x, cs.data(), sn.data());
#endif
  DT_CHECK(x.device().type == DeviceType::CPU, "rope: x is on " + x.device().str() + "; this build has no CUDA");
  // Loaded to f32, rotated, rounded once on the store (for f32 the loads and stores are
  // identities, so the f32 path is the plain loop).
  dispatch_float(x.dtype(), [&](auto tag) {
    using Elem = decltype(tag);
    Elem* p = x.data<Elem>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
          Elem* v = p + ((b * T + t) * H + h) * D;
          for (int64_t i = 0; i < half; ++i) {
            float c = cs[t * half + i], s = sn[t * half + i], x0 = to_f32(v[i]), x1 = to_f32(v[i + half]);
            v[i] = from_f32<Elem>(x0 * c - x1 * s);
            v[i + half] = from_f32<Elem>(x0 * s + x1 * c);
          }
        }
  });
}

void rope_forward(Tensor& x, const RopeSpec& rope, int64_t pos0) { rotate(x, rope, nullptr, pos0, 1.0); }
void rope_backward(Tensor& dx, const RopeSpec& rope, int64_t pos0) { rotate(dx, rope, nullptr, pos0, -1.0); }

static const int64_t* checked(const Tensor& x, const std::vector<int64_t>& positions) {
  DT_CHECK(x.ndim() == 4 && static_cast<int64_t>(positions.size()) == x.dim(1),
           "rope: " + std::to_string(positions.size()) + " positions for x of shape " + shape_str(x.shape()) +
               "; required: one per row t of [B, T, H, D]");
  return positions.data();
}
void rope_forward(Tensor& x, const RopeSpec& rope, const std::vector<int64_t>& positions) {
  rotate(x, rope, checked(x, positions), 0, 1.0);
}
void rope_backward(Tensor& dx, const RopeSpec& rope, const std::vector<int64_t>& positions) {
  rotate(dx, rope, checked(dx, positions), 0, -1.0);
}

}  // namespace dt::nn
