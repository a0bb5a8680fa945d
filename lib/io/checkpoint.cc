#include "io/checkpoint.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "core/error.h"
#include "core/gpu_runtime.h"
#include "core/tensor_copy.h"
#include "io/file_util.h"
#include "io/json_limits.h"
// xxHash compiled in (header-only): no runtime library to ship. Its AVX-512 path trips
// GCC 12's -Wmaybe-uninitialized inside the intrinsics headers; AVX2 hashes at memory speed.
#if defined(__AVX2__) && !defined(XXH_VECTOR)
#define XXH_VECTOR 2
#endif
#define XXH_INLINE_ALL
#include <xxhash.h>
#include "io/safetensors.h"

namespace dt::io {
namespace {

using json = nlohmann::json;

// Best effort, after a save committed: the data files of this stem that the index no longer
// names (a crash between writing new data files and the index leaves some; so does a
// removal that failed) and the temps of writers that died mid-save. Names are matched
// exactly ("<stem>.<digits>.safetensors", "<stem>.<digits>.r<digits>.safetensors"), so other
// stems in the same directory are never touched.
void remove_leftovers(const std::string& dir, const std::string& stem, const std::set<std::string>& keep) {
  remove_stale_temps(checkpoint_index_path(dir, stem));
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) names.push_back(e->d_name);
  ::closedir(d);
  const std::string prefix = stem + ".", suffix = ".safetensors";
  auto digits = [](const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; };
  for (const std::string& name : names) {
    if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    if (name.find(suffix + ".tmp.") != std::string::npos) {
      remove_stale_temps(dir + "/" + name.substr(0, name.find(".tmp.")));
      continue;
    }
    if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0 || keep.count(name)) continue;
    const std::string mid = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    const size_t r = mid.find(".r");
    if (r == std::string::npos ? digits(mid) : digits(mid.substr(0, r)) && digits(mid.substr(r + 2)))
      ::unlink((dir + "/" + name).c_str());
  }
}

json spec_json(const nn::ShardSpec& s) {
  json j = {{"dim", s.dim}, {"axis", s.axis}};
  if (!s.segments.empty()) j["segments"] = s.segments;
  return j;
}

void check_names(const std::vector<CheckpointTensor>& ts, const char* who) {
  std::set<std::string> seen;
  for (size_t i = 0; i < ts.size(); ++i) {
    const CheckpointTensor& t = ts[i];
    std::string where = std::string(who) + ": tensor " + std::to_string(i) + " (\"" + t.name + "\")";
    DT_CHECK(!t.name.empty() && t.name != "__metadata__" && t.name.find('#') == std::string::npos,
             where + ": names must be non-empty, not __metadata__, and hold no '#'");
    DT_CHECK(seen.insert(t.name).second, where + ": the name appears twice");
    DT_CHECK(t.tensor.defined(), where + " is an empty tensor");
  }
}



std::string xxh3_hex(const void* data, size_t n) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(XXH3_64bits(data, n)));
  return buf;
}

std::string data_file_name(const std::string& stem, int64_t generation, int writer) {
  char gen[32];
  std::snprintf(gen, sizeof gen, "%06lld", static_cast<long long>(generation));
  return stem + "." + gen + (writer < 0 ? "" : ".r" + std::to_string(writer)) + ".safetensors";
}

// Pieces that are whole CPU tensors (a GPU tensor comes to the host first).
std::vector<TensorPieces> whole_pieces(const std::vector<CheckpointTensor>& ts, bool to_host) {
  std::vector<TensorPieces> out;
  for (const CheckpointTensor& t : ts)
    out.push_back({t.name, t.tensor.shape(), t.tensor.dtype(), t.spec,
                   {{whole_box(t.tensor.shape()), to_host ? to_device(t.tensor, Device::cpu()) : t.tensor}}});
  return out;
}

}  // namespace

int64_t checkpoint_next_generation(const std::string& dir, const std::string& stem) {
  // 1 for a new directory, or when the old index is unreadable (it names nothing to keep).
  if (!file_exists(checkpoint_index_path(dir, stem))) return 1;
  try {
    return read_checkpoint_index(dir, stem).value("generation", int64_t(0)) + 1;
  } catch (const Error&) {
    return 1;
  }
}

