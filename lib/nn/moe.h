// A mixture of experts (Switch Transformer, Mixtral): a router scores each token row over E
// experts, the top k take it, and the token's output is their outputs summed by gate. Each
// expert is an MLP of the dense block's shape (nn/layers.h); parameters <name>.router.weight
// [E, C] and <name>.experts.<e>.{fc,proj}.*.
//
// One forward, in ops (kernels/ops.h, CPU and CUDA): the router's logits; moe_route (the
// top-k, the gates, the softmax and log-sum-exp the auxiliary losses need); the slots
// (route_slots below, on the host: the expert sizes decide the GEMM shapes, so a dropless
// MoE reads its routing back once per layer, as every implementation does); moe_permute
// (each expert's rows contiguous); each expert's MLP on its rows; moe_unpermute (the
// gate-weighted sum back into token order). Backward runs the same in reverse, and the
// router's gradient takes the gates' and the auxiliary losses' terms (moe_route_backward).
//
// A shared expert (GPTConfig.moe_shared_d_ff, Qwen2-MoE): one more MLP <name>.shared.* that
// every row goes through, its output added to the routed experts'; with a gate
// (<name>.shared_gate.weight [1, C]) first scaled by sigmoid(x . w). The gate is a router of
// one expert with sigmoid gating that every row picks, so the same route and combine ops
// run it. Under expert parallelism it is held whole on every rank, like attention.
//
// Auxiliary losses, per forward (a micro-batch of R rows), weighted into the objective as the
// language-model loss is (the caller's grad_scale: a micro-batch's share of the batch):
//   load balancing: aux_coef * E * sum_e f_e * P_e; f_e the fraction of the R * k choices that
//     picked expert e (counted before any drop, not differentiated), P_e the mean over rows of
//     softmax(logits)[e] (whatever the gating);
//   router z-loss: z_coef * mean over rows of logsumexp(logits)^2.
// Their values are reported (Acts, MoEStats) beside the language-model loss, not inside it.
#pragma once
#include <memory>
#include <vector>

#include "nn/config.h"
#include "nn/expert_exchange.h"

