#include "serve/model_runner.h"

#include <algorithm>

#include "comm/mesh.h"
#include "core/device_scope.h"
#include "core/error.h"
#include "engine/generate.h"
#include "parallel/layout.h"
#include "parallel/stage_stream.h"

namespace dt::serve {
namespace {

void append_rows(const Tensor& logits, std::vector<float>& out) {
  if (!logits.defined()) return;
  Tensor f32, host;
  const float* p = engine::host_f32_logits(logits, f32, host);
  out.insert(out.end(), p, p + logits.numel());
}

class SingleRunner final : public ModelRunner {
 public:
  explicit SingleRunner(nn::GPT& m) : m_(m), cfg_(m.config().resolved()) {
    DT_CHECK(m.whole(), "serving: the model is a pipeline stage; accepted: a whole model (or a mesh with pp)");
  }
  int replicas() const override { return 1; }
  const nn::GPTConfig& config() const override { return cfg_; }
  int64_t bytes_per_block(int64_t bs) const override {
    return nn::PagedKv::bytes_per_block(cfg_, bs, m_.local_kv_heads());
  }
  void create_caches(int64_t nb, int64_t bs) override {
    ScopedDevice on(m_.device());
    kv_ = nn::PagedKv::create(cfg_, nb, bs, m_.local_kv_heads());
  }
  void run(const std::vector<nn::PagedBatch>& b, std::vector<std::vector<float>>& logits) override {
    logits.assign(1, {});
    if (b.at(0).seqs.empty()) return;
    m_.forward_paged(b[0], kv_, logits_);
    append_rows(logits_, logits[0]);
  }
  std::string layout() const override { return "1 replica on " + m_.device().str(); }

