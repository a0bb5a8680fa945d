// Hugging Face tokenizer.json tokenizers (io/hf_tokenizer.h) against the `tokenizers` package:
// tools/hf_fixtures/make_tokenizers.py trained five families and recorded, in each cases.json,
// the ids and decodes of a few hundred strings, of invalid UTF-8 inputs, and the hashes of the
// ids of 1 MB of generated text (tests/unit/hf_text_gen.h makes the same text here).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "io/hf_tok_internal.h"
#include "io/hf_tokenizer.h"
#include "unit/hf_text_gen.h"

namespace dt {
namespace DT_TEST_NS {

using io::HfStreamDecoder;
using io::HfTokenizer;
using json = nlohmann::json;

const char* const kFamilies[] = {"gpt2", "llama3", "qwen2", "llama2", "mistral"};

std::string dir() { return std::string(DTRAIN_SOURCE_DIR) + "/tests/fixtures/hf/tokenizers/"; }
std::string read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
const json& cases(const std::string& family) {
  static std::map<std::string, json> cache;
  auto it = cache.find(family);
  if (it == cache.end()) it = cache.emplace(family, json::parse(read(dir() + family + "/cases.json"))).first;
  return it->second;
}
const HfTokenizer& tok(const std::string& family) {
  static std::map<std::string, HfTokenizer> cache;
  auto it = cache.find(family);
  if (it == cache.end()) it = cache.emplace(family, HfTokenizer::load(dir() + family + "/tokenizer.json")).first;
  return it->second;
}
std::vector<int32_t> ids_of(const json& j) { return j.get<std::vector<int32_t>>(); }
std::string b64decode(const std::string& s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string out;
  int bits = 0;
  uint32_t acc = 0;
  for (char c : s) {
    const int v = val(c);
    if (v < 0) continue;
    acc = ((acc << 6) | static_cast<uint32_t>(v)) & 0xFFFFFF;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}
// Streams `ids` one at a time: every piece is valid UTF-8 and together they are the decode.
void expect_stream_equals_decode(const HfTokenizer& t, const std::vector<int32_t>& ids, bool skip,
                                 const std::string& what) {
  HfStreamDecoder s(t, skip);
  std::string all;
  for (int32_t id : ids) {
    const std::string piece = s.push(id);
    EXPECT_TRUE(io::hft::utf8_valid(piece)) << what << ": a piece is not valid UTF-8";
    all += piece;
  }
  const std::string rest = s.finish();
  EXPECT_TRUE(io::hft::utf8_valid(rest)) << what;
  all += rest;
  EXPECT_EQ(all, t.decode(ids, skip)) << what << " (skip_special_tokens " << skip << ")";
}

class Family : public ::testing::TestWithParam<const char*> {};

TEST_P(Family, CasesMatchTheTokenizersPackage) {
  const HfTokenizer& t = tok(GetParam());
  const json& ref = cases(GetParam());
  EXPECT_EQ(t.vocab_size(), 512);
  int n = 0;
  for (const json& c : ref["cases"]) {
    const std::string text = c["text"];
    const std::string what = std::string(GetParam()) + " case " + std::to_string(n++) + " " + json(text).dump();
    EXPECT_EQ(t.encode(text, false), ids_of(c["ids"])) << what;
    const std::vector<int32_t> sp = ids_of(c["ids_special"]);
    EXPECT_EQ(t.encode(text, true), sp) << what;
    EXPECT_EQ(t.decode(sp, false), c["decoded"].get<std::string>()) << what;
    EXPECT_EQ(t.decode(sp, true), c["decoded_skip"].get<std::string>()) << what;
    if (c["roundtrip"].get<bool>()) {
      EXPECT_EQ(t.decode(ids_of(c["ids"])), text) << what;
    }
    expect_stream_equals_decode(t, sp, false, what);
    expect_stream_equals_decode(t, sp, true, what);
  }
}

TEST_P(Family, InvalidUtf8IsReplacedAsPythonDoes) {
  const HfTokenizer& t = tok(GetParam());
  for (const json& c : cases(GetParam())["invalid_utf8"]) {
    const std::string bytes = b64decode(c["bytes_b64"]);
    EXPECT_EQ(io::hft::utf8_replace_invalid(bytes), c["replaced"].get<std::string>()) << c["bytes_b64"];
    EXPECT_EQ(t.encode(bytes, false), ids_of(c["ids"])) << c["bytes_b64"];
    EXPECT_EQ(t.encode(bytes, true), ids_of(c["ids_special"])) << c["bytes_b64"];
  }
}

TEST_P(Family, OneMegabyteOfGeneratedTextHashesAsTheTokenizersPackage) {
  const HfTokenizer& t = tok(GetParam());
  const json& ref = cases(GetParam())["text_1mb"];
  const auto cats = test::hfgen::load_fragments(dir() + "fragments.json");
  const auto chunks = test::hfgen::chunks(cats, ref["seed"], ref["chunks"], ref["chunk_bytes"]);
  const size_t step = ref["checkpoint"];
  const bool roundtrip = ref["roundtrip"];
  size_t total = 0, bytes = 0;
  for (size_t k = 0; k < chunks.size(); ++k) {
    bytes += chunks[k].size();
    const std::vector<int32_t> ids = t.encode(chunks[k], false);
    total += ids.size();
    const std::string h = [&] {
      char buf[17];
      snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(test::hfgen::fnv1a_ids(ids.data(), ids.size())));
      return std::string(buf);
    }();
    if (h != ref["chunk_hashes"][k].get<std::string>()) {
      // Narrow the difference down with the prefix hashes, then show our tokens there.
      size_t from = 0;
      const json& cps = ref["chunk_checkpoints"][k];
      for (size_t c = 0; c < cps.size() && (c + 1) * step <= ids.size(); ++c) {
        char buf[17];
        snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(test::hfgen::fnv1a_ids(ids.data(), (c + 1) * step)));
        if (cps[c].get<std::string>() != buf) break;
        from = (c + 1) * step;
      }
      std::string shown;
      for (size_t i = from; i < std::min(ids.size(), from + step) && shown.size() < 3000; ++i)
        shown += std::to_string(i) + ":" + std::to_string(ids[i]) + "=" + json(t.id_to_token(ids[i])).dump() + " ";
      ADD_FAILURE() << GetParam() << ": chunk " << k << " of the 1 MB text differs (" << ids.size() << " tokens, the package "
                    << ref["chunk_tokens"][k] << "); the first difference is at or after token " << from
                    << "; ours from there: " << shown << "\n(the package's: tools/hf_fixtures/make_tokenizers.py --chunk "
                    << GetParam() << " " << k << ")";
      return;
    }
    if (roundtrip) {
      ASSERT_EQ(t.decode(ids), chunks[k]) << GetParam() << ": chunk " << k << " does not decode back";
    }
    if (k % 16 == 0) expect_stream_equals_decode(t, ids, true, std::string(GetParam()) + " chunk " + std::to_string(k));
  }
  EXPECT_GE(bytes, size_t(1) << 20);
  EXPECT_EQ(total, ref["total_tokens"].get<size_t>());
}

TEST_P(Family, StreamingEqualsDecodeOnRandomIds) {
  // Random ids hit what text never makes: byte-fallback runs cut short, lone continuation
  // bytes, specials between halves of a character.
  const HfTokenizer& t = tok(GetParam());
  test::hfgen::SplitMix64 rng{42};
  for (int r = 0; r < 300; ++r) {
    std::vector<int32_t> ids(1 + rng.next() % 24);
    for (int32_t& id : ids) id = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(t.vocab_size()));
    expect_stream_equals_decode(t, ids, r % 2 == 0, std::string(GetParam()) + " random " + std::to_string(r));
  }
}

