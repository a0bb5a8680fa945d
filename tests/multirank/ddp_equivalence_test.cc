// DDP (engine::Trainer on a dp mesh of the local backend) against single-rank training on
// the same global batches: dp in {1, 2, 4} x micro-batches {1, 2} x {f32, bf16}, 10 AdamW
// steps each. Also: replicas stay bitwise equal, buckets start during backward, the comm
// ledger counts the gradient bytes, an overflow on one rank makes every rank skip, and bad
// layouts are named errors before any work.
#include <cmath>
#include <cstdio>
#include <cstring>

#include <map>
#include <nlohmann/json.hpp>

#include "core/trace.h"
#include "multirank/coll_util.h"
#include "multirank/dp_test_util.h"
#include "parallel/ddp_strategy.h"

namespace dt {
namespace DT_TEST_NS {

nn::GPTConfig tiny(DType dtype) { return test::dp_tiny_gpt(dtype); }
engine::TrainOptions options(int64_t micro) { return test::dp_options(micro); }
using test::rel_dist;

constexpr int kSteps = 10;
constexpr int64_t kB = 8, kT = 16;

// Losses of kSteps steps and the final parameters, trained on `mesh` (null: one device).
struct TrainRun {
  std::vector<double> losses;
  std::vector<std::vector<double>> params;
};

TrainRun train(std::shared_ptr<comm::Mesh> mesh, DType dtype, int64_t micro, int64_t bucket_bytes = 4096) {
  nn::GPT model(tiny(dtype));
  optim::AdamW opt(model.parameters(), test::dp_adamw());
  engine::ParallelOptions p;
  p.bucket_bytes = bucket_bytes;
  engine::Trainer t(mesh, model, opt, options(micro), p);
  TrainRun r;
  for (int s = 0; s < kSteps; ++s) {
    test::TokenBatch b = test::random_token_batch(kB, kT, 32, 100 + s % 2);  // two batches, learnable
    b.tg.data<int32_t>()[3] = -1;  // an ignored target, so ranks hold different counts
    r.losses.push_back(t.train_step(b.in, b.tg).loss);
  }
  for (nn::Parameter* q : model.parameters()) r.params.push_back(test::to_f64(q->value));
  // Every replica ends bitwise equal to local rank 0's.
  for (int i = 1; i < t.local_replicas(); ++i) {
    nn::ParamList a = t.model(0).parameters(), b = t.model(i).parameters();
    for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(test::same_bits(a[k]->value, b[k]->value)) << "replica " << i << " " << a[k]->name;
  }
  return r;
}

TEST(DDP, MatchesSingleRankTraining) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (int64_t micro : {1, 2}) {
      const TrainRun ref = train(nullptr, dtype, micro);
      for (int dp : {1, 2, 4}) {
        const TrainRun got = train(comm::test::world_mesh(dp), dtype, micro);
        // f32: the gradient sums are grouped by rank, so equal up to rounding (measured
        // <= 6e-8 per-step loss, <= 1.6e-6 parameters). bf16: each rank's bf16 bucket rounds
        // its partial sum once more, and bf16 weights carry it on (measured <= 7e-5 loss,
        // <= 4.4e-3 parameters). Tolerances about 100x and 5x above those.
        const double loss_tol = dtype == DType::F32 ? 1e-5 : 2e-3, param_tol = dtype == DType::F32 ? 1e-4 : 2e-2;
        const double worst = test::worst_rel_loss(got.losses, ref.losses);
        const double dist = rel_dist(got.params, ref.params);
        std::printf("%s micro %lld dp %d: worst step loss rel diff %.2e, param rel dist %.2e (loss %.4f -> %.4f)\n",
                    dtype_name(dtype), static_cast<long long>(micro), dp, worst, dist, got.losses.front(),
                    got.losses.back());
        EXPECT_LE(worst, loss_tol) << dtype_name(dtype) << " micro " << micro << " dp " << dp;
        EXPECT_LE(dist, param_tol) << dtype_name(dtype) << " micro " << micro << " dp " << dp;
        EXPECT_LT(got.losses.back(), got.losses.front());
      }
    }
}

TEST(DDP, SameLayoutSameSeedIsBitwise) {
  const TrainRun a = train(comm::test::world_mesh(2), DType::F32, 2), b = train(comm::test::world_mesh(2), DType::F32, 2);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.params, b.params);
}

