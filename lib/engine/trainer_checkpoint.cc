// Sharded checkpoints of a Trainer on a mesh (io/checkpoint.h, format 2): every rank writes
// what it holds to its own file, in parallel, with no gather; one index written last by the
// world's rank 0 lists every tensor's chunks; a load reads into each rank only the boxes it
// holds, so a checkpoint saved under one layout resumes under any other (or one rank).
//
// What a rank holds comes from its engine (TrainEngine::local_state: a ZeRO shard's own
// elements, else every tensor of its part) and the layout's whole<->part map (the tp split
// of each tensor, parallel/layout.h). A tensor several ranks hold alike (dp or cp replicas,
// tp-replicated norms, what every ep rank or pp stage holds) is written once, by the member
// a hash of its name picks, so the writes spread over the group.
#include <cstring>
#include <filesystem>
#include <exception>

#include "core/error.h"
#include "core/tensor_copy.h"
#include "engine/trainer.h"
#include "io/checkpoint.h"

namespace dt::engine {
namespace {

uint64_t name_hash(const std::string& s) {  // FNV-1a: the same on every process and build
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// One local piece, cut into whole-index boxes with host tensors of their own (staging).
struct Mapped {
  io::TensorPieces out;  // name, whole shape, dtype, spec, and the boxes
  // For a load: where each box's elements go back, in part coordinates: the run of the
  // piece's host data holding flat box `run_box`, and the box's region within it.
  struct Back {
    Tensor run;
    io::Box run_box, region;
  };
  std::vector<Back> back;
  Tensor host, device_data;  // the piece's data on the host; itself when not on the CPU
};

class StateMap {
 public:
  StateMap(const parallel::Layout& layout, int li) : L_(layout) {
    for (nn::Parameter* p : L_.host().parameters()) whole_shapes_[p->name] = p->shape;
    coords_ = L_.coords(L_.rank(li));
  }

  // The whole shape of this part's tensor `name` of part shape `shape`, and its split.
  Shape whole_shape(const std::string& name, const Shape& shape, nn::ShardSpec& spec) const {
    spec = L_.split_of(name, shape);
    if (spec.replicated()) return shape;
    for (size_t end = name.size(); end != std::string::npos && end > 0; end = name.rfind('.', end - 1)) {
      auto it = whole_shapes_.find(name.substr(0, end));
      if (it != whole_shapes_.end()) return it->second;
    }
    fail(DT_ERR_INTERNAL, "sharded checkpoint: no whole shape for \"" + name + "\"");
  }

  // Whether this rank writes the piece: of the ranks that hold it alike, the one its name picks.
  bool writes(const parallel::LocalPiece& p) const {
    const nn::ShardSpec spec = L_.split_of(p.name, p.shape);
    const uint64_t h = name_hash(p.name);
    auto picked = [&](int axis) { return L_.size(axis) == 1 || coords_[axis] == static_cast<int>(h % L_.size(axis)); };
    if (!p.sharded && !(picked(comm::kDp) && picked(comm::kCp))) return false;
    if (spec.replicated() && !picked(comm::kTp)) return false;
    if (L_.expert_owner(p.name) < 0 && !picked(comm::kEp)) return false;
    if (L_.stage_of(p.name) < 0 && !picked(comm::kPp)) return false;
    return true;
  }

  // p's elements as boxes of the whole tensor, each with a host tensor: filled from p for a
  // save, to be filled by the loader (then written back) for a load.
  Mapped map(const parallel::LocalPiece& p, bool save) const {
    Mapped m;
    nn::ShardSpec spec;
    const Shape whole = whole_shape(p.name, p.shape, spec);
    m.out = {p.name, whole, p.data.dtype(), nn::ShardSpec{}, {}};  // whole in the index: the chunks say who held what
    Tensor host = p.data;
    if (p.data.device().type != DeviceType::CPU) {
      host = save ? to_device(p.data, Device::cpu()) : Tensor::uninit(p.data.shape(), p.data.dtype());
      if (!save) m.device_data = p.data;
    }
    m.host = host;
    const size_t elem = dtype_size(p.data.dtype());
    const std::vector<io::PartBox> parts = io::part_boxes(spec, whole, coords_[comm::kTp], L_.tp());
    int64_t at = 0;  // where each flat box's elements start in p.data
    for (const io::Box& b : io::flat_range_boxes(p.shape, p.begin, p.end)) {
      const Tensor run = host.reshape({host.numel()}).slice0(at, at + b.numel());
      at += b.numel();
      for (const io::PartBox& pb : parts) {
        io::Box region;
        if (!io::intersect(b, pb.part, &region)) continue;
        io::Box in_whole = region;
        for (size_t d = 0; d < region.offset.size(); ++d) in_whole.offset[d] += pb.whole.offset[d] - pb.part.offset[d];
        Tensor staged = Tensor::uninit(region.extent, p.data.dtype());
        if (save) io::copy_region(run.raw(), b, staged.raw(), region, region, elem);
        else m.back.push_back({run, b, region});
        m.out.pieces.push_back({in_whole, staged});
      }
    }
    return m;
  }

 private:
  const parallel::Layout& L_;
  std::map<std::string, Shape> whole_shapes_;
  comm::Coords coords_;
};

// Every rank's text, on every rank (the lengths first, then the bytes as i32 words).
std::vector<std::string> all_gather_text(comm::Communicator& world, const std::string& mine) {
  const int n = world.size();
  int64_t len = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lens(static_cast<size_t>(n));
  world.all_gather(&len, lens.data(), 1, DType::I64);
  int64_t words = 0;
  for (int64_t l : lens) words = std::max(words, (l + 3) / 4);
  std::vector<int32_t> send(static_cast<size_t>(words), 0), recv(static_cast<size_t>(words * n));
  std::memcpy(send.data(), mine.data(), mine.size());
  if (words > 0) world.all_gather(send.data(), recv.data(), words, DType::I32);
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r)
    out.emplace_back(reinterpret_cast<const char*>(recv.data() + r * words), static_cast<size_t>(lens[static_cast<size_t>(r)]));
  return out;
}

// Whether every rank succeeded (1 each), agreed over the world: a rank that failed must not
// leave the others writing or waiting alone.
bool all_ok(comm::Communicator& world, bool ok) {
  int32_t v = ok ? 0 : 1, any = 0;
  world.all_reduce(&v, &any, 1, DType::I32, kernels::ReduceOp::Max);
  return any == 0;
}

}  // namespace

void Trainer::save_sharded(const std::string& dir, const nlohmann::json& extra, const std::string& stem) {
  std::error_code ec;  // a missing directory is created; the writes report what still fails
  std::filesystem::create_directories(dir, ec);
  std::vector<std::string> errors(replicas_.size());
  on_all([&](int li, int rank) {
    TrainEngine& r = *replicas_[static_cast<size_t>(li)];
    comm::Communicator& world = layout_->world(li);
    nlohmann::json table;
    try {
      const StateMap map(*layout_, li);
      std::vector<io::TensorPieces> mine;
      for (const parallel::LocalPiece& p : r.local_state())
        if (map.writes(p)) mine.push_back(map.map(p, true).out);
      const int64_t generation = io::checkpoint_next_generation(dir, stem);
      table = io::write_checkpoint_shard(dir, stem, generation, rank, mine);
      table["generation"] = generation;
    } catch (const std::exception& e) {
      table = {{"error", e.what()}};
    }
    const std::vector<std::string> tables = all_gather_text(world, table.dump());
    bool ok = true;
    if (rank == 0) {
      try {
        std::vector<nlohmann::json> all;
        for (const std::string& t : tables) {
          all.push_back(nlohmann::json::parse(t));
          if (all.back().contains("error")) fail(DT_ERR_IO, all.back()["error"].get<std::string>());
        }
        nlohmann::json meta = r.checkpoint_metadata(extra);
        meta["layout"] = {{"world", layout_->mesh()->world_size()}, {"dp", dp()}, {"tp", tp()}, {"pp", pp()},
                          {"ep", layout_->ep()}, {"cp", layout_->cp()}, {"virtual_stages", layout_->virtual_stages()},
                          {"zero", r.state_sharded()}};
        io::commit_checkpoint(dir, stem, all[0]["generation"].get<int64_t>(), all, meta);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(li)] = e.what();
        ok = false;
      }
    }
    if (!all_ok(world, ok && !table.contains("error")) && errors[static_cast<size_t>(li)].empty())
      errors[static_cast<size_t>(li)] = table.contains("error") ? table["error"].get<std::string>()
                                                                : "another rank's write or the commit failed";
  });
  for (const std::string& e : errors)
    if (!e.empty()) fail(DT_ERR_IO, "save " + io::checkpoint_index_path(dir, stem) + ": " + e);
}

