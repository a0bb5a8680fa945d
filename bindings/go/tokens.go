package dtrain

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Token is one generated token: its id, and the index of the prompt it continues.
type Token struct {
	Prompt int
	ID     int32
}

// Stream is a generation running on a goroutine of its own that delivers its tokens on a
// channel (Engine.Stream). Read Tokens until it is closed, then Err; or leave early with
// Close (or by cancelling the context), which stops the generation and waits for it to end.
// While a Stream runs it is the one user of its engine: do not use, or close, the engine
// before Tokens is closed or Close has returned.
type Stream struct {
	tokens  chan Token
	stop    context.CancelFunc // ends the generation's own context
	done    chan struct{}      // closed once the goroutine has finished everything
	closing atomic.Bool        // Close was called: a stop it causes is no error

	mu  sync.Mutex
	err error
}

// maxStreamBuffer bounds the channel's buffer, which holds one decode step (a token per
// prompt) so that the generation need not wait for every single read.
const maxStreamBuffer = 256

// Stream starts generating from prompts (as Generate, with the same opts) and returns at
// once; the tokens arrive on s.Tokens() as they are chosen, every prompt's first token,
// then one decode step at a time. The generation stops when ctx is done or s.Close is
// called; then the library stops before its next decode step, and the tokens read so far
// are the answer. Nothing stays behind: the goroutine, the cancel flag and the memory of the
// generation are gone once Tokens is closed.
//
//	s, err := engine.Stream(ctx, [][]int32{prompt}, dtrain.Options{"max_new_tokens": 32})
//	if err != nil { ... }
//	defer s.Close()
//	for tok := range s.Tokens() { ... } // break at will: Close stops the rest
//	if err := s.Err(); err != nil { ... }
//
// Stream fails at once for what Generate checks before calling the library (a closed
// engine, no prompts, an empty prompt, an option of a bad type) and for a ctx already done;
// the library's own errors (an unknown option, a prompt too long) come from s.Err().
func (e *Engine) Stream(ctx context.Context, prompts [][]int32, opts Options) (*Stream, error) {
	if ctx == nil {
		return nil, invalid("Stream needs a context, not nil (use context.Background())")
	}
	g, err := e.prepareGenerate("Stream", prompts, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		g.free()
		return nil, &Error{Status: StatusCancelled, Cause: err,
			Message: "dtrain: the context was done before Stream started"}
	}
	buffer := len(prompts)
	if buffer > maxStreamBuffer {
		buffer = maxStreamBuffer
	}
	inner, stop := context.WithCancel(ctx)
	s := &Stream{tokens: make(chan Token, buffer), stop: stop, done: make(chan struct{})}
	go s.run(e, inner, ctx, g)
	return s, nil
}

// run is the stream's goroutine: the native call, then the outcome, then the channel's close.
func (s *Stream) run(e *Engine, inner, outer context.Context, g *generateArgs) {
	defer close(s.done)
	defer close(s.tokens)
	defer s.stop()
	defer g.free()
	err := e.withContext(inner, "Stream", func() error {
		return e.runStream(g, func(prompt int, token int32) bool {
			select {
			case s.tokens <- Token{Prompt: prompt, ID: token}:
				return false
			case <-inner.Done():
				return true // the reader left: stop before the next decode step
			}
		})
	})
	if s.closing.Load() && outer.Err() == nil && errors.Is(err, ErrCancelled) {
		err = nil // stopped by Close, as asked
	}
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// Tokens returns the channel of the generated tokens, closed when the generation ends
// (finished, failed, or stopped).
func (s *Stream) Tokens() <-chan Token { return s.tokens }

// Err returns why the generation ended, once Tokens is closed (nil before): nil when it
// finished or Close stopped it; an *Error of StatusCancelled whose Cause is ctx.Err() when
// its context did (errors.Is(err, context.Canceled) holds); or the library's error.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close stops the generation if it still runs and returns once its goroutine has ended and
// everything it held is released; the engine is then free for other calls. Tokens not yet
// read are dropped. Idempotent; safe from any goroutine; returns nil (the outcome is Err's).
func (s *Stream) Close() error {
	if s == nil {
		return nil
	}
	s.closing.Store(true)
	s.stop()
	<-s.done
	for range s.tokens { // drop what the buffer still holds: a read after Close sees the end
	}
	return nil
}
