package dtrain

// Streaming generation: dt_engine_generate_stream_v2 calls a C function with each new token,
// and stops when that function returns nonzero. The C side here is the trampoline that the
// library calls (it hands the token to the Go function dtgoOnToken, exported in
// stream_export.go, and passes back its answer) and the helper that makes the call and, in
// the same native call, copies the thread's error message when it fails. cgo forbids
// definitions in the preamble of a file with an //export, so the two live apart.

/*
#cgo pkg-config: dtrain
#include <stdint.h>
#include <stdlib.h>
#include <dtrain/dtrain.h>
#include "dtgo_errors.h"

extern int32_t dtgoOnToken(uintptr_t user, int32_t prompt_index, int32_t token);

// The dt_token_callback_v2: user is the cgo.Handle of the Go side's sink, never a Go
// pointer; a nonzero result stops the generation.
static int32_t dtgo_on_token(void* user, int32_t prompt_index, int32_t token) {
  return dtgoOnToken((uintptr_t)user, prompt_index, token);
}

// dt_engine_generate_stream_v2 with the handles as integers (the Go side holds them as
// uintptr). On failure *message is a malloc'd copy of dt_last_error_message(), read on
// this thread before returning (NULL if that allocation failed); on success it is NULL.
static dt_status dtgo_generate_stream(uintptr_t engine, const int32_t* prompt_tokens,
                                      const int64_t* prompt_lengths, int32_t n_prompts,
                                      uintptr_t options, uintptr_t user, int32_t* out_tokens,
                                      int64_t out_capacity_per_prompt, int64_t* out_lengths,
                                      char** message) {
  dt_status status = dt_engine_generate_stream_v2(
      (dt_engine*)engine, prompt_tokens, prompt_lengths, n_prompts, (const dt_options*)options,
      dtgo_on_token, (void*)user, out_tokens, out_capacity_per_prompt, out_lengths);
  *message = dtgo_error_copy(status);
  return status;
}
*/
import "C"

import (
	"context"
	"runtime"
	"runtime/cgo"
	"unsafe"

	"dtrain.dev/dtrain/internal/cdt"
)

// GenerateStream is Generate, calling onToken(prompt, token) with each new token as soon as
// it is chosen: every prompt's first token, then one decode step at a time, prompt being the
// index in prompts. It returns what Generate returns, so the tokens passed to onToken for
// prompt i are result[i], in order. onToken runs on the goroutine that called
// GenerateStream (on its thread, inside the native call), and must not use this engine or
// the handles it was made from: the call is still running. Nothing is passed to onToken when
// the call fails before generating (a closed engine, a bad prompt or option).
//
// A panic in onToken does not unwind through the library: GenerateStream recovers it,
// passes no further tokens to onToken, stops the generation at once (the engine stays
// usable), and then panics again with the same value in the caller's goroutine, as if
// onToken had been called directly (the stack of the first panic is lost). onToken must not
// call runtime.Goexit (t.FailNow, t.Fatal), which cannot be stopped before it reaches the
// library's frames.
func (e *Engine) GenerateStream(prompts [][]int32, opts Options,
	onToken func(prompt int, token int32)) ([][]int32, error) {
	return e.generateStream(context.Background(), "GenerateStream", prompts, opts, onToken)
}

// GenerateStreamContext is GenerateStream, stopped before its next decode step when ctx is
// done (see TrainStepContext for the error); the tokens onToken saw are then the answer so
// far, and it returns no result. Engine.Stream delivers the tokens on a channel instead.
func (e *Engine) GenerateStreamContext(ctx context.Context, prompts [][]int32, opts Options,
	onToken func(prompt int, token int32)) ([][]int32, error) {
	return e.generateStream(ctx, "GenerateStreamContext", prompts, opts, onToken)
}

func (e *Engine) generateStream(ctx context.Context, what string, prompts [][]int32, opts Options,
	onToken func(prompt int, token int32)) ([][]int32, error) {
	if _, err := e.handle(); err != nil {
		return nil, err
	}
	if onToken == nil {
		return nil, invalid("%s needs an onToken function, not nil", what)
	}
	g, err := e.prepareGenerate(what, prompts, opts)
	if err != nil {
		return nil, err
	}
	defer g.free()
	c := &callbackSink{onToken: onToken}
	// Stop as soon as onToken returns with ctx done (it may have cancelled it itself), not
	// only once the watcher has raised the flag: no token is passed after the cancel.
	sink := func(prompt int, token int32) bool { return c.deliver(prompt, token) || ctx.Err() != nil }
	err = e.withContext(ctx, what, func() error { return e.runStream(g, sink) })
	if c.panicked {
		panic(c.panicValue)
	}
	if err != nil {
		return nil, err
	}
	return g.result(), nil
}

// tokenSink receives each streamed token and returns true to stop the generation. It must
// not panic: it runs under the library's C frames.
type tokenSink func(prompt int, token int32) (stop bool)

// runStream makes g's dt_engine_generate_stream_v2 call, passing each token to sink.
func (e *Engine) runStream(g *generateArgs, sink tokenSink) error {
	user := cgo.NewHandle(sink)
	defer user.Delete()
	var message *C.char
	code := C.dtgo_generate_stream(C.uintptr_t(g.engine),
		(*C.int32_t)(unsafe.Pointer(&g.tokens[0])), (*C.int64_t)(unsafe.Pointer(&g.lengths[0])),
		C.int32_t(g.n), C.uintptr_t(g.opts), C.uintptr_t(user),
		(*C.int32_t)(unsafe.Pointer(&g.out[0])), C.int64_t(g.capacity),
		(*C.int64_t)(unsafe.Pointer(&g.outLengths[0])), &message)
	runtime.KeepAlive(e)
	return check(cStatus(code, message))
}

// cStatus makes the cdt.Status that check turns into an error from a status and the
// message dtgo_generate_stream copied (and frees the copy).
func cStatus(code C.dt_status, message *C.char) cdt.Status {
	if code == C.DT_OK {
		return cdt.Status{}
	}
	if message == nil {
		return cdt.Status{Code: int32(code), Message: "(out of memory copying the error message)"}
	}
	defer C.free(unsafe.Pointer(message))
	return cdt.Status{Code: int32(code), Message: C.GoString(message)}
}

// callbackSink is GenerateStream's tokenSink: the caller's function, and the panic it
// raised, if any.
type callbackSink struct {
	onToken    func(prompt int, token int32)
	panicked   bool
	panicValue any
}

// deliver calls onToken with one token, unless an earlier call panicked, and asks to stop
// once one has; a panic is recorded (recover cannot tell panic(nil) from no panic, so
// completion is tracked).
func (c *callbackSink) deliver(prompt int, token int32) (stop bool) {
	if c.panicked {
		return true
	}
	returned := false
	defer func() {
		if !returned {
			c.panicked = true
			c.panicValue = recover()
			stop = true
		}
	}()
	c.onToken(prompt, token)
	returned = true
	return false
}
