#include "comm/mesh.h"

#include <atomic>
#include <exception>
#include <system_error>

#include "core/error.h"
#include "core/rank_scope.h"

namespace dt::comm {
namespace {
const char* const kAxisNames[kNumAxes] = {"dp", "pp", "ep", "cp", "tp"};
}

const char* axis_name(int axis) { return axis >= 0 && axis < kNumAxes ? kAxisNames[axis] : "unknown"; }

// A persistent thread per local rank that runs one job at a time and blocks when idle.
struct Mesh::RankThread {
  std::mutex mu;
  std::condition_variable cv;
  std::function<void()> job;
  bool has_job = false, stop = false;
  std::thread thread;

  RankThread() {
    thread = std::thread([this] {
      std::unique_lock<std::mutex> lk(mu);
      for (;;) {
        cv.wait(lk, [&] { return stop || has_job; });
        if (!has_job) return;
        auto j = std::move(job);
        lk.unlock();
        j();
        lk.lock();
        has_job = false;
        cv.notify_all();
      }
    });
  }
  void start(std::function<void()> j) {
    std::lock_guard<std::mutex> g(mu);
    job = std::move(j);
    has_job = true;
    cv.notify_all();
  }
  void join_job() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return !has_job; });
  }
  ~RankThread() {
    {
      std::lock_guard<std::mutex> g(mu);
      stop = true;
    }
    cv.notify_all();
    thread.join();
  }
};

std::shared_ptr<Mesh> Mesh::create(const std::string& backend, const Coords& axes, const BackendOptions& options) {
  int product = 1;
  std::string shape;
  const bool infer_dp = axes[kDp] == 0;
  for (int a = infer_dp ? 1 : 0; a < kNumAxes; ++a) {
    DT_CHECK(axes[a] >= 1, std::string("axis ") + kAxisNames[a] + " = " + std::to_string(axes[a]) + "; accepted: >= 1");
    DT_CHECK(product <= (1 << 20) / axes[a], "the mesh axes multiply to more than 2^20 ranks");
    product *= axes[a];
    shape += std::string(shape.empty() ? "" : " x ") + kAxisNames[a] + "=" + std::to_string(axes[a]);
  }
  DT_CHECK(options.timeout_s > 0, "timeout = " + std::to_string(options.timeout_s) + " s; accepted: > 0");
  std::shared_ptr<Mesh> m(new Mesh());
  BackendOptions o = options;
  if (backend == "local") {
    if (o.world_size == 0) o.world_size = product;
    DT_CHECK(o.world_size >= 1 && o.world_size <= 1024,
             "world_size = " + std::to_string(o.world_size) + "; accepted for backend \"local\": 1 to 1024");
    m->backend_ = make_local_backend(o);
  } else if (backend == "mpi") {
    m->backend_ = make_mpi_backend(o);
  } else {
    invalid("backend \"" + backend + "\" is unknown; accepted: \"local\", \"mpi\"");
  }
  m->world_ = m->backend_->world_size();
  Coords sizes = axes;
  if (infer_dp) {
    DT_CHECK(m->world_ % product == 0, "world size " + std::to_string(m->world_) +
                                           " is not a multiple of the product of the mesh axes other than dp " +
                                           std::to_string(product) + " (" + shape + ")");
    sizes[kDp] = m->world_ / product;
    product = m->world_;
  }
  DT_CHECK(product == m->world_, "world size " + std::to_string(m->world_) + " != product of the mesh axes " +
                                     std::to_string(product) + " (" + shape + ")");
  m->sizes_ = sizes;
  m->local_ = m->backend_->local_ranks();
  m->timeout_s_ = o.timeout_s;
  // MPI creates groups collectively over the whole world (MPI_Comm_split): make the
  // world's and every single axis's communicator now, in one order on every rank.
  if (backend == "mpi")
    for (const char* axis : {"world", "dp", "pp", "ep", "cp", "tp"}) m->comm(m->local_[0], axis);
  return m;
}

Mesh::~Mesh() {
  device_comms_.clear();  // before the rank threads and the backend that bootstrapped them
  threads_.clear();
}

Coords Mesh::coords(int rank) const {
  DT_CHECK(rank >= 0 && rank < world_, "rank = " + std::to_string(rank) + "; accepted: 0 to " + std::to_string(world_ - 1));
  Coords c{};
  for (int a = kNumAxes - 1; a >= 0; --a) {
    c[a] = rank % sizes_[a];
    rank /= sizes_[a];
  }
  return c;
}

int Mesh::rank_of(const Coords& c) const {
  int r = 0;
  for (int a = 0; a < kNumAxes; ++a) r = r * sizes_[a] + c[a];
  return r;
}

