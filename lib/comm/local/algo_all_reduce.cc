// All-reduce over shared memory, bitwise identical on every rank.
//  - Large buffers: member r owns block r. It reduces block r of every member's send
//    buffer (always in member order), a cache-sized chunk at a time, and writes each
//    finished chunk straight into every member's recv. Every element is computed once, by
//    its owner, so all ranks hold the same bits; each byte of every send buffer is read
//    once and each byte of every recv buffer written once (the least memory traffic an
//    out-of-place all-reduce can have), all members work at once, and there is no barrier
//    between the reduction and the copies. Buffers too large for the caches are written
//    with non-temporal stores from a small scratch chunk, so no store first reads the line
//    it overwrites.
//  - Small buffers (latency bound): every member reduces the whole buffer into scratch,
//    in the same order, so the result is the same everywhere; nobody touches a peer's recv.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "comm/local/algo_util.h"
#include "comm/local/local_comm.h"

namespace dt::comm::local {
namespace {
constexpr int64_t kSmallBytes = 16 * 1024;
// Chunk of the owner's block reduced at a time: its sources and result stay in L1/L2
// while the result is copied out to every member.
constexpr int64_t kChunkBytes = 32 * 1024;
// From this size (each rank's buffer) on, results are streamed past the caches.
int64_t stream_bytes() {
  static int64_t v = std::getenv("DT_AR_STREAM") ? std::atoll(std::getenv("DT_AR_STREAM")) : (8 << 20);
  return v;
}

// memcpy with non-temporal stores (the caller issues the store fence). dst lines are
// written whole, never read first; the data goes to memory, not to this core's caches.
void stream_copy(void* dst, const void* src, size_t bytes) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
#if defined(__AVX512F__)
  using V = __m512i;
#define DT_STREAM(p, q) _mm512_stream_si512(reinterpret_cast<V*>(p), _mm512_loadu_si512(q))
#elif defined(__AVX__)
  using V = __m256i;
#define DT_STREAM(p, q) _mm256_stream_si256(reinterpret_cast<V*>(p), _mm256_loadu_si256(reinterpret_cast<const V*>(q)))
#elif defined(__SSE2__)
  using V = __m128i;
#define DT_STREAM(p, q) _mm_stream_si128(reinterpret_cast<V*>(p), _mm_loadu_si128(reinterpret_cast<const V*>(q)))
#endif
#ifdef DT_STREAM
  constexpr size_t kV = sizeof(V);
  size_t head = (kV - reinterpret_cast<uintptr_t>(d) % kV) % kV;
  if (head > bytes) head = bytes;
  std::memcpy(d, s, head);
  d += head, s += head, bytes -= head;
  size_t body = bytes / (4 * kV) * (4 * kV);
  for (size_t i = 0; i < body; i += 4 * kV) {
    DT_STREAM(d + i, s + i);
    DT_STREAM(d + i + kV, s + i + kV);
    DT_STREAM(d + i + 2 * kV, s + i + 2 * kV);
    DT_STREAM(d + i + 3 * kV, s + i + 3 * kV);
  }
#undef DT_STREAM
  std::memcpy(d + body, s + body, bytes - body);
#else
  std::memcpy(d, s, bytes);
#endif
}

void store_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

void run_all_reduce_old(Group& g, int me, const void* send, void* recv, int64_t count, DType dtype, ReduceOp op) {
  const char* what = "all_reduce";
  const int n = g.size();
  std::vector<const void*> srcs(n);
  int64_t lo = block_lo(count, n, me), hi = block_lo(count, n, me + 1);
  for (int p = 0; p < n; ++p) srcs[p] = at(g.slot(p).send, lo, dtype);
  reduce_into(op, dtype, srcs, at(recv, lo, dtype), hi - lo);
  g.fence(me, what);  // every block is final in its owner's recv
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    int64_t plo = block_lo(count, n, p), phi = block_lo(count, n, p + 1);
    copy_elems(at(recv, plo, dtype), at(g.slot(p).recv, plo, dtype), phi - plo, dtype);
  }
  g.fence(me, what);  // nobody reuses its recv while a peer still copies from it
}
}  // namespace

void run_all_reduce(Group& g, int me, const void* send, void* recv, int64_t count, DType dtype, ReduceOp op) {
  const char* what = "all_reduce";
  const int n = g.size();
  Slot s;
  s.kind = CollKind::AllReduce;
  s.dtype = dtype;
  s.count = count;
  s.op = op;
  s.send = send;
  s.recv = recv;
  publish(g, me, s, what);
  std::vector<const void*> srcs(n);
  const int64_t esz = static_cast<int64_t>(dtype_size(dtype));
  if (count * esz <= kSmallBytes) {
    thread_local std::vector<char> scratch;
    scratch.resize(static_cast<size_t>(count) * dtype_size(dtype));
    for (int p = 0; p < n; ++p) srcs[p] = g.slot(p).send;
    reduce_into(op, dtype, srcs, scratch.data(), count);
    g.fence(me, what);  // every member has read every send buffer
    copy_elems(recv, scratch.data(), count, dtype);
    return;
  }
  static const bool old = std::getenv("DT_AR_OLD") != nullptr;
  if (old) return run_all_reduce_old(g, me, send, recv, count, dtype, op);
  // Block `me`, a chunk at a time: reduce, then write the chunk into every member's recv.
  // In place (a member's recv is its send) this is safe: block `me` of any send buffer
  // is read by this member only, and each chunk is read before it is overwritten.
  const bool stream = count * esz >= stream_bytes();
  const int64_t chunk = kChunkBytes / esz;
  thread_local std::vector<char> scratch;
  if (stream) scratch.resize(static_cast<size_t>(kChunkBytes));
  const int64_t lo = block_lo(count, n, me), hi = block_lo(count, n, me + 1);
  for (int64_t c = lo; c < hi; c += chunk) {
    const int64_t m = std::min(chunk, hi - c);
    for (int p = 0; p < n; ++p) srcs[p] = at(g.slot(p).send, c, dtype);
    if (stream) {
      reduce_into(op, dtype, srcs, scratch.data(), m);
      for (int k = 0; k < n; ++k) {
        int p = (me + k) % n;  // members write to different peers at once
        stream_copy(at(g.slot(p).recv, c, dtype), scratch.data(), static_cast<size_t>(m * esz));
      }
    } else {
      reduce_into(op, dtype, srcs, at(recv, c, dtype), m);
      for (int k = 1; k < n; ++k) copy_elems(at(g.slot((me + k) % n).recv, c, dtype), at(recv, c, dtype), m, dtype);
    }
  }
  if (stream) store_fence();  // the streamed stores are visible before the fence releases
  g.fence(me, what);          // every chunk is in every recv; nobody reuses a buffer before
}

}  // namespace dt::comm::local