INSTANTIATE_TEST_SUITE_P(Hf, Family, ::testing::ValuesIn(kFamilies));

TEST(HfTokenizer, Lookups) {
  const HfTokenizer& l3 = tok("llama3");
  EXPECT_EQ(l3.token_to_id("<|begin_of_text|>"), 507);
  EXPECT_EQ(l3.id_to_token(511), "<|eot_id|>");
  EXPECT_TRUE(l3.is_special(507));
  EXPECT_FALSE(l3.is_special(3));
  EXPECT_EQ(l3.token_to_id("no such token"), -1);
  EXPECT_EQ(l3.encode("hi", true).front(), 507);
  const HfTokenizer& l2 = tok("llama2");
  EXPECT_EQ(l2.token_to_id("<0x41>"), 3 + 0x41);
  EXPECT_EQ(l2.encode("", true), std::vector<int32_t>{1});
  try {
    l2.id_to_token(512);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("[0, 512)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(l2.decode({1, -1}), Error);
  HfStreamDecoder s(l2);
  EXPECT_THROW(s.push(100000), Error);
}

TEST(HfTokenizer, ConcurrentEncodesAgree) {
  const HfTokenizer& t = tok("gpt2");
  const auto cats = test::hfgen::load_fragments(dir() + "fragments.json");
  const auto texts = test::hfgen::chunks(cats, 5, 8, 4096);
  std::vector<std::vector<int32_t>> want;
  for (const auto& s : texts) want.push_back(t.encode(s));
  std::vector<std::thread> th;
  std::vector<int> bad(4, 0);
  for (int k = 0; k < 4; ++k)
    th.emplace_back([&, k] {
      for (int rep = 0; rep < 3; ++rep)
        for (size_t i = 0; i < texts.size(); ++i) bad[static_cast<size_t>(k)] += t.encode(texts[i]) != want[i];
    });
  for (auto& x : th) x.join();
  for (int b : bad) EXPECT_EQ(b, 0);
}

TEST(HfTokenizer, OnigurumaPatternsCarryOverOrAreRefused) {
  using io::hft::Regex;
  std::vector<std::pair<size_t, size_t>> m;
  Regex ws("\\s+(?!\\S)|\\s+", false, "test");
  ws.find_all("a   b  ", m);  // the lookahead leaves the last space to the next word
  EXPECT_EQ(m, (std::vector<std::pair<size_t, size_t>>{{1, 3}, {3, 4}, {5, 7}}));
  Regex sp("\\s", false, "test");
  sp.find_all("x\xE1\xA0\x8Ey\xC2\x85z", m);  // U+180E is not \s in Oniguruma, NEL is
  EXPECT_EQ(m, (std::vector<std::pair<size_t, size_t>>{{5, 7}}));
  Regex hex("\\h+", false, "test");  // Oniguruma's \h: hex digits
  hex.find_all("zz0fA9 ", m);
  EXPECT_EQ(m, (std::vector<std::pair<size_t, size_t>>{{2, 6}}));
  Regex rng("a{,2}", false, "test");
  rng.find_all("aaa", m);
  EXPECT_EQ(m.front(), (std::pair<size_t, size_t>{0, 2}));
  for (const char* p : {"\\bword\\b", "[[:alpha:]]", "[a-z&&[^b]]", "(?m:.)", "[^\\S]", "\\R", "(?x) a"}) {
    try {
      Regex r(p, false, "test.json: pre_tokenizer.pattern.Regex");
      ADD_FAILURE() << p << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), DT_ERR_IO);
      EXPECT_NE(std::string(e.what()).find("is not supported"), std::string::npos) << e.what();
    }
  }
}

