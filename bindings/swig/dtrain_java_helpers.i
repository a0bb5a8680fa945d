/* dtrain_java_helpers.i: the `dtj_*` C helpers of the Java layer, %included by dtrain_java.i
 * after the typemaps (dtrain_java_types.i) and the error path (dtj_fail) they use.
 *
 * A helper stands in for a C function whose signature has no good Java form: outputs
 * through pointers (returned as a long[]), the JSON writers' (buf, capacity, needed)
 * protocol (a String), host copies of each Java array type and of double[] values, a
 * ByteBuffer range, ByteBuffer views of tensors and tensors over ByteBuffers (zero copy),
 * generate's arrays (lengths checked here) and its callback (a TokenListener, through the
 * version-2 callback that can stop), and the server's submit without its callback (which
 * would run on the server's thread: Java reads a request's tokens with dt_server_poll).
 * In order: the helpers in C; the C functions they replace, %ignored, and the Java names
 * they take (%rename); their declarations as SWIG sees them, each after the %apply that
 * gives its (pointer, length) pairs an array typemap. The typed host copies, alike but for
 * the element type, are one macro (DTJ_COPY) that writes both C and declaration.
 */

%{
/* Up to DT_MAX_DIMS integers that a helper returns as a Java long[]. */
typedef struct { int32_t n; int64_t v[DT_MAX_DIMS]; } dtj_longs;

static dt_status dtj_tensor_shape(const dt_tensor* tensor, dtj_longs* out) {
  int32_t ndim = 0;
  dt_status s = dt_tensor_ndim(tensor, &ndim);
  if (s != DT_OK) return s;
  if (ndim < 0 || ndim > DT_MAX_DIMS) return dtj_fail(DT_ERR_INTERNAL, "tensor ndim out of range");
  s = dt_tensor_shape(tensor, out->v, DT_MAX_DIMS);
  if (s == DT_OK) out->n = ndim;
  return s;
}

static dt_status dtj_memory_stats(const char* device, dt_mem_tag tag, dtj_longs* out) {
  out->n = 2;
  return dt_memory_stats(device, tag, &out->v[0], &out->v[1]);
}

static dt_status dtj_memory_rank_stats(const char* device, int32_t rank, dt_mem_tag tag,
                                       dtj_longs* out) {
  out->n = 2;
  return dt_memory_rank_stats(device, rank, tag, &out->v[0], &out->v[1]);
}

static dt_status dtj_loader_position(dt_loader* loader, dtj_longs* out) {
  out->n = 2;
  return dt_loader_position(loader, &out->v[0], &out->v[1]);
}

/* {calls, bytes} as longs (exact at any size); seconds_out[0] receives the seconds. */
static dt_status dtj_mesh_comm_stats(dt_mesh* mesh, int32_t rank, const char* axis,
                                     const char* kind, double* seconds_out,
                                     int64_t seconds_out_len, dtj_longs* out) {
  if (seconds_out_len < 1) return dtj_fail(DT_ERR_INVALID_ARGUMENT, "seconds_out needs one element");
  out->n = 2;
  return dt_mesh_comm_stats(mesh, rank, axis, kind, &out->v[0], &out->v[1], seconds_out);
}

/* The JSON writers: ask for the size, then write; *out is malloc'ed (freed by the wrapper). */
typedef dt_status (*dtj_json_fn)(const void* arg, char* buf, size_t capacity, size_t* needed);

/* dtj_json starting from a buffer of `first` bytes (0: ask for the size first): a writer
 * whose report is costly to make (a calibration) then runs once where its text fits. */
static dt_status dtj_json_from(dtj_json_fn fn, const void* arg, size_t first, char** out) {
  size_t need = first;
  int attempt;
  dt_status s = DT_OK;
  if (need == 0) {
    s = fn(arg, NULL, 0, &need);
    if (s != DT_OK) return s;
  }
  for (attempt = 0; attempt < 8; ++attempt) {
    size_t capacity = need > 0 ? need : 1, again = 0;
    char* buf = (char*)malloc(capacity);
    if (!buf) return dtj_fail(DT_ERR_OUT_OF_MEMORY, "no memory for a JSON report");
    s = fn(arg, buf, capacity, &again);
    if (s != DT_OK) { free(buf); return s; }
    if (again <= capacity) { buf[capacity - 1] = '\0'; *out = buf; return DT_OK; }
    free(buf); /* it grew between the two calls */
    need = again;
  }
  return dtj_fail(DT_ERR_INTERNAL, "a JSON report kept growing while it was read");
}

static dt_status dtj_json(dtj_json_fn fn, const void* arg, char** out) { return dtj_json_from(fn, arg, 0, out); }

/* Each writer as a dtj_json_fn: dtj_json_NAME calls CFUNC with its argument as ARGTYPE. */
#define DTJ_JSON_FN(NAME, CFUNC, ARGTYPE)                                     \
  static dt_status dtj_json_##NAME(const void* a, char* b, size_t c, size_t* n) { \
    return CFUNC((ARGTYPE)a, b, c, n);                                          \
  }
