#include "parallel/grad_buckets.h"

#include <chrono>
#include <cstring>

#include "core/error.h"
#include "core/tensor_copy.h"
#include "core/trace.h"

namespace dt::parallel {

GradBuckets::GradBuckets(const std::vector<nn::ParamList>& ready_order, comm::Communicator& comm, int64_t bucket_bytes)
    : comm_(comm) {
  DT_CHECK(bucket_bytes >= 1, "bucket_bytes = " + std::to_string(bucket_bytes) + "; accepted: >= 1");
  Bucket cur;
  int64_t cur_bytes = 0;
  auto close = [&] {
    if (cur.params.empty()) return;
    const int64_t n = cur.offsets.back() + cur.params.back()->grad.numel();
    cur.flat = Tensor::zeros({n}, cur.params[0]->grad.dtype(), cur.params[0]->grad.device(), MemTag::CommBuffer);
    cur.waiting = cur.params.size();
    buckets_.push_back(std::move(cur));
    cur = Bucket();
    cur_bytes = 0;
  };
  for (const nn::ParamList& group : ready_order)
    for (nn::Parameter* p : group) {
      DT_CHECK(p && p->grad.defined(), "GradBuckets: a parameter without a gradient");
      DT_CHECK(!bucket_of_.count(p), "GradBuckets: parameter \"" + p->name + "\" is announced twice");
      if (!cur.params.empty() && (cur.params[0]->grad.dtype() != p->grad.dtype() || cur_bytes >= bucket_bytes)) close();
      cur.offsets.push_back(cur.params.empty() ? 0 : cur.offsets.back() + cur.params.back()->grad.numel());
      cur.params.push_back(p);
      cur_bytes += static_cast<int64_t>(p->grad.nbytes());
      total_bytes_ += static_cast<int64_t>(p->grad.nbytes());
      bucket_of_[p] = buckets_.size();
    }
  close();
}

GradBuckets::~GradBuckets() {
  for (Bucket& b : buckets_) comm::wait_ignoring_errors(b.work);
}

void GradBuckets::launch(Bucket& b) {
  const size_t elem = dtype_size(b.flat.dtype());
  char* flat = static_cast<char*>(b.flat.raw());
  for (size_t i = 0; i < b.params.size(); ++i)
    copy_bytes(b.flat.device(), flat + b.offsets[i] * static_cast<int64_t>(elem), b.params[i]->grad.raw(),
               b.params[i]->grad.nbytes());
  b.work = comm_.all_reduce_async(b.flat.raw(), b.flat.raw(), b.flat.numel(), b.flat.dtype(), comm::ReduceOp::Sum);
  b.launched_us = trace_enabled() ? trace_now_us() : -1.0;
  ++launched_;
}

void GradBuckets::trace_done(Bucket& b, size_t index) {
  if (b.launched_us < 0) return;
  trace_record("comm", "all_reduce bucket " + std::to_string(index) + " (" + std::to_string(b.flat.nbytes()) + " B)",
               trace_track(trace_current_rank(), true), b.launched_us, trace_now_us());
  b.launched_us = -1.0;
}

void GradBuckets::mark_ready(const nn::ParamList& ready) {
  for (nn::Parameter* p : ready) {
    auto it = bucket_of_.find(p);
    DT_CHECK(it != bucket_of_.end(), "GradBuckets: parameter \"" + p->name + "\" is not in any bucket");
    Bucket& b = buckets_[it->second];
    DT_CHECK(b.waiting > 0, "GradBuckets: parameter \"" + p->name + "\" announced twice in one step");
    if (--b.waiting == 0) launch(b);
  }
  // Tracing: close the spans of buckets that finished while this block ran backward, so
  // the timeline shows when each all-reduce really ended (to a block's resolution).
  if (trace_enabled())
    for (size_t i = 0; i < buckets_.size(); ++i)
      if (buckets_[i].work && buckets_[i].launched_us >= 0 && buckets_[i].work->test()) trace_done(buckets_[i], i);
}

void GradBuckets::finish() {
  launched_early_ = launched_;
  // Launch in bucket order what the hook never announced (e.g. no hook ran), so every rank
  // issues the same collectives in the same order.
  for (Bucket& b : buckets_)
    if (!b.work) launch(b);
  exposed_s_ = 0.0;
  TraceSpan idle("idle", "wait for gradient all-reduce");
  for (size_t bi = 0; bi < buckets_.size(); ++bi) {
    Bucket& b = buckets_[bi];
    const auto t0 = std::chrono::steady_clock::now();
    b.work->wait();
    exposed_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    trace_done(b, bi);
    const size_t elem = dtype_size(b.flat.dtype());
    const char* flat = static_cast<const char*>(b.flat.raw());
    for (size_t i = 0; i < b.params.size(); ++i)
      copy_bytes(b.flat.device(), b.params[i]->grad.raw(), flat + b.offsets[i] * static_cast<int64_t>(elem),
                 b.params[i]->grad.nbytes());
    b.work.reset();
    b.waiting = b.params.size();
  }
  launched_ = 0;
}

}  // namespace dt::parallel
