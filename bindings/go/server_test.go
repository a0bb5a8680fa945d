package dtrain_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"dtrain.dev/dtrain"
)

var servePrompts = [][]int32{{5, 17, 42, 9}, {3, 1, 4, 1, 5, 9, 2, 6}}

// newServer makes a tiny GPT and a server over it, closed when the test ends.
func newServer(t *testing.T) (*dtrain.Model, *dtrain.Server) {
	t.Helper()
	model := must(dtrain.NewGPT(dtrain.Options{"preset": "gpt-tiny", "seed": 3}))
	server := must(dtrain.NewServer(nil, model, dtrain.Options{"block_size": 4, "kv_blocks": 32}))
	t.Cleanup(func() { server.Close(); model.Close() })
	return model, server
}

// Two requests at once get, each, what Engine.Generate gives its prompt alone (greedy); the
// tokens arrive on the server's thread through the C callback, into each request's channel.
func TestServerMatchesGenerate(t *testing.T) {
	defer guard(t)
	model, server := newServer(t)
	opt := must(dtrain.NewOptimizer(model, "sgd", dtrain.Options{"lr": 0.0}))
	defer opt.Close()
	engine := must(dtrain.NewEngine(nil, model, opt, nil))
	defer engine.Close()
	var want [][]int32
	for _, p := range servePrompts {
		want = append(want, must(engine.Generate([][]int32{p},
			dtrain.Options{"max_new_tokens": 5, "temperature": 0.0}))[0])
	}

	var reqs []*dtrain.Request
	for _, p := range servePrompts {
		reqs = append(reqs, must(server.Submit(p, dtrain.Options{"max_tokens": 5, "temperature": 0.0})))
	}
	for i, r := range reqs {
		got := must(r.Wait())
		if fmt.Sprint(got) != fmt.Sprint(want[i]) {
			t.Fatalf("request %d: the server gave %v, Generate %v", i, got, want[i])
		}
		if r.State() != dtrain.RequestFinished || r.Reason() != "length" {
			t.Fatalf("request %d ended %v (%q)", i, r.State(), r.Reason())
		}
	}
	stats := must(server.Stats())
	requests := stats["requests"].(map[string]any)
	if requests["finished"] != 2.0 {
		t.Fatalf("stats say %v requests finished, want 2: %s", requests["finished"], must(server.StatsJSON()))
	}
	if m := must(server.Metrics()); !strings.Contains(m, "dtrain_requests") {
		t.Fatalf("metrics %q", m)
	}
	ok(t, server.Drain(10*time.Second))
	_, err := server.Submit(servePrompts[0], nil)
	wantErr(t, err, dtrain.ErrUnavailable)
}

// Cancel ends a long request at once: its channel closes early, RequestAborted.
func TestServerCancel(t *testing.T) {
	defer guard(t)
	_, server := newServer(t)
	// The request takes milliseconds; if one ends before Cancel reaches it (a busy
	// machine), try again.
	var r *dtrain.Request
	for attempt := 0; attempt < 5; attempt++ {
		r = must(server.Submit([]int32{1, 2, 3}, dtrain.Options{"max_tokens": 60}))
		ok(t, r.Cancel())
		tokens, err := r.Wait()
		if r.State() == dtrain.RequestFinished {
			continue
		}
		wantErr(t, err, dtrain.ErrAborted, "abort")
		if r.State() != dtrain.RequestAborted || len(tokens) >= 60 {
			t.Fatalf("cancelled request ended %v with %d tokens", r.State(), len(tokens))
		}
		ok(t, r.Cancel()) // already ended: nothing to do
		return
	}
	t.Fatal("every request ended before Cancel reached it")
}

// A bad option fails naming its key, at creation and at submission; the handle checks hold.
func TestServerErrors(t *testing.T) {
	defer guard(t)
	model, server := newServer(t)
	_, err := dtrain.NewServer(nil, model, dtrain.Options{"kv_blokcs": 32})
	wantErr(t, err, dtrain.ErrInvalidArgument, "kv_blokcs")
	_, err = server.Submit([]int32{1, 2}, dtrain.Options{"max_tokenz": 3})
	wantErr(t, err, dtrain.ErrInvalidArgument, "max_tokenz")
	_, err = server.Submit(nil, nil)
	wantErr(t, err, dtrain.ErrInvalidArgument, "prompt")
	ctx, vocab, err := server.ModelInfo()
	ok(t, err)
	if ctx != 64 || vocab <= 0 {
		t.Fatalf("ModelInfo = %d, %d", ctx, vocab)
	}
	// A request longer than the context is accepted, then rejected.
	r := must(server.Submit(make([]int32, ctx+1), nil))
	_, err = r.Wait()
	wantErr(t, err, dtrain.ErrInvalidArgument, "rejected")
	if r.State() != dtrain.RequestRejected {
		t.Fatalf("an over-long request ended %v", r.State())
	}
	server.Close()
	_, err = server.StatsJSON()
	wantErr(t, err, dtrain.ErrInvalidArgument, "closed")
}
