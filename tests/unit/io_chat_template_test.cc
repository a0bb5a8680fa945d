// Chat templates (lib/io/chat_template.h) and the Jinja interpreter under them
// (lib/io/jinja.h): every render recorded from transformers in
// tests/fixtures/hf/chat_templates.json (tools/hf_fixtures/make_chat_templates.py) byte for
// byte, the raise cases, the assistant spans, the built-in families, tokenizer_config.json
// in its forms, and hostile templates that must end in a clean error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/chat_template.h"
#include "io/jinja.h"
#include "unit/test_util.h"

namespace dt::io {
namespace DT_TEST_NS {

using nlohmann::ordered_json;
using Spans = std::vector<std::pair<size_t, size_t>>;

std::string source_path(const std::string& rel) { return std::string(DTRAIN_SOURCE_DIR) + "/" + rel; }

const ordered_json& fixtures() {
  static const ordered_json j = [] {
    std::ifstream f(source_path("tests/fixtures/hf/chat_templates.json"));
    EXPECT_TRUE(f.good()) << "missing tests/fixtures/hf/chat_templates.json";
    std::stringstream ss;
    ss << f.rdbuf();
    return ordered_json::parse(ss.str());
  }();
  return j;
}

std::string token_or_empty(const ordered_json& t, const char* key) {
  return t[key].is_string() ? t[key].get<std::string>() : std::string();
}

std::vector<ChatMessage> conversation(const std::string& name) {
  std::vector<ChatMessage> out;
  for (const auto& m : fixtures()["conversations"][name])
    out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  return out;
}

Spans spans_of(const ordered_json& c) {
  Spans s;
  for (const auto& p : c["assistant_spans"]) s.emplace_back(p[0].get<size_t>(), p[1].get<size_t>());
  return s;
}

// The template without its {% generation %} / {% endgeneration %} tags.
std::string strip_generation(const std::string& src) {
  std::string out;
  size_t p = 0;
  for (size_t open = src.find("{%"); open != std::string::npos; open = src.find("{%", p)) {
    size_t close = src.find("%}", open);
    if (close == std::string::npos) break;
    std::string inner = src.substr(open + 2, close - open - 2);
    size_t b = inner.find_first_not_of("-+ "), e = inner.find_last_not_of("-+ ");
    std::string word = b == std::string::npos ? "" : inner.substr(b, e - b + 1);
    out += src.substr(p, open - p);
    if (word != "generation" && word != "endgeneration") out += src.substr(open, close + 2 - open);
    p = close + 2;
  }
  return out + src.substr(p);
}

// The code and message of the dt::Error that f throws.
template <typename F>
std::pair<dt_status, std::string> error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  ADD_FAILURE() << "no error";
  return {DT_OK, ""};
}

// Checks every fixture case of `family` against `t`; `spans` false skips the spans.
void check_family(const ChatTemplate& t, const std::string& family, const std::string& how) {
  int n = 0;
  for (const auto& c : fixtures()["cases"]) {
    if (c["template"] != family) continue;
    ++n;
    const std::vector<ChatMessage> conv = conversation(c["conversation"].get<std::string>());
    const bool agp = c["add_generation_prompt"].get<bool>();
    SCOPED_TRACE(family + " (" + how + ") conversation " + c["conversation"].get<std::string>() +
                 (agp ? " with" : " without") + " generation prompt");
    if (c.contains("error")) {
      auto err = error_of([&] { t.render(conv, agp); });
      EXPECT_EQ(err.first, DT_ERR_INVALID_ARGUMENT);
      EXPECT_NE(err.second.find(c["error"].get<std::string>()), std::string::npos) << err.second;
      continue;
    }
    const std::string expected = c["expected"].get<std::string>();
    EXPECT_EQ(t.render(conv, agp), expected);
    if (!agp) {
      EXPECT_EQ(t.assistant_spans(conv), spans_of(c));
    }
  }
  EXPECT_EQ(n, 20) << family;
}

TEST(ChatTemplate, EveryFixtureRenderIsByteIdentical) {
  for (const auto& kv : fixtures()["templates"].items()) {
    const ordered_json& t = kv.value();
    ChatTemplate tmpl = ChatTemplate::from_source(t["source"].get<std::string>(), token_or_empty(t, "bos_token"),
                                                  token_or_empty(t, "eos_token"));
    check_family(tmpl, kv.key(), "with {% generation %}");
  }
}

TEST(ChatTemplate, SpansWithoutGenerationTagsMatchTransformers) {
  // The same templates without their {% generation %} tags render the same; the spans then
  // come from where the assistant content was printed and the end marker after it.
  for (const auto& kv : fixtures()["templates"].items()) {
    const ordered_json& t = kv.value();
    const std::string stripped = strip_generation(t["source"].get<std::string>());
    ASSERT_EQ(stripped.find("endgeneration"), std::string::npos);
    ChatTemplate tmpl = ChatTemplate::from_source(stripped, token_or_empty(t, "bos_token"), token_or_empty(t, "eos_token"));
    check_family(tmpl, kv.key(), "without {% generation %}");
  }
}

TEST(ChatTemplate, SpansCoverEachAssistantContentAndItsEndMarker) {
  for (const auto& c : fixtures()["cases"]) {
    if (c.contains("error") || c["add_generation_prompt"].get<bool>()) continue;
    const std::string family = c["template"].get<std::string>();
    const ordered_json& t = fixtures()["templates"][family];
    ChatTemplate tmpl = ChatTemplate::builtin(family, token_or_empty(t, "bos_token"), token_or_empty(t, "eos_token"));
    const auto conv = conversation(c["conversation"].get<std::string>());
    const std::string text = tmpl.render(conv, false);
    Spans spans = tmpl.assistant_spans(conv);
    std::vector<std::string> contents;
    for (const auto& m : conv)
      if (m.role == "assistant") contents.push_back(m.content);
    ASSERT_EQ(spans.size(), contents.size()) << family;
    const std::string eos = token_or_empty(t, "eos_token");
    for (size_t k = 0; k < spans.size(); ++k) {
      ASSERT_LE(spans[k].first, spans[k].second);
      ASSERT_LE(spans[k].second, text.size());
      if (k) {
        EXPECT_LE(spans[k - 1].second, spans[k].first);
      }
      const std::string piece = text.substr(spans[k].first, spans[k].second - spans[k].first);
      // The end marker closes the span; the content (stripped by some families) opens it.
      ASSERT_GE(piece.size(), eos.size());
      EXPECT_EQ(piece.substr(piece.size() - eos.size()), eos) << family << ": " << piece;
      std::string body = piece.substr(0, piece.size() - eos.size());
      auto kept = jinja::py_strip_range(contents[k], true, true, nullptr);  // as Python's strip()
      std::string core = contents[k].substr(kept.first, kept.second - kept.first);
      EXPECT_NE(body.find(core), std::string::npos) << family << ": " << piece;
    }
  }
}

TEST(ChatTemplate, BuiltinFamiliesAreTheFixtureTemplates) {
  std::vector<std::string> names = ChatTemplate::builtin_names();
  for (const char* required : {"chatml", "llama3", "llama2", "mistral", "zephyr"})
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
  ASSERT_EQ(names.size(), fixtures()["templates"].size());
  for (const std::string& n : names) {
    ASSERT_TRUE(fixtures()["templates"].contains(n)) << n;
    EXPECT_EQ(ChatTemplate::builtin_source(n), fixtures()["templates"][n]["source"].get<std::string>()) << n;
    const ordered_json& t = fixtures()["templates"][n];
    check_family(ChatTemplate::builtin(n, token_or_empty(t, "bos_token"), token_or_empty(t, "eos_token")), n, "builtin");
  }
  auto err = error_of([] { ChatTemplate::builtin("vicuna", "<s>", "</s>"); });
  EXPECT_EQ(err.first, DT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(err.second.find("vicuna"), std::string::npos);
  EXPECT_NE(err.second.find("chatml, llama2, llama3, mistral"), std::string::npos) << err.second;
}

TEST(ChatTemplate, FromTokenizerConfigOfEachFamily) {
  for (const auto& kv : fixtures()["configs"].items()) {
    const std::string family = kv.key();
    ChatTemplate t = ChatTemplate::from_tokenizer_config(source_path(kv.value()["path"].get<std::string>()));
    const ordered_json& tokens = fixtures()["templates"][family];
    EXPECT_EQ(t.bos_token(), token_or_empty(tokens, "bos_token")) << family;
    EXPECT_EQ(t.eos_token(), token_or_empty(tokens, "eos_token")) << family;
    EXPECT_EQ(t.source().find("endgeneration") != std::string::npos, kv.value()["generation_tags"].get<bool>()) << family;
    check_family(t, family, "from tokenizer_config.json");
  }
  // llama2's config writes its tokens as AddedToken dicts, chatml's as strings, qwen2's bos
  // as null (left undefined: printing it prints nothing).
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(source_path("tests/fixtures/hf/chat/llama2/tokenizer_config.json")).bos_token(), "<s>");
  // The list form: "default" unless a name is given.
  const std::string mistral = source_path("tests/fixtures/hf/chat/mistral/tokenizer_config.json");
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(mistral, "tool_use").source(), ChatTemplate::builtin_source("chatml"));
  auto err = error_of([&] { ChatTemplate::from_tokenizer_config(mistral, "rag"); });
  EXPECT_EQ(err.first, DT_ERR_NOT_FOUND);
  EXPECT_NE(err.second.find("tool_use, default"), std::string::npos) << err.second;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/dt_chat_XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ + "/" + name) << text;
    return path_ + "/" + name;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ChatTemplate, TokenizerConfigErrors) {
  TempDir dir;
  // No template: NOT_FOUND naming the file and the option that picks a built-in family.
  std::string none = dir.write("tokenizer_config.json", R"({"bos_token": "<s>", "chat_template": null})");
  auto err = error_of([&] { ChatTemplate::from_tokenizer_config(none); });
  EXPECT_EQ(err.first, DT_ERR_NOT_FOUND);
  EXPECT_NE(err.second.find(none), std::string::npos) << err.second;
  EXPECT_NE(err.second.find("\"chat_template\" option"), std::string::npos) << err.second;
  EXPECT_NE(err.second.find("zephyr"), std::string::npos) << err.second;
  // ... unless chat_template.jinja is beside it.
  dir.write("chat_template.jinja", "{{ bos_token }}{{ messages[0].content }}");
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(none).render({{"user", "hi"}}, true), "<s>hi");

  for (const char* bad : {R"({"chat_template": "x", "bos_token": 7})", R"({"chat_template": 3})",
                          R"({"chat_template": [{"name": "default"}]})", R"([1, 2])", R"({"chat_template": "x",)",
                          R"({"chat_template": "x", "chat_template": "y"})"}) {
    std::string p = dir.write("bad.json", bad);
    EXPECT_EQ(error_of([&] { ChatTemplate::from_tokenizer_config(p); }).first, DT_ERR_IO) << bad;
  }
  EXPECT_EQ(error_of([&] { ChatTemplate::from_tokenizer_config(dir.path()); }).first, DT_ERR_IO);
  EXPECT_EQ(error_of([&] { ChatTemplate::from_tokenizer_config(dir.path() + "/absent.json"); }).first, DT_ERR_IO);
  std::string deep = dir.write("deep.json", "{\"chat_template\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  EXPECT_EQ(error_of([&] { ChatTemplate::from_tokenizer_config(deep); }).first, DT_ERR_IO);
  // A string-form template has no other names.
  std::string one = dir.write("one.json", R"({"chat_template": "{{ 1 }}"})");
  EXPECT_EQ(error_of([&] { ChatTemplate::from_tokenizer_config(one, "tool_use"); }).first, DT_ERR_NOT_FOUND);
  // A broken template is INVALID_ARGUMENT with its line.
  std::string broken = dir.write("broken.json", R"({"chat_template": "a\n{% if x %}\n{{ y }"})");
  err = error_of([&] { ChatTemplate::from_tokenizer_config(broken); });
  EXPECT_EQ(err.first, DT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(err.second.find("line 3"), std::string::npos) << err.second;
}

TEST(ChatTemplate, RenderRefusesWhatTransformersRefuses) {
  ChatTemplate t = ChatTemplate::builtin("chatml", "", "<|im_end|>");
  EXPECT_EQ(error_of([&] { t.render({}, true); }).first, DT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(error_of([&] { t.render({{"user", std::string("\xff\xfe")}}, true); }).first, DT_ERR_INVALID_ARGUMENT);
  auto err = error_of([&] { ChatTemplate::builtin("llama2", "<s>", "</s>").render({{"user", "a"}, {"user", "b"}}, false); });
  EXPECT_EQ(err.first, DT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(err.second.find("Conversation roles must alternate user/assistant/user/assistant/..."), std::string::npos);
}

// ---------------------------------------------------------------- the interpreter

std::string render(const std::string& src, const jinja::Limits& limits = jinja::Limits{}) {
  using jinja::Value;
  auto msg = [](const char* role, const char* content) {
    return Value::make_dict({{Value::string("role"), Value::string(role)}, {Value::string("content"), Value::string(content)}});
  };
  jinja::Template t = jinja::Template::parse(src, limits);
  Value messages = Value::make_list({msg("user", " Hi \"there\" "), msg("assistant", "H\xc3\xa9llo\n")});
  return t.render({{"messages", messages}}).text;
}

TEST(Jinja, MatchesJinja2OnTheSubset) {
  // Expected strings printed by jinja2 3.1 under transformers' settings.
  const std::pair<const char*, const char*> cases[] = {
      {"{% for m in messages %}\n  {%- if m.role == 'user' %}\n    U: {{ m.content | trim }}\n  {% else %}\n"
       "    A: {{ m.content }}\n  {% endif %}\n{% endfor %}\n",
       "    U: Hi \"there\"\n    A: H\xc3\xa9llo\n\n"},
      {"{% for x in ['a', 'b', 'c'] if x != 'b' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}"
       "{{ loop.length }}{{ x }};{% endfor %}",
       "10TrueFalse2a;21FalseTrue2c;"},
      {"[{{ nope }}][{{ nope is defined }}][{{ nope | length }}][{{ messages[9] }}][{{ messages[0].nope is defined }}]"
       "[{% if nope %}t{% else %}f{% endif %}]",
       "[][False][0][][False][f]"},
      {"{{ [1, 'it\\'s', none, true, 2.5, {'k': (1,)}] }}|{{ messages[0] }}",
       "[1, \"it's\", None, True, 2.5, {'k': (1,)}]|{'role': 'user', 'content': ' Hi \"there\" '}"},
      {"{{ messages | tojson }}|{{ {'a': [1, 2]} | tojson(indent=2) }}",
       "[{\"role\": \"user\", \"content\": \" Hi \\\"there\\\" \"}, {\"role\": \"assistant\", \"content\": "
       "\"H\xc3\xa9llo\\n\"}]|{\n  \"a\": [\n    1,\n    2\n  ]\n}"},
      {"{% set ns = namespace(n=0, last='') %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
       "{% set ns.last = m.role %}{% endfor %}{{ ns.n }} {{ ns.last }}",
       "2 assistant"},
      {"{{ '  a b  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ 'a,b'.split(',') }}|{{ ' a  b '.split() }}|"
       "{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|{{ 'ab'.startswith('a') }}{{ 'ab'.endswith('a') }}|"
       "{{ {'k': 'v'}.items() | list }}|{{ {'k': 'v'}.get('z', 'd') }}",
       "a b|hi|['a', 'b']|['a', 'b']|ABab|TrueFalse|[('k', 'v')]|d"},
      {"{{ messages[1:] | length }}|{{ 'h\xc3\xa9llo'[1:3] }}|{{ 'abc'[::-1] }}|{{ [1, 2, 3, 4][-2:] }}",
       "1|\xc3\xa9l|cba|[3, 4]"},
      {"{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ -7 % 3 }}|{{ 7 / 2 }}|{{ 'a' ~ 1 ~ none }}|{{ 'b' in 'abc' }}|"
       "{{ 'z' not in ['a'] }}|{{ 1 == 1.0 }}|{{ not 0 and 'x' or 'y' }}",
       "7|3|2|3.5|a1None|True|True|True|x"},
      // A loop body's scope is fresh each iteration; sets inside do not leak out.
      {"{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }},{% endfor %}{{ x }}", "2,3,1"},
  };
  for (const auto& c : cases) EXPECT_EQ(render(c.first), c.second) << c.first;
}

void expect_template_error(const std::string& src, const std::vector<std::string>& parts,
                           const jinja::Limits& limits = jinja::Limits{}) {
  auto err = error_of([&] { render(src, limits); });
  EXPECT_EQ(err.first, DT_ERR_INVALID_ARGUMENT) << src.substr(0, 80);
  for (const std::string& p : parts) EXPECT_NE(err.second.find(p), std::string::npos) << err.second;
}

TEST(Jinja, UnterminatedAndUnsupportedConstructsNameTheLine) {
  expect_template_error("a\nb\n{% if true %}\nc", {"line 3", "never closed", "endif"});
  expect_template_error("a\n{{ messages", {"line 2", "never closed"});
  expect_template_error("a\n\n{# note", {"line 3", "comment"});
  expect_template_error("{{ 'abc }}", {"line 1", "string literal"});
  expect_template_error("x\n{{ messages | selectattr('role') }}", {"line 2", "no filter named 'selectattr'"});
  expect_template_error("{{ 1 is prime }}", {"no test named 'prime'"});
  expect_template_error("\n{% macro m() %}{% endmacro %}", {"line 2", "{% macro %}"});
  expect_template_error("{% include 'x' %}", {"{% include %}"});
  expect_template_error("{% endfor %}", {"unexpected {% endfor %}"});
  expect_template_error("{% frobnicate %}", {"unknown tag 'frobnicate'"});
  expect_template_error("{% break %}", {"outside a for loop"});
  expect_template_error("{{ 'a'.zfill(3) }}", {"zfill"});
  expect_template_error("{{ [] .append(1) }}", {"append"});
  expect_template_error("{{ raise_exception('no ' ~ 'way') }}", {"raised: no way"});
  expect_template_error("{{ x.y }}", {"'x' is undefined"});
  expect_template_error("{{ 'a' + 1 }}", {"can only concatenate str"});
}

TEST(Jinja, HostileTemplatesEndInCleanErrors) {
  // Deep nesting, in expressions and in tags.
  expect_template_error("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}", {"nested deeper"});
  std::string ifs;
  for (int k = 0; k < 10000; ++k) ifs += "{% if true %}";
  expect_template_error(ifs, {"nested deeper"});
  std::string plus = "{{ 1";
  for (int k = 0; k < 100000; ++k) plus += " + 1";
  expect_template_error(plus + " }}", {"nested deeper"});
  expect_template_error("{{ " + std::string(100000, '-') + "1 }}", {"nested deeper"});
  // Loops that would run for ages, output that would not fit, strings and values that grow.
  jinja::Limits small;
  small.max_steps = 200000;
  expect_template_error("{% for a in range(1000) %}{% for b in range(1000) %}x{% endfor %}{% endfor %}",
                        {"steps"}, small);
  // With the default limit (10M steps: half a second; several under a sanitizer).
  if (!test::kSanitized)
    expect_template_error("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
                          {"line 1", "steps"});
  jinja::Limits small_output;
  small_output.max_output_bytes = 1 << 20;
  expect_template_error("{% for a in range(1000000) %}{{ 'x' * 1000 }}{% endfor %}", {"output"}, small_output);
  EXPECT_EQ(jinja::Limits{}.max_output_bytes, size_t(64) << 20);
  expect_template_error("{{ 'x' * 1000000000000 }}", {"limit"});
  jinja::Limits small_strings;
  small_strings.max_string_bytes = 1 << 20;
  expect_template_error("{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}"
                        "{% endfor %}",
                        {"limit"}, small_strings);
  expect_template_error("{{ range(10000000000) }}", {"range"});
  expect_template_error("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}"
                        "{% endfor %}{{ ns.l }}",
                        {"nested deeper"});
  expect_template_error("{% set ns = namespace(a=1) %}{% set ns.me = ns %}", {"namespace"});
  expect_template_error("{% set ns = namespace(a=1) %}{% set ns.l = [ns] %}", {"namespace"});
  expect_template_error("{{ 9223372036854775807 + 1 }}", {"overflow"});
  expect_template_error("{{ 2 ** 64 }}", {"overflow"});
  expect_template_error("{{ 1 // 0 }}", {"by zero"});
  expect_template_error(std::string(2 << 20, 'x'), {"limit"});
  expect_template_error("\xff", {"UTF-8"});
}

}  // namespace
}  // namespace dt::io