nlohmann::json Trainer::load_sharded(const std::string& dir, const std::string& stem) {
  // The config and the scaler, before anything is read.
  (host_engine_ ? *host_engine_ : *replicas_[0]).check_checkpoint(dir, stem);
  std::vector<std::string> errors(replicas_.size());
  nlohmann::json extra;
  on_all([&](int li, int) {
    TrainEngine& r = *replicas_[static_cast<size_t>(li)];
    comm::Communicator& world = layout_->world(li);
    std::vector<Mapped> mapped;
    bool ok = true;
    try {  // read and check this rank's boxes into staging; nothing live is written yet
      const StateMap map(*layout_, li);
      for (const parallel::LocalPiece& p : r.local_state()) mapped.push_back(map.map(p, false));
      std::vector<io::TensorPieces> want;
      for (const Mapped& m : mapped) want.push_back(m.out);
      const nlohmann::json meta = io::load_checkpoint_pieces(dir, want, stem);
      if (li == 0) extra = meta.value("extra", nlohmann::json::object());
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(li)] = e.what();
      ok = false;
    }
    if (!all_ok(world, ok)) {  // every rank read its part, or none writes
      if (errors[static_cast<size_t>(li)].empty()) errors[static_cast<size_t>(li)] = "another rank's read failed";
      return;
    }
    for (Mapped& m : mapped) {
      for (size_t k = 0; k < m.back.size(); ++k)  // the staged box holds exactly its region
        io::copy_region(m.out.pieces[k].data.raw(), m.back[k].region, m.back[k].run.raw(), m.back[k].run_box,
                        m.back[k].region, dtype_size(m.out.dtype));
      if (m.device_data.defined()) copy_tensor(m.host, m.device_data);
    }
    r.finish_local_load();
  });
  for (const std::string& e : errors)
    if (!e.empty()) fail(DT_ERR_IO, "load " + io::checkpoint_index_path(dir, stem) + ": " + e);
  written_.clear();  // the loaded values replace any write not yet carried over
  host_stale_ = layout_->splits_model();  // the parts hold the loaded state; the host gathers it when asked
  return extra;
}

}  // namespace dt::engine
