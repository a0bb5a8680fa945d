// The op table: every kernel a GPT or an MLP needs, forward and backward, behind one
// interface that each device implements (kernels/cpu now, kernels/cuda later).
//
// Callers use the free functions below. Each validates its arguments (shapes, dtypes,
// devices: errors name the argument and what is accepted), then calls the entry of the
// OpTable for the tensors' device. Backends receive validated arguments only.
//
// Conventions shared by every op:
//  - "Rows": a tensor [..., C] is R = numel / C rows of C. Norms, softmax and losses work
//    per row over the last dim.
//  - Floating tensors may be f32, bf16 or f16; math is f32; statistics saved for backward
//    (mean, rstd, lse) and losses are always f32. Outputs are overwritten, except that
//    gradients of parameters (dweight, dbias, dtable) ACCUMULATE (+=), so micro-batches
//    accumulate without extra buffers.
//  - Results are bitwise independent of the thread count: work is split so that every
//    output element is computed by exactly one thread in a fixed order.
//  - Weights, biases and their gradients share the dtype of the activations they meet (one
//    storage type per call); eps must be finite and >= 0.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace dt::kernels {

enum class ReduceOp : int32_t { Sum = 0, Avg = 1, Max = 2, Min = 3, Prod = 4 };
const char* reduce_op_name(ReduceOp op);

struct AdamWParams {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  int64_t step = 1;         // 1-based step, for bias correction
  float grad_scale = 1.0f;  // grad is multiplied by this first (unscaling, clipping)
};

struct SgdParams {
  float lr = 1e-2f, momentum = 0.0f, dampening = 0.0f, weight_decay = 0.0f;
  bool nesterov = false;
  float grad_scale = 1.0f;
};

// ---- linear algebra ----------------------------------------------------------------------
// c = alpha * op(a) @ op(b) + beta * c; op transposes the last two dims when trans_* is set.
// a: [..., M, K] ([..., K, M] transposed), b: [..., K, N] or a shared 2-D [K, N],
// c: [..., M, N]. Batch dims of a, b (when batched) and c match. One floating dtype.
void matmul(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b,
            float alpha = 1.0f, float beta = 0.0f);

// ---- normalization -----------------------------------------------------------------------
// y = (x - mean) * rstd * weight + bias; x, y: [..., C]; weight, bias: [C] (bias may be
// undefined); mean, rstd: f32, one per row (any shape of R elements, e.g. [B, T]).
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                       Tensor& y, Tensor& mean, Tensor& rstd);
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor& dx, Tensor& dweight, Tensor& dbias);
// y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps).
void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor& rstd);
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      Tensor& dx, Tensor& dweight);

// ---- activations (elementwise; all tensors one shape) -------------------------------------
// GELU, tanh approximation (as GPT-2).
void gelu_forward(const Tensor& x, Tensor& y);
void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx);
// A linear layer's bias and its GELU in one pass: y = gelu(x + bias), x: [..., C] (the GEMM's
// output, left without the bias: the backward adds it again rather than keeping a second
// copy), bias: [C]. An undefined bias is gelu_forward.
void bias_gelu_forward(const Tensor& x, const Tensor& bias, Tensor& y);
// Its gradient in one pass: dx = dy * gelu'(x + bias) and dbias[c] += sum over rows of
// dx[r, c], summed in row order in f32 before dx is rounded (bitwise independent of the
// thread count). An undefined bias (and dbias) is gelu_backward.
void bias_gelu_backward(const Tensor& x, const Tensor& bias, const Tensor& dy, Tensor& dx, Tensor& dbias);
void silu_forward(const Tensor& x, Tensor& y);
void silu_backward(const Tensor& x, const Tensor& dy, Tensor& dx);
// y = silu(gate) * up.
void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& y);
void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy, Tensor& dgate, Tensor& dup);

