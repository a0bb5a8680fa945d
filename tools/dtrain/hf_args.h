// What the commands share about Hugging Face model directories: `--init hf:DIR` and
// `--model DIR`, the record a run keeps of the directory it started from (so `dtrain
// export` writes its tokenizer and token ids back), and the model's text side (tokenizer,
// chat template, stop ids) through dt_tokenizer.
#pragma once
#include <string>
#include <vector>

#include "cli.h"

namespace dtcli {

using Tokenizer = std::unique_ptr<dt_tokenizer, Deleter<dt_tokenizer, dt_tokenizer_destroy>>;

// "hf:DIR" -> "DIR"; "" for anything else (the library's own initialization).
std::string hf_init_dir(const std::string& init);

// The Hugging Face directory a run started from ("" dir when none): RUN_DIR/hf_source.json.
struct HfSource {
  std::string dir, architecture;
  int64_t bos = -1;
  std::string eos;  // ids separated by commas ("" none)
};
void record_hf_source(const std::string& run_dir, const std::string& hf_dir);
HfSource hf_source_of_run(const std::string& run_dir);

// dt_hf_inspect_json of `dir`, parsed (the error names the directory).
nlohmann::json hf_inspect(const std::string& dir);

// The module of a Hugging Face directory (dt_module_create_from_hf) with "precision" and,
// when > 0, "context".
Module load_hf_module(const std::string& dir, const std::string& precision, int64_t context);
Tokenizer load_tokenizer(const std::string& path, const std::string& chat_template = "");
nlohmann::json tokenizer_info(dt_tokenizer* t);
std::vector<int32_t> encode(dt_tokenizer* t, const std::string& text, bool add_special_tokens);
std::string decode(dt_tokenizer* t, const std::vector<int32_t>& ids, bool skip_special_tokens = true);
// "3,7": the ids generation stops at (the "eos_token_ids" of dt_tokenizer_info_json or of
// dt_hf_inspect_json).
std::string stop_ids_text(const nlohmann::json& tokenizer_info);
// 124439808 -> "124.4M".
std::string format_count(double n);

}  // namespace dtcli
