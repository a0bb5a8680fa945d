// The device mesh: named axes dp, pp, ep, cp, tp (outer to inner; tp innermost, so a TP
// group is adjacent ranks). A rank's coordinates are its row-major position; the ranks
// that differ only along a set of axes form that set's group, with one communicator each.
//
// A process drives its local ranks (DESIGN §1): run() executes a function on every local
// rank at once, each on its own rank thread (local backend: all ranks; mpi: one).
#pragma once
#include <array>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/backend.h"
#include "core/device.h"

namespace dt::comm {

constexpr int kNumAxes = 5;
enum Axis : int { kDp = 0, kPp = 1, kEp = 2, kCp = 3, kTp = 4 };
const char* axis_name(int axis);
using Coords = std::array<int, kNumAxes>;

class Mesh {
 public:
  // backend: "local" or "mpi". axes: the size of each axis (>= 1); their product must equal
  // the world size (local: options.world_size; mpi: the MPI world). axes[kDp] may be 0:
  // dp is then the world size over the other axes (the MPI world is known only here).
  static std::shared_ptr<Mesh> create(const std::string& backend, const Coords& axes, const BackendOptions& options);
  ~Mesh();

  const char* backend() const { return backend_->name(); }
  int world_size() const { return world_; }
  const Coords& axes() const { return sizes_; }
  int axis_size(int axis) const { return sizes_[axis]; }
  const std::vector<int>& local_ranks() const { return local_; }
  Coords coords(int rank) const;
  int rank_of(const Coords& c) const;

  // Canonical form of an axis set: "dp", "tp", "dp*cp" (outer to inner), or "world".
  // Throws INVALID_ARGUMENT naming the accepted names.
  static std::string canonical_axes(const std::string& axes);
  // The global ranks of the group of `rank` over `axes`, in group order.
  std::vector<int> group_members(int rank, const std::string& axes) const;
  // The communicator of local rank `rank` over `axes`, created on first use.
  Communicator& comm(int rank, const std::string& axes);
  // The communicators created so far, as (rank, canonical axes), sorted; and one of them,
  // or null. Neither creates a communicator: MPI creates groups collectively, a query can't.
  std::vector<std::pair<int, std::string>> created_comms();
  Communicator* find_comm(int rank, const std::string& axes);
  // Device communicators: the transport for buffers on GPUs (NCCL), chosen here so that no
  // other layer builds one. make_device_comms makes, once, the communicators of `axes` for
  // every local rank, local rank i driving devices[i] (one GPU per rank): the host backend
  // carries only the bootstrap. Call it from the thread that calls run() (not from a rank
  // thread), with the same devices on every process; UNSUPPORTED without NCCL or for a
  // device that is not a GPU. device_comm then returns a rank's (INVALID_ARGUMENT naming
  // the call to make when it was not made). Both are safe to call again: a second call
  // with the same devices keeps the communicators made by the first.
  void make_device_comms(const std::string& axes, const std::vector<Device>& devices);
  Communicator& device_comm(int rank, const std::string& axes);
  // The communicator of local rank `rank` over `axes` for buffers on `device`: a GPU's
  // device communicator (make_device_comms first), else comm(). What a layer above asks
  // for a group through, so that none of them picks a transport.
  Communicator& comm_for(int rank, const std::string& axes, Device device) {
    return device.type == DeviceType::CUDA ? device_comm(rank, axes) : comm(rank, axes);
  }
  // The last collectives of local rank `rank` over all its communicators, as JSON
  // (CollHistory::json); "[]" before its first.
  std::string history_json(int rank);

  // Runs fn(local_index, rank) on every local rank concurrently and waits for all. A rank
  // whose fn throws, or returns while peers wait for it, fails the mesh: the others' waits
  // end with an error instead of hanging. Rethrows the first error.
  void run(const std::function<void(int local_index, int rank)>& fn);
  // From any thread: every waiter returns DT_ERR_ABORTED; the mesh stays failed.
  void abort(const std::string& reason) { backend_->abort(reason); }
  void check_healthy() { backend_->check_healthy(); }

 private:
  Mesh() = default;
  struct RankThread;
  std::unique_ptr<Backend> backend_;
  Coords sizes_{};
  int world_ = 0;
  std::vector<int> local_;
  std::mutex comm_mu_;
  std::map<std::pair<int, std::string>, std::unique_ptr<Communicator>> comms_;
  std::map<int, std::shared_ptr<CollHistory>> histories_;  // per local rank, shared by its comms
  double timeout_s_ = 300.0;  // the backend's, for the device communicators
  std::map<std::pair<int, std::string>, std::unique_ptr<Communicator>> device_comms_;
  std::map<std::pair<int, std::string>, Device> device_of_;  // the GPU each device comm drives
  std::vector<std::unique_ptr<RankThread>> threads_;
};

}  // namespace dt::comm
