/* A tour of libdtrain's foundation through the public C API only: tensors on the CPU,
 * counter-based random init, a matmul through the BLAS, softmax, a bf16 round trip and
 * the memory ledger. Build: cc tour.c $(pkg-config --cflags --libs dtrain) -lm */
#include <dtrain/dtrain.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                  \
  do {                                                                               \
    dt_status s_ = (call);                                                           \
    if (s_ != DT_OK) {                                                               \
      fprintf(stderr, "%s failed: %s: %s\n", #call, dt_status_string(s_), dt_last_error_message()); \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

static dt_tensor* make(dt_dtype dtype, int64_t rows, int64_t cols, const char* tag) {
  dt_options* o = NULL;
  dt_tensor* t = NULL;
  int64_t shape[2] = {rows, cols};
  CHECK(dt_options_create(&o));
  CHECK(dt_options_set_string(o, "tag", tag));
  CHECK(dt_tensor_create(dtype, shape, 2, "cpu", o, &t));
  dt_options_destroy(o);
  return t;
}

int main(void) {
  enum { M = 256, K = 384, N = 512 };
  printf("libdtrain %s\n", dt_version());

  /* Weights are params, inputs activations: the ledger counts each under its tag. */
  dt_tensor* x = make(DT_F32, M, K, "activation");
  dt_tensor* w = make(DT_F32, K, N, "param");
  dt_tensor* y = make(DT_F32, M, N, "activation");
  CHECK(dt_tensor_fill_normal(x, 42, "x", 0, 0.0f, 1.0f));
  CHECK(dt_tensor_fill_normal(w, 42, "w", 0, 0.0f, 0.05f));
  CHECK(dt_matmul(x, w, 0, 0, y));

  /* Check one output element against a plain dot product. */
  float* hx = malloc(sizeof(float) * M * K);
  float* hw = malloc(sizeof(float) * K * N);
  float* hy = malloc(sizeof(float) * K * N); /* K > M: big enough for every copy below */
  CHECK(dt_tensor_copy_to_host(x, hx, sizeof(float) * M * K));
  CHECK(dt_tensor_copy_to_host(w, hw, sizeof(float) * K * N));
  CHECK(dt_tensor_copy_to_host(y, hy, sizeof(float) * M * N));
  double ref = 0;
  for (int k = 0; k < K; ++k) ref += (double)hx[7 * K + k] * hw[k * N + 11];
  printf("matmul [%d x %d] @ [%d x %d]: y[7,11] = %.6f (plain dot product %.6f)\n", M, K, K, N, hy[7 * N + 11], ref);

  /* Softmax rows sum to one. */
  dt_tensor* p = make(DT_F32, M, N, "activation");
  CHECK(dt_softmax(y, p));
  CHECK(dt_tensor_copy_to_host(p, hy, sizeof(float) * M * N));
  double row = 0;
  for (int j = 0; j < N; ++j) row += hy[j];
  printf("softmax: row 0 sums to %.6f\n", row);

  /* bf16 keeps 8 bits of mantissa: the round trip error is below 2^-8 relative. */
  dt_tensor* wb = make(DT_BF16, K, N, "param");
  dt_tensor* back = make(DT_F32, K, N, "workspace");
  CHECK(dt_tensor_copy(w, wb));
  CHECK(dt_tensor_copy(wb, back));
  CHECK(dt_tensor_copy_to_host(back, hy, sizeof(float) * K * N));
  double worst = 0;
  for (int i = 0; i < K * N; ++i) {
    double rel = fabs(hy[i] - hw[i]) / (fabs(hw[i]) + 1e-30);
    if (rel > worst) worst = rel;
  }
  printf("bf16 round trip of w: worst relative error %.5f (bound %.5f)\n", worst, 1.0 / 256);

  /* The ledger: bytes per tag, now and at peak. */
  const dt_mem_tag tags[] = {DT_MEM_PARAM, DT_MEM_ACTIVATION, DT_MEM_WORKSPACE, DT_MEM_ALL};
  for (int i = 0; i < 4; ++i) {
    int64_t cur = 0, peak = 0;
    CHECK(dt_memory_stats("cpu", tags[i], &cur, &peak));
    printf("ledger %-10s current %9lld bytes  peak %9lld bytes\n", dt_mem_tag_name(tags[i]), (long long)cur,
           (long long)peak);
  }
  size_t need = 0;
  CHECK(dt_memory_report_json("cpu", NULL, 0, &need));
  char* json = malloc(need);
  CHECK(dt_memory_report_json("cpu", json, need, &need));
  printf("ledger as JSON: %s\n", json);

  /* Bad input is an error with a message, never a crash. */
  int64_t bad_shape[2] = {4, -1};
  dt_tensor* none = NULL;
  dt_status s = dt_tensor_create(DT_F32, bad_shape, 2, "cpu", NULL, &none);
  printf("bad shape -> %s: %s\n", dt_status_string(s), dt_last_error_message());

  free(json);
  free(hx);
  free(hw);
  free(hy);
  dt_tensor_destroy(x);
  dt_tensor_destroy(w);
  dt_tensor_destroy(y);
  dt_tensor_destroy(p);
  dt_tensor_destroy(wb);
  dt_tensor_destroy(back);
  printf("tour done\n");
  return 0;
}