DTJ_JSON_FN(memory, dt_memory_report_json, const char*)
DTJ_JSON_FN(comm, dt_mesh_comm_report_json, dt_mesh*)
DTJ_JSON_FN(history, dt_mesh_comm_history_json, dt_mesh*)
DTJ_JSON_FN(stats, dt_engine_last_stats_json, dt_engine*)
DTJ_JSON_FN(gen_stats, dt_engine_last_generate_stats_json, dt_engine*)
DTJ_JSON_FN(checkpoint, dt_checkpoint_info_json, const char*)
DTJ_JSON_FN(server_stats, dt_server_stats_json, dt_server*)
DTJ_JSON_FN(server_metrics, dt_server_metrics_text, dt_server*)

static dt_status dtj_memory_report_json(const char* device, char** json_out) {
  return dtj_json(dtj_json_memory, device, json_out);
}
static dt_status dtj_mesh_comm_report_json(dt_mesh* mesh, char** json_out) {
  if (!mesh) return dt_mesh_comm_report_json(NULL, NULL, 0, NULL);
  return dtj_json(dtj_json_comm, mesh, json_out);
}
static dt_status dtj_mesh_comm_history_json(dt_mesh* mesh, char** json_out) {
  if (!mesh) return dt_mesh_comm_history_json(NULL, NULL, 0, NULL);
  return dtj_json(dtj_json_history, mesh, json_out);
}
static dt_status dtj_engine_last_stats_json(dt_engine* engine, char** json_out) {
  if (!engine) return dt_engine_last_stats_json(NULL, NULL, 0, NULL);
  return dtj_json(dtj_json_stats, engine, json_out);
}
static dt_status dtj_engine_last_generate_stats_json(dt_engine* engine, char** json_out) {
  if (!engine) return dt_engine_last_generate_stats_json(NULL, NULL, 0, NULL);
  return dtj_json(dtj_json_gen_stats, engine, json_out);
}
static dt_status dtj_checkpoint_info_json(const char* path_stem, char** json_out) {
  return dtj_json(dtj_json_checkpoint, path_stem, json_out);
}
static dt_status dtj_server_stats_json(dt_server* server, char** json_out) {
  if (!server) return dt_server_stats_json(NULL, NULL, 0, NULL);
  return dtj_json(dtj_json_server_stats, server, json_out);
}
static dt_status dtj_server_metrics_text(dt_server* server, char** json_out) {
  if (!server) return dt_server_metrics_text(NULL, NULL, 0, NULL);
  return dtj_json(dtj_json_server_metrics, server, json_out);
}

/* The server: submit with no callback (the request is then read with poll), poll's three
 * outputs as {n, state, done}, model_info's two as {context, vocab_size}. */
static dt_status dtj_server_submit(dt_server* server, const int32_t* prompt, int64_t prompt_len,
                                   const dt_options* options, int64_t* out) {
  return dt_server_submit(server, prompt, prompt_len, options, NULL, NULL, out);
}
static dt_status dtj_server_poll(dt_server* server, int64_t request_id, int32_t* tokens,
                                 int64_t capacity, int32_t timeout_ms, dtj_longs* out) {
  int64_t n = 0;
  int32_t state = 0, done = 0;
  dt_status s = dt_server_poll(server, request_id, tokens, capacity, &n, &state, &done, timeout_ms);
  if (s != DT_OK) return s;
  out->n = 3;
  out->v[0] = n;
  out->v[1] = state;
  out->v[2] = done;
  return DT_OK;
}
static dt_status dtj_server_model_info(dt_server* server, dtj_longs* out) {
  out->n = 2;
  return dt_server_model_info(server, &out->v[0], &out->v[1]);
}

/* double[] values into or out of a floating tensor go through `count` host floats
 * (*staging) and, when the tensor is bf16 or f16, an f32 CPU *twin that the library
 * converts to or from (dt_tensor_copy); *twin stays NULL for an f32 tensor. */
static dt_status dtj_f32_staging(const dt_tensor* t, int64_t count, dt_tensor** twin,
                                 float** staging) {
  int64_t shape[DT_MAX_DIMS];
  int32_t ndim = 0;
  dt_dtype dtype = 0;
  dt_status s = dt_tensor_dtype(t, &dtype);
  *twin = NULL;
  *staging = NULL;
  if (s != DT_OK) return s;
  if (dtype != DT_F32 && dtype != DT_BF16 && dtype != DT_F16)
    return dtj_fail(DT_ERR_INVALID_ARGUMENT, "double[] values need a floating tensor (f32, bf16, f16)");
  if (dtype != DT_F32) {
    if ((s = dt_tensor_ndim(t, &ndim)) != DT_OK) return s;
    if (ndim < 0 || ndim > DT_MAX_DIMS) return dtj_fail(DT_ERR_INTERNAL, "tensor ndim out of range");
    if ((s = dt_tensor_shape(t, shape, DT_MAX_DIMS)) != DT_OK) return s;
    if ((s = dt_tensor_create(DT_F32, shape, ndim, "cpu", NULL, twin)) != DT_OK) return s;
  }
  *staging = (float*)malloc((size_t)(count > 0 ? count : 1) * sizeof(float));
  if (!*staging) {
    dt_tensor_destroy(*twin);
    *twin = NULL;
    return dtj_fail(DT_ERR_OUT_OF_MEMORY, "no memory to convert double[]");
  }
  return DT_OK;
}

