#include "serve/block_pool.h"

#include <algorithm>

#include "core/error.h"

namespace dt::serve {

BlockPool::BlockPool(int64_t num_blocks, int64_t block_size) : block_size_(block_size) {
  DT_CHECK(num_blocks >= 1 && num_blocks <= (int64_t{1} << 30),
           "kv cache: num_blocks = " + std::to_string(num_blocks) + "; accepted: [1, 2^30]");
  DT_CHECK(block_size >= 1 && block_size <= 4096,
           "kv cache: block_size = " + std::to_string(block_size) + "; accepted: [1, 4096]");
  blocks_.resize(static_cast<size_t>(num_blocks));
  free_.reserve(blocks_.size());
  // Pushed in reverse so that block 0 is handed out first (reproducible tables in tests).
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

BlockCounts BlockPool::counts() const {
  BlockCounts c;
  c.free = static_cast<int64_t>(free_.size());
  c.cached = static_cast<int64_t>(lru_.size());
  c.used = num_blocks() - c.free - c.cached;
  return c;
}

void BlockPool::unpublish(int32_t b) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  if (blk.hash == 0) return;
  auto it = by_hash_.find(blk.hash);
  if (it != by_hash_.end() && it->second == b) by_hash_.erase(it);
  blk.hash = 0;
  blk.tokens.clear();
}

int32_t BlockPool::allocate() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {  // evict the least recently released cached block
    b = lru_.front();
    lru_.pop_front();
    blocks_[static_cast<size_t>(b)].in_lru = false;
    unpublish(b);
    ++evictions_;
  } else {
    return -1;
  }
  blocks_[static_cast<size_t>(b)].refs = 1;
  count_use(1);
  return b;
}

void BlockPool::ref(int32_t b) {
  DT_CHECK(b >= 0 && b < num_blocks(), "kv cache: block " + std::to_string(b) + " out of range");
  Block& blk = blocks_[static_cast<size_t>(b)];
  if (blk.refs == 0) {
    DT_CHECK(blk.in_lru, "kv cache: ref of free block " + std::to_string(b));
    lru_.erase(blk.lru_pos);
    blk.in_lru = false;
    count_use(1);
  }
  ++blk.refs;
}

void BlockPool::release(int32_t b) {
  DT_CHECK(b >= 0 && b < num_blocks(), "kv cache: block " + std::to_string(b) + " out of range");
  Block& blk = blocks_[static_cast<size_t>(b)];
  DT_CHECK(blk.refs > 0, "kv cache: release of unreferenced block " + std::to_string(b));
  if (--blk.refs > 0) return;
  count_use(-1);
  if (blk.hash != 0) {
    blk.lru_pos = lru_.insert(lru_.end(), b);
    blk.in_lru = true;
  } else {
    free_.push_back(b);
  }
}

uint64_t BlockPool::chain_hash(uint64_t parent, const int32_t* tokens, int64_t n) {
  // FNV-1a over the parent's hash and the tokens, finished by a splitmix64 mix. Never 0
  // (0 means "not published").
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  mix(parent);
  for (int64_t i = 0; i < n; ++i) mix(static_cast<uint32_t>(tokens[i]));
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h == 0 ? 1 : h;
}

int32_t BlockPool::lookup(uint64_t hash, uint64_t parent, const int32_t* tokens) {
  ++lookups_;
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return -1;
  const Block& blk = blocks_[static_cast<size_t>(it->second)];
  if (blk.parent != parent || !std::equal(blk.tokens.begin(), blk.tokens.end(), tokens)) return -1;  // a collision
  ++hits_;
  ref(it->second);
  return it->second;
}

void BlockPool::publish(int32_t b, uint64_t hash, uint64_t parent, const int32_t* tokens) {
  DT_CHECK(b >= 0 && b < num_blocks() && blocks_[static_cast<size_t>(b)].refs > 0,
           "kv cache: publish of a block not in use: " + std::to_string(b));
  Block& blk = blocks_[static_cast<size_t>(b)];
  if (blk.hash != 0 || by_hash_.count(hash)) return;
  blk.hash = hash;
  blk.parent = parent;
  blk.tokens.assign(tokens, tokens + block_size_);
  by_hash_[hash] = b;
}

std::string BlockPool::check() const {
  std::vector<int> seen(blocks_.size(), 0);
  for (int32_t b : free_) {
    if (b < 0 || b >= num_blocks()) return "free list holds block " + std::to_string(b) + ", out of range";
    const Block& blk = blocks_[static_cast<size_t>(b)];
    if (blk.refs != 0 || blk.hash != 0 || blk.in_lru)
      return "free block " + std::to_string(b) + " is referenced, published or cached";
    ++seen[static_cast<size_t>(b)];
  }
  for (int32_t b : lru_) {
    const Block& blk = blocks_[static_cast<size_t>(b)];
    if (blk.refs != 0 || blk.hash == 0 || !blk.in_lru)
      return "cached block " + std::to_string(b) + " is referenced or unpublished";
    ++seen[static_cast<size_t>(b)];
  }
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const Block& blk = blocks_[b];
    if (blk.refs > 0) ++seen[b];
    if (blk.refs < 0) return "block " + std::to_string(b) + " has refcount " + std::to_string(blk.refs);
    if (seen[b] != 1) return "block " + std::to_string(b) + " is in " + std::to_string(seen[b]) + " states";
    if (blk.hash != 0) {
      auto it = by_hash_.find(blk.hash);
      if (it == by_hash_.end() || it->second != static_cast<int32_t>(b))
        return "published block " + std::to_string(b) + " is missing from the hash index";
    }
  }
  for (const auto& [h, b] : by_hash_)
    if (blocks_[static_cast<size_t>(b)].hash != h) return "hash index points at block " + std::to_string(b);
  return "";
}

}  // namespace dt::serve
