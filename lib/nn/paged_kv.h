// The paged KV cache's storage (vLLM's PagedAttention layout): per layer, k and v of
// [num_blocks, block_size, n_kv_head, head_dim] in the model's dtype (MemTag::KvCache). A
// sequence's position p lives in block table[p / block_size] at slot p % block_size; which
// blocks a sequence holds is the block pool's business (serve/block_pool.h), not this one's.
// Under tensor parallelism each rank holds its own KV heads; a pipeline stage, its layers.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "nn/config.h"
#include "nn/kv_cache.h"

namespace dt::nn {

// One step's work: chunks of several sequences, their tokens packed one after another.
struct PagedBatch {
  struct Seq {
    int64_t start = 0;            // position of the chunk's first token
    int64_t count = 0;            // tokens in the chunk (>= 1)
    std::vector<int32_t> blocks;  // the sequence's block table, covering start + count positions
    bool logits = false;          // the chunk's last token's logits are wanted
  };
  std::vector<int32_t> ids;  // sum of counts tokens
  std::vector<Seq> seqs;
};

struct PagedKv {
  int64_t num_blocks = 0, block_size = 0, context = 0;
  std::vector<Tensor> k, v;  // one per layer; undefined for another stage's layers
  Device device;

  // The step's index tensors (begin_step), on the cache's device.
  struct Step {
    int64_t tokens = 0;
    Tensor host_ids, host_pos;       // i32 [1, N] on the host
    Tensor seqs, tables, slots;      // as paged_attention_forward and kv_cache_write take them
    std::vector<int64_t> first, start, count;  // per sequence: first row, first position, tokens
    std::vector<int64_t> logit_rows;           // rows whose logits are wanted
  } step;
  InferenceScratch s;

  // num_blocks, block_size >= 1; kv_heads and layers as KvCache::create takes them.
  static PagedKv create(const GPTConfig& cfg, int64_t num_blocks, int64_t block_size, int64_t kv_heads = 0,
                        const std::vector<BlockRange>& layers = {});
  // Bytes one block costs over the layers held (k and v): what a memory budget divides by.
  static int64_t bytes_per_block(const GPTConfig& cfg, int64_t block_size, int64_t kv_heads = 0,
                                 const std::vector<BlockRange>& layers = {});
  // Checks the batch against the cache (INVALID_ARGUMENT naming what is wrong: a count < 1,
  // a table too short or naming a block outside the pool, ids of another length) and builds
  // the step's index tensors. Every stage calls it before running its part of the step.
  void begin_step(const PagedBatch& batch);
};

}  // namespace dt::nn
