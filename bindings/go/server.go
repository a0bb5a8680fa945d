package dtrain

// Serving: a Server (dt_server) runs continuous batching over a paged KV cache on its own
// thread. A Request's tokens come through dt_server_submit's callback, which the library
// calls on that thread, not a Go one: the trampoline below hands each event to the Go
// function dtgoOnRequestEvent (server_export.go), which cgo runs on that C thread. It never
// blocks: the request's channel has room for every token the request can make.

/*
#cgo pkg-config: dtrain
#include <stdint.h>
#include <stdlib.h>
#include <dtrain/dtrain.h>
#include "dtgo_errors.h"

extern void dtgoOnRequestEvent(uintptr_t user, int32_t token, int32_t done, int32_t state, char* reason);

// The dt_request_callback: user is the cgo.Handle of the Request, never a Go pointer.
static void dtgo_on_request_event(void* user, int64_t request_id, int32_t token, int32_t done,
                                  int32_t state, const char* reason) {
  (void)request_id;
  dtgoOnRequestEvent((uintptr_t)user, token, done, state, (char*)reason);
}

// dt_server_submit with the handles as integers. On failure *message is a malloc'd copy of
// dt_last_error_message(), read on this thread (NULL if that allocation failed).
static dt_status dtgo_server_submit(uintptr_t server, const int32_t* prompt, int64_t prompt_len,
                                    uintptr_t options, uintptr_t user, int64_t* out_id,
                                    char** message) {
  dt_status status = dt_server_submit((dt_server*)server, prompt, prompt_len,
                                      (const dt_options*)options, dtgo_on_request_event,
                                      (void*)user, out_id);
  *message = dtgo_error_copy(status);
  return status;
}
*/
import "C"

import (
	"encoding/json"
	"runtime"
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"

	"dtrain.dev/dtrain/internal/cdt"
)

// RequestState is where a request stands (DT_REQUEST_*).
type RequestState int32

// The request states. The last three are ends.
const (
	RequestWaiting   RequestState = 0 // queued, not yet admitted
	RequestRunning   RequestState = 1 // prefilling or decoding
	RequestPreempted RequestState = 2 // sent back to the queue when the KV blocks ran out
	RequestFinished  RequestState = 3 // ended: a stop token or max_tokens
	RequestAborted   RequestState = 4 // ended: cancelled, or the server stopped or failed
	RequestRejected  RequestState = 5 // ended: it can never run (longer than the context or cache)
)

// String names the state: "waiting", "running", ... ("unknown" for another value).
func (s RequestState) String() string {
	names := [...]string{"waiting", "running", "preempted", "finished", "aborted", "rejected"}
	if s >= 0 && int(s) < len(names) {
		return names[s]
	}
	return "unknown"
}

// Server serves a GPT with continuous batching over a paged KV cache (dt_server), on its
// own thread. Unlike the other handles, its methods may be called from any goroutine.
type Server struct{ obj *owned[cdt.Server] }

// NewServer creates a server over model's current weights (copied; do not train model while
// the server lives). mesh: nil (one rank) or a "local" mesh whose dp axis is the number of
// replicas, tp splits heads and pp places blocks. opts: nil or "block_size", "kv_blocks",
// "kv_cache_bytes", "max_num_seqs", "max_batched_tokens", "prefix_caching", "pp_blocks".
func NewServer(mesh *Mesh, model *Model, opts Options) (*Server, error) {
	hmesh, err := optionalMesh(mesh)
	if err != nil {
		return nil, err
	}
	hm, err := model.handle()
	if err != nil {
		return nil, err
	}
	s, err := create[Server](opts, func(o cdt.Options, p *cdt.Server) cdt.Status {
		return cdt.Dt_server_create(hmesh, hm, o, p)
	}, cdt.Dt_server_destroy)
	runtime.KeepAlive(mesh)
	runtime.KeepAlive(model)
	return s, err
}

func (s *Server) handle() (cdt.Server, error) { return handleOf(s) }

// Close ends every request still in flight (each ends RequestAborted, its channel closed),
// stops the server's thread and releases it. Idempotent. Call it once no other goroutine is
// in a method of the server.
func (s *Server) Close() error { return closeHandle(s) }

// ModelInfo returns the model's context length and vocabulary size.
func (s *Server) ModelInfo() (context, vocabSize int, err error) {
	var c, v int64
	err = invoke(s, func(h cdt.Server) cdt.Status { return cdt.Dt_server_model_info(h, &c, &v) })
	return int(c), int(v), err
}

// Request is one submitted request. Tokens delivers its new token ids as the server makes
// them and is closed when the request ends; then State, Reason and Err say how.
type Request struct {
	// Tokens receives every new token, then is closed. Its buffer holds all the tokens the
	// request can make, so the server never waits for a slow reader.
	Tokens <-chan int32
	id     int64
	server *Server // kept alive while the request is in flight (its handle holds the request)
	user   cgo.Handle

	mu     sync.Mutex
	tokens chan int32
	state  RequestState
	reason string
	ended  bool
}

