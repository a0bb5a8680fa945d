// Shared state of one MPI backend (a "world"): the library's own duplicate of
// MPI_COMM_WORLD, the error state every communicator of the backend reports, and a side
// channel of failure notices, so that a rank that times out or aborts tells its peers at
// once instead of leaving them to time out one by one.
//
// Threads: every MPI call the library makes holds mpi_mutex(), so MPI_THREAD_SERIALIZED is
// all the library needs. We ask for MPI_THREAD_MULTIPLE when we initialize MPI ourselves
// (Open MPI grants it), because a host that initialized MPI itself may call MPI from other
// threads; with a host that granted only SINGLE or FUNNELED, the host must drive the mesh
// from its MPI thread (Mesh::run with one local rank runs on the calling thread).
#pragma once
#include <mpi.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/error.h"

namespace dt::comm::mpi {

// The lock around every MPI call of the library (never destroyed: destructors that run at
// process exit may still take it).
std::mutex& mpi_mutex();

// Initializes MPI if the host has not (MPI_Init_thread, then MPI_Finalize at process exit
// through on_exit, since Open MPI's mpirun reports a process that exits without finalizing
// as failed), and creates the library's datatypes and reduction ops once. Never finalizes an
// MPI the host initialized. MPI_Init_thread waits for every process of the job: past
// `timeout_s` this fails with DT_ERR_TIMEOUT (and so does every later call), and the exit
// then skips MPI. Returns the thread level MPI provides. Takes mpi_mutex().
int ensure_mpi(double timeout_s);
// dt_shutdown: from now on no mpi mesh can be made and live ones fail their calls. If
// ensure_mpi() initialized MPI, finalizes it, as the exit handler would (for hosts whose
// exit skips exit handlers), unless the world is broken (see world_broken()): then MPI is
// left running and DT_ERR_COMM says why, because MPI_Finalize would wait for the peers.
void shutdown_mpi();
// Some World of this process has failed (a timeout, an abort, a peer's failure notice).
// Such a world's peers may be stopped, dead or cut off, and MPI_Finalize waits for all of
// them, so at exit the library then calls MPI_Abort instead (after flushing stdio), which
// makes mpirun end the whole job; and if even that does not return within a few seconds
// (mpirun unreachable), _exit. The exit status is the process's own (1 if it was 0).
bool world_broken();
// MPI is initialized and not yet finalized (destructors check this before any MPI call).
bool mpi_usable();
// "MPI_ERR_TRUNCATE: message truncated"
std::string mpi_error_string(int code);

// f32, i32, i64: MPI's own types. bf16, f16: a 2-byte contiguous type each (MPI has none).
MPI_Datatype mpi_type(DType t);
// MPI's ops where they agree with dt::kernels::reduce (integers; f32 sum and prod), else a
// user-defined op that folds two buffers with kernels::reduce (bf16, f16; f32 max and min,
// which must propagate NaN). Avg maps to Sum: the caller divides.
MPI_Op mpi_op(DType t, ReduceOp op);
// buf[i] = buf[i] / n, in f32 for floating types (rounded once), truncating for integers.
void divide(void* buf, int64_t count, DType t, int n);

// Keeps `p` alive until process exit: memory that MPI may still write into (buffers of a
// request that a failed world can no longer wait for) must never be freed.
void keep_forever(std::shared_ptr<void> p);

class World {
 public:
  World(double timeout_s, bool check_args);  // collective over MPI_COMM_WORLD (MPI_Comm_dup)
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  double timeout_s() const { return timeout_s_; }
  bool check_args() const { return check_args_; }

  // The first failure wins and stays; peers are told at the next poll_locked().
  void fail(dt_status code, const std::string& message);
  // From any thread: every waiter and every later call fails with DT_ERR_ABORTED.
  void abort(const std::string& reason);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  [[noreturn]] void throw_failure() const;
  // Takes the lock and calls poll_locked().
  void check_healthy();
  // With mpi_mutex() held: adopts a failure notice from a peer, sends this rank's own
  // notice if it has one pending, and throws the world's error if there is one.
  void poll_locked();

  // Runs step() under the lock until it returns true, pausing between polls (spin, then
  // yield, then sleep: oversubscribed ranks must not burn the cores their peers need).
  // An Error from step() fails the world. At the deadline (timeout_s from now) fails the
  // world with DT_ERR_TIMEOUT and the message timeout_message() returns.
  void wait(const std::function<bool()>& step, const std::function<std::string()>& timeout_message);

  // Progress of each communicator (Channel) of this world, by creation order, which is
  // the same on every rank: what a status check reports. With mpi_mutex() held.
  struct Progress {
    int64_t issued = 0;    // sequence number of the last call issued
    int64_t finished = 0;  // of the last call finished
  };
  int add_channel_locked();
  Progress& progress_locked(int channel) { return progress_[static_cast<size_t>(channel)]; }
  // The out-of-band status check (mpi_status_check.cc): with mpi_mutex() held, asks every
  // rank in `members` but this one for its progress on `channel` (-1: only whether it
  // answers), over a communicator of its own, and waits at most status_check_s() for the
  // answers. Returns what a timeout message says about them: "rank(s) [1] did not arrive
  // (rank 1 did not answer ...; rank 2 is in seq 7 too)" for the call numbered `seq`.
  std::string status_check_locked(int channel, int64_t seq, const std::vector<int>& members);
  // min(1 s, max(0.2 s, timeout / 4)): long enough for a busy peer, short next to the timeout.
  double status_check_s() const;

 private:
  struct Mailbox;  // notice buffers and their requests; outlives a failed world
  void send_notices_locked();
  void post_notice_recv_locked();
  struct StatusDesk;  // the status check's pending receive; outlives a failed world
  void open_status_desk_locked();
  void close_status_desk_locked();
  void answer_status_asks_locked();  // called by every poll: peers ask while we wait

  MPI_Comm comm_ = MPI_COMM_NULL;  // world dup: creation checks and MPI_Comm_split
  MPI_Comm ctrl_ = MPI_COMM_NULL;  // world dup: failure notices only
  MPI_Comm status_ = MPI_COMM_NULL;  // world dup: status checks only
  int rank_ = 0, size_ = 0, thread_level_ = 0;
  double timeout_s_;
  bool check_args_;
  uint64_t generation_ = 0;  // notices of an older world (same process order) are ignored
  std::shared_ptr<Mailbox> mailbox_;
  std::shared_ptr<StatusDesk> desk_;
  std::vector<Progress> progress_;
  std::atomic<bool> failed_{false};
  mutable std::mutex state_mu_;  // guards the three below
  dt_status code_ = DT_OK;
  std::string message_;
  bool notice_pending_ = false;  // a local failure not yet sent to the peers
};

// "all_reduce on axis dp (seq 7 on rank 0) timed out after 1 s" for a wait that passed its
// deadline (seq 0: a call outside the sequence, such as creating a communicator).
std::string timeout_text(const char* what, const std::string& axis, int64_t seq, int rank, double timeout_s);

}  // namespace dt::comm::mpi
