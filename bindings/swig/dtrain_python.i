/* dtrain_python.i: the Python part of dtrain.i. It makes the raw module dtrain.native:
 * every dt_* function, with
 *  - a dt_status other than DT_OK raised as the dtrain error class of that status, built
 *    from dt_last_error_message() inside the same call (the message is thread-local);
 *  - out-pointers returned (several as a tuple, in declaration order);
 *  - host memory passed through the buffer protocol (numpy arrays, memoryview, bytearray,
 *    array.array) without a copy: src/dst, dims, token arrays, a tokenizer's text and ids;
 *  - the GIL released while libdtrain runs (threads="1"), and taken back by the token
 *    callbacks of dt_engine_generate_stream and _v2 (an exception in a _v2 callback stops
 *    the generation and is raised) and by the release callback of lent memory;
 *  - dt_cancel_request and the other flag calls keeping the GIL (one atomic operation);
 *  - zero-copy memory: dt_tensor_data's address as an int; dt_tensor_create_from_memory
 *    taking an address and an owner object, whose reference the release callback drops;
 *    and the DLPack capsule protocol (_dlpack_export, _dlpack_take, ...) over its own
 *    copy of the DLManagedTensor ABI;
 *  - dt_server_submit without its callback, which would run on the server's thread: the
 *    package reads a request's tokens with dt_server_poll instead.
 * The classes users see are in bindings/python/dtrain/ (Python), over this module. */
%module(package="dtrain", threads="1") native

%{
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dtrain/dtrain.h>

/* The exception class of each status, registered by dtrain/errors.py at import. */
#define DTPY_MAX_STATUS 64
static PyObject* dtpy_error_types[DTPY_MAX_STATUS];

/* Sets the Python error for a failed call: called with the GIL held, on the thread that
 * made the call, before anything else can replace the message. */
static void dtpy_raise(dt_status status) {
  PyObject* type = (status > 0 && status < DTPY_MAX_STATUS) ? dtpy_error_types[status] : NULL;
  if (type == NULL) type = dtpy_error_types[0] ? dtpy_error_types[0] : PyExc_RuntimeError;
  PyObject* args = Py_BuildValue("(is)", (int)status, dt_last_error_message());
  if (args != NULL) {
    PyErr_SetObject(type, args);
    Py_DECREF(args);
  }
}

/* dt_engine_generate_stream's callback: a Python callable, called with the GIL taken.
 * The first exception it raises is kept and raised once the call returns; later tokens
 * are not passed on. */
typedef struct {
  PyObject* fn;
  PyObject* exc_type;
  PyObject* exc_value;
  PyObject* exc_tb;
} dtpy_token_sink;

static void dtpy_on_token(void* user, int32_t prompt_index, int32_t token) {
  dtpy_token_sink* sink = (dtpy_token_sink*)user;
  PyGILState_STATE gil = PyGILState_Ensure();
  if (sink->exc_type == NULL) {
    PyObject* r = PyObject_CallFunction(sink->fn, "ii", (int)prompt_index, (int)token);
    if (r == NULL) PyErr_Fetch(&sink->exc_type, &sink->exc_value, &sink->exc_tb);
    Py_XDECREF(r);
  }
  PyGILState_Release(gil);
}

/* dt_engine_generate_stream_v2's callback: the same sink; a true result or an exception
 * asks libdtrain to stop (the exception is raised once the call returns). */
static int32_t dtpy_on_token_v2(void* user, int32_t prompt_index, int32_t token) {
  dtpy_token_sink* sink = (dtpy_token_sink*)user;
  int32_t stop = 1;
  PyGILState_STATE gil = PyGILState_Ensure();
  if (sink->exc_type == NULL) {
    PyObject* r = PyObject_CallFunction(sink->fn, "ii", (int)prompt_index, (int)token);
    int truth = r == NULL ? -1 : PyObject_IsTrue(r);
    if (truth < 0) PyErr_Fetch(&sink->exc_type, &sink->exc_value, &sink->exc_tb);
    stop = truth != 0;
    Py_XDECREF(r);
  }
  PyGILState_Release(gil);
  return stop;
}

/* Python 3.13 made the check public; before, only the underscored name exists. */
#if PY_VERSION_HEX >= 0x030D0000
#define DTPY_FINALIZING() Py_IsFinalizing()
#else
#define DTPY_FINALIZING() _Py_IsFinalizing()
#endif

/* Drops a reference from any thread (libdtrain may release lent memory on one of its own).
 * Once the interpreter is finishing, the reference is left: touching it could hang. */
static void dtpy_drop(void* obj) {
  if (obj == NULL || !Py_IsInitialized() || DTPY_FINALIZING()) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  Py_DECREF((PyObject*)obj);
  PyGILState_Release(gil);
}
%}

