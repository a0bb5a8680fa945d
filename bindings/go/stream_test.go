package dtrain_test

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"dtrain.dev/dtrain"
)

// goroutineID reads the running goroutine's number from its stack header.
func goroutineID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf = bytes.TrimPrefix(buf, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(buf[:bytes.IndexByte(buf, ' ')]), 10, 64)
	return id
}

// streamed is what a GenerateStream callback saw: the tokens of each prompt, and the
// prompt index of every call in order.
type streamed struct {
	tokens [][]int32
	order  []int
}

func (s *streamed) collect(n int) func(int, int32) {
	s.tokens = make([][]int32, n)
	return func(prompt int, token int32) {
		s.tokens[prompt] = append(s.tokens[prompt], token)
		s.order = append(s.order, prompt)
	}
}

// wantStepByStep fails unless the prompts took turns: one token of every unfinished prompt
// per decode step (all prompts here run to the same length).
func (s *streamed) wantStepByStep(t *testing.T, prompts int) {
	t.Helper()
	for i, p := range s.order {
		if p != i%prompts {
			t.Fatalf("streamed prompt order %v is not one step of every prompt at a time", s.order)
		}
	}
}

// The tokens passed to onToken are, per prompt, GenerateStream's result, which is what
// Generate returns for the same prompts and greedy options; they come one decode step at
// a time, on the calling goroutine.
func TestGenerateStream(t *testing.T) {
	defer guard(t)
	r := newRun(t, nil)
	r.step(t)
	prompts := [][]int32{{'1', '2', '+', '3', '='}, {'7'}, {'9', '9', '+'}}
	opts := dtrain.Options{"max_new_tokens": 6}
	want := must(r.engine.Generate(prompts, opts))

	var s streamed
	collect := s.collect(len(prompts))
	caller := goroutineID()
	foreign := 0
	got := must(r.engine.GenerateStream(prompts, opts, func(prompt int, token int32) {
		if goroutineID() != caller {
			foreign++
		}
		collect(prompt, token)
	}))
	if foreign != 0 {
		t.Fatalf("%d tokens were passed on another goroutine than the caller's", foreign)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("GenerateStream returned %v, Generate %v", got, want)
	}
	if fmt.Sprint(s.tokens) != fmt.Sprint(got) {
		t.Fatalf("streamed %v, returned %v", s.tokens, got)
	}
	if len(s.order) != 6*len(prompts) {
		t.Fatalf("%d tokens streamed, want %d", len(s.order), 6*len(prompts))
	}
	s.wantStepByStep(t, len(prompts))
	if stats := must(r.engine.LastGenerateStatsJSON()); !strings.Contains(stats, "new_tokens") {
		t.Fatalf("generate stats %q", stats)
	}

	// A stop token ends prompt 0 after its first token: rows of different lengths.
	stop := dtrain.Options{"max_new_tokens": 6, "stop_token": int(want[0][0])}
	want = must(r.engine.Generate(prompts, stop))
	if len(want[0]) != 1 {
		t.Fatalf("stop_token %d: prompt 0 generated %v", want[0][0], want[0])
	}
	s = streamed{}
	got = must(r.engine.GenerateStream(prompts, stop, s.collect(len(prompts))))
	if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(s.tokens) != fmt.Sprint(want) {
		t.Fatalf("with a stop token: streamed %v, returned %v, Generate %v", s.tokens, got, want)
	}
}

