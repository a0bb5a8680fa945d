// The oneDNN backend: f32 GEMM through dnnl_sgemm, bf16 x bf16 -> f32 through a matmul
// primitive (oneDNN's public C API has no bf16 gemm call), both AVX-512 JIT kernels.
//
// Threading. Debian builds oneDNN on OpenMP: a call made from a thread whose OpenMP team
// size is above 1 forks a team, whose threads then spin after the call and take the core
// our pool's other thread needs. Every thread that calls in therefore sets its own team
// size to 1 first (omp_set_num_threads is per thread for threads OpenMP did not create), so
// oneDNN runs on the calling thread only and no OpenMP thread is ever started.
//
// Signals. oneDNN's generated f32 GEMM kernels (2.x and 3.x up to 3.11; oneDNN issue 4845,
// fixed by its pull request 4855) point rsp into a heap workspace while they run, so a signal
// delivered then has its frame written by the kernel over the heap: a Ctrl-C during
// `dtrain train` aborted a few runs in ten with "free(): invalid pointer" (tests/cli's
// interrupt case, and SignalsDuringGemmLeaveTheHeapWhole). Each call therefore holds the
// asynchronous signals (all but the ones a fault raises) on its thread and lets them in
// after: a pending Ctrl-C arrives when the GEMM returns. Two sigprocmask calls per GEMM
// call, 0.6% of an f32 gpt-small step (docs/dependencies.md).
#include <oneapi/dnnl/dnnl.h>

#include <signal.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/cpu_features.h"

extern "C" void omp_set_num_threads(int);

namespace dt::kernels::cpu {
namespace {

void one_openmp_thread() {
  thread_local bool set = false;
  if (!set) {
    omp_set_num_threads(1);
    set = true;
  }
}

void check_dnnl(dnnl_status_t st, const char* what) {
  if (st != dnnl_success) fail(DT_ERR_INTERNAL, std::string("oneDNN: ") + what + " failed (status " + std::to_string(st) + ")");
}

// A beta-scaled C for k == 0, which oneDNN's matmul cannot express.
void scale_c(int64_t m, int64_t n, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
}

// ---- bf16: one matmul primitive per distinct call (shape, strides, alpha, beta). alpha and
// beta enter the key as bit patterns, so that a NaN cannot break the map's ordering.
using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t, uint32_t>;

struct Matmul {
  dnnl_primitive_t prim = nullptr;
  dnnl_memory_desc_t a{}, b{}, c{}, scratch{};
  ~Matmul() {
    if (prim) dnnl_primitive_destroy(prim);
  }
};

dnnl_engine_t cpu_engine() {
  static dnnl_engine_t engine = [] {
    dnnl_engine_t e = nullptr;
    check_dnnl(dnnl_engine_create(&e, dnnl_cpu, 0), "creating the CPU engine");
    return e;
  }();
  return engine;
}

dnnl_memory_desc_t strided(int64_t rows, int64_t cols, bool transposed, int64_t ld, dnnl_data_type_t type) {
  dnnl_memory_desc_t md;
  dnnl_dims_t dims = {rows, cols};
  dnnl_dims_t strides = {transposed ? 1 : ld, transposed ? ld : 1};
  check_dnnl(dnnl_memory_desc_init_by_strides(&md, 2, dims, type, strides), "describing a matrix");
  return md;
}

std::unique_ptr<Matmul> build(const Key& key) {
  auto [ta, tb, m, n, k, lda, ldb, ldc, alpha_bits, beta_bits] = key;
  const float alpha = bits_f32(alpha_bits), beta = bits_f32(beta_bits);
  auto mm = std::make_unique<Matmul>();
  mm->a = strided(m, k, ta, lda, dnnl_bf16);
  mm->b = strided(k, n, tb, ldb, dnnl_bf16);
  mm->c = strided(m, n, false, ldc, dnnl_f32);
  dnnl_matmul_desc_t desc;
  check_dnnl(dnnl_matmul_desc_init(&desc, &mm->a, &mm->b, nullptr, &mm->c), "describing a matmul");
  dnnl_primitive_attr_t attr;
  check_dnnl(dnnl_primitive_attr_create(&attr), "creating attributes");
  std::unique_ptr<dnnl_primitive_attr, decltype(&dnnl_primitive_attr_destroy)> attr_guard(attr, dnnl_primitive_attr_destroy);
  // The scratchpad comes from the caller (per thread), so one primitive runs on many threads.
  check_dnnl(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "setting the scratchpad mode");
  if (alpha != 1.0f) check_dnnl(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha), "setting alpha");
  if (beta != 0.0f) {
    dnnl_post_ops_t ops = nullptr;
    check_dnnl(dnnl_post_ops_create(&ops), "creating post-ops");
    std::unique_ptr<dnnl_post_ops, decltype(&dnnl_post_ops_destroy)> ops_guard(ops, dnnl_post_ops_destroy);
    check_dnnl(dnnl_post_ops_append_sum(ops, beta), "adding beta * C");
    check_dnnl(dnnl_primitive_attr_set_post_ops(attr, ops), "setting post-ops");
  }
  dnnl_primitive_desc_t pd;
  check_dnnl(dnnl_primitive_desc_create(&pd, &desc, attr, cpu_engine(), nullptr), "creating a bf16 matmul");
  mm->scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  dnnl_status_t st = dnnl_primitive_create(&mm->prim, pd);
  dnnl_primitive_desc_destroy(pd);
  check_dnnl(st, "creating a bf16 matmul primitive");
  return mm;
}

// Distinct calls are few in training (fixed blocks of fixed shapes); the cap only bounds a
// workload whose shapes never repeat.
// Shared pointers: a call still running keeps its primitive alive across a clear().
std::shared_ptr<const Matmul> matmul_for(const Key& key) {
  static std::mutex mu;
  static std::map<Key, std::shared_ptr<const Matmul>> cache;
  constexpr size_t kMaxPrimitives = 4096;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= kMaxPrimitives) cache.clear();
  return cache.emplace(key, build(key)).first->second;
}