/* Registers the class raised for `status` (0: the class for unknown codes). */
%nothread _set_error_type;
%inline %{
static void _set_error_type(int status, PyObject* type) {
  if (status < 0 || status >= DTPY_MAX_STATUS) return;
  Py_XINCREF(type);
  Py_XDECREF(dtpy_error_types[status]);
  dtpy_error_types[status] = type;
}
%}

/* ---- statuses: raise, or return nothing (out-pointers then make the result) ---------- */
%typemap(out) dt_status {
  if ($1 != DT_OK) {
    dtpy_raise($1);
    SWIG_fail;
  }
  $result = SWIG_Py_Void();
}
/* dt_status_string's argument is a plain number, not a result. */
%typemap(in) dt_status status {
  $1 = (dt_status)PyLong_AsLong($input);
  if (PyErr_Occurred()) SWIG_fail;
}

/* ---- out-pointers ------------------------------------------------------------------- */
%define DTPY_OUT_HANDLE(TYPE)
%typemap(in, numinputs=0) TYPE** (TYPE* tmp = NULL) "$1 = &tmp;";
%typemap(argout) TYPE** {
  $result = SWIG_Python_AppendOutput($result, SWIG_NewPointerObj(tmp$argnum, $descriptor(TYPE*), 0));
}
%enddef
DTPY_OUT_HANDLE(dt_options)
DTPY_OUT_HANDLE(dt_tensor)
DTPY_OUT_HANDLE(dt_mesh)
DTPY_OUT_HANDLE(dt_module)
DTPY_OUT_HANDLE(dt_optimizer)
DTPY_OUT_HANDLE(dt_engine)
DTPY_OUT_HANDLE(dt_dataset)
DTPY_OUT_HANDLE(dt_loader)
DTPY_OUT_HANDLE(dt_server)
DTPY_OUT_HANDLE(dt_tokenizer)
DTPY_OUT_HANDLE(dt_detokenizer)

%define DTPY_OUT_VALUE(TYPE, NAMES, MAKE)
%typemap(in, numinputs=0) TYPE* NAMES (TYPE tmp = 0) "$1 = &tmp;";
%typemap(argout) TYPE* NAMES "$result = SWIG_Python_AppendOutput($result, MAKE(tmp$argnum));";
%enddef
DTPY_OUT_VALUE(int64_t, out, PyLong_FromLongLong)
DTPY_OUT_VALUE(int64_t, current_bytes, PyLong_FromLongLong)
DTPY_OUT_VALUE(int64_t, peak_bytes, PyLong_FromLongLong)
DTPY_OUT_VALUE(int64_t, calls, PyLong_FromLongLong)
DTPY_OUT_VALUE(int64_t, bytes, PyLong_FromLongLong)
DTPY_OUT_VALUE(int64_t, wire_bytes, PyLong_FromLongLong)
DTPY_OUT_VALUE(int64_t, epoch, PyLong_FromLongLong)
DTPY_OUT_VALUE(int64_t, batch_index, PyLong_FromLongLong)
DTPY_OUT_VALUE(int32_t, out, PyLong_FromLong)
DTPY_OUT_VALUE(int32_t, rank, PyLong_FromLong)
DTPY_OUT_VALUE(int32_t, size, PyLong_FromLong)
DTPY_OUT_VALUE(int32_t, coord, PyLong_FromLong)
DTPY_OUT_VALUE(dt_dtype, out, PyLong_FromLong)
DTPY_OUT_VALUE(size_t, out, PyLong_FromSize_t)
DTPY_OUT_VALUE(size_t, needed, PyLong_FromSize_t)
DTPY_OUT_VALUE(double, out, PyFloat_FromDouble)
DTPY_OUT_VALUE(double, loss_out, PyFloat_FromDouble)
DTPY_OUT_VALUE(double, loss, PyFloat_FromDouble)
DTPY_OUT_VALUE(double, seconds, PyFloat_FromDouble)
/* The server's: a request's id, what a poll took, the model's sizes. */
DTPY_OUT_VALUE(int64_t, out_id, PyLong_FromLongLong)
DTPY_OUT_VALUE(int64_t, n_out, PyLong_FromLongLong)
DTPY_OUT_VALUE(int32_t, state_out, PyLong_FromLong)
DTPY_OUT_VALUE(int32_t, done_out, PyLong_FromLong)
DTPY_OUT_VALUE(int64_t, context, PyLong_FromLongLong)
DTPY_OUT_VALUE(int64_t, vocab_size, PyLong_FromLongLong)
/* The tokenizer's: how many ids an encoding has (also when they did not all fit). */
DTPY_OUT_VALUE(size_t, n_ids, PyLong_FromSize_t)

