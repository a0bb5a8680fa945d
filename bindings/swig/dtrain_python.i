/* dtrain_python.i: the Python part of dtrain.i. It makes the raw module dtrain.native:
 * every dt_* function, with
 *  - a dt_status other than DT_OK raised as the dtrain error class of that status, built
 *    from dt_last_error_message() inside the same call (the message is thread-local);
 *  - out-pointers returned (several as a tuple, in declaration order);
 *  - host memory passed through the buffer protocol (numpy arrays, memoryview, bytearray,
 *    array.array) without a copy: src/dst, dims, token arrays;
 *  - the GIL released while libdtrain runs (threads="1"), and taken back by the token
 *    callback of dt_engine_generate_stream;
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

%typemap(in, numinputs=0) const char** (const char* tmp = NULL) "$1 = &tmp;";
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
%typemap(freearg) (const void* src, size_t bytes), (void* dst, size_t bytes),
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

/* ---- the server's request callback: never from Python ------------------------------- */
/* It would run on the server's own thread; the dtrain package polls (dt_server_poll, with
 * the GIL released while it waits) instead, so dt_server_submit always passes NULL. */
%typemap(in, numinputs=0) (dt_request_callback on_event, void* user) {
  $1 = NULL;
  $2 = NULL;
}
