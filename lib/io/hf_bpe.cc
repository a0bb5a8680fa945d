// The BPE model of io/hf_tokenizer.h: the `tokenizers` package's algorithm (characters, byte
// fallback or unk, then merges lowest rank first, leftmost first, through a heap), with a
// merge-rank hash map on id pairs and a bounded cache of pre-token -> ids.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "io/hf_tok_internal.h"
#include "io/hf_tokenizer.h"

namespace dt::io::hft {

// ---- StrMap
void StrMap::clear() {
  slots_.clear();
  arena_.clear();
  count_ = 0;
}

void StrMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap *= 2;
  if (cap <= slots_.size()) return;
  std::vector<Slot> old(cap, Slot{0, 0, 0, -1});
  old.swap(slots_);
  for (const Slot& s : old) {
    if (s.value < 0) continue;
    size_t i = s.hash & (slots_.size() - 1);
    while (slots_[i].value >= 0) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = s;
  }
}

void StrMap::grow() { reserve(std::max<size_t>(16, count_ + 1)); }

int32_t StrMap::find(std::string_view key) const {
  if (slots_.empty()) return -1;
  const uint64_t h = hash_bytes(key);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.value < 0) return -1;
    if (s.hash == h && s.len == key.size() && std::memcmp(arena_.data() + s.off, key.data(), key.size()) == 0)
      return s.value;
  }
}

bool StrMap::insert(std::string_view key, int32_t value) {
  DT_ASSERT(value >= 0);
  if ((count_ + 1) * 2 > slots_.size()) grow();
  const uint64_t h = hash_bytes(key);
  const size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  for (;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.value < 0) break;
    if (s.hash == h && s.len == key.size() && std::memcmp(arena_.data() + s.off, key.data(), key.size()) == 0)
      return false;
  }
  DT_ASSERT(arena_.size() + key.size() < UINT32_MAX);
  slots_[i] = Slot{h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), value};
  arena_.append(key.data(), key.size());
  ++count_;
  return true;
}

// ---- BpeCache
bool BpeCache::get(std::string_view word, std::vector<int32_t>& out) const {
  const int32_t e = index_.find(word);
  if (e < 0) return false;
  const auto [off, n] = entries_[static_cast<size_t>(e)];
  out.insert(out.end(), ids_.begin() + off, ids_.begin() + off + n);
  return true;
}

void BpeCache::put(std::string_view word, const int32_t* ids, size_t n) {
  if (word.size() >= kMaxWordBytes) return;
  if (entries_.size() >= kMaxEntries) {  // full: start over (bounded memory, adapts to new text)
    index_.clear();
    entries_.clear();
    ids_.clear();
  }
  if (!index_.insert(word, static_cast<int32_t>(entries_.size()))) return;
  entries_.emplace_back(static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(n));
  ids_.insert(ids_.end(), ids, ids + n);
}

// ---- BpeModel
namespace {
uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xFF51AFD7ED558CCDull;
  k ^= k >> 33;
  return k;
}
const char kHex[] = "0123456789ABCDEF";
}  // namespace