/* SWIG declares the argument without its const: the cast says what it points to. */
%typemap(in, numinputs=0) const char** (const char* tmp = NULL) "$1 = ($1_ltype)&tmp;";
%typemap(argout) const char** {
  $result = SWIG_Python_AppendOutput($result, PyUnicode_DecodeUTF8(tmp$argnum, (Py_ssize_t)strlen(tmp$argnum), "replace"));
}

/* ---- host memory through the buffer protocol ---------------------------------------- */
/* A buffer of any element type: the byte count is the buffer's own length. */
%typemap(in) (const void* src, size_t bytes) (Py_buffer view) {
  view.obj = NULL;
  if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS) != 0) SWIG_fail;
  $1 = view.buf;
  $2 = (size_t)view.len;
}
%typemap(in) (void* dst, size_t bytes) (Py_buffer view),
             (char* buf, size_t capacity) (Py_buffer view) {
  view.obj = NULL;
  if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) SWIG_fail;
  $1 = ($1_ltype)view.buf;
  $2 = (size_t)view.len;
}
/* dims: a writable buffer of int64; capacity is its element count. */
%typemap(in) (int64_t* dims, int32_t capacity) (Py_buffer view) {
  view.obj = NULL;
  if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) SWIG_fail;
  $1 = (int64_t*)view.buf;
  $2 = (int32_t)(view.len / (Py_ssize_t)sizeof(int64_t));
}
/* Fixed-type arrays whose lengths the dtrain package has checked. */
%typemap(in) const int64_t* shape (Py_buffer view), const int32_t* prompt_tokens (Py_buffer view),
             const int64_t* prompt_lengths (Py_buffer view) {
  view.obj = NULL;
  if ($input == Py_None) {
    $1 = NULL;
  } else {
    if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS) != 0) SWIG_fail;
    $1 = ($1_ltype)view.buf;
  }
}
%typemap(in) int32_t* out_tokens (Py_buffer view), int64_t* out_lengths (Py_buffer view),
             int32_t* inputs (Py_buffer view), int32_t* targets (Py_buffer view) {
  view.obj = NULL;
  if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) SWIG_fail;
  $1 = ($1_ltype)view.buf;
}
/* The server's token arrays: an int32 buffer whose element count is the length. */
%typemap(in) (const int32_t* prompt, int64_t prompt_len) (Py_buffer view) {
  view.obj = NULL;
  if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS) != 0) SWIG_fail;
  $1 = (int32_t*)view.buf;
  $2 = (int64_t)(view.len / (Py_ssize_t)sizeof(int32_t));
}
%typemap(in) (int32_t* tokens, int64_t capacity) (Py_buffer view) {
  view.obj = NULL;
  if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) SWIG_fail;
  $1 = (int32_t*)view.buf;
  $2 = (int64_t)(view.len / (Py_ssize_t)sizeof(int32_t));
}
/* The tokenizer's: UTF-8 text as a bytes-like object (its length, so a NUL inside is
 * text too), and int32 id buffers whose element count is the length or the capacity. */
