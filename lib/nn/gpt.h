// A GPT: token embeddings (+ learned positions, or RoPE inside attention), a sequence of
// pre-norm transformer blocks, a final norm and an LM head (tied to wte.weight or its own
// "lm_head.weight" [vocab, d_model]).
//
// The blocks are a sequence so that pipeline stages and FSDP units are block ranges: besides
// forward/backward of the whole model, the pieces embed -> forward_blocks(b, e) -> head and
// backward_head -> backward_blocks(b, e) -> backward_embed can be run by a stage on its own
// range. The stream between them lives in GPTActs (resid[i] = input of block i; dresid =
// gradient of the stream at the current point of backward).
//
// Pipeline stages: a GPT built with `chunks` holds only those block ranges (numbered as in
// the whole model, so parameter names and checkpoints are the whole model's), the
// embeddings only if a chunk starts at block 0, and the final norm and head only if one
// ends at the last block. A last stage with tied embeddings holds a copy of the token table
// for its head (tied_copy()), not among its parameters: the pipeline sends its gradient to
// the first stage, which owns and updates the table, and refreshes its value from there. forward_blocks and backward_blocks take whole-model indices within the chunks.
//
// Activation checkpointing (cfg.checkpoint or set_checkpointing): forward keeps only each
// block's input resid[i]; backward recomputes the block's forward into one scratch Acts shared
// by all blocks, then runs its backward. The ops are the same, so gradients are bitwise equal.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "nn/block.h"
#include "nn/config.h"
#include "nn/loss.h"
#include "nn/vocab_parallel.h"

namespace dt::nn {

struct KvCache;     // nn/kv_cache.h
struct PagedKv;     // nn/paged_kv.h
struct InferenceScratch;  // nn/kv_cache.h
struct PagedBatch;  // nn/paged_kv.h

// Everything one micro-batch keeps between forward and backward.
struct GPTActs {
  int64_t B = 0, T = 0;
  Tensor ids, targets, pos_ids;
  Tensor ids_slice;                            // tp > 1: the ids of this rank's vocabulary rows, -1 elsewhere
  int32_t ignore_index = -1;
  std::vector<Tensor> resid;                   // n_layer + 1 tensors [B, T, C]
  std::vector<TransformerBlock::Acts> blocks;  // n_layer; unused for checkpointed or absent blocks
  Norm::Acts lnf;
  Tensor pos, logits;                          // [B, T, C], [B, T, V]
  Tensor hw;                                   // the head's input, whole (lnf.y unless SP)
  CrossEntropyState ce;
  Tensor dlogits, dh, dresid, dtmp;            // backward
  // The micro-batch's share of the objective, which the experts' auxiliary losses take too:
  // loss_backward sets it; the caller of a pipeline stage without the head sets it itself.
  float grad_scale = 1.0f;
  // This rank's share of the micro-batch's targets when its token rows are a part of the
  // micro-batch's (sequence parallelism): the experts' auxiliary losses, computed over those
  // rows, weigh grad_scale x aux_share.
  float aux_share = 1.0f;
  MoEStats moe;  // the experts' routing in this micro-batch's forward (the blocks held)
};

class GPT : public Module {
 public:
  // Validates cfg. tp: the blocks' attention heads and MLP features split over it (tensor
  // parallel, nn/tensor_parallel.h), and the vocabulary (nn/vocab_parallel.h): the token
  // table (and an untied head) hold this rank's vocabulary rows, the logits are this rank's
  // vocabulary columns [B, T, vocab_slice().rows], and loss() combines them over tp. The
  // final norm and learned positions stay whole. Without one (or of size 1) the model is
  // the single-rank one. With tp.sequence_parallel the stream between the blocks (resid,
  // the norms) holds this rank's token rows only, [B T / tp, C]: the embedding's sum is
  // reduce-scattered into those rows, and the head all-gathers the final norm's output.
  // chunks: the block ranges this model holds (a pipeline stage: see above), in stream
  // order, disjoint, non-empty, within [0, n_layer); empty: all blocks.
  // ep: a mixture of experts' experts split over it (expert parallelism, nn/moe.h): this
  // rank holds its share of every block's experts, under their whole-model names.
  // cp: every sequence split over it (context parallelism, nn/ring_attention.h): the model
  // sees this rank's two chunks of each sequence as [B, T / cp] ids, learned positions and
  // RoPE read each row's global position, attention runs round the cp ring. Training only.
  explicit GPT(const GPTConfig& cfg, TpGroup tp = {}, std::vector<BlockRange> chunks = {}, EpGroup ep = {},
               CpGroup cp = {});
  const TpGroup& tp() const { return tp_; }
  const CpGroup& cp() const { return cp_; }
  const VocabSlice& vocab_slice() const { return vocab_; }  // all of it for tp = 1
  int64_t local_kv_heads() const;  // the KV heads this rank's attention holds (and caches)
  void collect(ParamList& out) override;
  const GPTConfig& config() const { return cfg_; }
  // The device of its parameters and activations: the thread's current device when it was
  // constructed. Every method below runs there (inputs on the host are copied over).
  Device device() const { return device_; }
  // The blocks this model holds, in order (all n_layer unless a pipeline stage).
  std::vector<std::unique_ptr<TransformerBlock>>& blocks() { return blocks_; }
  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  const std::vector<BlockRange>& chunks() const { return chunks_; }
  bool whole() const { return num_blocks() == cfg_.n_layer && has_embed() && has_head(); }
  bool has_embed() const { return has_embed_; }  // the embeddings (a chunk starts at block 0)
  bool has_head() const { return has_head_; }    // the final norm, head and loss (a chunk ends at n_layer)
  // The token table: the parameter itself where the embedding is (null elsewhere), and the
  // copy a last stage's tied head reads (null unless this is one; see above).
  Parameter* token_table() { return has_embed_ ? &wte_->weight : nullptr; }
  Parameter* tied_copy() { return !has_embed_ && wte_ ? &wte_->weight : nullptr; }
  // The stream between blocks for a micro-batch of B x T tokens: [B, T, d_model], or under
  // sequence parallelism this rank's token rows [B T / tp, d_model].
  Shape stream_shape(int64_t B, int64_t T) const;
  void set_checkpointing(bool on) { cfg_.checkpoint = on; }