// ---- hostile and unsupported files: clean errors that name the file, the key, what is accepted
json base_json() { return json::parse(read(dir() + "gpt2/tokenizer.json")); }

void expect_refused(const std::string& text, const std::string& needle, const char* what) {
  try {
    HfTokenizer::parse(text, "bad/tokenizer.json");
    ADD_FAILURE() << what << ": accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_IO) << what << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find("bad/tokenizer.json"), std::string::npos) << what << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << what << ": " << e.what();
  }
}

TEST(HfTokenizerHostile, UnsupportedPartsAreRefusedByName) {
  json j = base_json();
  j["model"]["type"] = "Unigram";
  expect_refused(j.dump(), "model.type \"Unigram\" is not supported; accepted: \"BPE\"", "Unigram");
  j = base_json();
  j["normalizer"] = {{"type", "NFKC"}};
  expect_refused(j.dump(), "normalizer.type \"NFKC\" is not supported", "NFKC");
  j = base_json();
  j["decoder"] = {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}};
  expect_refused(j.dump(), "decoder.type \"WordPiece\"", "WordPiece");
  j = base_json();
  j["truncation"] = {{"max_length", 8}};
  expect_refused(j.dump(), "truncation", "truncation");
  j = base_json();
  j["model"]["dropout"] = 0.1;
  expect_refused(j.dump(), "model.dropout", "dropout");
  j = base_json();
  j["model"]["continuing_subword_prefix"] = "##";
  expect_refused(j.dump(), "model.continuing_subword_prefix", "prefix");
  j = base_json();
  j["pre_tokenizer"]["bogus"] = 1;
  expect_refused(j.dump(), "pre_tokenizer.bogus is not supported; accepted keys:", "unknown key");
  j = base_json();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\bx"}}}, {"behavior", "Isolated"}, {"invert", false}};
  expect_refused(j.dump(), "\\b", "word boundary");
  j = base_json();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Glued"}, {"invert", false}};
  expect_refused(j.dump(), "pre_tokenizer.behavior \"Glued\"", "behavior");
  j = base_json();
  j["model"]["unk_token"] = "<nope>";
  expect_refused(j.dump(), "model.unk_token", "unk");
}

