// A host that never touches MPI: the library initializes it on the first mpi mesh, leaves
// it running when the mesh goes, and finalizes it at process exit (mpirun reports a process
// that exits without MPI_Finalize as failed, so a clean exit status proves it). Exit status
// 0 on every rank means pass; rank 0 prints a summary.
#include <mpi.h>

#include <cstdio>

#include "comm/mesh.h"
#include "core/error.h"

int main() {
  using namespace dt::comm;
  int inited = 0, finalized = 0, ok = 1, rank = -1, n = 0;
  MPI_Initialized(&inited);
  if (inited) return std::fprintf(stderr, "MPI was initialized before the mesh\n"), 1;
  try {
    BackendOptions o;
    o.timeout_s = 60;
    auto mesh = Mesh::create("mpi", {0, 1, 1, 1, 1}, o);
    rank = mesh->local_ranks()[0];
    n = mesh->world_size();
    int64_t x = rank + 1;
    mesh->comm(rank, "dp").all_reduce(&x, &x, 1, dt::DType::I64, ReduceOp::Sum);
    if (x != int64_t{n} * (n + 1) / 2) {
      ok = 0;
      std::fprintf(stderr, "[rank %d] all_reduce gave %lld\n", rank, static_cast<long long>(x));
    }
    MPI_Initialized(&inited);
    if (!inited) ok = 0, std::fprintf(stderr, "[rank %d] MPI not initialized by the mesh\n", rank);
    // Every rank's verdict, through the library itself.
    int32_t all_ok = ok;
    mesh->comm(rank, "world").all_reduce(&all_ok, &all_ok, 1, dt::DType::I32, ReduceOp::Min);
    ok = all_ok;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] %s\n", rank, e.what());
    return 1;
  }
  MPI_Finalized(&finalized);
  if (finalized) ok = 0, std::fprintf(stderr, "[rank %d] MPI was finalized with the mesh\n", rank);
  if (rank == 0 && ok) std::printf("self-init OK on %d ranks\n", n);
  return ok ? 0 : 1;  // the library's atexit handler finalizes MPI after this
}
