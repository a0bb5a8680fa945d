// ZeRO stages 1 to 3 (FSDP) over the dp axis: the training state that DDP replicates,
// split into dp equal shards, one per rank.
//
// Units: the engine hands over groups of parameters (the non-block parameters, then one
// group per transformer block: FSDP's wrapping of each block). Each unit is flattened into
// one buffer, in parameter order, padded with zeros to a multiple of dp, and rank r owns
// elements [r*s, (r+1)*s) of it (s = padded / dp). Parameters become views into the flat
// buffers, so a collective over a unit needs no packing.
//
//   stage 1  values and grads whole on every rank; the optimizer (a clone_over the shards)
//            holds 1/dp of the state. After the last micro-batch's backward each unit's
//            grads are reduce-scattered in place (rank r's shard gets the sum); after the
//            update each rank's new shard is all-gathered in place into everyone's values
//            (before the step returns, so the model's values are whole between steps).
//   stage 2  + grads sharded: a unit's whole grad buffer exists only from its backward to
//            the end of its reduce-scatter (run every micro-batch, accumulated into the
//            shard), so between steps a rank holds 1/dp of the grads.
//   stage 3  + values sharded: a unit's whole values are all-gathered just before its
//            forward and again before its backward and freed right after; ZeroStrategy
//            prefetches the next unit so its gather overlaps the current one's compute, and
//            never holds more than two units whole.
//
// Padding elements are zero in values and grads, and stay zero through SGD and AdamW
// updates, so they change nothing. Every collective is on the dp communicator, issued in
// the same order on every rank (SPMD); the sums fold in rank order, so every rank's shard
// is bitwise what DDP's all-reduce would give that slice.
//
// Not thread-safe: one rank thread drives one ZeroSharding.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "nn/parameter.h"
#include "optim/optimizer.h"
#include "parallel/local_piece.h"

namespace dt::parallel {

class ZeroSharding {
 public:
  // stage: 1, 2 or 3. units: disjoint parameter groups (each non-empty, one dtype and
  // device within a unit); names: one per unit, for the shard parameters ("zero.<name>")
  // and the trace. The parameters' current values must be equal on every rank (replicas).
  ZeroSharding(int stage, const std::vector<nn::ParamList>& units, const std::vector<std::string>& names,
               comm::Communicator& dp);
  ~ZeroSharding();
  ZeroSharding(const ZeroSharding&) = delete;
  ZeroSharding& operator=(const ZeroSharding&) = delete;

  int stage() const { return stage_; }
  int num_units() const { return static_cast<int>(units_.size()); }
  // What the sharded optimizer updates: one parameter per unit, "zero.<name>", value = this
  // rank's shard of the flat values (f32 [s] or the model's dtype), grad = its grad shard.
  const nn::ParamList& shard_params() const { return shard_ptrs_; }
  // Elements of zero padding over all units (each unit is padded to a multiple of dp).
  int64_t padding_elements() const;

  // One step, as ZeroStrategy (parallel/zero_strategy.h) drives it:
  void begin_step();                // zeroes the grads; ends a gather_all()
  void need_values(int unit);       // the unit's values are whole and usable once it returns
  void prefetch_values(int unit);   // stage 3: starts the unit's gather (ignored out of range)
  void release_values(int unit);    // stage 3: frees the unit's whole values
  void begin_grads(int unit);       // stage 2/3: a zeroed whole grad buffer for its backward (or the one begun)
  void reduce_grads(int unit);      // its grads are final for this micro-batch: reduce-scatter
  void finish_grads();              // waits for every reduction; the shard grads hold sums
  void after_step();                // stage 1/2: the updated shards all-gathered into the values
  // This rank's shard gradients' squared sum (after finish_grads), in two parts by the
  // parameters' specs: elements of parameters split over a model-parallel axis (tensor
  // parallel parts), and of replicated ones.
  // apart (optional): parameters it says yes to are summed into *apart_sq instead (expert
  // parallelism sums its experts over other groups than the rest).
  void squared_grad_norm(double& split, double& replicated,
                         const std::function<bool(const nn::Parameter&)>* apart = nullptr,
                         double* apart_sq = nullptr) const;

  // Every unit's values whole and kept (generation, evaluation, save) until begin_step or
  // release_all.
  void gather_all();
  void release_all();  // stage 3: ends a gather_all() now
  // Checkpoints, in the single-rank layout: every parameter and every optimizer state
  // tensor "<param>.<suffix>" whole (gathered over dp: collective, every rank calls it),
  // plus the shard optimizer's "optimizer.step". Values need gather_all() first at stage 3.
  std::vector<nn::StateTensor> whole_state(const optim::Optimizer& shard_opt);
  // The reverse: this rank's shards of the values and of shard_opt's state out of whole
  // per-parameter tensors, looked up by name ("<param>" for values, "<param>.<suffix>"
  // for state, "optimizer.step"). A name the lookup lacks is an error naming it.
  using Lookup = std::function<const Tensor*(const std::string& name)>;
  void load_whole_state(const Lookup& lookup, optim::Optimizer& shard_opt, bool values);
  // The per-parameter names load_whole_state asks for, each with its shape and dtype
  // (parameters first), so a caller can make the tensors to read a checkpoint into.
  std::vector<std::pair<std::string, Tensor>> whole_state_templates(const optim::Optimizer& shard_opt) const;
  // Sharded checkpoints: this rank's own elements of every per-parameter tensor, as views of
  // its shards (values "<param>", optimizer state "<param>.<suffix>"; padding left out; the
  // step counter whole, not sharded). Not collective.
  std::vector<LocalPiece> local_state(optim::Optimizer& shard_opt);
  // After a load wrote into local_state's views: stages 1/2 gather the whole values from the
  // shards (collective over dp); stage 3 drops any gathered copy.
  void after_local_load();

 private:
  struct Unit;
  void complete_reduction(Unit& u);
  void wait_gather(Unit& u);
  void bind_values(Unit& u);
  void unbind_values(Unit& u);
  void bind_grads(Unit& u);
  // Copies this rank's shard of a unit's flat concatenation out of per-parameter tensors.
  void copy_shard_in(const Unit& u, const std::function<const Tensor*(size_t param)>& src, Tensor& dst) const;
  int unit_of_state(const std::string& state_name, std::string& suffix) const;

  int stage_;
  comm::Communicator& dp_;
  std::vector<std::unique_ptr<Unit>> units_;
  std::vector<nn::Parameter> shards_;
  nn::ParamList shard_ptrs_;
  std::vector<int> reducing_;  // units whose reduce-scatter is in flight, oldest first
  bool pinned_ = false;        // gather_all() holds every unit's values
};

}  // namespace dt::parallel
