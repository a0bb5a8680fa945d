package dtrain_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"dtrain.dev/dtrain"
)

// bigRun is a GPT on one rank (no mesh: the engine checks the flag before every layer)
// whose train step takes long enough (a second or more) for a cancel to land well inside
// it. Many thin layers and micro-batches of one sequence keep each check close to the next
// (a few ms), so that the 100 ms bound holds on a loaded machine too.
type bigRun struct {
	model   *dtrain.Model
	engine  *dtrain.Engine
	in, tgt *dtrain.Tensor
}

func newBigRun(t *testing.T) *bigRun {
	t.Helper()
	r := &bigRun{}
	r.model = must(dtrain.NewGPT(dtrain.Options{"preset": "gpt-tiny", "n_layer": 24, "d_model": 128,
		"n_head": 4, "context": 128, "seed": 3}))
	opt := must(dtrain.NewOptimizer(r.model, "adamw", dtrain.Options{"lr": 1e-3}))
	r.engine = must(dtrain.NewEngine(nil, r.model, opt, dtrain.Options{"micro_batches": 16}))
	r.in = must(dtrain.NewTensor(dtrain.I32, 16, 128))
	r.tgt = must(dtrain.NewTensor(dtrain.I32, 16, 128))
	in, tgt := must(r.in.Int32View()), must(r.tgt.Int32View()) // filled in place, no copy
	for i := range in {
		in[i], tgt[i] = int32(i*7%250), int32((i*7+1)%250)
	}
	t.Cleanup(func() {
		for _, h := range []interface{ Close() error }{r.engine, opt, r.model, r.in, r.tgt} {
			h.Close()
		}
	})
	return r
}

// firstParam copies the model's first parameter tensor.
func firstParam(m *dtrain.Model) []float32 {
	p := must(m.Param(m.ParamNames()[0]))
	defer p.Close()
	return must(p.Float32s())
}

// wantCancelled checks that err is a call stopped by its context: an *Error of
// StatusCancelled that is also the context's error (cause).
func wantCancelled(t *testing.T, err error, cause error) {
	t.Helper()
	var e *dtrain.Error
	if !errors.As(err, &e) || e.Status != dtrain.StatusCancelled {
		t.Fatalf("want a *dtrain.Error of StatusCancelled, got %T: %v", err, err)
	}
	if !errors.Is(err, dtrain.ErrCancelled) || !errors.Is(err, cause) {
		t.Fatalf("errors.Is(%v) does not find both ErrCancelled and %v", err, cause)
	}
}

// cancelDelay is when to cancel a call that takes about callTime: 200 ms in, or a third of
// the call on a machine fast enough to finish it before.
func cancelDelay(callTime time.Duration) time.Duration {
	if d := callTime / 3; d < 200*time.Millisecond {
		return d
	}
	return 200 * time.Millisecond
}

// cancelAfter cancels ctx after d and sends the time it did so.
func cancelAfter(d time.Duration, cancel context.CancelFunc) (at <-chan time.Time, stop func() bool) {
	ch := make(chan time.Time, 1)
	timer := time.AfterFunc(d, func() {
		ch <- time.Now()
		cancel()
	})
	return ch, timer.Stop
}

// The bound: a cancel in the middle of a train step returns within 100 ms, changes
// nothing (step count and weights), and the next step works.
func TestTrainStepContextCancelMidStep(t *testing.T) {
	defer guard(t)
	r := newBigRun(t)
	start := time.Now()
	must(r.engine.TrainStepContext(context.Background(), r.in, r.tgt))
	stepTime := time.Since(start)
	before, step := firstParam(r.model), r.engine.Step()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelledAt, stop := cancelAfter(cancelDelay(stepTime), cancel)
	defer stop()
	_, err := r.engine.TrainStepContext(ctx, r.in, r.tgt)
	returned := time.Now()
	if err == nil {
		t.Fatalf("the step (%v) ended before the cancel %v in", stepTime, cancelDelay(stepTime))
	}
	latency := returned.Sub(<-cancelledAt)
	t.Logf("step %v; returned %v after the cancel: %v", stepTime, latency, err)
	wantCancelled(t, err, context.Canceled)
	if latency > 100*time.Millisecond {
		t.Fatalf("TrainStepContext returned %v after the cancel; want within 100ms", latency)
	}
	if r.engine.Step() != step || fmt.Sprint(firstParam(r.model)) != fmt.Sprint(before) {
		t.Fatal("the cancelled step changed the step count or the weights")
	}
	must(r.engine.TrainStepContext(context.Background(), r.in, r.tgt))
	if got := r.engine.Step(); got != step+1 {
		t.Fatalf("step after the next train step = %d, want %d", got, step+1)
	}
}

