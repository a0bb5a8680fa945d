// The deterministic text generator of tools/hf_fixtures/make_tokenizers.py, the same step for
// step: a splitmix64 stream picks a category of tests/fixtures/hf/tokenizers/fragments.json by
// weight, then an item (the "word" category makes a made-up word from 1-3 syllables, upper,
// title or lower case). The tokenizer test compares chunk hashes of its 1 MB text with the
// ones `tokenizers` gave; bench/bench_tokenizer.cc encodes the same text.
#pragma once
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace dt::test::hfgen {

struct SplitMix64 {
  uint64_t s;
  uint64_t next() {
    s += 0x9E3779B97F4A7C15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

struct Category {
  std::string name;
  uint64_t weight;
  std::vector<std::string> items;
};

inline std::vector<Category> load_fragments(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str());
  std::vector<Category> cats;
  for (const auto& c : j.at("categories"))
    cats.push_back({c.at("name").get<std::string>(), c.at("weight").get<uint64_t>(),
                    c.at("items").get<std::vector<std::string>>()});
  return cats;
}

inline std::string fragment(SplitMix64& rng, const std::vector<Category>& cats) {
  uint64_t total = 0;
  for (const Category& c : cats) total += c.weight;
  uint64_t r = rng.next() % total;
  size_t k = 0;
  for (; k + 1 < cats.size(); ++k) {
    if (r < cats[k].weight) break;
    r -= cats[k].weight;
  }
  const Category& c = cats[k];
  if (c.name == "word") {
    const uint64_t n = 1 + rng.next() % 3;
    std::string w;
    for (uint64_t i = 0; i < n; ++i) w += c.items[rng.next() % c.items.size()];
    const uint64_t cs = rng.next() % 8;
    if (cs == 0) {
      for (char& ch : w)
        if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 'a' + 'A');
    } else if (cs <= 2 && !w.empty() && w[0] >= 'a' && w[0] <= 'z') {
      w[0] = static_cast<char>(w[0] - 'a' + 'A');
    }
    return " " + w;
  }
  return c.items[rng.next() % c.items.size()];
}

// A chunk: fragments until it holds at least min_bytes.
inline std::string chunk(SplitMix64& rng, const std::vector<Category>& cats, size_t min_bytes) {
  std::string s;
  while (s.size() < min_bytes) s += fragment(rng, cats);
  return s;
}

inline std::vector<std::string> chunks(const std::vector<Category>& cats, uint64_t seed, size_t n, size_t min_bytes) {
  SplitMix64 rng{seed};
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back(chunk(rng, cats, min_bytes));
  return out;
}

inline uint64_t fnv1a_ids(const int32_t* ids, size_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < n; ++i) {
    const auto v = static_cast<uint32_t>(ids[i]);
    for (int b = 0; b < 4; ++b) h = (h ^ ((v >> (8 * b)) & 0xFF)) * 0x100000001B3ull;
  }
  return h;
}

}  // namespace dt::test::hfgen
