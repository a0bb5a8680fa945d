// dt_tokenizer and dt_detokenizer: a model directory's tokenizer, chat template and stop ids
// (io/hf_model_text.h) through the C API.
#include <cstring>
#include <nlohmann/json.hpp>

#include "io/hf_model_text.h"
#include "io/json_limits.h"
#include "lib/api/firewall.h"

using dt::api::guard;
using dt::api::need;

struct dt_tokenizer {
  dt::io::HfModelText text;
};

struct dt_detokenizer {
  std::shared_ptr<const dt::io::HfTokenizer> tokenizer;  // keeps it alive
  std::unique_ptr<dt::io::HfStreamDecoder> decoder;
  std::string ready;  // final text not yet taken by dt_detokenizer_text
  bool finished = false;
};

namespace {

const dt::io::HfModelText& text_of(dt_tokenizer* t) { return need(t, "tokenizer")->text; }

std::vector<dt::io::ChatMessage> messages_of(const char* messages_json) {
  need(messages_json, "messages_json");
  nlohmann::json j;
  try {  // bounded: the text may come from a network client
    j = dt::io::parse_bounded_json("messages_json", messages_json, std::strlen(messages_json));
  } catch (const dt::Error& e) {
    dt::invalid(e.what());
  }
  DT_CHECK(j.is_array(), "messages_json: accepted: a JSON list of {\"role\": ..., \"content\": ...} objects");
  std::vector<dt::io::ChatMessage> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& m = j[i];
    DT_CHECK(m.is_object() && m.contains("role") && m["role"].is_string() && m.contains("content") &&
                 m["content"].is_string(),
             "messages_json[" + std::to_string(i) + "]: accepted: an object with string \"role\" and \"content\"");
    out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return out;
}

}  // namespace