void BpeModel::build(const std::string& where, std::vector<std::pair<std::string, int64_t>> vocab,
                     const std::vector<std::pair<std::string, std::string>>& merges, const Options& opt) {
  opt_ = opt;
  if (vocab.size() > HfTokenizer::kMaxVocab)
    fail(DT_ERR_IO, where + ": model.vocab has " + std::to_string(vocab.size()) + " entries; accepted: at most " +
                        std::to_string(HfTokenizer::kMaxVocab));
  int64_t max_id = -1;
  for (const auto& [tok, id] : vocab) {
    if (id < 0 || id >= static_cast<int64_t>(HfTokenizer::kMaxVocab))
      fail(DT_ERR_IO, where + ": model.vocab[\"" + tok + "\"] = " + std::to_string(id) + "; accepted: ids in [0, " +
                          std::to_string(HfTokenizer::kMaxVocab) + ")");
    max_id = std::max(max_id, id);
  }
  by_id_.assign(static_cast<size_t>(max_id + 1), std::string());
  has_id_.assign(static_cast<size_t>(max_id + 1), 0);
  vocab_.reserve(vocab.size());
  for (auto& [tok, id] : vocab) {
    const auto i = static_cast<size_t>(id);
    if (has_id_[i])
      fail(DT_ERR_IO, where + ": model.vocab gives id " + std::to_string(id) + " to both \"" + by_id_[i] + "\" and \"" +
                          tok + "\"; accepted: one token per id");
    if (!vocab_.insert(tok, static_cast<int32_t>(id)))  // the JSON check refuses repeated keys first
      fail(DT_ERR_IO, where + ": model.vocab has \"" + tok + "\" twice");
    has_id_[i] = 1;
    by_id_[i] = std::move(tok);
  }
  if (merges.size() > HfTokenizer::kMaxMerges)
    fail(DT_ERR_IO, where + ": model.merges has " + std::to_string(merges.size()) + " entries; accepted: at most " +
                        std::to_string(HfTokenizer::kMaxMerges));
  size_t cap = 16;
  while (cap < merges.size() * 2 + 2) cap *= 2;
  merges_.assign(cap, MergeSlot{~uint64_t(0), 0, 0});
  std::string joined;
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    const int32_t ia = vocab_.find(a), ib = vocab_.find(b);
    joined = a + b;
    const int32_t inew = vocab_.find(joined);
    const char* missing = ia < 0 ? a.c_str() : ib < 0 ? b.c_str() : inew < 0 ? joined.c_str() : nullptr;
    if (missing)
      fail(DT_ERR_IO, where + ": model.merges[" + std::to_string(r) + "] (\"" + a + "\", \"" + b + "\") needs \"" +
                          missing + "\", which is not in model.vocab; accepted: merges of vocab tokens into a vocab token");
    // A pair given twice keeps its last rank, as the package's hash map does.
    const uint64_t key = pair_key(ia, ib);
    size_t i = mix(key) & (cap - 1);
    while (merges_[i].key != ~uint64_t(0) && merges_[i].key != key) i = (i + 1) & (cap - 1);
    merges_[i] = MergeSlot{key, static_cast<int32_t>(r), inew};
  }
  unk_id_ = -1;
  if (opt.has_unk) {
    unk_id_ = vocab_.find(opt.unk_token);
    if (unk_id_ < 0)
      fail(DT_ERR_IO, where + ": model.unk_token \"" + opt.unk_token + "\" is not in model.vocab; accepted: a vocab token or null");
  }
  all_bytes_ = true;
  for (int b = 0; b < 256; ++b) {
    const char name[] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    byte_ids_[b] = vocab_.find(std::string_view(name, 6));
    all_bytes_ = all_bytes_ && byte_ids_[b] >= 0;
  }
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= id_end() || !has_id_[static_cast<size_t>(id)]) return nullptr;
  return &by_id_[static_cast<size_t>(id)];
}

const BpeModel::MergeSlot* BpeModel::find_merge(int32_t a, int32_t b) const {
  const uint64_t key = pair_key(a, b);
  const size_t mask = merges_.size() - 1;
  for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    const MergeSlot& s = merges_[i];
    if (s.key == key) return &s;
    if (s.key == ~uint64_t(0)) return nullptr;
  }
}

namespace {
struct Sym {
  int32_t c, prev, next;
  uint32_t len;  // bytes of the word it covers; 0 once merged away
};
struct Cand {
  int32_t rank, pos, new_id;
};
// The heap's top is the lowest rank, then the leftmost position (the package's Merge order).
struct CandAfter {
  bool operator()(const Cand& x, const Cand& y) const { return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos; }
};
}  // namespace

