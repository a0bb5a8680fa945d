/* dtrain_go.i: the Go part of dtrain.i, read before the header.
 *
 * It makes package cdt (bindings/go/internal/cdt), the raw layer under the idiomatic package
 * dtrain (bindings/go). Generate it from the repository root with
 *
 *   swig -go -cgo -intgosize 64 -I<prefix>/include -outdir bindings/go/internal/cdt \
 *        -o bindings/go/internal/cdt/dtrain_wrap.c bindings/swig/dtrain.i
 *
 * (bindings/go/generate.sh does exactly that; the output is committed, so `go build` needs
 * no swig). How the C ABI crosses into Go:
 *  - A dt_status result becomes a cdt.Status {Code, Message}. When the code is not DT_OK the
 *    C side of the wrapper copies dt_last_error_message() into the result inside the same
 *    cgo call: the message is thread-local and a goroutine may change threads between calls.
 *  - A handle (dt_mesh*, ...) is a distinct uintptr type per kind (cdt.Mesh, cdt.Tensor, ...);
 *    an out-handle (dt_mesh** out) is a *cdt.Mesh the call fills in.
 *  - Scalar out-pointers and arrays are Go pointers of the exact C width (*int32, *int64,
 *    *float64; size_t is int64), so a caller passes &x or &slice[0] and nothing is copied.
 *    const char** outs are *string, copied from the library's string after the call.
 *  - void* host buffers are unsafe.Pointer; (char* buf, size_t capacity) is a []byte.
 *    A void** out (dt_tensor_data) is an *unsafe.Pointer the call fills with a C address.
 *  - A char* result is copied into Go memory by dtgoCopyString, which stands in for SWIG's
 *    own swigCopyString: that one turns a uintptr back into an unsafe.Pointer, which
 *    `go vet` rightly reports ("possible misuse of unsafe.Pointer").
 * The Go package dtrain turns these into methods that return (value, error), or the value
 * alone where the call cannot fail on a live handle.
 */
%module cdt

/* Go builds for LP64 targets: int64_t is long, as in the C headers (stdint.i reads this). */
#define SWIGWORDSIZE64

%{
#include <stdlib.h>
#include <string.h>
#include <dtrain/dtrain.h>

/* The result of a dt_status call as a Go string in C memory: empty for DT_OK; otherwise
 * four bytes of the code (little endian) and then the calling thread's error message.
 * If that allocation fails, no memory: n = -1 - code. */
static _gostring_ dtgo_status_result(dt_status status) {
  _gostring_ r;
  const char* msg;
  size_t len;
  uint32_t code = (uint32_t)status;
  r.p = NULL;
  r.n = 0;
  if (status == DT_OK) return r;
  msg = dt_last_error_message();
  len = msg ? strlen(msg) : 0;
  r.p = (char*)malloc(len + 4);
  if (r.p == NULL) {
    r.n = -1 - (intgo)code;
    return r;
  }
  r.p[0] = (char)(code & 0xff);
  r.p[1] = (char)((code >> 8) & 0xff);
  r.p[2] = (char)((code >> 16) & 0xff);
  r.p[3] = (char)((code >> 24) & 0xff);
  if (len) memcpy(r.p + 4, msg, len);
  r.n = (intgo)(len + 4);
  return r;
}
%}

