// What the data- and tensor-parallel equivalence tests share (DDP, ZeRO, TP, in process and
// under mpirun): the small GPT they train, its optimizer settings, and how runs are compared.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/trainer.h"
#include "unit/test_util.h"

namespace dt::test {

// 2 blocks of width 32 over a 32-token vocabulary. Its ZeRO units divide by 2 and 4
// (non-block parameters 1600 elements, each block 12704), so nothing is padded.
inline nn::GPTConfig dp_tiny_gpt(DType dtype, uint64_t seed = 5) {
  nn::GPTConfig c;
  c.vocab_size = 32;
  c.context = 16;
  c.n_layer = 2;
  c.d_model = 32;
  c.n_head = 2;
  c.dtype = dtype;
  c.seed = seed;
  return c;
}

// The same with 4 heads, so that they split over tp 2 and 4; llama: RMSNorm, SwiGLU, RoPE
// and GQA with 2 KV heads (which split over tp 2).
inline nn::GPTConfig tp_tiny_gpt(bool llama, DType dtype) {
  nn::GPTConfig c = dp_tiny_gpt(dtype);
  if (llama) c = c.llama_style();
  c.n_head = 4;
  c.n_kv_head = llama ? 2 : 0;
  return c;
}

// Clipping on and a warmup-cosine schedule, so both are part of what must match.
inline engine::TrainOptions dp_options(int64_t micro) {
  engine::TrainOptions o;
  o.micro_batches = micro;
  o.max_grad_norm = 1.0;
  o.schedule = optim::LrSchedule::warmup_cosine(3e-3f, 2, 10, 0.1f);
  return o;
}

inline optim::AdamWOptions dp_adamw() { return optim::AdamWOptions{3e-3f, 0.9f, 0.95f, 1e-8f, 0.01f}; }

inline std::vector<std::vector<double>> values_of(nn::GPT& m) {
  std::vector<std::vector<double>> out;
  for (nn::Parameter* q : m.parameters()) out.push_back(to_f64(q->value));
  return out;
}

// ||a - b|| / ||b|| over every parameter element.
inline double rel_dist(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t k = 0; k < a[i].size(); ++k) d += (a[i][k] - b[i][k]) * (a[i][k] - b[i][k]), n += b[i][k] * b[i][k];
  return std::sqrt(d / n);
}

// The largest |got - ref| / |ref| over the steps' losses.
inline double worst_rel_loss(const std::vector<double>& got, const std::vector<double>& ref) {
  double worst = 0;
  for (size_t s = 0; s < ref.size(); ++s) worst = std::max(worst, std::abs(got[s] - ref[s]) / std::abs(ref[s]));
  return worst;
}

// One layout's run of a Trainer, to compare with another layout's: each step's loss and
// gradient norm, and the final parameters (gathered into the host model).
struct TrainRun {
  std::vector<double> losses, norms;
  std::vector<std::vector<double>> params;
};

// Trains a fresh model of c (AdamW, dp_adamw) over mesh (null: one rank) for `steps` steps
// of batch(step); on_step, if given, sees each step's statistics and the trainer; init, if
// given, sets the model's weights first (an imported checkpoint, say).
inline TrainRun train_layout(std::shared_ptr<comm::Mesh> mesh, const nn::GPTConfig& c, const engine::TrainOptions& o,
                             const engine::ParallelOptions& par, int steps, const std::function<TokenBatch(int)>& batch,
                             const std::function<void(const engine::StepStats&, engine::Trainer&)>& on_step = {},
                             const std::function<void(nn::GPT&)>& init = {}) {
  nn::GPT model(c);
  if (init) init(model);
  optim::AdamW opt(model.parameters(), dp_adamw());
  engine::Trainer t(std::move(mesh), model, opt, o, par);
  TrainRun r;
  for (int s = 0; s < steps; ++s) {
    const TokenBatch b = batch(s);
    const engine::StepStats st = t.train_step(b.in, b.tg);
    r.losses.push_back(st.loss);
    r.norms.push_back(st.grad_norm);
    if (on_step) on_step(st, t);
  }
  t.gather_model();
  r.params = values_of(model);
  return r;
}

// got against ref: every step's loss and the parameters within tol (relative), the gradient
// norms within norm_tol; prints the figures under `what`.
inline void expect_run_close(const TrainRun& got, const TrainRun& ref, double tol, double norm_tol,
                             const std::string& what) {
  EXPECT_LT(worst_rel_loss(got.losses, ref.losses), tol) << what;
  EXPECT_LT(worst_rel_loss(got.norms, ref.norms), norm_tol) << what << " (gradient norms)";
  const double d = rel_dist(got.params, ref.params);
  EXPECT_LT(d, tol) << what << " (parameters)";
  std::printf("%s: worst loss %.2e, parameters %.2e\n", what.c_str(), worst_rel_loss(got.losses, ref.losses), d);
}

}  // namespace dt::test
