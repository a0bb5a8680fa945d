#include "engine/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "comm/mesh.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace dt::engine {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

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

// A linear layer's three GEMMs at x [M, K], W [N, K]: the forward x W^T, the input gradient
// dy W and the weight gradient dy^T x (6 M K N FLOPs, as a training step mixes them): the
// time of one, on average.
double time_gemm(int64_t m, int64_t k, int64_t n, DType dt, int reps) {
  Tensor x = filled({m, k}, dt), w = filled({n, k}, dt), y = filled({m, n}, dt), dx = filled({m, k}, dt),
         dw = filled({n, k}, dt);
  return best_of(reps, [&] {
           kernels::matmul(x, w, y, false, true);
           kernels::matmul(y, w, dx, false, false);
           kernels::matmul(y, x, dw, true, false);
         }) / 3.0;
}

}  // namespace

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
    const double t1 = time_gemm(256, 64, 64, DType::F32, 20), t2 = time_gemm(1024, 384, 1536, DType::F32, 5);
    c.matmul_flops_f32 = (f2 - f1) / std::max(t2 - t1, 1e-9);
    c.matmul_call_s = std::max(0.0, t1 - f1 / c.matmul_flops_f32);
    const double t16 = time_gemm(1024, 384, 1536, DType::BF16, 5);
    c.matmul_flops_16 = f2 / std::max(t16 - c.matmul_call_s, 1e-9);
    say("attention on one core");
    const int64_t B = 2, T = 128, H = 6, D = 64;
    Tensor q = filled({B, T, H, D}, DType::F32), k = filled({B, T, H, D}, DType::F32), v = filled({B, T, H, D}, DType::F32);
    Tensor out = filled({B, T, H, D}, DType::F32), lse = filled({B, H, T}, DType::F32);
    const double ta = best_of(3, [&] { kernels::attention_forward(q, k, v, 0.0f, out, lse); });
    c.attention_flops_f32 = 2.0 * B * H * T * T * D / ta;
    c.attention_flops_16 = c.attention_flops_f32 * c.matmul_flops_16 / c.matmul_flops_f32;
    say("elementwise kernels on one core");
    Tensor x = filled({1 << 22}, DType::F32), y = filled({1 << 22}, DType::F32), z = filled({1 << 22}, DType::F32);
    const double tb = best_of(3, [&] { kernels::add(x, y, z); });
    Tensor xs = filled({256}, DType::F32), ys = filled({256}, DType::F32), zs = filled({256}, DType::F32);
    const double ts = best_of(50, [&] { kernels::add(xs, ys, zs); });
    c.memory_bandwidth = 3.0 * 4.0 * (1 << 22) / tb;
    c.op_call_s = std::max(0.0, ts - 3.0 * 4.0 * 256 / c.memory_bandwidth);
  }
  say("GEMMs on every core");
  const double tp = time_gemm(1024, 384, 1536, DType::F32, 5);
  c.pool_speedup = std::max(1.0, 2.0 * 1024 * 384 * 1536 / tp / c.matmul_flops_f32);
  say("elementwise kernels on every core at once");
  {
    comm::BackendOptions each;
    each.world_size = static_cast<int>(c.devices_per_host);
    comm::Coords all{};
    all.fill(1);
    all[comm::kDp] = each.world_size;
    auto cores = comm::Mesh::create("local", all, each);
    std::vector<double> t(static_cast<size_t>(each.world_size), 0.0);
    cores->run([&](int li, int) {
      ScopedSerialKernels one_core;
      Tensor x = filled({1 << 22}, DType::F32), y = filled({1 << 22}, DType::F32), z = filled({1 << 22}, DType::F32);
      t[static_cast<size_t>(li)] = best_of(3, [&] { kernels::add(x, y, z); });
    });
    c.memory_bandwidth_shared = 3.0 * 4.0 * (1 << 22) / *std::max_element(t.begin(), t.end());
  }
  say("all-reduce between two rank threads");
  comm::BackendOptions bo;
  bo.world_size = 2;
  comm::Coords axes{};
  axes.fill(1);
  axes[comm::kDp] = 2;
  auto mesh = comm::Mesh::create("local", axes, bo);
  const int64_t big = 1 << 22;
  double t_big = 0, t_small = 0;
  mesh->run([&](int li, int rank) {
    ScopedSerialKernels one_core;
    comm::Communicator& cm = mesh->comm(rank, "dp");
    std::vector<float> buf(static_cast<size_t>(big), 1.0f), small(16, 1.0f);
    const double b = best_of(3, [&] { cm.all_reduce(buf.data(), buf.data(), big, DType::F32, kernels::ReduceOp::Sum); });
    const double s = best_of(50, [&] { cm.all_reduce(small.data(), small.data(), 16, DType::F32, kernels::ReduceOp::Sum); });
    if (li == 0) t_big = b, t_small = s;
  });
  c.intra.latency = t_small;
  c.intra.bandwidth = 4.0 * big / std::max(t_big - t_small, 1e-9);  // a ring's wire bytes at n = 2: the buffer
  c.inter = c.intra;  // one host
  c.peak_flops_f32 = c.matmul_flops_f32;  // a device is a core: its measured GEMM rate, for MFU
  c.peak_flops_16 = c.matmul_flops_16;
  c.check();
  return c;
}

}  // namespace dt::engine
