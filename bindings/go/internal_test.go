package dtrain

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"dtrain.dev/dtrain/internal/cdt"
)

// The Go constants must keep the header's values (the codes are only ever appended).
func TestConstantsMatchHeader(t *testing.T) {
	pairs := []struct {
		name      string
		got, want int
	}{
		{"StatusOK", int(StatusOK), cdt.DT_OK},
		{"StatusInvalidArgument", int(StatusInvalidArgument), cdt.DT_ERR_INVALID_ARGUMENT},
		{"StatusOutOfMemory", int(StatusOutOfMemory), cdt.DT_ERR_OUT_OF_MEMORY},
		{"StatusUnsupported", int(StatusUnsupported), cdt.DT_ERR_UNSUPPORTED},
		{"StatusNotFound", int(StatusNotFound), cdt.DT_ERR_NOT_FOUND},
		{"StatusIO", int(StatusIO), cdt.DT_ERR_IO},
		{"StatusComm", int(StatusComm), cdt.DT_ERR_COMM},
		{"StatusTimeout", int(StatusTimeout), cdt.DT_ERR_TIMEOUT},
		{"StatusAborted", int(StatusAborted), cdt.DT_ERR_ABORTED},
		{"StatusInternal", int(StatusInternal), cdt.DT_ERR_INTERNAL},
		{"StatusUnavailable", int(StatusUnavailable), cdt.DT_ERR_UNAVAILABLE},
		{"StatusCancelled", int(StatusCancelled), cdt.DT_ERR_CANCELLED},
		{"RequestWaiting", int(RequestWaiting), cdt.DT_REQUEST_WAITING},
		{"RequestRunning", int(RequestRunning), cdt.DT_REQUEST_RUNNING},
		{"RequestPreempted", int(RequestPreempted), cdt.DT_REQUEST_PREEMPTED},
		{"RequestFinished", int(RequestFinished), cdt.DT_REQUEST_FINISHED},
		{"RequestAborted", int(RequestAborted), cdt.DT_REQUEST_ABORTED},
		{"RequestRejected", int(RequestRejected), cdt.DT_REQUEST_REJECTED},
		{"F32", int(F32), cdt.DT_F32},
		{"BF16", int(BF16), cdt.DT_BF16},
		{"F16", int(F16), cdt.DT_F16},
		{"I32", int(I32), cdt.DT_I32},
		{"I64", int(I64), cdt.DT_I64},
		{"MemAll", int(MemAll), cdt.DT_MEM_ALL},
		{"MemParam", int(MemParam), cdt.DT_MEM_PARAM},
		{"MemGrad", int(MemGrad), cdt.DT_MEM_GRAD},
		{"MemOptimizer", int(MemOptimizer), cdt.DT_MEM_OPTIMIZER},
		{"MemActivation", int(MemActivation), cdt.DT_MEM_ACTIVATION},
		{"MemKVCache", int(MemKVCache), cdt.DT_MEM_KV_CACHE},
		{"MemCommBuffer", int(MemCommBuffer), cdt.DT_MEM_COMM_BUFFER},
		{"MemWorkspace", int(MemWorkspace), cdt.DT_MEM_WORKSPACE},
		{"MemCheckpoint", int(MemCheckpoint), cdt.DT_MEM_CHECKPOINT},
		{"ReduceSum", int(ReduceSum), cdt.DT_REDUCE_SUM},
		{"ReduceAvg", int(ReduceAvg), cdt.DT_REDUCE_AVG},
		{"ReduceMax", int(ReduceMax), cdt.DT_REDUCE_MAX},
		{"ReduceMin", int(ReduceMin), cdt.DT_REDUCE_MIN},
		{"ReduceProd", int(ReduceProd), cdt.DT_REDUCE_PROD},
		{"MaxDims", MaxDims, cdt.DT_MAX_DIMS},
		{"VersionNumber", VersionNumber(), cdt.DT_VERSION_NUMBER},
	}
	for _, p := range pairs {
		if p.got != p.want {
			t.Errorf("%s = %d, the header says %d", p.name, p.got, p.want)
		}
	}
}

// A closed wrapper holds 0, so a finalizer that runs later destroys nothing.
func TestCloseClearsHandle(t *testing.T) {
	x, err := NewTensor(F32, 2)
	if err != nil {
		t.Fatal(err)
	}
	x.Close()
	if x.obj.p.Load() != 0 {
		t.Fatal("Close left the handle set")
	}
	x.obj.release() // what a stray finalizer would do: nothing
}

// Close and the finalizer on the inner owned release a handle once between them: a closed
// handle is not released again when it is collected, and one never closed is released by
// the finalizer. The handles are fake ones, counted by their destroy function.
func TestReleasedExactlyOnce(t *testing.T) {
	var released [3]atomic.Int32
	destroy := func(p cdt.Tensor) { released[p].Add(1) }
	closed := &Tensor{obj: newOwned(cdt.Tensor(1), destroy)}
	closed.Close()
	closed.Close()
	_ = &Tensor{obj: newOwned(cdt.Tensor(2), destroy)} // never closed
	closed = nil
	deadline := time.Now().Add(5 * time.Second)
	for released[2].Load() == 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	runtime.GC() // one more round, for a second release that should not come
	time.Sleep(10 * time.Millisecond)
	if a, b := released[1].Load(), released[2].Load(); a != 1 || b != 1 {
		t.Fatalf("the closed handle was released %d times, the dropped one %d; want 1 and 1", a, b)
	}
}

// The binding's own errors name the handle type: for a nil pointer, and for a zero value
// that no constructor made (which reads as closed, and closes as a no-op).
func TestHandleErrorsNameTheType(t *testing.T) {
	var zero Optimizer
	_, err := zero.handle()
	if err == nil || err.Error() != "DT_ERR_INVALID_ARGUMENT: dtrain: the Optimizer is closed" {
		t.Fatalf("zero Optimizer: %v", err)
	}
	if err := zero.Close(); err != nil {
		t.Fatal(err)
	}
	var nilLoader *Loader
	_, err = nilLoader.handle()
	want := "DT_ERR_INVALID_ARGUMENT: dtrain: a nil *Loader was passed where a Loader is required"
	if err == nil || err.Error() != want {
		t.Fatalf("nil Loader: %v", err)
	}
	names := []string{kindOf[Tensor](), kindOf[Mesh](), kindOf[Model](), kindOf[Optimizer](),
		kindOf[Engine](), kindOf[Dataset](), kindOf[Loader]()}
	if got := strings.Join(names, " "); got != "Tensor Mesh Model Optimizer Engine Dataset Loader" {
		t.Fatalf("kindOf: %s", got)
	}
}