void BpeModel::merge_word(std::string_view w, std::vector<int32_t>& out) const {
  thread_local std::vector<Sym> sym;
  thread_local std::vector<Cand> heap;
  sym.clear();
  heap.clear();
  auto add = [&](int32_t c, uint32_t len) {
    const auto n = static_cast<int32_t>(sym.size());
    if (n > 0) sym.back().next = n;
    sym.push_back(Sym{c, n - 1, -1, len});
  };
  int32_t unk_pending = -1;
  uint32_t unk_len = 0;
  for (size_t i = 0; i < w.size();) {
    const size_t n = std::min(u8len(static_cast<unsigned char>(w[i])), w.size() - i);
    const int32_t id = vocab_.find(w.substr(i, n));
    if (id >= 0) {
      if (unk_pending >= 0) {
        add(unk_pending, unk_len);
        unk_pending = -1;
      }
      add(id, static_cast<uint32_t>(n));
    } else {
      bool done = false;
      if (opt_.byte_fallback) {
        bool all = true;
        for (size_t k = 0; k < n && all && !all_bytes_; ++k) all = byte_ids_[static_cast<unsigned char>(w[i + k])] >= 0;
        if (all) {
          for (size_t k = 0; k < n; ++k) add(byte_ids_[static_cast<unsigned char>(w[i + k])], 1);
          done = true;  // (a pending unk stays pending, as in the package)
        }
      }
      if (!done && unk_id_ >= 0) {
        if (unk_pending >= 0 && opt_.fuse_unk) {
          unk_len += static_cast<uint32_t>(n);
        } else {
          if (unk_pending >= 0) add(unk_pending, unk_len);
          unk_pending = unk_id_;
          unk_len = static_cast<uint32_t>(n);
        }
      }
    }
    i += n;
  }
  if (unk_pending >= 0) add(unk_pending, unk_len);

  for (size_t i = 0; i + 1 < sym.size(); ++i)
    if (const MergeSlot* m = find_merge(sym[i].c, sym[i + 1].c))
      heap.push_back(Cand{m->rank, static_cast<int32_t>(i), m->new_id});
  std::make_heap(heap.begin(), heap.end(), CandAfter{});
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), CandAfter{});
    const Cand top = heap.back();
    heap.pop_back();
    Sym& cur = sym[static_cast<size_t>(top.pos)];
    if (cur.len == 0 || cur.next < 0) continue;
    const Sym right = sym[static_cast<size_t>(cur.next)];
    const MergeSlot* m = find_merge(cur.c, right.c);
    if (!m || m->new_id != top.new_id) continue;  // stale
    cur.c = top.new_id;
    cur.len += right.len;
    sym[static_cast<size_t>(cur.next)].len = 0;
    cur.next = right.next;
    if (right.next >= 0) sym[static_cast<size_t>(right.next)].prev = top.pos;
    if (cur.prev >= 0) {
      if (const MergeSlot* p = find_merge(sym[static_cast<size_t>(cur.prev)].c, cur.c)) {
        heap.push_back(Cand{p->rank, cur.prev, p->new_id});
        std::push_heap(heap.begin(), heap.end(), CandAfter{});
      }
    }
    if (cur.next >= 0) {
      if (const MergeSlot* q = find_merge(cur.c, sym[static_cast<size_t>(cur.next)].c)) {
        heap.push_back(Cand{q->rank, top.pos, q->new_id});
        std::push_heap(heap.begin(), heap.end(), CandAfter{});
      }
    }
  }
  for (const Sym& s : sym)
    if (s.len != 0) out.push_back(s.c);
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out, BpeCache* cache) const {
  if (word.empty()) return;
  if (opt_.ignore_merges) {
    const int32_t id = vocab_.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (cache && cache->get(word, out)) return;
  const size_t before = out.size();
  merge_word(word, out);
  if (cache) cache->put(word, out.data() + before, out.size() - before);
}

}  // namespace dt::io::hft