// ---- softmax and attention -----------------------------------------------------------------
// Over the last dim, max-subtracted.
void softmax_forward(const Tensor& x, Tensor& y);
void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx);
// Fused causal attention with grouped-query heads. q: [B, Tq, Hq, D]; k, v: [B, Tk, Hkv, D]
// with Hq % Hkv == 0 (query head h reads kv head h / (Hq / Hkv)); Tq <= Tk, and query i sits
// at position Tk - Tq + i (so Tq = Tk is training, Tq = 1 is one decode step over a cache).
// out: [B, Tq, Hq, D]; lse: f32 [B, Hq, Tq], the log-sum-exp of each score row, saved for
// backward. scale <= 0 means 1/sqrt(D). Never materializes a Tq x Tk matrix per head.
// causal = false: every query sees every key, any Tq and Tk (a K/V block wholly in the
// queries' past: context parallelism's ring, nn/ring_attention.h); CPU only for now.
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out,
                       Tensor& lse, bool causal = true);
// dq, dk, dv overwritten. lse and out may be those of a larger softmax than this call's keys
// (the merged result of several key blocks): each block's gradients are then its share.
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& dout, float scale, Tensor& dq, Tensor& dk,
                        Tensor& dv, bool causal = true);

// Causal attention over a paged KV cache (serving, lib/serve). The step's query tokens of S
// sequences are packed: q, out [N, Hq, D]. k_cache, v_cache: [num_blocks, block_size, Hkv,
// D] (Hq % Hkv == 0, as above). seqs: i32 [S, 3], per sequence (first row in q, query count
// n >= 1, context length L >= n): its queries are positions L - n .. L - 1, query j attends
// keys 0 .. L - n + j, and key position p lives in block tables[s, p / block_size] at slot
// p % block_size. tables: i32 [S, max_blocks] (entries past a sequence's blocks unread).
// seqs and tables live on q's device. Rows of q that no sequence covers are left as they
// are in out. Each query's result depends only on its own keys (not on the batch), and on
// the CPU it is bitwise that of attention_forward over the same keys held contiguously.
void paged_attention_forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& seqs,
                             const Tensor& tables, float scale, Tensor& out);
// Writes the keys and values of N new positions into the cache: k, v [N, Hkv, D]; slots:
// i32 [N] on k's device, slot = block * block_size + offset (in [0, num_blocks * block_size)).
void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_cache, Tensor& v_cache);

// ---- loss ------------------------------------------------------------------------------------
// logits: [R, V]; targets: i32 [R] in [0, V) or == ignore_index; losses: f32 [R], 0 where
// ignored. A target outside [0, V) that is not ignore_index is INVALID_ARGUMENT.
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int32_t ignore_index,
                           Tensor& losses);
// dlogits = (softmax(logits) - onehot(target)) * dlosses[row]; zero rows where ignored.
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& dlosses,
                            int32_t ignore_index, Tensor& dlogits);

// Vocab-parallel cross-entropy (Megatron style): each tensor-parallel rank holds its slice
// of the logits, [R, Vs]; the full [R, V] is never gathered. The first `valid` columns
// (1 <= valid <= Vs) are vocabulary ids vocab_begin (>= 0) .. vocab_begin + valid - 1; the
// rest pad the shards to one width and are never read. targets: i32 [R], each ignore_index
// or a global id (one outside this slice is another rank's; a negative one other than
// ignore_index is INVALID_ARGUMENT, raised before anything is written). The caller:
//   row_max = all-reduce MAX of shard_max; partial = all-reduce SUM of shard_forward;
//   lse[r] = log(partial[r][0]) + row_max[r]; loss[r] = lse[r] - partial[r][1] (0 where
//   ignored); then shard_backward with that lse.
// row_max: f32 [R], overwritten with each row's max over its valid columns.
void cross_entropy_shard_max(const Tensor& logits, int64_t valid, Tensor& row_max);
// row_max: f32 [R], the global max. partial: f32 [R, 2], overwritten: [r][0] = sum over the
// valid columns of exp(z - row_max[r]); [r][1] = z[target - vocab_begin] when this slice
// holds the target, else 0. Both 0 in rows whose target is ignore_index.
void cross_entropy_shard_forward(const Tensor& logits, const Tensor& targets, int64_t vocab_begin, int64_t valid,
                                 int32_t ignore_index, const Tensor& row_max, Tensor& partial);