%typemap(in) (const char* text, size_t len) (Py_buffer view) {
  view.obj = NULL;
  if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS) != 0) SWIG_fail;
  $1 = (char*)view.buf;
  $2 = (size_t)view.len;
}
%typemap(in) (const int32_t* ids, size_t n) (Py_buffer view) {
  view.obj = NULL;
  if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS) != 0) SWIG_fail;
  $1 = (int32_t*)view.buf;
  $2 = (size_t)(view.len / (Py_ssize_t)sizeof(int32_t));
}
%typemap(in) (int32_t* ids, size_t capacity) (Py_buffer view) {
  view.obj = NULL;
  if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) SWIG_fail;
  $1 = (int32_t*)view.buf;
  $2 = (size_t)(view.len / (Py_ssize_t)sizeof(int32_t));
}
%typemap(freearg) (const void* src, size_t bytes), (void* dst, size_t bytes),
                  (const char* text, size_t len), (const int32_t* ids, size_t n),
                  (int32_t* ids, size_t capacity),
                  (const int32_t* prompt, int64_t prompt_len), (int32_t* tokens, int64_t capacity),
                  (char* buf, size_t capacity), (int64_t* dims, int32_t capacity),
                  const int64_t* shape, const int32_t* prompt_tokens, const int64_t* prompt_lengths,
                  int32_t* out_tokens, int64_t* out_lengths, int32_t* inputs, int32_t* targets {
  if (view$argnum.obj != NULL) PyBuffer_Release(&view$argnum);
}

/* ---- the streaming callback --------------------------------------------------------- */
%typemap(in) (dt_token_callback on_token, void* user) (dtpy_token_sink sink) {
  if (!PyCallable_Check($input)) {
    PyErr_SetString(PyExc_TypeError, "on_token must be callable with (prompt_index, token)");
    SWIG_fail;
  }
  sink.fn = $input;
  sink.exc_type = sink.exc_value = sink.exc_tb = NULL;
  $1 = dtpy_on_token;
  $2 = &sink;
}
%typemap(argout) (dt_token_callback on_token, void* user) {
  if (sink$argnum.exc_type != NULL) {
    Py_XDECREF($result);
    PyErr_Restore(sink$argnum.exc_type, sink$argnum.exc_value, sink$argnum.exc_tb);
    SWIG_fail;
  }
}

%typemap(in) (dt_token_callback_v2 on_token, void* user) (dtpy_token_sink sink) {
  if (!PyCallable_Check($input)) {
    PyErr_SetString(PyExc_TypeError, "on_token must be callable with (prompt_index, token)");
    SWIG_fail;
  }
  sink.fn = $input;
  sink.exc_type = sink.exc_value = sink.exc_tb = NULL;
  $1 = dtpy_on_token_v2;
  $2 = &sink;
}
/* The callback's exception, if any, wins over the DT_ERR_CANCELLED it caused: so the status
 * is raised here, after the call (`result`), and not by the status typemap. */
%typemap(out) dt_status dt_engine_generate_stream_v2 "$result = SWIG_Py_Void();";
%typemap(argout) (dt_token_callback_v2 on_token, void* user) {
  if (sink$argnum.exc_type != NULL) {
    Py_XDECREF($result);
    PyErr_Restore(sink$argnum.exc_type, sink$argnum.exc_value, sink$argnum.exc_tb);
    SWIG_fail;
  }
  if (result != DT_OK) {
    Py_XDECREF($result);
    dtpy_raise(result);
    SWIG_fail;
  }
}

/* ---- the server's request callback: never from Python ------------------------------- */
/* It would run on the server's own thread; the dtrain package polls (dt_server_poll, with
 * the GIL released while it waits) instead, so dt_server_submit always passes NULL. */
%typemap(in, numinputs=0) (dt_request_callback on_event, void* user) {
  $1 = NULL;
  $2 = NULL;
}

/* ---- cancellation ------------------------------------------------------------------- */
DTPY_OUT_HANDLE(dt_cancel)
/* One atomic operation each: not worth releasing the GIL for. (That a request and the
 * destroy never overlap, as the header asks, is dtrain.CancelToken's lock's job.) */