extern "C" {

dt_status dt_tokenizer_create(const char* path, const dt_options* options, dt_tokenizer** out) {
  return guard("dt_tokenizer_create", [&] {
    need(path, "path");
    need(out, "out");
    dt::OptionReader r(dt::api::opts_of(options), "dt_tokenizer_create", {"chat_template"});
    auto t = std::make_unique<dt_tokenizer>();
    t->text = dt::io::HfModelText::load(path, r.get_string("chat_template", ""));
    *out = t.release();
  });
}

void dt_tokenizer_destroy(dt_tokenizer* tokenizer) { delete tokenizer; }

dt_status dt_tokenizer_encode(dt_tokenizer* tokenizer, const char* text, size_t len, int32_t add_special_tokens,
                              int32_t* ids, size_t capacity, size_t* n_ids) {
  return guard("dt_tokenizer_encode", [&] {
    const dt::io::HfModelText& t = text_of(tokenizer);
    if (len > 0) need(text, "text");
    need(n_ids, "n_ids");
    DT_CHECK(ids || capacity == 0, "ids is NULL with capacity " + std::to_string(capacity));
    const std::vector<int32_t> out = t.tokenizer->encode(std::string_view(text ? text : "", len), add_special_tokens != 0);
    *n_ids = out.size();
    std::copy(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(std::min(capacity, out.size())), ids);
  });
}

dt_status dt_tokenizer_decode(dt_tokenizer* tokenizer, const int32_t* ids, size_t n, int32_t skip_special_tokens,
                              char* buf, size_t capacity, size_t* needed) {
  return guard("dt_tokenizer_decode", [&] {
    const dt::io::HfModelText& t = text_of(tokenizer);
    if (n > 0) need(ids, "ids");
    const std::vector<int32_t> v(ids, ids + n);
    dt::api::write_text(t.tokenizer->decode(v, skip_special_tokens != 0), buf, capacity, needed);
  });
}

dt_status dt_tokenizer_vocab_size(dt_tokenizer* tokenizer, int64_t* out) {
  return guard("dt_tokenizer_vocab_size", [&] {
    *need(out, "out") = text_of(tokenizer).tokenizer->vocab_size();
  });
}

dt_status dt_tokenizer_token_to_id(dt_tokenizer* tokenizer, const char* token, int32_t* out) {
  return guard("dt_tokenizer_token_to_id", [&] {
    const dt::io::HfModelText& t = text_of(tokenizer);
    need(token, "token");
    need(out, "out");
    const int32_t id = t.tokenizer->token_to_id(token);
    if (id < 0) dt::fail(DT_ERR_NOT_FOUND, std::string("token \"") + token + "\" is not in the vocabulary");
    *out = id;
  });
}

dt_status dt_tokenizer_info_json(dt_tokenizer* tokenizer, char* buf, size_t capacity, size_t* needed) {
  return guard("dt_tokenizer_info_json", [&] {
    const dt::io::HfModelText& t = text_of(tokenizer);
    nlohmann::json special = nlohmann::json::array();
    for (int32_t id = 0; id < t.tokenizer->vocab_size(); ++id)
      if (t.tokenizer->is_special(id)) special.push_back({{"id", id}, {"content", t.tokenizer->id_to_token(id)}});
    const nlohmann::json j = {{"bos_token", t.bos_token},       {"eos_token", t.eos_token},
                              {"bos_token_id", t.bos_id},       {"eos_token_ids", t.eos_ids},
                              {"vocab_size", t.tokenizer->vocab_size()}, {"special", special},
                              {"chat_template", t.chat != nullptr}};
    dt::api::write_text(j.dump(), buf, capacity, needed);
  });
}

dt_status dt_tokenizer_apply_chat_template(dt_tokenizer* tokenizer, const char* messages_json,
                                           int32_t add_generation_prompt, char* buf, size_t capacity, size_t* needed) {
  return guard("dt_tokenizer_apply_chat_template", [&] {
    const dt::io::HfModelText& t = text_of(tokenizer);
    const auto messages = messages_of(messages_json);
    dt::api::write_text(t.chat_template().render(messages, add_generation_prompt != 0), buf, capacity, needed);
  });
}

dt_status dt_detokenizer_create(dt_tokenizer* tokenizer, int32_t skip_special_tokens, dt_detokenizer** out) {
  return guard("dt_detokenizer_create", [&] {
    const dt::io::HfModelText& t = text_of(tokenizer);
    need(out, "out");
    auto d = std::make_unique<dt_detokenizer>();
    d->tokenizer = t.tokenizer;
    d->decoder = std::make_unique<dt::io::HfStreamDecoder>(*t.tokenizer, skip_special_tokens != 0);
    *out = d.release();
  });
}

void dt_detokenizer_destroy(dt_detokenizer* detokenizer) { delete detokenizer; }

dt_status dt_detokenizer_push(dt_detokenizer* detokenizer, int32_t id) {
  return guard("dt_detokenizer_push", [&] {
    dt_detokenizer& d = *need(detokenizer, "detokenizer");
    DT_CHECK(!d.finished, "detokenizer: the stream was finished (dt_detokenizer_finish); create another");
    DT_CHECK(id >= 0 && id < d.tokenizer->vocab_size(), "id = " + std::to_string(id) + "; accepted: 0 to " +
                                                            std::to_string(d.tokenizer->vocab_size() - 1));
    d.ready += d.decoder->push(id);
  });
}

dt_status dt_detokenizer_finish(dt_detokenizer* detokenizer) {
  return guard("dt_detokenizer_finish", [&] {
    dt_detokenizer& d = *need(detokenizer, "detokenizer");
    if (!d.finished) d.ready += d.decoder->finish();
    d.finished = true;
  });
}

dt_status dt_detokenizer_text(dt_detokenizer* detokenizer, char* buf, size_t capacity, size_t* needed) {
  return guard("dt_detokenizer_text", [&] {
    dt_detokenizer& d = *need(detokenizer, "detokenizer");
    dt::api::write_text(d.ready, buf, capacity, needed);
    if (capacity > d.ready.size()) d.ready.clear();  // it fitted: taken
  });
}

}  // extern "C"