// Submit queues a request for prompt (token ids in [0, vocab size)). opts: nil or
// "max_tokens" (default 16), "temperature" (0: greedy), "top_k", "top_p", "seed",
// "stop_tokens" (ids as a string, "3,7"). Bad arguments are ErrInvalidArgument (naming the
// key); ErrUnavailable while the server drains or after it failed. A request that can never
// run is accepted, then ends RequestRejected.
func (s *Server) Submit(prompt []int32, opts Options) (*Request, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	if len(prompt) == 0 {
		return nil, invalid("Submit needs a prompt of at least one token")
	}
	context, _, err := s.ModelInfo()
	if err != nil {
		return nil, err
	}
	room := int64(16)
	if n, ok := intOption(opts, "max_tokens"); ok {
		room = n
	}
	if room < 0 || room > int64(context) { // no request makes more than the context holds
		room = int64(context)
	}
	o, free, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	defer free()
	tokens := make(chan int32, room+1)
	r := &Request{Tokens: tokens, tokens: tokens, server: s}
	r.user = cgo.NewHandle(r)
	var message *C.char
	var id C.int64_t
	code := C.dtgo_server_submit(C.uintptr_t(h), (*C.int32_t)(unsafe.Pointer(&prompt[0])),
		C.int64_t(len(prompt)), C.uintptr_t(o), C.uintptr_t(r.user), &id, &message)
	runtime.KeepAlive(s)
	if err := check(cStatus(code, message)); err != nil {
		r.user.Delete() // no event will come
		return nil, err
	}
	r.id = int64(id)
	return r, nil
}

// event takes one of the request's events, on the server's thread: a token, or the end.
func (r *Request) event(token int32, done bool, state RequestState, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return
	}
	if token >= 0 {
		select {
		case r.tokens <- token:
		default: // cannot happen: the buffer holds max_tokens
			r.reason = "dtrain: the token buffer overflowed"
			done, state = true, RequestAborted
		}
	}
	if !done {
		r.state = state
		return
	}
	r.state, r.ended = state, true
	if r.reason == "" {
		r.reason = reason
	}
	close(r.tokens)
	r.user.Delete()
	r.server = nil
}

// ID returns the request's id on its server.
func (r *Request) ID() int64 { return r.id }

// State returns where the request stands.
func (r *Request) State() RequestState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// Reason returns why the request ended ("stop", "length", "abort", or why it was rejected
// or aborted), or "" while it runs.
func (r *Request) Reason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reason
}

// Err returns nil while the request runs or once it finished; an ErrAborted once it was
// cancelled or the server stopped, an ErrInvalidArgument once it was rejected, each with
// the reason as its message.
func (r *Request) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !r.ended || r.state == RequestFinished:
		return nil
	case r.state == RequestRejected:
		return &Error{Status: StatusInvalidArgument, Message: "request rejected: " + r.reason}
	}
	return &Error{Status: StatusAborted, Message: "request aborted: " + r.reason}
}

// Wait reads the rest of Tokens and returns them with Err.
func (r *Request) Wait() ([]int32, error) {
	var out []int32
	for t := range r.Tokens {
		out = append(out, t)
	}
	return out, r.Err()
}

// Cancel aborts the request: its KV blocks are freed, and it ends RequestAborted with the
// reason "abort". Cancelling a request that already ended does nothing.
func (r *Request) Cancel() error {
	r.mu.Lock()
	s := r.server
	r.mu.Unlock()
	if s == nil {
		return nil
	}
	err := invoke(s, func(h cdt.Server) cdt.Status { return cdt.Dt_server_cancel(h, r.id) })
	if e, ok := err.(*Error); ok && e.Status == StatusNotFound {
		return nil // it ended in the meantime
	}
	return err
}

// Drain stops accepting requests and waits up to timeout for those in flight to end
// (ErrTimeout if some still run then).
func (s *Server) Drain(timeout time.Duration) error {
	ms, err := int32Arg("timeout in ms", int(timeout/time.Millisecond))
	if err != nil {
		return err
	}
	return invoke(s, func(h cdt.Server) cdt.Status { return cdt.Dt_server_drain(h, ms) })
}

// StatsJSON returns the server's statistics as JSON: {"requests":{"waiting":..,"running":..,
// "finished":..,..},"tokens":{..},"tokens_per_s":..,"ttft_s":{..},"itl_s":{..},
// "kv_cache":{..},"preemptions":..}.
func (s *Server) StatsJSON() (string, error) { return reportJSON(s, cdt.Dt_server_stats_json) }

// Stats returns StatsJSON decoded.
func (s *Server) Stats() (map[string]any, error) {
	text, err := s.StatsJSON()
	if err != nil {
		return nil, err
	}
	var stats map[string]any
	if err := json.Unmarshal([]byte(text), &stats); err != nil {
		return nil, &Error{Status: StatusInternal, Message: "dtrain: server stats: " + err.Error()}
	}
	return stats, nil
}

// Metrics returns the same figures in Prometheus text format.
func (s *Server) Metrics() (string, error) { return reportJSON(s, cdt.Dt_server_metrics_text) }
