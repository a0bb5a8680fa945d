#include "engine/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <thread>
#include <vector>

#include "comm/mesh.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "engine/plan_cost.h"
#include "engine/plan_serve.h"
#include "engine/train_engine.h"
#include "engine/trainer.h"
#include "nn/gpt.h"
#include "nn/moe.h"
#include "nn/paged_kv.h"
#include "nn/rope.h"
#include "optim/optimizer.h"

namespace dt::engine {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The reference steps' timings, the best taken: a shared host's jitter only slows a step,
// and it comes in episodes of a second or more (three tries were sometimes all inside one:
// the dp 2 reference's speed read 0.51 in one run and 0.93 in the next).
constexpr int kReferenceRepeats = 8;

// The best of `reps` timings of fn, after one untimed call (the warm-up).
double best_of(int reps, const std::function<void()>& fn) {
  fn();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_s();
    fn();
    best = std::min(best, now_s() - t0);
  }
  return best;
}

Tensor filled(const Shape& s, DType dt) {
  Tensor t = Tensor::zeros(s, dt, Device::cpu(), MemTag::Workspace);
  kernels::fill(t, 0.01f);
  return t;
}

// Linear layers' GEMMs at several shapes: at x [M, K], W [N, K] the forward x W^T, the input
// gradient dy W and the weight gradient dy^T x (6 M K N FLOPs, as a training step mixes
// them), the time of one on average. Timed in rounds, one of each shape per round, each
// keeping its best (as the reference steps are, below): the curve's points are then read
// at the same moments, not one slow episode for some of them.
struct GemmShape {
  int64_t m, k, n;
  DType dt;
};
std::vector<double> time_gemms(const std::vector<GemmShape>& shapes, int rounds) {
  struct Case {
    Tensor x, w, y, dx, dw;
  };
  std::vector<Case> cases;
  for (const GemmShape& g : shapes)
    cases.push_back({filled({g.m, g.k}, g.dt), filled({g.n, g.k}, g.dt), filled({g.m, g.n}, g.dt),
                     filled({g.m, g.k}, g.dt), filled({g.n, g.k}, g.dt)});
  auto run = [](Case& c) {
    kernels::matmul(c.x, c.w, c.y, false, true);
    kernels::matmul(c.y, c.w, c.dx, false, false);
    kernels::matmul(c.y, c.x, c.dw, true, false);
  };
  for (Case& c : cases) run(c);  // warm-up
  std::vector<double> best(shapes.size(), 1e30);
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < cases.size(); ++i) {
      const double t0 = now_s();
      run(cases[i]);
      best[i] = std::min(best[i], (now_s() - t0) / 3.0);
    }
  return best;
}

