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
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <filesystem>
#include <exception>

#include "core/error.h"
#include "core/trace.h"
#include "core/tensor_copy.h"
#include "engine/trainer.h"
#include "engine/pending_save.h"
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
    size_t piece;  // index in out.pieces
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

  // p's elements as boxes of the whole tensor, each with a host tensor. Load: to be filled
  // by the loader, then written back. Save: p's own memory where a box is a run of it on the
  // CPU (a synchronous save writes from the live state), else a copy; with `staging` (an
  // asynchronous save) always a copy, into staging's reused buffers.
  enum class Mode { Load, Save };
  // A copy a save defers (an asynchronous one copies on its writer's thread): the region of
  // `run` (flat box `box` of a piece) into `dst`.
  struct Copy {
    Tensor run, dst;
    io::Box box, region;
  };
  Mapped map(const parallel::LocalPiece& p, Mode mode, Trainer::Staging* staging = nullptr,
             std::vector<Copy>* deferred = nullptr) const {
    const bool save = mode == Mode::Save;
    Mapped m;
    nn::ShardSpec spec;
    const Shape whole = whole_shape(p.name, p.shape, spec);
    m.out = {p.name, whole, p.data.dtype(), nn::ShardSpec{}, {}};  // whole in the index: the chunks say who held what
    Tensor host = p.data;
    const bool on_cpu = p.data.device().type == DeviceType::CPU;
    if (!on_cpu) {
      host = save ? to_device(p.data, Device::cpu(), MemTag::Checkpoint) : Tensor::uninit(p.data.shape(), p.data.dtype());
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
        Tensor data;
        if (!staging && region == b) {
          data = run.reshape(region.extent);  // the live elements themselves (read from, or loaded into)
        } else {
          data = staging ? staging->take(region.extent, p.data.dtype())
                         : Tensor::uninit(region.extent, p.data.dtype(), Device::cpu(), MemTag::Workspace);
          if (save && deferred) deferred->push_back({run, data, b, region});
          else if (save) io::copy_region(run.raw(), b, data.raw(), region, region, elem);
        }
        if (!save && data.raw() != run.raw()) m.back.push_back({m.out.pieces.size(), run, b, region});
        m.out.pieces.push_back({in_whole, data});
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

// A save in flight: each local rank's staged copy being written by a thread of its own; the
// commit (every writer's table to the world's rank 0, the index) waits for all of them.

void Trainer::start_save(const std::string& dir, const nlohmann::json& extra, const std::string& stem, bool async) {
  finish_save(true);  // one save in flight at a time (and the staging buffers free again)
  std::error_code ec;  // a missing directory is created; the writes report what still fails
  std::filesystem::create_directories(dir, ec);
  auto p = std::make_unique<PendingSave>();
  p->dir = dir, p->stem = stem;
  staging_.resize(replicas_.size());
  for (Staging& st : staging_) st.next = 0;
  p->generation = io::checkpoint_next_generation(dir, stem);  // every process reads the same committed index
  p->meta = replicas_[0]->checkpoint_metadata(extra);
  if (layout_->mesh())
    p->meta["layout"] = {{"world", layout_->mesh()->world_size()}, {"dp", dp()}, {"tp", tp()}, {"pp", pp()},
                         {"ep", layout_->ep()}, {"cp", layout_->cp()}, {"virtual_stages", layout_->virtual_stages()},
                         {"zero", replicas_[0]->state_sharded()}};
  p->writes.resize(replicas_.size());
  p->started_us.resize(replicas_.size());
  const int writer_of_one = layout_->mesh() ? 0 : -1;  // one rank alone: the single file's name
  on_all([&](int li, int rank) {
    std::promise<nlohmann::json> failed;
    TrainEngine& r = *replicas_[static_cast<size_t>(li)];
    try {
      const StateMap map(*layout_, li);
      std::vector<io::TensorPieces> mine;
      std::vector<StateMap::Copy> copies;  // an asynchronous save's, made on its writer's thread
      for (const parallel::LocalPiece& piece : r.local_state())
        if (map.writes(piece))
          mine.push_back(map.map(piece, StateMap::Mode::Save, async ? &staging_[static_cast<size_t>(li)] : nullptr,
                                 async ? &copies : nullptr).out);
      const int writer = layout_->mesh() ? rank : writer_of_one;
      p->started_us[static_cast<size_t>(li)] = trace_now_us();
      // The staged copy overlaps the next step's forward and backward, which only read the
      // state; the update waits for it (TrainEngine::before_update), so the copy is exact.
      auto copied = std::make_shared<std::promise<void>>();
      if (async) r.set_before_update([done = copied->get_future().share()] {
        TraceSpan wait("idle", "wait for the save's staged copy");
        done.wait();
      });
      p->writes[static_cast<size_t>(li)] = std::async(
          std::launch::async, [p = p.get(), writer, li, rank, copied, mine = std::move(mine), copies = std::move(copies)] {
            try {  // the update must never wait forever: the copy ends, one way or the other
              for (const StateMap::Copy& c : copies)
                io::copy_region(c.run.raw(), c.box, c.dst.raw(), c.region, c.region, dtype_size(c.run.dtype()));
            } catch (...) {
              copied->set_value();
              throw;
            }
            copied->set_value();
            if (trace_enabled())
              trace_record("checkpoint", "stage the save (" + std::to_string(copies.size()) + " copies)",
                           trace_track(rank, true), p->started_us[static_cast<size_t>(li)], trace_now_us());
            const double written_from = trace_now_us();
            nlohmann::json table = io::write_checkpoint_shard(p->dir, p->stem, p->generation, writer, mine);
            if (trace_enabled())
              trace_record("checkpoint", "write the save", trace_track(rank, true), written_from, trace_now_us());
            return table;
          });
    } catch (...) {
      failed.set_exception(std::current_exception());
      p->writes[static_cast<size_t>(li)] = failed.get_future();
    }
  });
  pending_save_ = std::move(p);
}

bool Trainer::finish_save(bool wait) {
  if (!pending_save_) return true;
  PendingSave& p = *pending_save_;
  auto done = [&](int li) {
    return wait || p.writes[static_cast<size_t>(li)].wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  };
  std::vector<std::string> errors(replicas_.size());
  if (!layout_->mesh()) {  // one rank: its one write, and the commit
    if (!done(0)) return false;
    std::vector<nlohmann::json> tables;
    try {
      tables.push_back(p.writes[0].get());
      io::commit_checkpoint(p.dir, p.stem, p.generation, tables, p.meta);
    } catch (const std::exception& e) {
      errors[0] = e.what();
    }
  } else {
    // Every rank's write done? (Collective: asked at the same call on every rank.)
    bool all_done = true;
    on_all([&](int li, int) {
      const bool mine = done(li);
      if (!all_ok(layout_->world(li), mine) && li == 0) all_done = false;
    });
    if (!all_done) return false;
    on_all([&](int li, int rank) {
      comm::Communicator& world = layout_->world(li);
      nlohmann::json table;
      try {
        table = p.writes[static_cast<size_t>(li)].get();
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
          io::commit_checkpoint(p.dir, p.stem, p.generation, all, p.meta);
        } catch (const std::exception& e) {
          errors[static_cast<size_t>(li)] = e.what();
          ok = false;
        }
      }
      if (!all_ok(world, ok && !table.contains("error")) && errors[static_cast<size_t>(li)].empty())
        errors[static_cast<size_t>(li)] = table.contains("error") ? table["error"].get<std::string>()
                                                                  : "another rank's write or the commit failed";
    });
  }
  const std::string where = io::checkpoint_index_path(p.dir, p.stem);
  pending_save_.reset();  // the staged copies go with it
  for (const std::string& e : errors)
    if (!e.empty()) fail(DT_ERR_IO, "save " + where + ": " + e);
  return true;
}

void Trainer::save_async(const std::string& dir, const nlohmann::json& extra, const std::string& stem) {
  apply_writes();
  start_save(dir, extra, stem, true);
}

Tensor Trainer::Staging::take(const Shape& shape, DType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (next < buffers.size() && buffers[next].dtype() == dtype && buffers[next].numel() >= n)
    return buffers[next++].slice0(0, n).reshape(shape);  // warm memory: no page faults
  Tensor t = Tensor::uninit({n}, dtype, Device::cpu(), MemTag::Checkpoint);
  if (next < buffers.size()) buffers[next] = t;
  else buffers.push_back(t);
  ++next;
  return t.reshape(shape);
}

void Trainer::wait_save() { finish_save(true); }

Trainer::~Trainer() {
  try {
    finish_save(true);  // a save in flight is committed, not lost
  } catch (const std::exception& e) {
    std::fprintf(stderr, "libdtrain: the save in flight when the engine was destroyed failed: %s\n", e.what());
  }
}

void Trainer::save_sharded(const std::string& dir, const nlohmann::json& extra, const std::string& stem) {
  start_save(dir, extra, stem, false);
  finish_save(true);
}

nlohmann::json Trainer::load_sharded(const std::string& dir, const std::string& stem) {
  // The config and the scaler, before anything is read; the index, read once for every rank.
  const nlohmann::json idx = (host_engine_ ? *host_engine_ : *replicas_[0]).check_checkpoint(dir, stem);
  std::vector<std::string> errors(replicas_.size());
  nlohmann::json extra;
  on_all([&](int li, int) {
    TrainEngine& r = *replicas_[static_cast<size_t>(li)];
    comm::Communicator& world = layout_->world(li);
    std::vector<Mapped> mapped;
    bool ok = true;
    std::vector<io::TensorPieces> want;
    try {  // read and check every chunk this rank needs (one reused buffer); nothing is written
      const StateMap map(*layout_, li);
      for (const parallel::LocalPiece& p : r.local_state()) mapped.push_back(map.map(p, StateMap::Mode::Load));
      for (const Mapped& m : mapped) want.push_back(m.out);
      const nlohmann::json meta = io::load_checkpoint_pieces(dir, want, stem, io::LoadMode::VerifyOnly, &idx);
      if (li == 0) extra = meta.value("extra", nlohmann::json::object());
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(li)] = e.what();
      ok = false;
    }
    if (!all_ok(world, ok)) {  // every rank's reads check out, or none writes
      if (errors[static_cast<size_t>(li)].empty()) errors[static_cast<size_t>(li)] = "another rank's read failed";
      return;
    }
    // Then straight into the state (a box that is a run of it) or through staging: no copy of
    // the rank's share is held. The checksums are checked again as the bytes come: a file
    // changed between the two passes is an error, after which the state is not to be used.
    try {
      io::load_checkpoint_pieces(dir, want, stem, io::LoadMode::Stream, &idx);
      for (Mapped& m : mapped) {
        for (const Mapped::Back& b : m.back)  // the staged box holds exactly its region
          io::copy_region(m.out.pieces[b.piece].data.raw(), b.region, b.run.raw(), b.run_box, b.region,
                          dtype_size(m.out.dtype));
        if (m.device_data.defined()) copy_tensor(m.host, m.device_data);
      }
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(li)] = std::string(e.what()) + " (after every rank's check passed: the files changed "
                                                                "during the load; the engine's state is not to be used)";
    }
    if (!all_ok(world, errors[static_cast<size_t>(li)].empty())) {
      if (errors[static_cast<size_t>(li)].empty()) errors[static_cast<size_t>(li)] = "another rank's read failed";
      return;
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
