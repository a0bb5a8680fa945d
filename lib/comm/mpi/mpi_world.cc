#include "comm/mpi/mpi_world.h"

#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <unistd.h>

namespace dt::comm::mpi {

void init_types_locked();  // mpi_types.cc

namespace {

constexpr int kNoticeTag = 1;

// What a failing rank sends each peer on the notice channel.
struct Notice {
  uint64_t generation = 0;
  int32_t code = 0;
  int32_t origin = 0;
  char text[496] = {};
};

bool g_started_here = false;          // ensure_mpi() initialized MPI, so the library ends it
std::atomic<bool> g_broken{false};     // some World failed: see world_broken()
std::atomic<bool> g_shut_down{false};  // dt_shutdown was called: no more MPI from the library
std::atomic<bool> g_init_stuck{false};  // MPI_Init_thread passed its deadline on its thread

std::string init_timeout_text(double timeout_s) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.3g", timeout_s);
  return std::string("backend \"mpi\": MPI_Init did not complete within ") + secs +
         " s: some process of the job has not started MPI (stopped, dead, cut off, or still busy before its "
         "first mpi mesh)";
}

constexpr double kAbortGraceS = 5;  // how long MPI_Abort may take before _exit ends the process

// Ends MPI at process exit (registered when the library initializes it). A healthy world
// finalizes, as mpirun expects. A broken one must not: MPI_Finalize waits for every peer,
// and one stopped or unreachable peer would keep this process, and so the job, alive
// forever. MPI_Abort makes mpirun kill every rank instead.
void end_mpi_at_exit(int status, void*) {
  // No lock: at exit no library thread may still be inside MPI, and a thread that died
  // holding the lock must not hang the exit.
  if (g_init_stuck.load()) {
    // A thread is still inside MPI_Init: no MPI call can be made, and the rest of exit()
    // would tear down what it uses. Ending now, unfinalized, makes mpirun end the job.
    std::fflush(nullptr);
    _exit(status != 0 ? status : 1);
  }
  if (!g_started_here || !mpi_usable()) return;
  if (!g_broken.load()) {
    MPI_Finalize();
    return;
  }
  const int code = status != 0 ? status : 1;
  std::fflush(nullptr);  // MPI_Abort ends the process before exit() would flush stdio
  // MPI_Abort asks mpirun to end the job and waits for its answer; an mpirun that is gone
  // or cut off never answers.
  std::thread([code] {
    std::this_thread::sleep_for(std::chrono::duration<double>(kAbortGraceS));
    _exit(code);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, code);
  _exit(code);
}

// The pause between two polls of a wait. The first polls spin (MPI_Test drives progress,
// and a peer on another core answers in microseconds); then yield; then sleep, growing to
// 1 ms, because with 4 ranks on 2 cores a spinning rank steals the core of the late one.
void pause_after(int poll) {
  if (poll < 50) return;
  if (poll < 100) {
    std::this_thread::yield();
    return;
  }
  int us = std::min(1000, 20 << std::min(6, (poll - 100) / 20));
  std::this_thread::sleep_for(std::chrono::microseconds(us));
}

// MPI_Comm_dup, which blocks until every rank of `from` calls it, bounded by the mesh's
// timeout: a rank stopped or dead before it makes its mesh must not hang its peers here,
// where no status check can run yet. On the deadline the world is broken (so the exit
// aborts) and the dup stays pending forever, writing into memory that is kept.
int dup_until(MPI_Comm from, MPI_Comm* out, std::chrono::steady_clock::time_point deadline, double timeout_s) {
  auto result = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Comm_idup(from, result.get(), &req);
  for (int poll = 0, done = 0; rc == MPI_SUCCESS && !done; ++poll) {
    rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done || rc != MPI_SUCCESS) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      keep_forever(result);
      g_broken = true;
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.3g", timeout_s);
      fail(DT_ERR_TIMEOUT, std::string("backend \"mpi\": creating the mesh timed out after ") + secs +
                               " s: some rank of the MPI world did not create its mesh (stopped, dead, cut off, or "
                               "still busy before it)");
    }
    pause_after(poll);
  }
  *out = *result;
  return rc;
}

}  // namespace

struct World::Mailbox {
  Notice in, out;
  MPI_Request in_req = MPI_REQUEST_NULL;
};

std::mutex& mpi_mutex() {
  static std::mutex* mu = new std::mutex;  // never destroyed (see header)
  return *mu;
}

bool mpi_usable() {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  return inited && !finalized;
}

// Open MPI loads its transports as plugins (dlopen) that resolve symbols of libmpi and
// libopen-pal from the global namespace. A C or C++ program linked to libdtrain has them
// there; a Python, Java or Go host that loads libdtrain (or its binding) privately does
// not, and MPI_Init then fails in a plugin. Re-opening libmpi, already mapped, with
// RTLD_GLOBAL puts it in the global namespace before MPI starts, for every host at once.
static void promote_mpi_to_global() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &info) == 0 || info.dli_fname == nullptr) return;
  // RTLD_NOLOAD: never a second copy, only a change of visibility; the handle is kept.
  dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

