// All-reduce over shared memory, bitwise identical on every rank.
//  - Large buffers: member r owns block r. It reduces block r of every member's send
//    buffer (always in member order), a cache-sized chunk at a time, and writes each
//    finished chunk straight into every member's recv. Every element is computed once, by
//    its owner, so all ranks hold the same bits; each byte of every send buffer is read
//    once and each byte of every recv buffer written once (the least memory traffic an
//    out-of-place all-reduce can have), all members work at once, and there is no barrier
//    between the reduction and the copies. Buffers too large for the caches are written
//    with non-temporal stores, so no store first reads the line it overwrites: f32 sum and
//    average straight from the vector registers, other types and ops from a small scratch
//    chunk that kernels::reduce fills.
//  - Small buffers (latency bound): every member reduces the whole buffer into scratch,
//    in the same order, so the result is the same everywhere; nobody touches a peer's recv.
#include <algorithm>
#include <cstdint>
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
// Results are streamed past the caches when all members' buffers together (send and
// recv) take at least this much: measured on the reference machine (docs/comm.md,
// "Measured"), streaming wins from 64 MiB per rank on 2 ranks and 16 MiB on 4, and loses
// below, where the buffers still fit in the last-level cache share a process gets.
constexpr int64_t kStreamFootprint = int64_t{128} << 20;

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

// f32 sum (or average) of one chunk, stored straight into every destination with
// non-temporal stores: the common case, gradients, without the round trip through scratch
// (a third of the instructions; it matters when ranks share a core). Folds left to right
// in f32 and divides last, exactly as kernels::reduce does, so the bits are the same.
// Returns false, having done nothing, when the destinations are not equally aligned.
bool fused_f32(ReduceOp op, const std::vector<const void*>& srcs, const std::vector<void*>& dsts, int64_t m) {
#if defined(__AVX512F__)
  using V = __m512;
  constexpr int64_t kL = 16;
  auto load = [](const float* p) { return _mm512_loadu_ps(p); };
  auto add = [](V a, V b) { return _mm512_add_ps(a, b); };
  auto div = [](V a, V b) { return _mm512_div_ps(a, b); };
  auto splat = [](float x) { return _mm512_set1_ps(x); };
  auto stream = [](float* p, V v) { _mm512_stream_ps(p, v); };
#elif defined(__AVX__)
  using V = __m256;
  constexpr int64_t kL = 8;
  auto load = [](const float* p) { return _mm256_loadu_ps(p); };
  auto add = [](V a, V b) { return _mm256_add_ps(a, b); };
  auto div = [](V a, V b) { return _mm256_div_ps(a, b); };
  auto splat = [](float x) { return _mm256_set1_ps(x); };
  auto stream = [](float* p, V v) { _mm256_stream_ps(p, v); };
#elif defined(__SSE2__)
  using V = __m128;
  constexpr int64_t kL = 4;
  auto load = [](const float* p) { return _mm_loadu_ps(p); };
  auto add = [](V a, V b) { return _mm_add_ps(a, b); };
  auto div = [](V a, V b) { return _mm_div_ps(a, b); };
  auto splat = [](float x) { return _mm_set1_ps(x); };
  auto stream = [](float* p, V v) { _mm_stream_ps(p, v); };
#else
  return false;
#endif
#if defined(__SSE2__)
  if (op != ReduceOp::Sum && op != ReduceOp::Avg) return false;
  const int n = static_cast<int>(srcs.size()), nd = static_cast<int>(dsts.size());
  constexpr uintptr_t kAlign = kL * sizeof(float);
  const uintptr_t mis = reinterpret_cast<uintptr_t>(dsts[0]) % kAlign;
  if (mis % sizeof(float) != 0) return false;
  for (void* d : dsts)
    if (reinterpret_cast<uintptr_t>(d) % kAlign != mis) return false;
  const bool avg = op == ReduceOp::Avg;
  const float nf = static_cast<float>(n);
  auto one = [&](int64_t i) {
    float v = static_cast<const float*>(srcs[0])[i];
    for (int k = 1; k < n; ++k) v = v + static_cast<const float*>(srcs[k])[i];
    if (avg) v = v / nf;
    for (void* d : dsts) static_cast<float*>(d)[i] = v;
  };
  const int64_t head = std::min<int64_t>(m, static_cast<int64_t>((kAlign - mis) % kAlign / sizeof(float)));
  const int64_t body_end = head + (m - head) / kL * kL;
  for (int64_t i = 0; i < head; ++i) one(i);
  const V vn = splat(nf);
  for (int64_t i = head; i < body_end; i += kL) {
    V v = load(static_cast<const float*>(srcs[0]) + i);
    for (int k = 1; k < n; ++k) v = add(v, load(static_cast<const float*>(srcs[k]) + i));
    if (avg) v = div(v, vn);
    for (int k = 0; k < nd; ++k) stream(static_cast<float*>(dsts[k]) + i, v);
  }
  for (int64_t i = body_end; i < m; ++i) one(i);
  return true;
#endif
}

}  // namespace

void run_all_reduce(Group& g, int me, const void* send, void* recv, int64_t count, DType dtype, ReduceOp op) {
  const char* what = "all_reduce";
  const int n = g.size();
  publish(g, me, slot_of(CollKind::AllReduce, dtype, count, send, recv, op), what);
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
  // Block `me`, a chunk at a time: reduce, then write the chunk into every member's recv.
  // In place (a member's recv is its send) this is safe: block `me` of any send buffer
  // is read by this member only, and each chunk is read before it is overwritten.
  const bool stream = 2 * n * count * esz >= kStreamFootprint;
  const int64_t chunk = kChunkBytes / esz;
  thread_local std::vector<char> scratch;
  if (stream) scratch.resize(static_cast<size_t>(kChunkBytes));
  std::vector<void*> dsts(n);
  const int64_t lo = block_lo(count, n, me), hi = block_lo(count, n, me + 1);
  for (int64_t c = lo; c < hi; c += chunk) {
    const int64_t m = std::min(chunk, hi - c);
    for (int p = 0; p < n; ++p) srcs[p] = at(g.slot(p).send, c, dtype);
    if (stream) {
      for (int k = 0; k < n; ++k) dsts[k] = at(g.slot((me + k) % n).recv, c, dtype);  // members start on different peers
      if (dtype == DType::F32 && fused_f32(op, srcs, dsts, m)) continue;
      reduce_into(op, dtype, srcs, scratch.data(), m);
      for (void* d : dsts) stream_copy(d, scratch.data(), static_cast<size_t>(m * esz));
    } else {
      reduce_into(op, dtype, srcs, at(recv, c, dtype), m);
      for (int k = 1; k < n; ++k) copy_elems(at(g.slot((me + k) % n).recv, c, dtype), at(recv, c, dtype), m, dtype);
    }
  }
  if (stream) store_fence();  // the streamed stores are visible before the fence releases
  g.fence(me, what);          // every chunk is in every recv; nobody reuses a buffer before
}

}  // namespace dt::comm::local
