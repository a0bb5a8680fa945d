// The block pool of the paged KV cache (vLLM's design): the cache is cut into num_blocks
// fixed-size blocks of block_size token positions each, and a sequence holds a block table,
// the ids of the blocks its positions live in (position p in block table[p / block_size]).
// This class keeps only the accounting; the storage is nn::PagedKv's, indexed by block id.
//
// Every block is in exactly one of three states:
//   used    refcount >= 1: in the block table of that many sequences;
//   cached  refcount 0 but holding a full block of a known token prefix (its hash): still
//           reusable by a sequence whose prompt starts with that prefix, until evicted;
//   free    refcount 0, holding nothing anyone can find.
// Prefix caching: a full block is published under the hash of every token up to its end
// (the chain hash of its parent's hash and its own tokens), so two prompts that share their
// first k full blocks share those k blocks. The tokens and the parent's hash are kept beside
// the hash and compared on lookup, so a collision costs a miss, never a wrong cache hit
// (short of one of the parent's hash as well). Allocation takes a
// free block first, then evicts the least recently released cached block (LRU).
//
// Not thread-safe: one scheduler owns a pool.
#pragma once
#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

namespace dt::serve {

struct BlockCounts {
  int64_t used = 0, cached = 0, free = 0;
  bool operator==(const BlockCounts& o) const { return used == o.used && cached == o.cached && free == o.free; }
};

class BlockPool {
 public:
  // num_blocks >= 1, block_size >= 1 (INVALID_ARGUMENT naming them otherwise).
  BlockPool(int64_t num_blocks, int64_t block_size);

  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t block_size() const { return block_size_; }
  // Blocks an allocation can take now: free plus cached (evictable).
  int64_t available() const { return static_cast<int64_t>(free_.size() + lru_.size()); }
  BlockCounts counts() const;
  int refcount(int32_t block) const { return blocks_.at(static_cast<size_t>(block)).refs; }

  // A block with refcount 1, or -1 when none is free or cached.
  int32_t allocate();
  // refcount + 1 of a used or cached block (a cached one becomes used again).
  void ref(int32_t block);
  // refcount - 1; at 0 the block becomes cached (if published) or free.
  void release(int32_t block);

  // The chain hash of a full block of `tokens` (block_size of them) after a prefix whose
  // hash is `parent` (0 for the first block).
  static uint64_t chain_hash(uint64_t parent, const int32_t* tokens, int64_t n);
  // The block published under hash = chain_hash(parent, tokens), ref'ed for the caller; -1
  // if none. The parent's hash and the tokens are compared too: a collision is a miss.
  int32_t lookup(uint64_t hash, uint64_t parent, const int32_t* tokens);
  // Publishes a used, full block under hash = chain_hash(parent, tokens). No-op if another
  // block already holds that prefix or this one is already published.
  void publish(int32_t block, uint64_t hash, uint64_t parent, const int32_t* tokens);

  int64_t hits() const { return hits_; }        // lookups that found a block
  int64_t lookups() const { return lookups_; }  // lookups made
  int64_t evictions() const { return evictions_; }
  int64_t peak_used() const { return peak_used_; }  // most blocks in use at once

  // The pool's own invariants: every block in exactly one state, the counts adding up to
  // num_blocks, the hash index pointing at published blocks only. "" when they hold, else
  // what is broken (for tests and debug checks).
  std::string check() const;

 private:
  struct Block {
    int refs = 0;
    uint64_t hash = 0, parent = 0;  // hash 0: not published
    std::vector<int32_t> tokens;
    std::list<int32_t>::iterator lru_pos;  // valid while cached
    bool in_lru = false;
  };
  void unpublish(int32_t block);
  int64_t block_size_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;                     // a stack: the last freed is reused first
  std::list<int32_t> lru_;                        // cached blocks, least recently released first
  std::unordered_map<uint64_t, int32_t> by_hash_;  // published blocks
  int64_t hits_ = 0, lookups_ = 0, evictions_ = 0, used_ = 0, peak_used_ = 0;
  void count_use(int delta) {
    used_ += delta;
    peak_used_ = used_ > peak_used_ ? used_ : peak_used_;
  }
};

}  // namespace dt::serve
