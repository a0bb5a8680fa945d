#include "parallel/layout.h"

#include <cstdlib>
#include <cstring>

#include "core/device_scope.h"
#include "core/error.h"
#include "core/gpu_runtime.h"
#include "core/rank_scope.h"
#include "core/tensor_copy.h"
#include "core/thread_pool.h"
#include "nn/module.h"
#include "nn/tensor_parallel.h"
#include "parallel/pipeline_schedule.h"

namespace dt::parallel {
namespace {

// What the layout does with each mesh axis, declared once: the axis check and its message
// read this table. An axis not here cannot be larger than one rank.
struct AxisPlacement {
  int axis;
  const char* places;  // what one rank of the axis holds, for messages
};
constexpr AxisPlacement kAxisPlacements[] = {
    {comm::kDp, "a whole replica"},
    {comm::kPp, "its pipeline stage's blocks"},
    {comm::kEp, "its share of every block's experts"},
    {comm::kCp, "two chunks of every sequence"},
    {comm::kTp, "its tensor-parallel split"},
};

// Local rank i's device: the CPU for a CPU model; for a GPU model on cuda:d, cuda:(d + i),
// one GPU per rank (NCCL cannot put two ranks of one communicator on one GPU).
std::vector<Device> rank_devices(Device model_device, size_t local) {
  if (model_device.type == DeviceType::CPU) return std::vector<Device>(local, model_device);
  const int n = gpu::device_count(), need = model_device.index + static_cast<int>(local);
  if (need > n)
    fail(DT_ERR_UNSUPPORTED, "data parallel over GPUs: " + std::to_string(local) + " local ranks from " +
                                 model_device.str() + " need cuda:" + std::to_string(model_device.index) + " to cuda:" +
                                 std::to_string(need - 1) + ", one GPU per rank; CUDA devices found: " +
                                 std::to_string(n));
  std::vector<Device> out;
  for (size_t i = 0; i < local; ++i) out.push_back(Device{DeviceType::CUDA, model_device.index + static_cast<int>(i)});
  return out;
}

}  // namespace

double head_cost_blocks(const nn::GPTConfig& c) {
  return static_cast<double>(c.vocab_size) / (12.0 * static_cast<double>(c.d_model));
}

std::vector<int> pipeline_boundaries(const nn::GPTConfig& cfg, int pp, int virtual_stages,
                                     const std::vector<int>& pp_blocks) {
  const nn::GPTConfig c = cfg.resolved();
  const int L = static_cast<int>(c.n_layer), parts = pp * virtual_stages;
  DT_CHECK(parts <= L, "pipeline: pp (" + std::to_string(pp) + ") x virtual_stages (" +
                           std::to_string(virtual_stages) + ") = " + std::to_string(parts) +
                           " stages, more than the model's " + std::to_string(L) + " blocks; accepted: at most " +
                           std::to_string(L) + " stages");
  return pp_blocks.empty() ? balance_stages(L, parts, 1.0, 0.0, head_cost_blocks(c))
                           : stages_from_counts(pp_blocks, L, parts);
}

Layout::Layout(std::shared_ptr<comm::Mesh> mesh, nn::GPT& host, const LayoutOptions& o)
    : mesh_(std::move(mesh)), host_(host), options_(o) {
  check_axes();
  build_parts();
}

Layout::~Layout() = default;

void Layout::check_axes() const {
  // Pipeline placement without a pipeline would be ignored: refused, as dt_plan_json does.
  if (pp() < 2) {
    DT_CHECK(options_.virtual_stages == 1, "option \"virtual_stages\" = " + std::to_string(options_.virtual_stages) +
                                               " splits pipeline ranks into chunks; the mesh's pp axis is " +
                                               std::to_string(pp()) + "; accepted: with a pp axis >= 2, or leave it out");
    DT_CHECK(options_.pp_blocks.empty(), "option \"pp_blocks\" places blocks on pipeline stages; the mesh's pp axis is " +
                                             std::to_string(pp()) + "; accepted: with a pp axis >= 2, or leave it out");
  }
  // The experts' auxiliary losses are means over a micro-batch's tokens, which cp ranks
  // would each take over their own chunks: not the single-rank objective.
  DT_CHECK(cp() == 1 || !host_.config().moe(),
           "context parallelism (cp = " + std::to_string(cp()) + ") with a mixture of experts (experts = " +
               std::to_string(host_.config().n_experts) + "): not built yet; accepted: cp = 1 with experts, or a "
               "dense model");
  DT_CHECK(!options_.sequence_parallel || tp() > 1,
           "sequence_parallel needs tensor parallelism: the mesh's tp axis is " + std::to_string(tp()) +
               "; accepted: sequence_parallel with a tp axis > 1, or without it");
  for (int a = 0; a < comm::kNumAxes; ++a) {
    if (size(a) == 1) continue;
    bool placed = false;
    std::string have;
    for (const AxisPlacement& p : kAxisPlacements) {
      placed = placed || p.axis == a;
      have += std::string(have.empty() ? "" : "; ") + comm::axis_name(p.axis) + ": " + p.places;
    }
    DT_CHECK(placed, std::string("mesh axis \"") + comm::axis_name(a) + "\" = " + std::to_string(size(a)) +
                         ": no placement divides the model over it (a rank of each placed axis holds " + have + ")");
  }
}

void Layout::build_parts() {
  if (!mesh_ || mesh_->world_size() == 1) {  // one device: the host is the one part
    parts_ = {&host_};
    devices_ = {host_.device()};
    return;
  }
  const size_t local = mesh_->local_ranks().size();
  devices_ = rank_devices(host_.device(), local);
  const bool on_gpus = devices_[0].type == DeviceType::CUDA;
  // NCCL matches point-to-point messages between two ranks by their order alone (no tags),
  // and a pipeline's activations, gradients and tied-table messages between one pair are
  // issued in orders that only tags reconcile; until that runs on a GPU, refuse it here
  // rather than risk a mismatched or hung transfer.
  if (on_gpus && pp() > 1)
    fail(DT_ERR_UNSUPPORTED, "pipeline parallelism (pp = " + std::to_string(pp()) + ") on GPUs: NCCL matches "
                             "point-to-point messages by order, not by tag, which the pipeline's streams need; "
                             "accepted: pp = 1 on GPUs, or a pipeline of CPU ranks (local or mpi backend)");
  // The experts' all-to-all moves host buffers; on GPUs it waits for a GPU to be tested on.
  if (on_gpus && ep() > 1)
    fail(DT_ERR_UNSUPPORTED, "expert parallelism (ep = " + std::to_string(ep()) + ") on GPUs: not yet; accepted: "
                             "ep = 1 on GPUs, or ep over CPU ranks (local or mpi backend)");
  // Ring attention's non-causal blocks run on the CPU kernels only (kernels/ops.h).
  if (on_gpus && cp() > 1)
    fail(DT_ERR_UNSUPPORTED, "context parallelism (cp = " + std::to_string(cp()) + ") on GPUs: not yet; accepted: "
                             "cp = 1 on GPUs, or cp over CPU ranks (local or mpi backend)");
  if (on_gpus)  // made here, on the driving thread, before any rank asks for them
    for (int a : {int(comm::kTp), int(comm::kDp)})
      if (size(a) > 1) mesh_->make_device_comms(comm::axis_name(a), devices_);
  if (!splits_model()) {
    // dp replicas: local rank 0's is the host itself, whose memory is credited to it; the
    // others are copies, each its rank's memory on its device.
    parts_.push_back(&host_);
    for (nn::Parameter* q : host_.parameters())
      for (Tensor* t : {&q->value, &q->grad})
        if (t->defined()) t->storage()->set_rank(rank(0));
    const nn::ParamList from = host_.parameters();
    for (size_t i = 1; i < local; ++i) {
      ScopedRank owner(rank(static_cast<int>(i)));
      ScopedDevice on(devices_[i]);
      owned_.push_back(std::make_unique<nn::GPT>(host_.config()));
      const nn::ParamList to = owned_.back()->parameters();
      for (size_t k = 0; k < from.size(); ++k) copy_tensor(from[k]->value, to[k]->value);
      parts_.push_back(owned_.back().get());
    }
  } else {
    const int L = static_cast<int>(host_.config().n_layer);
    virtual_stages_ = pp() > 1 ? options_.virtual_stages : 1;
    if (pp() > 1) boundaries_ = pipeline_boundaries(host_.config(), pp(), virtual_stages_, options_.pp_blocks);
    parts_.assign(local, nullptr);
    owned_.resize(local);
    // Each part is built on its rank thread, so that its parameters are its rank's memory
    // and device, and its communicators made where they are used.
    mesh_->run([&](int li, int r) {
      const size_t i = static_cast<size_t>(li);
      ScopedRank owner(r);
      ScopedDevice on(devices_[i]);
      // This rank's chunks: virtual stages s, s + pp, ... for pipeline rank s (pipeline_schedule.h).
      std::vector<nn::BlockRange> chunks = {{0, L}};
      if (pp() > 1) {
        chunks.clear();
        const int stage = coords(r)[comm::kPp];
        for (int c = 0; c < virtual_stages_; ++c) {
          const size_t vs = static_cast<size_t>(c * pp() + stage);
          chunks.push_back({boundaries_[vs], boundaries_[vs + 1]});
        }
      }
      {
        nn::ScopedSkipParamInit values_from_the_host;  // scatter_values writes every one
        owned_[i] = std::make_unique<nn::GPT>(host_.config(),
                                              nn::TpGroup{group(li, comm::kTp), options_.sequence_parallel}, chunks,
                                              nn::EpGroup{group(li, comm::kEp)}, nn::CpGroup{group(li, comm::kCp)});
      }
      parts_[i] = owned_[i].get();
    });
  }
  // Every part's parameters split alike over tp: the local ones say how each splits.
  for (nn::GPT* m : parts_) {
    nn::ParamList ps = m->parameters();
    if (nn::Parameter* copy = m->tied_copy()) ps.push_back(copy);  // split as the table it copies
    for (nn::Parameter* q : ps) {
      specs_[q->name] = q->spec;
      part_shapes_[q->name] = q->shape;
    }
  }  if (splits_model()) run([&](int li, int) { scatter_values(li); });
}

comm::Communicator* Layout::group(int li, int axis) const {
  if (size(axis) == 1) return nullptr;
  return &mesh_->comm_for(rank(li), comm::axis_name(axis), device(li));
}

comm::Communicator* Layout::group(int li, const std::string& axes) const {
  if (!mesh_) return nullptr;
  return &mesh_->comm_for(rank(li), axes, device(li));
}

comm::Communicator* Layout::batch_group(int li) const {
  if (dp() * ep() == 1) return nullptr;
  return &mesh_->comm_for(rank(li), ep() > 1 && dp() > 1 ? "dp*ep" : ep() > 1 ? "ep" : "dp", device(li));
}

int Layout::expert_owner(const std::string& name) const {
  if (ep() == 1) return -1;
  const size_t at = name.find(".moe.experts.");
  if (at == std::string::npos) return -1;
  const int64_t e = std::atoll(name.c_str() + at + 13);
  return static_cast<int>(e / (host_.config().n_experts / ep()));
}

comm::Communicator& Layout::world(int li) const {
  DT_ASSERT(mesh_ != nullptr);
  return mesh_->comm(rank(li), "world");
}

void Layout::run(const std::function<void(int, int)>& fn) const {
  if (!mesh_) return fn(0, 0);
  const bool shared_cores = parts_.size() > 1;
  mesh_->run([&](int li, int r) {
    // Ranks of one process share its cores: each runs its kernels on its own thread rather
    // than queueing on the one pool.
    std::unique_ptr<ScopedSerialKernels> serial;
    if (shared_cores) serial = std::make_unique<ScopedSerialKernels>();
    fn(li, r);
  });
}

nn::ShardSpec Layout::split_of(const std::string& name, const Shape& part_shape) const {
  // "<param>" or "<param>.<suffix>" (a moment, a master) of the parameter's part shape.
  for (size_t end = name.size(); end != std::string::npos && end > 0; end = name.rfind('.', end - 1)) {
    auto it = specs_.find(name.substr(0, end));
    if (it != specs_.end()) return part_shapes_.at(it->first) == part_shape ? it->second : nn::ShardSpec{};
  }
  return nn::ShardSpec{};
}

int Layout::stage_of(const std::string& name) const {
  if (pp() == 1) return 0;
  if (name.rfind("blocks.", 0) == 0) {
    const int b = std::atoi(name.c_str() + 7);
    for (size_t vs = 0; vs + 1 < boundaries_.size(); ++vs)
      if (b < boundaries_[vs + 1]) return static_cast<int>(vs) % pp();
  }
  if (name.rfind("wte.", 0) == 0 || name.rfind("wpe.", 0) == 0) return 0;
  if (name.rfind("ln_f.", 0) == 0 || name.rfind("lm_head.", 0) == 0) return pp() - 1;
  return -1;
}

void Layout::scatter(int li, const std::map<std::string, Tensor>& whole, const NamedTensors& targets) const {
  ScopedDevice on(device(li));
  const int r = coords(rank(li))[comm::kTp];
  for (const nn::StateTensor& st : targets) {
    const std::string& name = st.name;
    const Tensor& t = st.tensor;
    auto it = whole.find(name);
    DT_ASSERT(it != whole.end());
    if (it->second.raw() == t.raw()) continue;  // the host's own tensor (a dp layout's part 0)
    Tensor dst = t;
    copy_tensor(nn::take_shard(it->second, split_of(name, t.shape()), r, tp()), dst);
  }
}

void Layout::scatter_values(int li, const std::set<std::string>* only) const {
  std::map<std::string, Tensor> whole;
  for (nn::Parameter* q : host_.parameters())
    if (!only || only->count(q->name)) whole[q->name] = q->value;
  NamedTensors mine;
  for (nn::Parameter* q : part(li).parameters())
    if (whole.count(q->name)) mine.push_back({q->name, q->value, q->spec});
  if (nn::Parameter* copy = part(li).tied_copy())
    if (whole.count(copy->name)) mine.push_back({copy->name, copy->value, copy->spec});
  scatter(li, whole, mine);
}

void Layout::gather(int li, const NamedTensors& mine, std::map<std::string, Tensor>& whole) const {
  ScopedDevice on(device(li));
  const Device dev = device(li);
  if (!splits_model()) {  // every part is whole: local part 0's are the wholes
    if (li != 0) return;
    for (const nn::StateTensor& t : mine) {
      auto it = whole.find(t.name);
      DT_ASSERT(it != whole.end());
      if (it->second.raw() != t.tensor.raw()) copy_tensor(t.tensor, it->second);
    }
    return;
  }
  comm::Communicator* tpc = group(li, comm::kTp);
  std::map<std::string, Tensor> over_tp;  // this part's tensors, whole over tp
  for (const nn::StateTensor& st : mine) {
    const std::string& name = st.name;
    const Tensor& part = st.tensor;
    const nn::ShardSpec spec = split_of(name, part.shape());
    if (spec.replicated()) {
      over_tp[name] = part;
      continue;
    }
    const int64_t n = part.numel();
    Tensor parts = Tensor::uninit({tp() * n}, part.dtype(), dev);
    tpc->all_gather(part.raw(), parts.raw(), n, part.dtype());
    auto like = whole.find(name);
    DT_ASSERT(like != whole.end());
    Tensor w = Tensor::uninit(like->second.shape(), part.dtype(), dev);
    for (int r = 0; r < tp(); ++r) nn::place_shard(parts.slice0(r * n, (r + 1) * n).reshape(part.shape()), spec, r, tp(), w);
    over_tp[name] = w;
  }
  // Over ep, each expert's tensors from the rank holding them, within the stage holding
  // them (every rank of an ep group is at one stage), in name order.
  comm::Communicator* epc = group(li, comm::kEp);
  const int my_stage = pp() > 1 ? coords(rank(li))[comm::kPp] : 0;
  for (auto& [name, dst] : whole) {
    const int owner = expert_owner(name), stage = stage_of(name);
    if (owner < 0 || (stage >= 0 && stage != my_stage)) continue;
    auto it = over_tp.find(name);
    const bool mine_here = epc->rank() == owner;
    DT_ASSERT(!mine_here || it != over_tp.end());
    Tensor buf = mine_here ? it->second : Tensor::uninit(dst.shape(), dst.dtype(), dev);
    epc->broadcast(buf.raw(), buf.raw(), buf.numel(), buf.dtype(), owner);
    over_tp[name] = buf;
  }
  // Over pp, each tensor from the stage holding it, in name order (the same on every process).
  comm::Communicator* ppc = group(li, comm::kPp);
  for (auto& [name, dst] : whole) {
    const int owner = stage_of(name);
    auto it = over_tp.find(name);
    if (!ppc || owner < 0) {  // held whole here (every stage's step counter is the same)
      DT_ASSERT(it != over_tp.end());
      if (li == 0) copy_tensor(it->second, dst);
      continue;
    }
    const bool mine_here = ppc->rank() == owner;
    DT_ASSERT(!mine_here || it != over_tp.end());
    Tensor buf = mine_here ? it->second : Tensor::uninit(dst.shape(), dst.dtype(), dev);
    ppc->broadcast(buf.raw(), buf.raw(), buf.numel(), buf.dtype(), owner);
    if (li == 0) copy_tensor(buf, dst);
  }
}

}  // namespace dt::parallel
