// The checkpoint index (io/checkpoint.h): read, validated as hostile, and brought to one
// shape whatever its version, so the loader has one path.
#include <algorithm>
#include <set>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/file_util.h"
#include "io/json_limits.h"

namespace dt::io {
namespace {

using json = nlohmann::json;
constexpr int64_t kMaxGeneration = int64_t(1) << 53;  // "+ 1" on the next save never overflows

// A data file name from the index: plain, inside the directory. A NUL (JSON's "\u0000")
// would cut the name short at open, naming another file than the one checked.
bool plain_file_name(const json& v) {
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  return !s.empty() && s.find('/') == std::string::npos && s[0] != '.' && s.find('\0') == std::string::npos;
}

// The index's own shape and shard of a tensor, read before any file is opened: every dim a
// non-negative integer of at most 2^40 and their product at most 2^59 elements (as
// safetensors.cc bounds a file's), and the shard dim -1 (whole) or a dim of that shape. A
// dim of 2^64 - 1 would otherwise wrap (to -1: "whole") and be accepted.
template <class Bad>
Shape check_index_shape(const json& t, const std::string& where, const Bad& bad) {
  const json& shape = t["shape"];
  uint64_t numel = 1;
  Shape out;
  for (const json& d : shape) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 40))
      bad(where + ": shape " + shape.dump() + "; accepted: dims from 0 to 2^40");
    const uint64_t dim = d.get<uint64_t>();
    if (dim != 0 && numel > (uint64_t(1) << 59) / dim)
      bad(where + ": shape " + shape.dump() + " holds more than 2^59 elements");
    numel *= dim;
    out.push_back(static_cast<int64_t>(dim));
  }
  const json& dim = t["shard"]["dim"];
  const bool ok = dim.is_number_unsigned() ? dim.get<uint64_t>() < shape.size() : dim.get<int64_t>() == -1;
  if (!ok)
    bad(where + ": shard dim " + dim.dump() + "; accepted: -1 (whole) or a dim of its shape, 0 to " +
        std::to_string(static_cast<int64_t>(shape.size()) - 1));
  return out;
}

// A chunk's box: one offset and extent per dim of the tensor, inside it.
template <class Bad>
Box chunk_box(const json& c, const Shape& shape, const std::string& where, const Bad& bad) {
  Box b;
  for (const char* key : {"offset", "extent"}) {
    const json& v = c.value(key, json());
    if (!v.is_array() || v.size() != shape.size())
      bad(where + ": \"" + key + "\" is not a list of " + std::to_string(shape.size()) + " integers");
    for (const json& x : v)
      if (!x.is_number_unsigned() || x.get<uint64_t>() > (uint64_t(1) << 40))
        bad(where + ": \"" + key + "\" " + v.dump() + "; accepted: integers from 0 to 2^40");
  }
  b.offset = c["offset"].get<std::vector<int64_t>>();
  b.extent = c["extent"].get<std::vector<int64_t>>();
  for (size_t d = 0; d < shape.size(); ++d)
    if (b.offset[d] + b.extent[d] > shape[d])
      bad(where + ": box " + b.str() + " reaches outside the tensor's shape " + shape_str(shape));
  return b;
}