// lse, dlosses: f32 [R]. dlogits (logits' shape and dtype), overwritten: on valid columns
// (exp(z - lse[r]) - onehot(target - vocab_begin)) * dlosses[r]; 0 on padding columns and
// in rows whose target is ignore_index.
void cross_entropy_shard_backward(const Tensor& logits, const Tensor& targets, int64_t vocab_begin, int64_t valid,
                                  int32_t ignore_index, const Tensor& lse, const Tensor& dlosses, Tensor& dlogits);

// ---- embedding -------------------------------------------------------------------------------
// ids: i32 of any shape S, each in [0, V) or negative; table: [V, C]; out: S + [C] (e.g.
// ids [B, T], out [B, T, C]). A negative id means "no row" (a vocab-parallel embedding maps
// ids outside its slice to -1): forward writes zeros, backward adds nothing. An id >= V is
// INVALID_ARGUMENT, raised before anything is written.
void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out);
void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable);  // dtable +=

// ---- mixture of experts (nn/moe.h) ---------------------------------------------------------
// A router's scores: softmax over a row's experts (Mixtral), or each expert's sigmoid
// (DeepSeek-V3 style).
enum class MoeGating : int32_t { Softmax = 0, Sigmoid = 1 };
const char* moe_gating_name(MoeGating g);

// Routing. logits: [R, E] router scores (floating); per row, the k experts of highest score
// in descending order (a tie to the lower expert), 1 <= k <= E: idx i32 [R, k]; gates f32
// [R, k], their scores (softmax or sigmoid of the logits), divided by the k scores' sum when
// `renormalize`. probs f32 [R, E]: the row's softmax whatever the gating (what the
// load-balancing loss averages); lse f32 [R]: the row's log-sum-exp (the z-loss squares it).
void moe_route(const Tensor& logits, int64_t k, MoeGating gating, bool renormalize, Tensor& idx, Tensor& gates,
               Tensor& probs, Tensor& lse);
// Its gradient into dlogits (logits' shape and dtype, overwritten), from dgates f32 [R, k]
// (d loss / d gates) and the auxiliary losses' linear terms: aux_coef f32 [E], d loss / d
// probs[r, e] for every row (the load-balancing loss's per-expert coefficient); z_coef,
// with d loss / d lse[r] = z_coef * lse[r]. idx, gates, probs, lse: moe_route's outputs.
void moe_route_backward(const Tensor& logits, const Tensor& idx, const Tensor& gates, const Tensor& probs,
                        const Tensor& lse, const Tensor& dgates, const Tensor& aux_coef, float z_coef,
                        MoeGating gating, bool renormalize, Tensor& dlogits);
// Dispatch and combine. slots: i32 [R, k], where each (row, choice) sits among the S
// permuted rows: in [0, S), no two alike (nn/moe.cc groups them by expert), or -1 where the
// choice was dropped (over an expert's capacity). A slot >= S is INVALID_ARGUMENT, raised
// before anything is written. x, dx, out, dout: [R, C]; xp, yp, dxp, dyp: [S, C]; one dtype.
// Permute: xp[slots[r, j]] = x[r] (rows no slot names are left as they are).
void moe_permute(const Tensor& x, const Tensor& slots, Tensor& xp);
// Its gradient: dx[r] = sum over j of dxp[slots[r, j]] in j order (overwritten; 0 with no slot).
void moe_permute_backward(const Tensor& dxp, const Tensor& slots, Tensor& dx);
// Combine: out[r] = sum over kept j of gates[r, j] * yp[slots[r, j]], in j order (overwritten).
void moe_unpermute(const Tensor& yp, const Tensor& slots, const Tensor& gates, Tensor& out);
// Its gradient: dyp[slots[r, j]] = gates[r, j] * dout[r] (rows no slot names are left as
// they are); dgates f32 [R, k], overwritten: <dout[r], yp[slots[r, j]]>, 0 where dropped.
void moe_unpermute_backward(const Tensor& dout, const Tensor& yp, const Tensor& slots, const Tensor& gates,
                            Tensor& dyp, Tensor& dgates);

// ---- optimizers (in place; param, m, v, momentum are f32 master copies) ----------------------
// param_copy (optional, may be undefined): a bf16/f16/f32 tensor of the same shape that
// receives the updated parameter, for mixed precision.
void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p,
                  Tensor& param_copy);
