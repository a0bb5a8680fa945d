// The text side of a Hugging Face model directory, as one object: its tokenizer
// (tokenizer.json), chat template and special-token strings (tokenizer_config.json) and the
// ids that end a generation (generation_config.json's eos_token_id, else the tokenizer's
// eos token). What dt_tokenizer, `dtrain generate --model` and `dtrain serve --model` use.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "io/chat_template.h"
#include "io/hf_tokenizer.h"

namespace dt::io {

struct HfModelText {
  std::shared_ptr<const HfTokenizer> tokenizer;
  std::shared_ptr<const ChatTemplate> chat;  // null: the directory has none (and none was picked)
  std::string bos_token, eos_token;          // tokenizer_config.json's ("" when absent)
  int32_t bos_id = -1;
  std::vector<int32_t> eos_ids;

  // path: a model directory or a tokenizer.json file. chat_family: a built-in template
  // (ChatTemplate::builtin_names) to use instead of the file's; "" for the file's own.
  static HfModelText load(const std::string& path, const std::string& chat_family = "");
  // The chat template, or NOT_FOUND naming the option that picks one.
  const ChatTemplate& chat_template() const;
  // The token ids of a rendered conversation: the template's text as is (its special tokens
  // are in the text; transformers tokenizes it without adding the post-processor's).
  std::vector<int32_t> encode_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
};

}  // namespace dt::io
