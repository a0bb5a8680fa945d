/* Trains a tiny GPT data-parallel on 3-digit addition, saves a checkpoint and continues a
 * prompt, through the public C API only.
 *   ./train_gpt [checkpoint-stem]                       two ranks as threads of this process
 *   DTRAIN_BACKEND=mpi mpirun -np 2 ./train_gpt [stem]  one rank per process (rank 0 prints)
 * Build: cc train_gpt.c $(pkg-config --cflags --libs dtrain) -o train_gpt */
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

int main(int argc, char** argv) {
  const char* stem = argc > 1 ? argv[1] : "sample-ckpt/gpt";
  const char* backend = getenv("DTRAIN_BACKEND") ? getenv("DTRAIN_BACKEND") : "local";
  int mpi = strcmp(backend, "mpi") == 0;

  dt_mesh* mesh = NULL; /* local: 2 ranks here; mpi: the world mpirun started */
  CHECK(dt_mesh_create(backend, mpi ? 0 : 2, NULL, &mesh));
  int32_t rank = 0;
  CHECK(dt_mesh_local_rank(mesh, 0, &rank));

  dt_options* o = NULL;
  dt_module* model = NULL;
  CHECK(dt_options_create(&o));
  CHECK(dt_options_set_string(o, "preset", "gpt-tiny"));
  CHECK(dt_options_set_int(o, "seed", 1));
  CHECK(dt_module_create_gpt(o, &model));
  dt_options_destroy(o);

  dt_optimizer* optimizer = NULL;
  CHECK(dt_options_create(&o));
  CHECK(dt_options_set_double(o, "lr", 0.003));
  CHECK(dt_optimizer_create(model, "adamw", o, &optimizer));
  dt_options_destroy(o);

  dt_engine* engine = NULL;
  CHECK(dt_engine_create(mesh, model, optimizer, NULL, &engine));

  dt_dataset* data = NULL;
  dt_loader* loader = NULL;
  CHECK(dt_options_create(&o));
  CHECK(dt_options_set_int(o, "digits", 3));
  CHECK(dt_options_set_int(o, "seed", 7));
  CHECK(dt_options_set_string(o, "split", "train"));
  CHECK(dt_dataset_create("addition", o, &data));
  dt_options_destroy(o);
  CHECK(dt_options_create(&o));
  CHECK(dt_options_set_int(o, "batch", 16));
  CHECK(dt_options_set_int(o, "seed", 0));
  CHECK(dt_loader_create(data, o, &loader));
  dt_options_destroy(o);

  int64_t context = 0;
  CHECK(dt_dataset_context(data, &context));
  int64_t shape[2] = {16, context};
  dt_tensor *inputs = NULL, *targets = NULL;
  CHECK(dt_tensor_create(DT_I32, shape, 2, "cpu", NULL, &inputs));
  CHECK(dt_tensor_create(DT_I32, shape, 2, "cpu", NULL, &targets));
  for (int step = 1; step <= 30; ++step) {
    double loss = 0;
    CHECK(dt_loader_next(loader, inputs, targets));
    CHECK(dt_engine_train_step(engine, inputs, targets, &loss));
    if (rank == 0) printf("step %d loss %.8f\n", step, loss);
  }

  CHECK(dt_engine_save(engine, stem)); /* collective: every process calls it */
  if (rank == 0) printf("saved %s\n", stem);

  const char* prompt = "123+456=";
  int32_t tokens[8];
  int64_t length = (int64_t)strlen(prompt), n_new = 0;
  for (int i = 0; i < length; ++i) tokens[i] = (unsigned char)prompt[i];
  int32_t out[5];
  CHECK(dt_options_create(&o));
  CHECK(dt_options_set_int(o, "max_new_tokens", 5));
  CHECK(dt_engine_generate(engine, tokens, &length, 1, o, out, 5, &n_new));
  dt_options_destroy(o);
  if (rank == 0) {
    printf("%s", prompt);
    for (int64_t i = 0; i < n_new; ++i) putchar(out[i] >= 32 && out[i] < 127 ? out[i] : '?');
    putchar('\n');
  }

  /* Any order: each handle keeps what it was made from alive. */
  dt_mesh_destroy(mesh), dt_module_destroy(model), dt_optimizer_destroy(optimizer);
  dt_tensor_destroy(inputs), dt_tensor_destroy(targets);
  dt_loader_destroy(loader), dt_dataset_destroy(data), dt_engine_destroy(engine);
  return 0;
}
