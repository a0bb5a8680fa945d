#include "engine/plan.h"

#include <algorithm>

#include "core/error.h"
#include "engine/trainer.h"
#include "nn/ring_attention.h"
#include "parallel/pipeline_schedule.h"

namespace dt::engine {
namespace {

// Bytes per parameter: weights and gradients in the model dtype, the optimizer's state
// (AdamW's two f32 moments, plus an f32 master for 16-bit weights: the paper's K = 12).
struct Bytes {
  double w, g, k;
};
Bytes bytes_of(DType d) { return d == DType::F32 ? Bytes{4, 4, 8} : Bytes{2, 2, 12}; }

}  // namespace

ZeroPasses zero_passes(int stage, int64_t micro_batches) {
  const double M = static_cast<double>(micro_batches);
  return {stage >= 2 ? M : 1.0, stage == 3 ? 2.0 * M : 1.0};
}

namespace {

// The gradient traffic of one rank per step at ZeRO stage `stage`, in ring wire bytes, by the
// mesh group it crosses (named as parallel/axis_strategies.cc names them): what dtrain train
// --report measures on each. held: the parameters the rank holds; experts: those of them that
// are its experts (0 without ep). M: micro-batches per step.
//   - DDP all-reduces once per step: 2 (n-1)/n of the gradients.
//   - ZeRO reduce-scatters and all-gathers (n-1)/n each: stage 1 once per step; stage 2
//     reduce-scatters every micro-batch (it keeps only its shard); stage 3 also gathers the
//     weights for every micro-batch's forward and backward, 3 M in all.
//   - Under ep the experts' gradients are summed over dp only, the rest over dp x ep: DDP's
//     buckets on each group; with ZeRO the shared ones first all-reduced over ep (when ZeRO
//     takes them: once, or every micro-batch at stage 2 and 3), then ZeRO over dp.
//   - Otherwise over dp x cp (cp ranks hold the same parameters, each its own tokens).
nlohmann::json grad_wire_by_axis(int stage, double held, double experts, const PlanOptions& o, const Bytes& b) {
  auto ring = [](double n) { return n > 1 ? (n - 1) / n : 0.0; };
  auto all_reduce = [&](double psi, double n) { return 2.0 * ring(n) * psi * b.g; };
  const ZeroPasses z = zero_passes(std::max(stage, 1), o.accumulation);
  auto zero = [&](double psi, double n) { return (z.scatters + z.gathers) * ring(n) * psi * b.g; };
  nlohmann::json out = nlohmann::json::object();
  auto add = [&out](const std::string& axis, double bytes) {
    if (bytes > 0) out[axis] = out.value(axis, 0.0) + bytes;
  };
  const double dp = static_cast<double>(o.dp), ep = static_cast<double>(o.ep);
  if (o.ep > 1) {
    const double shared = held - experts;
    if (stage == 0) {
      add(o.dp > 1 ? "dp*ep" : "ep", all_reduce(shared, dp * ep));
      add("dp", all_reduce(experts, dp));
    } else {
      add("ep", z.scatters * all_reduce(shared, ep));  // as often as ZeRO reduces
      add("dp", zero(held, dp));
    }
    return out;
  }
  const double n = static_cast<double>(o.dp * o.cp);
  add(o.cp == 1 ? "dp" : o.dp == 1 ? "cp" : "dp*cp", stage == 0 ? all_reduce(held, n) : zero(held, n));
  return out;
}

// The ranks ZeRO shards a rank's state over: dp x cp (cp ranks hold the same parameters);
// under ep, dp (each ep rank holds its own experts).
int64_t zero_ranks(const PlanOptions& o) { return o.ep > 1 ? o.dp : o.dp * o.cp; }

// The paper's per-rank model states at each stage over the `held` parameters, sharded over
// zero_ranks, and each stage's gradient traffic.
nlohmann::json stages(double held, double experts, const PlanOptions& o, const Bytes& b) {
  const double n = static_cast<double>(zero_ranks(o));
  nlohmann::json out = nlohmann::json::array();
  const char* name[4] = {"DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"};
  for (int s = 0; s <= 3; ++s) {
    const double w = s >= 3 ? b.w * held / n : b.w * held, g = s >= 2 ? b.g * held / n : b.g * held,
                 k = s >= 1 ? b.k * held / n : b.k * held;
    const nlohmann::json by_axis = grad_wire_by_axis(s, held, experts, o, b);
    double wire = 0;
    for (const auto& [axis, bytes] : by_axis.items()) wire += bytes.get<double>();
    out.push_back({{"stage", s},
                   {"name", name[s]},
                   {"weights_bytes", w},
                   {"grads_bytes", g},
                   {"optimizer_bytes", k},
                   {"total_bytes", w + g + k},
                   {"dp_wire_bytes_per_step", wire},  // every group's below, summed
                   {"grad_wire_bytes_per_step_by_axis", by_axis}});
  }
  return out;
}

// One block's routed experts' parameters, all E of them (each an MLP of the dense block's
// shape, whole on every tp rank); under ep a rank holds 1 / ep of them.
double block_expert_params(const nn::GPTConfig& c) {
  if (!c.moe()) return 0.0;
  const double C = static_cast<double>(c.d_model), F = static_cast<double>(c.d_ff);
  const double mlp = C * (c.act == nn::Act::SwiGLU ? 2.0 : 1.0) * F + F * C +
                     (c.bias ? (c.act == nn::Act::SwiGLU ? 2.0 : 1.0) * F + C : 0.0);
  return static_cast<double>(c.n_experts) * mlp;
}

// The parameters one tp rank holds in each part of the model, taken apart from the one
// formula (GPTConfig::param_count) by changing one field at a time, so no count is written
// twice: a block (one layer more), the token table (untying adds the head's copy of it),
// the learned positions (RoPE has none) and, what is left, the final norm.
struct PartParams {
  double block = 0, table = 0, positions = 0, final_norm = 0;
};
PartParams part_params(const nn::GPTConfig& c, int64_t tp, int64_t ep) {
  auto count = [tp](nn::GPTConfig x) { return static_cast<double>(x.param_count(tp, nullptr)); };
  nn::GPTConfig one = c, two = c, tied = c, untied = c, rope = c;
  one.n_layer = 1;
  two.n_layer = 2;
  tied.tied_embeddings = true;
  untied.tied_embeddings = false;
  rope.pos = nn::PosKind::RoPE;
  PartParams p;
  p.block = count(two) - count(one);
  p.table = count(untied) - count(tied);
  p.positions = count(c) - count(rope);
  p.final_norm = count(c) - static_cast<double>(c.n_layer) * p.block - p.table * (c.tied_embeddings ? 1 : 2) -
                 p.positions;
  p.block -= block_expert_params(c) * static_cast<double>(ep - 1) / static_cast<double>(ep);  // other ep ranks' experts
  return p;
}

// One micro-batch's activations that a block keeps for its backward on one tp rank, in
// bytes (R tokens, C = d_model, e = dtype bytes, N = tp, kv = this rank's KV heads x
// head_dim; SP divides what lives on the token rows by N). From the tensors its Acts hold:
//   the norm regions (the "activations" entry: stream in, residual midpoint, the two norms'
//     outputs, 4 R C e, and their f32 statistics, 16 R), / N under SP;
//   attention: q and its output R C e / N each, k and v R kv e each, the f32 log-sum-exp
//     4 R n_head / N (flash style: no T x T scores);
//   the attention's and the MLP's projections' outputs, 2 R C e, / N under SP;
//   the MLP's hidden activations: GELU its input and output, 2 R d_ff e / N; SwiGLU the
//     gate, the up projection and their product, 3 R d_ff e / N.
// Backward scratch and the head's logits (one micro-batch at a time) are not counted.
double block_activation_bytes(const nn::GPTConfig& c, int64_t R, int64_t N, bool sp, double e) {
  const double r = static_cast<double>(R), n = static_cast<double>(N), C = static_cast<double>(c.d_model),
               rows = sp ? n : 1.0;
  const double kv = static_cast<double>((c.n_kv_head % N == 0 ? c.n_kv_head / N : 1) * c.head_dim());
  const double region = (4.0 * r * C * e + 16.0 * r) / rows;
  const double attention = 2.0 * r * C * e / n + 2.0 * r * kv * e + 4.0 * r * static_cast<double>(c.n_head) / n;
  const double projections = 2.0 * r * C * e / rows;
  const double mlp = (c.act == nn::Act::SwiGLU ? 3.0 : 2.0) * r * static_cast<double>(c.d_ff) * e / n;
  return region + attention + projections + mlp;
}

// What one pp rank holds: its chunks' blocks, the embedding on rank 0, the final norm and
// head on the last; with tied embeddings the last rank's head reads a copy of the token
// table, outside its parameters (GPT::tied_copy): weights and a gradient, never optimizer
// state or a ZeRO shard, so it is counted apart.
nlohmann::json pipeline_stage(const nn::GPTConfig& c, const std::vector<int>& bounds, int r, int P, int v,
                              const PartParams& parts, const Bytes& b, const PlanOptions& o) {
  nlohmann::json chunks = nlohmann::json::array();
  int blocks = 0;
  for (int k = 0; k < v; ++k) {
    const size_t vs = static_cast<size_t>(k * P + r);
    chunks.push_back({bounds[vs], bounds[vs + 1]});
    blocks += bounds[vs + 1] - bounds[vs];
  }
  const bool first = r == 0, last = r == P - 1;
  const double params = blocks * parts.block + (first ? parts.table + parts.positions : 0.0) +
                        (last ? parts.final_norm + (c.tied_embeddings ? 0.0 : parts.table) : 0.0);
  const double copy = last && c.tied_embeddings ? parts.table : 0.0;
  return {{"rank", r},
          {"chunks", chunks},
          {"blocks", blocks},
          {"embedding", first},
          {"head", last},
          {"params", params},
          {"tied_copy_params", copy},
          {"tied_copy_bytes", copy * (b.w + b.g)},
          {"stages", stages(params, blocks * block_expert_params(c) / static_cast<double>(o.ep), o, b)}};
}


// The pipeline entry of the plan (see plan.h): placement, per-stage memory, the schedule's
// bubble and activation peaks by formula and simulated, the pp traffic and the timeline.
nlohmann::json pipeline_plan(const nn::GPTConfig& c, const PlanOptions& o, const Bytes& b, int64_t R, bool sp) {
  const int P = static_cast<int>(o.pp), M = static_cast<int>(o.accumulation), v = o.virtual_stages;
  const std::vector<int> bounds = parallel::pipeline_boundaries(c, P, v, o.pp_blocks);
  const parallel::PipeSchedule s = parallel::make_pipe_schedule(o.pp_schedule, P, M, v);
  const parallel::PipeSimulation sim = parallel::simulate(s);
  const PartParams parts = part_params(c, o.tp, o.ep);
  const double block_act = block_activation_bytes(c, R, o.tp, sp, b.w);
  // A stream message (one micro-batch's activations into a block boundary, or their
  // gradient back): R x d_model x dtype bytes, this tp rank's token rows under SP.
  const double msg = static_cast<double>(R) * static_cast<double>(c.d_model) * b.w / (sp ? static_cast<double>(o.tp) : 1.0);
  nlohmann::json ranks = nlohmann::json::array();
  std::vector<double> sends(static_cast<size_t>(P), 0.0);
  for (int r = 0; r < P; ++r) {
    nlohmann::json st = pipeline_stage(c, bounds, r, P, v, parts, b, o);
    const int peak = sim.activation_peak[static_cast<size_t>(r)];
    // The simulator counts live (micro-batch, chunk) pairs; a chunk holds 1/v of the rank's
    // blocks (its mean: chunks may differ by a block), each block_act per micro-batch.
    const double per_micro = st["blocks"].get<double>() / v * block_act;
    st["activation_peak"] = peak;
    st["activation_bytes_per_micro_batch_chunk"] = per_micro;
    st["activation_bytes"] = peak * per_micro;
    ranks.push_back(st);
    // Rank r sends each micro-batch's activations out of every chunk but the last virtual
    // stage's, and its input gradient out of every chunk but virtual stage 0's.
    for (int k = 0; k < v; ++k) {
      const int vs = k * P + r;
      sends[static_cast<size_t>(r)] += M * msg * ((vs < P * v - 1 ? 1 : 0) + (vs > 0 ? 1 : 0));
    }
  }
  // Tied embeddings: once per step the first stage sends the table's values to the last,
  // and the last sends its copy's gradient back (every micro-batch under ZeRO-2).
  const double tied = c.tied_embeddings ? parts.table : 0.0;
  sends[0] += tied * b.w;
  sends[static_cast<size_t>(P - 1)] += tied * b.g;
  // Per step, every virtual-stage boundary (P v - 1 of them: with v > 1 the stream also
  // comes back from the last rank to the first between chunks) carries M activations
  // forward and M gradients back.
  const int boundaries = P * v - 1;
  nlohmann::json j = {{"schedule", o.pp_schedule},
                      {"P", P},
                      {"M", M},
                      {"v", v},
                      {"placement", o.pp_blocks.empty() ? "balanced" : "pp_blocks"},
                      {"boundaries", bounds},
                      {"head_cost_blocks", parallel::head_cost_blocks(c)},
                      {"block_activation_bytes_per_micro_batch", block_act},
                      {"stages", ranks},
                      {"bubble_formula", parallel::bubble_formula(o.pp_schedule, P, M, v)},
                      {"bubble_formula_text", parallel::bubble_formula_text(o.pp_schedule, P, M, v)},
                      {"bubble_fraction", sim.bubble_fraction},
                      {"makespan_units", sim.makespan},
                      {"activation_peak", sim.activation_peak},
                      {"activation_peak_formula", parallel::activation_peak_formula(o.pp_schedule, P, M, v)},
                      {"pp_message_bytes", msg},
                      {"pp_boundaries", boundaries},
                      {"pp_wire_bytes_per_boundary", 2.0 * M * msg},
                      {"pp_wire_bytes_per_step", boundaries * 2.0 * M * msg},
                      {"tied_table_wire_bytes_per_step", tied * (b.w + b.g)},
                      {"pp_send_bytes_per_step", sends},
                      {"timeline", o.timeline ? parallel::timeline_ascii(s, sim) : std::string()}};
  if (o.timeline_trace) j["chrome_trace"] = parallel::timeline_chrome_trace(s, sim);
  return j;
}

}  // namespace

// Context parallelism: each rank holds T / cp tokens of every sequence, so a block keeps
// 1 / cp of its activations; its attention sends the K/V of its tokens (f32, this tp rank's
// KV heads) round the ring: cp - 1 times forward, and in backward again with their
// gradients (nn/ring_attention.h).
static nlohmann::json context_plan(const nn::GPTConfig& c, const PlanOptions& o, int64_t T, bool sp, double w) {
  const int64_t P = o.cp, Tl = T / P, hkv = o.tp > c.n_kv_head ? 1 : c.n_kv_head / o.tp;
  const double kv = static_cast<double>(nn::ring_bytes_forward(static_cast<int>(P), o.micro_batch, Tl, hkv, c.head_dim()));
  const double micro = static_cast<double>(c.n_layer) * 3.0 * kv;
  return {{"cp", P},
          {"layers", c.n_layer},
          {"chunk_tokens", T / (2 * P)},
          {"tokens_per_rank", Tl},
          {"ring_bytes_per_layer_forward", kv},
          {"ring_bytes_per_micro_batch", micro},
          {"ring_bytes_per_step", micro * static_cast<double>(o.accumulation)},
          {"block_activation_bytes_per_rank", block_activation_bytes(c, o.micro_batch * Tl, o.tp, sp, w)},
          {"block_activation_bytes_at_cp_1", block_activation_bytes(c, o.micro_batch * T, o.tp, sp, w)}};
}

nlohmann::json plan_json(const nn::GPTConfig& raw, const PlanOptions& o) {
  nn::validate(raw);
  const nn::GPTConfig c = raw.resolved();
  DT_CHECK(o.dp >= 1 && o.tp >= 1, "dp and tp: accepted >= 1");
  DT_CHECK(o.micro_batch >= 1 && o.accumulation >= 1, "micro_batch and accumulation: accepted >= 1");
  DT_CHECK(o.pp >= 1 && o.pp <= 1024, "pp = " + std::to_string(o.pp) + "; accepted: 1 to 1024");
  DT_CHECK(!raw.moe() || o.tp == 1 || o.sequence_parallel,
           "tp = " + std::to_string(o.tp) + " with " + std::to_string(raw.n_experts) +
               " experts needs sequence parallelism (each tp rank routes its own token rows); accepted: tp = 1, or "
               "sequence_parallel");
  DT_CHECK(o.ep >= 1 && (o.ep == 1 || raw.moe()), "ep = " + std::to_string(o.ep) +
                                                      ": expert parallelism needs a mixture of experts; accepted: ep = 1 "
                                                      "for a dense model, or experts > 0");
  DT_CHECK(!raw.moe() || raw.n_experts % o.ep == 0, "n_experts = " + std::to_string(raw.n_experts) +
                                                        " does not divide over ep = " + std::to_string(o.ep) +
                                                        "; accepted: experts divisible by ep");
  if (o.pp > 1) {  // the engine's own checks of these options, with its messages
    ParallelOptions p;
    p.pp_schedule = o.pp_schedule;
    p.virtual_stages = o.virtual_stages;
    p.check();
    // The simulator runs every (micro-batch, chunk, stage) action: bound them.
    parallel::check_simulation_size(o.pp, o.accumulation, o.virtual_stages, "pp", "accumulation", "virtual_stages");
  }
  const int64_t T = o.seq_len > 0 ? o.seq_len : c.context, N = o.tp, L = c.n_layer;
  DT_CHECK(T <= c.context, "seq_len = " + std::to_string(T) + " exceeds context = " + std::to_string(c.context));
  DT_CHECK(o.cp >= 1 && o.cp <= 1024, "cp = " + std::to_string(o.cp) + "; accepted: 1 to 1024");
  DT_CHECK(o.cp == 1 || T % (2 * o.cp) == 0, "seq_len = " + std::to_string(T) + " does not split into 2 x cp = " +
                                                 std::to_string(2 * o.cp) + " equal chunks; accepted: a multiple of " +
                                                 std::to_string(2 * o.cp));
  DT_CHECK(o.cp == 1 || !raw.moe(), "cp = " + std::to_string(o.cp) + " with a mixture of experts: not built yet; "
                                    "accepted: cp = 1 with experts");
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
  // What one rank holds: its tp share, less the experts of the other ep ranks.
  const double experts_held = static_cast<double>(L) * block_expert_params(c) / static_cast<double>(o.ep);
  const double held = static_cast<double>(psi_tp) - experts_held * static_cast<double>(o.ep - 1);
  nlohmann::json j = {{"params", psi},
                      {"params_per_tp_rank", psi_tp},
                      {"params_per_rank", held},
                      {"replicated_over_tp", replicated},
                      {"dp", o.dp},
                      {"tp", N},
                      {"zero_ranks", zero_ranks(o)},
                      {"sequence_parallel", sp},
                      {"bytes_per_param", {{"weights", b.w}, {"grads", b.g}, {"optimizer", b.k}}},
                      {"stages", stages(held, experts_held, o, b)},
                      {"effective_batch", o.micro_batch * o.dp * o.ep * o.accumulation}};  // ep ranks route their own rows
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
  // SP: backward gathers each region's input again. A mixture of experts' region has none:
  // each tp rank routes its own rows through whole experts, whose gradients (and the
  // router's and a shared expert's) are partial over tp, summed once per step.
  const double block = (c.moe() ? 0.5 : 1.0) * (sp ? 5.0 : 4.0) * ring + kv;
  const double moe_block_params =
      c.moe() ? block_expert_params(c) / static_cast<double>(o.ep) + static_cast<double>(c.n_experts * c.d_model) +
                    static_cast<double>(c.shared_expert_params())
              : 0.0;
  const double moe_grads = N > 1 ? 2.0 * (n - 1) / n * moe_block_params * b.g : 0.0;  // per block, per step
  const double per_micro = N > 1 ? static_cast<double>(L) * block + 2.0 * ring + loss : 0.0;
  const double norm_pair = N > 1 ? 2.0 * (n - 1) / n * 8.0 : 0.0;
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
      {"wire_bytes_per_step", per_micro * static_cast<double>(o.accumulation) + norm_grads + norm_pair +
                                  static_cast<double>(L) * moe_grads}};
  // The norm regions per block and rank: the stream in, the residual midpoint, the two norms'
  // outputs (4 S), and the norms' f32 statistics; SP keeps this rank's tokens only.
  const double region = 4.0 * S + 4.0 * static_cast<double>(R) * 4.0;
  j["activations"] = {{"norm_region_bytes_per_block", sp ? region / n : region},
                      {"norm_region_bytes_per_block_without_sp", region},
                      {"block_bytes_per_micro_batch", block_activation_bytes(c, R, N, sp, b.w)}};
  if (o.cp > 1) j["cp"] = context_plan(c, o, T, sp, b.w);
  if (c.moe()) {
    // The experts: ep ranks hold E / ep of each block's; a uniform router sends each rank's
    // R k choices evenly, (ep - 1) / ep of them to other ranks, four times (dispatch and
    // combine, forward and backward), after the counts (E / ep integers to each other rank).
    // Under SP a tp rank routes its R / tp rows; the experts are whole on every tp rank.
    const double E = static_cast<double>(c.n_experts), P = static_cast<double>(o.ep), k = static_cast<double>(c.top_k);
    const double experts = static_cast<double>(L) * block_expert_params(c);
    const double a2a = P > 1 ? static_cast<double>(L) * ((P - 1) * (E / P) * 8.0 +
                                                         4.0 * static_cast<double>(sp ? R / N : R) * k * (P - 1) / P *
                                                             static_cast<double>(c.d_model) * b.w)
                             : 0.0;
    j["moe"] = {{"experts", c.n_experts},
                {"top_k", c.top_k},
                {"ep", o.ep},
                {"experts_per_rank", c.n_experts / o.ep},
                {"expert_params", experts},
                {"shared_expert_params", static_cast<double>(L * c.shared_expert_params())},  // whole on every rank
                {"params_per_rank", held},
                // One block's mixture on a rank: its experts, the router, a shared expert.
                {"block_params_per_rank", moe_block_params},
                {"all_to_all_bytes_per_micro_batch", a2a},
                {"all_to_all_bytes_per_step", a2a * static_cast<double>(o.accumulation)}};
  }
  if (o.pp > 1) {
    nlohmann::json p = pipeline_plan(c, o, b, R, sp);
    // tp within a pipeline stage: its blocks' collectives, the embedding's on the first
    // stage, the head's and the loss's on the last; once per step SP's gradients of its
    // norms (two per block, and the final norm on the last) and the gradient norm's pair.
    for (nlohmann::json& st : p["stages"]) {
      const bool first = st["embedding"].get<bool>(), last = st["head"].get<bool>();
      const double blocks = st["blocks"].get<double>();
      const double micro = N > 1 ? blocks * block + (first ? ring : 0.0) + (last ? ring + loss : 0.0) : 0.0;
      const double norms = sp ? 2.0 * (n - 1) / n * (2.0 * blocks + (last ? 1.0 : 0.0)) * norm_params * b.g : 0.0;
      st["tp_wire_bytes_per_step"] = micro * static_cast<double>(o.accumulation) + norms + norm_pair + blocks * moe_grads;
    }
    j["pipeline"] = p;
  }
  j["pp"] = o.pp;
  return j;
}

}  // namespace dt::engine
