#include "nn/mlp_model.h"

#include "core/error.h"
#include "kernels/ops.h"

namespace dt::nn {

static MLPConfig checked(const MLPConfig& c) {
  validate(c);
  return c;
}

MLPModel::MLPModel(const MLPConfig& cfg) : cfg_(checked(cfg)) {
  for (size_t i = 0; i + 1 < cfg_.sizes.size(); ++i)
    layers_.push_back(std::make_unique<Linear>("layers." + std::to_string(i), cfg_.sizes[i], cfg_.sizes[i + 1],
                                               /*bias=*/true, cfg_.seed, cfg_.init_std));
}

void MLPModel::collect(ParamList& list) {
  for (auto& l : layers_) l->collect(list);
}

const Tensor& MLPModel::forward(const Tensor& x, Acts& a) {
  DT_CHECK(x.ndim() == 2 && x.dim(1) == cfg_.sizes.front(),
           "x: expected [N, " + std::to_string(cfg_.sizes.front()) + "], got " + shape_str(x.shape()));
  const size_t L = layers_.size();
  a.z.resize(L);
  a.h.resize(L);
  a.h[0] = x;
  for (size_t i = 0; i < L; ++i) {
    layers_[i]->forward(a.h[i], a.z[i]);
    if (i + 1 == L) break;
    Tensor& h = ensure(a.h[i + 1], a.z[i].shape());
    if (cfg_.act == MLPAct::GELU)
      kernels::gelu_forward(a.z[i], h);
    else
      kernels::silu_forward(a.z[i], h);
  }
  return a.z.back();
}

void MLPModel::backward(const Tensor& dy, Acts& a, Tensor* dx) {
  // dz holds d z[i]; dh receives d h[i] and becomes the next dz.
  Tensor dz = dy;
  for (size_t i = layers_.size(); i-- > 0;) {
    if (i == 0) {
      Tensor none;
      if (dx) ensure(*dx, a.h[0].shape());
      layers_[0]->backward(a.h[0], dz, dx ? *dx : none);
      break;
    }
    Tensor& dh = ensure(a.dh, a.h[i].shape());
    layers_[i]->backward(a.h[i], dz, dh);
    Tensor& dzi = ensure(a.dz, a.z[i - 1].shape());
    if (cfg_.act == MLPAct::GELU)
      kernels::gelu_backward(a.z[i - 1], dh, dzi);
    else
      kernels::silu_backward(a.z[i - 1], dh, dzi);
    dz = dzi;
  }
}

}  // namespace dt::nn