TEST(DDP, BucketsStartDuringBackwardAndTheLedgerCountsThem) {
  auto mesh = comm::test::world_mesh(2);
  nn::GPT model(tiny(DType::F32));
  optim::AdamW opt(model.parameters(), optim::AdamWOptions{});
  engine::ParallelOptions p;
  p.bucket_bytes = 8192;
  engine::Trainer t(mesh, model, opt, options(1), p);
  test::TokenBatch b = test::random_token_batch(kB, kT, 32, 1);
  t.train_step(b.in, b.tg);
  const auto* ddp = t.replica(0).strategy<parallel::DdpStrategy>();
  ASSERT_NE(ddp, nullptr);
  const parallel::GradBuckets* buckets = &ddp->buckets();
  int64_t grad_bytes = 0;
  for (nn::Parameter* q : model.parameters()) grad_bytes += static_cast<int64_t>(q->grad.nbytes());
  EXPECT_EQ(buckets->total_bytes(), grad_bytes);
  EXPECT_GT(buckets->num_buckets(), 3);
  // Every bucket was launched by the grad-ready hook, before backward ended.
  EXPECT_EQ(buckets->launched_early(), buckets->num_buckets());
  // The ledger: one all-reduce per bucket plus the loss (2 floats), per rank.
  for (int rank : {0, 1}) {
    comm::Communicator* c = mesh->find_comm(rank, "dp");
    ASSERT_NE(c, nullptr);
    const comm::CollStats s = c->ledger().get(comm::CollKind::AllReduce);
    EXPECT_EQ(s.calls, buckets->num_buckets() + 1) << "rank " << rank;
    EXPECT_EQ(s.bytes, grad_bytes + 8) << "rank " << rank;
  }
}

TEST(DDP, TheTraceShowsEveryRankAndAllReducesStartingDuringBackward) {
  auto mesh = comm::test::world_mesh(2);
  nn::GPT model(tiny(DType::F32));
  optim::AdamW opt(model.parameters(), optim::AdamWOptions{});
  engine::ParallelOptions p;
  p.bucket_bytes = 8192;
  engine::Trainer t(mesh, model, opt, options(1), p);
  test::TokenBatch b = test::random_token_batch(kB, kT, 32, 1);
  trace_enable(true);
  t.train_step(b.in, b.tg);
  trace_enable(false);
  const nlohmann::json j = nlohmann::json::parse(trace_json());
  std::map<std::string, int> names;  // track name -> tid
  double first_comm_start[2] = {1e300, 1e300}, last_backward_end[2] = {0, 0};
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M") names[e["args"]["name"].get<std::string>()] = e["tid"].get<int>();
    if (e["ph"] != "X") continue;
    const int tid = e["tid"].get<int>(), rank = tid / 2;
    const std::string name = e["name"].get<std::string>();
    const double ts = e["ts"].get<double>(), end = ts + e["dur"].get<double>();
    if (tid % 2 == 1) first_comm_start[rank] = std::min(first_comm_start[rank], ts);
    if (name.rfind("backward", 0) == 0) last_backward_end[rank] = std::max(last_backward_end[rank], end);
  }
  for (const char* track : {"rank 0 compute", "rank 0 comm", "rank 1 compute", "rank 1 comm"})
    EXPECT_TRUE(names.count(track)) << "no track \"" << track << "\"";
  for (int r : {0, 1}) EXPECT_LT(first_comm_start[r], last_backward_end[r]) << "rank " << r << ": no overlap";
  EXPECT_NE(trace_json().find("wait for gradient all-reduce"), std::string::npos);
}

TEST(DDP, AnOverflowOnOneRankSkipsTheStepOnEveryRank) {
  auto mesh = comm::test::world_mesh(2);
  nn::GPT model(tiny(DType::F16));
  optim::AdamW opt(model.parameters(), optim::AdamWOptions{});
  engine::TrainOptions o = options(1);
  o.loss_scaler.init_scale = 1024.0f;
  engine::Trainer t(mesh, model, opt, o);
  test::TokenBatch b = test::random_token_batch(kB, kT, 32, 2);
  t.train_step(b.in, b.tg);
  std::vector<std::vector<double>> before[2];
  for (int i : {0, 1})
    for (nn::Parameter* q : t.model(i).parameters()) before[i].push_back(test::to_f64(q->value));
  // Rank 1 alone finds an Inf in a gradient of its last block.
  bool planted = false;
  t.replica(1).set_grad_ready_hook([&](const nn::ParamList& ready) {
    if (planted) return;
    kernels::fill(ready[0]->grad, INFINITY);
    planted = true;
  });
  engine::StepStats s = t.train_step(b.in, b.tg);
  EXPECT_TRUE(s.skipped);
  EXPECT_EQ(t.step(), 1);
  for (int i : {0, 1}) {
    EXPECT_EQ(t.replica(i).step(), 1) << "replica " << i;
    EXPECT_EQ(t.replica(i).loss_scaler()->scale(), 512.0f) << "replica " << i;
    std::vector<std::vector<double>> after;
    for (nn::Parameter* q : t.model(i).parameters()) after.push_back(test::to_f64(q->value));
    EXPECT_EQ(after, before[i]) << "replica " << i << " changed on a skipped step";
  }
}

TEST(DDP, BadLayoutsAndBatchesAreNamedErrors) {
  nn::GPT model(tiny(DType::F32));
  optim::AdamW opt(model.parameters(), optim::AdamWOptions{});
  engine::Trainer t(comm::test::world_mesh(4), model, opt, options(2));
  test::TokenBatch b = test::random_token_batch(4, kT, 32, 3);  // 4 rows over dp 4 x micro 2
  test::expect_invalid([&] { t.train_step(b.in, b.tg); }, "not divisible by dp (4) x micro_batches (2)");
  EXPECT_EQ(t.step(), 0);
}

}  // namespace
}  // namespace dt
