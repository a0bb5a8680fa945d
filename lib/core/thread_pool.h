// A fixed pool of worker threads that block when idle: on a machine where several ranks
// share two cores, a spinning pool steals the cores the other ranks need. Only right after
// a job do they spin, for a few tens of microseconds (DTRAIN_POOL_SPIN_US, default 50; 0
// turns it off), and the caller likewise before waiting for the last chunk: a futex wake
// costs about as much as a small kernel, and decoding runs ~100 small kernels per token
// back to back (blocking at once doubled batch-1 decode time). An idle pool costs at most
// one spin window per thread before it sleeps.
// parallel_for splits [0, n) into contiguous chunks, one per thread; the caller runs the
// first chunk itself. A parallel_for called from inside a worker runs serially, so
// kernels can nest without deadlock or oversubscription.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dt {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // fn(begin, end) over chunks of at least `grain` items; blocks until all are done.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_chunks_ = 0;
  std::atomic<uint64_t> generation_{0};  // bumped under mu_; read without it while spinning
  std::atomic<int> pending_{0};          // chunks not yet finished by the workers
  std::atomic<bool> stop_{false};
  std::mutex run_mu_;  // one parallel_for at a time per pool
};

// The pool CPU kernels use. Its size is the "threads" setting (dt_configure); changing it
// replaces the pool, so set it before heavy work.
ThreadPool& kernel_pool();
void set_kernel_threads(int threads);
int kernel_threads();

// While alive, kernels called on this thread run serially on it. Rank threads use it: each
// rank is already one of the threads sharing the cores, and ranks must not queue behind
// one another on the shared pool.
class ScopedSerialKernels {
 public:
  ScopedSerialKernels();
  ~ScopedSerialKernels();
  ScopedSerialKernels(const ScopedSerialKernels&) = delete;
  ScopedSerialKernels& operator=(const ScopedSerialKernels&) = delete;

 private:
  bool previous_;
};

// Shorthand for kernel_pool().parallel_for.
inline void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  kernel_pool().parallel_for(n, grain, fn);
}

}  // namespace dt