json write_checkpoint_shard(const std::string& dir, const std::string& stem, int64_t generation, int writer,
                            const std::vector<TensorPieces>& mine) {
  json table = {{"file", nullptr}, {"tensors", json::object()}};
  std::vector<StEntry> entries;
  std::vector<const Tensor*> data;
  for (const TensorPieces& t : mine) {
    DT_CHECK(!t.name.empty() && t.name.find('#') == std::string::npos,
             "write_checkpoint_shard: tensor \"" + t.name + "\": names must be non-empty and hold no '#'");
    for (size_t k = 0; k < t.pieces.size(); ++k) {
      const TensorPieces::Piece& p = t.pieces[k];
      DT_CHECK(p.data.device().type == DeviceType::CPU && p.data.dtype() == t.dtype && p.data.numel() == p.box.numel() &&
                   contains(whole_box(t.shape), p.box),
               "write_checkpoint_shard: tensor \"" + t.name + "\" piece " + p.box.str() + " does not fit " +
                   shape_str(t.shape) + " " + dtype_name(t.dtype));
      // One piece of a whole tensor keeps the tensor's name (a single writer's file is a
      // plain safetensors file of the model); a part is "<name>#<k>".
      StEntry e;
      e.name = t.pieces.size() == 1 && p.box == whole_box(t.shape) ? t.name : t.name + "#" + std::to_string(k);
      e.dtype = t.dtype;
      e.shape = p.box.extent;
      entries.push_back(e);
      data.push_back(&p.data);
    }
  }
  if (entries.empty()) return table;
  const std::string file = data_file_name(stem, generation, writer);
  std::string head = st_encode_header(entries, {{"format", "pt"}});
  std::vector<std::string> hashes(entries.size());
  {
    AtomicFile out(dir + "/" + file);
    out.write(head.data(), head.size());
    std::vector<size_t> order(entries.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return entries[a].begin < entries[b].begin; });
    for (size_t i : order) {
      out.write(data[i]->raw(), data[i]->nbytes());
      hashes[i] = xxh3_hex(data[i]->raw(), data[i]->nbytes());
    }
    out.commit();
  }
  table["file"] = file;
  size_t i = 0;
  for (const TensorPieces& t : mine) {
    json& jt = table["tensors"][t.name];
    jt = {{"dtype", st_dtype_name(t.dtype)}, {"shape", t.shape}, {"shard", spec_json(t.spec)}, {"chunks", json::array()}};
    for (const TensorPieces::Piece& p : t.pieces) {
      jt["chunks"].push_back({{"entry", entries[i].name}, {"offset", p.box.offset}, {"extent", p.box.extent},
                              {"xxh3", hashes[i]}});
      ++i;
    }
  }
  return table;
}

void commit_checkpoint(const std::string& dir, const std::string& stem, int64_t generation,
                       const std::vector<json>& tables, const json& metadata) {
  DT_CHECK(metadata.is_object(), "commit_checkpoint: metadata must be a JSON object");
  json idx = {{"format", kCheckpointFormat}, {"version", 2}, {"generation", generation}, {"metadata", metadata},
              {"files", json::array()}, {"weight_map", json::object()}, {"tensors", json::object()}};
  std::set<std::string> keep;
  for (const json& table : tables) {
    if (table["file"].is_null()) continue;
    const std::string file = table["file"].get<std::string>();
    const size_t fi = idx["files"].size();
    idx["files"].push_back(file);
    keep.insert(file);
    for (const auto& [name, t] : table["tensors"].items()) {
      json& dst = idx["tensors"][name];
      if (dst.is_null()) {
        dst = t;
        dst["chunks"] = json::array();
        idx["weight_map"][name] = file;
      } else {
        DT_CHECK(dst["dtype"] == t["dtype"] && dst["shape"] == t["shape"],
                 "commit_checkpoint: tensor \"" + name + "\": writers disagree on its dtype or shape");
      }
      for (json c : t["chunks"]) {
        c["file"] = fi;
        dst["chunks"].push_back(c);
      }
    }
  }
  std::string text = idx.dump(1);
  try {  // the tiling rules a loader checks, checked before anything is committed
    parse_checkpoint_index(checkpoint_index_path(dir, stem), text.data(), text.size());
  } catch (const Error& e) {
    fail(DT_ERR_INTERNAL, std::string("commit_checkpoint: the writers' chunks do not make a valid checkpoint: ") + e.what());
  }
  {
    AtomicFile out(checkpoint_index_path(dir, stem));
    out.write(text.data(), text.size());
    out.commit();  // the commit point of the whole save
  }
  remove_leftovers(dir, stem, keep);
}

void save_checkpoint(const std::string& dir, const std::vector<CheckpointTensor>& tensors, const json& metadata,
                     const std::string& stem) {
  check_names(tensors, "save_checkpoint");
  DT_CHECK(metadata.is_object(), "save_checkpoint: metadata must be a JSON object");
  DT_CHECK(!stem.empty() && stem.find('/') == std::string::npos && stem[0] != '.',
           "save_checkpoint: stem \"" + stem + "\" must be a plain file name");
  const int64_t generation = checkpoint_next_generation(dir, stem);
  const json table = write_checkpoint_shard(dir, stem, generation, -1, whole_pieces(tensors, true));
  commit_checkpoint(dir, stem, generation, {table}, metadata);
}

