// The mpi backend: one rank per process, started by mpirun (DESIGN §1).
//
// Groups are MPI_Comm_split of the library's world communicator: collective over the
// whole world, so every rank must create the same groups in the same order (the Mesh
// creates the world's and every single axis's communicator when it is made; a product of
// axes such as "dp*cp" is created on first use, and every rank must then use it first at
// the same point of the program). Before splitting, ranks all-gather what they are asking
// for, under the deadline: a rank that never asks is a DT_ERR_TIMEOUT instead of a hang in
// MPI_Comm_split, and ranks asking for different axes is a DT_ERR_COMM instead of wrong
// groups.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "comm/backend.h"
#include "comm/mpi/mpi_comm.h"

namespace dt::comm {
namespace {

using mpi::World;

struct Ask {  // what one rank asks make_comm for
  char axes[40];
  int32_t color;  // the group's first member: one value per group
};

class MpiBackend : public Backend {
 public:
  explicit MpiBackend(const BackendOptions& o) {
    DT_CHECK(o.timeout_s > 0, "timeout = " + std::to_string(o.timeout_s) + " s; accepted: > 0");
    mpi::ensure_mpi(o.timeout_s);
    int size = 0;
    {
      std::lock_guard<std::mutex> lk(mpi::mpi_mutex());
      MPI_Comm_size(MPI_COMM_WORLD, &size);
    }
    DT_CHECK(o.world_size == 0 || o.world_size == size,
             "world_size = " + std::to_string(o.world_size) + " but the MPI world has " + std::to_string(size) +
                 " ranks (mpirun -np " + std::to_string(size) +
                 "); accepted for backend \"mpi\": 0 (the MPI world) or " + std::to_string(size));
    world_ = std::make_shared<World>(o.timeout_s, o.check_args);
  }

  const char* name() const override { return "mpi"; }
  int world_size() const override { return world_->size(); }
  std::vector<int> local_ranks() const override { return {world_->rank()}; }

  std::unique_ptr<Communicator> make_comm(int rank, const std::string& axes, const std::vector<int>& members) override {
    DT_CHECK(rank == world_->rank(), "rank " + std::to_string(rank) + " is not driven by this process (rank " +
                                         std::to_string(world_->rank()) + ")");
    auto it = std::find(members.begin(), members.end(), rank);
    DT_ASSERT(it != members.end());
    const int key = static_cast<int>(it - members.begin());
    agree_on_group(axes, members);
    MPI_Comm comm = MPI_COMM_NULL;
    {
      std::lock_guard<std::mutex> lk(mpi::mpi_mutex());
      world_->poll_locked();
      int rc = MPI_Comm_split(world_->comm(), members[0], key, &comm);
      if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
      if (rc != MPI_SUCCESS) {
        world_->fail(DT_ERR_COMM, "creating the communicator of axes " + axes + ": MPI_Comm_split: " +
                                      mpi::mpi_error_string(rc));
        world_->poll_locked();
      }
      int got_rank = -1, got_size = 0;
      MPI_Comm_rank(comm, &got_rank);
      MPI_Comm_size(comm, &got_size);
      DT_ASSERT(got_rank == key && got_size == static_cast<int>(members.size()));
    }
    return std::make_unique<mpi::MpiComm>(std::make_shared<mpi::Channel>(world_, comm, axes, members));
  }

  void abort(const std::string& reason) override { world_->abort(reason); }
  // MPI cannot see a peer's host work return; a peer that never joins shows as a timeout.
  void set_departed(int, bool) override {}
  void check_healthy() override { world_->check_healthy(); }

 private:
  // All-gathers every rank's (axes, group) with a deadline and checks they fit together.
  void agree_on_group(const std::string& axes, const std::vector<int>& members) {
    const int n = world_->size();
    // Kept alive past a timeout: MPI may still write into it.
    auto asks = std::make_shared<std::vector<Ask>>(static_cast<size_t>(n) + 1);
    Ask& mine = (*asks)[0];
    std::memset(&mine, 0, sizeof mine);
    std::snprintf(mine.axes, sizeof mine.axes, "%s", axes.c_str());
    mine.color = members[0];
    MPI_Request req = MPI_REQUEST_NULL;
    const std::string what = "creating the communicator of axes " + axes;
    {
      std::lock_guard<std::mutex> lk(mpi::mpi_mutex());
      world_->poll_locked();
      int rc = MPI_Iallgather(&mine, sizeof(Ask), MPI_BYTE, asks->data() + 1, sizeof(Ask), MPI_BYTE, world_->comm(),
                              &req);
      if (rc != MPI_SUCCESS) fail(DT_ERR_COMM, what + ": MPI error: " + mpi::mpi_error_string(rc));
    }
    try {
      world_->wait(
          [&] {
            int flag = 0, rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) fail(DT_ERR_COMM, what + ": MPI error: " + mpi::mpi_error_string(rc));
            return flag != 0;
          },
          [&] {
            std::vector<int> everyone(static_cast<size_t>(n));
            for (int p = 0; p < n; ++p) everyone[static_cast<size_t>(p)] = p;
            return mpi::timeout_text(what.c_str(), "world", 0, world_->rank(), world_->timeout_s()) + ": " +
                   world_->status_check_locked(-1, 0, everyone);
          });
    } catch (...) {
      mpi::keep_forever(asks);
      throw;
    }
    std::string problem;
    for (int p = 0; p < n && problem.empty(); ++p) {
      const Ask& other = (*asks)[static_cast<size_t>(p) + 1];
      bool listed = std::find(members.begin(), members.end(), p) != members.end();
      if (std::strncmp(other.axes, mine.axes, sizeof mine.axes) != 0)
        problem = what + ": rank " + std::to_string(p) + " asked for axes " +
                  std::string(other.axes, strnlen(other.axes, sizeof other.axes)) +
                  " at the same point; every rank must create communicators in the same order (MPI_Comm_split is "
                  "collective over the world)";
      else if ((other.color == mine.color) != listed)
        problem = what + ": rank " + std::to_string(p) + " disagrees with rank " + std::to_string(world_->rank()) +
                  " on who is in its group";
    }
    if (!problem.empty()) {
      std::lock_guard<std::mutex> lk(mpi::mpi_mutex());
      world_->fail(DT_ERR_COMM, problem);
      world_->poll_locked();  // tells the peers, then throws
    }
  }

  std::shared_ptr<World> world_;
};

}  // namespace

std::unique_ptr<Backend> make_mpi_backend(const BackendOptions& options) {
  return std::make_unique<MpiBackend>(options);
}

}  // namespace dt::comm
