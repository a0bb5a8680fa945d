package dtrain

// The Go function the C trampoline dtgo_on_token (stream.go) calls with each streamed
// token. cgo copies the preamble of a file with an //export into two C files, so it holds
// declarations only.

// #include <stdint.h>
import "C"

import "runtime/cgo"

// dtgoOnToken hands a token to the GenerateStream call whose state user (a cgo.Handle)
// holds. It must not panic: a Go panic cannot unwind through the library's C frames, so
// deliver recovers it.
//
//export dtgoOnToken
func dtgoOnToken(user C.uintptr_t, prompt C.int32_t, token C.int32_t) {
	cgo.Handle(user).Value().(*tokenStream).deliver(int(prompt), int32(token))
}
