#include "io/hf_dataset.h"

#include <algorithm>

#include "core/error.h"
#include "io/file_util.h"
#include "io/json_limits.h"

namespace dt::io {
namespace {

using json = nlohmann::json;

// A text file or JSON-lines file is read whole: bounded so a hostile path cannot ask for
// more than this machine's budget of a dataset in memory.
constexpr uint64_t kMaxFileBytes = uint64_t(8) << 30;

class ChatDataset final : public Dataset {
 public:
  ChatDataset(std::vector<ChatExample> ex, int64_t context) : ex_(std::move(ex)), context_(context) {}
  int64_t size() const override { return static_cast<int64_t>(ex_.size()); }
  int64_t context() const override { return context_; }
  void get(int64_t i, int32_t* input, int32_t* target) const override {
    DT_CHECK(i >= 0 && i < size(), "example " + std::to_string(i) + " is outside [0, " + std::to_string(size()) + ")");
    const ChatExample& e = ex_[static_cast<size_t>(i)];
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(e.ids.size()), context_ + 1);
    for (int64_t t = 0; t < context_; ++t) {
      const bool real = t + 1 < n;
      input[t] = t < n ? e.ids[static_cast<size_t>(t)] : 0;
      target[t] = real && e.learned[static_cast<size_t>(t + 1)] ? e.ids[static_cast<size_t>(t + 1)] : -1;
    }
  }

 private:
  std::vector<ChatExample> ex_;
  int64_t context_;
};

std::vector<ChatMessage> messages_of(const json& m, const std::string& where) {
  if (!m.is_array() || m.empty()) fail(DT_ERR_IO, where + ": \"messages\" must be a non-empty list");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < m.size(); ++i) {
    const json& x = m[i];
    if (!x.is_object() || !x.contains("role") || !x["role"].is_string() || !x.contains("content") ||
        !x["content"].is_string())
      fail(DT_ERR_IO, where + ": messages[" + std::to_string(i) + "] must be {\"role\": string, \"content\": string}");
    out.push_back({x["role"].get<std::string>(), x["content"].get<std::string>()});
  }
  return out;
}

}  // namespace

ChatExample hf_chat_example(const std::vector<ChatMessage>& messages, const HfModelText& text) {
  const ChatTemplate& chat = text.chat_template();
  const std::string rendered = chat.render(messages, false);
  const auto spans = chat.assistant_spans(messages);
  ChatExample e;
  e.ids = text.tokenizer->encode(rendered, false);
  e.learned.assign(e.ids.size(), 0);
  // Each token's byte range in the text: what a streaming decode has emitted before and
  // after it (the decode of the encoding is the text; a piece held back for a whole UTF-8
  // character belongs to the token that completes it).
  HfStreamDecoder dec(*text.tokenizer, /*skip_special_tokens=*/false);
  size_t at = 0;
  for (size_t k = 0; k < e.ids.size(); ++k) {
    const size_t begin = at;
    at += dec.push(e.ids[k]).size();
    for (const auto& [s, end] : spans)
      if (begin < end && at > s) e.learned[k] = 1;
  }
  return e;
}

std::shared_ptr<Dataset> hf_text_dataset(const std::string& path, int64_t context, const HfModelText& text) {
  const std::vector<char> bytes = read_file(path, kMaxFileBytes, "a text dataset");
  auto d = TokenDataset::from_tokens(text.tokenizer->encode(std::string_view(bytes.data(), bytes.size()), false), context);
  return d;
}

std::shared_ptr<Dataset> hf_jsonl_dataset(const std::string& path, int64_t context, const HfModelText& text) {
  DT_CHECK(context >= 1, "context is " + std::to_string(context) + "; accepted: >= 1");
  const std::vector<char> bytes = read_file(path, kMaxFileBytes, "a JSON-lines dataset");
  std::vector<int32_t> stream;
  std::vector<ChatExample> chats;
  size_t line_no = 0, pos = 0;
  while (pos < bytes.size()) {
    size_t end = pos;
    while (end < bytes.size() && bytes[end] != '\n') ++end;
    ++line_no;
    const std::string where = path + ":" + std::to_string(line_no);
    const char* p = bytes.data() + pos;
    const size_t n = end - pos;
    pos = end + 1;
    if (std::all_of(p, p + n, [](char c) { return c == ' ' || c == '\t' || c == '\r'; })) continue;
    const json j = parse_bounded_json(where, p, n, JsonLimits{size_t(64) << 20, 16, size_t(1) << 20});
    if (j.is_object() && j.contains("text") && j["text"].is_string()) {
      if (!chats.empty()) fail(DT_ERR_IO, where + ": a \"text\" line in a file of \"messages\" lines; accepted: one kind");
      const std::vector<int32_t> ids = text.tokenizer->encode(j["text"].get<std::string>(), false);
      stream.insert(stream.end(), ids.begin(), ids.end());
      if (!text.eos_ids.empty()) stream.push_back(text.eos_ids[0]);
    } else if (j.is_object() && j.contains("messages")) {
      if (!stream.empty()) fail(DT_ERR_IO, where + ": a \"messages\" line in a file of \"text\" lines; accepted: one kind");
      ChatExample e = hf_chat_example(messages_of(j["messages"], where), text);
      if (std::none_of(e.learned.begin() + 1, e.learned.end(), [](uint8_t b) { return b != 0; }))
        fail(DT_ERR_IO, where + ": the conversation has no assistant turn to learn from");
      chats.push_back(std::move(e));
    } else {
      fail(DT_ERR_IO, where + ": accepted: {\"text\": string} or {\"messages\": [{\"role\", \"content\"}, ...]}");
    }
  }
  if (!chats.empty()) {
    // A conversation cut at context + 1 tokens may lose all its assistant tokens; if every
    // one does, training would see no target at all.
    const auto learns = [&](const ChatExample& e) {
      const size_t n = std::min(e.ids.size(), static_cast<size_t>(context) + 1);
      return std::any_of(e.learned.begin() + 1, e.learned.begin() + static_cast<std::ptrdiff_t>(n),
                         [](uint8_t b) { return b != 0; });
    };
    if (std::none_of(chats.begin(), chats.end(), learns))
      fail(DT_ERR_IO, path + ": every conversation's assistant turns lie beyond context " + std::to_string(context) +
                          " tokens (the shortest conversation has " +
                          std::to_string(std::min_element(chats.begin(), chats.end(), [](auto& a, auto& b) {
                                           return a.ids.size() < b.ids.size();
                                         })->ids.size()) +
                          "); accepted: a longer context");
    return std::make_shared<ChatDataset>(std::move(chats), context);
  }
  return TokenDataset::from_tokens(std::move(stream), context);
}

}  // namespace dt::io