// A panic in onToken is recovered before it reaches the library, no later token is passed
// on, the generation stops, and GenerateStream panics again with the same value once the
// native call is over; the engine is still usable.
func TestGenerateStreamPanic(t *testing.T) {
	defer guard(t)
	r := newRun(t, nil)
	prompts := [][]int32{{'1', '+', '1', '='}, {'2'}}
	opts := dtrain.Options{"max_new_tokens": 4}
	boom := errors.New("boom")

	// stream runs GenerateStream and reports whether it returned, and what it panicked with.
	stream := func(onToken func(int, int32)) (returned bool, value any) {
		defer func() {
			if !returned {
				value = recover()
			}
		}()
		r.engine.GenerateStream(prompts, opts, onToken)
		return true, nil
	}
	calls := 0
	returned, value := stream(func(int, int32) {
		calls++
		if calls == 2 {
			panic(boom)
		}
	})
	if returned || value != boom {
		t.Fatalf("GenerateStream returned = %v, panicked with %v; want a panic with %v", returned, value, boom)
	}
	if calls != 2 {
		t.Fatalf("onToken was called %d times; want 2 (none after it panicked)", calls)
	}

	// panic(nil) is a panic too (recover cannot tell it apart; the binding can).
	calls = 0
	returned, value = stream(func(int, int32) {
		calls++
		panic(nil)
	})
	if returned || value != nil || calls != 1 {
		t.Fatalf("panic(nil): returned = %v, value %v, %d calls", returned, value, calls)
	}

	want := must(r.engine.Generate(prompts, opts))
	var s streamed
	got := must(r.engine.GenerateStream(prompts, opts, s.collect(len(prompts))))
	if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(s.tokens) != fmt.Sprint(want) {
		t.Fatalf("after the panics: streamed %v, returned %v, Generate %v", s.tokens, got, want)
	}
}

// The binding's checks and the library's failures give GenerateStream the errors Generate
// gets (the library's message read in the same native call), and call nothing back; a
// closed engine is ErrInvalidArgument.
func TestGenerateStreamErrors(t *testing.T) {
	defer guard(t)
	r := newRun(t, nil)
	prompt := []int32{'1', '2', '+'}
	calls := 0
	count := func(int, int32) { calls++ }

	_, err := r.engine.GenerateStream([][]int32{prompt}, nil, nil)
	wantErr(t, err, dtrain.ErrInvalidArgument, "onToken")
	_, err = r.engine.GenerateStream(nil, nil, count)
	wantErr(t, err, dtrain.ErrInvalidArgument, "GenerateStream needs 1 to")
	_, err = r.engine.GenerateStream([][]int32{prompt, {}}, nil, count)
	wantErr(t, err, dtrain.ErrInvalidArgument, "prompt 1 is empty")
	_, err = r.engine.GenerateStream([][]int32{prompt}, dtrain.Options{"x": nil}, count)
	wantErr(t, err, dtrain.ErrInvalidArgument, "nil value")

	for _, opts := range []dtrain.Options{
		{"max_new_tokens": 100000},   // does not fit the context
		{"no_such_option": 1},        // unknown key
		{"temperature": "very warm"}, // wrong type
	} {
		_, genErr := r.engine.Generate([][]int32{prompt}, opts)
		_, err := r.engine.GenerateStream([][]int32{prompt}, opts, count)
		// The library's message names the function that failed (so it is this call's, not
		// the one Generate left on the thread) and then says what Generate's says.
		var e, g *dtrain.Error
		if !errors.As(genErr, &g) || !errors.As(err, &e) || e.Status != g.Status ||
			!strings.HasPrefix(e.Message, "dt_engine_generate_stream_v2: ") ||
			!strings.Contains(e.Message, strings.TrimPrefix(g.Message, "dt_engine_generate: ")) {
			t.Fatalf("options %v: GenerateStream failed with %v, Generate with %v", opts, err, genErr)
		}
		t.Logf("options %v: %v", opts, err)
	}

	r.engine.Close()
	_, err = r.engine.GenerateStream([][]int32{prompt}, nil, count)
	wantErr(t, err, dtrain.ErrInvalidArgument, "the Engine is closed")
	var nilEngine *dtrain.Engine
	_, err = nilEngine.GenerateStream([][]int32{prompt}, nil, count)
	wantErr(t, err, dtrain.ErrInvalidArgument, "nil *Engine")
	if calls != 0 {
		t.Fatalf("onToken was called %d times by calls that failed", calls)
	}
}
