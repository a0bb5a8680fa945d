package dtrain_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"dtrain.dev/dtrain"
)

// settled collects garbage until the memory ledger (cpu, every tag) and the number of
// goroutines stop falling, and returns both: what a leak check compares before and after.
// It waits on the runtime, not on a clock: a leak shows as a value that never comes back.
func settled(t *testing.T) (bytes int64, goroutines int) {
	t.Helper()
	read := func() (int64, int) {
		runtime.GC()
		current, _, err := dtrain.MemoryStats("cpu", dtrain.MemAll)
		ok(t, err)
		return current, runtime.NumGoroutine()
	}
	bytes, goroutines = read()
	for i := 0; i < 200; i++ { // at most 2 s for exiting goroutines and finalizers
		time.Sleep(10 * time.Millisecond)
		b, g := read()
		if b == bytes && g == goroutines {
			break
		}
		bytes, goroutines = b, g
	}
	return bytes, goroutines
}

// wantNoLeak checks that the ledger and the goroutines come back to where they were.
func wantNoLeak(t *testing.T, bytes int64, goroutines int) {
	t.Helper()
	b, g := settled(t)
	if b != bytes || g != goroutines {
		t.Fatalf("after the stream: %d bytes held and %d goroutines; before: %d and %d", b, g, bytes, goroutines)
	}
}

// Read to its end, a Stream delivers exactly what Generate returns, step by step.
func TestStreamToTheEnd(t *testing.T) {
	defer guard(t)
	r := newRun(t, nil)
	r.step(t)
	prompts := [][]int32{{'1', '2', '+', '3', '='}, {'7'}, {'9', '9', '+'}}
	opts := dtrain.Options{"max_new_tokens": 6}
	want := must(r.engine.Generate(prompts, opts))
	bytes, goroutines := settled(t)

	s := must(r.engine.Stream(context.Background(), prompts, opts))
	var got streamed
	collect := got.collect(len(prompts))
	for tok := range s.Tokens() {
		collect(tok.Prompt, tok.ID)
	}
	ok(t, s.Err())
	if fmt.Sprint(got.tokens) != fmt.Sprint(want) {
		t.Fatalf("streamed %v, Generate %v", got.tokens, want)
	}
	got.wantStepByStep(t, len(prompts))
	ok(t, s.Close())
	ok(t, s.Close()) // idempotent
	wantNoLeak(t, bytes, goroutines)
}

// Leaving early, by Close or by cancelling the context, stops the generation and leaves
// nothing behind: the memory ledger and the goroutine count return to where they were, and
// the engine generates as before.
func TestStreamLeftEarly(t *testing.T) {
	defer guard(t)
	r := newRun(t, nil)
	prompts := [][]int32{{'4', '4', '+', '5', '5', '='}, {'8'}}
	opts := dtrain.Options{"max_new_tokens": 40}
	want := must(r.engine.Generate(prompts, opts))
	bytes, goroutines := settled(t)

	// break out of the loop; the deferred Close of real code stops the rest.
	s := must(r.engine.Stream(context.Background(), prompts, opts))
	n := 0
	for tok := range s.Tokens() {
		if tok.ID != want[tok.Prompt][n/len(prompts)] {
			t.Fatalf("token %d of prompt %d is %d; Generate made %d", n/len(prompts), tok.Prompt, tok.ID, want[tok.Prompt][n/len(prompts)])
		}
		if n++; n == 3 {
			break
		}
	}
	ok(t, s.Close())
	ok(t, s.Err()) // stopped by Close, as asked: no error
	if _, open := <-s.Tokens(); open {
		t.Fatal("Tokens is still open after Close")
	}
	wantNoLeak(t, bytes, goroutines)

	// Cancel the context: the channel closes, and Err says why.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s = must(r.engine.Stream(ctx, prompts, opts))
	n = 0
	for range s.Tokens() {
		if n++; n == 2 {
			cancel()
		}
	}
	if n >= 40*len(prompts) {
		t.Fatalf("the generation ran to its end (%d tokens) after the cancel", n)
	}
	wantCancelled(t, s.Err(), context.Canceled)
	ok(t, s.Close())
	wantNoLeak(t, bytes, goroutines)

	// Close without reading anything, from another goroutine than the one that made it.
	s = must(r.engine.Stream(context.Background(), prompts, opts))
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Close()
	}()
	<-done
	ok(t, s.Err())
	wantNoLeak(t, bytes, goroutines)

	again := must(r.engine.Generate(prompts, opts))
	if fmt.Sprint(again) != fmt.Sprint(want) {
		t.Fatalf("after the streams: %v, before %v", again, want)
	}
}

// The binding's checks fail Stream at once; the library's errors come through Err.
func TestStreamErrors(t *testing.T) {
	defer guard(t)
	r := newRun(t, nil)
	prompt := []int32{'1', '2', '+'}
	bg := context.Background()
	_, err := r.engine.Stream(bg, nil, nil)
	wantErr(t, err, dtrain.ErrInvalidArgument, "Stream needs 1 to")
	_, err = r.engine.Stream(bg, [][]int32{prompt, {}}, nil)
	wantErr(t, err, dtrain.ErrInvalidArgument, "prompt 1 is empty")
	_, err = r.engine.Stream(bg, [][]int32{prompt}, dtrain.Options{"x": nil})
	wantErr(t, err, dtrain.ErrInvalidArgument, "nil value")
	//lint:ignore SA1012 a nil context is what this checks
	_, err = r.engine.Stream(nil, [][]int32{prompt}, nil) //nolint:staticcheck
	wantErr(t, err, dtrain.ErrInvalidArgument, "context")

	s := must(r.engine.Stream(bg, [][]int32{prompt}, dtrain.Options{"no_such_option": 1}))
	for tok := range s.Tokens() {
		t.Fatalf("a failed generation delivered %v", tok)
	}
	wantErr(t, s.Err(), dtrain.ErrInvalidArgument, "no_such_option")
	if !strings.HasPrefix(s.Err().(*dtrain.Error).Message, "dt_engine_generate_stream_v2: ") {
		t.Fatalf("the message is not the failed call's: %v", s.Err())
	}
	ok(t, s.Close())

	r.engine.Close()
	_, err = r.engine.Stream(bg, [][]int32{prompt}, nil)
	wantErr(t, err, dtrain.ErrInvalidArgument, "the Engine is closed")
	var nilStream *dtrain.Stream
	ok(t, nilStream.Close())
}