TEST(HfTokenizerHostile, BrokenVocabulariesAndMerges) {
  json j = base_json();
  j["model"]["merges"].push_back("zzq qqz");
  expect_refused(j.dump(), "not in model.vocab", "merge of unknown tokens");
  j = base_json();
  j["model"]["merges"].push_back("Ġ");
  expect_refused(j.dump(), "two tokens separated by one space", "merge without a space");
  j = base_json();
  j["model"]["vocab"]["a"] = 77;  // id of another token
  expect_refused(j.dump(), "gives id 77 to both", "duplicate ids");
  j = base_json();
  j["model"]["vocab"]["zzzz"] = 1000000000;
  expect_refused(j.dump(), "accepted: ids in [0, 4194304)", "huge id");
  j = base_json();
  j["model"]["vocab"]["zzzz"] = -3;
  expect_refused(j.dump(), "accepted: ids in [0, ", "negative id");
  j = base_json();
  j["model"]["vocab"]["zzzz"] = "seven";
  expect_refused(j.dump(), "accepted: an integer id", "string id");
  j = base_json();
  j["added_tokens"][0]["id"] = 600;
  expect_refused(j.dump(), "added_tokens[0].id is 600", "added token id");
  j = base_json();
  j["added_tokens"].push_back(j["added_tokens"][0]);
  expect_refused(j.dump(), "appears twice", "added token twice");
  j = base_json();
  j["post_processor"] = json::parse(R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<x>","type_id":0}},
    {"Sequence":{"id":"A","type_id":0}}],"pair":[],"special_tokens":{"<x>":{"id":"<x>","ids":[9999],"tokens":["<x>"]}}})");
  expect_refused(j.dump(), "outside the vocabulary", "template id");
}

TEST(HfTokenizerHostile, MalformedAndNestedJson) {
  const std::string text = read(dir() + "gpt2/tokenizer.json");
  expect_refused(text.substr(0, text.size() / 2), "not valid JSON", "truncated");
  expect_refused("", "not valid JSON", "empty");
  expect_refused(std::string(100000, '[') + std::string(100000, ']'), "nested deeper than 24", "deep arrays");
  json seq = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  for (int i = 0; i < 9; ++i) seq = {{"type", "Sequence"}, {"pretokenizers", json::array({seq})}};
  json j = base_json();
  j["pre_tokenizer"] = seq;
  expect_refused(j.dump(), "nests Sequences deeper than 8", "Sequence in Sequence");
  j = base_json();
  j["model"]["vocab"]["Ġthe"] = 3;  // a key twice: the JSON check refuses it before the DOM keeps one
  std::string dup = j.dump();
  dup.insert(dup.find("\"vocab\":{") + 9, "\"x\":1,\"x\":2,");
  expect_refused(dup, "appears twice in one object", "repeated key");
}

TEST(HfTokenizerHostile, FilesThatAreNotRegularAreRefused) {
  EXPECT_THROW(HfTokenizer::load(dir() + "gpt2"), Error);  // a directory
  EXPECT_THROW(HfTokenizer::load(dir() + "no/such/tokenizer.json"), Error);
  try {
    HfTokenizer::load(dir() + "no/such/tokenizer.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_IO);
  }
}

TEST(HfTokenizer, AddedTokenFlagsAndUnk) {
  // A small tokenizer written here: single_word, lstrip, rstrip, and unk (fused or not).
  json j = json::parse(R"({"version":"1.0","truncation":null,"padding":null,"normalizer":null,"pre_tokenizer":null,
    "post_processor":null,"decoder":null,
    "model":{"type":"BPE","dropout":null,"unk_token":"<unk>","fuse_unk":true,"byte_fallback":false,
             "vocab":{"<unk>":0,"a":1,"b":2," ":3,"ab":4,"<m>":5,"[w]":6},"merges":["a b"]},
    "added_tokens":[{"id":5,"content":"<m>","single_word":false,"lstrip":true,"rstrip":true,"normalized":false,"special":true},
                    {"id":6,"content":"[w]","single_word":true,"lstrip":false,"rstrip":false,"normalized":false,"special":false}]})");
  const HfTokenizer t = HfTokenizer::parse(j.dump(), "small");
  EXPECT_EQ(t.encode("ab  <m>  ab"), (std::vector<int32_t>{4, 5, 4}));  // the spaces go with <m>
  EXPECT_EQ(t.encode("a[w] b"), (std::vector<int32_t>{1, 0, 3, 2}));   // not a single word: unk for [w]
  EXPECT_EQ(t.encode("a [w] b"), (std::vector<int32_t>{1, 3, 6, 3, 2}));
  EXPECT_EQ(t.encode("xyz"), (std::vector<int32_t>{0}));  // fused unk
  j["model"]["fuse_unk"] = false;
  EXPECT_EQ(HfTokenizer::parse(j.dump(), "small").encode("xyz"), (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(t.decode({1, 3, 2}), "a   b");  // no decoder: tokens joined by spaces
  EXPECT_EQ(t.decode({1, 5, 2}, true), "a b");
}

}  // namespace
}  // namespace dt