static dt_status dtj_tensor_copy_from_f64(dt_tensor* t, const double* data, int64_t count) {
  dt_tensor* twin;
  float* f;
  int64_t i;
  dt_status s = dtj_f32_staging(t, count, &twin, &f);
  if (s != DT_OK) return s;
  for (i = 0; i < count; ++i) f[i] = (float)data[i];
  s = dt_tensor_copy_from_host(twin ? twin : t, f, (size_t)count * sizeof(float));
  if (s == DT_OK && twin) s = dt_tensor_copy(twin, t);
  free(f);
  dt_tensor_destroy(twin);
  return s;
}

static dt_status dtj_tensor_copy_to_f64(const dt_tensor* t, double* data, int64_t count) {
  dt_tensor* twin;
  float* f;
  int64_t i;
  dt_status s = dtj_f32_staging(t, count, &twin, &f);
  if (s != DT_OK) return s;
  if (twin) s = dt_tensor_copy(t, twin);
  if (s == DT_OK) s = dt_tensor_copy_to_host(twin ? twin : t, f, (size_t)count * sizeof(float));
  if (s == DT_OK) for (i = 0; i < count; ++i) data[i] = f[i];
  free(f);
  dt_tensor_destroy(twin);
  return s;
}

/* A direct ByteBuffer: bytes [offset, offset + bytes) of its `capacity`. */
static int dtj_range_ok(int64_t capacity, int64_t offset, int64_t bytes) {
  return offset >= 0 && bytes >= 0 && offset <= capacity && bytes <= capacity - offset;
}
static dt_status dtj_tensor_copy_from_buffer(dt_tensor* t, void* address, int64_t capacity,
                                             int64_t offset, int64_t bytes) {
  if (!dtj_range_ok(capacity, offset, bytes))
    return dtj_fail(DT_ERR_INVALID_ARGUMENT, "buffer range out of bounds");
  return dt_tensor_copy_from_host(t, (const char*)address + offset, (size_t)bytes);
}
static dt_status dtj_tensor_copy_to_buffer(const dt_tensor* t, void* address, int64_t capacity,
                                           int64_t offset, int64_t bytes) {
  if (!dtj_range_ok(capacity, offset, bytes))
    return dtj_fail(DT_ERR_INVALID_ARGUMENT, "buffer range out of bounds");
  return dt_tensor_copy_to_host(t, (char*)address + offset, (size_t)bytes);
}

static dt_status dtj_dataset_example(const dt_dataset* dataset, int64_t index, int32_t* inputs,
                                     int64_t inputs_len, int32_t* targets, int64_t targets_len) {
  int64_t context = 0;
  dt_status s = dt_dataset_context(dataset, &context);
  if (s != DT_OK) return s;
  if (inputs_len != context || targets_len != context)
    return dtj_fail(DT_ERR_INVALID_ARGUMENT, "inputs and targets must each hold context tokens");
  return dt_dataset_example(dataset, index, inputs, targets);
}

/* generate: the arrays' lengths are checked against n_prompts and the capacity here. */
static dt_status dtj_generate_check(const int32_t* tokens, int64_t n_tokens,
                                    const int64_t* lengths, int64_t n_prompts,
                                    int64_t n_out_tokens, int64_t capacity,
                                    int64_t n_out_lengths) {
  int64_t i, total = 0;
  (void)tokens;
  if (n_prompts < 1 || n_prompts > INT32_MAX)
    return dtj_fail(DT_ERR_INVALID_ARGUMENT, "generate needs at least one prompt");
  for (i = 0; i < n_prompts; ++i) {
    if (lengths[i] < 0 || lengths[i] > n_tokens - total)
      return dtj_fail(DT_ERR_INVALID_ARGUMENT, "prompt lengths exceed the prompt tokens");
    total += lengths[i];
  }
  if (total != n_tokens)
    return dtj_fail(DT_ERR_INVALID_ARGUMENT, "prompt lengths do not add up to the prompt tokens");
  if (capacity < 0 || n_out_lengths < n_prompts || n_out_tokens / n_prompts < capacity)
    return dtj_fail(DT_ERR_INVALID_ARGUMENT, "output arrays are smaller than n_prompts x capacity");
  return DT_OK;
}

static dt_status dtj_engine_generate(dt_engine* engine, const int32_t* tokens, int64_t n_tokens,
                                     const int64_t* lengths, int64_t n_prompts,
                                     const dt_options* options, int32_t* out_tokens,
                                     int64_t n_out_tokens, int64_t capacity,
                                     int64_t* out_lengths, int64_t n_out_lengths) {
  dt_status s = dtj_generate_check(tokens, n_tokens, lengths, n_prompts, n_out_tokens, capacity,
                                   n_out_lengths);
  if (s != DT_OK) return s;
  return dt_engine_generate(engine, tokens, lengths, (int32_t)n_prompts, options, out_tokens,
                            capacity, out_lengths);
}

/* Streaming: each token goes to listener.onToken(int promptIndex, int token) on this
 * thread. Once the listener throws, the version-2 callback asks the library to stop: the
 * call ends within one decode step (DT_ERR_CANCELLED) and the listener's exception, which
 * is pending, is the one Java sees. */
