// matmul: every transpose combination, batched and shared-b, alpha/beta, bf16/f16.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>
#include <string>
#include <tuple>

#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

// Reference in double: c[b] = alpha * op(a[b]) op(b[b]) + beta * c[b].
std::vector<double> ref(const std::vector<double>& a, const std::vector<double>& b, std::vector<double> c,
                        int64_t batch, int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool b_batched,
                        double alpha, double beta) {
  for (int64_t bi = 0; bi < batch; ++bi) {
    const double* A = a.data() + bi * m * k;
    const double* B = b.data() + (b_batched ? bi * k * n : 0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += (ta ? A[p * m + i] : A[i * k + p]) * (tb ? B[j * k + p] : B[p * n + j]);
        double& out = c[bi * m * n + i * n + j];
        out = alpha * s + beta * out;
      }
  }
  return c;
}

struct Case {
  int64_t batch, m, n, k;
  bool b_batched;
};

// The stored shapes of a, b and c for a case and transpose pair.
std::tuple<Shape, Shape, Shape> shapes_of(const Case& cs, bool ta, bool tb) {
  Shape sa = ta ? Shape{cs.k, cs.m} : Shape{cs.m, cs.k}, sb = tb ? Shape{cs.n, cs.k} : Shape{cs.k, cs.n};
  Shape sc{cs.m, cs.n};
  if (cs.batch > 1) {
    sa.insert(sa.begin(), cs.batch);
    sc.insert(sc.begin(), cs.batch);
    if (cs.b_batched) sb.insert(sb.begin(), cs.batch);
  }
  return {sa, sb, sc};
}

