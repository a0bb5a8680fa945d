/* dtrain_java.i: the Java part of dtrain.i (read before the header, see dtrain.i).
 *
 *   swig -java -package org.dtrain.internal -outdir <gen>/org/dtrain/internal \
 *        -I<prefix>/include -o <gen>/dtrain_wrap.c bindings/swig/dtrain.i
 *
 * The generated layer, org.dtrain.internal.DtrainNative, is the C API with Java types:
 *  - every handle (dt_tensor*, dt_mesh*, ...) is a plain `long`; no proxy classes, so
 *    nothing is finalized behind the host's back (org.dtrain's classes own the handles);
 *  - a dt_status other than DT_OK throws org.dtrain.DtrainException(status, message) from
 *    the C side of the same native call, after every array and string was released, with
 *    the message of dt_last_error_message() read on the thread that failed;
 *  - an out-handle or out-value (`dt_xxx** out`, `int64_t* out`, `const char** out`, ...)
 *    is the return value; functions with two or three outputs return a long[] / double[];
 *  - the JSON writers (buf, capacity, needed) return a String;
 *  - tensor copies take float[], int[], long[], short[], byte[], double[] (critical
 *    regions: no copy on HotSpot) or a direct java.nio.ByteBuffer (its address, no copy).
 * Helpers written here are `dtj_*` C functions; those that replace a C function keep its
 * name in Java (%rename), e.g. DtrainNative.dt_tensor_shape(long) returns a long[].
 */
%module(jniclassname="DtrainNativeJNI") DtrainNative

/* Let SWIG's int64_t be C's (long on LP64 Linux, the platform of this binding) so that no
 * call casts an int64_t* to a long long*; a C long is a Java long here. */
#define SWIGWORDSIZE64
%include <stdint.i>
%apply long long { long };

%javaconst(1);
%pragma(java) moduleclassmodifiers="public final class"
%pragma(java) jniclassclassmodifiers="final class"
%pragma(java) jniclasscode=%{
  static {
    NativeLoader.load();
  }
%}
/* Pointer types that reach no typemap would become SWIGTYPE_p_ proxy classes; the build
 * checks that none is generated, and none of them may finalize anything. */
%typemap(javafinalize) SWIGTYPE ""

