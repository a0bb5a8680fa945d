// A preview of the project's demo: a small GPT learns 2-digit addition with the training
// engine, then answers held-out sums by greedy generation over the KV cache. Training speed
// varies with the machine, so the only assertion is "better than chance"; the accuracies
// are printed.
#include <cstdio>

#include "engine/generate.h"
#include "engine/train_engine.h"
#include "io/sampler.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

TEST(EngineAddition, SmallGPTLearnsTwoDigitAddition) {
  nn::GPTConfig c;
  c.vocab_size = 64;  // '\n', '+', '=' and the digits are all below 64
  c.context = 16;     // "ab+cd=" then the 4 answer bytes "0ef\n"
  c.n_layer = 2;
  c.d_model = 64;
  c.n_head = 4;
  c.seed = 1;
  nn::GPT m(c);
  const int64_t steps = 400;
  optim::AdamW opt(m.parameters(), optim::AdamWOptions{3e-3f, 0.9f, 0.98f, 1e-8f, 0.01f});
  engine::TrainOptions o;
  o.micro_batches = 2;
  o.max_grad_norm = 1.0;
  o.ignore_index = -100;
  o.schedule = optim::LrSchedule::warmup_cosine(3e-3f, 20, steps, 0.1f);
  engine::TrainEngine eng(nullptr, m, opt, o);
  auto train = std::make_shared<io::AdditionDataset>(2, 20000, /*seed=*/1, -100);
  io::Sampler sampler(train, io::SamplerOptions{64, 3, true, 0, 1});
  Tensor in, tg;
  engine::StepStats s;
  for (int64_t i = 0; i < steps; ++i) {
    sampler.next(in, tg);
    s = eng.train_step(in, tg);
    if (i % 100 == 0 || i == steps - 1) std::printf("%s\n", engine::metrics_json(s).c_str());
  }

  // Held-out sums (another seed), answered by generation: prompt "ab+cd=", 4 new tokens.
  io::AdditionDataset test_set(2, 200, /*seed=*/2, -100);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> answers;
  for (int64_t i = 0; i < test_set.size(); ++i) {
    std::string t = test_set.text(i);
    prompts.emplace_back(t.begin(), t.begin() + 6);
    answers.push_back(t.substr(6));
  }
  engine::GenerateOptions g;
  g.max_new_tokens = 4;
  engine::GenerateResult r = engine::generate(m, prompts, g);
  int64_t right = 0;
  for (size_t i = 0; i < prompts.size(); ++i)
    right += std::string(r.tokens[i].begin(), r.tokens[i].end()) == answers[i];
  std::printf("2-digit addition after %lld steps (batch 64): final loss %.4f, exact match %lld / %lld held out; "
              "generation %.0f tokens/s\n",
              static_cast<long long>(steps), s.loss, static_cast<long long>(right),
              static_cast<long long>(prompts.size()), r.stats.tokens_per_s);
  // Chance is about 1 in 1000 per sum (three digits); asking for 2 in 200 is still lenient.
  EXPECT_GE(right, 2);
  EXPECT_LT(s.loss, 2.0);
}

}  // namespace
}  // namespace dt