// Serving: the reference model's paged forward on the kernel pool (one rank alone):
// prefills of 32, 64 and 96 tokens, and decode steps of 1 to 32 sequences at 96 cached
// positions, against the serving cost model's times at the rates measured above. The
// prefill's efficiency is the least-squares ratio of model to measured; a decode step is
// fitted as t = p / efficiency + rows x kv_row (rows: the cached rows the paged attention
// stages, seqs x layers x query heads x positions) by least squares over the six batches,
// kv_row_s being one core's (the reference ran on the pool: a rank divides it by its speed).
void calibrate_serving(Cluster& c, const nn::GPTConfig& raw) {
  const nn::GPTConfig ref = raw.resolved();
  const int64_t P = 96, S = 32, bs = 16, per = (P + bs) / bs;
  nn::GPT model(ref);
  nn::PagedKv kv = nn::PagedKv::create(ref, S * per, bs, model.local_kv_heads());
  Tensor logits;
  auto seq = [&](int64_t s, int64_t start, int64_t count) {
    nn::PagedBatch::Seq q;
    q.start = start, q.count = count, q.logits = true;
    for (int64_t j = 0; j < per; ++j) q.blocks.push_back(static_cast<int32_t>(s * per + j));
    return q;
  };
  auto prefill = [&](int64_t s, int64_t len) {
    nn::PagedBatch b;
    b.seqs.push_back(seq(s, 0, len));
    for (int64_t i = 0; i < len; ++i) b.ids.push_back(static_cast<int32_t>((s * 31 + i * 7) % ref.vocab_size));
    model.forward_paged(b, kv, logits);
  };
  for (int64_t s = 0; s < S; ++s) prefill(s, P);
  Cluster at_rates = c;
  at_rates.prefill_efficiency = at_rates.decode_efficiency = 1;
  at_rates.kv_row_s = 0;
  double tp_sum = 0, pp_sum = 0;
  for (int64_t len : {32, 64, 96}) {
    const double t = best_of(3, [&] { prefill(0, len); });
    const double p = serve_forward_times(ref, at_rates, len, 1, len).prefill_s;
    tp_sum += t * p, pp_sum += p * p;
  }
  c.prefill_efficiency = std::clamp(pp_sum / tp_sum, 0.05, 10.0);
  prefill(0, P);  // sequence 0's cache as the others'
  // Least squares of t = a p + k rows over the batches.
  double spp = 0, spr = 0, srr = 0, stp = 0, str = 0;
  for (int64_t n : {1, 2, 4, 8, 16, 32}) {
    nn::PagedBatch b;
    for (int64_t s = 0; s < n; ++s) {
      b.seqs.push_back(seq(s, P, 1));
      b.ids.push_back(1);
    }
    model.forward_paged(b, kv, logits);
    const double t = best_of(10, [&] { model.forward_paged(b, kv, logits); });
    const ServeForwardTimes f = serve_forward_times(ref, at_rates, P, n, P + 1);
    spp += f.decode_s * f.decode_s, spr += f.decode_s * f.kv_rows, srr += f.kv_rows * f.kv_rows;
    stp += t * f.decode_s, str += t * f.kv_rows;
  }
  const double det = spp * srr - spr * spr;
  double a = stp / spp, k = 0;
  if (std::abs(det) > 0) {
    a = (stp * srr - str * spr) / det;
    k = (spp * str - spr * stp) / det;
  }
  if (!(a > 0.1 && a < 20 && k >= 0)) a = stp / spp, k = 0;  // out of reason: the ratio alone
  c.decode_efficiency = std::clamp(1.0 / a, 0.05, 10.0);
  c.kv_row_s = std::clamp(k * c.pool_speedup, 0.0, 1e-6);
}

}  // namespace

Link time_link(comm::Mesh& mesh) {
  const int64_t big = 1 << 22;
  double t_big = 0, t_small = 0, t_gather = 0, t_scatter = 0, t_p2p = 0;
  mesh.run([&](int li, int rank) {
    ScopedSerialKernels one_core;
    comm::Communicator& cm = mesh.comm(rank, "dp");
    DT_CHECK(cm.size() == 2, "timing a link: expected 2 ranks, got " + std::to_string(cm.size()));
    std::vector<float> buf(static_cast<size_t>(big), 1.0f), half(static_cast<size_t>(big / 2), 1.0f), small(16, 1.0f);
    const double b = best_of(3, [&] { cm.all_reduce(buf.data(), buf.data(), big, DType::F32, kernels::ReduceOp::Sum); });
    const double s = best_of(50, [&] { cm.all_reduce(small.data(), small.data(), 16, DType::F32, kernels::ReduceOp::Sum); });
    const double g = best_of(3, [&] { cm.all_gather(half.data(), buf.data(), big / 2, DType::F32); });
    const double r = best_of(3, [&] { cm.reduce_scatter(buf.data(), half.data(), big / 2, DType::F32, kernels::ReduceOp::Sum); });
    const int other = 1 - cm.rank();
    const double p = best_of(3, [&] {  // one message each way
      if (cm.rank() == 0) {
        cm.send(buf.data(), big, DType::F32, other);
        cm.recv(buf.data(), big, DType::F32, other);
      } else {
        cm.recv(buf.data(), big, DType::F32, other);
        cm.send(buf.data(), big, DType::F32, other);
      }
    }) / 2.0;
    if (li == 0) t_big = b, t_small = s, t_gather = g, t_scatter = r, t_p2p = p;
  });
  // Wire bytes at n = 2: an all-reduce moves the buffer, an all-gather and a reduce-scatter half.
  Link l;
  l.latency = t_small;
  l.bandwidth = 4.0 * big / std::max(t_big - t_small, 1e-9);
  l.all_gather = 2.0 * big / std::max(t_gather - t_small, 1e-9);
  l.reduce_scatter = 2.0 * big / std::max(t_scatter - t_small, 1e-9);
  l.p2p = 4.0 * big / std::max(t_p2p - t_small, 1e-9);
  return l;
}

