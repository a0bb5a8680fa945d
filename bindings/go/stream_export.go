package dtrain

// The Go function the C trampoline dtgo_on_token (stream.go) calls with each streamed
// token. cgo copies the preamble of a file with an //export into two C files, so it holds
// declarations only.

// #include <stdint.h>
import "C"

import "runtime/cgo"

// dtgoOnToken hands a token to the tokenSink that user (a cgo.Handle) holds and returns 1
// when the sink asks to stop. It must not panic: a Go panic cannot unwind through the
// library's C frames, so every sink recovers its own.
//
//export dtgoOnToken
func dtgoOnToken(user C.uintptr_t, prompt C.int32_t, token C.int32_t) C.int32_t {
	if cgo.Handle(user).Value().(tokenSink)(int(prompt), int32(token)) {
		return 1
	}
	return 0
}