int ensure_mpi(double timeout_s) {
  std::lock_guard<std::mutex> lk(mpi_mutex());
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (g_shut_down.load())
    fail(DT_ERR_COMM, "backend \"mpi\": dt_shutdown was called in this process; MPI cannot be used after it");
  if (finalized) fail(DT_ERR_COMM, "backend \"mpi\": MPI was already finalized in this process; it cannot restart");
  if (g_init_stuck.load()) fail(DT_ERR_TIMEOUT, init_timeout_text(timeout_s));
  if (!inited) {
    promote_mpi_to_global();
    static bool registered = false;
    if (!registered) on_exit(end_mpi_at_exit, nullptr);  // we start it, so we end it; on_exit passes the status
    registered = true;
    // MPI_Init_thread returns once every process of the job has started MPI: a peer stopped
    // or dead before that would block it forever, out of reach of any deadline. So it runs
    // on a thread of its own, and this one gives up at the mesh's timeout.
    struct Init {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      int rc = MPI_SUCCESS;
    };
    auto init = std::make_shared<Init>();
    std::thread([init] {
      int provided = 0;
      int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
      std::lock_guard<std::mutex> g(init->mu);
      init->rc = rc;
      init->done = true;
      init->cv.notify_all();
    }).detach();
    std::unique_lock<std::mutex> g(init->mu);
    if (!init->cv.wait_for(g, std::chrono::duration<double>(timeout_s), [&] { return init->done; })) {
      g_init_stuck = true;  // the exit skips MPI (see end_mpi_at_exit)
      fail(DT_ERR_TIMEOUT, init_timeout_text(timeout_s));
    }
    if (init->rc != MPI_SUCCESS)
      fail(DT_ERR_COMM, "backend \"mpi\": MPI_Init_thread failed: " + mpi_error_string(init->rc));
    g_started_here = true;
  }
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  init_types_locked();
  return level;
}

bool world_broken() { return g_broken.load(); }

void shutdown_mpi() {
  std::lock_guard<std::mutex> lk(mpi_mutex());
  g_shut_down = true;
  if (!g_started_here || !mpi_usable()) return;
  if (g_broken.load())
    fail(DT_ERR_COMM, "dt_shutdown: an mpi mesh of this process failed, so its peers may be stopped or gone and "
                      "MPI_Finalize would wait for them; MPI was left running: end the process (mpirun then ends "
                      "the job)");
  MPI_Finalize();
}

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING + 1] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

void keep_forever(std::shared_ptr<void> p) {
  static std::mutex* mu = new std::mutex;
  static auto* kept = new std::vector<std::shared_ptr<void>>;  // reachable: not a leak report
  std::lock_guard<std::mutex> lk(*mu);
  kept->push_back(std::move(p));
}

std::string timeout_text(const char* what, const std::string& axis, int64_t seq, int rank, double timeout_s) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.3g", timeout_s);
  std::string where = std::string(what) + " on axis " + axis;
  if (seq > 0) where += " (seq " + std::to_string(seq) + " on rank " + std::to_string(rank) + ")";
  return where + " timed out after " + secs + " s";
}

World::World(double timeout_s, bool check_args)
    : timeout_s_(timeout_s), check_args_(check_args), mailbox_(std::make_shared<Mailbox>()) {
  thread_level_ = ensure_mpi(timeout_s);
  std::lock_guard<std::mutex> lk(mpi_mutex());
  static uint64_t worlds = 0;  // every rank creates its worlds in the same order (SPMD)
  generation_ = ++worlds;
  // MPI_COMM_WORLD keeps the host's error handler: a failing dup is reported the host's way.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                              std::chrono::duration<double>(timeout_s_));
  int rc = dup_until(MPI_COMM_WORLD, &comm_, deadline, timeout_s_);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  if (rc == MPI_SUCCESS) rc = dup_until(comm_, &ctrl_, deadline, timeout_s_);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(ctrl_, MPI_ERRORS_RETURN);
  if (rc == MPI_SUCCESS) rc = dup_until(comm_, &status_, deadline, timeout_s_);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(status_, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS)
    dt::fail(DT_ERR_COMM, "backend \"mpi\": duplicating MPI_COMM_WORLD failed: " + mpi_error_string(rc));
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  post_notice_recv_locked();
  open_status_desk_locked();
}

