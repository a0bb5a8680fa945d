#include "comm/mpi/mpi_world.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

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

bool g_started_here = false;  // ensure_mpi() initialized MPI, so the library finalizes it

void finalize_at_exit() {
  // No lock: at exit no library thread may still be inside MPI, and a thread that died
  // holding the lock must not hang the exit.
  if (g_started_here && mpi_usable()) MPI_Finalize();
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

int ensure_mpi() {
  std::lock_guard<std::mutex> lk(mpi_mutex());
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (finalized) fail(DT_ERR_COMM, "backend \"mpi\": MPI was already finalized in this process; it cannot restart");
  if (!inited) {
    promote_mpi_to_global();
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) fail(DT_ERR_COMM, "backend \"mpi\": MPI_Init_thread failed: " + mpi_error_string(rc));
    g_started_here = true;
    std::atexit(finalize_at_exit);  // we started it, so we end it (see header)
  }
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  init_types_locked();
  return level;
}

void finalize_if_started_here() {
  std::lock_guard<std::mutex> lk(mpi_mutex());
  if (g_started_here && mpi_usable()) MPI_Finalize();
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

std::string timeout_text(const char* what, const std::string& axis, double timeout_s) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.3g", timeout_s);
  return std::string(what) + " on axis " + axis + " timed out after " + secs +
         " s; MPI cannot tell which ranks are missing (a peer did not call it, called another "
         "operation first, or is slower than the timeout)";
}

World::World(double timeout_s, bool check_args)
    : timeout_s_(timeout_s), check_args_(check_args), mailbox_(std::make_shared<Mailbox>()) {
  thread_level_ = ensure_mpi();
  std::lock_guard<std::mutex> lk(mpi_mutex());
  static uint64_t worlds = 0;  // every rank creates its worlds in the same order (SPMD)
  generation_ = ++worlds;
  // MPI_COMM_WORLD keeps the host's error handler: a failing dup is reported the host's way.
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_dup(comm_, &ctrl_);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(ctrl_, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS)
    dt::fail(DT_ERR_COMM, "backend \"mpi\": duplicating MPI_COMM_WORLD failed: " + mpi_error_string(rc));
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  post_notice_recv_locked();
}

World::~World() {
  if (!mpi_usable()) return;
  std::lock_guard<std::mutex> lk(mpi_mutex());
  if (failed()) {
    // Requests of a failed world may never complete: their buffers live on, and its
    // communicators are never freed, so no later communicator can reuse their context
    // ids while stale messages may still arrive for them.
    keep_forever(mailbox_);
    return;
  }
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
  failed_.store(true, std::memory_order_release);
}

void World::abort(const std::string& reason) {
  fail(DT_ERR_ABORTED, "aborted: " + reason);
  // Tell the peers now if MPI allows a second thread in; else the owner's next poll does.
  if (thread_level_ != MPI_THREAD_MULTIPLE) return;
  std::unique_lock<std::mutex> lk(mpi_mutex(), std::try_to_lock);
  if (lk.owns_lock() && mpi_usable()) send_notices_locked();
}

void World::throw_failure() const {
  std::lock_guard<std::mutex> lk(state_mu_);
  throw Error(code_, message_);
}

void World::check_healthy() {
  if (!mpi_usable()) {  // the host finalized MPI under a live mesh: no MPI call may follow
    fail(DT_ERR_COMM, "backend \"mpi\": MPI was finalized while the mesh was alive");
    throw_failure();
  }
  std::lock_guard<std::mutex> lk(mpi_mutex());
  poll_locked();
}

void World::poll_locked() {
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