typedef struct {
  JNIEnv* env;
  jobject listener;
  jmethodID on_token;
  int failed;
} dtj_stream;

static int32_t dtj_stream_token(void* user, int32_t prompt_index, int32_t token) {
  dtj_stream* st = (dtj_stream*)user;
  if (st->failed) return 1;
  (*st->env)->CallVoidMethod(st->env, st->listener, st->on_token, (jint)prompt_index, (jint)token);
  if ((*st->env)->ExceptionCheck(st->env)) st->failed = 1;
  return st->failed;
}

static dt_status dtj_engine_generate_stream(dt_engine* engine, const int32_t* tokens,
                                            int64_t n_tokens, const int64_t* lengths,
                                            int64_t n_prompts, const dt_options* options,
                                            jobject listener, JNIEnv* env, int32_t* out_tokens,
                                            int64_t n_out_tokens, int64_t capacity,
                                            int64_t* out_lengths, int64_t n_out_lengths) {
  dtj_stream st;
  jclass cls;
  dt_status s = dtj_generate_check(tokens, n_tokens, lengths, n_prompts, n_out_tokens, capacity,
                                   n_out_lengths);
  if (s != DT_OK) return s;
  if (!listener) return dtj_fail(DT_ERR_INVALID_ARGUMENT, "listener is null");
  cls = (*env)->GetObjectClass(env, listener);
  st.env = env;
  st.listener = listener;
  st.on_token = (*env)->GetMethodID(env, cls, "onToken", "(II)V");
  st.failed = 0;
  (*env)->DeleteLocalRef(env, cls);
  if (!st.on_token) return DT_ERR_INVALID_ARGUMENT; /* NoSuchMethodError is pending */
  return dt_engine_generate_stream_v2(engine, tokens, lengths, (int32_t)n_prompts, options,
                                      dtj_stream_token, &st, out_tokens, capacity, out_lengths);
}

/* Zero-copy views. A direct ByteBuffer over a CPU tensor's bytes: it does not keep the
 * tensor alive, so org.dtrain.Tensor.asByteBuffer passes a view handle that it releases
 * only once the buffer is unreachable. */
static dt_status dtj_tensor_buffer(const dt_tensor* tensor, JNIEnv* env, jobject* buffer_out) {
  const char* device = NULL;
  void* data = NULL;
  size_t nbytes = 0;
  dt_status s = dt_tensor_device(tensor, &device);
  if (s != DT_OK) return s;
  if (strcmp(device, "cpu") != 0)
    return dtj_fail(DT_ERR_UNSUPPORTED, "a ByteBuffer view needs a cpu tensor (copy the data to one)");
  if ((s = dt_tensor_data(tensor, &data)) != DT_OK) return s;
  if ((s = dt_tensor_nbytes(tensor, &nbytes)) != DT_OK) return s;
  if (!data || nbytes == 0 || nbytes > (size_t)INT32_MAX)
    return dtj_fail(DT_ERR_UNSUPPORTED, "a ByteBuffer view holds 1 to 2^31 - 1 bytes");
  *buffer_out = (*env)->NewDirectByteBuffer(env, data, (jlong)nbytes);
  if (!*buffer_out && !(*env)->ExceptionCheck(env))
    return dtj_fail(DT_ERR_UNSUPPORTED, "this JVM makes no direct ByteBuffer over native memory");
  return *buffer_out ? DT_OK : DT_ERR_OUT_OF_MEMORY;
}

/* A tensor over a direct ByteBuffer's memory (from `offset`): the buffer stays reachable
 * through a global reference until the library ends the loan, which may happen on a thread
 * the JVM does not know (the last reference to the storage may drop on a rank's thread). */
typedef struct {
  JavaVM* vm;
  jobject buffer;
} dtj_loan;

static void dtj_loan_end(void* user) {
  dtj_loan* loan = (dtj_loan*)user;
  JNIEnv* env = NULL;
  int attached = 0;
  if ((*loan->vm)->GetEnv(loan->vm, (void**)&env, JNI_VERSION_1_8) == JNI_EDETACHED) {
    if ((*loan->vm)->AttachCurrentThreadAsDaemon(loan->vm, (void**)&env, NULL) != JNI_OK) {
      free(loan); /* no JVM to tell: the buffer stays reachable (a leak, not a crash) */
      return;
    }
    attached = 1;
  }
  (*env)->DeleteGlobalRef(env, loan->buffer);
  if (attached) (*loan->vm)->DetachCurrentThread(loan->vm);
  free(loan);
}