TEST(Matmul, AllTransposesBatchedAndShared) {
  for (Case cs : {Case{1, 5, 7, 3, false}, Case{3, 130, 17, 33, true}, Case{2, 4, 200, 9, false}, Case{1, 1, 64, 40, false}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        auto [sa, sb, sc] = shapes_of(cs, ta, tb);
        Tensor a = test::randn(sa, DType::F32, 1, "a"), b = test::randn(sb, DType::F32, 1, "b");
        Tensor c = test::randn(sc, DType::F32, 1, "c");
        auto want = ref(test::to_f64(a), test::to_f64(b), test::to_f64(c), cs.batch, cs.m, cs.n, cs.k, ta, tb,
                        cs.b_batched, 0.5, 2.0);
        kernels::matmul(a, b, c, ta, tb, 0.5f, 2.0f);
        test::expect_close(test::to_f64(c), want, 1e-4, 1e-4,
                           "m=" + std::to_string(cs.m) + " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
      }
}

TEST(Matmul, HalfPrecisionComputesInF32) {
  for (DType t : {DType::BF16, DType::F16}) {
    Tensor a = test::randn({33, 20}, t, 2, "a"), b = test::randn({20, 45}, t, 2, "b");
    Tensor c = Tensor::zeros({33, 45}, t);
    kernels::matmul(a, b, c, false, false);
    auto want = ref(test::to_f64(a), test::to_f64(b), std::vector<double>(33 * 45), 1, 33, 45, 20, false, false, false,
                    1, 0);
    test::expect_close(test::to_f64(c), want, 0.05, 1e-2, dtype_name(t));
  }
}

// bf16 on whichever path this build and CPU take (widened to f32, or bf16 x bf16 -> f32 when
// gemm_bf16_native; ctest runs this test once more with DTRAIN_CPU_BF16_GEMM=1): every
// transpose, batched, alpha/beta, and the same bits at any thread count. The reference
// takes the bf16 inputs exactly; the tolerance is the one rounding of the bf16 output.
TEST(Matmul, Bf16EveryTransposeAlphaBetaAndThreadCount) {
  for (Case cs : {Case{1, 300, 70, 33, false}, Case{2, 130, 17, 200, true}, Case{1, 3, 260, 9, false}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        auto [sa, sb, sc] = shapes_of(cs, ta, tb);
        Tensor a = test::randn(sa, DType::BF16, 5, "a"), b = test::randn(sb, DType::BF16, 5, "b");
        Tensor c0 = test::randn(sc, DType::BF16, 5, "c");
        auto want = ref(test::to_f64(a), test::to_f64(b), test::to_f64(c0), cs.batch, cs.m, cs.n, cs.k, ta, tb,
                        cs.b_batched, 0.5, 2.0);
        std::vector<Tensor> got;
        for (int threads : {1, 2, 3}) {
          test::KernelThreads scoped(threads);
          got.push_back(Tensor::uninit(sc, DType::BF16));
          kernels::cast(c0, got.back());
          kernels::matmul(a, b, got.back(), ta, tb, 0.5f, 2.0f);
        }
        std::string what = "m=" + std::to_string(cs.m) + " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
        test::expect_close(test::to_f64(got[0]), want, 1e-2, 2e-2, what);
        EXPECT_TRUE(test::same_bits(got[0], got[1])) << what;
        EXPECT_TRUE(test::same_bits(got[0], got[2])) << what;
      }
}

// The GEMM backend must never start threads of its own (oneDNN's OpenMP team would spin
// after each call and take the core the kernel pool needs): the process's thread count
// after matmuls of every kind equals the count once the pool exists. (ctest runs each test
// in its own process, so this one sees the backend's first call.)
int process_threads() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

TEST(Matmul, GemmBackendStartsNoThreadsOfItsOwn) {
  test::KernelThreads scoped(2);
  Tensor a = test::randn({300, 200}, DType::F32, 6, "a"), b = test::randn({200, 260}, DType::F32, 6, "b");
  Tensor c = Tensor::zeros({300, 260}, DType::F32);
  kernel_pool();  // the pool's workers start here, before any GEMM call of this process
  const int before = process_threads();
  ASSERT_GT(before, 0) << "no Threads: line in /proc/self/status";
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Tensor x = ta ? test::randn({200, 300}, DType::F32, 7, "x") : a;
      Tensor y = tb ? test::randn({260, 200}, DType::F32, 7, "y") : b;
      kernels::matmul(x, y, c, ta, tb);
      Tensor x16 = test::converted(x, DType::BF16), y16 = test::converted(y, DType::BF16);
      Tensor c16 = Tensor::zeros({300, 260}, DType::BF16);
      kernels::matmul(x16, y16, c16, ta, tb);
    }
  EXPECT_EQ(process_threads(), before);
}

TEST(Matmul, ResultDoesNotDependOnThreadCount) {
  // 130x70x33 once differed in the last bits between 1 and 2 threads (the BLAS rounds a row
  // by the size of the call it sits in); the others cover both split directions.
  for (Shape mnk : {Shape{300, 90, 70}, Shape{130, 70, 33}, Shape{257, 300, 64}, Shape{3, 1000, 48}}) {
    Tensor a = test::randn({mnk[0], mnk[2]}, DType::F32, 4, "a"), b = test::randn({mnk[2], mnk[1]}, DType::F32, 4, "b");
    std::vector<Tensor> c;
    for (int threads : {1, 2, 3}) {
      test::KernelThreads scoped(threads);
      c.push_back(Tensor::zeros({mnk[0], mnk[1]}, DType::F32));
      kernels::matmul(a, b, c.back(), false, false);
    }
    EXPECT_TRUE(test::same_bits(c[0], c[1])) << shape_str(mnk);
    EXPECT_TRUE(test::same_bits(c[0], c[2])) << shape_str(mnk);
  }
}

// Up to four rows of C (decoding) take small_m_matmul's streaming path: on AVX-512 CPUs a
// hand-written dot per weight row (f32, and bf16 by vdpbf16ps where the CPU has it), with
// masked tails. Every k tail against the double reference, and each row's bits the same
// whether it is computed alone or beside up to three others, at any thread count: a batch of
// decoding sequences gives each the tokens it would get on its own.
TEST(Matmul, FewRowsEveryTailAndBatchInvariant) {
  for (DType t : {DType::F32, DType::BF16})
    for (int64_t k : {1, 15, 16, 17, 33, 64, 65, 100, 770}) {
      const int64_t n = 300;  // more than one column chunk
      Tensor w = test::randn({n, k}, t, 8, "w"), x = test::randn({4, k}, t, 8, "x");
      Tensor c4 = Tensor::zeros({4, n}, t);
      kernels::matmul(x, w, c4, false, true);
      const std::string what = std::string(dtype_name(t)) + " k=" + std::to_string(k);
      auto want = ref(test::to_f64(x), test::to_f64(w), std::vector<double>(4 * n), 1, 4, n, k, false, true, false, 1, 0);
      const double tol = t == DType::F32 ? 1e-4 : 2e-2;
      test::expect_close(test::to_f64(c4), want, tol, tol, what);
      for (int64_t m = 1; m <= 3; ++m)
        for (int threads : {1, 2}) {
          test::KernelThreads scoped(threads);
          Tensor cm = Tensor::zeros({m, n}, t);
          kernels::matmul(x.slice0(0, m), w, cm, false, true);
          EXPECT_TRUE(test::same_bits(cm, c4.slice0(0, m))) << what << " m=" << m << " threads=" << threads;
        }
    }
}

// A signal taken in the middle of a GEMM must not touch the heap: oneDNN 2.x's generated
// f32 kernels point rsp into a heap workspace while they run, so the kernel wrote the
// signal's frame there (a Ctrl-C in `dtrain train` then aborted in free()). A thread sends
// this one SIGUSR1 every 20 us while it runs f32 and bf16 matmuls; the handler must run
// (between GEMM calls, where the backend lets held signals in), and the heap must stay whole
// (corruption aborts in free(), here or at exit).
std::atomic<int64_t> g_signals_taken{0};
extern "C" void count_signal(int) { g_signals_taken.fetch_add(1, std::memory_order_relaxed); }

TEST(Matmul, SignalsDuringGemmLeaveTheHeapWhole) {
  struct sigaction sa {}, old {};
  sa.sa_handler = count_signal;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  test::KernelThreads scoped(1);  // every GEMM on this thread, the one the signals go to
  Tensor a = test::randn({256, 192}, DType::F32, 9, "a"), b = test::randn({192, 320}, DType::F32, 9, "b");
  Tensor a16 = test::converted(a, DType::BF16), b16 = test::converted(b, DType::BF16);
  std::atomic<bool> done{false};
  const pthread_t target = pthread_self();
  std::thread sender([&] {
    while (!done.load()) {
      pthread_kill(target, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  int64_t rounds = 0;
  while (std::chrono::steady_clock::now() < until || g_signals_taken.load() < 100) {
    Tensor c = Tensor::zeros({256, 320}, DType::F32), c16 = Tensor::zeros({256, 320}, DType::BF16);
    kernels::matmul(a, b, c, false, false);
    kernels::matmul(a16, b16, c16, false, false);
    std::vector<std::string> churn(64, std::string(40, 'x'));  // small heap chunks to corrupt
    ++rounds;
  }
  done = true;
  sender.join();
  sigaction(SIGUSR1, &old, nullptr);
  EXPECT_GT(g_signals_taken.load(), 0);
  EXPECT_GT(rounds, 0);
}

TEST(Matmul, RejectsBadShapesWithNamedArguments) {
  Tensor a = Tensor::zeros({4, 5}, DType::F32), b = Tensor::zeros({6, 7}, DType::F32);
  Tensor c = Tensor::zeros({4, 7}, DType::F32), h = Tensor::zeros({5, 7}, DType::BF16);
  auto msg = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), DT_ERR_INVALID_ARGUMENT);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg([&] { kernels::matmul(a, b, c, false, false); }).find("inner dims"), std::string::npos);
  EXPECT_NE(msg([&] { kernels::matmul(a, h, c, false, false); }).find("b has dtype bf16"), std::string::npos);
  Tensor b2 = Tensor::zeros({5, 7}, DType::F32), c2 = Tensor::zeros({4, 8}, DType::F32);
  EXPECT_NE(msg([&] { kernels::matmul(a, b2, c2, false, false); }).find("c has shape [4, 8]"), std::string::npos);
  Tensor i = Tensor::zeros({4, 5}, DType::I32);
  EXPECT_NE(msg([&] { kernels::matmul(i, b2, c, false, false); }).find("accepted: f32, bf16, f16"), std::string::npos);
  EXPECT_NE(msg([&] { kernels::matmul(Tensor(), b2, c, false, false); }).find("a is an empty tensor"),
            std::string::npos);
}

}  // namespace
}  // namespace dt