void (*g_load_checkpoint_before_copy)() = nullptr;

json load_checkpoint_pieces(const std::string& dir, const std::vector<TensorPieces>& targets, const std::string& stem,
                            LoadMode mode, const json* index) {
  const json read = index ? json() : read_checkpoint_index(dir, stem);
  const json& idx = index ? *index : read;
  // Which chunks each piece needs: (file, entry) -> the chunk, read once for all its pieces.
  struct Need {
    const json* chunk;
    Box box;
    DType dtype;
    std::vector<std::unique_ptr<ReadOnlyFile>>::size_type file;
    uint64_t offset = 0, bytes = 0;
    std::unique_ptr<unsigned char[]> owned;  // the chunk's bytes, read once (not zero-filled)
    unsigned char* data = nullptr;           // owned, or the one piece it fills exactly (scratch targets)
    int users = 0;                           // target pieces that intersect the chunk
    const TensorPieces::Piece* exact = nullptr;
  };
  std::map<std::pair<std::string, size_t>, Need> needs;  // by (tensor, chunk)
  for (const TensorPieces& t : targets) {
    if (!idx["tensors"].contains(t.name))
      fail(DT_ERR_NOT_FOUND, "load_checkpoint: " + dir + " has no tensor \"" + t.name + "\"");
    const json& it = idx["tensors"][t.name];
    DT_CHECK(it["dtype"] == st_dtype_name(t.dtype) && it["shape"] == json(t.shape),
             "load_checkpoint: tensor \"" + t.name + "\" is " + it["dtype"].get<std::string>() + " " +
                 shape_str(it["shape"].get<Shape>()) +
                 " in the checkpoint, destination is " + st_dtype_name(t.dtype) + " " + shape_str(t.shape));
    for (const TensorPieces::Piece& p : t.pieces) {
      DT_CHECK(p.data.device().type == DeviceType::CPU && p.data.dtype() == t.dtype && p.data.numel() == p.box.numel() &&
                   contains(whole_box(t.shape), p.box),
               "load_checkpoint: tensor \"" + t.name + "\" piece " + p.box.str() + " does not fit " + shape_str(t.shape));
      for (size_t k = 0; k < it["chunks"].size(); ++k) {
        const json& c = it["chunks"][k];
        const Box cb{c["offset"].get<std::vector<int64_t>>(), c["extent"].get<std::vector<int64_t>>()};
        if (!intersect(cb, p.box)) continue;
        Need& n = needs[{t.name, k}];
        n.chunk = &c, n.box = cb, n.dtype = t.dtype;
        ++n.users;
        if (cb == p.box) n.exact = &p;
      }
    }
  }
  // Open each file once and check each needed chunk's entry; then read and verify them all;
  // only then write any destination.
  std::vector<std::unique_ptr<ReadOnlyFile>> files;
  std::map<int64_t, std::pair<size_t, StHeader>> opened;
  for (auto& [key, n] : needs) {
    const int64_t fi = (*n.chunk)["file"].get<int64_t>();
    const std::string entry = (*n.chunk)["entry"].get<std::string>();
    auto at = opened.find(fi);
    if (at == opened.end()) {
      files.push_back(std::make_unique<ReadOnlyFile>(dir + "/" + idx["files"][static_cast<size_t>(fi)].get<std::string>()));
      at = opened.emplace(fi, std::make_pair(files.size() - 1, st_read_header(*files.back()))).first;
    }
    const ReadOnlyFile& f = *files[at->second.first];
    const StEntry* e = at->second.second.find(entry);
    if (!e) fail(DT_ERR_IO, f.path() + ": tensor \"" + entry + "\" is in the index but not in the file");
    if (e->dtype != n.dtype || e->shape != n.box.extent)
      fail(DT_ERR_IO, f.path() + ": tensor \"" + entry + "\" (a chunk of \"" + key.first +
                          "\"): the file and the index disagree on dtype or shape");
    n.file = at->second.first;
    n.offset = at->second.second.data_start + e->begin;
    n.bytes = e->end - e->begin;
  }
  if (g_load_checkpoint_before_copy) g_load_checkpoint_before_copy();
  // The chunk's regions into every target piece it meets.
  auto copy_out = [&](const std::pair<std::string, size_t>& key, const Need& n) {
    for (const TensorPieces& t : targets) {
      if (t.name != key.first) continue;
      for (const TensorPieces::Piece& p : t.pieces) {
        Box region;
        if (intersect(n.box, p.box, &region) && n.data != p.data.raw())
          copy_region(n.data, n.box, p.data.raw(), p.box, region, dtype_size(t.dtype));
      }
    }
  };
  std::unique_ptr<unsigned char[]> scratch;  // Stream and VerifyOnly: one buffer, reused
  uint64_t scratch_bytes = 0;
  for (auto& [key, n] : needs) {
    if (mode == LoadMode::Stream && n.users == 1 && n.exact) {
      n.data = static_cast<unsigned char*>(n.exact->data.raw());  // straight from the file
    } else if (mode == LoadMode::Atomic) {
      n.owned.reset(new unsigned char[n.bytes]);  // kept until every chunk is checked
      n.data = n.owned.get();
    } else {
      if (n.bytes > scratch_bytes) scratch.reset(new unsigned char[n.bytes]), scratch_bytes = n.bytes;
      n.data = scratch.get();
    }
    files[n.file]->copy_to(n.offset, n.data, n.bytes);
    if (n.chunk->contains("xxh3") && xxh3_hex(n.data, n.bytes) != (*n.chunk)["xxh3"].get<std::string>())
      fail(DT_ERR_IO, files[n.file]->path() + ": tensor \"" + key.first + "\" " + n.box.str() +
                          ": its bytes do not match the checksum in the index (corrupted on disk or in transfer)");
    if (mode == LoadMode::Stream) copy_out(key, n);
  }
  if (mode == LoadMode::Atomic)
    for (auto& [key, n] : needs) copy_out(key, n);
  return idx["metadata"];
}