static dt_status dtj_tensor_wrap_buffer(int32_t dtype, const int64_t* shape, int32_t ndim,
                                        jobject buffer, JNIEnv* env, int64_t offset,
                                        dt_tensor** out) {
  char* base;
  jlong capacity;
  int64_t bytes = (int64_t)dt_dtype_size(dtype);
  int32_t i;
  dtj_loan* loan;
  if (!buffer) return dtj_fail(DT_ERR_INVALID_ARGUMENT, "buffer is null");
  base = (char*)(*env)->GetDirectBufferAddress(env, buffer);
  capacity = (*env)->GetDirectBufferCapacity(env, buffer);
  if (!base || capacity < 0) return dtj_fail(DT_ERR_INVALID_ARGUMENT, "buffer is not a direct ByteBuffer");
  if (offset < 0 || offset > capacity) return dtj_fail(DT_ERR_INVALID_ARGUMENT, "offset out of bounds");
  /* The byte size, when dtype and shape are valid (the library rejects them otherwise). */
  for (i = 0; i < ndim && bytes > 0; ++i) {
    if (shape[i] < 0) break;
    if (shape[i] != 0 && bytes > INT64_MAX / shape[i])
      return dtj_fail(DT_ERR_INVALID_ARGUMENT, "shape too large");
    bytes *= shape[i];
  }
  if (bytes > capacity - offset)
    return dtj_fail(DT_ERR_INVALID_ARGUMENT, "the buffer holds fewer bytes than the tensor");
  loan = (dtj_loan*)malloc(sizeof *loan);
  if (!loan) return dtj_fail(DT_ERR_OUT_OF_MEMORY, "no memory for a buffer loan");
  loan->buffer = NULL;
  if ((*env)->GetJavaVM(env, &loan->vm) != JNI_OK ||
      !(loan->buffer = (*env)->NewGlobalRef(env, buffer))) {
    free(loan);
    return dtj_fail(DT_ERR_OUT_OF_MEMORY, "no global reference for the buffer");
  }
  /* The library ends the loan (dtj_loan_end) when the tensor's storage goes, or now if it fails. */
  return dt_tensor_create_from_memory(dtype, shape, ndim, "cpu", base + offset, dtj_loan_end, loan, out);
}

/* Host-driven modules. */
static dt_status dtj_module_backward_no_dx(dt_module* module, const dt_tensor* dy) {
  return dt_module_backward(module, dy, NULL);
}
static dt_status dtj_loss(const char* kind, const dt_tensor* pred, const dt_tensor* target,
                          double* out) {
  return dt_loss(kind, pred, target, out, NULL);
}
/* Returns d loss / d pred; loss_out[0] receives the loss. */
static dt_status dtj_loss_with_grad(const char* kind, const dt_tensor* pred,
                                    const dt_tensor* target, double* loss_out,
                                    int64_t loss_out_len, dt_tensor** out) {
  if (loss_out_len < 1) return dtj_fail(DT_ERR_INVALID_ARGUMENT, "loss_out needs one element");
  return dt_loss(kind, pred, target, loss_out, out);
}
%}

/* ---------------------------------------------------------------------------------- */
/* C functions replaced by the helpers (which take their Java names)                    */
/* ---------------------------------------------------------------------------------- */
/* dt_NAME is not wrapped; dtj_NAME takes its name in Java. */
%define DTJ_REPLACES(NAME)
%ignore dt_##NAME;
%rename(dt_##NAME) dtj_##NAME;
%enddef
DTJ_REPLACES(tensor_shape)
DTJ_REPLACES(memory_stats)
DTJ_REPLACES(memory_rank_stats)
DTJ_REPLACES(memory_report_json)
DTJ_REPLACES(mesh_comm_stats)
DTJ_REPLACES(mesh_comm_report_json)
DTJ_REPLACES(mesh_comm_history_json)
DTJ_REPLACES(engine_last_stats_json)
DTJ_REPLACES(engine_last_generate_stats_json)
DTJ_REPLACES(checkpoint_info_json)
DTJ_REPLACES(engine_generate)
DTJ_REPLACES(engine_generate_stream)
/* Version 2 of the token callback is what dt_engine_generate_stream uses in Java. */
%ignore dt_engine_generate_stream_v2;
/* The zero-copy calls take raw memory: dtj_tensor_buffer and dtj_tensor_wrap_buffer
 * (direct ByteBuffers) stand in for them, under their own names. */
%ignore dt_tensor_data;
%ignore dt_tensor_create_from_memory;
DTJ_REPLACES(dataset_example)
DTJ_REPLACES(loader_position)
DTJ_REPLACES(loss)
DTJ_REPLACES(server_stats_json)
DTJ_REPLACES(server_metrics_text)
DTJ_REPLACES(server_submit)
DTJ_REPLACES(server_poll)
DTJ_REPLACES(server_model_info)
/* Log-probabilities of served tokens (float arrays): not in the Java API yet; Java reads a
 * request's tokens with dt_server_poll. */
%ignore dt_server_poll_logprobs;
%ignore dt_server_event_logprobs;
/* Replaced by the typed copies, which keep their dtj_tensor_copy_{from,to}_<type> names. */
%ignore dt_tensor_copy_from_host;
%ignore dt_tensor_copy_to_host;
/* No C function has these names: dt_loss with the gradient, dt_module_backward without dx. */
%rename(dt_loss_with_grad) dtj_loss_with_grad;
%rename(dt_module_backward_no_dx) dtj_module_backward_no_dx;

/* ---------------------------------------------------------------------------------- */
/* The helpers as SWIG sees them (defined static above, or by DTJ_COPY)                 */
/* ---------------------------------------------------------------------------------- */
dt_status dtj_tensor_shape(const dt_tensor* tensor, dtj_longs* out);
dt_status dtj_memory_stats(const char* device, int32_t tag, dtj_longs* out);
dt_status dtj_memory_rank_stats(const char* device, int32_t rank, int32_t tag, dtj_longs* out);
dt_status dtj_loader_position(dt_loader* loader, dtj_longs* out);
%apply (double* ELEMS_OUT, int64_t LEN) { (double* seconds_out, int64_t seconds_out_len) };
dt_status dtj_mesh_comm_stats(dt_mesh* mesh, int32_t rank, const char* axis, const char* kind,
                              double* seconds_out, int64_t seconds_out_len, dtj_longs* out);
dt_status dtj_memory_report_json(const char* device, char** json_out);
dt_status dtj_mesh_comm_report_json(dt_mesh* mesh, char** json_out);
dt_status dtj_mesh_comm_history_json(dt_mesh* mesh, char** json_out);
dt_status dtj_engine_last_stats_json(dt_engine* engine, char** json_out);
dt_status dtj_engine_last_generate_stats_json(dt_engine* engine, char** json_out);
dt_status dtj_checkpoint_info_json(const char* path_stem, char** json_out);
dt_status dtj_server_stats_json(dt_server* server, char** json_out);
dt_status dtj_server_metrics_text(dt_server* server, char** json_out);
dt_status dtj_server_model_info(dt_server* server, dtj_longs* out);

/* A tensor copy's (data, count) is one Java array through a critical region. */
%define DTJ_COPY_ARGS(CTYPE)
%apply (const CTYPE* CRIT_IN, int64_t LEN) { (const CTYPE* data, int64_t count) };
%apply (CTYPE* CRIT_OUT, int64_t LEN) { (CTYPE* data, int64_t count) };
%enddef

/* Host copies of the array's own element type, `count` elements (the library checks the
 * byte size): the two C helpers and their declarations. */
%define DTJ_COPY(SUFFIX, CTYPE)
%{
static dt_status dtj_tensor_copy_from_##SUFFIX(dt_tensor* t, const CTYPE* data, int64_t count) {
  return dt_tensor_copy_from_host(t, data, (size_t)count * sizeof(CTYPE));
}
static dt_status dtj_tensor_copy_to_##SUFFIX(const dt_tensor* t, CTYPE* data, int64_t count) {
  return dt_tensor_copy_to_host(t, data, (size_t)count * sizeof(CTYPE));
}
%}
DTJ_COPY_ARGS(CTYPE)
dt_status dtj_tensor_copy_from_##SUFFIX(dt_tensor* tensor, const CTYPE* data, int64_t count);
dt_status dtj_tensor_copy_to_##SUFFIX(const dt_tensor* tensor, CTYPE* data, int64_t count);
%enddef
DTJ_COPY(f32, float)
DTJ_COPY(i32, int32_t)
DTJ_COPY(i64, int64_t)
DTJ_COPY(i16, int16_t)
DTJ_COPY(i8, int8_t)

