// Reading a tokenizer.json for io/hf_tokenizer.h: every key is checked, and whatever this
// implementation does not do exactly as the `tokenizers` package does is refused by name.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/hf_tok_internal.h"
#include "io/hf_tokenizer.h"
#include "io/json_limits.h"

namespace dt::io::hft {
namespace {

using json = nlohmann::json;

struct Loader {
  std::string where;
  int pre_slots = 0;

  [[noreturn]] void bad(const std::string& key, const std::string& what) const {
    fail(DT_ERR_IO, where + ": " + key + " " + what);
  }
  static std::string show(const json& v) {
    std::string s = v.dump();
    return s.size() > 60 ? s.substr(0, 57) + "..." : s;
  }
  static std::string list(std::initializer_list<const char*> names, bool quoted) {
    std::string s;
    for (const char* n : names) s += std::string(s.empty() ? "" : ", ") + (quoted ? "\"" : "") + n + (quoted ? "\"" : "");
    return s;
  }
  void object(const json& v, const std::string& path) const {
    if (!v.is_object()) bad(path, "is " + show(v) + "; accepted: an object");
  }
  // Refuses keys outside `known`.
  void keys(const json& obj, const std::string& path, std::initializer_list<const char*> known) const {
    object(obj, path);
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      for (const char* k : known) ok = ok || it.key() == k;
      if (!ok) bad(path + "." + it.key(), "is not supported; accepted keys: " + list(known, false));
    }
  }
  const json& need(const json& obj, const std::string& path, const char* key) const {
    const auto it = obj.find(key);
    if (it == obj.end()) bad(path + "." + key, "is missing");
    return *it;
  }
  // A bool that may be absent or null (then `dflt`).
  bool flag(const json& obj, const std::string& path, const char* key, bool dflt) const {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return dflt;
    if (!it->is_boolean()) bad(path + "." + key, "is " + show(*it) + "; accepted: true or false");
    return it->get<bool>();
  }
  std::string str(const json& obj, const std::string& path, const char* key) const {
    const json& v = need(obj, path, key);
    if (!v.is_string()) bad(path + "." + key, "is " + show(v) + "; accepted: a string");
    return v.get<std::string>();
  }
  size_t count(const json& obj, const std::string& path, const char* key) const {
    const json& v = need(obj, path, key);
    if (!v.is_number_unsigned() || v.get<uint64_t>() > (uint64_t(1) << 31))
      bad(path + "." + key, "is " + show(v) + "; accepted: an integer in [0, 2^31]");
    return v.get<size_t>();
  }
  std::string one_char(const json& obj, const std::string& path, const char* key) const {
    const std::string s = str(obj, path, key);
    if (s.empty() || u8len(static_cast<unsigned char>(s[0])) != s.size())
      bad(path + "." + key, "is " + show(s) + "; accepted: one character");
    return s;
  }
  std::string type(const json& obj, const std::string& path, std::initializer_list<const char*> accepted) const {
    object(obj, path);
    const std::string t = str(obj, path, "type");
    for (const char* a : accepted)
      if (t == a) return t;
    bad(path + ".type", "\"" + t + "\" is not supported; accepted: " + list(accepted, true));
  }
  void depth(int d, const std::string& path) const {
    if (d > HfTokenizer::kMaxNesting)
      bad(path, "nests Sequences deeper than " + std::to_string(HfTokenizer::kMaxNesting) + "; accepted: at most that");
  }
  const json& array(const json& obj, const std::string& path, const char* key) const {
    const json& v = need(obj, path, key);
    if (!v.is_array()) bad(path + "." + key, "is " + show(v) + "; accepted: an array");
    return v;
  }
  // {"String": s} or {"Regex": r}
  std::unique_ptr<Regex> pattern(const json& obj, const std::string& path, bool allow_regex) const {
    const json& p = need(obj, path, "pattern");
    const std::string key = path + ".pattern";
    if (!p.is_object() || p.size() != 1 || !(p.contains("String") || p.contains("Regex")) || !p.begin()->is_string())
      bad(key, "is " + show(p) + "; accepted: {\"String\": \"...\"}" + (allow_regex ? " or {\"Regex\": \"...\"}" : ""));
    const bool literal = p.contains("String");
    if (!literal && !allow_regex) bad(key, "is a Regex; accepted: {\"String\": \"...\"}");
    return std::make_unique<Regex>(p.begin()->get<std::string>(), literal, where + ": " + key);
  }