World::~World() {
  if (!mpi_usable()) return;
  std::lock_guard<std::mutex> lk(mpi_mutex());
  if (failed()) {
    // Requests of a failed world may never complete: their buffers live on, and its
    // communicators are never freed, so no later communicator can reuse their context
    // ids while stale messages may still arrive for them.
    keep_forever(mailbox_);
    keep_forever(desk_);
    return;
  }
  close_status_desk_locked();
  MPI_Comm_free(&status_);
  if (mailbox_->in_req != MPI_REQUEST_NULL) {
    MPI_Cancel(&mailbox_->in_req);
    MPI_Wait(&mailbox_->in_req, MPI_STATUS_IGNORE);
  }
  MPI_Comm_free(&ctrl_);
  MPI_Comm_free(&comm_);
}

void World::post_notice_recv_locked() {
  Mailbox& mb = *mailbox_;
  if (MPI_Irecv(&mb.in, sizeof(Notice), MPI_BYTE, MPI_ANY_SOURCE, kNoticeTag, ctrl_, &mb.in_req) != MPI_SUCCESS)
    mb.in_req = MPI_REQUEST_NULL;  // no notices then: peers' failures arrive as timeouts
}

void World::fail(dt_status code, const std::string& message) {
  std::lock_guard<std::mutex> lk(state_mu_);
  if (failed()) return;
  code_ = code;
  message_ = message;
  notice_pending_ = true;
  g_broken = true;
  failed_.store(true, std::memory_order_release);
}

void World::abort(const std::string& reason) {
  fail(DT_ERR_ABORTED, "aborted: " + reason);
  // Tell the peers now if MPI allows a second thread in; else the owner's next poll does.
  if (thread_level_ != MPI_THREAD_MULTIPLE) return;
  std::unique_lock<std::mutex> lk(mpi_mutex(), std::try_to_lock);
  if (lk.owns_lock() && mpi_usable() && !g_shut_down.load()) send_notices_locked();
}

void World::throw_failure() const {
  std::lock_guard<std::mutex> lk(state_mu_);
  throw Error(code_, message_);
}

void World::check_healthy() {
  std::lock_guard<std::mutex> lk(mpi_mutex());
  poll_locked();
}

void World::poll_locked() {
  // After dt_shutdown, or a host's MPI_Finalize under a live mesh, no MPI call may follow.
  if (g_shut_down.load() || !mpi_usable()) {
    fail(DT_ERR_COMM, g_shut_down.load() ? "backend \"mpi\": dt_shutdown was called while the mesh was alive"
                                         : "backend \"mpi\": MPI was finalized while the mesh was alive");
    throw_failure();
  }
  answer_status_asks_locked();
  Mailbox& mb = *mailbox_;
  while (!failed() && mb.in_req != MPI_REQUEST_NULL) {
    int flag = 0;
    if (MPI_Test(&mb.in_req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) break;
    if (mb.in.generation != generation_) {  // from an older world of this process
      post_notice_recv_locked();
      continue;
    }
    mb.in.text[sizeof mb.in.text - 1] = '\0';
    std::lock_guard<std::mutex> lk(state_mu_);
    if (failed()) break;
    code_ = static_cast<dt_status>(mb.in.code);
    message_ = "rank " + std::to_string(mb.in.origin) + " failed: " + mb.in.text;
    g_broken = true;
    failed_.store(true, std::memory_order_release);  // the origin has told every rank
  }
  if (!failed()) return;
  send_notices_locked();
  throw_failure();
}

void World::send_notices_locked() {
  Mailbox& mb = *mailbox_;
  {
    std::lock_guard<std::mutex> lk(state_mu_);
    if (!notice_pending_) return;
    notice_pending_ = false;
    mb.out.generation = generation_;
    mb.out.code = code_;
    mb.out.origin = rank_;
    std::snprintf(mb.out.text, sizeof mb.out.text, "%s", message_.c_str());
  }
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    MPI_Request r = MPI_REQUEST_NULL;
    // Never waited for: a freed send request still completes, and mb.out lives on.
    if (MPI_Isend(&mb.out, sizeof(Notice), MPI_BYTE, p, kNoticeTag, ctrl_, &r) == MPI_SUCCESS)
      MPI_Request_free(&r);
  }
}

void World::wait(const std::function<bool()>& step, const std::function<std::string()>& timeout_message) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                          std::chrono::duration<double>(timeout_s_));
  for (int poll = 0;; ++poll) {
    {
      std::lock_guard<std::mutex> lk(mpi_mutex());
      poll_locked();
      bool done = false;
      try {
        done = step();
      } catch (const Error& e) {
        fail(e.code(), e.what());
      }
      if (!failed()) {
        if (done) return;
        if (std::chrono::steady_clock::now() >= deadline) fail(DT_ERR_TIMEOUT, timeout_message());
      }
      if (failed()) poll_locked();  // tells the peers, then throws
    }
    pause_after(poll);
  }
}

}  // namespace dt::comm::mpi