std::string Mesh::canonical_axes(const std::string& axes) {
  if (axes == "world") return axes;
  bool in[kNumAxes] = {};
  size_t pos = 0;
  while (pos <= axes.size()) {
    size_t end = axes.find('*', pos);
    if (end == std::string::npos) end = axes.size();
    std::string name = axes.substr(pos, end - pos);
    int a = 0;
    while (a < kNumAxes && name != kAxisNames[a]) ++a;
    DT_CHECK(a < kNumAxes, "axis \"" + name + "\" in \"" + axes +
                               "\" is unknown; accepted: dp, pp, ep, cp, tp, products like \"dp*cp\", or \"world\"");
    in[a] = true;
    pos = end + 1;
  }
  std::string out;
  for (int a = 0; a < kNumAxes; ++a)
    if (in[a]) out += (out.empty() ? "" : "*") + std::string(kAxisNames[a]);
  return out;
}

std::vector<int> Mesh::group_members(int rank, const std::string& axes) const {
  std::string canon = canonical_axes(axes);
  Coords me = coords(rank);
  std::vector<int> members;
  for (int r = 0; r < world_; ++r) {
    Coords c = coords(r);
    bool same = true;
    for (int a = 0; a < kNumAxes && canon != "world"; ++a)
      if (canon.find(kAxisNames[a]) == std::string::npos && c[a] != me[a]) same = false;
    if (same) members.push_back(r);
  }
  return members;
}

Communicator& Mesh::comm(int rank, const std::string& axes) {
  std::string canon = canonical_axes(axes);
  bool local = false;
  for (int r : local_) local = local || r == rank;
  DT_CHECK(local, "rank " + std::to_string(rank) + " is not driven by this process");
  std::lock_guard<std::mutex> g(comm_mu_);
  auto& slot = comms_[{rank, canon}];
  if (!slot) {
    slot = backend_->make_comm(rank, canon, group_members(rank, canon));
    auto& history = histories_[rank];
    if (!history) history = std::make_shared<CollHistory>();
    slot->set_history(history);
  }
  return *slot;
}

std::string Mesh::history_json(int rank) {
  std::lock_guard<std::mutex> g(comm_mu_);
  auto it = histories_.find(rank);
  return it == histories_.end() ? "[]" : it->second->json();
}

std::vector<std::pair<int, std::string>> Mesh::created_comms() {
  std::lock_guard<std::mutex> g(comm_mu_);
  std::vector<std::pair<int, std::string>> keys;
  for (auto& [key, c] : comms_)
    if (c) keys.push_back(key);
  return keys;
}

Communicator* Mesh::find_comm(int rank, const std::string& axes) {
  std::string canon = canonical_axes(axes);
  std::lock_guard<std::mutex> g(comm_mu_);
  auto it = comms_.find({rank, canon});
  return it == comms_.end() ? nullptr : it->second.get();
}

void Mesh::run(const std::function<void(int, int)>& fn) {
  backend_->check_healthy();
  const int n = static_cast<int>(local_.size());
  std::vector<std::exception_ptr> errors(n);
  std::atomic<int> first{-1};
  // Every rank is marked present before any starts: a rank that set only its own flag
  // could enter a collective while a peer not yet scheduled still carried the "departed"
  // mark of the previous run(), and fail with a spurious "returned without joining".
  for (int rank : local_) backend_->set_departed(rank, false);
  auto body = [&](int i) {
    int rank = local_[i];
    try {
      ScopedRank scope(rank);  // its memory and spans are this rank's
      fn(i, rank);
    } catch (const std::exception& e) {
      errors[i] = std::current_exception();
      int none = -1;
      first.compare_exchange_strong(none, i);
      backend_->abort("rank " + std::to_string(rank) + " failed: " + e.what());
    }
    backend_->set_departed(rank, true);
  };
  if (n == 1) {
    body(0);
  } else {
    while (static_cast<int>(threads_.size()) < n) {
      try {
        threads_.push_back(std::make_unique<RankThread>());
      } catch (const std::system_error& e) {  // EAGAIN: no memory for its stack, or too many threads
        fail(DT_ERR_OUT_OF_MEMORY, "cannot start the thread of local rank " + std::to_string(threads_.size()) + " of " +
                                       std::to_string(n) + " (" + e.what() + "): the process is at its thread or memory "
                                       "limit (ulimit -v, -u or a cgroup); lower the ranks (dp x pp x tp) or raise the limit");
      }
    }
    for (int i = 0; i < n; ++i) threads_[i]->start([&, i] { body(i); });
    for (int i = 0; i < n; ++i) threads_[i]->join_job();
  }
  // The rank that failed first is the one to report; the others only saw its consequence.
  if (first.load() >= 0) std::rethrow_exception(errors[first.load()]);
}

}  // namespace dt::comm