%nothread dt_cancel_request;
%nothread dt_cancel_reset;
%nothread dt_cancel_is_requested;
%nothread dt_cancel_destroy;

/* ---- zero-copy memory --------------------------------------------------------------- */
/* dt_tensor_data: the address of element 0, as an int. */
%typemap(in, numinputs=0) void** out (void* tmp = NULL) "$1 = &tmp;";
%typemap(argout) void** out "$result = SWIG_Python_AppendOutput($result, PyLong_FromVoidPtr(tmp$argnum));";
/* dt_tensor_create_from_memory: the address as an int ... */
%typemap(in) void* data {
  $1 = PyLong_AsVoidPtr($input);
  if (PyErr_Occurred()) SWIG_fail;
}
/* ... and the object that keeps that memory alive (or None): libdtrain holds a reference
 * until it releases the memory, also when the call fails. These are the last arguments
 * converted, so no failure between this INCREF and the call can leak it. */
%typemap(in) (dt_release_callback release, void* user) {
  $1 = NULL;
  $2 = NULL;
  if ($input != Py_None) {
    Py_INCREF($input);
    $1 = dtpy_drop;
    $2 = $input;
  }
}

%{
/* The DLPack ABI (dlpack.h, unversioned DLManagedTensor), written out: its layout is the
 * protocol every array library shares, so these structs must not change. */
typedef struct { int32_t device_type; int32_t device_id; } dtpy_dl_device;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } dtpy_dl_dtype;
typedef struct {
  void* data;
  dtpy_dl_device device;
  int32_t ndim;
  dtpy_dl_dtype dtype;
  int64_t* shape;
  int64_t* strides;  /* in elements; NULL: dense row-major */
  uint64_t byte_offset;
} dtpy_dl_tensor;
typedef struct dtpy_dl_managed {
  dtpy_dl_tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct dtpy_dl_managed* self);
} dtpy_dl_managed;
enum { DTPY_DL_CPU = 1, DTPY_DL_CUDA = 2 };
enum { DTPY_DL_INT = 0, DTPY_DL_FLOAT = 2, DTPY_DL_BFLOAT = 4 };

static const char DTPY_CAPSULE[] = "dltensor", DTPY_USED[] = "used_dltensor";
static const char DTPY_OWNER[] = "dtrain.dlpack_owner";

/* A tensor lent out: the DLManagedTensor, its shape and strides, and a reference to the
 * Python object that owns the dt_tensor (dropped by the deleter, on whatever thread the
 * consumer calls it from). */
typedef struct {
  dtpy_dl_managed managed;
  PyObject* owner;
  int64_t shape[DT_MAX_DIMS];
  int64_t strides[DT_MAX_DIMS];
} dtpy_export;

static void dtpy_export_delete(dtpy_dl_managed* self) {
  dtpy_export* e = (dtpy_export*)self->manager_ctx;
  dtpy_drop(e->owner);
  free(e);
}

/* The producer's capsule: it deletes only a tensor no consumer took (renamed on taking). */
static void dtpy_export_capsule_free(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, DTPY_CAPSULE)) return;
  dtpy_dl_managed* m = (dtpy_dl_managed*)PyCapsule_GetPointer(capsule, DTPY_CAPSULE);
  if (m != NULL && m->deleter != NULL) m->deleter(m);
}

static int dtpy_dl_dtype_of(dt_dtype dtype, dtpy_dl_dtype* out) {
  out->lanes = 1;
  switch (dtype) {
    case DT_F32: out->code = DTPY_DL_FLOAT; out->bits = 32; return 1;
    case DT_F16: out->code = DTPY_DL_FLOAT; out->bits = 16; return 1;
    case DT_BF16: out->code = DTPY_DL_BFLOAT; out->bits = 16; return 1;
    case DT_I32: out->code = DTPY_DL_INT; out->bits = 32; return 1;
    case DT_I64: out->code = DTPY_DL_INT; out->bits = 64; return 1;
    default: return 0;
  }
}