struct ThreadStream {
  dnnl_stream_t stream = nullptr;
  std::vector<char> scratch;
  ThreadStream() { check_dnnl(dnnl_stream_create(&stream, cpu_engine(), dnnl_stream_default_flags), "creating a stream"); }
  ~ThreadStream() { dnnl_stream_destroy(stream); }
};

dnnl_memory_t wrap(const dnnl_memory_desc_t& md, const void* p) {
  dnnl_memory_t mem;
  check_dnnl(dnnl_memory_create(&mem, &md, cpu_engine(), const_cast<void*>(p)), "wrapping a buffer");
  return mem;
}

// DTRAIN_CPU_MAX_ISA caps oneDNN's kernels as it caps ours; oneDNN takes the cap only before
// its first kernel is generated, so every entry point applies it first.
void apply_isa_cap() {
  static const bool applied = [] {
    const CpuFeatures& f = cpu_features();
    if (!f.capped) return true;
    dnnl_cpu_isa_t isa = dnnl_cpu_isa_avx512_core_amx;
    switch (f.cap) {
      case IsaLevel::Scalar:
      case IsaLevel::Avx2: isa = dnnl_cpu_isa_avx2; break;
      case IsaLevel::Avx512: isa = dnnl_cpu_isa_avx512_core; break;
      case IsaLevel::Avx512Bf16: isa = dnnl_cpu_isa_avx512_core_bf16; break;
      case IsaLevel::Amx: isa = dnnl_cpu_isa_avx512_core_amx; break;
    }
    return dnnl_set_max_cpu_isa(isa) == dnnl_success;
  }();
  (void)applied;
}

// Asynchronous signals held on this thread while it lives (see "Signals" above).
class SignalsHeld {
 public:
  SignalsHeld() {
    static const sigset_t held = [] {
      sigset_t s;
      sigfillset(&s);
      for (int sync : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS}) sigdelset(&s, sync);
      return s;
    }();
    pthread_sigmask(SIG_BLOCK, &held, &before_);
  }
  ~SignalsHeld() { pthread_sigmask(SIG_SETMASK, &before_, nullptr); }
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;

 private:
  sigset_t before_;
};

}  // namespace

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_c(m, n, beta, c, ldc);
  apply_isa_cap();
  one_openmp_thread();
  SignalsHeld held;
  check_dnnl(dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc),
             "sgemm");
}

bool backend_has_bf16_gemm() { return true; }

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
               int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_c(m, n, beta, c, ldc);
  apply_isa_cap();
  one_openmp_thread();
  std::shared_ptr<const Matmul> held =
      matmul_for(Key{trans_a, trans_b, m, n, k, lda, ldb, ldc, f32_bits(alpha), f32_bits(beta)});
  const Matmul& mm = *held;
  SignalsHeld signals;
  thread_local ThreadStream ts;
  size_t scratch_bytes = dnnl_memory_desc_get_size(&mm.scratch);
  if (ts.scratch.size() < scratch_bytes) ts.scratch.resize(scratch_bytes);
  dnnl_memory_t mems[4] = {wrap(mm.a, a), wrap(mm.b, b), wrap(mm.c, c), wrap(mm.scratch, ts.scratch.data())};
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, mems[0]}, {DNNL_ARG_WEIGHTS, mems[1]}, {DNNL_ARG_DST, mems[2]},
                             {DNNL_ARG_SCRATCHPAD, mems[3]}};
  dnnl_status_t st = dnnl_primitive_execute(mm.prim, ts.stream, 4, args);
  if (st == dnnl_success) st = dnnl_stream_wait(ts.stream);
  for (dnnl_memory_t mem : mems) dnnl_memory_destroy(mem);
  check_dnnl(st, "running a bf16 matmul");
}

const char* blas_name() { return "onednn"; }

std::string blas_kernel_isa() {
  apply_isa_cap();
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "isa " + std::to_string(static_cast<int>(dnnl_get_effective_cpu_isa()));
  }
}

}  // namespace dt::kernels::cpu
