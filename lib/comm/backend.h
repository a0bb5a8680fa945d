// What a mesh needs from a backend: which ranks this process drives, communicators over
// any group of ranks, and the world's fault state. One implementation per backend:
// local/ (threads of this process), mpi/ (one rank per process).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace dt::comm {

struct BackendOptions {
  int world_size = 0;        // local: the number of rank threads; mpi: 0 or the MPI world size
  double timeout_s = 300.0;  // every blocking wait gives up after this
  bool check_args = true;    // ranks compare kind, dtype, count and root before moving data
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual int world_size() const = 0;
  virtual std::vector<int> local_ranks() const = 0;
  // The communicator of local rank `rank` in the group `members` (global ranks, in group
  // order; `rank` is one of them) spanning `axes`. For backends whose groups are created
  // collectively (MPI), every rank must ask for the same groups in the same order.
  virtual std::unique_ptr<Communicator> make_comm(int rank, const std::string& axes, const std::vector<int>& members) = 0;
  // Puts the world in an error state: waits end with DT_ERR_ABORTED.
  virtual void abort(const std::string& reason) = 0;
  // The host work of `rank` has returned (true) or started (false).
  virtual void set_departed(int rank, bool departed) = 0;
  // Throws the world's error, if it has one.
  virtual void check_healthy() = 0;
};

std::unique_ptr<Backend> make_local_backend(const BackendOptions& options);
// Throws UNSUPPORTED when this build has no MPI.
std::unique_ptr<Backend> make_mpi_backend(const BackendOptions& options);

}  // namespace dt::comm
