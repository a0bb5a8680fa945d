// Placement: where each part of a model lives on a mesh, and how the parts make the whole.
//
// A Layout is built once from the whole model (the host: what the user gave) and a mesh.
// For each local rank it holds:
//   - its part: the host itself or a copy of it (a dp replica), or a new model holding this
//     rank's tp split of its pipeline stage's chunks;
//   - its groups: the communicators of its axes, asked from the mesh, which picks the
//     transport for the part's device (comm/mesh.h);
//   - the whole<->part map: which slice of which whole tensor a part's tensor is (its tp
//     ShardSpec, the pipeline stage that holds it), which every reader of whole state uses:
//     checkpoints, the module's parameter views, serving.
// Training is a layout plus one engine per part (engine/trainer.h); serving is a layout plus
// the paged forward (serve/model_runner.h). Neither builds the other.
//
// The axes a layout splits the model over are declared once, in kAxisPlacements
// (layout.cc): an axis of more than one rank that no placement or strategy claims is refused
// by name. dp places whole replicas; tp splits every block and the vocabulary; pp places
// block ranges (virtual stages) on ranks; ep places a share of every block's experts (a
// mixture of experts, nn/moe.h); cp places a whole replica that sees two chunks of every
// sequence (context parallelism, nn/ring_attention.h), its attention round the cp ring.
//
// Threads: build on the thread that drives the mesh (the parts are built on their rank
// threads); run() executes on every local part's rank thread; scatter and gather are
// called from run() on every local part (collective over tp and pp).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "comm/mesh.h"
#include "nn/gpt.h"

namespace dt::parallel {

struct LayoutOptions {
  // Megatron sequence parallelism on the tp axis (nn/tensor_parallel.h); needs tp > 1.
  bool sequence_parallel = false;
  // Pipelines: model chunks per rank (interleaved: >= 2) and optionally the blocks of each
  // of the pp x virtual_stages stages in stream order (empty: balanced by estimated cost).
  int virtual_stages = 1;
  std::vector<int> pp_blocks;
};

// The pipeline's block placement: pp x virtual_stages + 1 boundaries (virtual stage s holds
// blocks [b[s], b[s + 1]), in stream order). From pp_blocks when given, else balanced by
// estimated cost: a block costs 1, the last stage's head and loss vocab / (12 d_model)
// blocks. INVALID_ARGUMENT for more stages than blocks, naming both counts. dtrain plan
// places blocks with the same function.
std::vector<int> pipeline_boundaries(const nn::GPTConfig& cfg, int pp, int virtual_stages,
                                     const std::vector<int>& pp_blocks);
// The head's and loss's cost in blocks: its GEMM (d_model x vocab per token) against a
// block's ~12 d_model^2.
double head_cost_blocks(const nn::GPTConfig& c);

// Named tensors of a part (parameters, optimizer moments and masters, counters).
using NamedTensors = std::vector<nn::StateTensor>;

class Layout {
 public:
  // mesh null or of one rank: one part, the host itself. Checks every axis is placed, SP
  // has a tp axis and the pipeline options have a pp axis (INVALID_ARGUMENT naming the option).
  Layout(std::shared_ptr<comm::Mesh> mesh, nn::GPT& host, const LayoutOptions& o);
  ~Layout();
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;

  const std::shared_ptr<comm::Mesh>& mesh() const { return mesh_; }
  int size(int axis) const { return mesh_ ? mesh_->axis_size(axis) : 1; }
  int dp() const { return size(comm::kDp); }
  int tp() const { return size(comm::kTp); }
  int pp() const { return size(comm::kPp); }
  int ep() const { return size(comm::kEp); }
  int cp() const { return size(comm::kCp); }
  // The ranks the data-parallel strategy (DDP or ZeRO) sums gradients over: dp, and cp,
  // whose ranks train shares of the same rows.
  int data_parallel_size() const { return dp() * cp(); }
  int virtual_stages() const { return virtual_stages_; }
  // True when a part is not the host's replica (tp, pp or ep split it, or its attention is
  // a cp ring's): whole state then exists only by gathering (gather), and the host is a
  // separate model.
  bool splits_model() const { return tp() > 1 || pp() > 1 || ep() > 1 || cp() > 1; }
  // True when the parts can decode together (generation over a KV cache, split by tp and
  // pp): not with virtual stages (a prompt would go round the ranks v times) nor cp (a
  // decode step has no sequence to split); the gathered host generates then.
  bool parts_decode() const { return virtual_stages_ == 1 && cp() == 1; }
  // One rank in all: the host is the only part and nothing is divided.
  bool single() const { return !mesh_ || mesh_->world_size() == 1; }
  const LayoutOptions& options() const { return options_; }

