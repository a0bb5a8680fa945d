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
#include "io/safetensors.h"

namespace dt::io {
namespace {

using json = nlohmann::json;
constexpr const char* kFormat = "dtrain.checkpoint";
// Generations count saves; the bound keeps "+ 1" from overflowing on a hostile index.
constexpr int64_t kMaxGeneration = int64_t(1) << 53;

// Best effort, after a save committed: the data files of this stem that the index no longer
// names (a crash between writing a new data file and the index leaves one; so does a removal
// that failed) and the temps of writers that died mid-save. Names are matched exactly
// ("<stem>.<digits>.safetensors"), so other stems in the same directory are never touched.
void remove_leftovers(const std::string& dir, const std::string& stem, const std::string& keep) {
  remove_stale_temps(checkpoint_index_path(dir, stem));
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) names.push_back(e->d_name);
  ::closedir(d);
  const std::string prefix = stem + ".", suffix = ".safetensors";
  for (const std::string& name : names) {
    if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    if (name.find(suffix + ".tmp.") != std::string::npos) {
      remove_stale_temps(dir + "/" + name.substr(0, name.find(".tmp.")));
      continue;
    }
    if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0 || name == keep) continue;
    const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.find_first_not_of("0123456789") == std::string::npos) ::unlink((dir + "/" + name).c_str());
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
    DT_CHECK(!t.name.empty() && t.name != "__metadata__", where + ": names must be non-empty and not __metadata__");
    DT_CHECK(seen.insert(t.name).second, where + ": the name appears twice");
    DT_CHECK(t.tensor.defined(), where + " is an empty tensor");
    DT_CHECK(t.tensor.device().type == DeviceType::CPU, where + " is on " + t.tensor.device().str() +
                                                            "; checkpoints read and write CPU tensors");
  }
}

}  // namespace

std::string checkpoint_index_path(const std::string& dir, const std::string& stem) {
  return dir + "/" + stem + ".index.json";
}

json read_checkpoint_index(const std::string& dir, const std::string& stem) {
  const std::string path = checkpoint_index_path(dir, stem);
  std::vector<char> text = read_file(path, JsonLimits{}.max_bytes, "a checkpoint index");
  return parse_checkpoint_index(path, text.data(), text.size());
}

namespace {

// The index's own shape and shard of a tensor, read before any file is opened: every dim a
// non-negative integer of at most 2^40 and their product at most 2^59 elements (as
// safetensors.cc bounds a file's), and the shard dim -1 (whole) or a dim of that shape. A
// dim of 2^64 - 1 would otherwise wrap (to -1: "whole") and be accepted.
template <class Bad>
void check_index_shape(const json& t, const std::string& where, const Bad& bad) {
  const json& shape = t["shape"];
  uint64_t numel = 1;
  for (const json& d : shape) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 40))
      bad(where + ": shape " + shape.dump() + "; accepted: dims from 0 to 2^40");
    const uint64_t dim = d.get<uint64_t>();
    if (dim != 0 && numel > (uint64_t(1) << 59) / dim)
      bad(where + ": shape " + shape.dump() + " holds more than 2^59 elements");
    numel *= dim;
  }
  const json& dim = t["shard"]["dim"];
  const bool ok = dim.is_number_unsigned() ? dim.get<uint64_t>() < shape.size() : dim.get<int64_t>() == -1;
  if (!ok)
    bad(where + ": shard dim " + dim.dump() + "; accepted: -1 (whole) or a dim of its shape, 0 to " +
        std::to_string(static_cast<int64_t>(shape.size()) - 1));
}

}  // namespace