/* "cpu" or "cuda:N" as a DLPack device; 0 for anything else. */
static int dtpy_dl_device_of(const char* device, dtpy_dl_device* out) {
  if (strcmp(device, "cpu") == 0) {
    out->device_type = DTPY_DL_CPU;
    out->device_id = 0;
    return 1;
  }
  char* end = NULL;
  if (strncmp(device, "cuda:", 5) != 0) return 0;
  long id = strtol(device + 5, &end, 10);
  if (end == device + 5 || *end != '\0' || id < 0 || id > INT32_MAX) return 0;
  out->device_type = DTPY_DL_CUDA;
  out->device_id = (int32_t)id;
  return 1;
}

/* The owner capsule of a taken DLPack tensor: deleting it calls the producer's deleter. */
static void dtpy_owner_free(PyObject* owner) {
  dtpy_dl_managed* m = (dtpy_dl_managed*)PyCapsule_GetPointer(owner, DTPY_OWNER);
  if (m != NULL && m->deleter != NULL) m->deleter(m);
}

static dtpy_dl_managed* dtpy_owned(PyObject* owner) {
  return (dtpy_dl_managed*)PyCapsule_GetPointer(owner, DTPY_OWNER);  /* sets the error */
}
%}

%nothread _dlpack_export;
%nothread _dlpack_take;
%nothread _dlpack_describe;
%nothread _dlpack_gather;
%nothread _buffer_address;
%inline %{
/* A "dltensor" capsule viewing `tensor`'s memory; `owner` (the Python object whose life
 * keeps the dt_tensor alive) is held until the consumer calls the deleter. */
static PyObject* _dlpack_export(dt_tensor* tensor, PyObject* owner) {
  dt_dtype dtype = 0;
  int32_t ndim = 0;
  const char* device = NULL;
  void* data = NULL;
  dt_status st = dt_tensor_dtype(tensor, &dtype);
  if (st == DT_OK) st = dt_tensor_ndim(tensor, &ndim);
  if (st == DT_OK) st = dt_tensor_device(tensor, &device);
  if (st == DT_OK) st = dt_tensor_data(tensor, &data);
  dtpy_export* e = st == DT_OK ? (dtpy_export*)calloc(1, sizeof(dtpy_export)) : NULL;
  if (st == DT_OK && e == NULL) return PyErr_NoMemory();
  if (st == DT_OK && ndim > 0) st = dt_tensor_shape(tensor, e->shape, DT_MAX_DIMS);
  if (st != DT_OK) {
    free(e);
    dtpy_raise(st);
    return NULL;
  }
  dtpy_dl_tensor* t = &e->managed.dl_tensor;
  if (!dtpy_dl_dtype_of(dtype, &t->dtype) || !dtpy_dl_device_of(device, &t->device)) {
    free(e);
    PyErr_Format(PyExc_BufferError, "a %s tensor on %s has no DLPack form", dt_dtype_name(dtype), device);
    return NULL;
  }
  int64_t stride = 1;
  for (int32_t d = ndim - 1; d >= 0; d--) {
    e->strides[d] = stride;
    stride *= e->shape[d];
  }
  t->data = data;
  t->ndim = ndim;
  t->shape = e->shape;
  t->strides = e->strides;  /* given, not NULL: DLPack 1.0 consumers may rely on them */
  t->byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = dtpy_export_delete;
  Py_INCREF(owner);
  e->owner = owner;
  PyObject* capsule = PyCapsule_New(&e->managed, DTPY_CAPSULE, dtpy_export_capsule_free);
  if (capsule == NULL) dtpy_export_delete(&e->managed);
  return capsule;
}

/* Consumes a "dltensor" capsule (renamed "used_dltensor", as the protocol says) and returns
 * its owner: a capsule whose deletion calls the producer's deleter. */
static PyObject* _dlpack_take(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, DTPY_CAPSULE)) {
    PyErr_SetString(PyExc_TypeError, "expected a DLPack capsule named \"dltensor\" that no one has taken");
    return NULL;
  }
  dtpy_dl_managed* m = (dtpy_dl_managed*)PyCapsule_GetPointer(capsule, DTPY_CAPSULE);
  if (m == NULL || PyCapsule_SetName(capsule, DTPY_USED) != 0) return NULL;
  PyObject* owner = PyCapsule_New(m, DTPY_OWNER, dtpy_owner_free);
  if (owner == NULL && m->deleter != NULL) m->deleter(m);  /* taken: ours to delete */
  return owner;
}

