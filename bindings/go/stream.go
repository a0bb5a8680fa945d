package dtrain

// Streaming generation: dt_engine_generate_stream calls a C function with each new token.
// The C side here is the trampoline that the library calls (it hands the token to the Go
// function dtgoOnToken, exported in stream_export.go) and the helper that makes the call
// and, in the same native call, copies the thread's error message when it fails. cgo
// forbids definitions in the preamble of a file with an //export, so the two live apart.

/*
#cgo pkg-config: dtrain
#include <stdint.h>
#include <stdlib.h>
#include <dtrain/dtrain.h>
#include "dtgo_errors.h"

extern void dtgoOnToken(uintptr_t user, int32_t prompt_index, int32_t token);

// The dt_token_callback: user is the cgo.Handle of the Go side's state, never a Go pointer.
static void dtgo_on_token(void* user, int32_t prompt_index, int32_t token) {
  dtgoOnToken((uintptr_t)user, prompt_index, token);
}

// dt_engine_generate_stream with the handles as integers (the Go side holds them as
// uintptr). On failure *message is a malloc'd copy of dt_last_error_message(), read on
// this thread before returning (NULL if that allocation failed); on success it is NULL.
static dt_status dtgo_generate_stream(uintptr_t engine, const int32_t* prompt_tokens,
                                      const int64_t* prompt_lengths, int32_t n_prompts,
                                      uintptr_t options, uintptr_t user, int32_t* out_tokens,
                                      int64_t out_capacity_per_prompt, int64_t* out_lengths,
                                      char** message) {
  dt_status status = dt_engine_generate_stream(
      (dt_engine*)engine, prompt_tokens, prompt_lengths, n_prompts, (const dt_options*)options,
      dtgo_on_token, (void*)user, out_tokens, out_capacity_per_prompt, out_lengths);
  *message = dtgo_error_copy(status);
  return status;
}
*/
import "C"

import (
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
// passes no further tokens to onToken, lets the native call finish (the engine stays
// usable), and then panics again with the same value in the caller's goroutine, as if
// onToken had been called directly (the stack of the first panic is lost). onToken must not
// call runtime.Goexit (t.FailNow, t.Fatal), which cannot be stopped before it reaches the
// library's frames.
func (e *Engine) GenerateStream(prompts [][]int32, opts Options,
	onToken func(prompt int, token int32)) ([][]int32, error) {
	if _, err := e.handle(); err != nil {
		return nil, err
	}
	if onToken == nil {
		return nil, invalid("GenerateStream needs an onToken function, not nil")
	}
	s := &tokenStream{onToken: onToken}
	out, err := e.generate("GenerateStream", prompts, opts, func(g *generateArgs) error {
		user := cgo.NewHandle(s)
		defer user.Delete()
		var message *C.char
		code := C.dtgo_generate_stream(C.uintptr_t(g.engine),
			(*C.int32_t)(unsafe.Pointer(&g.tokens[0])), (*C.int64_t)(unsafe.Pointer(&g.lengths[0])),
			C.int32_t(g.n), C.uintptr_t(g.opts), C.uintptr_t(user),
			(*C.int32_t)(unsafe.Pointer(&g.out[0])), C.int64_t(g.capacity),
			(*C.int64_t)(unsafe.Pointer(&g.outLengths[0])), &message)
		return check(cStatus(code, message))
	})
	if s.panicked {
		panic(s.panicValue)
	}
	return out, err
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

// tokenStream is what one GenerateStream call shares with dtgoOnToken, through a
// cgo.Handle: the caller's function, and the panic it raised, if any.
type tokenStream struct {
	onToken    func(prompt int, token int32)
	panicked   bool
	panicValue any
}

// deliver calls onToken with one token, unless an earlier call panicked; a panic is
// recorded (recover cannot tell panic(nil) from no panic, so completion is tracked).
func (s *tokenStream) deliver(prompt int, token int32) {
	if s.panicked {
		return
	}
	returned := false
	defer func() {
		if !returned {
			s.panicked = true
			s.panicValue = recover()
		}
	}()
	s.onToken(prompt, token)
	returned = true
}