  // ids: i32 [B, T], T <= context, each in [0, vocab_size). Returns logits [B, T, V] (tp:
  // this rank's vocabulary columns).
  // (forward, forward_loss, backward and forward_cached need the whole model.)
  const Tensor& forward(const Tensor& ids, GPTActs& a);
  // The mean cross-entropy of a.logits (after forward or head) over targets (i32 [B, T])
  // != ignore_index, kept in a for loss_backward; vocab parallel under tp (collective).
  double loss(const Tensor& targets, int32_t ignore_index, GPTActs& a);
  // a.dlogits = grad_scale * d(loss) / d(a.logits).
  void loss_backward(GPTActs& a, float grad_scale = 1.0f);
  // forward, then the mean cross-entropy over targets (i32 [B, T]) != ignore_index.
  double forward_loss(const Tensor& ids, const Tensor& targets, GPTActs& a, int32_t ignore_index = -1);
  // Backward of forward_loss's loss (times grad_scale): every grad += its gradient.
  void backward(GPTActs& a, float grad_scale = 1.0f);
  // Backward from a given gradient of the logits.
  void backward_logits(const Tensor& dlogits, GPTActs& a);

  // Readies a for a micro-batch of B sequences of T tokens: its sizes, and a stream slot per
  // block boundary of the whole model (a stage fills those of its chunks).
  void begin_acts(int64_t B, int64_t T, GPTActs& a) const;
  // The pieces, for stages.
  void embed(const Tensor& ids, GPTActs& a);             // -> resid[0]
  // A stage that starts at block i takes its input x [B, T, d_model] (received, say) here.
  void set_stream(int i, const Tensor& x, GPTActs& a);
  void forward_blocks(int begin, int end, GPTActs& a);   // resid[begin] -> resid[end]
  const Tensor& head(GPTActs& a);                        // resid[n_layer] -> logits
  void backward_head(const Tensor& dlogits, GPTActs& a); // -> dresid = d resid[n_layer]
  void backward_blocks(int begin, int end, GPTActs& a);  // dresid: d resid[end] -> d resid[begin]
                                                         // (a stage that ends early sets dresid)
  void backward_embed(GPTActs& a);                       // from dresid = d resid[0]