DTJ_COPY_ARGS(double)
dt_status dtj_tensor_copy_from_f64(dt_tensor* tensor, const double* data, int64_t count);
dt_status dtj_tensor_copy_to_f64(const dt_tensor* tensor, double* data, int64_t count);

dt_status dtj_tensor_buffer(const dt_tensor* tensor, JNIEnv* env, jobject* buffer_out);
dt_status dtj_tensor_wrap_buffer(int32_t dtype, const int64_t* shape, int32_t ndim, jobject buffer,
                                 JNIEnv* env, int64_t offset, dt_tensor** out);

%apply (void* BUFFER, int64_t CAPACITY) { (void* address, int64_t capacity) };
dt_status dtj_tensor_copy_from_buffer(dt_tensor* tensor, void* address, int64_t capacity,
                                      int64_t offset, int64_t bytes);
dt_status dtj_tensor_copy_to_buffer(const dt_tensor* tensor, void* address, int64_t capacity,
                                    int64_t offset, int64_t bytes);

%apply (int32_t* ELEMS_OUT, int64_t LEN) { (int32_t* inputs, int64_t inputs_len),
                                          (int32_t* targets, int64_t targets_len) };
dt_status dtj_dataset_example(const dt_dataset* dataset, int64_t index, int32_t* inputs,
                              int64_t inputs_len, int32_t* targets, int64_t targets_len);

%apply (const int32_t* ELEMS_IN, int64_t LEN) { (const int32_t* tokens, int64_t n_tokens) };
%apply (const int64_t* ELEMS_IN, int64_t LEN) { (const int64_t* lengths, int64_t n_prompts) };
%apply (int32_t* ELEMS_OUT, int64_t LEN) { (int32_t* out_tokens, int64_t n_out_tokens) };
%apply (int64_t* ELEMS_OUT, int64_t LEN) { (int64_t* out_lengths, int64_t n_out_lengths) };
dt_status dtj_engine_generate(dt_engine* engine, const int32_t* tokens, int64_t n_tokens,
                              const int64_t* lengths, int64_t n_prompts, const dt_options* options,
                              int32_t* out_tokens, int64_t n_out_tokens, int64_t capacity,
                              int64_t* out_lengths, int64_t n_out_lengths);
dt_status dtj_engine_generate_stream(dt_engine* engine, const int32_t* tokens, int64_t n_tokens,
                                     const int64_t* lengths, int64_t n_prompts,
                                     const dt_options* options, jobject listener, JNIEnv* env,
                                     int32_t* out_tokens, int64_t n_out_tokens, int64_t capacity,
                                     int64_t* out_lengths, int64_t n_out_lengths);