  int local_parts() const { return static_cast<int>(parts_.size()); }
  nn::GPT& part(int li) const { return *parts_.at(static_cast<size_t>(li)); }
  nn::GPT& host() const { return host_; }
  // True when part li is the host model itself (dp layouts: local rank 0's replica).
  bool part_is_host(int li) const { return parts_.at(static_cast<size_t>(li)) == &host_; }
  Device device(int li) const { return devices_.at(static_cast<size_t>(li)); }
  int rank(int li) const { return mesh_ ? mesh_->local_ranks().at(static_cast<size_t>(li)) : 0; }
  comm::Coords coords(int rank) const { return mesh_ ? mesh_->coords(rank) : comm::Coords{}; }
  int rank_of(const comm::Coords& c) const { return mesh_ ? mesh_->rank_of(c) : 0; }
  // Every rank of the mesh is in this process (or there is no mesh).
  bool in_process() const { return !mesh_ || static_cast<int>(mesh_->local_ranks().size()) == mesh_->world_size(); }
  // Part li's communicator over `axis` (kDp, kTp, kPp), on the transport for its device;
  // null for an axis of one rank. Made on first use (collective under mpi: call from run()).
  comm::Communicator* group(int li, int axis) const;
  // The same over several axes ("pp*ep", outer to inner; comm::Mesh::canonical_axes).
  comm::Communicator* group(int li, const std::string& axes) const;
  // Part li's communicator over the whole mesh (made on first use, collective under mpi).
  comm::Communicator& world(int li) const;
  // Part li's communicator over the ranks that split the batch: dp, and ep (expert
  // parallelism's ranks each route their own tokens); null when both are 1.
  comm::Communicator* batch_group(int li) const;

  // fn(local_index, rank) on every local part's rank thread at once (each runs its kernels
  // on its own thread when several share the process's cores); on the calling thread
  // without a mesh.
  void run(const std::function<void(int local_index, int rank)>& fn) const;

  // --- the whole<->part map
  // How a part's tensor `name` of shape part_shape splits over tp ("<param>" or
  // "<param>.<suffix>" of the parameter's part shape splits as the parameter does; anything
  // else is replicated).
  nn::ShardSpec split_of(const std::string& name, const Shape& part_shape) const;
  // The pipeline stage holding `name` ("blocks.<i>.*": its block's; embeddings the first;
  // the final norm and head the last); -1: every stage (the optimizer's step, the scaler).
  int stage_of(const std::string& name) const;
  // The ep rank holding `name` ("blocks.<i>.moe.experts.<e>.*": expert e's), or -1: every
  // ep rank (ep = 1, or a tensor outside the experts).
  int expert_owner(const std::string& name) const;
  // Part li's pieces of the whole tensors: each target (named as in `whole`, a part's
  // shape) filled from its slice of whole[name]. Runs on part li's thread; not collective.
  void scatter(int li, const std::map<std::string, Tensor>& whole, const NamedTensors& targets) const;
  // Part li's parameter values (and a last stage's tied copy of the token table) from the
  // host's current values: every one, or those named in `only`. Runs on part li's thread.
  void scatter_values(int li, const std::set<std::string>* only = nullptr) const;
  // The reverse, collective over tp, ep and pp (every local part calls it from run()): each
  // of part li's tensors all-gathered over tp, an expert's broadcast from the ep rank
  // holding it, then each broadcast from the stage holding it; local
  // part 0 writes the wholes into `whole` (tensors of the whole's shapes, by name, which
  // only it touches). Under mpi every process assembles the same whole.
  void gather(int li, const NamedTensors& mine, std::map<std::string, Tensor>& whole) const;

 private:
  void check_axes() const;
  void build_parts();

  std::shared_ptr<comm::Mesh> mesh_;
  nn::GPT& host_;
  LayoutOptions options_;
  int virtual_stages_ = 1;
  std::vector<int> boundaries_;  // pp > 1: the virtual stages' first blocks, then n_layer
  std::vector<Device> devices_;
  std::vector<nn::GPT*> parts_;
  std::vector<std::unique_ptr<nn::GPT>> owned_;
  std::map<std::string, nn::ShardSpec> specs_;  // by parameter name, with the part's shape
  std::map<std::string, Shape> part_shapes_;
};

}  // namespace dt::parallel
