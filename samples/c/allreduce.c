/* All-reduce over a device mesh through the public C API. The same program runs in one
 * process (backend "local": 4 ranks as threads) and under mpirun (backend "mpi": one rank
 * per process), because a process always drives its own local ranks:
 *   ./dtrain_allreduce                 or   DTRAIN_BACKEND=local ./dtrain_allreduce
 *   mpirun -np 2 ./dtrain_allreduce mpi
 * Build: cc allreduce.c $(pkg-config --cflags --libs dtrain) */
#include <dtrain/dtrain.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                                   \
  do {                                                                                                \
    dt_status s_ = (call);                                                                            \
    if (s_ != DT_OK) {                                                                                \
      fprintf(stderr, "%s failed: %s: %s\n", #call, dt_status_string(s_), dt_last_error_message()); \
      exit(1);                                                                                        \
    }                                                                                                 \
  } while (0)

enum { N = 8 };

int main(int argc, char** argv) {
  const char* backend = argc > 1 ? argv[1] : getenv("DTRAIN_BACKEND");
  if (!backend || !*backend) backend = "local";
  /* local: this process runs 4 ranks; mpi: 0 takes the MPI world as mpirun started it. */
  int32_t world_arg = strcmp(backend, "local") == 0 ? 4 : 0;

  dt_mesh* mesh = NULL;
  dt_status s = dt_mesh_create(backend, world_arg, NULL, &mesh);
  if (s != DT_OK) {
    fprintf(stderr, "cannot create a mesh on backend \"%s\": %s: %s\n", backend, dt_status_string(s),
            dt_last_error_message());
    return 1;
  }
  int32_t world = 0, nlocal = 0;
  CHECK(dt_mesh_world_size(mesh, &world));
  CHECK(dt_mesh_local_rank_count(mesh, &nlocal));

  /* One piece of N floats per local rank; each rank's piece holds its rank number. */
  int64_t shape[1] = {N};
  dt_tensor* x = NULL;
  CHECK(dt_tensor_create_on_mesh(mesh, DT_F32, shape, 1, NULL, &x));
  float host[N];
  for (int32_t i = 0; i < nlocal; ++i) {
    int32_t rank = 0;
    dt_tensor* piece = NULL;
    CHECK(dt_mesh_local_rank(mesh, i, &rank));
    CHECK(dt_tensor_piece(x, i, &piece));
    for (int k = 0; k < N; ++k) host[k] = (float)rank;
    CHECK(dt_tensor_copy_from_host(piece, host, sizeof host));
    dt_tensor_destroy(piece);
  }

  /* Every rank ends with 0 + 1 + ... + (world - 1). */
  CHECK(dt_mesh_all_reduce(mesh, "world", x, DT_REDUCE_SUM));
  const float expected = (float)world * (float)(world - 1) / 2;
  int bad = 0;
  for (int32_t i = 0; i < nlocal; ++i) {
    int32_t rank = 0;
    dt_tensor* piece = NULL;
    CHECK(dt_mesh_local_rank(mesh, i, &rank));
    CHECK(dt_tensor_piece(x, i, &piece));
    CHECK(dt_tensor_copy_to_host(piece, host, sizeof host));
    dt_tensor_destroy(piece);
    for (int k = 0; k < N; ++k) bad += host[k] != expected;
    printf("rank %d of %d: all_reduce(sum) = %g (expected %g)\n", rank, world, host[0], expected);
  }

  /* The comm ledger: calls, bytes and seconds per rank, axis and collective. */
  size_t need = 0;
  CHECK(dt_mesh_comm_report_json(mesh, NULL, 0, &need));
  char* json = malloc(need);
  CHECK(dt_mesh_comm_report_json(mesh, json, need, &need));
  printf("comm ledger: %s\n", json);
  free(json);

  dt_tensor_destroy(x);
  dt_mesh_destroy(mesh);
  if (bad) {
    printf("allreduce FAILED: %d wrong elements\n", bad);
    return 1;
  }
  printf("allreduce OK on %d ranks (backend %s)\n", world, backend);
  return 0;
}