// Version 2: each tensor's chunks, checked to tile it exactly (inside, disjoint, covering).
template <class Bad>
void check_chunks(const json& idx, const std::string& name, const Shape& shape, const Bad& bad) {
  const json& t = idx["tensors"][name];
  const std::string where = "tensor \"" + name + "\"";
  if (!t.contains("chunks") || !t["chunks"].is_array() || t["chunks"].empty()) bad(where + ": no \"chunks\" list");
  const size_t files = idx["files"].size();
  std::vector<Box> boxes;
  int64_t covered = 0;
  for (size_t i = 0; i < t["chunks"].size(); ++i) {
    const json& c = t["chunks"][i];
    const std::string cw = where + " chunk " + std::to_string(i);
    if (!c.is_object() || !c.value("file", json()).is_number_unsigned() || c["file"].get<uint64_t>() >= files ||
        !c.value("entry", json()).is_string() || !c.value("xxh3", json()).is_string() ||
        c["xxh3"].get_ref<const std::string&>().size() != 16 ||
        c["xxh3"].get_ref<const std::string&>().find_first_not_of("0123456789abcdef") != std::string::npos)
      bad(cw + ": \"file\" (an index into \"files\"), \"entry\" or \"xxh3\" (16 hex digits) is missing or malformed");
    const Box b = chunk_box(c, shape, cw, bad);
    for (size_t j = 0; j < boxes.size(); ++j)
      if (intersect(boxes[j], b)) bad(cw + ": box " + b.str() + " overlaps chunk " + std::to_string(j) + " " + boxes[j].str());
    covered += b.numel();
    boxes.push_back(b);
  }
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (covered != numel)
    bad(where + ": its chunks hold " + std::to_string(covered) + " of its " + std::to_string(numel) +
        " elements (a chunk is missing)");
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

json parse_checkpoint_index(const std::string& path, const char* text, size_t n) {
  // An index is ~200 bytes a chunk: the default 32 MiB is 150,000 chunks.
  json idx = parse_bounded_json(path, text, n, JsonLimits{});
  auto bad = [&](const std::string& what) { fail(DT_ERR_IO, path + ": " + what); };
  if (!idx.is_object()) bad("not a JSON object");
  if (idx.value("format", json()) != kCheckpointFormat) bad(std::string("\"format\" is not \"") + kCheckpointFormat + "\"");
  const json& version = idx["version"];
  if (!version.is_number_integer() || (version.get<int64_t>() != 1 && version.get<int64_t>() != 2))
    bad("\"version\" " + version.dump() + "; accepted: 1 or 2");
  const bool v2 = version.get<int64_t>() == 2;
  for (const char* key : {"tensors", "metadata"})
    if (!idx.contains(key) || !idx[key].is_object()) bad(std::string("missing object \"") + key + "\"");
  if (!v2 && (!idx.contains("weight_map") || !idx["weight_map"].is_object())) bad("missing object \"weight_map\"");
  if (v2) {
    if (!idx.contains("files") || !idx["files"].is_array()) bad("missing list \"files\"");
    for (const json& f : idx["files"])
      if (!plain_file_name(f)) bad("\"files\" entry " + f.dump() + " is not a plain file name (no \"/\", no leading \".\", no NUL)");
  }
  // Version 2 keeps weight_map (each tensor's first chunk's file) for tools; both are checked.
  if (idx.contains("weight_map"))
    for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it)
      if (!plain_file_name(it.value()))
        bad("tensor \"" + it.key() + "\": weight_map entry is not a plain file name (no \"/\", no leading \".\", no NUL)");
  json files = v2 ? idx["files"] : json::array();
  for (auto it = idx["tensors"].begin(); it != idx["tensors"].end(); ++it) {
    json& t = it.value();
    if (!t.is_object() || !t.value("dtype", json()).is_string() || !t.value("shape", json()).is_array() ||
        !t.contains("shard") || !t["shard"].is_object() || !t["shard"].value("dim", json()).is_number_integer() ||
        !t["shard"].value("axis", json()).is_string())
      bad("tensor \"" + it.key() + "\": missing or malformed \"tensors\" entry");
    const Shape shape = check_index_shape(t, "tensor \"" + it.key() + "\"", bad);
    if (v2) {
      check_chunks(idx, it.key(), shape, bad);
      continue;
    }
    // Version 1: the tensor whole in its weight_map file, under its own name, unchecksummed.
    if (!idx["weight_map"].contains(it.key())) bad("tensor \"" + it.key() + "\" is not in weight_map");
    const json& file = idx["weight_map"][it.key()];
    auto at = std::find(files.begin(), files.end(), file);
    if (at == files.end()) files.push_back(file), at = files.end() - 1;
    t["chunks"] = json::array({{{"file", at - files.begin()}, {"entry", it.key()}, {"offset", Shape(shape.size(), 0)},
                                {"extent", shape}}});
  }
  if (!v2) {
    for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it)
      if (!idx["tensors"].contains(it.key())) bad("tensor \"" + it.key() + "\": missing or malformed \"tensors\" entry");
    idx["files"] = files;
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

}  // namespace dt::io