%apply (double* ELEMS_OUT, int64_t LEN) { (double* loss_out, int64_t loss_out_len) };
dt_status dtj_module_backward_no_dx(dt_module* module, const dt_tensor* dy);
dt_status dtj_loss(const char* kind, const dt_tensor* pred, const dt_tensor* target, double* out);
dt_status dtj_loss_with_grad(const char* kind, const dt_tensor* pred, const dt_tensor* target,
                             double* loss_out, int64_t loss_out_len, dt_tensor** out);

/* The server's token arrays: not critical regions (submit takes a lock, poll waits). */
%apply (const int32_t* ELEMS_IN, int64_t LEN) { (const int32_t* prompt, int64_t prompt_len) };
%apply (int32_t* ELEMS_OUT, int64_t LEN) { (int32_t* tokens, int64_t capacity) };
dt_status dtj_server_submit(dt_server* server, const int32_t* prompt, int64_t prompt_len,
                            const dt_options* options, int64_t* out);
dt_status dtj_server_poll(dt_server* server, int64_t request_id, int32_t* tokens, int64_t capacity,
                          int32_t timeout_ms, dtj_longs* out);

/* ---------------------------------------------------------------------------------- */
/* Hugging Face directories and tokenizers                                              */
/* ---------------------------------------------------------------------------------- */
/* The text writers as Strings (through dtj_json; those of more than one argument take a
 * struct of them), and encode as a new int[]: its text is a byte[] of UTF-8 (a String's
 * getBytes, so a U+0000 in it is text like any other), encoded into a first guess of one
 * id per byte and, if the ids did not fit, once more at their exact count. */
%{
DTJ_JSON_FN(hf_inspect, dt_hf_inspect_json, const char*)
static dt_status dtj_json_runtime_info(const void* a, char* b, size_t c, size_t* n) {
  (void)a;
  return dt_runtime_info_json(b, c, n);
}
static dt_status dtj_runtime_info_json(char** json_out) { return dtj_json(dtj_json_runtime_info, NULL, json_out); }
DTJ_JSON_FN(tokenizer_info, dt_tokenizer_info_json, dt_tokenizer*)
DTJ_JSON_FN(detokenizer_text, dt_detokenizer_text, dt_detokenizer*)

static dt_status dtj_hf_inspect_json(const char* dir, char** json_out) {
  return dtj_json(dtj_json_hf_inspect, dir, json_out);
}
static dt_status dtj_tokenizer_info_json(dt_tokenizer* tokenizer, char** json_out) {
  if (!tokenizer) return dt_tokenizer_info_json(NULL, NULL, 0, NULL);
  return dtj_json(dtj_json_tokenizer_info, tokenizer, json_out);
}
static dt_status dtj_detokenizer_text(dt_detokenizer* detokenizer, char** json_out) {
  if (!detokenizer) return dt_detokenizer_text(NULL, NULL, 0, NULL);
  return dtj_json(dtj_json_detokenizer_text, detokenizer, json_out);
}

typedef struct {
  dt_tokenizer* tokenizer;
  const int32_t* ids;
  size_t n;
  int32_t skip_special_tokens;
} dtj_decode_args;
static dt_status dtj_json_decode(const void* a, char* b, size_t c, size_t* n) {
  const dtj_decode_args* d = (const dtj_decode_args*)a;
  return dt_tokenizer_decode(d->tokenizer, d->ids, d->n, d->skip_special_tokens, b, c, n);
}
static dt_status dtj_tokenizer_decode(dt_tokenizer* tokenizer, const int32_t* ids, int64_t n_ids,
                                      int32_t skip_special_tokens, char** json_out) {
  dtj_decode_args d;
  if (!tokenizer) return dt_tokenizer_decode(NULL, NULL, 0, 0, NULL, 0, NULL);
  d.tokenizer = tokenizer;
  d.ids = ids;
  d.n = (size_t)n_ids;
  d.skip_special_tokens = skip_special_tokens;
  return dtj_json(dtj_json_decode, &d, json_out);
}

typedef struct {
  dt_tokenizer* tokenizer;
  const char* messages_json;
  int32_t add_generation_prompt;
} dtj_chat_args;
static dt_status dtj_json_chat(const void* a, char* b, size_t c, size_t* n) {
  const dtj_chat_args* d = (const dtj_chat_args*)a;
  return dt_tokenizer_apply_chat_template(d->tokenizer, d->messages_json, d->add_generation_prompt, b, c, n);
}
static dt_status dtj_tokenizer_apply_chat_template(dt_tokenizer* tokenizer, const char* messages_json,
                                                   int32_t add_generation_prompt, char** json_out) {
  dtj_chat_args d;
  if (!tokenizer) return dt_tokenizer_apply_chat_template(NULL, NULL, 0, NULL, 0, NULL);
  d.tokenizer = tokenizer;
  d.messages_json = messages_json;
  d.add_generation_prompt = add_generation_prompt;
  return dtj_json(dtj_json_chat, &d, json_out);
}

static dt_status dtj_tokenizer_encode(dt_tokenizer* tokenizer, const int8_t* text, int64_t text_len,
                                      int32_t add_special_tokens, JNIEnv* env, jintArray* ids_out) {
  size_t capacity = (size_t)text_len + 8, n = 0;
  int32_t* ids;
  dt_status s;
  if (!tokenizer) return dt_tokenizer_encode(NULL, NULL, 0, 0, NULL, 0, &n);
  if (text_len < 0 || text_len > INT32_MAX) return dtj_fail(DT_ERR_INVALID_ARGUMENT, "text is too long");
  for (;;) {
    ids = (int32_t*)malloc(capacity * sizeof(int32_t));
    if (!ids) return dtj_fail(DT_ERR_OUT_OF_MEMORY, "no memory for the token ids");
    s = dt_tokenizer_encode(tokenizer, (const char*)text, (size_t)text_len, add_special_tokens, ids, capacity, &n);
    if (s != DT_OK || n <= capacity) break;
    free(ids); /* more ids than the guess: again at the exact count */
    capacity = n;
  }
  if (s == DT_OK && n > INT32_MAX) s = dtj_fail(DT_ERR_INVALID_ARGUMENT, "more ids than a Java array holds");
  if (s == DT_OK) {
    *ids_out = (*env)->NewIntArray(env, (jsize)n);
    if (*ids_out) (*env)->SetIntArrayRegion(env, *ids_out, 0, (jsize)n, (const jint*)ids);
    /* else an OutOfMemoryError is pending, and Java sees it */
  }
  free(ids);
  return s;
}
%}

