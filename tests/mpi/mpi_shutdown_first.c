/* dt_shutdown before any MPI use: a later "mpi" mesh fails with DT_ERR_COMM naming
 * dt_shutdown, as the header says, and MPI is never initialized. */
#include <dtrain/dtrain.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  dt_mesh* mesh = NULL;
  if (dt_shutdown() != DT_OK) return fprintf(stderr, "dt_shutdown failed: %s\n", dt_last_error_message()), 1;
  dt_status s = dt_mesh_create("mpi", 0, NULL, &mesh);
  if (s != DT_ERR_COMM || !strstr(dt_last_error_message(), "dt_shutdown was called")) {
    fprintf(stderr, "expected DT_ERR_COMM naming dt_shutdown, got %s: %s\n", dt_status_string(s),
            dt_last_error_message());
    return 1;
  }
  if (dt_shutdown() != DT_OK) return fprintf(stderr, "a second dt_shutdown failed\n"), 1;
  printf("shutdown-first OK\n");
  return 0;
}
