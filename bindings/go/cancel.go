package dtrain

import (
	"context"
	"errors"
	"runtime"

	"dtrain.dev/dtrain/internal/cdt"
)

// Cancellation. The ...Context methods of Engine run their native call with a dt_cancel
// flag attached to the engine; a watcher goroutine raises the flag (dt_cancel_request, the
// one libdtrain call safe from any thread) when the context is done, and the library stops
// the call at its next check point (dt_engine_set_cancel): on one rank before every layer
// and before the update of a train step or an evaluation, on a mesh once the ranks agree,
// before each decode step of a generation. The call then fails with DT_ERR_CANCELLED and
// changes nothing: a cancelled train step takes no step, and the engine stays usable.

// TrainStepContext is TrainStep, stopped when ctx is done. A stopped step returns an
// *Error of StatusCancelled whose Cause is ctx.Err(), so that both
// errors.Is(err, dtrain.ErrCancelled) and errors.Is(err, context.Canceled) (or
// context.DeadlineExceeded) hold; the engine is as before the call (Step unchanged) and
// the next step works. A ctx already done fails at once, without calling the library. A
// step that completes before the library sees the cancel returns its loss, not an error.
func (e *Engine) TrainStepContext(ctx context.Context, inputs, targets *Tensor) (float64, error) {
	var loss float64
	err := e.withContext(ctx, "TrainStepContext", func() (err error) {
		loss, err = e.TrainStep(inputs, targets)
		return err
	})
	return loss, err
}

// EvalContext is Eval, stopped when ctx is done (see TrainStepContext for the error).
func (e *Engine) EvalContext(ctx context.Context, inputs, targets *Tensor) (float64, error) {
	var loss float64
	err := e.withContext(ctx, "EvalContext", func() (err error) {
		loss, err = e.Eval(inputs, targets)
		return err
	})
	return loss, err
}

// GenerateContext is Generate, stopped before its next decode step when ctx is done (see
// TrainStepContext for the error). A stopped generation returns no tokens.
func (e *Engine) GenerateContext(ctx context.Context, prompts [][]int32, opts Options) ([][]int32, error) {
	var out [][]int32
	err := e.withContext(ctx, "GenerateContext", func() (err error) {
		out, err = e.Generate(prompts, opts)
		return err
	})
	return out, err
}

// withContext runs call, one native call on e, so that ctx can stop it (what names the
// method in errors). context.Background and other contexts that are never done cost nothing
// more than the call.
func (e *Engine) withContext(ctx context.Context, what string, call func() error) error {
	if ctx == nil {
		return invalid("%s needs a context, not nil (use context.Background())", what)
	}
	if err := ctx.Err(); err != nil {
		return &Error{Status: StatusCancelled, Cause: err,
			Message: "dtrain: the context was done before " + what + " started"}
	}
	if ctx.Done() == nil {
		return call()
	}
	h, err := e.handle()
	if err != nil {
		return err
	}
	var flag cdt.Cancel
	if err := check(cdt.Dt_cancel_create(&flag)); err != nil {
		return err
	}
	// The deferred calls run in reverse: join the watcher, detach the flag, destroy it. The
	// flag outlives every goroutine that may raise it, as dt_cancel_destroy requires.
	defer cdt.Dt_cancel_destroy(flag)
	if err := check(cdt.Dt_engine_set_cancel(h, flag)); err != nil {
		return err
	}
	defer func() {
		cdt.Dt_engine_set_cancel(h, 0)
		runtime.KeepAlive(e)
	}()
	stop, watcherDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watcherDone)
		select {
		case <-ctx.Done():
			cdt.Dt_cancel_request(flag)
		case <-stop:
		}
	}()
	defer func() {
		close(stop)
		<-watcherDone
	}()
	return withCause(call(), ctx)
}

// withCause adds ctx's error as the Cause of a cancelled call's error, so that errors.Is
// finds context.Canceled or context.DeadlineExceeded in it. The library reports only that
// the flag was raised; the context knows why.
func withCause(err error, ctx context.Context) error {
	var e *Error
	if ctx.Err() == nil || !errors.As(err, &e) || e.Status != StatusCancelled || e.Cause != nil {
		return err
	}
	return &Error{Status: e.Status, Message: e.Message, Cause: ctx.Err()}
}