json parse_checkpoint_index(const std::string& path, const char* text, size_t n) {
  // An index is ~150 bytes a tensor: the default 32 MiB is 200,000 tensors.
  json idx = parse_bounded_json(path, text, n, JsonLimits{});
  auto bad = [&](const std::string& what) { fail(DT_ERR_IO, path + ": " + what); };
  if (!idx.is_object()) bad("not a JSON object");
  if (idx.value("format", json()) != kFormat) bad(std::string("\"format\" is not \"") + kFormat + "\"");
  for (const char* key : {"weight_map", "tensors", "metadata"})
    if (!idx.contains(key) || !idx[key].is_object()) bad(std::string("missing object \"") + key + "\"");
  for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
    // Plain file names only: an index must not point outside its directory. A NUL (JSON's
    // "\u0000") would cut the name short at open, naming another file than the one checked.
    if (!it.value().is_string() || it.value().get<std::string>().empty() ||
        it.value().get<std::string>().find('/') != std::string::npos || it.value().get<std::string>()[0] == '.' ||
        it.value().get<std::string>().find('\0') != std::string::npos)
      bad("tensor \"" + it.key() + "\": weight_map entry is not a plain file name (no \"/\", no leading \".\", no NUL)");
    const json& t = idx["tensors"].value(it.key(), json());
    if (!t.is_object() || !t.value("dtype", json()).is_string() || !t.value("shape", json()).is_array() ||
        !t.contains("shard") || !t["shard"].is_object() || !t["shard"].value("dim", json()).is_number_integer() ||
        !t["shard"].value("axis", json()).is_string())
      bad("tensor \"" + it.key() + "\": missing or malformed \"tensors\" entry");
    check_index_shape(t, "tensor \"" + it.key() + "\"", bad);
  }
  const json& gen = idx["generation"];
  if (!gen.is_number_integer() || gen.get<int64_t>() < 0 || gen.get<int64_t>() >= kMaxGeneration)
    bad("\"generation\" is missing or not an integer from 0 to " + std::to_string(kMaxGeneration - 1));
  // The keys the engine and the tools read back (train_engine.cc, dt_checkpoint_info_json):
  // checked here so a wrong type is this message, not the JSON library's.
  const json& meta = idx["metadata"];
  if (meta.contains("step") && !(meta["step"].is_number_integer() && meta["step"].get<int64_t>() >= 0))
    bad("metadata \"step\" is not a non-negative integer");
  for (const char* key : {"config", "extra"})
    if (meta.contains(key) && !meta[key].is_object()) bad(std::string("metadata \"") + key + "\" is not an object");
  return idx;
}

void save_checkpoint(const std::string& dir, const std::vector<CheckpointTensor>& tensors, const json& metadata,
                     const std::string& stem) {
  check_names(tensors, "save_checkpoint");
  DT_CHECK(metadata.is_object(), "save_checkpoint: metadata must be a JSON object");
  DT_CHECK(!stem.empty() && stem.find('/') == std::string::npos && stem[0] != '.',
           "save_checkpoint: stem \"" + stem + "\" must be a plain file name");
  // The next generation after the current index's (1 for a new directory, or when the old
  // index is unreadable: it then names nothing we could remove anyway).
  int64_t generation = 1;
  std::string old_file;
  std::string index_path = checkpoint_index_path(dir, stem);
  if (file_exists(index_path)) {
    try {
      json old = read_checkpoint_index(dir, stem);
      generation = old.value("generation", int64_t(0)) + 1;
      if (!old["weight_map"].empty()) old_file = old["weight_map"].begin().value().get<std::string>();
    } catch (const Error&) {  // unreadable: start over at generation 1
    }
  }
  char gen[32];
  std::snprintf(gen, sizeof gen, "%06lld", static_cast<long long>(generation));
  std::string file = stem + "." + gen + ".safetensors";

  std::vector<StEntry> entries(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    entries[i].name = tensors[i].name, entries[i].dtype = tensors[i].tensor.dtype(), entries[i].shape = tensors[i].tensor.shape();
  std::string head = st_encode_header(entries, {{"dtrain.metadata", metadata.dump()}});
  {
    AtomicFile out(dir + "/" + file);
    out.write(head.data(), head.size());
    std::vector<size_t> order(entries.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return entries[a].begin < entries[b].begin; });
    for (size_t i : order) {  // a GPU tensor comes to the host first
      const Tensor host = to_device(tensors[i].tensor, Device::cpu());
      out.write(host.raw(), host.nbytes());
    }
    out.commit();
  }
  json idx = {{"format", kFormat}, {"version", 1}, {"generation", generation}, {"metadata", metadata},
              {"weight_map", json::object()}, {"tensors", json::object()}};
  for (size_t i = 0; i < tensors.size(); ++i) {
    idx["weight_map"][tensors[i].name] = file;
    idx["tensors"][tensors[i].name] = {{"dtype", st_dtype_name(entries[i].dtype)},
                                       {"shape", entries[i].shape},
                                       {"shard", spec_json(tensors[i].spec)}};
  }
  std::string text = idx.dump(1);
  {
    AtomicFile out(index_path);
    out.write(text.data(), text.size());
    out.commit();  // the commit point of the whole save
  }
  if (!old_file.empty() && old_file != file) ::unlink((dir + "/" + old_file).c_str());  // best effort
  remove_leftovers(dir, stem, file);
}