 private:
  nn::GPT& m_;
  nn::GPTConfig cfg_;
  nn::PagedKv kv_;
  Tensor logits_;
};

// The step's sequences cut into up to n groups of about equal tokens, in order.
std::vector<nn::PagedBatch> split_batch(const nn::PagedBatch& b, int n) {
  const int64_t S = static_cast<int64_t>(b.seqs.size()), G = std::min<int64_t>(S, n);
  const int64_t total = static_cast<int64_t>(b.ids.size());
  std::vector<nn::PagedBatch> out(static_cast<size_t>(G));
  int64_t seen = 0, g = 0;
  for (int64_t i = 0; i < S; ++i) {
    const nn::PagedBatch::Seq& q = b.seqs[static_cast<size_t>(i)];
    // Move to the next group once this one has its share, leaving a sequence for each later group.
    if (!out[g].seqs.empty() && g + 1 < G && (seen * G >= total * (g + 1) || S - i <= G - g - 1)) ++g;
    nn::PagedBatch& o = out[static_cast<size_t>(g)];
    o.ids.insert(o.ids.end(), b.ids.begin() + seen, b.ids.begin() + seen + q.count);
    o.seqs.push_back(q);
    seen += q.count;
  }
  return out;
}

class LayoutRunner final : public ModelRunner {
 public:
  explicit LayoutRunner(parallel::Layout& t) : t_(t), cfg_(t.part(0).config().resolved()) {
    multi_process_ = !t.in_process();
    if (multi_process_) {
      DT_CHECK(t.local_parts() == 1, "serving across processes: one rank per process (mpirun)");
      // The world communicator, made now: under MPI every process makes it at once.
      t.run([&](int li, int rank) {
        t.world(li);
        world_rank_ = rank;
      });
    }
    DT_CHECK(t.virtual_stages() == 1, "serving: virtual_stages = " + std::to_string(t.virtual_stages()) +
                                          "; accepted: 1 (a token would go round the pipeline once per chunk)");
    kv_.resize(static_cast<size_t>(t.local_parts()));
  }
  int replicas() const override { return t_.dp(); }
  const nn::GPTConfig& config() const override { return cfg_; }
  int64_t bytes_per_block(int64_t bs) const override {
    int64_t most = 0;
    for (int i = 0; i < t_.local_parts(); ++i) {
      nn::GPT& m = t_.part(i);
      most = std::max(most, nn::PagedKv::bytes_per_block(cfg_, bs, m.local_kv_heads(), m.chunks()));
    }
    return most;
  }
  void create_caches(int64_t nb, int64_t bs) override {
    t_.run([&](int li, int) {
      nn::GPT& m = t_.part(li);
      ScopedDevice on(m.device());
      kv_[static_cast<size_t>(li)] = nn::PagedKv::create(cfg_, nb, bs, m.local_kv_heads(), m.chunks());
    });
  }
  void run(const std::vector<nn::PagedBatch>& batches, std::vector<std::vector<float>>& logits) override {
    DT_CHECK(static_cast<int>(batches.size()) == t_.dp(), "serving: one batch per replica");
    logits.assign(batches.size(), {});
    if (!multi_process_) {
      t_.run([&](int li, int rank) {
        const comm::Coords c = t_.coords(rank);
        std::vector<float>* out = c[comm::kTp] == 0 ? &logits[static_cast<size_t>(c[comm::kDp])] : nullptr;
        step_on(li, batches[static_cast<size_t>(c[comm::kDp])], out);
      });
      return;
    }
    // Across processes: the plan goes to every rank, each runs its part, and the ranks
    // holding logits (tp 0 of each replica's last stage) send them to this one.
    t_.run([&](int li, int rank) {
      comm::Communicator& world = t_.world(li);
      broadcast_plan(world, encode(kStep, batches));
      const comm::Coords me = t_.coords(rank);
      std::vector<float> mine;
      step_on(li, batches[static_cast<size_t>(me[comm::kDp])], owner_of(me[comm::kDp]) == rank ? &mine : nullptr);
      for (int d = 0; d < t_.dp(); ++d) {
        std::vector<float>& dst = logits[static_cast<size_t>(d)];
        if (owner_of(d) == rank) {
          dst = std::move(mine);
        } else if (const int64_t n = sampled_rows(batches[static_cast<size_t>(d)]) * cfg_.vocab_size; n > 0) {
          dst.resize(static_cast<size_t>(n));
          world.recv(dst.data(), n, DType::F32, owner_of(d), parallel::tag_of(parallel::StageTag::ServeLogits));
        }
      }
    });
  }
  bool leader() const override { return !multi_process_ || world_rank_ == 0; }
  void follow() override {
    DT_CHECK(!leader(), "serving: follow() is for the processes other than world rank 0");
    t_.run([&](int li, int rank) {
      comm::Communicator& world = t_.world(li);
      for (;;) {
        std::vector<nn::PagedBatch> batches;
        const int64_t kind = decode(broadcast_plan(world, {}), batches);
        if (kind == kStop) return;
        if (kind != kStep) continue;  // an idle tick: the leader is alive
        const comm::Coords me = t_.coords(rank);
        const int d = me[comm::kDp];
        std::vector<float> mine;
        const bool owner = owner_of(d) == rank;
        step_on(li, batches[static_cast<size_t>(d)], owner ? &mine : nullptr);
        if (owner && !mine.empty()) world.send(mine.data(), static_cast<int64_t>(mine.size()), DType::F32, 0, parallel::tag_of(parallel::StageTag::ServeLogits));
      }
    });
  }
  void idle_tick() override {
    if (multi_process_) t_.run([&](int li, int) { broadcast_plan(t_.world(li), {kIdle}); });
  }
  void stop() override {
    if (multi_process_ && leader()) t_.run([&](int li, int) { broadcast_plan(t_.world(li), {kStop}); });
  }
  std::string layout() const override {
    return std::to_string(t_.dp()) + (t_.dp() == 1 ? " replica" : " replicas") + " x tp " + std::to_string(t_.tp()) +
           " x pp " + std::to_string(t_.pp());
  }

 private:
  enum : int64_t { kStep = 0, kIdle = 1, kStop = 2 };