Cluster calibrate_local(const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& what) {
    if (progress) progress(what);
  };
  Cluster c;
  c.name = "local";
  c.cpu = true;
  c.overlap_comm = false;  // the local backend's collectives run on the ranks' own threads
  c.devices_per_host = std::max(1u, std::thread::hardware_concurrency());
  c.device_memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  c.source = "measured by dtrain plan --calibrate on this host (" + std::to_string(c.devices_per_host) + " cores)";
  {
    ScopedSerialKernels one_core;  // a rank's kernels, as rank threads run them
    say("GEMMs on one core");
    // Two sizes: the small one's time is mostly the call's fixed cost, the large one's the rate.
    const double f1 = 2.0 * 256 * 64 * 64, f2 = 2.0 * 1024 * 384 * 1536;
    // Smaller GEMMs (fewer tokens on a rank, a narrower model) run below the large one's
    // rate: the fraction at each size (cube root of M K N), on the shapes of small layers.
    const int64_t shapes[][3] = {{64, 128, 512}, {128, 256, 256}, {256, 256, 1024}, {1024, 256, 1024}};
    std::vector<GemmShape> timed = {{256, 64, 64, DType::F32}, {1024, 384, 1536, DType::F32},
                                    {1024, 384, 1536, DType::BF16}};
    for (const auto& sh : shapes) timed.push_back({sh[0], sh[1], sh[2], DType::F32});
    const std::vector<double> t = time_gemms(timed, 10);
    const double t1 = t[0], t2 = t[1], t16 = t[2];
    c.matmul_flops_f32 = (f2 - f1) / std::max(t2 - t1, 1e-9);
    c.matmul_call_s = std::max(0.0, t1 - f1 / c.matmul_flops_f32);
    c.matmul_flops_16 = f2 / std::max(t16 - c.matmul_call_s, 1e-9);
    std::vector<std::pair<double, double>> curve;
    for (size_t i = 0; i < std::size(shapes); ++i) {
      const auto& sh = shapes[i];
      const double f = 2.0 * sh[0] * sh[1] * sh[2];
      curve.push_back({std::cbrt(static_cast<double>(sh[0] * sh[1] * sh[2])),
                       std::min(1.0, f / std::max(t[3 + i] - c.matmul_call_s, 1e-9) / c.matmul_flops_f32)});
    }
    curve.push_back({std::cbrt(1024.0 * 384 * 1536), 1.0});
    std::sort(curve.begin(), curve.end());
    for (const auto& [size, eff] : curve) {
      c.matmul_sizes.push_back(size);
      c.matmul_efficiency.push_back(eff);
    }
    say("attention on one core");
    const int64_t B = 8, T = 128, H = 6, D = 64;  // a training micro-batch's heads, past the caches
    Tensor q = filled({B, T, H, D}, DType::F32), k = filled({B, T, H, D}, DType::F32), v = filled({B, T, H, D}, DType::F32);
    Tensor out = filled({B, T, H, D}, DType::F32), lse = filled({B, H, T}, DType::F32);
    const double ta = best_of(3, [&] { kernels::attention_forward(q, k, v, 0.0f, out, lse); });
    Tensor dout = filled({B, T, H, D}, DType::F32), dq = filled({B, T, H, D}, DType::F32),
           dk = filled({B, T, H, D}, DType::F32), dv = filled({B, T, H, D}, DType::F32);
    const double tab = best_of(3, [&] { kernels::attention_backward(q, k, v, out, lse, dout, 0.0f, dq, dk, dv); });
    c.attention_flops_f32 = 2.0 * B * H * T * T * D / ta;
    c.attention_backward_ratio = tab / ta;
    c.attention_flops_16 = c.attention_flops_f32 * c.matmul_flops_16 / c.matmul_flops_f32;
    say("elementwise kernels on one core");
    Tensor x = filled({1 << 22}, DType::F32), y = filled({1 << 22}, DType::F32), z = filled({1 << 22}, DType::F32);
    const double tb = best_of(3, [&] { kernels::add(x, y, z); });
    Tensor xs = filled({256}, DType::F32), ys = filled({256}, DType::F32), zs = filled({256}, DType::F32);
    const double ts = best_of(50, [&] { kernels::add(xs, ys, zs); });
    c.memory_bandwidth = 3.0 * 4.0 * (1 << 22) / tb;
    c.op_call_s = std::max(0.0, ts - 3.0 * 4.0 * 256 / c.memory_bandwidth);
    say("activations and RoPE on one core");
    {  // per element, on a block's MLP width and heads: they compute more than they stream
      const int64_t rows = 512, width = 1024, heads = 4, dim = 64;
      Tensor a = filled({rows, width}, DType::F32), g = filled({rows, width}, DType::F32), o = filled({rows, width}, DType::F32),
             da = filled({rows, width}, DType::F32), dg = filled({rows, width}, DType::F32), bias = filled({width}, DType::F32),
             dbias = filled({width}, DType::F32), rot = filled({1, rows, heads, dim}, DType::F32);
      const double n = static_cast<double>(rows * width), nq = static_cast<double>(rows * heads * dim);
      c.gelu_fwd_s = best_of(10, [&] { kernels::bias_gelu_forward(a, bias, o); }) / n;
      c.gelu_bwd_s = best_of(10, [&] { kernels::bias_gelu_backward(a, bias, o, da, dbias); }) / n;
      c.swiglu_fwd_s = best_of(10, [&] { kernels::swiglu_forward(a, g, o); }) / n;
      c.swiglu_bwd_s = best_of(10, [&] { kernels::swiglu_backward(a, g, o, da, dg); }) / n;
      const nn::RopeSpec rope(10000.0f);
      c.rope_fwd_s = best_of(10, [&] { nn::rope_forward(rot, rope); }) / nq;
      c.rope_bwd_s = best_of(10, [&] { nn::rope_backward(rot, rope); }) / nq;
    }
  }
  // A small GPT's training step (4 x 128 tokens through 3 blocks of width 320, AdamW with
  // clipping): the mix of GEMMs, attention, elementwise kernels and the update a step runs,
  // timed on one core alone, on the kernel pool, and on every core at once (a copy each, as
  // ranks side by side run it).
  say("the references' training steps: on one core, on the kernel pool (with and without recompute), over dp 2 and "
      "cp 2, a mixture of experts alone and over ep 2 and dp 2, in rounds");
  // Each reference a GPT-2-style shape: blocks, width, heads (of 64), context.
  auto shaped = [](int64_t layers, int64_t width, int64_t context) {
    nn::GPTConfig g = *nn::gpt_preset("gpt-small");
    g.n_layer = layers, g.d_model = width, g.n_head = width / 64, g.d_ff = 4 * width, g.context = context;
    return g;
  };
  const nn::GPTConfig ref = shaped(3, 320, 128);
  // A second, small reference (2 blocks of width 128, 2 x 64 tokens): its step is mostly the
  // kernels' fixed costs, which the large one's is not; the two fit both below.
  const nn::GPTConfig small = shaped(2, 128, 64);
  // The references' steps are timed in rounds, one step of each per round, and each keeps
  // its best: a shared host's slow episodes last seconds, so a reference's tries spread over
  // the whole measurement cannot all fall inside one (timed back to back they sometimes did,
  // and a fit read a 22 us kernel call or no pool speed-up at all).
  comm::BackendOptions bo;
  bo.world_size = 2;
  comm::Coords axes{};
  axes.fill(1);
  axes[comm::kDp] = 2;
  struct Reference {
    std::unique_ptr<nn::GPT> model;
    std::unique_ptr<optim::AdamW> adamw;
    std::unique_ptr<TrainEngine> engine;  // one rank
    std::unique_ptr<Trainer> trainer;     // or rank threads over a mesh
    Tensor ids;
    bool serial = false;  // its kernels on one core
    double best = 1e30;
    nn::MoEStats routed;  // a mixture's routing in its best step
    StepStats step() {
      std::unique_ptr<ScopedSerialKernels> one_core;
      if (serial) one_core = std::make_unique<ScopedSerialKernels>();
      return engine ? engine->train_step(ids, ids) : trainer->train_step(ids, ids);
    }
  };
  auto reference = [](const nn::GPTConfig& g, int64_t B, bool serial, std::shared_ptr<comm::Mesh> mesh) {
    auto r = std::make_unique<Reference>();
    r->model = std::make_unique<nn::GPT>(g.resolved());
    r->adamw = std::make_unique<optim::AdamW>(r->model->parameters(), optim::AdamWOptions{});
    TrainOptions to;
    to.max_grad_norm = 1.0;
    if (mesh)
      r->trainer = std::make_unique<Trainer>(mesh, *r->model, *r->adamw, to, ParallelOptions{});
    else
      r->engine = std::make_unique<TrainEngine>(nullptr, *r->model, *r->adamw, to);
    r->ids = Tensor::zeros({B, g.context}, DType::I32, Device::cpu(), MemTag::Workspace);
    int32_t* p = r->ids.data<int32_t>();
    for (int64_t i = 0; i < r->ids.numel(); ++i) p[i] = static_cast<int32_t>((i * 7919) % g.vocab_size);
    r->serial = serial;
    r->step();  // the first touches fresh memory
    return r;
  };
  // The first reference alone on one core, on the kernel pool, and over dp 2 by two rank
  // threads (8 sequences: 4 each); the small one alone; a mixture of experts alone (2
  // blocks of width 256, 4 experts of 512, top 2: its routed pairs' costs, below).
  nn::GPTConfig moe = shaped(2, 256, 128), twin = moe;
  moe.n_experts = 4, moe.top_k = 2, moe.d_ff = 512;
  const int64_t moe_batch = 4;
  twin.d_ff = 1024;  // its dense twin: the same FLOPs a token, in one MLP
  nn::GPTConfig ref_recompute = ref;
  ref_recompute.checkpoint = true;
  std::unique_ptr<Reference> alone_ref = reference(ref, 4, true, nullptr), pool_ref = reference(ref, 4, false, nullptr),
                             recompute_ref = reference(ref_recompute, 4, false, nullptr),
                             small_ref = reference(small, 2, true, nullptr),
                             dp2_ref = reference(ref, 8, false, comm::Mesh::create("local", axes, bo)),
                             moe_ref = reference(moe, moe_batch, true, nullptr),
                             twin_ref = reference(twin, moe_batch, true, nullptr);
  // The first reference over cp 2 (each rank half of every one of the 8 sequences: dp 2's rows).
  comm::Coords cp_axes{};
  cp_axes.fill(1);
  cp_axes[comm::kCp] = 2;
  std::unique_ptr<Reference> cp2_ref = reference(ref, 8, false, comm::Mesh::create("local", cp_axes, bo));
  // The mixture over ep 2 (each rank routing 4 sequences, holding 2 experts) and its dp 2
  // twin (the same rows a rank, every expert).
  comm::Coords ep_axes{};
  ep_axes.fill(1);
  ep_axes[comm::kEp] = 2;
  std::unique_ptr<Reference> moe_ep2_ref = reference(moe, 2 * moe_batch, false, comm::Mesh::create("local", ep_axes, bo)),
                             moe_dp2_ref = reference(moe, 2 * moe_batch, false, comm::Mesh::create("local", axes, bo));
  for (int round = 0; round < kReferenceRepeats; ++round)
    for (Reference* r : {alone_ref.get(), pool_ref.get(), recompute_ref.get(), small_ref.get(), dp2_ref.get(), moe_ref.get(), twin_ref.get(),
                         cp2_ref.get(), moe_ep2_ref.get(), moe_dp2_ref.get()}) {
      const double t0 = now_s();
      StepStats st = r->step();
      const double took = now_s() - t0;
      if (took < r->best) r->best = took, r->routed = std::move(st.moe);
    }
  const double alone = alone_ref->best, small_alone = small_ref->best;
  c.pool_speedup = std::max(1.0, alone / pool_ref->best);

  say("all-reduce, all-gather, reduce-scatter and send/recv between two rank threads");
  auto mesh = comm::Mesh::create("local", axes, bo);
  c.intra = time_link(*mesh);
  c.inter = c.intra;  // one host
  c.peak_flops_f32 = c.matmul_flops_f32;  // a device is a core: its measured GEMM rate, for MFU
  c.peak_flops_16 = c.matmul_flops_16;
  {  // The cost model's steps for the two references on one core, against the measured ones:
     // t = p / efficiency + calls x op_call, p the time at the rates without fixed costs and
     // calls the kernel calls (the model's time with each call costing 1 us, less p).
    Cluster serial = c;
    serial.pool_speedup = 1;
    serial.compute_efficiency = 1;
    auto predicted = [&](const nn::GPTConfig& g, int64_t B, double call_s) {
      serial.matmul_call_s = serial.op_call_s = call_s;
      PlanOptions one;
      one.micro_batch = B;
      one.seq_len = g.context;
      return cost_json(g, one, serial)["step_s"].get<double>();
    };
    const double p1 = predicted(ref, 4, 0), n1 = (predicted(ref, 4, 1e-6) - p1) / 1e-6;
    const double p2 = predicted(small, 2, 0), n2 = (predicted(small, 2, 1e-6) - p2) / 1e-6;
    // Solve t1 = p1 a + n1 x, t2 = p2 a + n2 x for a = 1 / efficiency and x = the call's cost.
    const double det = p1 * n2 - p2 * n1;
    double a = alone / p1, x = 0;
    if (std::abs(det) > 1e-12) {
      a = (alone * n2 - small_alone * n1) / det;
      x = (p1 * small_alone - p2 * alone) / det;
    }
    if (!(a > 0.1 && a < 10 && x >= 0 && x < 1e-3)) a = alone / p1, x = 0;  // a fit out of reason: the ratio alone
    c.compute_efficiency = 1.0 / a;
    c.matmul_call_s = c.op_call_s = x;
  }
  // Ranks side by side: the first reference trained by two rank threads over dp (DDP),
  // against the cost model's step for that layout at full speed. It takes in what two ranks
  // pay beside each other (shared caches and memory, the gradient reduction's threads, each
  // waiting for the slower at every collective) that one copy alone does not show.
  {
    const double measured = dp2_ref->best;
    Cluster full = c;
    full.shared_core_speed = 1;
    PlanOptions o;
    o.dp = 2;
    o.micro_batch = 4;
    o.seq_len = ref.context;
    c.shared_core_speed = std::min(1.0, cost_json(ref, o, full)["step_s"].get<double>() / measured);
  }
  // What reference a took beyond its twin b, less what the cost model predicts between them
  // (each with its model and layout) on cluster `on`: the residue a fit spreads over its unit.
  auto beyond_model = [](const Reference& a, const nn::GPTConfig& ga, const PlanOptions& oa, const Reference& b,
                         const nn::GPTConfig& gb, const PlanOptions& ob, const Cluster& on) {
    return (a.best - b.best) - (cost_json(ga, oa, on)["step_s"].get<double>() - cost_json(gb, ob, on)["step_s"].get<double>());
  };
  {  // The cp 2 reference against its dp 2 twin, per ring step and layer (cp 2: one step a layer).
    PlanOptions dp2, cp2;
    dp2.dp = 2, dp2.micro_batch = 4, dp2.seq_len = ref.context;
    cp2.cp = 2, cp2.micro_batch = 8, cp2.seq_len = ref.context;
    const double extra = beyond_model(*cp2_ref, ref, cp2, *dp2_ref, ref, dp2, c);
    c.ring_step_s = std::clamp(extra / static_cast<double>(ref.n_layer), 0.0, 0.1);
  }
  {  // What the mixture's step on one core takes beyond its dense twin's, less what the cost
     // model predicts between them, per routed (row, choice) pair and block: the twin takes
     // out what the cost model misses of the rest of the step.
    Cluster serial = c;
    serial.pool_speedup = 1;
    serial.moe_row_s = 0;
    PlanOptions one;
    one.micro_batch = moe_batch;
    one.seq_len = moe.context;
    const double extra = beyond_model(*moe_ref, moe, one, *twin_ref, twin, one, serial);
    const double pairs = static_cast<double>(moe.n_layer * moe_batch * moe.context * moe.top_k);
    c.moe_row_s = std::clamp(extra / pairs, 0.0, 1e-5);
  }
  {  // The mixture over ep 2 against its dp 2 twin, priced with the busiest rank's rows of its
     // best step, per all-to-all and layer (five a layer: three forward, two backward).
    PlanOptions dp2, ep2;
    dp2.dp = 2, dp2.micro_batch = moe_batch, dp2.seq_len = moe.context;
    ep2.ep = 2, ep2.micro_batch = moe_batch, ep2.seq_len = moe.context;
    ep2.expert_load = nn::busiest_rank_pace(moe_ep2_ref->routed.block_tokens, moe.n_experts, 2);
    const double extra = beyond_model(*moe_ep2_ref, moe, ep2, *moe_dp2_ref, moe, dp2, c);
    c.ep_exchange_s = std::clamp(extra / (5.0 * static_cast<double>(moe.n_layer)), 0.0, 0.1);
  }
  {  // Recompute: the first reference with and without it on the kernel pool; what it took
     // beyond the plain step, over the cost model's forward of the blocks it reran.
    PlanOptions one;
    one.micro_batch = 4, one.seq_len = ref.context, one.recompute = true;
    Cluster at_one = c;
    at_one.recompute_ratio = 1;
    const double rerun = cost_json(ref, one, at_one)["time"]["recompute_s"].get<double>();
    if (rerun > 0) c.recompute_ratio = std::clamp((recompute_ref->best - pool_ref->best) / rerun, 0.1, 1.5);
  }
  say("the reference's paged prefill and decode on the kernel pool");
  // Serving's reference is larger than a cache (84 MB of f32 weights): decode reads them
  // from memory every step, as a served model's does.
  nn::GPTConfig serving = shaped(6, 512, 128);
  serving.vocab_size = 4096;
  calibrate_serving(c, serving);
  c.check();
  return c;
}

}  // namespace dt::engine
