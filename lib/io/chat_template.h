// Chat templates: a conversation to the text a model was trained on, byte-identical to
// transformers' tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=...).
//
// A template is the Jinja source from a model's tokenizer_config.json (or chat_template.jinja
// beside it), or one of our built-in families. It runs on our own Jinja interpreter
// (lib/io/jinja.h) with the variables transformers passes: messages, add_generation_prompt,
// bos_token, eos_token (and unk_token, pad_token when the config has them), tools and
// documents (None), plus raise_exception, strftime_now and namespace. docs/models.md
// ("Chat templates") lists the Jinja subset. Immutable once made: threads may share one.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dt::io {

namespace jinja {
class Template;
}

struct ChatMessage {
  std::string role, content;
};

class ChatTemplate {
 public:
  // Reads tokenizer_config.json: its chat_template (a string, or the entry named `name` --
  // "default" when empty -- of a list of {"name", "template"}), else chat_template.jinja in
  // the same folder; and bos_token, eos_token, unk_token, pad_token (strings or AddedToken
  // dicts {"content": ...}; null or absent leaves them undefined, as transformers does). No
  // template: DT_ERR_NOT_FOUND naming the file and the "chat_template" option that picks a
  // built-in family. A malformed or oversized file: DT_ERR_IO.
  static ChatTemplate from_tokenizer_config(const std::string& path, const std::string& name = "");
  static ChatTemplate from_source(const std::string& jinja, const std::string& bos_token, const std::string& eos_token);
  // Built-in families written by us (lib/io/chat_templates_builtin.inc): chatml, llama2,
  // llama3, mistral, qwen2 (ChatML with Qwen2's default system message), smollm2 (ChatML
  // with SmolLM2's), zephyr. Unknown: DT_ERR_INVALID_ARGUMENT listing them.
  static ChatTemplate builtin(const std::string& family, const std::string& bos_token, const std::string& eos_token);
  static std::vector<std::string> builtin_names();
  static std::string builtin_source(const std::string& family);

  // Template errors (raise_exception in it, a type error, a limit passed) and messages that
  // are not UTF-8: DT_ERR_INVALID_ARGUMENT with the message. An empty conversation is
  // refused, as transformers refuses it.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  // The byte ranges of render(messages, false) holding each assistant message's content and
  // its end-of-turn marker (for the training loss on assistant turns only), in order. Where
  // the template marks them with {% generation %} blocks (as ours do), those blocks' output,
  // exactly as transformers' return_assistant_tokens_mask reads them; otherwise, from the
  // first byte of the content as printed (after strip or trim) through the end marker
  // printed right after it (eos_token, <|im_end|>, <|eot_id|>, <|end|>, <end_of_turn>;
  // whitespace between them is included), or the content alone when no marker follows.
  std::vector<std::pair<size_t, size_t>> assistant_spans(const std::vector<ChatMessage>& messages) const;

  const std::string& source() const { return source_; }
  const std::string& bos_token() const { return bos_; }
  const std::string& eos_token() const { return eos_; }

 private:
  std::string source_, bos_, eos_;
  // Variables the template sees besides messages and add_generation_prompt.
  std::vector<std::pair<std::string, std::string>> tokens_;
  std::shared_ptr<const jinja::Template> tmpl_;

  static ChatTemplate make(const std::string& source, std::vector<std::pair<std::string, std::string>> tokens);
};

}  // namespace dt::io
