#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "core/env.h"

namespace dt {
namespace {
thread_local bool t_in_worker = false;

int64_t spin_ns() {
  static const int64_t ns = env_int("DTRAIN_POOL_SPIN_US", 50, 0, 100000) * 1000;
  return ns;
}

// Busy-waits until done() or the spin window passes; true if done() held.
template <class Done> bool spin_until(Done done) {
  const int64_t window = spin_ns();
  if (window == 0) return done();
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(window);
  for (int i = 0;; ++i) {
    if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 63 && std::chrono::steady_clock::now() >= until) return done();
  }
}
}  // namespace

ScopedSerialKernels::ScopedSerialKernels() : previous_(t_in_worker) { t_in_worker = true; }
ScopedSerialKernels::~ScopedSerialKernels() { t_in_worker = previous_; }

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(1, threads); ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

static void run_chunk(const std::function<void(int64_t, int64_t)>& fn, int64_t n, int chunks, int index) {
  int64_t begin = n * index / chunks, end = n * (index + 1) / chunks;
  if (begin < end) fn(begin, end);
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int64_t by_grain = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
  int chunks = static_cast<int>(std::min<int64_t>(size(), by_grain));
  if (chunks <= 1 || t_in_worker) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> serial(run_mu_);
  {
    std::lock_guard<std::mutex> g(mu_);
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    pending_.store(chunks - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  t_in_worker = true;  // nested calls from the caller's own chunk run serially too
  run_chunk(fn, n, chunks, 0);
  t_in_worker = false;
  if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock<std::mutex> lk(mu_);
    done_.wait(lk, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  std::lock_guard<std::mutex> g(mu_);
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  t_in_worker = true;
  uint64_t seen = 0;
  for (;;) {
    spin_until([&] { return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen; });
    std::unique_lock<std::mutex> lk(mu_);
    wake_.wait(lk, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= job_chunks_) continue;
    const auto* fn = job_;
    int64_t n = job_n_;
    int chunks = job_chunks_;
    lk.unlock();
    run_chunk(*fn, n, chunks, index);
    // The caller may be spinning on pending_ or asleep on done_: taking mu_ before the
    // notify means it is either still to check pending_ or already waiting.
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      lk.lock();
      lk.unlock();
      done_.notify_one();
    }
  }
}

namespace {
std::mutex g_pool_mu;
std::unique_ptr<ThreadPool> g_pool;
int g_threads = 0;

int default_threads() { return std::max(1u, std::thread::hardware_concurrency()); }
}  // namespace

ThreadPool& kernel_pool() {
  std::lock_guard<std::mutex> g(g_pool_mu);
  if (!g_pool) {
    if (g_threads <= 0) g_threads = default_threads();
    g_pool = std::make_unique<ThreadPool>(g_threads);
  }
  return *g_pool;
}

void set_kernel_threads(int threads) {
  std::lock_guard<std::mutex> g(g_pool_mu);
  if (threads == g_threads && g_pool) return;
  g_threads = threads;
  g_pool.reset();
}

int kernel_threads() {
  std::lock_guard<std::mutex> g(g_pool_mu);
  return g_threads > 0 ? g_threads : default_threads();
}

}  // namespace dt
