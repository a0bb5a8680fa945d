// Autoregressive generation with a KV cache: prefill each prompt, then one token per step
// for all unfinished prompts together.
//
// Ragged batches need no padding: every prompt owns one row of the cache with its own
// length, and the cached forward (GPT::forward_cached) gives each row its own positions
// (learned or RoPE) and attends over that row's prefix only. Prefill runs prompt by prompt
// (each into its row); decode steps batch the unfinished rows, so a prompt's tokens do not
// depend on what else is in the batch (up to the matmul's rounding across row counts).
//
// Sampling (engine/sampling.h) draws with the uniform number of a counter-based RNG keyed
// by (seed, "sample", step * B + b): the draw depends only on the seed, the step and the
// prompt's index, never on timing or threads.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "comm/communicator.h"
#include "engine/sampling.h"
#include "nn/gpt.h"

namespace dt::engine {

struct GenerateOptions : SamplingOptions {
  int64_t max_new_tokens = 16;
  // Called with (prompt index, token) as each token is chosen, in order: streaming output.
  std::function<void(int64_t prompt, int32_t token)> on_token;
  // Read before each prompt's prefill and each decode step (when set): true ends the
  // generation there, with GenerateResult::cancelled. On tp replicas it is a collective
  // (the Trainer's agreement), so every replica stops at the same step; over a pipeline
  // (generate_pipelined) only the last stage reads it, and tells the others.
  std::function<bool()> should_stop;
};

struct GenerateStats {
  double time_to_first_token_s = 0.0;  // until every prompt has its first new token
  double inter_token_latency_s = 0.0;  // mean seconds per decode step
  double tokens_per_s = 0.0;           // new tokens over the whole call
  int64_t new_tokens = 0;
};

struct GenerateResult {
  std::vector<std::vector<int32_t>> tokens;  // per prompt: the new tokens (stop token included)
  GenerateStats stats;
  bool cancelled = false;  // should_stop ended it early: the tokens are a prefix of the answer
};

// prompts: B >= 1 non-empty prompts of ids in [0, vocab); each prompt's length plus
// max_new_tokens must fit in the context.
GenerateResult generate(nn::GPT& model, const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& opt);

// Generation over a pipeline (engine/generate_pipeline.cc): each pp rank runs its stage
// (its blocks, and a KV cache of its layers only; the seeds' layer placement across devices)
// on the same prompts, collective over `pp`. The stream moves stage to stage by send/recv;
// the last stage samples, and sends the chosen tokens to every other stage, so each returns
// the same tokens (those of generate() on the whole model, up to the matmul's rounding over
// batch sizes). Several prompts are in flight at once: prefill sends the prompts one after
// another through the stages, and decode splits the unfinished prompts into min(B, P)
// groups that follow each other through the pipeline, so the stages work on different
// groups at once instead of waiting for one batch to go round. The stage must hold one
// chunk of blocks (no interleaving). on_token fires on every rank as it learns each token.
GenerateResult generate_pipelined(nn::GPT& stage, comm::Communicator& pp,
                                  const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& opt);

// INVALID_ARGUMENT naming what is wrong with the prompts or options.
void check_generate(const nn::GPTConfig& cfg, const std::vector<std::vector<int32_t>>& prompts,
                    const GenerateOptions& opt);

// The pieces generate and generate_pipelined share:
// The cache length the prompts need: the longest prompt plus max_new_tokens.
int64_t generate_cache_len(const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& opt);
// Appends token t to prompt b's new tokens and streams it (on_token); true when b is then
// finished: max_new_tokens reached, or t is a stop token.
bool record_token(GenerateResult& res, int64_t b, int32_t t, const GenerateOptions& opt);
// Sampling reads f32 on the host: the logits as such (a bf16/f16 model's widened first,
// exactly, into f32; a GPU model's copied over into host), valid until the next call.
const float* host_f32_logits(const Tensor& logits, Tensor& f32, Tensor& host);
// res.stats' new-token count, inter-token latency and tokens/s from the decode steps' and
// the whole call's seconds.
void finish_generate_stats(GenerateResult& res, int64_t decode_steps, double decode_s, double total_s);

}  // namespace dt::engine