%insert(go_wrapper) %{
// Status is what a libdtrain call that returns dt_status reported: Code is DT_OK (0) or a
// failure code, and Message is the library's message for that failure, read in the same
// native call.
type Status struct {
	Code    int32
	Message string
}

// OK reports whether the call succeeded.
func (s Status) OK() bool { return s.Code == 0 }

type dtgoCString struct {
	p unsafe.Pointer
	n int
}

// dtgoStatus decodes (and frees) the C-allocated result of dtgo_status_result.
func dtgoStatus(s string) Status {
	r := *(*dtgoCString)(unsafe.Pointer(&s))
	if r.n == 0 {
		return Status{}
	}
	if r.n < 0 {
		return Status{Code: int32(uint32(-1 - r.n)), Message: "(out of memory copying the error message)"}
	}
	b := unsafe.Slice((*byte)(r.p), r.n)
	code := int32(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
	msg := string(b[4:])
	Swig_free(uintptr(r.p))
	return Status{Code: code, Message: msg}
}

// Handles: the library's opaque pointers, one type per kind (0 is NULL).
type (
	Options     uintptr
	Tensor      uintptr
	Mesh        uintptr
	Module      uintptr
	Optimizer   uintptr
	Engine      uintptr
	Dataset     uintptr
	Loader      uintptr
	Server      uintptr
	Cancel      uintptr
	Tokenizer   uintptr
	Detokenizer uintptr
)
%}

/* char* results: SWIG's C side (Swig_AllocateString) mallocs a copy as a _gostring_; the Go
 * side copies that into Go memory and frees it. Same steps as SWIG's swigCopyString, but the
 * address stays an unsafe.Pointer throughout, so `go vet` has nothing to report. */
%fragment("DtgoCopyString", "go_runtime") %{
// dtgoCopyString copies a string that Swig_AllocateString made in C memory into Go memory
// and frees the C copy (malloc(0) may have allocated even for an empty string).
func dtgoCopyString(s string) string {
	r := *(*dtgoCString)(unsafe.Pointer(&s))
	var out string
	if r.n > 0 {
		out = string(unsafe.Slice((*byte)(r.p), r.n))
	}
	if r.p != nil {
		Swig_free(uintptr(r.p))
	}
	return out
}
%}
%typemap(goout, fragment="DtgoCopyString") char *, const char * %{ $result = dtgoCopyString($1) %}

/* dt_status results: a Status carrying the message (see above). */
%typemap(gotype) dt_status "Status"
%typemap(imtype) dt_status "string"
%typemap(out) dt_status %{ $result = dtgo_status_result($1); %}
%typemap(goout) dt_status %{ $result = dtgoStatus($1) %}
/* ... but dt_status_string's argument is a plain code. */
%typemap(gotype) dt_status status "int32"
%typemap(imtype) dt_status status "int32"

/* 32-bit integers (and the dt_dtype, dt_mem_tag, dt_reduce_op codes) stay 32-bit in Go. */
%typemap(gotype) int32_t "int32"
%typemap(imtype) int32_t "int32"

/* Handles. */
%define DTGO_HANDLE(CTYPE, GOTYPE)
%typemap(gotype) CTYPE *, const CTYPE * "GOTYPE"
%typemap(imtype) CTYPE *, const CTYPE * "uintptr"
%typemap(goin) CTYPE *, const CTYPE * "$result = uintptr($input)"
%typemap(in) CTYPE *, const CTYPE * %{ $1 = ($1_ltype)$input; %}
%typemap(gotype) CTYPE ** "*GOTYPE"
%typemap(imtype) CTYPE ** "*GOTYPE"
%typemap(in) CTYPE ** %{ $1 = ($1_ltype)$input; %}
%enddef
DTGO_HANDLE(dt_options, Options)
DTGO_HANDLE(dt_tensor, Tensor)
DTGO_HANDLE(dt_mesh, Mesh)
DTGO_HANDLE(dt_module, Module)
DTGO_HANDLE(dt_optimizer, Optimizer)
DTGO_HANDLE(dt_engine, Engine)
DTGO_HANDLE(dt_dataset, Dataset)
DTGO_HANDLE(dt_loader, Loader)
DTGO_HANDLE(dt_server, Server)
DTGO_HANDLE(dt_cancel, Cancel)
DTGO_HANDLE(dt_tokenizer, Tokenizer)
DTGO_HANDLE(dt_detokenizer, Detokenizer)

/* Scalar out-pointers and arrays: Go pointers of the same width. */
%define DTGO_POINTER(CTYPE, GOTYPE)
%typemap(gotype) CTYPE *, const CTYPE * "*GOTYPE"
%typemap(imtype) CTYPE *, const CTYPE * "*GOTYPE"
%typemap(in) CTYPE *, const CTYPE * %{ $1 = ($1_ltype)$input; %}
%enddef
DTGO_POINTER(int32_t, int32)
DTGO_POINTER(int64_t, int64)
DTGO_POINTER(size_t, int64)
DTGO_POINTER(double, float64)

/* const char** outs: the library owns the string; Go gets a copy after the call. */
%typemap(gotype) const char ** "*string"
%typemap(imtype) const char ** "*unsafe.Pointer"
%typemap(goin) const char ** %{
	if $input != nil {
		$result = new(unsafe.Pointer)
	}
%}
%typemap(in) const char ** %{ $1 = ($1_ltype)$input; %}
%typemap(goargout) const char ** %{
	if $input != nil && *$input != nil {
		*$1 = C.GoString((*C.char)(*$input))
	}
%}

/* Host memory for tensor copies. */
%typemap(gotype) const void *, void * "unsafe.Pointer"
%typemap(imtype) const void *, void * "unsafe.Pointer"
%typemap(in) const void *, void * %{ $1 = ($1_ltype)$input; %}

/* A void** out (dt_tensor_data): the C address lands in an unsafe.Pointer the caller owns.
 * The pointer passed is a Go pointer to memory holding no Go pointer (nil before the call,
 * a C address after), as cgo's rules ask. */
%typemap(gotype) void ** "*unsafe.Pointer"
%typemap(imtype) void ** "*unsafe.Pointer"
%typemap(in) void ** %{ $1 = ($1_ltype)$input; %}

/* A tokenizer's text: a Go string, its bytes and length passed as they are (no copy, and a
 * NUL inside is text like any other byte). */
%typemap(gotype) (const char* text, size_t len) "string"
%typemap(in) (const char* text, size_t len) %{
  $1 = (char*)$input.p;
  $2 = (size_t)$input.n;
%}

/* JSON reports: (buf, capacity) is one []byte (nil asks for the size). */
%typemap(gotype) (char* buf, size_t capacity) "[]byte"
%typemap(in) (char* buf, size_t capacity) %{
  $1 = (char*)$input.array;
  $2 = (size_t)$input.len;
%}

/* Not wrapped here: the message is read inside each failing call instead (see above), and
 * the calls that take a C-to-Go callback, which are hand-written cgo: the streaming generate
 * (bindings/go/stream.go, on the v2 callback, which can stop) and the server's submit
 * (bindings/go/server.go). dt_tensor_create_from_memory is left out on purpose: a tensor
 * over lent memory keeps the address after the call returns, which cgo forbids for Go
 * memory (Go 1.19 has no runtime.Pinner), so the Go binding copies in and views out
 * (Tensor.Float32View and the like, over dt_tensor_data). */
%ignore dt_last_error_message;
%ignore dt_engine_generate_stream;
%ignore dt_token_callback;
%ignore dt_engine_generate_stream_v2;
%ignore dt_token_callback_v2;
%ignore dt_tensor_create_from_memory;
%ignore dt_release_callback;
%ignore dt_server_submit;
%ignore dt_request_callback;