// momentum_buf may be undefined when p.momentum == 0.
void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdParams& p,
                Tensor& param_copy);

// ---- elementwise, casts and reductions ------------------------------------------------------
// dst = src converted; any dtype pair; equal element counts (shapes may differ).
void cast(const Tensor& src, Tensor& dst);
void fill(Tensor& x, float value);
void scale(Tensor& x, float alpha);                       // x *= alpha
void add(const Tensor& a, const Tensor& b, Tensor& out);  // out = a + b (out may alias a or b)
void bias_add(Tensor& y, const Tensor& bias);             // y[r, c] += bias[c]
void bias_backward(const Tensor& dy, Tensor& dbias);      // dbias[c] += sum_r dy[r, c]
double sum_squares(const Tensor& x);                      // in f64; Inf/NaN propagate
// The reduction collectives need: dst[i] = op(srcs[0][i], ..., srcs[n-1][i]), folded in
// source order in f32 (exact int64 arithmetic for i32/i64) and rounded once; dst may alias srcs[0]. Avg divides
// the sum by n. Floating dtypes and i32/i64 (Avg on integers truncates).
void reduce(ReduceOp op, DType dtype, Device device, const void* const* srcs, int nsrc, void* dst,
            int64_t count);

// ---- the table a device implements --------------------------------------------------------
// Every op, listed once: the OpTable's entries below, each device's launcher declarations
// (cpu/cpu_ops.h, cuda/cuda_ops.h) and each device's table derive from this list, so an op
// added here and in the declarations above is one a device cannot forget.
#define DT_KERNEL_OPS(X) \
  X(matmul) X(layernorm_forward) X(layernorm_backward) X(rmsnorm_forward) X(rmsnorm_backward) X(gelu_forward) \
  X(gelu_backward) X(bias_gelu_forward) X(bias_gelu_backward) X(silu_forward) X(silu_backward) X(swiglu_forward) X(swiglu_backward) X(softmax_forward) \
  X(softmax_backward) X(attention_forward) X(attention_backward) X(paged_attention_forward) X(kv_cache_write) \
  X(cross_entropy_forward) \
  X(cross_entropy_backward) X(cross_entropy_shard_max) X(cross_entropy_shard_forward) \
  X(cross_entropy_shard_backward) X(embedding_forward) X(embedding_backward) X(moe_route) X(moe_route_backward) \
  X(moe_permute) X(moe_permute_backward) X(moe_unpermute) X(moe_unpermute_backward) X(adamw_update) X(sgd_update) \
  X(cast) X(fill) X(scale) X(add) X(bias_add) X(bias_backward) X(sum_squares) X(reduce)

#define DT_OP_ENTRY(name) decltype(&::dt::kernels::name) name = nullptr;
struct OpTable {
  const char* device_name;
  DT_KERNEL_OPS(DT_OP_ENTRY)
};
#undef DT_OP_ENTRY

// ---- opt-in op profiling (benchmarks) -------------------------------------------------------
// When on, every op called through these functions adds its wall time and one call to a
// per-op accumulator (by op name, e.g. "matmul", "attention_backward"). Only the outermost
// op of a thread counts (an op that calls another through this API is charged for both).
// Off by default, and then the cost is a single branch per op call. Toggle it only while no
// op runs; accumulation from several threads at once is safe (a mutex per call while on).
struct OpProfileEntry {
  std::string name;
  double seconds = 0.0;
  int64_t calls = 0;
};
void set_op_profiling(bool on);
void reset_op_profile();
std::vector<OpProfileEntry> op_profile();  // sorted by name

namespace detail {
extern bool g_op_profiling;
class OpTimer {  // adds its lifetime to `name` unless an outer OpTimer is alive on this thread
 public:
  explicit OpTimer(const char* name);
  ~OpTimer();
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  const char* name_;
  bool outer_;
  int64_t t0_ns_ = 0;
};
}  // namespace detail

// The table of a device; throws UNSUPPORTED for a device with no kernels in this build.
const OpTable& op_table(Device device);
const OpTable& cpu_op_table();

}  // namespace dt::kernels