  std::unique_ptr<Normalizer> normalizer(const json& v, const std::string& path, int d) const {
    depth(d, path);
    const std::string t = type(v, path, {"NFC", "Prepend", "Replace", "Sequence"});
    if (t == "NFC") {
      keys(v, path, {"type"});
      return make_nfc();
    }
    if (t == "Prepend") {
      keys(v, path, {"type", "prepend"});
      return make_prepend(str(v, path, "prepend"));
    }
    if (t == "Replace") {
      keys(v, path, {"type", "pattern", "content"});
      return make_replace(pattern(v, path, true), str(v, path, "content"));
    }
    keys(v, path, {"type", "normalizers"});
    const json& items = array(v, path, "normalizers");
    std::vector<std::unique_ptr<Normalizer>> out;
    for (size_t i = 0; i < items.size(); ++i)
      out.push_back(normalizer(items[i], path + ".normalizers[" + std::to_string(i) + "]", d + 1));
    return make_normalizer_sequence(std::move(out));
  }

  int prepend_scheme(const json& v, const std::string& path) const {
    int scheme = kAlways;
    if (v.contains("prepend_scheme")) {
      const std::string s = str(v, path, "prepend_scheme");
      if (s == "always") scheme = kAlways;
      else if (s == "first") scheme = kFirst;
      else if (s == "never") scheme = kNever;
      else bad(path + ".prepend_scheme", "\"" + s + "\" is not supported; accepted: \"always\", \"first\", \"never\"");
    }
    if (!flag(v, path, "add_prefix_space", true)) {  // the older spelling of "never"
      if (scheme != kNever) bad(path + ".add_prefix_space", "is false but prepend_scheme is not \"never\"; accepted: agreeing values");
      scheme = kNever;
    }
    return scheme;
  }

