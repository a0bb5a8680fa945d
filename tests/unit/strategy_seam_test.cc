// The strategy seam (parallel/strategy.h): the order in which the engine calls a strategy's
// hooks in a step and in evaluate, that the grad-ready hook runs before the strategies see
// a unit's final gradients, and that conflicting strategies are refused when attached.
#include <string>
#include <vector>

#include "comm/mesh.h"
#include "engine/train_engine.h"
#include "multirank/dp_test_util.h"
#include "parallel/strategy.h"

namespace dt {
namespace DT_TEST_NS {

using parallel::Part;

const char* part_name(Part p) { return p == Part::Embed ? "embed" : p == Part::Block ? "block" : "head"; }

// Records every hook as "hook unit part".
class Recorder : public parallel::Strategy {
 public:
  explicit Recorder(std::vector<std::string>& log, std::string name = "recorder") : log_(log), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  void begin_step() override { log_.push_back("begin_step"); }
  void before_forward(int u, Part p) override { add("fwd<", u, p); }
  void after_forward(int u, Part p) override { add("fwd>", u, p); }
  void end_forward_only() override { log_.push_back("end_forward_only"); }
  void before_backward(int u, Part p) override { add("bwd<", u, p); }
  void after_backward(int u, Part p, bool last) override { add(last ? "bwd>last" : "bwd>", u, p); }
  void finish_grads() override { log_.push_back("finish_grads"); }
  void after_update() override { log_.push_back("after_update"); }

 private:
  void add(const char* what, int u, Part p) { log_.push_back(std::string(what) + " " + std::to_string(u) + " " + part_name(p)); }
  std::vector<std::string>& log_;
  std::string name_;
};

// A strategy that claims a batch group, to test the one-splitter rule.
class Splitter : public parallel::Strategy {
 public:
  explicit Splitter(comm::Communicator& g, std::string name) : g_(g), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  comm::Communicator* batch_group() override { return &g_; }

 private:
  comm::Communicator& g_;
  std::string name_;
};

nn::GPTConfig two_blocks() { return test::dp_tiny_gpt(DType::F32); }  // 2 blocks

std::vector<std::string> forward_order() {
  return {"fwd< 0 embed", "fwd> 0 embed", "fwd< 1 block", "fwd> 1 block",
          "fwd< 2 block", "fwd> 2 block", "fwd< 0 head",  "fwd> 0 head"};
}

std::vector<std::string> backward_order(bool last) {
  const std::string done = last ? "bwd>last" : "bwd>";
  return {"bwd< 0 head",  done + " 0 head",  "bwd< 2 block", done + " 2 block",
          "bwd< 1 block", done + " 1 block", "bwd< 0 embed", done + " 0 embed"};
}

TEST(StrategySeam, HooksFollowTheDocumentedOrder) {
  nn::GPT m(two_blocks());
  optim::Sgd opt(m.parameters(), optim::SgdOptions{});
  engine::TrainOptions o;
  o.micro_batches = 2;
  engine::TrainEngine eng(nullptr, m, opt, o);
  ASSERT_EQ(eng.units().params.size(), 3u);
  EXPECT_EQ(eng.units().names, (std::vector<std::string>{"embed_head", "block.0", "block.1"}));
  std::vector<std::string> log;
  // The grad-ready hook runs, in the last micro-batch only, before the strategies see the unit.
  eng.set_grad_ready_hook([&](const nn::ParamList& ready) { log.push_back("ready " + std::to_string(ready.size())); });
  eng.attach(std::make_unique<Recorder>(log));
  test::TokenBatch b = test::random_token_batch(4, 8, 11, 1);
  eng.train_step(b.in, b.tg);

  std::vector<std::string> want = {"begin_step"};
  for (int micro = 0; micro < 2; ++micro) {
    for (auto& s : forward_order()) want.push_back(s);
    for (auto& s : backward_order(micro == 1)) {
      if (micro == 1 && s.rfind("bwd>last", 0) == 0 && s.find("head") == std::string::npos) {
        const int unit = s[9] - '0';
        want.push_back("ready " + std::to_string(eng.units().params[static_cast<size_t>(unit)].size()));
      }
      want.push_back(s);
    }
  }
  want.push_back("finish_grads");
  want.push_back("after_update");
  EXPECT_EQ(log, want);

  log.clear();
  eng.evaluate(b.in, b.tg);  // two micro-batches, forward only
  want.clear();
  for (int micro = 0; micro < 2; ++micro) {
    for (auto& s : forward_order()) want.push_back(s);
    want.push_back("end_forward_only");
  }
  EXPECT_EQ(log, want);
}

TEST(StrategySeam, RefusesTwoStrategiesThatSplitTheBatchOrShareAName) {
  nn::GPT m(two_blocks());
  optim::Sgd opt(m.parameters(), optim::SgdOptions{});
  engine::TrainEngine eng(nullptr, m, opt, engine::TrainOptions{});
  std::vector<std::string> log;
  eng.attach(std::make_unique<Recorder>(log));
  test::expect_invalid([&] { eng.attach(std::make_unique<Recorder>(log)); }, "strategy \"recorder\" is attached already");
  test::expect_invalid([&] { eng.attach(nullptr); }, "a strategy is required");
  auto mesh = comm::Mesh::create("local", {1, 1, 1, 1, 1}, comm::BackendOptions{});
  comm::Communicator& dp = mesh->comm(0, "dp");
  eng.attach(std::make_unique<Splitter>(dp, "first"));
  test::expect_invalid([&] { eng.attach(std::make_unique<Splitter>(dp, "second")); },
                       "strategy \"second\" splits the batch, and an attached one does already");
  EXPECT_NE(eng.strategy<Recorder>(), nullptr);
  EXPECT_EQ(eng.strategy<parallel::Strategy>()->name(), "recorder");
}

}  // namespace
}  // namespace dt
