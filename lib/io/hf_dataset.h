// Datasets read through a Hugging Face model's tokenizer (io/hf_model_text.h):
//  - text: the file's text encoded once (no special tokens added), cut into windows as a
//    token file is (io/dataset.h: TokenDataset);
//  - JSON lines of {"text": "..."}: each text encoded and followed by the model's first
//    end-of-sequence id, the stream cut into windows;
//  - JSON lines of {"messages": [{"role", "content"}, ...]}: one conversation per example,
//    rendered with the chat template (no generation prompt) and encoded; the loss falls on
//    the tokens of the assistant turns only (their content and end-of-turn marker, as the
//    template's assistant_spans say), the other targets being -1; a conversation longer than
//    context + 1 tokens is cut, a shorter one padded (inputs 0, targets -1).
// Every line is checked when the file is opened (hostile input: bounded JSON, a named line
// on any error); a file of both kinds is refused.
#pragma once
#include <memory>
#include <string>

#include "io/dataset.h"
#include "io/hf_model_text.h"

namespace dt::io {

std::shared_ptr<Dataset> hf_text_dataset(const std::string& path, int64_t context, const HfModelText& text);
std::shared_ptr<Dataset> hf_jsonl_dataset(const std::string& path, int64_t context, const HfModelText& text);

// The assistant-only targets of one conversation, for tests: ids of the rendered text and,
// per id, whether it is learned.
struct ChatExample {
  std::vector<int32_t> ids;
  std::vector<uint8_t> learned;
};
ChatExample hf_chat_example(const std::vector<ChatMessage>& messages, const HfModelText& text);

}  // namespace dt::io
