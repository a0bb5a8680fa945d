#include "engine/plan.h"

#include "core/error.h"

namespace dt::engine {
namespace {

// Bytes per parameter: weights and gradients in the model dtype, the optimizer's state
// (AdamW's two f32 moments, plus an f32 master for 16-bit weights: the paper's K = 12).
struct Bytes {
  double w, g, k;
};
Bytes bytes_of(DType d) { return d == DType::F32 ? Bytes{4, 4, 8} : Bytes{2, 2, 12}; }

nlohmann::json stages(double psi, double n, const Bytes& b) {
  nlohmann::json out = nlohmann::json::array();
  const char* name[4] = {"DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"};
  for (int s = 0; s <= 3; ++s) {
    const double w = s >= 3 ? b.w * psi / n : b.w * psi, g = s >= 2 ? b.g * psi / n : b.g * psi,
                 k = s >= 1 ? b.k * psi / n : b.k * psi;
    // Per step on dp: the gradient all-reduce (or reduce-scatter + all-gather) 2 psi, and
    // ZeRO-3's second gather of the weights for backward 3 psi; ring wire bytes.
    const double wire = (s == 3 ? 3.0 : 2.0) * psi * b.g * (n - 1) / n;
    out.push_back({{"stage", s},          {"name", name[s]},        {"weights_bytes", w},
                   {"grads_bytes", g},    {"optimizer_bytes", k},   {"total_bytes", w + g + k},
                   {"dp_wire_bytes_per_step", wire}});
  }
  return out;
}

}  // namespace

nlohmann::json plan_json(const nn::GPTConfig& raw, const PlanOptions& o) {
  nn::validate(raw);
  const nn::GPTConfig c = raw.resolved();
  DT_CHECK(o.dp >= 1 && o.tp >= 1, "dp and tp: accepted >= 1");
  DT_CHECK(o.micro_batch >= 1 && o.accumulation >= 1, "micro_batch and accumulation: accepted >= 1");
  const int64_t T = o.seq_len > 0 ? o.seq_len : c.context, N = o.tp, L = c.n_layer;
  DT_CHECK(T <= c.context, "seq_len = " + std::to_string(T) + " exceeds context = " + std::to_string(c.context));
  auto divides = [&](const char* what, int64_t n) {
    DT_CHECK(n % N == 0, std::string(what) + " = " + std::to_string(n) + " does not split over tp = " +
                             std::to_string(N) + "; accepted: a tp size that divides " + std::to_string(n));
  };
  divides("n_head", c.n_head);
  divides("d_ff", c.d_ff);
  DT_CHECK(c.n_kv_head % N == 0 || N % c.n_kv_head == 0,
           "n_kv_head = " + std::to_string(c.n_kv_head) + " over tp = " + std::to_string(N) +
               ": neither divides the other; accepted: a tp size that divides it or is a multiple of it");
  const bool sp = o.sequence_parallel && N > 1;
  const int64_t R = o.micro_batch * T;  // tokens of a micro-batch
  if (sp) DT_CHECK(R % N == 0, "sequence parallel: " + std::to_string(R) + " tokens per micro-batch do not split "
                               "over tp = " + std::to_string(N));
  const Bytes b = bytes_of(c.dtype);
  int64_t replicated = 0;
  const int64_t psi = c.param_count(), psi_tp = c.param_count(N, &replicated);
  nlohmann::json j = {{"params", psi},
                      {"params_per_tp_rank", psi_tp},
                      {"replicated_over_tp", replicated},
                      {"dp", o.dp},
                      {"tp", N},
                      {"sequence_parallel", sp},
                      {"bytes_per_param", {{"weights", b.w}, {"grads", b.g}, {"optimizer", b.k}}},
                      {"stages", stages(static_cast<double>(psi_tp), static_cast<double>(o.dp), b)},
                      {"effective_batch", o.micro_batch * o.dp * o.accumulation}};
  // The tp axis per micro-batch, ring wire bytes: S = R x d_model x dtype size.
  const double S = static_cast<double>(R * c.d_model) * b.w, n = static_cast<double>(N);
  const double ring = 2.0 * (n - 1) / n * S;  // one all-reduce of S = an all-gather + a reduce-scatter
  const double loss = 2.0 * (n - 1) / n * 3.0 * static_cast<double>(R) * 4.0;  // f32 [R] and [R, 2]
  const int64_t hd = c.head_dim();
  const double kv = N > c.n_kv_head  // KV heads held by several ranks: their K and V gradients summed
                        ? 2.0 * (n - 1) / n * static_cast<double>(c.n_kv_head * 2 * hd * (c.d_model + (c.bias ? 1 : 0))) * b.g
                        : 0.0;
  const double norm_params = static_cast<double>(c.d_model * (c.norm == nn::NormKind::LayerNorm && c.bias ? 2 : 1));
  const double norm_grads = sp ? 2.0 * (n - 1) / n * (2.0 * static_cast<double>(L) + 1.0) * norm_params * b.g : 0.0;
  const double block = (sp ? 5.0 : 4.0) * ring + kv;  // SP: backward gathers each region's input again
  const double per_micro = N > 1 ? static_cast<double>(L) * block + 2.0 * ring + loss : 0.0;
  j["tp_comm"] = {
      {"block_collectives", sp ? "forward: 2 all-gathers + 2 reduce-scatters of S; backward: 4 all-gathers "
                                 "(2 of them the regions' inputs again) + 2 reduce-scatters"
                               : "forward: 2 all-reduces of S; backward: 2 all-reduces of S"},
      {"S_bytes", S},
      {"wire_bytes_per_block", N > 1 ? block : 0.0},
      {"wire_bytes_embedding_and_head", N > 1 ? 2.0 * ring : 0.0},
      {"wire_bytes_loss", N > 1 ? loss : 0.0},
      {"wire_bytes_per_micro_batch", per_micro},
      // Once per step: SP's norm gradients, and the gradient norm's split part summed over
      // tp (an f32 pair, parallel::exact_sum).
      {"wire_bytes_per_step", per_micro * static_cast<double>(o.accumulation) + norm_grads +
                                  (N > 1 ? 2.0 * (n - 1) / n * 8.0 : 0.0)}};
  // The norm regions per block and rank: the stream in, the residual midpoint, the two norms'
  // outputs (4 S), and the norms' f32 statistics; SP keeps this rank's tokens only.
  const double region = 4.0 * S + 4.0 * static_cast<double>(R) * 4.0;
  j["activations"] = {{"norm_region_bytes_per_block", sp ? region / n : region},
                      {"norm_region_bytes_per_block_without_sp", region}};
  return j;
}

}  // namespace dt::engine
