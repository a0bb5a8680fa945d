#include "io/safetensors.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_limits.h"

namespace dt::io {
namespace {

using json = nlohmann::json;

// Hostile headers must not make us allocate gigabytes: real ones are far below this (about
// 100 bytes a tensor; a file of 100,000 tensors has a 10 MB header).
constexpr uint64_t kMaxHeader = uint64_t(32) << 20;

[[noreturn]] void bad(const std::string& path, const std::string& what) { fail(DT_ERR_IO, path + ": " + what); }

bool parse_dtype(const std::string& s, DType& out) {
  static const std::pair<const char*, DType> kNames[] = {
      {"F32", DType::F32}, {"BF16", DType::BF16}, {"F16", DType::F16}, {"I32", DType::I32}, {"I64", DType::I64}};
  for (auto& [name, t] : kNames)
    if (s == name) return out = t, true;
  return false;
}

}  // namespace

const char* st_dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
  }
  return "?";
}

const StEntry* StHeader::find(const std::string& name) const {
  for (const StEntry& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

std::string st_encode_header(std::vector<StEntry>& entries, const std::map<std::string, std::string>& metadata) {
  // Widest elements first: every tensor then starts at a multiple of its element size.
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtype_size(entries[a].dtype) > dtype_size(entries[b].dtype);
  });
  uint64_t at = 0;
  for (size_t i : order) {
    StEntry& e = entries[i];
    e.begin = at;
    e.end = at + static_cast<uint64_t>(checked_numel(e.shape, e.dtype, e.name.c_str())) * dtype_size(e.dtype);
    at = e.end;
  }
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  for (const StEntry& e : entries)
    h[e.name] = {{"dtype", st_dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  std::string text = h.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');  // the spec allows trailing spaces
  std::string out(8, '\0');
  for (int k = 0; k < 8; ++k) out[k] = static_cast<char>((uint64_t(text.size()) >> (8 * k)) & 0xff);
  return out + text;
}

StHeader st_parse_header(const std::string& path, const unsigned char* file, uint64_t file_size) {
  if (file_size < 8)
    bad(path, "truncated: " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int k = 0; k < 8; ++k) n |= uint64_t(file[k]) << (8 * k);
  // Compared without adding to n, which a hostile length could overflow.
  if (n > file_size - 8)
    bad(path, "header length " + std::to_string(n) + " runs past the end of the file (" +
                  std::to_string(file_size) + " bytes)");
  if (n > kMaxHeader) bad(path, "header length " + std::to_string(n) + " exceeds the 32 MiB limit");
  json h = parse_bounded_json(path + " (safetensors header)", reinterpret_cast<const char*>(file) + 8, n,
                              JsonLimits{kMaxHeader, 8, size_t(1) << 21});
  if (!h.is_object()) bad(path, "header is not a JSON object");
  StHeader out;
  out.data_start = 8 + n;
  uint64_t data_len = file_size - out.data_start;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) bad(path, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) bad(path, "__metadata__ value \"" + m.key() + "\" is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    std::string where = "tensor \"" + name + "\": ";
    if (!v.is_object()) bad(path, where + "entry is not an object");
    StEntry e;
    e.name = name;
    auto dt = v.find("dtype");
    if (dt == v.end() || !dt->is_string()) bad(path, where + "missing dtype");
    if (!parse_dtype(dt->get<std::string>(), e.dtype))
      bad(path, where + "unknown dtype \"" + dt->get<std::string>() + "\"; accepted: F32, BF16, F16, I32, I64");
    auto sh = v.find("shape");
    if (sh == v.end() || !sh->is_array()) bad(path, where + "missing shape");
    uint64_t numel = 1;
    for (const json& d : *sh) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 40)) bad(path, where + "bad shape " + sh->dump());
      uint64_t dim = d.get<uint64_t>();
      e.shape.push_back(static_cast<int64_t>(dim));
      if (dim != 0 && numel > (uint64_t(1) << 59) / dim) bad(path, where + "shape " + sh->dump() + " overflows");
      numel *= dim;
    }
    auto off = v.find("data_offsets");
    if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      bad(path, where + "data_offsets must be two unsigned integers");
    e.begin = (*off)[0].get<uint64_t>(), e.end = (*off)[1].get<uint64_t>();
    if (e.begin > e.end) bad(path, where + "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] are reversed");
    if (e.end > data_len)
      bad(path, where + "data_offsets end " + std::to_string(e.end) + " is past the end of the data (" +
                    std::to_string(data_len) + " bytes; file truncated?)");
    if (e.end - e.begin != numel * dtype_size(e.dtype))
      bad(path, where + "data_offsets span " + std::to_string(e.end - e.begin) + " bytes, but shape " + sh->dump() +
                    " of " + st_dtype_name(e.dtype) + " needs " + std::to_string(numel * dtype_size(e.dtype)));
    out.entries.push_back(std::move(e));
  }
  // The layout: sorted by start, each tensor begins where the one before ends (zero-size
  // tensors sort first among equals), the first at 0 and the last ending at the data's end.
  std::vector<const StEntry*> by_begin;
  for (const StEntry& e : out.entries) by_begin.push_back(&e);
  std::sort(by_begin.begin(), by_begin.end(),
            [](auto* a, auto* b) { return a->begin != b->begin ? a->begin < b->begin : a->end < b->end; });
  uint64_t at = 0;
  const StEntry* prev = nullptr;
  for (const StEntry* e : by_begin) {
    const std::string who = "tensor \"" + e->name + "\": its data [" + std::to_string(e->begin) + ", " +
                            std::to_string(e->end) + ") ";
    if (e->begin < at) bad(path, who + "overlaps tensor \"" + prev->name + "\"");
    if (e->begin > at)
      bad(path, who + "leaves a gap of " + std::to_string(e->begin - at) + " bytes after " +
                    (prev ? "tensor \"" + prev->name + "\"" : std::string("the header")));
    at = e->end, prev = e;
  }
  if (at != data_len)
    bad(path, std::to_string(data_len - at) + " bytes after the last tensor's data (the data section is " +
                  std::to_string(data_len) + " bytes; the tensors cover " + std::to_string(at) + ")");
  return out;
}

StHeader st_read_header(const ReadOnlyFile& file) {
  const uint64_t size = file.size();
  if (size < 8) return st_parse_header(file.path(), nullptr, size);  // fails: too short
  std::vector<unsigned char> head = file.read(0, 8);
  uint64_t n = 0;
  for (int k = 0; k < 8; ++k) n |= uint64_t(head[k]) << (8 * k);
  // A length past the file or the limit fails in st_parse_header before it reads past the 8 bytes.
  if (n > size - 8 || n > kMaxHeader) return st_parse_header(file.path(), head.data(), size);
  head.resize(8 + n);
  file.copy_to(8, head.data() + 8, n);
  return st_parse_header(file.path(), head.data(), size);
}

}  // namespace dt::io
