/* Links against an installed libdtrain and makes one real call. */
#include <dtrain/dtrain.h>
#include <stdio.h>

int main(void) {
  int64_t shape[2] = {2, 3};
  dt_tensor* t = NULL;
  if (dt_tensor_create(DT_BF16, shape, 2, "cpu", NULL, &t) != DT_OK) {
    fprintf(stderr, "%s\n", dt_last_error_message());
    return 1;
  }
  size_t bytes = 0;
  dt_tensor_nbytes(t, &bytes);
  dt_tensor_destroy(t);
  printf("consumer: libdtrain %s, bf16 [2,3] holds %zu bytes\n", dt_version(), bytes);
  return bytes == 12 ? 0 : 1;
}