json load_checkpoint(const std::string& dir, const std::vector<CheckpointTensor>& dest, const std::string& stem,
                     const json* index) {
  check_names(dest, "load_checkpoint");
  const json read = index ? json() : read_checkpoint_index(dir, stem);
  const json& idx = index ? *index : read;
  for (const CheckpointTensor& d : dest) {
    if (!idx["tensors"].contains(d.name))
      fail(DT_ERR_NOT_FOUND, "load_checkpoint: " + dir + " has no tensor \"" + d.name + "\"");
    const json& shard = idx["tensors"][d.name]["shard"];
    nn::ShardSpec saved{shard["dim"].get<int>(), shard["axis"].get<std::string>(), {}, false};
    DT_CHECK(saved.dim == d.spec.dim && saved.axis == d.spec.axis,
             "load_checkpoint: tensor \"" + d.name + "\" was saved " + saved.str() + ", destination is " + d.spec.str());
  }
  // GPU destinations read into host staging tensors, copied over once everything is read.
  std::vector<TensorPieces> pieces;
  for (const CheckpointTensor& d : dest) {
    const bool cpu = d.tensor.device().type == DeviceType::CPU;
    pieces.push_back({d.name, d.tensor.shape(), d.tensor.dtype(), d.spec,
                      {{whole_box(d.tensor.shape()), cpu ? d.tensor : Tensor::uninit(d.tensor.shape(), d.tensor.dtype())}}});
  }
  json meta = load_checkpoint_pieces(dir, pieces, stem, LoadMode::Atomic, &idx);
  for (size_t i = 0; i < dest.size(); ++i)
    if (dest[i].tensor.device().type != DeviceType::CPU) {
      Tensor dst = dest[i].tensor;
      copy_tensor(pieces[i].pieces[0].data, dst);
    }
  return meta;
}

void consolidate_checkpoint(const std::string& src_dir, const std::string& src_stem, const std::string& dst_dir,
                            const std::string& dst_stem) {
  const json idx = read_checkpoint_index(src_dir, src_stem);
  std::vector<CheckpointTensor> whole;
  for (const auto& [name, t] : idx["tensors"].items()) {
    DType dtype = DType::F32;
    bool known = false;
    for (DType d : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64})
      if (t["dtype"] == st_dtype_name(d)) dtype = d, known = true;
    if (!known) fail(DT_ERR_IO, checkpoint_index_path(src_dir, src_stem) + ": tensor \"" + name + "\" has dtype " + t["dtype"].dump());
    nn::ShardSpec spec;
    spec.dim = t["shard"]["dim"].get<int>();
    spec.axis = t["shard"]["axis"].get<std::string>();
    whole.push_back({name, Tensor::zeros(t["shape"].get<Shape>(), dtype), spec});
  }
  json meta = load_checkpoint(src_dir, whole, src_stem);
  meta.erase("layout");
  save_checkpoint(dst_dir, whole, meta, dst_stem);
}

}  // namespace dt::io