%{
#include <dtrain/dtrain.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A failure found by a helper below before or instead of a library call: its message,
 * which dtj_throw prefers to dt_last_error_message() (both are this thread's). */
static _Thread_local const char* dtj_own_error = NULL;

static dt_status dtj_fail(dt_status status, const char* message) {
  dtj_own_error = message;
  return status;
}

/* java.lang.String from UTF-8 bytes; an invalid sequence becomes U+FFFD. */
static jstring dtj_new_string(JNIEnv* env, const char* s) {
  jchar* buf;
  size_t n, k = 0;
  const unsigned char *p, *end;
  jstring out;
  if (!s) return NULL;
  n = strlen(s);
  buf = (jchar*)malloc((n + 1) * sizeof(jchar)); /* at most one UTF-16 unit per byte */
  if (!buf) return (*env)->NewStringUTF(env, "(out of memory)");
  p = (const unsigned char*)s;
  end = p + n;
  while (p < end) {
    uint32_t c = *p, min;
    size_t len, i;
    if (c < 0x80) { buf[k++] = (jchar)c; ++p; continue; }
    if ((c & 0xE0) == 0xC0) { len = 2; c &= 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; c &= 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { len = 4; c &= 0x07; min = 0x10000; }
    else { buf[k++] = 0xFFFD; ++p; continue; }
    if ((size_t)(end - p) < len) { buf[k++] = 0xFFFD; ++p; continue; }
    for (i = 1; i < len && (p[i] & 0xC0) == 0x80; ++i) c = (c << 6) | (p[i] & 0x3F);
    if (i < len || c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
      buf[k++] = 0xFFFD; ++p; continue;
    }
    p += len;
    if (c >= 0x10000) {
      c -= 0x10000;
      buf[k++] = (jchar)(0xD800 + (c >> 10));
      buf[k++] = (jchar)(0xDC00 + (c & 0x3FF));
    } else {
      buf[k++] = (jchar)c;
    }
  }
  out = (*env)->NewString(env, buf, (jsize)k);
  free(buf);
  return out;
}

/* A malloc'ed UTF-8 copy of a Java string (JNI's own "UTF" is modified UTF-8, which
 * differs for U+0000 and above U+FFFF). NULL with a Java exception pending on failure. */
static char* dtj_utf8(JNIEnv* env, jstring js) {
  jsize n = (*env)->GetStringLength(env, js), i;
  const jchar* u;
  char* out;
  size_t k = 0;
  out = (char*)malloc((size_t)n * 3 + 1);
  if (!out) {
    SWIG_JavaThrowException(env, SWIG_JavaOutOfMemoryError, "string argument");
    return NULL;
  }
  u = (*env)->GetStringChars(env, js, NULL);
  if (!u) { free(out); return NULL; }
  for (i = 0; i < n; ++i) {
    uint32_t c = u[i];
    if (c == 0) {
      (*env)->ReleaseStringChars(env, js, u);
      free(out);
      SWIG_JavaThrowException(env, SWIG_JavaIllegalArgumentException,
                              "a string argument contains the character U+0000");
      return NULL;
    }
    if (c >= 0xD800 && c <= 0xDBFF && i + 1 < n && u[i + 1] >= 0xDC00 && u[i + 1] <= 0xDFFF) {
      c = 0x10000 + ((c - 0xD800) << 10) + (u[i + 1] - 0xDC00);
      ++i;
    } else if (c >= 0xD800 && c <= 0xDFFF) {
      c = 0xFFFD; /* a lone surrogate */
    }
    if (c < 0x80) {
      out[k++] = (char)c;
    } else if (c < 0x800) {
      out[k++] = (char)(0xC0 | (c >> 6));
      out[k++] = (char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out[k++] = (char)(0xE0 | (c >> 12));
      out[k++] = (char)(0x80 | ((c >> 6) & 0x3F));
      out[k++] = (char)(0x80 | (c & 0x3F));
    } else {
      out[k++] = (char)(0xF0 | (c >> 18));
      out[k++] = (char)(0x80 | ((c >> 12) & 0x3F));
      out[k++] = (char)(0x80 | ((c >> 6) & 0x3F));
      out[k++] = (char)(0x80 | (c & 0x3F));
    }
  }
  out[k] = '\0';
  (*env)->ReleaseStringChars(env, js, u);
  return out;
}

/* Throws org.dtrain.DtrainException(status, message) unless a Java exception is already
 * pending (a listener's own exception wins). Called in the same native call that failed. */
static void dtj_throw(JNIEnv* env, dt_status status) {
  const char* message = dtj_own_error ? dtj_own_error : dt_last_error_message();
  jclass cls;
  jmethodID ctor;
  jstring jmessage;
  jobject ex;
  dtj_own_error = NULL;
  if ((*env)->ExceptionCheck(env)) return;
  cls = (*env)->FindClass(env, "org/dtrain/DtrainException");
  if (!cls) return; /* NoClassDefFoundError is pending */
  ctor = (*env)->GetMethodID(env, cls, "<init>", "(ILjava/lang/String;)V");
  if (ctor) {
    jmessage = dtj_new_string(env, message ? message : "");
    if (jmessage) {
      ex = (*env)->NewObject(env, cls, ctor, (jint)status, jmessage);
      if (ex) {
        (*env)->Throw(env, (jthrowable)ex);
        (*env)->DeleteLocalRef(env, ex);
      }
      (*env)->DeleteLocalRef(env, jmessage);
    }
  }
  (*env)->DeleteLocalRef(env, cls);
}

/* Up to DT_MAX_DIMS integers or doubles that a helper returns as a Java array. */
typedef struct { int32_t n; int64_t v[DT_MAX_DIMS]; } dtj_longs;
typedef struct { int32_t n; double v[DT_MAX_DIMS]; } dtj_doubles;

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

/* {calls, bytes, seconds} */
static dt_status dtj_mesh_comm_stats(dt_mesh* mesh, int32_t rank, const char* axis,
                                     const char* kind, dtj_doubles* out) {
  int64_t calls = 0, bytes = 0;
  double seconds = 0;
  dt_status s = dt_mesh_comm_stats(mesh, rank, axis, kind, &calls, &bytes, &seconds);
  if (s != DT_OK) return s;
  out->n = 3;
  out->v[0] = (double)calls;
  out->v[1] = (double)bytes;
  out->v[2] = seconds;
  return DT_OK;
}

/* The JSON writers: ask for the size, then write; *out is malloc'ed (freed by the wrapper). */
typedef dt_status (*dtj_json_fn)(const void* arg, char* buf, size_t capacity, size_t* needed);

static dt_status dtj_json(dtj_json_fn fn, const void* arg, char** out) {
  size_t need = 0;
  int attempt;
  dt_status s = fn(arg, NULL, 0, &need);
  if (s != DT_OK) return s;
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

static dt_status dtj_json_memory(const void* a, char* b, size_t c, size_t* n) {
  return dt_memory_report_json((const char*)a, b, c, n);
}
static dt_status dtj_json_comm(const void* a, char* b, size_t c, size_t* n) {
  return dt_mesh_comm_report_json((dt_mesh*)a, b, c, n);
}
static dt_status dtj_json_stats(const void* a, char* b, size_t c, size_t* n) {
  return dt_engine_last_stats_json((dt_engine*)a, b, c, n);
}
static dt_status dtj_json_gen_stats(const void* a, char* b, size_t c, size_t* n) {
  return dt_engine_last_generate_stats_json((dt_engine*)a, b, c, n);
}
static dt_status dtj_json_checkpoint(const void* a, char* b, size_t c, size_t* n) {
  return dt_checkpoint_info_json((const char*)a, b, c, n);
}

static dt_status dtj_memory_report_json(const char* device, char** json_out) {
  return dtj_json(dtj_json_memory, device, json_out);
}
static dt_status dtj_mesh_comm_report_json(dt_mesh* mesh, char** json_out) {
  if (!mesh) return dt_mesh_comm_report_json(NULL, NULL, 0, NULL);
  return dtj_json(dtj_json_comm, mesh, json_out);
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

/* Host copies: `count` elements of the array's type; the library checks the byte size. */
#define DTJ_COPY_HELPERS(SUFFIX, CTYPE)                                                    \
  static dt_status dtj_tensor_copy_from_##SUFFIX(dt_tensor* t, const CTYPE* data,          \
                                                 int64_t count) {                          \
    return dt_tensor_copy_from_host(t, data, (size_t)count * sizeof(CTYPE));               \
  }                                                                                        \
  static dt_status dtj_tensor_copy_to_##SUFFIX(const dt_tensor* t, CTYPE* data,            \
                                               int64_t count) {                            \
    return dt_tensor_copy_to_host(t, data, (size_t)count * sizeof(CTYPE));                 \
  }
DTJ_COPY_HELPERS(f32, float)
DTJ_COPY_HELPERS(i32, int32_t)
DTJ_COPY_HELPERS(i64, int64_t)
DTJ_COPY_HELPERS(i16, int16_t)
DTJ_COPY_HELPERS(i8, int8_t)

/* double[] values into or out of a floating tensor: through f32, converted by the library
 * (dt_tensor_copy) when the tensor is bf16 or f16. */
static dt_status dtj_f32_twin(const dt_tensor* t, dt_dtype* dtype, dt_tensor** twin) {
  int64_t shape[DT_MAX_DIMS];
  int32_t ndim = 0;
  dt_status s = dt_tensor_dtype(t, dtype);
  if (s != DT_OK) return s;
  if (*dtype != DT_F32 && *dtype != DT_BF16 && *dtype != DT_F16)
    return dtj_fail(DT_ERR_INVALID_ARGUMENT, "double[] values need a floating tensor (f32, bf16, f16)");
  *twin = NULL;
  if (*dtype == DT_F32) return DT_OK;
  if ((s = dt_tensor_ndim(t, &ndim)) != DT_OK) return s;
  if (ndim < 0 || ndim > DT_MAX_DIMS) return dtj_fail(DT_ERR_INTERNAL, "tensor ndim out of range");
  if ((s = dt_tensor_shape(t, shape, DT_MAX_DIMS)) != DT_OK) return s;
  return dt_tensor_create(DT_F32, shape, ndim, "cpu", NULL, twin);
}

static dt_status dtj_tensor_copy_from_f64(dt_tensor* t, const double* data, int64_t count) {
  dt_dtype dtype = 0;
  dt_tensor* twin = NULL;
  float* f;
  int64_t i;
  dt_status s = dtj_f32_twin(t, &dtype, &twin);
  if (s != DT_OK) return s;
  f = (float*)malloc((size_t)(count > 0 ? count : 1) * sizeof(float));
  if (!f) { dt_tensor_destroy(twin); return dtj_fail(DT_ERR_OUT_OF_MEMORY, "no memory to convert double[]"); }
  for (i = 0; i < count; ++i) f[i] = (float)data[i];
  if (twin) {
    s = dt_tensor_copy_from_host(twin, f, (size_t)count * sizeof(float));
    if (s == DT_OK) s = dt_tensor_copy(twin, t);
  } else {
    s = dt_tensor_copy_from_host(t, f, (size_t)count * sizeof(float));
  }
  free(f);
  dt_tensor_destroy(twin);
  return s;
}

static dt_status dtj_tensor_copy_to_f64(const dt_tensor* t, double* data, int64_t count) {
  dt_dtype dtype = 0;
  dt_tensor* twin = NULL;
  float* f;
  int64_t i;
  dt_status s = dtj_f32_twin(t, &dtype, &twin);
  if (s != DT_OK) return s;
  f = (float*)malloc((size_t)(count > 0 ? count : 1) * sizeof(float));
  if (!f) { dt_tensor_destroy(twin); return dtj_fail(DT_ERR_OUT_OF_MEMORY, "no memory to convert double[]"); }
  if (twin) {
    s = dt_tensor_copy(t, twin);
    if (s == DT_OK) s = dt_tensor_copy_to_host(twin, f, (size_t)count * sizeof(float));
  } else {
    s = dt_tensor_copy_to_host(t, f, (size_t)count * sizeof(float));
  }
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
 * thread. After the listener throws, it is called no more and its exception propagates. */
typedef struct {
  JNIEnv* env;
  jobject listener;
  jmethodID on_token;
  int failed;
} dtj_stream;

static void dtj_stream_token(void* user, int32_t prompt_index, int32_t token) {
  dtj_stream* st = (dtj_stream*)user;
  if (st->failed) return;
  (*st->env)->CallVoidMethod(st->env, st->listener, st->on_token, (jint)prompt_index, (jint)token);
  if ((*st->env)->ExceptionCheck(st->env)) st->failed = 1;
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
  return dt_engine_generate_stream(engine, tokens, lengths, (int32_t)n_prompts, options,
                                   dtj_stream_token, &st, out_tokens, capacity, out_lengths);
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
/* dt_status: void in Java, or the value of the call's output (DTJ_RETURNS below);     */
/* non-OK throws DtrainException once the arguments are released ("ret" runs last).    */
/* ---------------------------------------------------------------------------------- */
%typemap(jni) dt_status "void"
%typemap(jtype) dt_status "void"
%typemap(jstype) dt_status "void"
%typemap(javaout) dt_status { $jnicall; }
%typemap(out) dt_status ""
%typemap(ret) dt_status %{
  if ($1 != DT_OK) dtj_throw(jenv, $1);
%}
/* ... except as the argument of dt_status_string. */
%apply int { dt_status status };

%define DTJ_RETURNS(FUNC, JNITYPE, JAVATYPE)
%typemap(jni) dt_status FUNC "JNITYPE"
%typemap(jtype) dt_status FUNC "JAVATYPE"
%typemap(jstype) dt_status FUNC "JAVATYPE"
%typemap(javaout) dt_status FUNC { return $jnicall; }
%enddef

/* ---------------------------------------------------------------------------------- */
/* Handles: a long in Java (0 is NULL); an out-handle is the return value.              */
/* ---------------------------------------------------------------------------------- */
%define DTJ_HANDLE(T)
%typemap(jni) T*, const T* "jlong"
%typemap(jtype) T*, const T* "long"
%typemap(jstype) T*, const T* "long"
%typemap(javain) T*, const T* "$javainput"
%typemap(in) T*, const T* %{ $1 = ($1_ltype)(intptr_t)$input; %}
%typemap(in, numinputs=0) T** (T* handle) %{ handle = NULL; $1 = &handle; %}
%typemap(argout) T** %{ $result = (jlong)(intptr_t)handle$argnum; %}
%enddef
DTJ_HANDLE(dt_options)
DTJ_HANDLE(dt_tensor)
DTJ_HANDLE(dt_mesh)
DTJ_HANDLE(dt_module)
DTJ_HANDLE(dt_optimizer)
DTJ_HANDLE(dt_engine)
DTJ_HANDLE(dt_dataset)
DTJ_HANDLE(dt_loader)

/* ---------------------------------------------------------------------------------- */
/* Scalars                                                                              */
/* ---------------------------------------------------------------------------------- */
/* uint64_t (a fill's seed) is a Java long holding the same 64 bits. */
%apply long long { uint64_t };

/* Strings in: proper UTF-8 (null stays NULL). */
%typemap(in) const char* %{
  $1 = NULL;
  if ($input) {
    $1 = ($1_ltype)dtj_utf8(jenv, $input);
    if (!$1) return $null;
  }
%}
%typemap(freearg) const char* %{ free((void*)$1); %}

%define DTJ_OUT_SCALAR(CTYPE, JNITYPE)
%typemap(in, numinputs=0) CTYPE* (CTYPE value) %{ value = 0; $1 = &value; %}
%typemap(argout) CTYPE* %{ $result = (JNITYPE)value$argnum; %}
%enddef
DTJ_OUT_SCALAR(int64_t, jlong)
DTJ_OUT_SCALAR(int32_t, jint)
DTJ_OUT_SCALAR(dt_dtype, jint)
DTJ_OUT_SCALAR(size_t, jlong)
DTJ_OUT_SCALAR(double, jdouble)

%typemap(in, numinputs=0) const char** (const char* str) %{ str = NULL; $1 = ($1_ltype)&str; %}
%typemap(argout) const char** %{ $result = dtj_new_string(jenv, str$argnum); %}

/* A malloc'ed string that a helper returns (JSON). */
%typemap(in, numinputs=0) char** json_out (char* json) %{ json = NULL; $1 = &json; %}
%typemap(argout) char** json_out %{ $result = json$argnum ? dtj_new_string(jenv, json$argnum) : NULL; %}
%typemap(freearg) char** json_out %{ free(json$argnum); %}

%typemap(in, numinputs=0) dtj_longs* (dtj_longs longs) %{ longs.n = 0; $1 = &longs; %}
%typemap(argout) dtj_longs* %{
  $result = (*jenv)->NewLongArray(jenv, longs$argnum.n);
  if ($result) (*jenv)->SetLongArrayRegion(jenv, $result, 0, longs$argnum.n, (const jlong*)longs$argnum.v);
%}
%typemap(in, numinputs=0) dtj_doubles* (dtj_doubles doubles) %{ doubles.n = 0; $1 = &doubles; %}
%typemap(argout) dtj_doubles* %{
  $result = (*jenv)->NewDoubleArray(jenv, doubles$argnum.n);
  if ($result) (*jenv)->SetDoubleArrayRegion(jenv, $result, 0, doubles$argnum.n, doubles$argnum.v);
%}

/* A shape: long[] (null: a scalar). */
%typemap(jni) (const int64_t* shape, int32_t ndim) "jlongArray"
%typemap(jtype) (const int64_t* shape, int32_t ndim) "long[]"
%typemap(jstype) (const int64_t* shape, int32_t ndim) "long[]"
%typemap(javain) (const int64_t* shape, int32_t ndim) "$javainput"
%typemap(in) (const int64_t* shape, int32_t ndim) %{
  $1 = NULL;
  $2 = 0;
  if ($input) {
    $2 = (int32_t)(*jenv)->GetArrayLength(jenv, $input);
    if ($2 > 0) {
      $1 = (int64_t*)(*jenv)->GetLongArrayElements(jenv, $input, NULL);
      if (!$1) return $null;
    }
  }
%}
%typemap(argout) (const int64_t* shape, int32_t ndim) ""
%typemap(freearg) (const int64_t* shape, int32_t ndim) %{
  if ($1) (*jenv)->ReleaseLongArrayElements(jenv, $input, (jlong*)$1, JNI_ABORT);
%}

/* ---------------------------------------------------------------------------------- */
/* Arrays: (pointer, length) from one Java array. CRIT_*: a critical region (the call   */
/* is a memcpy); ELEMS_*: Get<T>ArrayElements, for calls that run long or call Java.    */
/* *_IN are not written back.                                                           */
/* ---------------------------------------------------------------------------------- */
%define DTJ_ARRAY(CTYPE, JARRAY, JAVATYPE, JNAME)
%typemap(jni) (const CTYPE* CRIT_IN, int64_t LEN), (CTYPE* CRIT_OUT, int64_t LEN),
              (const CTYPE* ELEMS_IN, int64_t LEN), (CTYPE* ELEMS_OUT, int64_t LEN) "JARRAY"
%typemap(jtype) (const CTYPE* CRIT_IN, int64_t LEN), (CTYPE* CRIT_OUT, int64_t LEN),
              (const CTYPE* ELEMS_IN, int64_t LEN), (CTYPE* ELEMS_OUT, int64_t LEN) "JAVATYPE[]"
%typemap(jstype) (const CTYPE* CRIT_IN, int64_t LEN), (CTYPE* CRIT_OUT, int64_t LEN),
              (const CTYPE* ELEMS_IN, int64_t LEN), (CTYPE* ELEMS_OUT, int64_t LEN) "JAVATYPE[]"
%typemap(javain) (const CTYPE* CRIT_IN, int64_t LEN), (CTYPE* CRIT_OUT, int64_t LEN),
              (const CTYPE* ELEMS_IN, int64_t LEN), (CTYPE* ELEMS_OUT, int64_t LEN) "$javainput"
%typemap(in) (const CTYPE* CRIT_IN, int64_t LEN), (CTYPE* CRIT_OUT, int64_t LEN) %{
  if (!$input) {
    SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, "array is null");
    return $null;
  }
  $2 = (int64_t)(*jenv)->GetArrayLength(jenv, $input);
  $1 = ($1_ltype)(*jenv)->GetPrimitiveArrayCritical(jenv, $input, NULL);
  if (!$1) return $null;
%}
%typemap(argout) (const CTYPE* CRIT_IN, int64_t LEN), (CTYPE* CRIT_OUT, int64_t LEN),
                 (const CTYPE* ELEMS_IN, int64_t LEN), (CTYPE* ELEMS_OUT, int64_t LEN) ""
%typemap(freearg) (const CTYPE* CRIT_IN, int64_t LEN) %{
  if ($1) (*jenv)->ReleasePrimitiveArrayCritical(jenv, $input, (void*)$1, JNI_ABORT);
%}
%typemap(freearg) (CTYPE* CRIT_OUT, int64_t LEN) %{
  if ($1) (*jenv)->ReleasePrimitiveArrayCritical(jenv, $input, (void*)$1, 0);
%}
%typemap(in) (const CTYPE* ELEMS_IN, int64_t LEN), (CTYPE* ELEMS_OUT, int64_t LEN) %{
  if (!$input) {
    SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, "array is null");
    return $null;
  }
  $2 = (int64_t)(*jenv)->GetArrayLength(jenv, $input);
  $1 = ($1_ltype)(*jenv)->Get##JNAME##ArrayElements(jenv, $input, NULL);
  if (!$1) return $null;
%}
%typemap(freearg) (const CTYPE* ELEMS_IN, int64_t LEN) %{
  if ($1) (*jenv)->Release##JNAME##ArrayElements(jenv, $input, (void*)$1, JNI_ABORT);
%}
%typemap(freearg) (CTYPE* ELEMS_OUT, int64_t LEN) %{
  if ($1) (*jenv)->Release##JNAME##ArrayElements(jenv, $input, (void*)$1, 0);
%}
%enddef
DTJ_ARRAY(float, jfloatArray, float, Float)
DTJ_ARRAY(double, jdoubleArray, double, Double)
DTJ_ARRAY(int32_t, jintArray, int, Int)
DTJ_ARRAY(int64_t, jlongArray, long, Long)
DTJ_ARRAY(int16_t, jshortArray, short, Short)
DTJ_ARRAY(int8_t, jbyteArray, byte, Byte)

/* A direct java.nio.ByteBuffer: its address and capacity (no copy). */
%typemap(jni) (void* BUFFER, int64_t CAPACITY) "jobject"
%typemap(jtype) (void* BUFFER, int64_t CAPACITY) "java.nio.ByteBuffer"
%typemap(jstype) (void* BUFFER, int64_t CAPACITY) "java.nio.ByteBuffer"
%typemap(javain) (void* BUFFER, int64_t CAPACITY) "$javainput"
%typemap(in) (void* BUFFER, int64_t CAPACITY) %{
  if (!$input) {
    SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, "buffer is null");
    return $null;
  }
  $1 = (*jenv)->GetDirectBufferAddress(jenv, $input);
  $2 = (int64_t)(*jenv)->GetDirectBufferCapacity(jenv, $input);
  if (!$1 || $2 < 0) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "buffer is not a direct ByteBuffer");
    return $null;
  }
%}

/* The streaming listener: an org.dtrain.TokenListener, called on this thread. */
%typemap(jni) (jobject listener, JNIEnv* env) "jobject"
%typemap(jtype) (jobject listener, JNIEnv* env) "org.dtrain.TokenListener"
%typemap(jstype) (jobject listener, JNIEnv* env) "org.dtrain.TokenListener"
%typemap(javain) (jobject listener, JNIEnv* env) "$javainput"
%typemap(in) (jobject listener, JNIEnv* env) %{ $1 = $input; $2 = jenv; %}

/* ---------------------------------------------------------------------------------- */
/* What each call returns in Java                                                       */
/* ---------------------------------------------------------------------------------- */
DTJ_RETURNS(dt_options_create, jlong, long)
DTJ_RETURNS(dt_tensor_create, jlong, long)
DTJ_RETURNS(dt_tensor_create_on_mesh, jlong, long)
DTJ_RETURNS(dt_tensor_piece, jlong, long)
DTJ_RETURNS(dt_mesh_create, jlong, long)
DTJ_RETURNS(dt_module_create_gpt, jlong, long)
DTJ_RETURNS(dt_module_create_mlp, jlong, long)
DTJ_RETURNS(dt_module_create_sequential, jlong, long)
DTJ_RETURNS(dt_module_create_from_checkpoint, jlong, long)
DTJ_RETURNS(dt_module_param, jlong, long)
DTJ_RETURNS(dt_module_forward, jlong, long)
DTJ_RETURNS(dt_module_backward, jlong, long)
DTJ_RETURNS(dt_optimizer_create, jlong, long)
DTJ_RETURNS(dt_engine_create, jlong, long)
DTJ_RETURNS(dt_dataset_create, jlong, long)
DTJ_RETURNS(dt_loader_create, jlong, long)
DTJ_RETURNS(dtj_loss_with_grad, jlong, long)

DTJ_RETURNS(dt_options_get_int, jlong, long)
DTJ_RETURNS(dt_options_count, jlong, long)
DTJ_RETURNS(dt_tensor_numel, jlong, long)
DTJ_RETURNS(dt_tensor_nbytes, jlong, long)
DTJ_RETURNS(dt_module_param_count, jlong, long)
DTJ_RETURNS(dt_module_param_count_tensors, jlong, long)
DTJ_RETURNS(dt_engine_step, jlong, long)
DTJ_RETURNS(dt_dataset_size, jlong, long)
DTJ_RETURNS(dt_dataset_context, jlong, long)
DTJ_RETURNS(dt_loader_batches_per_epoch, jlong, long)
DTJ_RETURNS(dt_mesh_comm_wire_bytes, jlong, long)

DTJ_RETURNS(dt_options_get_bool, jint, int)
DTJ_RETURNS(dt_tensor_dtype, jint, int)
DTJ_RETURNS(dt_tensor_ndim, jint, int)
DTJ_RETURNS(dt_tensor_piece_count, jint, int)
DTJ_RETURNS(dt_device_count, jint, int)
DTJ_RETURNS(dt_mesh_world_size, jint, int)
DTJ_RETURNS(dt_mesh_local_rank_count, jint, int)
DTJ_RETURNS(dt_mesh_local_rank, jint, int)
DTJ_RETURNS(dt_mesh_axis_size, jint, int)
DTJ_RETURNS(dt_mesh_coord, jint, int)

DTJ_RETURNS(dt_options_get_double, jdouble, double)
DTJ_RETURNS(dt_engine_train_step, jdouble, double)
DTJ_RETURNS(dt_engine_eval, jdouble, double)
DTJ_RETURNS(dtj_loss, jdouble, double)

DTJ_RETURNS(dt_options_get_string, jstring, String)
DTJ_RETURNS(dt_tensor_device, jstring, String)
DTJ_RETURNS(dt_mesh_backend, jstring, String)
DTJ_RETURNS(dt_module_param_name, jstring, String)
DTJ_RETURNS(dtj_memory_report_json, jstring, String)
DTJ_RETURNS(dtj_mesh_comm_report_json, jstring, String)
DTJ_RETURNS(dtj_engine_last_stats_json, jstring, String)
DTJ_RETURNS(dtj_engine_last_generate_stats_json, jstring, String)
DTJ_RETURNS(dtj_checkpoint_info_json, jstring, String)

DTJ_RETURNS(dtj_tensor_shape, jlongArray, long[])
DTJ_RETURNS(dtj_memory_stats, jlongArray, long[])
DTJ_RETURNS(dtj_memory_rank_stats, jlongArray, long[])
DTJ_RETURNS(dtj_loader_position, jlongArray, long[])
DTJ_RETURNS(dtj_mesh_comm_stats, jdoubleArray, double[])

/* ---------------------------------------------------------------------------------- */
/* C functions replaced by the helpers (which take their Java names)                    */
/* ---------------------------------------------------------------------------------- */
%ignore dt_tensor_copy_from_host;
%ignore dt_tensor_copy_to_host;
%ignore dt_tensor_shape;
%ignore dt_memory_stats;
%ignore dt_memory_rank_stats;
%ignore dt_memory_report_json;
%ignore dt_mesh_comm_stats;
%ignore dt_mesh_comm_report_json;
%ignore dt_engine_last_stats_json;
%ignore dt_engine_last_generate_stats_json;
%ignore dt_checkpoint_info_json;
%ignore dt_engine_generate;
%ignore dt_engine_generate_stream;
%ignore dt_dataset_example;
%ignore dt_loader_position;
%ignore dt_loss;

%rename(dt_tensor_shape) dtj_tensor_shape;
%rename(dt_memory_stats) dtj_memory_stats;
%rename(dt_memory_rank_stats) dtj_memory_rank_stats;
%rename(dt_memory_report_json) dtj_memory_report_json;
%rename(dt_mesh_comm_stats) dtj_mesh_comm_stats;
%rename(dt_mesh_comm_report_json) dtj_mesh_comm_report_json;
%rename(dt_engine_last_stats_json) dtj_engine_last_stats_json;
%rename(dt_engine_last_generate_stats_json) dtj_engine_last_generate_stats_json;
%rename(dt_checkpoint_info_json) dtj_checkpoint_info_json;
%rename(dt_engine_generate) dtj_engine_generate;
%rename(dt_engine_generate_stream) dtj_engine_generate_stream;
%rename(dt_dataset_example) dtj_dataset_example;
%rename(dt_loader_position) dtj_loader_position;
%rename(dt_loss) dtj_loss;
%rename(dt_loss_with_grad) dtj_loss_with_grad;
%rename(dt_module_backward_no_dx) dtj_module_backward_no_dx;

/* The helpers as SWIG sees them (defined static above). */
%apply (const float* CRIT_IN, int64_t LEN) { (const float* data, int64_t count) };
%apply (float* CRIT_OUT, int64_t LEN) { (float* data, int64_t count) };
%apply (const double* CRIT_IN, int64_t LEN) { (const double* data, int64_t count) };
%apply (double* CRIT_OUT, int64_t LEN) { (double* data, int64_t count) };
%apply (const int32_t* CRIT_IN, int64_t LEN) { (const int32_t* data, int64_t count) };
%apply (int32_t* CRIT_OUT, int64_t LEN) { (int32_t* data, int64_t count) };
%apply (const int64_t* CRIT_IN, int64_t LEN) { (const int64_t* data, int64_t count) };
%apply (int64_t* CRIT_OUT, int64_t LEN) { (int64_t* data, int64_t count) };
%apply (const int16_t* CRIT_IN, int64_t LEN) { (const int16_t* data, int64_t count) };
%apply (int16_t* CRIT_OUT, int64_t LEN) { (int16_t* data, int64_t count) };
%apply (const int8_t* CRIT_IN, int64_t LEN) { (const int8_t* data, int64_t count) };
%apply (int8_t* CRIT_OUT, int64_t LEN) { (int8_t* data, int64_t count) };
%apply (const int32_t* ELEMS_IN, int64_t LEN) { (const int32_t* tokens, int64_t n_tokens) };
%apply (const int64_t* ELEMS_IN, int64_t LEN) { (const int64_t* lengths, int64_t n_prompts) };
%apply (int32_t* ELEMS_OUT, int64_t LEN) { (int32_t* out_tokens, int64_t n_out_tokens),
                                          (int32_t* inputs, int64_t inputs_len),
                                          (int32_t* targets, int64_t targets_len) };
%apply (int64_t* ELEMS_OUT, int64_t LEN) { (int64_t* out_lengths, int64_t n_out_lengths) };
%apply (double* ELEMS_OUT, int64_t LEN) { (double* loss_out, int64_t loss_out_len) };
%apply (void* BUFFER, int64_t CAPACITY) { (void* address, int64_t capacity) };

dt_status dtj_tensor_shape(const dt_tensor* tensor, dtj_longs* out);
dt_status dtj_memory_stats(const char* device, int32_t tag, dtj_longs* out);
dt_status dtj_memory_rank_stats(const char* device, int32_t rank, int32_t tag, dtj_longs* out);
dt_status dtj_loader_position(dt_loader* loader, dtj_longs* out);
dt_status dtj_mesh_comm_stats(dt_mesh* mesh, int32_t rank, const char* axis, const char* kind,
                              dtj_doubles* out);
dt_status dtj_memory_report_json(const char* device, char** json_out);
dt_status dtj_mesh_comm_report_json(dt_mesh* mesh, char** json_out);
dt_status dtj_engine_last_stats_json(dt_engine* engine, char** json_out);
dt_status dtj_engine_last_generate_stats_json(dt_engine* engine, char** json_out);
dt_status dtj_checkpoint_info_json(const char* path_stem, char** json_out);
dt_status dtj_tensor_copy_from_f32(dt_tensor* tensor, const float* data, int64_t count);
dt_status dtj_tensor_copy_to_f32(const dt_tensor* tensor, float* data, int64_t count);
dt_status dtj_tensor_copy_from_f64(dt_tensor* tensor, const double* data, int64_t count);
dt_status dtj_tensor_copy_to_f64(const dt_tensor* tensor, double* data, int64_t count);
dt_status dtj_tensor_copy_from_i32(dt_tensor* tensor, const int32_t* data, int64_t count);
dt_status dtj_tensor_copy_to_i32(const dt_tensor* tensor, int32_t* data, int64_t count);
dt_status dtj_tensor_copy_from_i64(dt_tensor* tensor, const int64_t* data, int64_t count);
dt_status dtj_tensor_copy_to_i64(const dt_tensor* tensor, int64_t* data, int64_t count);
dt_status dtj_tensor_copy_from_i16(dt_tensor* tensor, const int16_t* data, int64_t count);
dt_status dtj_tensor_copy_to_i16(const dt_tensor* tensor, int16_t* data, int64_t count);
dt_status dtj_tensor_copy_from_i8(dt_tensor* tensor, const int8_t* data, int64_t count);
dt_status dtj_tensor_copy_to_i8(const dt_tensor* tensor, int8_t* data, int64_t count);
dt_status dtj_tensor_copy_from_buffer(dt_tensor* tensor, void* address, int64_t capacity,
                                      int64_t offset, int64_t bytes);
dt_status dtj_tensor_copy_to_buffer(const dt_tensor* tensor, void* address, int64_t capacity,
                                    int64_t offset, int64_t bytes);
dt_status dtj_dataset_example(const dt_dataset* dataset, int64_t index, int32_t* inputs,
                              int64_t inputs_len, int32_t* targets, int64_t targets_len);
dt_status dtj_engine_generate(dt_engine* engine, const int32_t* tokens, int64_t n_tokens,
                              const int64_t* lengths, int64_t n_prompts, const dt_options* options,
                              int32_t* out_tokens, int64_t n_out_tokens, int64_t capacity,
                              int64_t* out_lengths, int64_t n_out_lengths);
dt_status dtj_engine_generate_stream(dt_engine* engine, const int32_t* tokens, int64_t n_tokens,
                                     const int64_t* lengths, int64_t n_prompts,
                                     const dt_options* options, jobject listener, JNIEnv* env,
                                     int32_t* out_tokens, int64_t n_out_tokens, int64_t capacity,
                                     int64_t* out_lengths, int64_t n_out_lengths);
dt_status dtj_module_backward_no_dx(dt_module* module, const dt_tensor* dy);
dt_status dtj_loss(const char* kind, const dt_tensor* pred, const dt_tensor* target, double* out);
dt_status dtj_loss_with_grad(const char* kind, const dt_tensor* pred, const dt_tensor* target,
                             double* loss_out, int64_t loss_out_len, dt_tensor** out);
