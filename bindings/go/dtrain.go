// Package dtrain is the Go binding of libdtrain, a library that trains and serves neural
// networks on one CPU, one GPU, many GPUs and many machines.
//
// Every handle (Tensor, Mesh, Model, Optimizer, Engine, Dataset, Loader, Tokenizer, ...)
// is made by a constructor and released by Close, which is idempotent; a finalizer
// releases a handle that was never closed. A handle made from another keeps it alive inside
// the library, so handles may be closed in any order. A handle is used by one goroutine at
// a time, except a Server (serving with continuous batching), whose methods any goroutine
// may call, and a Tokenizer, which is immutable.
//
// Hugging Face model directories load with NewModelFromHF and save with Model.SaveHF and
// Engine.SaveHF; a Tokenizer encodes, decodes and applies chat templates, and a
// Detokenizer turns generated ids into text as it becomes final.
//
// Every call that can fail returns an error, a *Error carrying the library's status and
// message; test its kind with errors.Is(err, dtrain.ErrNotFound) and the like. Getters that
// cannot fail on a live handle (Tensor.Shape, Tensor.DType, Engine.Step, ...) return their
// value alone, the zero value for a closed handle. The binding never panics on bad input: a
// closed or nil handle, or a slice of the wrong length or element type, is an
// ErrInvalidArgument.
//
// Long calls take a context: Engine.TrainStepContext, EvalContext, GenerateContext and
// GenerateStreamContext stop soon after ctx is done (the library checks between layers and
// decode steps), change nothing, and return an error that is both ErrCancelled and
// ctx.Err(). Engine.Stream delivers generated tokens on a channel; Close (or the context)
// stops the generation. Tensor.Float32View and its kin share a tensor's memory as a Go
// slice, without a copy.
//
// The library is found with pkg-config (package dtrain) at build time; its Libs carry an
// rpath to the installed library, so programs run without LD_LIBRARY_PATH.
package dtrain

import (
	"dtrain.dev/dtrain/internal/cdt"
)

// Version returns the version of the loaded library, "MAJOR.MINOR.PATCH".
func Version() string { return cdt.Dt_version() }

// VersionNumber returns the loaded library's major*10000 + minor*100 + patch.
func VersionNumber() int { return int(cdt.Dt_version_number()) }

// DType is the element type of a tensor.
type DType int32

// The tensor element types.
const (
	F32  DType = 1 // IEEE binary32
	BF16 DType = 2 // bfloat16
	F16  DType = 3 // IEEE binary16
	I32  DType = 4
	I64  DType = 5
)

// String returns the dtype's name ("f32", "bf16", "f16", "i32", "i64"; "unknown").
func (d DType) String() string { return cdt.Dt_dtype_name(int32(d)) }

// Size returns the size in bytes of one element, or 0 for an unknown dtype.
func (d DType) Size() int { return int(cdt.Dt_dtype_size(int32(d))) }

// MemTag says what a block of memory holds, for the memory ledger.
type MemTag int32

// The memory tags. MemAll, in queries only, is the sum over every tag.
const (
	MemAll        MemTag = 0
	MemParam      MemTag = 1
	MemGrad       MemTag = 2
	MemOptimizer  MemTag = 3
	MemActivation MemTag = 4
	MemKVCache    MemTag = 5
	MemCommBuffer MemTag = 6
	MemWorkspace  MemTag = 7
	MemCheckpoint MemTag = 8
)

// String returns the tag's name ("all", "param", "grad", ...; "unknown").
func (t MemTag) String() string { return cdt.Dt_mem_tag_name(int32(t)) }

// Configure applies process-wide settings: "threads", "memory_limit_bytes",
// "pool_cache_bytes" (see dt_configure). Either every key is applied or none is.
func Configure(opts Options) error {
	o, free, err := newOptions(opts)
	if err != nil {
		return err
	}
	defer free()
	return check(cdt.Dt_configure(o))
}

// Shutdown ends what libdtrain started in this process: it finalizes MPI if libdtrain
// initialized it. A Go program exits without running C's atexit handlers, where libdtrain
// would otherwise do this, so a program that made an "mpi" mesh calls it last (defer it
// first in main) or mpirun reports the process as failed. Idempotent.
func Shutdown() error { return check(cdt.Dt_shutdown()) }

// MemoryStats returns the bytes tensors hold on device ("cpu", "cuda:N") under tag
// (MemAll for the sum): now, and the peak since start or the last MemoryResetPeak.
func MemoryStats(device string, tag MemTag) (current, peak int64, err error) {
	err = check(cdt.Dt_memory_stats(device, int32(tag), &current, &peak))
	return current, peak, err
}

// MemoryRankStats is MemoryStats for the memory of one rank (0 to 1023).
func MemoryRankStats(device string, rank int, tag MemTag) (current, peak int64, err error) {
	r, err := int32Arg("rank", rank)
	if err != nil {
		return 0, 0, err
	}
	err = check(cdt.Dt_memory_rank_stats(device, r, int32(tag), &current, &peak))
	return current, peak, err
}

// MemoryResetPeak sets every tag's peak on device to its current value.
func MemoryResetPeak(device string) error { return check(cdt.Dt_memory_reset_peak(device)) }

// MemoryReportJSON returns the memory ledger of device as JSON.
func MemoryReportJSON(device string) (string, error) {
	return readJSON(func(buf []byte, needed *int64) cdt.Status {
		return cdt.Dt_memory_report_json(device, buf, needed)
	})
}

// DeviceCount returns the number of devices of kind ("cpu" is 1; "cuda" is 0 without a GPU).
func DeviceCount(kind string) (int, error) {
	var n int32
	err := check(cdt.Dt_device_count(kind, &n))
	return int(n), err
}

// TraceEnable starts (clearing what was recorded) or stops recording the timeline.
func TraceEnable(on bool) error {
	v := int32(0)
	if on {
		v = 1
	}
	return check(cdt.Dt_trace_enable(v))
}

// TraceWrite writes the recorded timeline as Chrome trace-event JSON to path.
func TraceWrite(path string) error { return check(cdt.Dt_trace_write(path)) }

// CheckpointInfoJSON returns the metadata of the checkpoint at pathStem as JSON.
func CheckpointInfoJSON(pathStem string) (string, error) {
	return readJSON(func(buf []byte, needed *int64) cdt.Status {
		return cdt.Dt_checkpoint_info_json(pathStem, buf, needed)
	})
}

// readJSON runs a (buf, capacity, needed) report function until the whole text fits.
func readJSON(call func(buf []byte, needed *int64) cdt.Status) (string, error) {
	return readJSONFrom(0, call)
}

// readJSONFrom is readJSON starting from a buffer of capacity bytes (0: ask for the size
// first), so that a report costly to make (a calibration) is made once where it fits.
func readJSONFrom(capacity int64, call func(buf []byte, needed *int64) cdt.Status) (string, error) {
	needed := capacity
	if needed <= 0 {
		if err := check(call(nil, &needed)); err != nil {
			return "", err
		}
	}
	for {
		if needed <= 1 {
			return "", nil
		}
		buf := make([]byte, needed)
		if err := check(call(buf, &needed)); err != nil {
			return "", err
		}
		if needed <= int64(len(buf)) {
			return string(buf[:needed-1]), nil
		}
		// The report grew between the two calls: ask again with the new size.
	}
}