  // Inference over a KV cache (gpt_cached.cc). ids: i32 [B, Tq]; row i of ids continues
  // cache row rows[i] (distinct rows) at its position cache.len[rows[i]], which advances by
  // Tq. logits: [B, Tq, V], written. Prefill is Tq = prompt length, decode Tq = 1.
  // Tensor parallel: collective over tp (every rank calls it with the same ids), the cache
  // this rank's KV heads (KvCache::create with local_kv_heads()), and the logits whole on
  // every rank (the vocabulary slices all-gathered), so every rank samples the same token.
  // Sequence parallelism is paused: a decode step's few tokens need not split over tp.
  // last_only: logits [B, 1, V] of each row's last position alone (what sampling after a
  // prefill needs): the head's GEMM and the logits buffer shrink by Tq (on a 134M Llama the
  // head was a fifth of a 500-token prefill's FLOPs and its 65 MB of fresh logits).
  void forward_cached(const Tensor& ids, KvCache& cache, const std::vector<int64_t>& rows, Tensor& logits,
                      bool last_only = false);
  // forward_cached in a pipeline stage's pieces (engine/generate_pipeline.cc): the first
  // stage embeds ids at each row's next positions into x [B, Tq, d_model]; every stage runs
  // its blocks [begin, end) on x in place over its layers' cache; the last stage's head
  // writes the logits (whole, as above); then every stage advances its cache's rows by Tq.
  void cached_embed(const Tensor& ids, KvCache& cache, const std::vector<int64_t>& rows, Tensor& x);
  void cached_blocks(int begin, int end, Tensor& x, KvCache& cache, const std::vector<int64_t>& rows);
  void cached_head(const Tensor& x, KvCache& cache, Tensor& logits, bool last_only = false);
  void advance_cached(KvCache& cache, const std::vector<int64_t>& rows, int64_t Tq) const;

  // Inference over a paged KV cache (gpt_paged.cc, for lib/serve): one step's chunks of
  // several sequences packed into one row of N tokens, each chunk at its own positions and
  // with its own block table (nn/paged_kv.h). logits: [sequences with logits = true, V],
  // whole on every tp rank. Collective over tp, like forward_cached. A chunk's results are
  // those of forward_cached over the same positions: same ops, same attention bits.
  void forward_paged(const PagedBatch& batch, PagedKv& kv, Tensor& logits);
  // In a pipeline stage's pieces: kv.begin_step(batch) on every stage first; then the first
  // stage embeds into x [1, N, d_model], every stage runs its blocks on x in place, and the
  // last stage's head writes the logits.
  void paged_embed(const PagedBatch& batch, PagedKv& kv, Tensor& x);
  void paged_blocks(int begin, int end, Tensor& x, PagedKv& kv);
  void paged_head(const Tensor& x, PagedKv& kv, Tensor& logits);

 private:
  GPTConfig cfg_;
  TpGroup tp_;
  CpGroup cp_;
  VocabSlice vocab_;
  Device device_;  // where it was built (core/device_scope.h); every call runs there
  std::unique_ptr<Embedding> wte_, wpe_;
  std::vector<std::unique_ptr<TransformerBlock>> blocks_;  // the ones held, in order
  std::vector<int> local_of_;  // per whole-model block: its index in blocks_, or -1
  std::vector<BlockRange> chunks_;
  bool has_embed_ = true, has_head_ = true;
  TransformerBlock& block(int i);  // whole-model index; INVALID_ARGUMENT when not held
  // INVALID_ARGUMENT unless the cache holds this model's layers and B rows x Tq fit.
  void check_cached(const KvCache& c, const std::vector<int64_t>& rows, int64_t B, int64_t Tq) const;
  void need_whole(const char* what) const;
  // Shared by the contiguous and the paged cache: ids and positions (host i32 [B, T]) into
  // x [B, T, d_model]; the final norm and head of x [B, T, d_model] into logits [B, T, V].
  void embed_at(const Tensor& host_ids, const Tensor& host_pos, Tensor& pos_ids, Tensor& pos, Tensor& x);
  // Block l on x in place, as TransformerBlock::forward, with the cache's attention.
  void block_inference(int l, Tensor& x, InferenceScratch& s,
                       const std::function<const Tensor&(CausalSelfAttention&, const Tensor&)>& attend);
  void head_into(const Tensor& x, Norm::Acts& ln, Tensor& part, Tensor& parts, Tensor& logits);
  std::unique_ptr<Norm> lnf_;
  std::unique_ptr<Linear> lm_head_;  // null when tied
  TransformerBlock::Acts scratch_;   // checkpointing: the one block whose internals exist
  Tensor scratch_y_;
};

}  // namespace dt::nn