void (*g_load_checkpoint_before_copy)() = nullptr;

json load_checkpoint(const std::string& dir, const std::vector<CheckpointTensor>& dest, const std::string& stem) {
  check_names(dest, "load_checkpoint");
  json idx = read_checkpoint_index(dir, stem);
  std::map<std::string, std::vector<const CheckpointTensor*>> by_file;
  for (const CheckpointTensor& d : dest) {
    if (!idx["weight_map"].contains(d.name))
      fail(DT_ERR_NOT_FOUND, "load_checkpoint: " + dir + " has no tensor \"" + d.name + "\"");
    const json& shard = idx["tensors"][d.name]["shard"];
    nn::ShardSpec saved{shard["dim"].get<int>(), shard["axis"].get<std::string>(), {}, false};
    DT_CHECK(saved.dim == d.spec.dim && saved.axis == d.spec.axis,
             "load_checkpoint: tensor \"" + d.name + "\" was saved " + saved.str() + ", destination is " + d.spec.str());
    by_file[idx["weight_map"][d.name].get<std::string>()].push_back(&d);
  }
  // Open every file and validate every tensor first; only then copy. Read at offsets, not
  // whole: only the bytes of the tensors wanted are read, whatever the file's size, and a
  // file truncated meanwhile is a DT_ERR_IO (ReadOnlyFile), not a SIGBUS.
  std::vector<std::unique_ptr<ReadOnlyFile>> files;
  std::vector<std::pair<const CheckpointTensor*, uint64_t>> copies;  // destination, file offset
  std::vector<const ReadOnlyFile*> copy_file;
  for (auto& [file, wanted] : by_file) {
    std::string path = dir + "/" + file;
    files.push_back(std::make_unique<ReadOnlyFile>(path));
    const ReadOnlyFile& bytes = *files.back();
    StHeader h = st_read_header(bytes);
    for (const CheckpointTensor* d : wanted) {
      const StEntry* e = h.find(d->name);
      if (!e) fail(DT_ERR_IO, path + ": tensor \"" + d->name + "\" is in the index but not in the file");
      const json& it = idx["tensors"][d->name];
      if (it.value("dtype", "") != st_dtype_name(e->dtype) || it.value("shape", json()) != json(e->shape))
        fail(DT_ERR_IO, path + ": tensor \"" + d->name + "\": the file and the index disagree on dtype or shape");
      DT_CHECK(e->dtype == d->tensor.dtype() && e->shape == d->tensor.shape(),
               "load_checkpoint: tensor \"" + d->name + "\" is " + st_dtype_name(e->dtype) + " " + shape_str(e->shape) +
                   " in the checkpoint, destination is " + st_dtype_name(d->tensor.dtype()) + " " +
                   shape_str(d->tensor.shape()));
      copies.emplace_back(d, h.data_start + e->begin);
      copy_file.push_back(&bytes);
    }
  }
  if (g_load_checkpoint_before_copy) g_load_checkpoint_before_copy();
  std::vector<unsigned char> staging;  // GPU destinations: read to host, then copy over
  for (size_t k = 0; k < copies.size(); ++k) {
    const auto& [d, offset] = copies[k];
    Device dev = d->tensor.device();
    if (dev.type == DeviceType::CPU) {
      copy_file[k]->copy_to(offset, d->tensor.raw(), d->tensor.nbytes());
    } else {
      staging.resize(d->tensor.nbytes());
      copy_file[k]->copy_to(offset, staging.data(), staging.size());
      gpu::copy_to_device(dev.index, d->tensor.raw(), staging.data(), staging.size());
    }
  }
  return idx["metadata"];
}

}  // namespace dt::io
