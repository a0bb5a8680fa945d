// Generation over a pipeline (engine/generate.h: generate_pipelined). Every rank runs the
// same loop over "units" (a prompt's prefill, then each group's decode steps) and so knows,
// from the same state, which rows each unit carries; only the last stage samples. Its token
// messages reach the others in the order it sends them, and a rank reads them lazily: just
// before it needs a group's tokens, it drains the messages up to that group's last, so the
// first stage runs ahead on other groups meanwhile (the pipeline stays full).
// Stopping early (GenerateOptions::should_stop) is the last stage's decision: once it says
// stop, that stage sends -1 for every row it would have sampled, every rank marks such rows
// finished, and the units already in flight drain through the stages as usual, so no
// message is left behind and every rank ends at the same point, with res.cancelled.
#include <algorithm>
#include <chrono>
#include <deque>

#include "core/device_scope.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/tensor_copy.h"
#include "engine/generate.h"
#include "kernels/ops.h"
#include "nn/kv_cache.h"
#include "parallel/stage_stream.h"

namespace dt::engine {
namespace {

using Clock = std::chrono::steady_clock;
using parallel::StageTag;

}  // namespace

GenerateResult generate_pipelined(nn::GPT& stage, comm::Communicator& pp,
                                  const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& o) {
  const nn::GPTConfig& c = stage.config();
  check_generate(c, prompts, o);
  DT_CHECK(stage.chunks().size() == 1, "pipelined generation: the stage holds " + std::to_string(stage.chunks().size()) +
                                           " chunks; accepted: one (no interleaving)");
  const int P = pp.size(), me = pp.rank();
  const bool first = me == 0, last = me == P - 1;
  const int64_t B = static_cast<int64_t>(prompts.size()), V = c.vocab_size;
  GenerateResult res;
  res.tokens.resize(static_cast<size_t>(B));
  if (o.max_new_tokens == 0) return res;
  ScopedDevice on(stage.device());
  nn::KvCache cache =
      nn::KvCache::create(c, B, generate_cache_len(prompts, o), stage.local_kv_heads(), stage.chunks());
  const nn::BlockRange blocks = stage.chunks()[0];
  const CounterRng rng(o.seed, "sample");
  std::vector<bool> done(static_cast<size_t>(B), false);
  auto record = [&](int64_t b, int32_t t) { done[static_cast<size_t>(b)] = record_token(res, b, t, o); };
  // Groups of decode: contiguous prompt ranges, so the token messages of prefill (prompt
  // order) and of decode (group order) reach each group in the order it needs them.
  const int64_t G = std::min<int64_t>(B, P);
  auto group_lo = [&](int64_t g) { return g * B / G; };
  parallel::StageStream stream(pp);
  std::deque<std::vector<int64_t>> expected;  // token messages not yet read: their rows
  auto drain_for = [&](int64_t lo, int64_t hi) {
    auto holds = [&](const std::vector<int64_t>& rows) { return rows.back() >= lo && rows.front() < hi; };
    while (std::any_of(expected.begin(), expected.end(), holds)) {
      const std::vector<int64_t> rows = expected.front();
      expected.pop_front();
      Tensor t = Tensor::uninit({static_cast<int64_t>(rows.size())}, DType::I32);
      stream.recv(t, P - 1, StageTag::GenerateTokens);
      for (size_t j = 0; j < rows.size(); ++j) {
        const int32_t tok = t.data<int32_t>()[j];
        if (tok < 0) {
          done[static_cast<size_t>(rows[j])] = true, res.cancelled = true;  // the last stage stopped
        } else {
          record(rows[j], tok);
        }
      }
    }
  };
  bool stopping = false;  // the last stage: should_stop has said stop
  Tensor x, logits, logits32, host32;
  // One unit through this stage: rows of the cache, ids (first stage), Tq tokens each.
  auto run_unit = [&](const std::vector<int64_t>& rows, const Tensor& ids, int64_t Tq, int64_t step) {
    const int64_t A = static_cast<int64_t>(rows.size());
    if (first) {
      stage.cached_embed(ids, cache, rows, x);
    } else {
      nn::ensure(x, {A, Tq, c.d_model}, c.dtype);
      stream.recv(x, me - 1, StageTag::GenerateHidden);
    }
    stage.cached_blocks(blocks.begin, blocks.end, x, cache, rows);
    stage.advance_cached(cache, rows, Tq);
    if (!last) {
      stream.send(x, me + 1, StageTag::GenerateHidden);
      expected.push_back(rows);
      return;
    }
    stage.cached_head(x, cache, logits, /*last_only=*/true);
    const float* l32 = host_f32_logits(logits, logits32, host32);
    Tensor toks = Tensor::uninit({A}, DType::I32);
    if (!stopping && o.should_stop && o.should_stop()) stopping = res.cancelled = true;
    for (int64_t j = 0; j < A && stopping; ++j) {
      toks.data<int32_t>()[j] = -1;
      done[static_cast<size_t>(rows[static_cast<size_t>(j)])] = true;
    }
    for (int64_t j = 0; j < A && !stopping; ++j) {
      const float* row = l32 + j * V;  // the last position's (cached_head's last_only)
      toks.data<int32_t>()[j] = sample_token(row, V, o, rng.uniform(static_cast<uint64_t>(step * B + rows[static_cast<size_t>(j)])));
      record(rows[static_cast<size_t>(j)], toks.data<int32_t>()[j]);
    }
    for (int r = 0; r < P - 1; ++r) stream.send(toks, r, StageTag::GenerateTokens);
  };
  const auto t0 = Clock::now();
  for (int64_t b = 0; b < B; ++b) {  // prefill: the prompts follow each other through the stages
    const int64_t L = static_cast<int64_t>(prompts[static_cast<size_t>(b)].size());
    Tensor ids = Tensor::zeros({1, L}, DType::I32);
    std::copy(prompts[static_cast<size_t>(b)].begin(), prompts[static_cast<size_t>(b)].end(), ids.data<int32_t>());
    run_unit({b}, ids, L, 0);
  }
  res.stats.time_to_first_token_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto t1 = Clock::now();
  int64_t decode_steps = 0;
  for (int64_t step = 1;; ++step) {  // decode: the groups follow each other
    bool any = false;
    for (int64_t g = 0; g < G; ++g) {
      drain_for(group_lo(g), group_lo(g + 1));
      std::vector<int64_t> rows;
      for (int64_t b = group_lo(g); b < group_lo(g + 1); ++b)
        if (!done[static_cast<size_t>(b)]) rows.push_back(b);
      if (rows.empty()) continue;
      any = true;
      Tensor ids = Tensor::zeros({static_cast<int64_t>(rows.size()), 1}, DType::I32);
      for (size_t j = 0; j < rows.size(); ++j) ids.data<int32_t>()[j] = res.tokens[static_cast<size_t>(rows[j])].back();
      run_unit(rows, ids, 1, step);
    }
    if (!any) break;
    ++decode_steps;
  }
  DT_ASSERT(expected.empty());
  stream.wait();
  finish_generate_stats(res, decode_steps, std::chrono::duration<double>(Clock::now() - t1).count(),
                        std::chrono::duration<double>(Clock::now() - t0).count());
  return res;
}

}  // namespace dt::engine
