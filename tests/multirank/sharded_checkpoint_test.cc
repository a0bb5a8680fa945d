// Sharded checkpoints across layouts (engine/trainer_checkpoint.cc): a run saved after 3
// steps under one layout and resumed for 3 more under another matches 6 uninterrupted steps
// of one rank (f32, 2e-5 relative: the equivalence tests' bound), for every pair of: one
// rank, dp 2 ZeRO-1, dp 2 ZeRO-3, dp 4 ZeRO-2, tp 2 + SP, pp 2 interleaved (2 chunks a
// rank), dp 2 x tp 2 x pp 2; bitwise where the layout does not change. The optimizer state
// is resharded exactly: what a layout holds after the load, gathered, equals bit for bit what
// the saving layout held, gathered. Every rank wrote its own file and none the whole state.
// Mixture-of-experts layouts (ep 2, ep 4, dp 2 x ep 2 ZeRO-1) and context-parallel ones (cp
// 2, dp 2 x cp 2 ZeRO-2) resume under one rank and each other the same way.
#include <filesystem>
#include <unistd.h>

#include "core/allocator.h"
#include "io/file_util.h"
#include "io/checkpoint.h"
#include "multirank/coll_util.h"
#include "multirank/dp_test_util.h"

namespace dt {
namespace DT_TEST_NS {

constexpr int kSteps = 6;
using test::kSanitized;

struct Case {
  const char* name;
  comm::Coords axes;  // dp, pp, ep, cp, tp
  int zero = 0;
  bool sp = false;
  int virtual_stages = 1;
  int64_t micro = 1;
};

const Case kLayouts[] = {
    {"one rank", {1, 1, 1, 1, 1}, 0, false, 1, 4},
    {"dp 2 zero 1", {2, 1, 1, 1, 1}, 1, false, 1, 2},
    {"dp 2 zero 3", {2, 1, 1, 1, 1}, 3, false, 1, 2},
    {"dp 4 zero 2", {4, 1, 1, 1, 1}, 2, false, 1, 1},
    {"tp 2 + SP", {1, 1, 1, 1, 2}, 0, true, 1, 4},
    {"pp 2 interleaved", {1, 2, 1, 1, 1}, 0, false, 2, 4},
    {"dp 2 x tp 2 x pp 2", {2, 2, 1, 1, 2}, 0, false, 1, 2},
};

nn::GPTConfig config() {
  nn::GPTConfig c = test::tp_tiny_gpt(/*llama=*/true, DType::F32);
  c.n_layer = 4;
  return c;
}

test::TokenBatch batch(int s) { return test::random_token_batch(8, 16, 32, 900 + s); }

std::shared_ptr<comm::Mesh> mesh_of(const Case& l) {
  int world = 1;
  for (int a : l.axes) world *= a;
  return world == 1 ? nullptr : comm::test::axes_mesh(l.axes);
}

engine::ParallelOptions par_of(const Case& l) {
  engine::ParallelOptions p;
  p.zero = l.zero;
  p.sequence_parallel = l.sp;
  p.virtual_stages = l.virtual_stages;
  if (l.virtual_stages > 1) p.pp_schedule = "interleaved";
  return p;
}

// Every state tensor gathered whole (parameters, moments, the step), by name.
std::map<std::string, Tensor> gathered(engine::Trainer& t) {
  std::map<std::string, Tensor> out;
  for (auto& st : t.state_tensors()) out[st.name] = test::converted(st.tensor, st.tensor.dtype());
  return out;
}

struct Resumed {
  std::vector<double> losses;
  std::vector<std::vector<double>> params;
  std::map<std::string, Tensor> saved_state, loaded_state;
  size_t files = 0;
  uintmax_t largest_file = 0, all_files = 0;
};

Resumed resume(const Case& a, const Case& b, const std::string& dir, const nn::GPTConfig& c = config()) {
  Resumed r;
  std::filesystem::remove_all(dir);
  {
    nn::GPT model(c);
    optim::AdamW opt(model.parameters(), test::dp_adamw());
    engine::Trainer t(mesh_of(a), model, opt, test::dp_options(a.micro), par_of(a));
    for (int s = 0; s < kSteps / 2; ++s) r.losses.push_back(t.train_step(batch(s).in, batch(s).tg).loss);
    t.save(dir, {{"sampler", 42}}, "ckpt");
    r.saved_state = gathered(t);
  }
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") {
      ++r.files;
      r.largest_file = std::max(r.largest_file, e.file_size());
      r.all_files += e.file_size();
    }
  nn::GPT model(c);
  optim::AdamW opt(model.parameters(), test::dp_adamw());
  engine::Trainer t(mesh_of(b), model, opt, test::dp_options(b.micro), par_of(b));
  const nlohmann::json extra = t.load(dir, "ckpt");
  EXPECT_EQ(extra.value("sampler", -1), 42);
  EXPECT_EQ(t.step(), kSteps / 2);
  r.loaded_state = gathered(t);
  for (int s = kSteps / 2; s < kSteps; ++s) r.losses.push_back(t.train_step(batch(s).in, batch(s).tg).loss);
  t.gather_model();
  r.params = test::values_of(model);
  return r;
}

TEST(ShardedCheckpoint, EveryLayoutResumesUnderEveryOther) {
  const std::string dir = ::testing::TempDir() + "dtrain_sharded_" + std::to_string(::getpid());
  const test::TrainRun ref = test::train_layout(nullptr, config(), test::dp_options(4), {}, kSteps, batch);
  int pairs = 0;
  for (const Case& a : kLayouts)
    for (const Case& b : kLayouts) {
      // The sanitizer builds run three crossings: ZeRO-3 into tp + SP, 3-D into one rank and back.
      const int ia = static_cast<int>(&a - kLayouts), ib = static_cast<int>(&b - kLayouts);
      if (kSanitized && !((ia == 2 && ib == 4) || (ia == 6 && ib == 0) || (ia == 0 && ib == 6))) continue;
      const std::string what = std::string(a.name) + " -> " + b.name;
      const Resumed got = resume(a, b, dir);
      const double loss = test::worst_rel_loss(got.losses, ref.losses), params = test::rel_dist(got.params, ref.params);
      EXPECT_LT(loss, 2e-5) << what;
      EXPECT_LT(params, 2e-5) << what;
      // The state the saving layout held is the state the loading layout holds, exactly.
      ASSERT_EQ(got.saved_state.size(), got.loaded_state.size()) << what;
      for (const auto& [name, t] : got.saved_state)
        EXPECT_TRUE(test::same_bits(t, got.loaded_state.at(name))) << what << ": " << name;
      // Each rank wrote its own file; with several ranks none holds the whole state.
      int world = 1;
      for (int x : a.axes) world *= x;
      EXPECT_EQ(got.files, static_cast<size_t>(world)) << what;
      if (world > 1) EXPECT_LT(got.largest_file, got.all_files * 3 / 4) << what;
      std::printf("%-22s -> %-22s loss %.1e params %.1e; %zu files, the largest %.0f%% of %ju bytes\n", a.name, b.name,
                  loss, params, got.files, 100.0 * static_cast<double>(got.largest_file) / static_cast<double>(got.all_files),
                  got.all_files);
      ++pairs;
    }
  std::printf("%d layout pairs resumed\n", pairs);
  std::filesystem::remove_all(dir);
}

TEST(ShardedCheckpoint, ExpertAndContextLayoutsResumeUnderOthers) {
  // A mixture of experts: each ep rank writes its own experts; the shared tensors once. The
  // auxiliary losses are per micro-batch, so every layout runs micro-batches of 2 rows.
  nn::GPTConfig moe = config();
  moe.n_experts = 4;
  moe.d_ff = 48;
  moe.moe_shared_d_ff = 24;
  moe.moe_shared_gate = true;
  const Case one{"one rank", {1, 1, 1, 1, 1}, 0, false, 1, 4}, ep2{"ep 2", {1, 1, 2, 1, 1}, 0, false, 1, 2},
      ep4{"ep 4", {1, 1, 4, 1, 1}, 0, false, 1, 1}, dp_ep{"dp 2 x ep 2 zero 1", {2, 1, 2, 1, 1}, 1, false, 1, 1},
      cp2{"cp 2", {1, 1, 1, 2, 1}, 0, false, 1, 4}, dp_cp{"dp 2 x cp 2 zero 2", {2, 1, 1, 2, 1}, 2, false, 1, 2};
  const std::string dir = ::testing::TempDir() + "dtrain_sharded_ep_" + std::to_string(::getpid());
  const test::TrainRun moe_ref = test::train_layout(nullptr, moe, test::dp_options(4), {}, kSteps, batch);
  const test::TrainRun ref = test::train_layout(nullptr, config(), test::dp_options(4), {}, kSteps, batch);
  struct Pair {
    const Case *a, *b;
    bool experts;
  };
  for (const Pair& p : {Pair{&ep2, &one, true}, Pair{&one, &dp_ep, true}, Pair{&ep4, &ep2, true},
                        Pair{&dp_ep, &ep4, true}, Pair{&cp2, &one, false}, Pair{&one, &dp_cp, false},
                        Pair{&dp_cp, &cp2, false}}) {
    if (kSanitized && p.a != &ep2 && p.a != &cp2) continue;
    const std::string what = std::string(p.a->name) + " -> " + p.b->name;
    const Resumed got = resume(*p.a, *p.b, dir, p.experts ? moe : config());
    const test::TrainRun& r = p.experts ? moe_ref : ref;
    const double loss = test::worst_rel_loss(got.losses, r.losses), params = test::rel_dist(got.params, r.params);
    EXPECT_LT(loss, 2e-5) << what;
    EXPECT_LT(params, 2e-5) << what;
    for (const auto& [name, t] : got.saved_state) EXPECT_TRUE(test::same_bits(t, got.loaded_state.at(name))) << what << ": " << name;
    std::printf("%-22s -> %-22s loss %.1e params %.1e; %zu files\n", p.a->name, p.b->name, loss, params, got.files);
  }
  std::filesystem::remove_all(dir);
}

int64_t staged_bytes() { return ledger_for(Device::cpu()).current(DT_MEM_CHECKPOINT); }
std::string bytes_of(const std::string& path) {
  const std::vector<char> b = io::read_file(path);
  return std::string(b.begin(), b.end());
}

TEST(ShardedCheckpoint, AnAsynchronousSaveCommitsWhatASynchronousOneWouldHave) {
  // save_async after step 3, then steps 4 to 6 while the files are written: the checkpoint
  // committed holds step 3's state, file for file what save writes, and resumes like it.
  const std::string dir = ::testing::TempDir() + "dtrain_async_" + std::to_string(::getpid());
  for (const Case& l : {kLayouts[0], kLayouts[2], kLayouts[6]}) {
    if (kSanitized && &l != &kLayouts[2]) continue;
    std::filesystem::remove_all(dir);
    nn::GPT model(config());
    optim::AdamW opt(model.parameters(), test::dp_adamw());
    engine::Trainer t(mesh_of(l), model, opt, test::dp_options(l.micro), par_of(l));
    for (int s = 0; s < kSteps / 2; ++s) t.train_step(batch(s).in, batch(s).tg);
    t.save(dir + "/sync", nlohmann::json::object(), "ckpt");
    const int64_t before = staged_bytes();
    t.save_async(dir + "/async", nlohmann::json::object(), "ckpt");
    const int64_t staged = staged_bytes() - before;
    EXPECT_GT(staged, 0) << l.name << ": the staged copy is in the ledger";
    // Each rank stages its share only: rank 0's staging is about what rank 0 writes.
    if (const Ledger* r0 = rank_ledger(Device::cpu(), 0); r0 && mesh_of(l)) {
      uintmax_t rank0_file = 0;
      for (const auto& e : std::filesystem::directory_iterator(dir + "/sync"))
        if (e.path().filename().string().find(".r0.") != std::string::npos) rank0_file = e.file_size();
      const int64_t mine = r0->current(DT_MEM_CHECKPOINT);
      EXPECT_LE(static_cast<double>(mine), 1.05 * static_cast<double>(rank0_file)) << l.name;
      std::printf("%s: rank 0 stages %lld bytes for its %ju-byte file; all ranks %lld\n", l.name, (long long)mine,
                  rank0_file, (long long)staged);
    }
    for (int s = kSteps / 2; s < kSteps; ++s) t.train_step(batch(s).in, batch(s).tg);
    t.wait_save();  // committed by a step already, or now
    t.save_async(dir + "/again", nlohmann::json::object(), "ckpt");
    t.wait_save();
    EXPECT_EQ(staged_bytes() - before, staged) << l.name << ": the next save reuses the staging buffers";
    for (const auto& e : std::filesystem::directory_iterator(dir + "/sync")) {
      if (e.path().extension() != ".safetensors") continue;
      const std::string a = bytes_of(e.path().string());
      EXPECT_EQ(a, bytes_of(dir + "/async/" + e.path().filename().string())) << l.name << " " << e.path().filename();
    }
  }
  // A write that fails is raised by the next call that commits, and the last checkpoint stands.
  {
    std::filesystem::remove_all(dir);
    nn::GPT model(config());
    optim::AdamW opt(model.parameters(), test::dp_adamw());
    engine::Trainer t(mesh_of(kLayouts[1]), model, opt, test::dp_options(2), par_of(kLayouts[1]));
    t.train_step(batch(0).in, batch(0).tg);
    t.save(dir, nlohmann::json::object(), "ckpt");
    std::filesystem::create_directories(dir + "/ckpt.000002.r1.safetensors");  // where rank 1's next file goes
    t.save_async(dir, nlohmann::json::object(), "ckpt");
    try {
      t.wait_save();
      ADD_FAILURE() << "a save whose write failed committed";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), DT_ERR_IO) << e.what();
    }
    EXPECT_EQ(io::read_checkpoint_index(dir, "ckpt")["metadata"]["step"], 1);
    t.train_step(batch(1).in, batch(1).tg);  // training goes on
  }
  std::filesystem::remove_all(dir);
}

TEST(ShardedCheckpoint, AnUnchangedLayoutResumesBitwise) {
  const std::string dir = ::testing::TempDir() + "dtrain_sharded_same_" + std::to_string(::getpid());
  for (const Case& l : {kLayouts[2], kLayouts[4], kLayouts[6]}) {
    if (kSanitized && &l != &kLayouts[2]) continue;
    const test::TrainRun straight = test::train_layout(mesh_of(l), config(), test::dp_options(l.micro), par_of(l),
                                                       kSteps, batch);
    const Resumed got = resume(l, l, dir);
    for (int s = 0; s < kSteps; ++s) EXPECT_EQ(got.losses[static_cast<size_t>(s)], straight.losses[static_cast<size_t>(s)]) << l.name << " step " << s;
    EXPECT_EQ(test::rel_dist(got.params, straight.params), 0.0) << l.name;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dt