// A deadline in the middle of an evaluation stops it the same way.
func TestEvalContextDeadline(t *testing.T) {
	defer guard(t)
	r := newBigRun(t)
	start := time.Now()
	want := must(r.engine.Eval(r.in, r.tgt))
	evalTime := time.Since(start)

	ctx, cancel := context.WithTimeout(context.Background(), cancelDelay(evalTime))
	defer cancel()
	_, err := r.engine.EvalContext(ctx, r.in, r.tgt)
	returned := time.Now()
	if err == nil {
		t.Fatalf("the evaluation (%v) ended before its deadline %v in", evalTime, cancelDelay(evalTime))
	}
	deadline, _ := ctx.Deadline()
	t.Logf("eval %v; returned %v after the deadline: %v", evalTime, returned.Sub(deadline), err)
	wantCancelled(t, err, context.DeadlineExceeded)
	if latency := returned.Sub(deadline); latency > 100*time.Millisecond {
		t.Fatalf("EvalContext returned %v after the deadline; want within 100ms", latency)
	}
	if got := must(r.engine.EvalContext(context.Background(), r.in, r.tgt)); got != want {
		t.Fatalf("eval after the cancelled one = %v, want %v", got, want)
	}
}

// A context already done fails every ...Context call at once, before the library runs
// anything; a nil one is an invalid argument.
func TestContextDoneBeforeTheCall(t *testing.T) {
	defer guard(t)
	r := newRun(t, nil)
	ok(t, r.loader.Next(r.in, r.tgt))
	prompts := [][]int32{{'1', '+', '2', '='}}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		ctx   context.Context
		cause error
	}{{cancelled, context.Canceled}, {expired, context.DeadlineExceeded}} {
		_, err := r.engine.TrainStepContext(c.ctx, r.in, r.tgt)
		wantCancelled(t, err, c.cause)
		_, err = r.engine.EvalContext(c.ctx, r.in, r.tgt)
		wantCancelled(t, err, c.cause)
		_, err = r.engine.GenerateContext(c.ctx, prompts, nil)
		wantCancelled(t, err, c.cause)
		_, err = r.engine.GenerateStreamContext(c.ctx, prompts, nil, func(int, int32) {
			t.Error("a token was passed by a call whose context was done")
		})
		wantCancelled(t, err, c.cause)
		_, err = r.engine.Stream(c.ctx, prompts, nil)
		wantCancelled(t, err, c.cause)
	}
	if n := r.engine.Step(); n != 0 {
		t.Fatalf("step = %d after calls that were not made", n)
	}
	//lint:ignore SA1012 a nil context is what this checks
	_, err := r.engine.TrainStepContext(nil, r.in, r.tgt) //nolint:staticcheck
	wantErr(t, err, dtrain.ErrInvalidArgument, "context")
	must(r.engine.TrainStepContext(context.Background(), r.in, r.tgt))
	if n := r.engine.Step(); n != 1 {
		t.Fatalf("step = %d, want 1", n)
	}
}

// onToken cancelling the context stops the generation right after it returns: no token
// comes after the cancel, the call returns no result, and the engine generates as before.
func TestGenerateStreamContextCancel(t *testing.T) {
	defer guard(t)
	r := newRun(t, nil)
	prompts := [][]int32{{'4', '5', '+', '6', '='}}
	opts := dtrain.Options{"max_new_tokens": 12}
	want := must(r.engine.Generate(prompts, opts))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []int32
	out, err := r.engine.GenerateStreamContext(ctx, prompts, opts, func(_ int, token int32) {
		got = append(got, token)
		if len(got) == 3 {
			cancel()
		}
	})
	wantCancelled(t, err, context.Canceled)
	if out != nil || fmt.Sprint(got) != fmt.Sprint(want[0][:3]) {
		t.Fatalf("cancelled after 3 tokens: streamed %v, returned %v; Generate gives %v", got, out, want)
	}
	if again := must(r.engine.GenerateContext(context.Background(), prompts, opts)); fmt.Sprint(again) != fmt.Sprint(want) {
		t.Fatalf("after the cancel: %v, before %v", again, want)
	}
}
