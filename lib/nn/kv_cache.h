// The key/value cache of autoregressive inference: per layer, k and v [batch, max_len,
// n_kv_head, head_dim] in the model's dtype (MemTag::KvCache), and how many positions of
// each row are filled. Under tensor parallelism each rank caches its own KV heads only:
// the cache is sharded by heads, as the attention is.
//
// Rows are independent sequences: each has its own length, so prompts of different lengths
// need no padding. A row's positions are contiguous in memory, which lets the attention
// kernel read the first len positions of one row as a [1, len, Hkv, D] view with no copy.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "nn/config.h"
#include "nn/layers.h"
#include "nn/moe.h"

namespace dt::nn {

// Scratch of the inference forwards (this cache's and the paged one's, nn/paged_kv.h), kept
// so that steps of one shape reuse it.
struct InferenceScratch {
  Tensor x, pos_ids, pos, q, kn, vn, out, lse, y, h, logits_part, logits_parts, last;
  Norm::Acts ln;
  FeedForward::Acts ffn;
};

// A cache's k and v per layer: [d0, d1, kv_heads (0: the config's), head_dim] in the
// resolved config's dtype on the current device (MemTag::KvCache), for the layers `layers`
// holds (empty: all; the others stay undefined). Shared by KvCache and PagedKv.
void make_layer_caches(const GPTConfig& resolved, int64_t d0, int64_t d1, int64_t kv_heads,
                       const std::vector<BlockRange>& layers, std::vector<Tensor>& k, std::vector<Tensor>& v);

struct KvCache {
  int64_t batch = 0, max_len = 0;
  std::vector<Tensor> k, v;   // one per layer
  std::vector<int64_t> len;   // per row: positions filled
  InferenceScratch s;

  // cfg as given to the GPT (resolved here). max_len in [1, context]. kv_heads: the KV heads
  // this rank holds (a tensor-parallel model's: GPT::local_kv_heads); 0: the config's.
  // layers: the block ranges whose layers to hold (a pipeline stage's chunks: the other
  // layers' k and v stay undefined); empty: all.
  static KvCache create(const GPTConfig& cfg, int64_t batch, int64_t max_len, int64_t kv_heads = 0,
                        const std::vector<BlockRange>& layers = {});
  void reset() { len.assign(len.size(), 0); }
};

}  // namespace dt::nn