/* (address of element 0, shape, strides or None, (code, bits, lanes), (device type, id)). */
static PyObject* _dlpack_describe(PyObject* owner) {
  dtpy_dl_managed* m = dtpy_owned(owner);
  if (m == NULL) return NULL;
  const dtpy_dl_tensor* t = &m->dl_tensor;
  if (t->ndim < 0 || (t->ndim > 0 && t->shape == NULL)) {
    PyErr_SetString(PyExc_BufferError, "a DLPack tensor without a valid shape");
    return NULL;
  }
  PyObject* shape = PyTuple_New(t->ndim);
  PyObject* strides = t->strides != NULL ? PyTuple_New(t->ndim) : (Py_INCREF(Py_None), Py_None);
  for (int32_t d = 0; shape != NULL && strides != NULL && d < t->ndim; d++) {
    PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(t->shape[d]));
    if (t->strides != NULL) PyTuple_SET_ITEM(strides, d, PyLong_FromLongLong(t->strides[d]));
  }
  PyObject* result = NULL;
  if (shape != NULL && strides != NULL && !PyErr_Occurred()) {
    result = Py_BuildValue("(NOO(iii)(ii))", PyLong_FromVoidPtr((char*)t->data + t->byte_offset), shape,
                           strides, (int)t->dtype.code, (int)t->dtype.bits, (int)t->dtype.lanes,
                           (int)t->device.device_type, (int)t->device.device_id);
  }
  Py_XDECREF(shape);
  Py_XDECREF(strides);
  return result;
}

/* Copies a strided host DLPack tensor into `dst`, a dense tensor of as many bytes. */
static PyObject* _dlpack_gather(PyObject* owner, dt_tensor* dst) {
  dtpy_dl_managed* m = dtpy_owned(owner);
  if (m == NULL) return NULL;
  const dtpy_dl_tensor* t = &m->dl_tensor;
  size_t item = (size_t)t->dtype.bits / 8 * t->dtype.lanes, nbytes = 0;
  int64_t count = 1;
  void* out = NULL;
  for (int32_t d = 0; d < t->ndim; d++) count *= t->shape[d];
  dt_status st = dt_tensor_nbytes(dst, &nbytes);
  if (st == DT_OK) st = dt_tensor_data(dst, &out);
  if (st != DT_OK) {
    dtpy_raise(st);
    return NULL;
  }
  if (t->device.device_type != DTPY_DL_CPU || t->ndim > DT_MAX_DIMS || item == 0 ||
      nbytes != (size_t)count * item) {
    PyErr_SetString(PyExc_ValueError, "_dlpack_gather: a host tensor of the destination's size");
    return NULL;
  }
  const char* base = (const char*)t->data + t->byte_offset;
  if (t->strides == NULL) {  /* dense row-major, only unaligned: one copy */
    memcpy(out, base, nbytes);
    Py_RETURN_NONE;
  }
  /* Element by element in row-major order; `index` counts like an odometer. */
  int64_t index[DT_MAX_DIMS] = {0};
  for (int64_t i = 0; i < count; i++) {
    int64_t offset = 0;  /* in elements */
    for (int32_t d = 0; d < t->ndim; d++) offset += index[d] * t->strides[d];
    memcpy((char*)out + (size_t)i * item, base + offset * (int64_t)item, item);
    for (int32_t d = t->ndim - 1; d >= 0 && ++index[d] == t->shape[d]; d--) index[d] = 0;
  }
  Py_RETURN_NONE;
}

/* The address of a writable C-contiguous buffer; `obj` (a memoryview the caller keeps)
 * keeps it valid. */
static PyObject* _buffer_address(PyObject* obj) {
  Py_buffer view;
  if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) return NULL;
  PyObject* address = PyLong_FromVoidPtr(view.buf);
  PyBuffer_Release(&view);
  return address;
}
%}
