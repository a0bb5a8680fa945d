#include "hf_args.h"

#include <cstdio>
#include <fstream>

#include "flags.h"

namespace dtcli {

std::string hf_init_dir(const std::string& init) { return init.rfind("hf:", 0) == 0 ? init.substr(3) : ""; }

nlohmann::json hf_inspect(const std::string& dir) {
  return nlohmann::json::parse(read_text(
      [&](char* b, size_t c, size_t* n) { return dt_hf_inspect_json(dir.c_str(), b, c, n); }, ("reading " + dir).c_str()));
}

void record_hf_source(const std::string& run_dir, const std::string& hf_dir) {
  const nlohmann::json info = hf_inspect(hf_dir);
  const nlohmann::json rec = {{"dir", hf_dir}, {"architecture", info["architecture"]},
                              {"bos_token_id", info["bos_token_id"]}, {"eos_token_ids", stop_ids_text(info)}};
  write_file(run_dir + "/hf_source.json", rec.dump(2) + "\n");
}

HfSource hf_source_of_run(const std::string& run_dir) {
  HfSource s;
  std::ifstream in((run_dir.empty() ? std::string(".") : run_dir) + "/hf_source.json");
  if (!in) return s;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object()) return s;
  s.dir = j.value("dir", "");
  s.architecture = j.value("architecture", "");
  s.bos = j.value("bos_token_id", int64_t(-1));
  s.eos = j.value("eos_token_ids", "");
  return s;
}

Module load_hf_module(const std::string& dir, const std::string& precision, int64_t context) {
  Options o = make_options();
  if (!precision.empty()) set(o.get(), "precision", precision);
  if (context > 0) set(o.get(), "context", context);
  dt_module* m = nullptr;
  check(dt_module_create_from_hf(dir.c_str(), o.get(), &m), "loading the Hugging Face model " + dir);
  return Module(m);
}

Tokenizer load_tokenizer(const std::string& path, const std::string& chat_template) {
  Options o = make_options();
  if (!chat_template.empty()) set(o.get(), "chat_template", chat_template);
  dt_tokenizer* t = nullptr;
  check(dt_tokenizer_create(path.c_str(), o.get(), &t), "loading the tokenizer of " + path);
  return Tokenizer(t);
}

nlohmann::json tokenizer_info(dt_tokenizer* t) {
  return nlohmann::json::parse(
      read_text([&](char* b, size_t c, size_t* n) { return dt_tokenizer_info_json(t, b, c, n); }, "dt_tokenizer_info_json"));
}

std::vector<int32_t> encode(dt_tokenizer* t, const std::string& text, bool add_special_tokens) {
  size_t n = 0;
  check(dt_tokenizer_encode(t, text.data(), text.size(), add_special_tokens, nullptr, 0, &n), "tokenizing");
  std::vector<int32_t> ids(n);
  check(dt_tokenizer_encode(t, text.data(), text.size(), add_special_tokens, ids.data(), ids.size(), &n), "tokenizing");
  return ids;
}

std::string decode(dt_tokenizer* t, const std::vector<int32_t>& ids, bool skip_special_tokens) {
  return read_text(
      [&](char* b, size_t c, size_t* n) { return dt_tokenizer_decode(t, ids.data(), ids.size(), skip_special_tokens, b, c, n); },
      "decoding");
}

std::string stop_ids_text(const nlohmann::json& info) {
  std::string s;
  for (const auto& id : info["eos_token_ids"]) s += (s.empty() ? "" : ",") + std::to_string(id.get<int64_t>());
  return s;
}

std::string format_count(double n) {
  char buf[32];
  if (n >= 1e9) std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
  else if (n >= 1e6) std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
  else if (n >= 1e3) std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", n);
  return buf;
}

}  // namespace dtcli
