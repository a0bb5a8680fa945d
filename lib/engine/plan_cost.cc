#include "engine/plan_cost.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/error.h"
#include "engine/plan_block_cost.h"
#include "engine/plan_rates.h"
#include "nn/activation_bytes.h"
#include "parallel/layout.h"
#include "parallel/pipeline_schedule.h"

namespace dt::engine {
namespace {

using blocks::Links;
using blocks::Shapes;
using blocks::Work;
using rates::comm;
using rates::link_of;
using rates::Rates;
using rates::stream;

// DDP's all-reduces of `bytes` of gradients: one per 25 MiB bucket.
double ddp_buckets(double bytes) { return std::ceil(bytes / (25.0 * (1 << 20))); }

// Per rank of a pipeline: the most micro-batches whose activations (one GPTActs each) are
// alive at once, from its first action to its last, as TrainEngine::run_actions keeps them.
std::vector<int> live_micro_batches(const parallel::PipeSchedule& s) {
  std::vector<int> out;
  for (const auto& acts : s.actions) {
    std::map<int, size_t> last;
    for (size_t k = 0; k < acts.size(); ++k) last[acts[k].micro] = k;
    std::set<int> live;
    int peak = 0;
    for (size_t k = 0; k < acts.size(); ++k) {
      live.insert(acts[k].micro);
      peak = std::max(peak, static_cast<int>(live.size()));
      if (last[acts[k].micro] == k) live.erase(acts[k].micro);
    }
    out.push_back(peak);
  }
  return out;
}

}  // namespace

nlohmann::json cost_json(const nn::GPTConfig& raw, const PlanOptions& o, const Cluster& cl, const nlohmann::json* given) {
  cl.check();
  PlanOptions quiet = o;
  quiet.timeline = false;
  const nlohmann::json made = given ? nlohmann::json() : plan_json(raw, quiet);  // validates the layout
  const nlohmann::json& plan = given ? *given : made;
  const nn::GPTConfig c = [&] {
    nn::GPTConfig x = raw.resolved();
    x.checkpoint = o.recompute || raw.checkpoint;  // the plan's key or the model's "recompute"
    return x;
  }();
  DT_CHECK(o.zero >= 0 && o.zero <= 3, "zero = " + std::to_string(o.zero) + "; accepted: 0 to 3");
  DT_CHECK(o.zero < 3 || o.pp == 1, "zero = 3 with pp = " + std::to_string(o.pp) + "; accepted with pp > 1: zero 0 to 2");
  DT_CHECK(!(o.ep > 1 && o.zero > 0 && o.dp == 1), "zero = " + std::to_string(o.zero) + " with ep = " +
                                                      std::to_string(o.ep) + " and dp = 1: ZeRO shards over dp; "
                                                      "accepted with ep > 1: zero 0 (DDP over ep), or dp >= 2");
  const int64_t world = o.dp * o.tp * o.pp * o.ep * o.cp;
  DT_CHECK(cl.cpu || world <= cl.devices(), "dp x tp x pp x ep x cp = " + std::to_string(world) + " ranks on a cluster of " +
                                      std::to_string(cl.devices()) + " devices; accepted: at most that many");
  const bool mixed = c.dtype != DType::F32;
  const double e = static_cast<double>(dtype_size(c.dtype));
  const int64_t T = o.seq_len > 0 ? o.seq_len : c.context, M = o.accumulation, P = o.pp;
  const bool sp = o.sequence_parallel && o.tp > 1;

  // Rates of one rank (ranks of one host beyond its cores share them: the step's total work
  // over the cores, below).
  const Rates r = rates::rank_rates(cl, mixed, world);
  Shapes s;
  static_cast<rates::Widths&>(s) = rates::widths_of(c, o.tp);
  s.B = static_cast<double>(o.micro_batch);
  s.cp = static_cast<double>(o.cp);
  s.Tg = static_cast<double>(T);
  s.T = s.Tg / s.cp;
  s.R = s.B * s.T;
  s.Rl = sp ? s.R / static_cast<double>(o.tp) : s.R;
  if (c.moe()) {
    s.moe = true;
    s.E = static_cast<double>(c.n_experts);
    s.k = static_cast<double>(c.top_k);
    s.ep = static_cast<double>(o.ep);
    s.Fe = static_cast<double>(c.d_ff);
    s.Fs = static_cast<double>(c.moe_shared_d_ff);
    s.rows = nn::expert_rows(c, s.Rl, o.ep, o.expert_load);
  }

  // The stages: blocks, whether they hold the embedding and head, parameters.
  // Each stage's model states at this ZeRO stage are the plan's (plan.cc's one formula).
  struct Stage {
    int blocks = 0;
    bool embed = true, head = true;
    double params = 0, tied_copy = 0, tp_wire = 0;
    nlohmann::json states;
  };
  std::vector<Stage> stages;
  nlohmann::json pipe;
  const double psi_rank = plan["params_per_rank"].get<double>();
  if (P > 1) {
    pipe = plan["pipeline"];
    for (const nlohmann::json& st : pipe["stages"])
      stages.push_back({st["blocks"].get<int>(), st["embedding"].get<bool>(), st["head"].get<bool>(),
                        st["params"].get<double>(), st["tied_copy_params"].get<double>(),
                        st["tp_wire_bytes_per_step"].get<double>(), st["stages"][static_cast<size_t>(o.zero)]});
  } else {
    stages.push_back({static_cast<int>(c.n_layer), true, true, psi_rank, 0.0,
                      plan["tp_comm"]["wire_bytes_per_step"].get<double>(),
                      plan["stages"][static_cast<size_t>(o.zero)]});
  }
  // One block's parameters on a rank, and the embedding-and-head unit's (ZeRO's units); the
  // experts a rank holds (the rest of its parameters are shared over ep).
  nn::GPTConfig one = c, none = c;
  one.n_layer = 1;
  none.n_layer = 0;
  // Per block: all E experts' parameters, and those this rank holds (E / ep of them).
  const double block_experts = c.moe() ? plan["moe"]["expert_params"].get<double>() / static_cast<double>(c.n_layer) : 0.0;
  const double experts_held = block_experts / s.ep;
  const double block_params = static_cast<double>(one.param_count(o.tp, nullptr) - none.param_count(o.tp, nullptr)) -
                              (block_experts - experts_held);
  const double unit0_params = static_cast<double>(none.param_count(o.tp, nullptr));

  // Links: the mesh is {dp, pp, ep, cp, tp}, tp fastest.
  Links lk;
  lk.tp = &link_of(cl, 1, o.tp, o.in_process);
  lk.cp = &link_of(cl, o.tp, o.cp, o.in_process);
  lk.ep = &link_of(cl, o.tp * o.cp, o.ep, o.in_process);
  lk.pp = &link_of(cl, o.tp * o.cp * o.ep, o.pp, o.in_process);
  lk.dp = &link_of(cl, o.tp * o.cp * o.ep * o.pp, o.dp, o.in_process);
  const Link &tp_link = *lk.tp, &pp_link = *lk.pp;
  // The data-parallel strategy sums over dp x cp (cp ranks train shares of the same rows),
  // its slowest link the outer one's; under ep the shared parameters over dp x ep.
  const Link& dp_link = o.dp > 1 ? *lk.dp : o.cp > 1 ? *lk.cp : *lk.ep;
  const double n = static_cast<double>(o.dp * o.cp), ne = static_cast<double>(o.dp * o.ep);

  // The schedule: one stage is a schedule of one rank (forward, backward per micro-batch).
  const parallel::PipeSchedule sched =
      parallel::make_pipe_schedule(P > 1 ? o.pp_schedule : "gpipe", static_cast<int>(P), static_cast<int>(M),
                                   P > 1 ? o.virtual_stages : 1);
  const std::vector<int> live = P > 1 ? live_micro_batches(sched) : std::vector<int>{1};
  // One block's copies a split backward keeps for its deferred weight gradients (each linear
  // layer's output gradient and input, one micro-batch).
  const double block_copies =
      s.R * e * (2.0 * s.q + 2.0 * s.kv + (s.swiglu ? 7.0 : 6.0) * s.C + (s.swiglu ? 3.0 : 2.0) * s.F);

  // One block's micro-batch, the same on every stage.
  double cp_comm = 0, ep_comm = 0;
  Work blk = blocks::attention_work(s, r, *lk.cp, cp_comm);
  const Work ffn = blocks::ffn_work(s, r, *lk.ep, ep_comm);
  blk += ffn;
  // What the busiest ep rank's rows beyond an even share add to a block: the pace is the
  // busiest rank's, but the ranks' work in all (what ranks sharing cores divide) is not; nor
  // are the fitted waits (a waiting rank's core runs another rank where ranks share cores).
  double excess_f = blk.wait_f, excess_fb = blk.wait_f + blk.wait_b;
  Work fair_ffn;  // an even share's feed-forward, when the busiest rank receives more
  if (s.moe && s.rows.received > s.rows.kept) {
    Shapes even = s;
    even.rows.received = s.rows.kept;
    double unused = 0;
    fair_ffn = blocks::ffn_work(even, r, *lk.ep, unused);
    excess_f += ffn.f - fair_ffn.f;
    excess_fb += ffn.f - fair_ffn.f + ffn.b - fair_ffn.b;
  }
  nlohmann::json ranks = nlohmann::json::array();
  double peak_all = 0, work_sum = 0, slowest_fb = 0, post_max = 0, flops_step = 0, tp_max = 0, dp_max = 0,
         opt_max = 0, msg_time = 0, compute_fb = 0, recompute_max = 0, cp_max = 0, ep_max = 0;
  for (size_t st = 0; st < stages.size(); ++st) {
    const Stage& g = stages[st];
    // Time of one micro-batch through this stage, forward and backward (recompute: the
    // forward again before the backward).
    Work mb;
    for (int b = 0; b < g.blocks; ++b) mb += blk;
    const double rerun = c.checkpoint ? cl.recompute_ratio * g.blocks * blk.f : 0.0;
    mb.b += rerun;
    if (g.head) mb += blocks::head_work(s, r);
    if (g.embed) mb += blocks::embed_work(s, r, c.pos == nn::PosKind::Learned);
    // A split backward (ZB-H1) defers each linear layer's weight gradient with copies of its
    // output gradient and input (nn/module.cc): made in the input pass, read in the weight
    // pass, per micro-batch.
    const double split_copies = sched.split_backward() ? g.blocks * block_copies + (g.head ? s.R * e * (s.Vl + s.C) : 0.0)
                                                       : 0.0;
    if (split_copies > 0) mb.b += stream(r, 2.0 * split_copies, 2 * (6 * g.blocks + (g.head ? 1 : 0)));
    // tp: the stage's collectives per micro-batch, on the critical path.
    // (A mixture of experts' region has none: half the block's.)
    const double tp_calls =
        o.tp > 1 ? g.blocks * (sp ? 10.0 : 4.0) * (c.moe() ? 0.5 : 1.0) + (g.embed ? 1.0 : 0.0) + (g.head ? 3.0 : 0.0) : 0.0;
    // Without SP all-reduces; with it all-gathers and reduce-scatters, 6 and 4 per block.
    const double tp_bw = sp ? 10.0 / (6.0 / tp_link.gather_bw() + 4.0 / tp_link.scatter_bw()) : tp_link.bandwidth;
    const double tp_time = o.tp > 1 ? tp_calls * tp_link.latency + g.tp_wire / static_cast<double>(M) / tp_bw : 0.0;
    // pp: a micro-batch's message each way across each of the rank's boundaries.
    const double msg = P > 1 ? pipe["pp_message_bytes"].get<double>() : 0.0;
    if (P > 1) msg_time = pp_link.latency + msg / pp_link.p2p_bw();
    const double fb = mb.f + mb.b + tp_time;
    // dp: the gradients (DDP all-reduce in 25 MiB buckets; ZeRO-1/2 reduce-scatter and
    // all-gather per unit; ZeRO-3 also the weights gathered for forward and backward).
    const double held = g.params, grads_bytes = held * e;
    const double units = g.blocks + ((g.embed || g.head) ? 1.0 : 0.0);
    // Under ep the experts' gradients are summed over dp only, the rest over dp x ep (DDP's
    // buckets each; with ZeRO the shared ones first all-reduced over ep unit by unit, then
    // ZeRO's reduce-scatter over dp takes them all).
    const double ex_bytes = g.blocks * experts_held * e, shared_bytes = grads_bytes - (o.ep > 1 ? ex_bytes : 0.0);
    double dp_time = 0;
    if (o.ep > 1 && o.zero == 0) {
      auto ddp = [&](const Link& l, double bytes, double size) {
        return size > 1 ? comm(l, 2.0 * (size - 1) / size * bytes, ddp_buckets(bytes)) : 0.0;
      };
      dp_time = ddp(o.dp > 1 ? *lk.dp : *lk.ep, shared_bytes, ne) + ddp(*lk.dp, ex_bytes, static_cast<double>(o.dp));
    } else if (n > 1) {
      // DDP all-reduces once a step; ZeRO reduce-scatters the gradients and all-gathers the
      // weights as often as zero_passes says (per micro-batch at stages 2 and 3).
      const auto [scatters, gathers] = zero_passes(std::max(o.zero, 1), M);
      const double share = (n - 1) / n * grads_bytes;
      const double wire = o.zero == 0 ? 2.0 * share : (scatters + gathers) * share;
      const double calls = o.zero == 0 ? ddp_buckets(grads_bytes) : (scatters + gathers) * units;
      dp_time = o.zero == 0 ? comm(dp_link, wire, calls)
                            : calls * dp_link.latency + scatters * share / dp_link.scatter_bw() +
                                  gathers * share / dp_link.gather_bw();
      if (o.ep > 1)
        dp_time += comm(*lk.ep, scatters * 2.0 * (s.ep - 1) / s.ep * shared_bytes, scatters * units);
      // Devices whose collectives run beside compute hide the reduction under the backward
      // (ZeRO-3 its gathers under forward and backward too); what sticks out is exposed.
      if (cl.overlap_comm) {
        const double window = M * (o.zero == 3 ? mb.f + mb.b : mb.b);
        dp_time = std::max(dp_time - window, comm(dp_link, wire / std::max(1.0, units), o.zero == 0 ? 1.0 : 2.0));
      }
    }
    // The optimizer over the state this rank steps, the gradient norm and the zeroing.
    const double stepped = o.zero >= 1 && n > 1 ? held / n : held;
    const double opt_time = stream(r, stepped * (mixed ? 30.0 : 28.0) + held * 2.0 * e, 3 * static_cast<int>(units) * 4);
    const double work = M * fb + dp_time + opt_time + (P > 1 ? 2.0 * M * msg_time : 0.0);
    const double holders = static_cast<double>(o.dp * o.tp * o.ep * o.cp);  // ranks that run this stage
    work_sum += (work - M * g.blocks * (excess_fb + (c.checkpoint ? cl.recompute_ratio * excess_f : 0.0))) * holders;
    // (compute without the ring transfers and all-to-alls it waits on, reported apart)
    if (fb > slowest_fb) compute_fb = mb.f + mb.b - g.blocks * (cp_comm + ep_comm);
    slowest_fb = std::max(slowest_fb, fb);
    recompute_max = std::max(recompute_max, M * rerun);
    post_max = std::max(post_max, dp_time + opt_time);
    tp_max = std::max(tp_max, M * tp_time);
    dp_max = std::max(dp_max, dp_time);
    opt_max = std::max(opt_max, opt_time);
    flops_step += M * mb.flops * holders;
    cp_max = std::max(cp_max, M * g.blocks * cp_comm);
    ep_max = std::max(ep_max, M * g.blocks * ep_comm);

    // Memory by ledger tag: the plan's model states, the last stage's tied copy of the token
    // table (weights and a gradient), the optimizer's step counter (and a loss scaler's state).
    const double param = g.states["weights_bytes"].get<double>() + e * g.tied_copy;
    const double grad = g.states["grads_bytes"].get<double>() + e * g.tied_copy;
    const double opt = g.states["optimizer_bytes"].get<double>() + 8.0 + (mixed ? 12.0 : 0.0);
    // DDP's flat buffers: every gradient's (under ep the shared ones' over dp x ep, the
    // experts' over dp when dp > 1).
    const double comm_buffer = o.zero != 0 ? 0.0
                               : o.ep > 1  ? (ne > 1 ? shared_bytes : 0.0) + (o.dp > 1 ? ex_bytes : 0.0)
                               : n > 1     ? grads_bytes
                                           : 0.0;
    // SP with a mixture of experts: its gradients are partial over tp, packed a block at a
    // time for their all-reduce (parallel/tp_strategy.cc) in a buffer kept for the next step.
    const double tp_pack = sp && c.moe() ? e * plan["moe"]["block_params_per_rank"].get<double>() : 0.0;
    nn::ActsLayout al;
    al.batch = o.micro_batch;
    al.seq = T / o.cp;
    al.tp = o.tp;
    al.ep = o.ep;
    al.expert_load = o.expert_load_peak > 0 ? o.expert_load_peak : o.expert_load;
    al.sp = sp;
    al.embed = g.embed;
    al.head = g.head;
    int first = 0;
    for (size_t q = 0; q < st; ++q) first += stages[q].blocks;
    al.begin = P > 1 && o.virtual_stages == 1 ? first : 0;
    al.end = al.begin + g.blocks;
    const nn::ActsBytes ab = nn::activation_bytes(c, al);
    const double alive = live[std::min(st, live.size() - 1)];
    double act = ab.per_micro_batch * alive + ab.shared;
    // A pipeline's sends are copies until the receiver takes them (comm/copied_sends.h): about
    // one per live micro-batch. Tied embeddings: the first stage sends the token table's
    // values (a copy) and receives the last stage's gradient of it (a buffer); the last stage
    // sends that gradient (a copy).
    if (P > 1) {
      act += alive * msg;
      if (c.tied_embeddings) act += ((g.embed ? 2.0 : 0.0) + (g.head ? 1.0 : 0.0)) * s.Vl * s.C * e;
    }
    // The split backward's copies: rank r keeps up to r passes waiting besides the one it runs.
    if (split_copies > 0)
      act += (std::min<double>(static_cast<double>(st), static_cast<double>(M - 1)) + 1.0) * split_copies;
    // Peaks within a step, as the ledger sees them: ZeRO-2 holds the embedding unit's whole
    // gradients and two blocks' (one computing, one being reduced); ZeRO-3 two blocks'
    // gathered weights (one prefetched) beside the embedding unit's and one block's whole
    // gradients (its reductions keep up with the gathers: measured, gpt-small and smaller).
    double transient = 0;
    if (n > 1 && o.zero == 2) transient = e * (2.0 * block_params + unit0_params);
    if (n > 1 && o.zero == 3) transient = e * (3.0 * block_params + unit0_params);
    // A ring attention's backward (nn/ring_attention.cc), f32: the K/V in hand and arriving,
    // this rank's dK/dV, two travelling accumulators, a visiting block's share and the one
    // coming home (7 K/V's worth), and a step's partial dQ.
    if (o.cp > 1) transient += 4.0 * (7.0 * 2.0 * s.R * s.kv + s.R * s.q);
    const double total = param + grad + opt + comm_buffer + tp_pack + act + transient;
    peak_all = std::max(peak_all, total);
    ranks.push_back({{"pp_stage", st},
                     {"blocks", g.blocks},
                     {"memory", {{"param", param},
                                 {"grad", grad},
                                 {"optimizer", opt},
                                 {"activation", act},
                                 {"comm_buffer", comm_buffer + tp_pack},
                                 {"transient", transient}}},
                     {"activation_per_micro_batch", ab.per_micro_batch},
                     {"live_micro_batches", alive},
                     {"peak_bytes", total},
                     {"step_work_s", work}});
  }
  // The step: a pipeline's makespan from the simulator at this stage's costs (the slowest
  // stage's, as a chunk of it), else one rank's micro-batches; then the reductions and the
  // update. Ranks sharing cores (more ranks than a host's cores) fill each other's idle
  // time, so the step is at least their total work over the cores.
  double critical = M * slowest_fb;
  double bubble = 0;
  if (P > 1) {
    // Per-stage costs: the simulator divides them over a rank's chunks itself.
    parallel::PipeCosts pc;
    pc.forward = slowest_fb / 3.0;
    pc.backward = 2.0 * slowest_fb / 3.0;
    pc.backward_input = pc.backward_weight = slowest_fb / 3.0;
    pc.send = msg_time;
    const parallel::PipeSimulation sim = parallel::simulate(sched, pc);
    critical = sim.makespan;
    bubble = sim.bubble_fraction;
  }
  critical += post_max;
  double step = critical;
  const double cores = static_cast<double>(cl.devices_per_host);
  const bool shared = cl.cpu && static_cast<double>(world) > cores;
  if (shared) {
    // Uneven experts on shared cores: the busiest ep rank gets a core only once fewer ranks
    // than cores are left running, so each block's expert pass ends later than its total
    // work over the cores says (engine/plan_rates.h, shared_makespan).
    double uneven = 0;
    if (fair_ffn.f > 0) {
      const double load = s.rows.received / s.rows.kept, rest = (s.ep - load) / (s.ep - 1.0);
      std::vector<double> loads;
      for (int64_t i = 0; i < world; ++i) loads.push_back(i % o.ep == 0 ? load : rest);
      const double per_unit = rates::shared_makespan(loads, cores) - static_cast<double>(world) / cores;
      const double fair_rerun = c.checkpoint ? cl.recompute_ratio * fair_ffn.f : 0.0;
      uneven = std::max(0.0, per_unit) * M * static_cast<double>(c.n_layer / P) * (fair_ffn.f + fair_ffn.b + fair_rerun);
    }
    step = std::max(critical, work_sum / cores + uneven);
  }
  const double tokens = plan["effective_batch"].get<double>() * static_cast<double>(T);
  // CPU: a device is a core; a process of one rank runs on all of them.
  const double used = cl.cpu ? static_cast<double>(world == 1 ? cl.devices_per_host : std::min<int64_t>(world, cl.devices_per_host))
                             : static_cast<double>(world);
  const double peak_rate = (mixed ? cl.peak_flops_16 : cl.peak_flops_f32) * used;
  return {{"cluster", cl.name},
          {"step_s", step},
          {"tokens_per_s", tokens / step},
          {"model_flops_per_step", flops_step},
          {"mfu", peak_rate > 0 ? flops_step / step / peak_rate : 0.0},
          {"time", {{"critical_path_s", critical},
                    {"compute_s", M * compute_fb},
                    {"recompute_s", recompute_max},
                    {"pp_bubble_s", P > 1 ? critical - post_max - M * slowest_fb : 0.0},
                    {"shared_cores_extra_s", step - critical},
                    {"tp_comm_s", tp_max},
                    {"cp_comm_exposed_s", cp_max},
                    {"ep_comm_s", ep_max},
                    {"dp_comm_exposed_s", dp_max},
                    {"optimizer_s", opt_max},
                    {"pp_bubble_fraction", bubble},
                    {"total_work_s", work_sum},
                    {"shared_cores", shared}}},
          {"ranks", ranks},
          {"peak_bytes", peak_all},
          {"device_memory", cl.device_memory},
          {"fits", peak_all <= cl.device_memory}};
}

}  // namespace dt::engine