namespace dt::nn {

// The routing's counts: tokens (kept choices) and drops per expert, summed over blocks and
// micro-batches by whoever reports them.
struct MoEStats {
  std::vector<int64_t> tokens;   // per expert: kept choices
  // Per block and expert ([n_layer x E], block-major; the model fills it, GPT::forward_blocks):
  // under ep a rank's experts' activations are sized block by block (MoE::seat_experts), so
  // the busiest rank's memory follows each block's load, not the sum's.
  std::vector<int64_t> block_tokens;
  int64_t dropped = 0;           // choices over an expert's capacity
  double aux_loss = 0, z_loss = 0;
  // Expert parallelism: the bytes this rank's all-to-alls sent to other ranks (the counts,
  // then dispatch and combine forward and backward: twice the forward's rows, so without
  // activation checkpointing, which runs the forward again), and what they would be if the
  // router sent each expert as many rows (R k (ep - 1) / ep rows each way, four times).
  double exchanged_bytes = 0, exchanged_bytes_uniform = 0;
  // Adds o's counts, and its losses times weight (a micro-batch's share of the objective).
  void add(const MoEStats& o, double weight = 1.0);
};

// Where each (row, choice) of idx (i32 [R, k] host values, experts in [0, E)) goes among
// the permuted rows: grouped by expert in expert order, and within an expert by row, then
// choice (an order every rank derives from idx alone). capacity > 0: an expert keeps at most
// that many, the earliest rows first, and the rest are dropped (slot -1). Returns the
// slots (host i32 [R * k]); per-expert kept counts in `tokens`, picks before dropping in
// `picked`, drops in `dropped`.
std::vector<int32_t> route_slots(const int32_t* idx, int64_t R, int64_t k, int64_t E, int64_t capacity,
                                 std::vector<int64_t>& tokens, std::vector<int64_t>& picked, int64_t& dropped);
// The capacity of each expert for R rows at factor f (0: dropless, returns 0): ceil(f R k / E).
int64_t expert_capacity(float factor, int64_t R, int64_t k, int64_t E);

// A step's pace under ep (ranks holding E / ep consecutive experts each): the sum over blocks
// of each block's busiest rank's rows over an even share of them (each block's ranks wait for
// its busiest at the all-to-all), from MoEStats::block_tokens; 1 when there are none. What
// engine::PlanOptions::expert_load states.
double busiest_rank_pace(const std::vector<int64_t>& block_tokens, int64_t E, int64_t ep);

class MoE : public Module {
 public:
  struct Acts {
    Tensor x;                                      // the input as given (shares its storage)
    Tensor logits, idx, gates, probs, lse, slots;  // routing: [R, E], i32 [R, k], f32 [R, k], f32 [R, E], f32 [R], i32 [R, k]
    Tensor xp, yp, y;                              // permuted rows [S, C], experts' outputs [S, C], combined [R, C]
    std::vector<MLP::Acts> experts;                // this rank's experts': row ranges of `seats`
    std::vector<Tensor> seats;                     // per kind of an MLP's activation: every expert's rows, [rows, d_ff]
    ExpertExchange exchange;                       // ep > 1: the rows to and from the experts' ranks
    Tensor xr, yr, dyr, dxr;                       // ep > 1: the rows of this rank's experts, expert-major
    std::vector<int64_t> picked;                   // per expert: choices before dropping (the f_e of the aux loss)
    MLP::Acts shared;                              // the shared expert's
    Tensor shared_logit, shared_idx, shared_gate, shared_probs, shared_lse, shared_out;  // its gate: [R, 1] each, out [R, C]
    Tensor dshared_y, dshared_gate, dshared_logit, dx_shared;                            // backward
    MoEStats stats;
    Tensor dyp, dxp, dgates, dlogits, dx_router, aux_coef;  // backward
  };
  // c validated and resolved, with n_experts > 0. ep: the experts split over its ranks
  // (nn/expert_exchange.h), this rank holding experts [first_expert, first_expert + E / ep)
  // under their whole-model names; n_experts must divide by ep.
  MoE(const std::string& name, const GPTConfig& c, float proj_std, EpGroup ep = {});
  void collect(ParamList& out) override;
  // x: [..., C] -> y [R, C].
  const Tensor& forward(const Tensor& x, Acts& a);
  // dy: [R, C]; dx overwritten (x's shape). grad_scale weights the auxiliary losses' gradient
  // (the micro-batch's share, as the loss's).
  void backward(const Tensor& dy, Acts& a, Tensor& dx, float grad_scale);
  int64_t num_experts, top_k;
  kernels::MoeGating gating;
  bool renormalize;
  float aux_coef, z_coef, capacity_factor;
  EpGroup ep;
  int64_t first_expert = 0;
  Linear router;
  std::vector<std::unique_ptr<MLP>> experts;  // this rank's: experts[i] is expert first_expert + i
  std::unique_ptr<MLP> shared;                // the shared expert, or null
  std::unique_ptr<Linear> shared_gate;        // its gate, or null

 private:
  // y += the shared expert's output of x (gated), and its backward: dx += its input gradient.
  void add_shared(const Tensor& x, Acts& a);
  void backward_shared(const Tensor& x, const Tensor& dy, Acts& a, Tensor& dx);
  const Tensor& row_slots(int64_t R, Device dev);  // i32 [R, 1]: row r at slot r
  Tensor row_slots_, no_aux_;                       // cached: the identity slots, a zero aux coefficient [1]
  // Each local expert on its rows of `in` (rows[i] for expert i, in order) into `out`, and back.
  void run_experts(const Tensor& in, const std::vector<int64_t>& rows, Tensor& out, Acts& a);
  // Seats each expert's activations of one pass (forward or backward) as its rows of one
  // buffer per kind, so the experts' loads shifting from step to step reuse one allocation
  // instead of re-making every expert's tensors (nn/activation_bytes.h counts these).
  void seat_experts(const std::vector<int64_t>& rows, DType dt, bool backward, Acts& a);
  void backward_experts(const Tensor& dout, const std::vector<int64_t>& rows, Tensor& din, Acts& a);
};

// A block's feed-forward: the dense MLP, or a mixture of experts when cfg.n_experts > 0.
class FeedForward : public Module {
 public:
  struct Acts {
    MLP::Acts mlp;
    MoE::Acts moe;
  };
  FeedForward(const std::string& block_name, const GPTConfig& c, TpGroup tp, float proj_std, EpGroup ep = {});
  void collect(ParamList& out) override;
  const Tensor& forward(const Tensor& x, Acts& a);
  void backward(const Tensor& dy, Acts& a, Tensor& dx, float grad_scale);
  MLP* dense() { return mlp_.get(); }
  MoE* moe() { return moe_.get(); }

 private:
  std::unique_ptr<MLP> mlp_;
  std::unique_ptr<MoE> moe_;
};

}  // namespace dt::nn