DTJ_REPLACES(hf_inspect_json)
DTJ_REPLACES(runtime_info_json)
DTJ_REPLACES(tokenizer_info_json)
DTJ_REPLACES(tokenizer_decode)
DTJ_REPLACES(tokenizer_apply_chat_template)
DTJ_REPLACES(tokenizer_encode)
DTJ_REPLACES(detokenizer_text)

dt_status dtj_hf_inspect_json(const char* dir, char** json_out);
dt_status dtj_runtime_info_json(char** json_out);
dt_status dtj_tokenizer_info_json(dt_tokenizer* tokenizer, char** json_out);
dt_status dtj_detokenizer_text(dt_detokenizer* detokenizer, char** json_out);
%apply (const int32_t* ELEMS_IN, int64_t LEN) { (const int32_t* ids, int64_t n_ids) };
dt_status dtj_tokenizer_decode(dt_tokenizer* tokenizer, const int32_t* ids, int64_t n_ids,
                               int32_t skip_special_tokens, char** json_out);
dt_status dtj_tokenizer_apply_chat_template(dt_tokenizer* tokenizer, const char* messages_json,
                                            int32_t add_generation_prompt, char** json_out);
%apply (const int8_t* ELEMS_IN, int64_t LEN) { (const int8_t* text, int64_t text_len) };
dt_status dtj_tokenizer_encode(dt_tokenizer* tokenizer, const int8_t* text, int64_t text_len,
                               int32_t add_special_tokens, JNIEnv* env, jintArray* ids_out);

/* ---------------------------------------------------------------------------------- */
/* The layout planner                                                                   */
/* ---------------------------------------------------------------------------------- */
/* Its JSON writers as Strings: dt_plan_json's two option bags as a struct, and the
 * calibration read into a first buffer large enough for a cluster's JSON, so that it
 * measures the machine once rather than once for the size and again for the text. */
%{
typedef struct {
  const dt_options* config;
  const dt_options* plan;
} dtj_plan_args;
static dt_status dtj_json_plan(const void* a, char* b, size_t c, size_t* n) {
  const dtj_plan_args* d = (const dtj_plan_args*)a;
  return dt_plan_json(d->config, d->plan, b, c, n);
}
static dt_status dtj_plan_json(const dt_options* config, const dt_options* plan, char** json_out) {
  dtj_plan_args d;
  d.config = config;
  d.plan = plan;
  return dtj_json(dtj_json_plan, &d, json_out);
}
DTJ_JSON_FN(pipeline_schedule, dt_pipeline_schedule_json, const dt_options*)
DTJ_JSON_FN(cluster_calibrate, dt_cluster_calibrate_json, const dt_options*)
DTJ_JSON_FN(cluster_median, dt_cluster_median_json, const char*)
static dt_status dtj_pipeline_schedule_json(const dt_options* options, char** json_out) {
  return dtj_json(dtj_json_pipeline_schedule, options, json_out);
}
static dt_status dtj_cluster_calibrate_json(const dt_options* options, char** json_out) {
  return dtj_json_from(dtj_json_cluster_calibrate, options, 65536, json_out);
}
static dt_status dtj_cluster_median_json(const char* clusters, char** json_out) {
  return dtj_json(dtj_json_cluster_median, clusters, json_out);
}
%}

DTJ_REPLACES(plan_json)
DTJ_REPLACES(pipeline_schedule_json)
DTJ_REPLACES(cluster_calibrate_json)
DTJ_REPLACES(cluster_median_json)

dt_status dtj_plan_json(const dt_options* config, const dt_options* plan, char** json_out);
dt_status dtj_pipeline_schedule_json(const dt_options* options, char** json_out);
dt_status dtj_cluster_calibrate_json(const dt_options* options, char** json_out);
dt_status dtj_cluster_median_json(const char* clusters, char** json_out);
