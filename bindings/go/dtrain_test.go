package dtrain_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"dtrain.dev/dtrain"
)

// must returns v, or stops the test at its caller when err is set (with the deferred
// guard(t) that each test starts with: Go cannot pass t next to a two-valued call).
func must[T any](v T, err error) T {
	if err != nil {
		_, file, line, _ := runtime.Caller(1)
		panic(mustFailure{fmt.Sprintf("%s:%d: %v", filepath.Base(file), line, err)})
	}
	return v
}

type mustFailure struct{ msg string }

func guard(t *testing.T) {
	if r := recover(); r != nil {
		if f, isMust := r.(mustFailure); isMust {
			t.Fatal(f.msg)
		}
		panic(r)
	}
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantErr checks that err is a *dtrain.Error of status want whose message mentions every
// one of the given fragments.
func wantErr(t *testing.T, err error, want *dtrain.Error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s, got no error", want.StatusName())
	}
	var e *dtrain.Error
	if !errors.As(err, &e) {
		t.Fatalf("want a *dtrain.Error, got %T: %v", err, err)
	}
	if !errors.Is(err, want) {
		t.Fatalf("want %s, got %v", want.StatusName(), err)
	}
	for _, f := range fragments {
		if !strings.Contains(e.Message, f) {
			t.Fatalf("the message of %v does not mention %q", err, f)
		}
	}
}

func TestVersionAndNames(t *testing.T) {
	defer guard(t)
	v := dtrain.Version()
	n := dtrain.VersionNumber()
	if want := fmt.Sprintf("%d.%d.%d", n/10000, n/100%100, n%100); v != want {
		t.Fatalf("Version() = %q, VersionNumber() = %d", v, n)
	}
	if got := dtrain.StatusName(dtrain.StatusIO); got != "DT_ERR_IO" {
		t.Fatalf("StatusName(IO) = %q", got)
	}
	if got := dtrain.StatusName(12345); got != "DT_ERR_UNKNOWN" {
		t.Fatalf("StatusName(12345) = %q", got)
	}
	if dtrain.BF16.String() != "bf16" || dtrain.I32.Size() != 4 || dtrain.MemKVCache.String() != "kv_cache" {
		t.Fatal("dtype or tag names are off")
	}
	e := &dtrain.Error{Status: dtrain.StatusNotFound, Message: "no such thing"}
	if e.Error() != "DT_ERR_NOT_FOUND: no such thing" || errors.Is(e, dtrain.ErrIO) || !errors.Is(e, dtrain.ErrNotFound) {
		t.Fatalf("Error formatting or matching is off: %v", e)
	}
	if n := must(dtrain.DeviceCount("cpu")); n != 1 {
		t.Fatalf("DeviceCount(cpu) = %d", n)
	}
}

