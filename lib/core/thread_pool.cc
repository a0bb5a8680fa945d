#include "core/thread_pool.h"

#include <algorithm>
#include <memory>

namespace dt {
namespace {
thread_local bool t_in_worker = false;
}

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
    pending_ = chunks - 1;
    ++generation_;
  }
  wake_.notify_all();
  t_in_worker = true;  // nested calls from the caller's own chunk run serially too
  run_chunk(fn, n, chunks, 0);
  t_in_worker = false;
  std::unique_lock<std::mutex> lk(mu_);
  done_.wait(lk, [&] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  t_in_worker = true;
  uint64_t seen = 0;
  for (;;) {
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
    lk.lock();
    if (--pending_ == 0) done_.notify_one();
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
