// Checkpoints seen from outside an engine: the model a checkpoint describes, and its
// metadata; plus the small helpers every API file shares (text out, path stems, the
// physical-memory check).
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "io/checkpoint.h"
#include "io/model_config.h"
#include "lib/api/firewall.h"
#include "nn/gpt.h"

using dt::api::guard;
using dt::api::need;

namespace dt::api {

void write_text(const std::string& text, char* buf, size_t capacity, size_t* needed) {
  need(needed, "needed");
  DT_CHECK(buf || capacity == 0,
           "buf is NULL with capacity " + std::to_string(capacity) + "; pass capacity 0 to ask for the size");
  *needed = text.size() + 1;
  if (capacity == 0) return;
  size_t n = std::min(capacity - 1, text.size());
  std::memcpy(buf, text.data(), n);
  buf[n] = '\0';
}

std::pair<std::string, std::string> split_stem(const char* path_stem, const char* arg) {
  std::filesystem::path p(need(path_stem, arg));
  std::string stem = p.filename().string();
  DT_CHECK(!stem.empty() && stem != "." && stem != "..",
           std::string(arg) + " = \"" + p.string() + "\"; accepted: a directory and a file name stem, e.g. \"ckpt/run1\"");
  std::string dir = p.parent_path().string();
  return {dir.empty() ? "." : dir, stem};
}

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : HUGE_VAL;
}

void refuse_beyond_memory(const std::string& fn, const std::string& what, double bytes) {
  const double memory = physical_memory_bytes();
  if (bytes > memory)
    fail(DT_ERR_OUT_OF_MEMORY, fn + ": " + what + " need " + std::to_string(static_cast<long long>(bytes)) +
                                   " bytes; this machine has " + std::to_string(static_cast<long long>(memory)) +
                                   " bytes of memory");
}

}  // namespace dt::api

extern "C" {

dt_status dt_module_create_from_checkpoint(const char* path_stem, dt_module** out) {
  return guard("dt_module_create_from_checkpoint", [&] {
    auto [dir, stem] = dt::api::split_stem(path_stem);
    need(out, "out");
    const nlohmann::json idx = dt::io::read_checkpoint_index(dir, stem);
    const std::string where = dt::io::checkpoint_index_path(dir, stem);
    if (!idx["metadata"].contains("config"))
      dt::fail(DT_ERR_IO, where + ": no model config in the metadata (not written by dt_engine_save?)");
    const dt::nn::GPTConfig config = dt::io::config_from_json(idx["metadata"]["config"], where);
    // Before building (allocating) the model: can the data files hold it at all?
    uint64_t data_bytes = 0;
    std::set<std::string> files;
    for (const auto& file : idx["files"]) files.insert(file.get<std::string>());
    for (const std::string& f : files) {
      std::error_code ec;
      const uintmax_t n = std::filesystem::file_size(dir + "/" + f, ec);
      if (ec) dt::fail(DT_ERR_IO, dir + "/" + f + ": cannot read its size (" + ec.message() + "); named by " + where);
      data_bytes += n;
    }
    const double needed = dt::io::config_min_checkpoint_bytes(config);
    if (needed > static_cast<double>(data_bytes))
      dt::fail(DT_ERR_IO, where + ": the model config (" + config.str() + ") needs at least " +
                              std::to_string(static_cast<unsigned long long>(needed)) + " bytes of parameters, but its data " +
                              (files.size() == 1 ? "file holds " : "files hold ") + std::to_string(data_bytes));
    auto gpt = std::make_shared<dt::nn::GPT>(config);
    *out = new dt_module{gpt, gpt.get()};
  });
}

dt_status dt_checkpoint_info_json(const char* path_stem, char* buf, size_t capacity, size_t* needed) {
  return guard("dt_checkpoint_info_json", [&] {
    auto [dir, stem] = dt::api::split_stem(path_stem);
    const nlohmann::json idx = dt::io::read_checkpoint_index(dir, stem);
    nlohmann::json info = idx["metadata"];
    info["tensors"] = idx["tensors"].size();
    info["format_version"] = idx["version"];
    info["generation"] = idx["generation"];
    // Per data file: its size and what it holds (a sharded save has one per writing rank).
    std::vector<int64_t> chunks(idx["files"].size(), 0), tensors(idx["files"].size(), 0);
    int64_t all_chunks = 0;
    for (const auto& [name, t] : idx["tensors"].items()) {
      std::set<int64_t> in;
      for (const auto& c : t["chunks"]) {
        const int64_t f = c["file"].get<int64_t>();
        ++chunks[static_cast<size_t>(f)], ++all_chunks;
        if (in.insert(f).second) ++tensors[static_cast<size_t>(f)];
      }
    }
    info["files"] = nlohmann::json::array();
    uint64_t bytes = 0;
    for (size_t i = 0; i < idx["files"].size(); ++i) {
      const std::string name = idx["files"][i].get<std::string>();
      std::error_code ec;
      const uintmax_t n = std::filesystem::file_size(dir + "/" + name, ec);
      if (ec) dt::fail(DT_ERR_IO, dir + "/" + name + ": cannot read its size (" + ec.message() + ")");
      bytes += n;
      info["files"].push_back({{"name", name}, {"bytes", n}, {"chunks", chunks[i]}, {"tensors", tensors[i]}});
    }
    info["chunks"] = all_chunks;
    info["bytes"] = bytes;
    dt::api::write_text(info.dump(), buf, capacity, needed);
  });
}

dt_status dt_checkpoint_consolidate(const char* src_stem, const char* dst_stem) {
  return guard("dt_checkpoint_consolidate", [&] {
    auto [src_dir, src] = dt::api::split_stem(src_stem, "src_stem");
    auto [dst_dir, dst] = dt::api::split_stem(dst_stem, "dst_stem");
    std::error_code ec;
    DT_CHECK(!(src == dst && std::filesystem::weakly_canonical(src_dir, ec) == std::filesystem::weakly_canonical(dst_dir, ec)),
             "dst_stem = \"" + std::string(dst_stem) + "\" is the source; accepted: another stem or directory");
    std::filesystem::create_directories(dst_dir, ec);
    dt::io::consolidate_checkpoint(src_dir, src, dst_dir, dst);
  });
}

}  // extern "C"
