// Save after 3 AdamW steps (bf16 values, f32 masters and moments, the step counter), load
// into a fresh model and optimizer, take 2 more: bitwise equal to 5 uninterrupted steps.
// This is the checkpoint contract the training engine relies on.
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "io/checkpoint.h"
#include "optim/optimizer.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

struct Trainer {
  std::vector<std::unique_ptr<nn::Parameter>> owned;
  nn::ParamList list;
  std::unique_ptr<optim::AdamW> opt;
  explicit Trainer(uint64_t seed = 1) {
    for (int i = 0; i < 2; ++i) {
      auto p = std::make_unique<nn::Parameter>();
      p->name = "blocks." + std::to_string(i) + ".w";
      p->value = test::randn({3, 4}, DType::BF16, seed, p->name);
      p->grad = Tensor::zeros({3, 4}, DType::BF16);
      if (i == 1) p->spec = {0, "tp"};
      list.push_back(p.get());
      owned.push_back(std::move(p));
    }
    optim::AdamWOptions o;
    o.lr = 1e-2f;
    opt = std::make_unique<optim::AdamW>(list, o);
  }
  void step(int k) {
    for (nn::Parameter* p : list) kernels::cast(test::randn({3, 4}, DType::F32, 50 + k, p->name), p->grad);
    opt->step();
  }
  std::vector<io::CheckpointTensor> tensors() {
    std::vector<io::CheckpointTensor> out;
    for (nn::Parameter* p : list) out.push_back({p->name, p->value, p->spec});
    for (auto& [name, t] : opt->state()) out.push_back({name, t, {}});
    return out;
  }
};

TEST(IoResume, ResumeMatchesUninterruptedRunBitwise) {
  std::string dir = ::testing::TempDir() + "dtrain_resume_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  Trainer straight, first;
  for (int k = 1; k <= 5; ++k) straight.step(k);
  for (int k = 1; k <= 3; ++k) first.step(k);
  io::save_checkpoint(dir, first.tensors(), {{"step", 3}});
  Trainer resumed(7);  // other values, zero state: everything must come from the checkpoint
  EXPECT_EQ(io::load_checkpoint(dir, resumed.tensors())["step"], 3);
  EXPECT_EQ(resumed.opt->steps(), 3);
  for (int k = 4; k <= 5; ++k) resumed.step(k);
  auto want = straight.tensors(), got = resumed.tensors();
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(test::same_bits(got[i].tensor, want[i].tensor)) << want[i].name;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dt
