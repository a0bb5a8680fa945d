/* A job whose last rank stops itself (SIGSTOP) must still end: the other ranks time out,
 * and at exit libdtrain, which initialized MPI here, calls MPI_Abort instead of
 * MPI_Finalize (which would wait for the stopped rank forever), so mpirun kills every rank
 * and exits with this program's status, 3. Only the public C header is used: every client
 * gets this behaviour. tests/CMakeLists.txt checks the status and the message. */
#include <dtrain/dtrain.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  dt_options* o = NULL;
  dt_mesh* mesh = NULL;
  dt_tensor* t = NULL;
  int32_t world = 0, rank = 0;
  int64_t shape[1] = {4};
  if (dt_options_create(&o) || dt_options_set_int(o, "timeout_ms", 1000) || dt_mesh_create("mpi", 0, o, &mesh) ||
      dt_mesh_world_size(mesh, &world) || dt_mesh_local_rank(mesh, 0, &rank) ||
      dt_tensor_create_on_mesh(mesh, DT_F32, shape, 1, NULL, &t)) {
    fprintf(stderr, "setup failed: %s\n", dt_last_error_message());
    return 1;
  }
  if (rank == world - 1) raise(SIGSTOP); /* never comes back: mpirun must kill it */
  dt_status s = dt_mesh_all_reduce(mesh, "dp", t, DT_REDUCE_SUM);
  if (s != DT_ERR_TIMEOUT && s != DT_ERR_ABORTED) {
    fprintf(stderr, "[rank %d] expected a timeout, got %s\n", rank, dt_status_string(s));
    return 1;
  }
  if (rank == 0) {
    char history[8192];
    size_t needed = 0;
    printf("rank 0: %s\n", dt_last_error_message());
    if (dt_mesh_comm_history_json(mesh, history, sizeof history, &needed) != DT_OK || !strstr(history, "\"timeout\"")) {
      fprintf(stderr, "history without the timed-out call: %s\n", dt_last_error_message());
      return 1;
    }
    printf("history: %s\n", history);
  }
  /* The world is broken: dt_shutdown must not finalize (it would wait for the stopped rank). */
  if (dt_shutdown() != DT_ERR_COMM) {
    fprintf(stderr, "[rank %d] dt_shutdown on a broken world did not refuse\n", rank);
    return 1;
  }
  fflush(stdout);
  return 3; /* the status mpirun must end with */
}