  std::unique_ptr<PreTokenizer> pre_tokenizer(const json& v, const std::string& path, int d) {
    depth(d, path);
    const std::string t = type(v, path, {"ByteLevel", "Split", "Metaspace", "Digits", "Sequence"});
    std::unique_ptr<PreTokenizer> p;
    if (t == "ByteLevel") {
      keys(v, path, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
      p = make_byte_level_pre(flag(v, path, "add_prefix_space", true), flag(v, path, "use_regex", true));
    } else if (t == "Split") {
      keys(v, path, {"type", "pattern", "behavior", "invert"});
      const std::string b = str(v, path, "behavior");
      Behavior beh;
      if (b == "Removed") beh = Behavior::Removed;
      else if (b == "Isolated") beh = Behavior::Isolated;
      else if (b == "MergedWithPrevious") beh = Behavior::MergedWithPrevious;
      else if (b == "MergedWithNext") beh = Behavior::MergedWithNext;
      else if (b == "Contiguous") beh = Behavior::Contiguous;
      else bad(path + ".behavior", "\"" + b + "\" is not supported; accepted: \"Removed\", \"Isolated\", "
                                              "\"MergedWithPrevious\", \"MergedWithNext\", \"Contiguous\"");
      const json& inv = need(v, path, "invert");
      if (!inv.is_boolean()) bad(path + ".invert", "is " + show(inv) + "; accepted: true or false");
      p = make_split(pattern(v, path, true), beh, inv.get<bool>());
    } else if (t == "Metaspace") {
      keys(v, path, {"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"});
      p = make_metaspace_pre(one_char(v, path, "replacement"), prepend_scheme(v, path), flag(v, path, "split", true));
    } else if (t == "Digits") {
      keys(v, path, {"type", "individual_digits"});
      p = make_digits(flag(v, path, "individual_digits", false));
    } else {
      keys(v, path, {"type", "pretokenizers"});
      const json& items = array(v, path, "pretokenizers");
      std::vector<std::unique_ptr<PreTokenizer>> out;
      for (size_t i = 0; i < items.size(); ++i)
        out.push_back(pre_tokenizer(items[i], path + ".pretokenizers[" + std::to_string(i) + "]", d + 1));
      p = make_pre_sequence(std::move(out));
    }
    p->slot = pre_slots++;
    return p;
  }

  Decoder decoder(const json& v, const std::string& path, int d) const {
    depth(d, path);
    const std::string t = type(v, path, {"ByteLevel", "Metaspace", "Replace", "ByteFallback", "Fuse", "Strip", "Sequence"});
    Decoder out;
    if (t == "ByteLevel") {
      keys(v, path, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
      out.kind = Decoder::ByteLevel;
    } else if (t == "Metaspace") {
      keys(v, path, {"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"});
      out.kind = Decoder::Metaspace;
      out.a = one_char(v, path, "replacement");
      out.prepend_scheme = prepend_scheme(v, path);
    } else if (t == "Replace") {
      keys(v, path, {"type", "pattern", "content"});
      out.kind = Decoder::Replace;
      pattern(v, path, false);  // checks it
      out.a = v["pattern"]["String"].get<std::string>();
      out.b = str(v, path, "content");
    } else if (t == "ByteFallback" || t == "Fuse") {
      keys(v, path, {"type"});
      out.kind = t == "Fuse" ? Decoder::Fuse : Decoder::ByteFallback;
    } else if (t == "Strip") {
      keys(v, path, {"type", "content", "start", "stop"});
      out.kind = Decoder::Strip;
      out.a = one_char(v, path, "content");
      out.start = count(v, path, "start");
      out.stop = count(v, path, "stop");
    } else {
      keys(v, path, {"type", "decoders"});
      out.kind = Decoder::Sequence;
      const json& items = array(v, path, "decoders");
      for (size_t i = 0; i < items.size(); ++i)
        out.items.push_back(decoder(items[i], path + ".decoders[" + std::to_string(i) + "]", d + 1));
    }
    return out;
  }

  // A template: [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]
  std::vector<TemplateItem> template_items(const json& tpl, const std::string& path, const json& specials, bool pair) const {
    if (!tpl.is_array()) bad(path, "is " + show(tpl) + "; accepted: an array of pieces");
    std::vector<TemplateItem> out;
    for (size_t i = 0; i < tpl.size(); ++i) {
      const std::string ip = path + "[" + std::to_string(i) + "]";
      const json& piece = tpl[i];
      if (!piece.is_object() || piece.size() != 1 || !(piece.contains("SpecialToken") || piece.contains("Sequence")))
        bad(ip, "is " + show(piece) + "; accepted: {\"SpecialToken\": {...}} or {\"Sequence\": {...}}");
      const bool seq = piece.contains("Sequence");
      const json& body = piece.begin().value();
      keys(body, ip + "." + piece.begin().key(), {"id", "type_id"});
      const std::string id = str(body, ip + "." + piece.begin().key(), "id");
      TemplateItem item;
      if (seq) {
        if (id != "A" && !(pair && id == "B"))
          bad(ip + ".Sequence.id", "\"" + id + "\" is not supported; accepted: \"A\"" + (pair ? ", \"B\"" : " (single)"));
        item.sequence_a = id == "A";
      } else {
        if (!specials.contains(id)) bad(ip + ".SpecialToken.id", "\"" + id + "\" is not in special_tokens");
        for (const json& x : specials[id]["ids"]) item.ids.push_back(x.get<int32_t>());
      }
      out.push_back(std::move(item));
    }
    return out;
  }

  PostProcessor post_processor(const json& v, const std::string& path, int d) const {
    depth(d, path);
    const std::string t = type(v, path, {"ByteLevel", "TemplateProcessing", "Sequence"});
    PostProcessor out;
    if (t == "ByteLevel") {
      keys(v, path, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
      out.kind = PostProcessor::ByteLevel;
    } else if (t == "TemplateProcessing") {
      keys(v, path, {"type", "single", "pair", "special_tokens"});
      out.kind = PostProcessor::Template;
      const json& sp = need(v, path, "special_tokens");
      object(sp, path + ".special_tokens");
      for (auto it = sp.begin(); it != sp.end(); ++it) {
        const std::string kp = path + ".special_tokens[\"" + it.key() + "\"]";
        keys(*it, kp, {"id", "ids", "tokens"});
        const json& ids = array(*it, kp, "ids");
        const json& toks = array(*it, kp, "tokens");
        if (ids.size() != toks.size()) bad(kp, "has " + std::to_string(ids.size()) + " ids and " + std::to_string(toks.size()) + " tokens; accepted: as many of each");
        for (const json& x : ids)
          if (!x.is_number_unsigned() || x.get<uint64_t>() >= HfTokenizer::kMaxVocab)
            bad(kp + ".ids", "holds " + show(x) + "; accepted: token ids");
      }
      out.single = template_items(need(v, path, "single"), path + ".single", sp, false);
      template_items(need(v, path, "pair"), path + ".pair", sp, true);  // checked, unused
    } else {
      keys(v, path, {"type", "processors"});
      out.kind = PostProcessor::Sequence;
      const json& items = array(v, path, "processors");
      for (size_t i = 0; i < items.size(); ++i)
        out.items.push_back(post_processor(items[i], path + ".processors[" + std::to_string(i) + "]", d + 1));
    }
    return out;
  }

  void model(const json& v, Impl& impl) const {
    const std::string path = "model";
    type(v, path, {"BPE"});
    keys(v, path, {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
                   "byte_fallback", "ignore_merges", "vocab", "merges"});
    if (v.contains("dropout") && !v["dropout"].is_null() && !(v["dropout"].is_number() && v["dropout"].get<double>() == 0.0))
      bad("model.dropout", show(v["dropout"]) + " is not supported; accepted: null or 0 (BPE dropout samples)");
    for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (v.contains(k) && !v[k].is_null() && !(v[k].is_string() && v[k].get<std::string>().empty()))
        bad(std::string("model.") + k, show(v[k]) + " is not supported; accepted: null or \"\"");
    BpeModel::Options opt;
    opt.byte_fallback = flag(v, path, "byte_fallback", false);
    opt.fuse_unk = flag(v, path, "fuse_unk", false);
    opt.ignore_merges = flag(v, path, "ignore_merges", false);
    if (v.contains("unk_token") && !v["unk_token"].is_null()) {
      opt.unk_token = str(v, path, "unk_token");
      opt.has_unk = true;
    }
    const json& vocab = need(v, path, "vocab");
    object(vocab, "model.vocab");
    if (vocab.size() > HfTokenizer::kMaxVocab)
      bad("model.vocab", "has " + std::to_string(vocab.size()) + " entries; accepted: at most " + std::to_string(HfTokenizer::kMaxVocab));
    std::vector<std::pair<std::string, int64_t>> entries;
    entries.reserve(vocab.size());
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      if (!it->is_number_integer()) bad("model.vocab[\"" + it.key() + "\"]", "is " + show(*it) + "; accepted: an integer id");
      entries.emplace_back(it.key(), it->is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(it->get<uint64_t>(), INT64_MAX)) : it->get<int64_t>());
    }
    const json& merges = array(v, path, "merges");
    if (merges.size() > HfTokenizer::kMaxMerges)
      bad("model.merges", "has " + std::to_string(merges.size()) + " entries; accepted: at most " + std::to_string(HfTokenizer::kMaxMerges));
    std::vector<std::pair<std::string, std::string>> pairs;
    pairs.reserve(merges.size());
    const bool as_strings = !merges.empty() && merges[0].is_string();
    for (size_t i = 0; i < merges.size(); ++i) {
      const json& m = merges[i];
      const std::string mp = "model.merges[" + std::to_string(i) + "]";
      if (as_strings) {
        if (!m.is_string()) bad(mp, "is " + show(m) + "; accepted: all \"a b\" strings or all [\"a\", \"b\"] pairs");
        const std::string s = m.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          bad(mp, "is " + show(m) + "; accepted: two tokens separated by one space");
        pairs.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else {
        if (!m.is_array() || m.size() != 2 || !m[0].is_string() || !m[1].is_string())
          bad(mp, "is " + show(m) + "; accepted: all \"a b\" strings or all [\"a\", \"b\"] pairs");
        pairs.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      }
    }
    impl.model.build(where, std::move(entries), pairs, opt);
  }

  void added_tokens(const json& arr, Impl& impl) const {
    if (!arr.is_array()) bad("added_tokens", "is " + show(arr) + "; accepted: an array");
    if (arr.size() > HfTokenizer::kMaxAddedTokens)
      bad("added_tokens", "has " + std::to_string(arr.size()) + " entries; accepted: at most " + std::to_string(HfTokenizer::kMaxAddedTokens));
    // The package gives a token its vocab id, or else the next id from the vocab's size on.
    auto next_id = static_cast<int64_t>(impl.model.size());
    for (size_t i = 0; i < arr.size(); ++i) {
      const std::string p = "added_tokens[" + std::to_string(i) + "]";
      const json& t = arr[i];
      keys(t, p, {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
      AddedToken a;
      a.content = str(t, p, "content");
      const size_t declared = count(t, p, "id");
      if (a.content.empty()) bad(p + ".content", "is empty; accepted: a non-empty string");
      a.single_word = flag(t, p, "single_word", false);
      a.lstrip = flag(t, p, "lstrip", false);
      a.rstrip = flag(t, p, "rstrip", false);
      a.special = flag(t, p, "special", false);
      a.normalized = flag(t, p, "normalized", !a.special);
      if (impl.added_by_content.find(a.content) >= 0)
        bad(p + ".content", "\"" + a.content + "\" appears twice in added_tokens; accepted: each once");
      const int32_t in_vocab = impl.model.token_to_id(a.content);
      const int64_t id = in_vocab >= 0 ? in_vocab : next_id++;
      if (static_cast<int64_t>(declared) != id)
        bad(p + ".id", "is " + std::to_string(declared) + " for \"" + a.content + "\", but the tokenizers package would give it " +
                           std::to_string(id) + (in_vocab >= 0 ? " (its model.vocab id)" : " (the next id after the vocab and earlier added tokens)") +
                           "; accepted: that id");
      if (id >= static_cast<int64_t>(HfTokenizer::kMaxVocab)) bad(p + ".id", "is too large; accepted: ids below " + std::to_string(HfTokenizer::kMaxVocab));
      a.id = static_cast<int32_t>(id);
      a.match = a.content;
      if (a.normalized && impl.normalizer) impl.normalizer->normalize(a.match);
      if (a.match.empty()) bad(p + ".content", "normalizes to nothing; accepted: a token that stays non-empty");
      impl.added_by_content.insert(a.content, static_cast<int32_t>(impl.added.size()));
      (a.normalized ? impl.norm_trie : impl.raw_trie).add(a.match, static_cast<int32_t>(impl.added.size()));
      impl.added.push_back(std::move(a));
    }
  }
};

}  // namespace

void load_json(const std::string& where, const char* text, size_t n, Impl& impl) {
  JsonLimits limits;
  limits.max_bytes = HfTokenizer::kMaxFileBytes;
  limits.max_depth = HfTokenizer::kMaxJsonDepth;
  limits.max_values = HfTokenizer::kMaxJsonValues;
  const json doc = parse_bounded_json(where, text, n, limits);
  Loader L{where};
  L.keys(doc, "the top level", {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                                "post_processor", "decoder", "model"});
  if (doc.contains("version") && doc["version"] != "1.0")
    L.bad("version", Loader::show(doc["version"]) + " is not supported; accepted: \"1.0\"");
  for (const char* k : {"truncation", "padding"})
    if (doc.contains(k) && !doc[k].is_null()) L.bad(k, Loader::show(doc[k]) + " is not supported; accepted: null");
  L.model(L.need(doc, "the top level", "model"), impl);
  auto present = [&](const char* k) { return doc.contains(k) && !doc[k].is_null(); };
  if (present("normalizer")) impl.normalizer = L.normalizer(doc["normalizer"], "normalizer", 1);
  if (present("pre_tokenizer")) impl.pre_tokenizer = L.pre_tokenizer(doc["pre_tokenizer"], "pre_tokenizer", 1);
  impl.pre_slots = L.pre_slots;
  if (present("post_processor")) {
    impl.post = L.post_processor(doc["post_processor"], "post_processor", 1);
    impl.has_post = true;
  }
  if (present("decoder")) {
    impl.decoder = L.decoder(doc["decoder"], "decoder", 1);
    impl.has_decoder = true;
  }
  if (doc.contains("added_tokens")) L.added_tokens(doc["added_tokens"], impl);
  impl.finish_build();
}

}  // namespace dt::io::hft