  // This rank's part of its replica's step; `out` (tp 0 of the last stage) gets the logits.
  void step_on(int li, const nn::PagedBatch& b, std::vector<float>* out) {
    if (b.seqs.empty()) return;
    nn::GPT& m = t_.part(li);
    nn::PagedKv& kv = kv_[static_cast<size_t>(li)];
    Tensor lg;
    if (t_.pp() == 1) {
      m.forward_paged(b, kv, lg);
      if (out) append_rows(lg, *out);
      return;
    }
    // Pipeline: the groups follow each other through the stages (eager sends), so stage s
    // works on group g while stage s + 1 works on group g - 1.
    comm::Communicator& pp = *t_.group(li, comm::kPp);
    const int stage = pp.rank(), P = pp.size();
    const nn::BlockRange r = m.chunks().at(0);
    parallel::StageStream stream(pp);
    Tensor x;
    const std::vector<nn::PagedBatch> groups = split_batch(b, P);
    for (size_t g = 0; g < groups.size(); ++g) {
      kv.begin_step(groups[g]);
      if (stage == 0) {
        m.paged_embed(groups[g], kv, x);
      } else {
        nn::ensure(x, {1, kv.step.tokens, cfg_.d_model}, cfg_.dtype);
        stream.recv(x, stage - 1, parallel::StageTag::ServeHidden);
      }
      m.paged_blocks(r.begin, r.end, x, kv);
      if (stage + 1 < P) {
        stream.send(x, stage + 1, parallel::StageTag::ServeHidden);
      } else {
        m.paged_head(x, kv, lg);
        if (out) append_rows(lg, *out);
      }
    }
    stream.wait();
  }
  // The world rank whose logits replica d's step gives: tp 0 of its last stage.
  int owner_of(int d) const { return t_.rank_of({d, t_.pp() - 1, 0, 0, 0}); }
  static int64_t sampled_rows(const nn::PagedBatch& b) {
    return std::count_if(b.seqs.begin(), b.seqs.end(), [](const nn::PagedBatch::Seq& q) { return q.logits; });
  }
  // The plan as int64s: kind, replicas, then per replica its sequences (count, then start,
  // count, logits, blocks, the block ids) and its ids.
  static std::vector<int64_t> encode(int64_t kind, const std::vector<nn::PagedBatch>& batches) {
    std::vector<int64_t> m = {kind, static_cast<int64_t>(batches.size())};
    for (const nn::PagedBatch& b : batches) {
      m.push_back(static_cast<int64_t>(b.seqs.size()));
      for (const nn::PagedBatch::Seq& q : b.seqs) {
        m.insert(m.end(), {q.start, q.count, q.logits ? 1 : 0, static_cast<int64_t>(q.blocks.size())});
        m.insert(m.end(), q.blocks.begin(), q.blocks.end());
      }
      m.push_back(static_cast<int64_t>(b.ids.size()));
      m.insert(m.end(), b.ids.begin(), b.ids.end());
    }
    return m;
  }
  static int64_t decode(const std::vector<int64_t>& m, std::vector<nn::PagedBatch>& batches) {
    size_t i = 0;
    auto next = [&] {
      DT_CHECK(i < m.size(), "serving: a truncated plan from world rank 0");
      return m[i++];
    };
    const int64_t kind = next();
    if (kind != kStep) return kind;
    batches.resize(static_cast<size_t>(next()));
    for (nn::PagedBatch& b : batches) {
      b.seqs.resize(static_cast<size_t>(next()));
      for (nn::PagedBatch::Seq& q : b.seqs) {
        q.start = next();
        q.count = next();
        q.logits = next() != 0;
        q.blocks.resize(static_cast<size_t>(next()));
        for (int32_t& x : q.blocks) x = static_cast<int32_t>(next());
      }
      b.ids.resize(static_cast<size_t>(next()));
      for (int32_t& x : b.ids) x = static_cast<int32_t>(next());
    }
    return kind;
  }
  // World rank 0's plan to every rank: its length, then its contents (others pass {}).
  std::vector<int64_t> broadcast_plan(comm::Communicator& world, std::vector<int64_t> plan) {
    int64_t n = static_cast<int64_t>(plan.size());
    world.broadcast(&n, &n, 1, DType::I64, 0);
    plan.resize(static_cast<size_t>(n));
    world.broadcast(plan.data(), plan.data(), n, DType::I64, 0);
    return plan;
  }

  parallel::Layout& t_;
  nn::GPTConfig cfg_;
  std::vector<nn::PagedKv> kv_;  // per local replica
  bool multi_process_ = false;
  int world_rank_ = 0;
};

}  // namespace

std::unique_ptr<ModelRunner> single_model_runner(nn::GPT& model) { return std::make_unique<SingleRunner>(model); }
std::unique_ptr<ModelRunner> layout_runner(parallel::Layout& layout) {
  if (layout.ep() > 1)
    fail(DT_ERR_UNSUPPORTED, "serving with expert parallelism (ep = " + std::to_string(layout.ep()) +
                                 "): not yet; accepted: ep = 1 (replicas, tp and pp serve a mixture of experts whole)");
  if (layout.cp() > 1)
    fail(DT_ERR_UNSUPPORTED, "serving with context parallelism (cp = " + std::to_string(layout.cp()) +
                                 "): not yet (a long prefill could run round a cp ring; decode has no sequence to "
                                 "split); accepted: cp = 1 (replicas, tp or pp)");
  return std::make_unique<LayoutRunner>(layout);
}

}  // namespace dt::serve