func TestTensorRoundTrip(t *testing.T) {
	defer guard(t)
	x := must(dtrain.NewTensor(dtrain.F32, 2, 3))
	defer x.Close()
	if s := x.Shape(); len(s) != 2 || s[0] != 2 || s[1] != 3 {
		t.Fatalf("shape %v", s)
	}
	if d := x.DType(); d != dtrain.F32 {
		t.Fatalf("dtype %v", d)
	}
	if n := x.Numel(); n != 6 {
		t.Fatalf("numel %d", n)
	}
	if n := x.NBytes(); n != 24 {
		t.Fatalf("nbytes %d", n)
	}
	if d := x.Device(); d != "cpu" {
		t.Fatalf("device %q", d)
	}
	src := []float32{1, 2, 3, 4, 5, 6}
	ok(t, x.CopyFromFloat32(src))
	got := must(x.Float32s())
	for i := range src {
		if got[i] != src[i] {
			t.Fatalf("round trip %v != %v", got, src)
		}
	}
	raw := make([]byte, 24)
	ok(t, x.CopyToBytes(raw))
	y := must(dtrain.NewTensor(dtrain.I32, 6))
	defer y.Close()
	ok(t, x.CopyTo(y)) // converting copy
	if ints := must(y.Int32s()); ints[5] != 6 {
		t.Fatalf("converted %v", ints)
	}
	s := must(dtrain.NewTensor(dtrain.I64)) // a scalar
	defer s.Close()
	ok(t, s.CopyFromInt64([]int64{42}))
	if sh := s.Shape(); len(sh) != 0 {
		t.Fatalf("scalar shape %v", sh)
	}
	_, err := dtrain.NewTensorOn("cpu", dtrain.F32, []int{2}, dtrain.Options{"tag": "nonsense"})
	wantErr(t, err, dtrain.ErrInvalidArgument)
	_, err = dtrain.NewTensor(dtrain.F32, 2, 0)
	wantErr(t, err, dtrain.ErrInvalidArgument)
	_, err = dtrain.NewTensor(dtrain.F32, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	wantErr(t, err, dtrain.ErrInvalidArgument)
}

func TestTensorBadInput(t *testing.T) {
	defer guard(t)
	x := must(dtrain.NewTensor(dtrain.F32, 4))
	wantErr(t, x.CopyFromInt32([]int32{1, 2, 3, 4}), dtrain.ErrInvalidArgument, "dtype")
	wantErr(t, x.CopyFromFloat32([]float32{1, 2, 3}), dtrain.ErrInvalidArgument, "3 elements")
	wantErr(t, x.CopyFromFloat32(nil), dtrain.ErrInvalidArgument, "0 elements")
	wantErr(t, x.CopyToFloat32(make([]float32, 5)), dtrain.ErrInvalidArgument)
	wantErr(t, x.CopyToInt64(make([]int64, 4)), dtrain.ErrInvalidArgument, "dtype")
	wantErr(t, x.CopyFromBytes(make([]byte, 15)), dtrain.ErrInvalidArgument, "bytes")
	ok(t, x.CopyFromBytes(make([]byte, 16)))

	ok(t, x.Close())
	ok(t, x.Close()) // idempotent
	wantErr(t, x.CopyFromFloat32([]float32{1, 2, 3, 4}), dtrain.ErrInvalidArgument, "closed")
	// The getters cannot fail on a live tensor; a closed, zero or nil one reads as zero.
	if x.Shape() != nil || x.DType() != 0 || x.Numel() != 0 || x.NBytes() != 0 || x.Device() != "" {
		t.Fatalf("a closed tensor reads as %v %v %d %d %q", x.Shape(), x.DType(), x.Numel(), x.NBytes(), x.Device())
	}
	_, err := x.Float32s()
	wantErr(t, err, dtrain.ErrInvalidArgument, "closed")

	var never dtrain.Tensor // not made by a constructor
	if never.Numel() != 0 || never.PieceCount() != 0 {
		t.Fatal("a zero Tensor reads as nonzero")
	}
	wantErr(t, never.CopyFromFloat32([]float32{1}), dtrain.ErrInvalidArgument, "closed")
	var nilTensor *dtrain.Tensor
	if nilTensor.Numel() != 0 || nilTensor.Shape() != nil {
		t.Fatal("a nil *Tensor reads as nonzero")
	}
	wantErr(t, nilTensor.CopyToFloat32([]float32{1}), dtrain.ErrInvalidArgument, "nil")
	ok(t, nilTensor.Close())
}

func TestNilHandles(t *testing.T) {
	defer guard(t)
	_, err := dtrain.NewOptimizer(nil, "adamw", nil)
	wantErr(t, err, dtrain.ErrInvalidArgument, "Model")
	_, err = dtrain.NewEngine(nil, nil, nil, nil)
	wantErr(t, err, dtrain.ErrInvalidArgument, "Model")
	model := must(dtrain.NewGPT(dtrain.Options{"preset": "gpt-tiny"}))
	defer model.Close()
	_, err = dtrain.NewEngine(nil, model, nil, nil)
	wantErr(t, err, dtrain.ErrInvalidArgument, "Optimizer")
	_, err = dtrain.NewLoader(nil, dtrain.Options{"batch": 2})
	wantErr(t, err, dtrain.ErrInvalidArgument, "Dataset")
	var e *dtrain.Engine
	_, err = e.TrainStep(nil, nil)
	wantErr(t, err, dtrain.ErrInvalidArgument, "Engine")
	wantErr(t, e.Save("x"), dtrain.ErrInvalidArgument, "Engine")
	var m *dtrain.Mesh
	if m.WorldSize() != 0 || m.Backend() != "" {
		t.Fatal("a nil *Mesh reads as nonzero")
	}
	wantErr(t, m.Barrier("world"), dtrain.ErrInvalidArgument, "Mesh")
	mesh := must(dtrain.NewMesh("local", 2, nil))
	defer mesh.Close()
	wantErr(t, mesh.AllReduce("dp", nil, dtrain.ReduceSum), dtrain.ErrInvalidArgument, "Tensor")
	ds := must(dtrain.NewDataset("addition", dtrain.Options{"size": 64}))
	defer ds.Close()
	l := must(dtrain.NewLoader(ds, dtrain.Options{"batch": 2}))
	defer l.Close()
	wantErr(t, l.Next(nil, nil), dtrain.ErrInvalidArgument, "Tensor")
}

func TestLibraryErrors(t *testing.T) {
	defer guard(t)
	_, err := dtrain.NewMesh("local", 2, dtrain.Options{"bogus_mesh_key": 1})
	wantErr(t, err, dtrain.ErrInvalidArgument, "bogus_mesh_key")
	_, err = dtrain.NewMesh("carrier-pigeon", 2, nil)
	wantErr(t, err, dtrain.ErrInvalidArgument, "carrier-pigeon")

	model := must(dtrain.NewGPT(dtrain.Options{"preset": "gpt-tiny", "seed": 1}))
	defer model.Close()
	opt := must(dtrain.NewOptimizer(model, "adamw", nil))
	defer opt.Close()
	_, err = dtrain.NewEngine(nil, model, opt, dtrain.Options{"bogus_engine_key": true})
	wantErr(t, err, dtrain.ErrInvalidArgument, "bogus_engine_key")
	_, err = dtrain.NewOptimizer(model, "adamw", dtrain.Options{"lr": "fast"})
	wantErr(t, err, dtrain.ErrInvalidArgument, "lr")
	_, err = dtrain.NewOptimizer(model, "lion", nil)
	wantErr(t, err, dtrain.ErrInvalidArgument, "lion")
	_, err = dtrain.NewGPT(dtrain.Options{"preset": "gpt-tiny", "n_layer": []int{2}})
	wantErr(t, err, dtrain.ErrInvalidArgument, "n_layer", "[]int")
	_, err = dtrain.NewDataset("no-such-kind", nil)
	wantErr(t, err, dtrain.ErrInvalidArgument, "no-such-kind")

	engine := must(dtrain.NewEngine(nil, model, opt, nil))
	defer engine.Close()
	missing := filepath.Join(t.TempDir(), "missing", "ckpt")
	wantErr(t, engine.Load(missing), dtrain.ErrIO, "missing")
	_, err = dtrain.NewModelFromCheckpoint(missing)
	wantErr(t, err, dtrain.ErrIO)
	_, err = model.Param("no.such.param")
	wantErr(t, err, dtrain.ErrNotFound, "no.such.param")
}

// The message is read inside the failing native call, so goroutines failing at once (and
// moving between OS threads) each get their own.
func TestErrorMessagesFromManyGoroutines(t *testing.T) {
	defer guard(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				key := fmt.Sprintf("key_g%d_i%d", g, i)
				_, err := dtrain.NewMesh("local", 1, dtrain.Options{key: 1})
				var e *dtrain.Error
				if !errors.As(err, &e) || !strings.Contains(e.Message, key) {
					errs <- fmt.Errorf("goroutine %d: want a message naming %s, got %v", g, key, err)
					return
				}
				runtime.Gosched()
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestOptionsValueTypes(t *testing.T) {
	defer guard(t)
	type myInt int
	ds, err := dtrain.NewDataset("addition", dtrain.Options{
		"digits": myInt(2), "size": uint16(100), "seed": int64(3), "split": "all",
	})
	ok(t, err)
	defer ds.Close()
	if n := ds.Size(); n != 100 {
		t.Fatalf("size %d", n)
	}
	in, tg, err := ds.Example(0)
	ok(t, err)
	if len(in) != ds.Context() || len(tg) != len(in) {
		t.Fatal("example length differs from the context")
	}
	_, err = dtrain.NewDataset("addition", dtrain.Options{"digits": nil})
	wantErr(t, err, dtrain.ErrInvalidArgument, "digits")
	_, err = dtrain.NewDataset("addition", dtrain.Options{"size": uint64(math.MaxUint64)})
	wantErr(t, err, dtrain.ErrInvalidArgument, "size")
	ok(t, dtrain.Configure(nil))
	wantErr(t, dtrain.Configure(dtrain.Options{"threads": 0.5}), dtrain.ErrInvalidArgument, "threads")
}

func TestMeshAllReduce(t *testing.T) {
	defer guard(t)
	mesh := must(dtrain.NewMesh("local", 2, nil))
	defer mesh.Close()
	if n := mesh.WorldSize(); n != 2 {
		t.Fatalf("world size %d", n)
	}
	if n := must(mesh.AxisSize("dp")); n != 2 {
		t.Fatalf("dp size %d", n)
	}
	if n := mesh.LocalRankCount(); n != 2 {
		t.Fatalf("local ranks %d", n)
	}
	if b := mesh.Backend(); b != "local" {
		t.Fatalf("backend %q", b)
	}
	x := must(mesh.NewTensor(dtrain.F32, 3))
	defer x.Close()
	if n := x.PieceCount(); n != 2 {
		t.Fatalf("pieces %d", n)
	}
	for r := 0; r < 2; r++ {
		p := must(x.Piece(r))
		ok(t, p.CopyFromFloat32([]float32{float32(r + 1), 10, 100}))
		p.Close()
	}
	wantErr(t, x.CopyFromFloat32([]float32{1, 2, 3}), dtrain.ErrInvalidArgument) // two pieces
	ok(t, mesh.AllReduce("dp", x, dtrain.ReduceSum))
	ok(t, mesh.Close()) // the mesh tensor keeps the mesh alive
	for r := 0; r < 2; r++ {
		p := must(x.Piece(r))
		got := must(p.Float32s())
		if got[0] != 3 || got[1] != 20 || got[2] != 200 {
			t.Fatalf("rank %d after all-reduce: %v", r, got)
		}
		p.Close()
	}
	if n := mesh.WorldSize(); n != 0 {
		t.Fatalf("a closed mesh's WorldSize is %d", n)
	}
	wantErr(t, mesh.Barrier("world"), dtrain.ErrInvalidArgument, "closed")
}

// A GPT's size from its config alone, and a mesh's collective history.
func TestParamCountAndCommHistory(t *testing.T) {
	defer guard(t)
	config := dtrain.Options{"preset": "llama-tiny", "n_layer": 3}
	model := must(dtrain.NewGPT(config))
	defer model.Close()
	if n, held := must(dtrain.GPTParamCount(config)), model.ParamCount(); int(n) != held {
		t.Fatalf("GPTParamCount %d, the model holds %d", n, held)
	}
	_, err := dtrain.GPTParamCount(dtrain.Options{"n_layer": -1})
	wantErr(t, err, dtrain.ErrInvalidArgument, "n_layer")

	mesh := must(dtrain.NewMesh("local", 2, nil))
	defer mesh.Close()
	ok(t, mesh.Barrier("dp"))
	var history struct {
		Failure any `json:"failure"`
		Ranks   []struct {
			Calls []struct {
				Kind   string `json:"kind"`
				Seq    int    `json:"seq"`
				Status string `json:"status"`
			} `json:"calls"`
		} `json:"ranks"`
	}
	ok(t, json.Unmarshal([]byte(must(mesh.CommHistoryJSON())), &history))
	if history.Failure != nil || len(history.Ranks) != 2 || len(history.Ranks[0].Calls) != 1 {
		t.Fatalf("history %+v", history)
	}
	if c := history.Ranks[0].Calls[0]; c.Kind != "barrier" || c.Seq != 1 || c.Status != "ok" {
		t.Fatalf("the barrier's entry %+v", c)
	}
}

func TestModel(t *testing.T) {
	defer guard(t)
	model := must(dtrain.NewGPT(dtrain.Options{"preset": "gpt-tiny", "seed": 1}))
	defer model.Close()
	names := model.ParamNames()
	if len(names) == 0 {
		t.Fatal("no parameters")
	}
	total := 0
	for _, name := range names {
		p := must(model.Param(name))
		total += p.Numel()
		p.Close()
	}
	if n := model.ParamCount(); n != total || n == 0 {
		t.Fatalf("ParamCount %d, the tensors hold %d", n, total)
	}

	// A host-driven loop over a sequential model.
	seq := must(dtrain.NewSequential(dtrain.Options{"layers": "linear:2:8,gelu,linear:8:1", "seed": 3}))
	defer seq.Close()
	sgd := must(dtrain.NewOptimizer(seq, "sgd", dtrain.Options{"lr": 0.1}))
	defer sgd.Close()
	x := must(dtrain.NewTensor(dtrain.F32, 4, 2))
	defer x.Close()
	ok(t, x.CopyFromFloat32([]float32{0, 0, 0, 1, 1, 0, 1, 1}))
	y := must(dtrain.NewTensor(dtrain.F32, 4, 1))
	defer y.Close()
	ok(t, y.CopyFromFloat32([]float32{0, 1, 1, 2}))
	var first, last float64
	for i := 0; i < 20; i++ {
		ok(t, seq.ZeroGrad())
		pred := must(seq.Forward(x))
		loss, grad, err := dtrain.Loss("mse", pred, y)
		ok(t, err)
		dx := must(seq.Backward(grad))
		ok(t, sgd.Step())
		pred.Close()
		grad.Close()
		dx.Close()
		if i == 0 {
			first = loss
		}
		last = loss
	}
	if !(last < first) {
		t.Fatalf("mse went from %g to %g", first, last)
	}
}

// Handles close in any order: the library reference-counts, so the engine outlives the
// mesh, model and optimizer closed before it, and the tensors outlive everything.
func TestLifetimesAnyOrder(t *testing.T) {
	defer guard(t)
	mesh := must(dtrain.NewMesh("local", 2, nil))
	model := must(dtrain.NewGPT(dtrain.Options{"preset": "gpt-tiny", "seed": 1}))
	opt := must(dtrain.NewOptimizer(model, "adamw", dtrain.Options{"lr": 0.003}))
	engine := must(dtrain.NewEngine(mesh, model, opt, nil))
	ds := must(dtrain.NewDataset("addition", dtrain.Options{"digits": 3, "seed": 7}))
	loader := must(dtrain.NewLoader(ds, dtrain.Options{"batch": 4}))
	ctx := ds.Context()
	in := must(dtrain.NewTensor(dtrain.I32, 4, ctx))
	tg := must(dtrain.NewTensor(dtrain.I32, 4, ctx))

	ok(t, mesh.Close())
	ok(t, model.Close())
	ok(t, opt.Close())
	ok(t, ds.Close())
	ok(t, loader.Next(in, tg))
	loss := must(engine.TrainStep(in, tg))
	if math.IsNaN(loss) || loss <= 0 {
		t.Fatalf("loss %g", loss)
	}
	ok(t, engine.Close())
	ok(t, loader.Next(in, tg)) // the loader keeps the dataset alive
	ok(t, loader.Close())
	for _, h := range []interface{ Close() error }{in, tg, mesh, model, opt, engine, ds, loader} {
		ok(t, h.Close()) // every Close again: no-ops
	}
	_, err := engine.TrainStep(in, tg)
	wantErr(t, err, dtrain.ErrInvalidArgument, "closed")
}

// Explicit Close then collection, and many handles left to the finalizers, never free a
// handle twice (a double free would crash the test binary).
func TestGCNoDoubleFree(t *testing.T) {
	defer guard(t)
	settle := func() int64 { // collect, let the finalizers run, read the ledger
		for i := 0; i < 3; i++ {
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
		}
		current, _, err := dtrain.MemoryStats("cpu", dtrain.MemAll)
		ok(t, err)
		return current
	}
	baseline := settle()

	// A collector running all the time must not release a handle in the middle of a call
	// that was its last use (the binding keeps it alive through each native call).
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	buf := make([]float32, 1<<16)
	for i := 0; i < 100; i++ {
		x := must(dtrain.NewTensor(dtrain.F32, len(buf)))
		ok(t, x.CopyFromFloat32(buf))
	}
	close(stop)
	<-done

	for i := 0; i < 300; i++ {
		x, err := dtrain.NewTensor(dtrain.F32, 16, 16)
		ok(t, err)
		if i%2 == 0 {
			x.Close()
		}
	}
	for i := 0; i < 10; i++ {
		model := must(dtrain.NewGPT(dtrain.Options{"preset": "gpt-tiny", "seed": i}))
		opt := must(dtrain.NewOptimizer(model, "sgd", nil))
		engine := must(dtrain.NewEngine(nil, model, opt, nil))
		mesh := must(dtrain.NewMesh("local", 2, nil))
		ds := must(dtrain.NewDataset("addition", dtrain.Options{"size": 32}))
		loader := must(dtrain.NewLoader(ds, dtrain.Options{"batch": 8}))
		if i%2 == 0 { // close half of them in a scrambled order, leave the rest to the GC
			model.Close()
			loader.Close()
			engine.Close()
			ds.Close()
			opt.Close()
			mesh.Close()
		}
	}
	// What was left to the finalizers has been released: the ledger is back where it was.
	deadline := time.Now().Add(5 * time.Second)
	current := settle()
	for current > baseline && time.Now().Before(deadline) {
		current = settle()
	}
	if current > baseline {
		t.Fatalf("the finalizers left %d bytes held (%d before)", current, baseline)
	}
	report := must(dtrain.MemoryReportJSON("cpu"))
	if !strings.Contains(report, "\"device\"") {
		t.Fatalf("memory report %q", report)
	}
}

type run struct {
	mesh    *dtrain.Mesh
	model   *dtrain.Model
	opt     *dtrain.Optimizer
	engine  *dtrain.Engine
	ds      *dtrain.Dataset
	loader  *dtrain.Loader
	in, tgt *dtrain.Tensor
}

// newRun builds the sample's configuration; model may be nil for a fresh GPT.
func newRun(t *testing.T, model *dtrain.Model) *run {
	t.Helper()
	r := &run{}
	r.mesh = must(dtrain.NewMesh("local", 2, nil))
	if model == nil {
		model = must(dtrain.NewGPT(dtrain.Options{"preset": "gpt-tiny", "seed": 1}))
	}
	r.model = model
	r.opt = must(dtrain.NewOptimizer(r.model, "adamw", dtrain.Options{"lr": 0.003}))
	r.engine = must(dtrain.NewEngine(r.mesh, r.model, r.opt, nil))
	r.ds = must(dtrain.NewDataset("addition", dtrain.Options{"digits": 3, "seed": 7, "split": "train"}))
	r.loader = must(dtrain.NewLoader(r.ds, dtrain.Options{"batch": 16, "seed": 0}))
	ctx := r.ds.Context()
	r.in = must(dtrain.NewTensor(dtrain.I32, 16, ctx))
	r.tgt = must(dtrain.NewTensor(dtrain.I32, 16, ctx))
	t.Cleanup(func() {
		for _, h := range []interface{ Close() error }{r.engine, r.opt, r.model, r.mesh, r.loader, r.ds, r.in, r.tgt} {
			h.Close()
		}
	})
	return r
}

func (r *run) step(t *testing.T) float64 {
	t.Helper()
	ok(t, r.loader.Next(r.in, r.tgt))
	loss := must(r.engine.TrainStep(r.in, r.tgt))
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		t.Fatalf("loss %g", loss)
	}
	return loss
}

func TestTrainSaveLoadResume(t *testing.T) {
	defer guard(t)
	stem := filepath.Join(t.TempDir(), "ckpt", "gpt")
	a := newRun(t, nil)
	var losses []float64
	for i := 0; i < 6; i++ {
		losses = append(losses, a.step(t))
	}
	if !(losses[5] < losses[0]) {
		t.Fatalf("losses did not go down: %v", losses)
	}
	stats := must(a.engine.LastStatsJSON())
	if !strings.Contains(stats, "\"loss\"") {
		t.Fatalf("stats %q", stats)
	}
	ok(t, a.engine.Save(stem))
	epoch, batch := a.loader.Position()
	next := a.step(t) // the loss of the run that never stopped

	info := must(dtrain.CheckpointInfoJSON(stem))
	if !strings.Contains(info, "\"step\"") {
		t.Fatalf("checkpoint info %q", info)
	}
	b := newRun(t, must(dtrain.NewModelFromCheckpoint(stem)))
	ok(t, b.engine.Load(stem))
	if n := b.engine.Step(); n != 6 {
		t.Fatalf("step after load = %d, want 6", n)
	}
	ok(t, b.loader.Seek(epoch, batch))
	if resumed := b.step(t); resumed != next {
		t.Fatalf("resumed loss %.10f, uninterrupted %.10f", resumed, next)
	}
	if n := b.engine.Step(); n != 7 {
		t.Fatalf("step = %d, want 7", n)
	}
	eval := must(b.engine.Eval(b.in, b.tgt))
	if math.IsNaN(eval) || eval <= 0 {
		t.Fatalf("eval loss %g", eval)
	}
}

func TestGenerate(t *testing.T) {
	defer guard(t)
	r := newRun(t, nil)
	r.step(t)
	prompt := []int32{'1', '2', '+', '3', '='}
	out := must(r.engine.Generate([][]int32{prompt, {'7'}}, dtrain.Options{"max_new_tokens": 5}))
	if len(out) != 2 || len(out[0]) != 5 || len(out[1]) != 5 {
		t.Fatalf("generated %v", out)
	}
	for _, tok := range append(out[0], out[1]...) {
		if tok < 0 || tok > 255 {
			t.Fatalf("token %d outside the byte vocabulary", tok)
		}
	}
	again := must(r.engine.Generate([][]int32{prompt}, dtrain.Options{"max_new_tokens": 5}))
	if fmt.Sprint(again[0]) != fmt.Sprint(out[0]) {
		t.Fatalf("greedy decoding differs: %v vs %v", again[0], out[0])
	}
	dflt := must(r.engine.Generate([][]int32{prompt}, nil))
	if len(dflt[0]) != 16 {
		t.Fatalf("default max_new_tokens gave %d tokens", len(dflt[0]))
	}
	if s := must(r.engine.LastGenerateStatsJSON()); !strings.Contains(s, "new_tokens") {
		t.Fatalf("generate stats %q", s)
	}
	_, err := r.engine.Generate(nil, nil)
	wantErr(t, err, dtrain.ErrInvalidArgument)
	_, err = r.engine.Generate([][]int32{prompt, {}}, nil)
	wantErr(t, err, dtrain.ErrInvalidArgument, "prompt 1 is empty")
	_, err = r.engine.Generate([][]int32{prompt}, dtrain.Options{"max_new_tokens": 100000})
	wantErr(t, err, dtrain.ErrInvalidArgument)
}

// Expert parallelism (mixtral-tiny's experts over ep 2, each rank routing its 8 rows) and
// context parallelism (gpt-tiny's 12-token examples in 4 chunks over cp 2, ring attention)
// give dp 2's losses on the same batches.
func TestExpertAndContextParallelMatchDataParallel(t *testing.T) {
	defer guard(t)
	losses := func(preset string, axes dtrain.Options) []float64 {
		mesh := must(dtrain.NewMesh("local", 2, axes))
		defer mesh.Close()
		model := must(dtrain.NewGPT(dtrain.Options{"preset": preset, "seed": 1}))
		defer model.Close()
		opt := must(dtrain.NewOptimizer(model, "adamw", dtrain.Options{"lr": 0.003}))
		defer opt.Close()
		engine := must(dtrain.NewEngine(mesh, model, opt, nil))
		defer engine.Close()
		ds := must(dtrain.NewDataset("addition", dtrain.Options{"digits": 3, "seed": 7}))
		defer ds.Close()
		loader := must(dtrain.NewLoader(ds, dtrain.Options{"batch": 16, "seed": 0}))
		defer loader.Close()
		in := must(dtrain.NewTensor(dtrain.I32, 16, ds.Context()))
		defer in.Close()
		tgt := must(dtrain.NewTensor(dtrain.I32, 16, ds.Context()))
		defer tgt.Close()
		var out []float64
		for i := 0; i < 3; i++ {
			ok(t, loader.Next(in, tgt))
			out = append(out, must(engine.TrainStep(in, tgt)))
		}
		return out
	}
	for _, c := range []struct{ preset, axis string }{{"mixtral-tiny", "ep"}, {"gpt-tiny", "cp"}} {
		dp, other := losses(c.preset, dtrain.Options{"dp": 2}), losses(c.preset, dtrain.Options{c.axis: 2})
		for i := range dp {
			if math.Abs(dp[i]-other[i]) > 1e-5*math.Abs(dp[i]) {
				t.Fatalf("%s 2: losses %v, dp 2: %v", c.axis, other, dp)
			}
		}
	}
}
