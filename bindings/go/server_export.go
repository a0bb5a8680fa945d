package dtrain

// The Go function the C trampoline dtgo_on_request_event (server.go) calls with each event
// of a request submitted by Server.Submit. The library calls it on the server's own thread,
// which is not a Go one: cgo runs it there. The preamble holds declarations only (see
// stream_export.go).

// #include <stdint.h>
import "C"

import "runtime/cgo"

// dtgoOnRequestEvent hands an event to the Request that user (a cgo.Handle) holds. It never
// blocks (every request waits on the server's thread meanwhile) and never panics.
//
//export dtgoOnRequestEvent
func dtgoOnRequestEvent(user C.uintptr_t, token C.int32_t, done C.int32_t, state C.int32_t, reason *C.char) {
	r := cgo.Handle(user).Value().(*Request)
	var why string
	if done != 0 && reason != nil {
		why = C.GoString(reason) // valid during the call only
	}
	r.event(int32(token), done != 0, RequestState(state), why)
}
