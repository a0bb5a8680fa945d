package dtrain

import (
	"runtime"
	"unsafe"

	"dtrain.dev/dtrain/internal/cdt"
)

// Zero-copy views. Data leaves a tensor without a copy: the views below are Go slices over
// the tensor's own memory (dt_tensor_data), so reads see the tensor and writes change it.
//
// The slice does not keep the tensor alive: it is valid only while the tensor lives, that
// is until Close, or until the garbage collector finalizes a *Tensor that is no longer
// reachable. Keep the *Tensor reachable for as long as the view is used: call Close (or
// defer it) after the last use, or runtime.KeepAlive(t) there. Using a view afterwards
// reads or writes freed memory. A view of a model's parameter (Model.Param) sees the
// weights change with every step; write through it only between steps.
//
// Data enters by copy (CopyFromFloat32 and the like, one memcpy with no intermediate
// buffer). The library can also build a tensor over memory it is lent
// (dt_tensor_create_from_memory), but it keeps that address after the call returns, and
// cgo forbids C to keep a pointer to Go memory after a call (Go 1.19 has no
// runtime.Pinner), so the Go binding does not lend it Go slices.

// Float32View returns the elements of an f32 CPU tensor as a slice over its memory.
func (t *Tensor) Float32View() ([]float32, error) { return view[float32](t, F32, "Float32View") }

// Int32View returns the elements of an i32 CPU tensor as a slice over its memory.
func (t *Tensor) Int32View() ([]int32, error) { return view[int32](t, I32, "Int32View") }

// Int64View returns the elements of an i64 CPU tensor as a slice over its memory.
func (t *Tensor) Int64View() ([]int64, error) { return view[int64](t, I64, "Int64View") }

// BytesView returns the raw bytes of a CPU tensor of any dtype (bf16 and f16 as their
// 16-bit patterns, in native byte order) as a slice over its memory.
func (t *Tensor) BytesView() ([]byte, error) { return view[byte](t, 0, "BytesView") }

// view checks t (live, of dtype unless dtype is 0, on the CPU, one piece) and returns its
// memory as a []E of its element count (its byte count for bytes).
func view[E float32 | int32 | int64 | byte](t *Tensor, dtype DType, what string) ([]E, error) {
	h, err := t.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(t)
	n := t.Numel()
	if dtype == 0 {
		n = t.NBytes()
	} else if d := t.DType(); d != dtype {
		return nil, invalid("%s needs a %s tensor; this one's dtype is %s", what, dtype, d)
	}
	if dev := t.Device(); dev != "cpu" {
		return nil, &Error{Status: StatusUnsupported,
			Message: "dtrain: " + what + " needs a CPU tensor; this one is on " + dev + " (copy it to one with CopyTo)"}
	}
	var p unsafe.Pointer
	if err := check(cdt.Dt_tensor_data(h, &p)); err != nil {
		return nil, err // a mesh tensor of several pieces: view one Piece
	}
	if n == 0 || p == nil {
		return []E{}, nil
	}
	return unsafe.Slice((*E)(p), n), nil
}
