#include "serve_responses.h"

#include <numeric>

namespace dtcli {
namespace {

nlohmann::json finish_value(const std::string& finish) {
  return finish.empty() ? nlohmann::json(nullptr) : nlohmann::json(finish);
}

nlohmann::json head(const Shape& s, const char* object) {
  return {{"id", s.id}, {"object", object}, {"created", s.created}, {"model", s.model}};
}

nlohmann::json bytes_of(const std::string& t) {
  nlohmann::json b = nlohmann::json::array();
  for (unsigned char c : t) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

double TokenLogprobs::sum() const { return std::accumulate(chosen.begin(), chosen.end(), 0.0); }

void TokenLogprobs::append(const TokenLogprobs& o) {
  chosen.insert(chosen.end(), o.chosen.begin(), o.chosen.end());
  top.insert(top.end(), o.top.begin(), o.top.end());
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

std::string sse_event(const nlohmann::json& j) { return "data: " + dump(j) + "\n\n"; }

nlohmann::json logprobs_json(const ServedModel& m, bool chat, const std::vector<int32_t>& tokens, const TokenLogprobs& lp,
                             size_t from, size_t to, size_t offset0) {
  if (chat) {
    nlohmann::json content = nlohmann::json::array();
    for (size_t i = from; i < to; ++i) {
      const std::string t = token_text(m, tokens[i]);
      nlohmann::json tops = nlohmann::json::array();
      for (const auto& [id, l] : lp.top[i]) {
        const std::string a = token_text(m, id);
        tops.push_back({{"token", a}, {"logprob", l}, {"bytes", bytes_of(a)}});
      }
      content.push_back({{"token", t}, {"logprob", lp.chosen[i]}, {"bytes", bytes_of(t)}, {"top_logprobs", tops}});
    }
    return {{"content", content}};
  }
  nlohmann::json toks = nlohmann::json::array(), lps = nlohmann::json::array(), tops = nlohmann::json::array(),
                 offs = nlohmann::json::array();
  size_t offset = offset0;
  for (size_t i = 0; i < to; ++i) {
    const std::string t = token_text(m, tokens[i]);
    if (i >= from) {
      toks.push_back(t);
      lps.push_back(lp.chosen[i]);
      nlohmann::json top = nlohmann::json::object();
      for (const auto& [id, l] : lp.top[i]) top[token_text(m, id)] = l;
      tops.push_back(top);
      offs.push_back(offset);
    }
    offset += t.size();
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

nlohmann::json text_choice(int index, const std::string& text, const nlohmann::json& logprobs, const std::string& finish) {
  return {{"text", text}, {"index", index}, {"logprobs", logprobs}, {"finish_reason", finish_value(finish)}};
}

nlohmann::json chat_choice(int index, const std::string& content, const nlohmann::json& logprobs, const std::string& finish) {
  return {{"index", index},
          {"message", {{"role", "assistant"}, {"content", content}}},
          {"logprobs", logprobs},
          {"finish_reason", finish_value(finish)}};
}

nlohmann::json whole_response(const Shape& s, const nlohmann::json& choices, int64_t prompt_tokens, int64_t completion_tokens) {
  nlohmann::json j = head(s, s.chat ? "chat.completion" : "text_completion");
  j["choices"] = choices;
  j["usage"] = usage_json(prompt_tokens, completion_tokens);
  return j;
}

nlohmann::json text_chunk(const Shape& s, int index, const std::string& text, const nlohmann::json& logprobs,
                          const std::string& finish) {
  nlohmann::json j = head(s, "text_completion");
  j["choices"] = nlohmann::json::array({text_choice(index, text, logprobs, finish)});
  if (s.with_usage) j["usage"] = nullptr;
  return j;
}

nlohmann::json chat_chunk(const Shape& s, int index, const nlohmann::json& delta, const nlohmann::json& logprobs,
                          const std::string& finish) {
  nlohmann::json j = head(s, "chat.completion.chunk");
  j["choices"] = nlohmann::json::array(
      {{{"index", index}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", finish_value(finish)}}});
  if (s.with_usage) j["usage"] = nullptr;
  return j;
}

nlohmann::json usage_chunk(const Shape& s, int64_t prompt_tokens, int64_t completion_tokens) {
  nlohmann::json j = head(s, s.chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = nlohmann::json::array();
  j["usage"] = usage_json(prompt_tokens, completion_tokens);
  return j;
}

}  // namespace dtcli
