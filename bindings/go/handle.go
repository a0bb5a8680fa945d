package dtrain

import (
	"math"
	"reflect"
	"runtime"
	"sync/atomic"

	"dtrain.dev/dtrain/internal/cdt"
)

// Every handle type of the package (Tensor, Mesh, Model, Optimizer, Engine, Dataset,
// Loader) is a struct whose only field, obj, points to an owned: the one library handle it
// wraps. This file is the code they all share, in the order a handle lives: made and
// wrapped, checked before each native call, kept alive through it, closed or collected.

// owned holds one library handle of kind H (a cdt handle type) and releases it once.
// Close releases it at once; later uses see 0 and fail with a "closed" error instead of
// touching freed memory. A handle the program forgot to close is released by the
// finalizer set on the owned itself (as os.File sets it on its inner *file), so the
// wrapper types carry no finalizer code; Close clears it, and the atomic swap in release
// lets only the first of Close and the finalizer destroy the handle. The library
// reference-counts its handles (an engine keeps its mesh, model and optimizer alive), so
// handles may be closed, or collected, in any order.
type owned[H ~uintptr] struct {
	p       atomic.Uintptr
	destroy func(H)
}

// newOwned takes over p, a handle a native call has just made, and sets the finalizer.
func newOwned[H ~uintptr](p H, destroy func(H)) *owned[H] {
	o := &owned[H]{destroy: destroy}
	o.p.Store(uintptr(p))
	runtime.SetFinalizer(o, (*owned[H]).release)
	return o
}

// release destroys the handle if it is still held; safe to call any number of times.
func (o *owned[H]) release() {
	if p := o.p.Swap(0); p != 0 && o.destroy != nil {
		o.destroy(H(p))
	}
}

// wrapper is the shape every handle type has: struct{ obj *owned[H] }. Go cannot read a
// field of a type parameter, but it converts between a type parameter and the struct type
// underlying every type in its set; wrap and ownedOf go through that struct.
type wrapper[H ~uintptr] interface {
	~struct{ obj *owned[H] }
}

// wrap makes the W (a *Tensor, a *Mesh, ...) that owns p: wrap[Tensor](p, destroy).
func wrap[W wrapper[H], H ~uintptr](p H, destroy func(H)) *W {
	w := W(struct{ obj *owned[H] }{obj: newOwned(p, destroy)})
	return &w
}

// create is the body shared by the constructors: it builds opts, runs the native create
// call with them and wraps the handle the call made. A create call that also takes other
// handles is a closure over them; its caller keeps their wrappers alive through create.
func create[W wrapper[H], H ~uintptr](opts Options, call func(cdt.Options, *H) cdt.Status,
	destroy func(H)) (*W, error) {
	o, free, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	defer free()
	var p H
	if err := check(call(o, &p)); err != nil {
		return nil, err
	}
	return wrap[W](p, destroy), nil
}

// ownedOf returns what w holds: nil for a nil w, or for a zero W no constructor made.
func ownedOf[W wrapper[H], H ~uintptr](w *W) *owned[H] {
	if w == nil {
		return nil
	}
	return struct{ obj *owned[H] }(*w).obj
}

// kindOf names a handle type ("Tensor", "Model") for the binding's error messages.
func kindOf[W any]() string { return reflect.TypeOf((*W)(nil)).Elem().Name() }

// handleOf returns w's live handle, or an ErrInvalidArgument naming w's type when w is
// nil, closed or was never made by a constructor of this package. The handle alone keeps
// nothing alive: the caller keeps w reachable (runtime.KeepAlive(w), which reaches the
// owned through obj) until the native call that uses the handle has returned, or the
// finalizer could destroy the handle in the middle of that call.
func handleOf[W wrapper[H], H ~uintptr](w *W) (H, error) {
	if w == nil {
		kind := kindOf[W]()
		return 0, invalid("a nil *%s was passed where a %s is required", kind, kind)
	}
	if o := ownedOf(w); o != nil {
		if p := o.p.Load(); p != 0 {
			return H(p), nil
		}
	}
	return 0, invalid("the %s is closed", kindOf[W]())
}

// closeHandle is the Close of every handle type: it clears the finalizer and releases the
// handle. Closing a nil, zero or closed wrapper does nothing; it always returns nil.
func closeHandle[W wrapper[H], H ~uintptr](w *W) error {
	if o := ownedOf(w); o != nil {
		runtime.SetFinalizer(o, nil)
		o.release()
	}
	return nil
}

// The helpers below run one native call on w's handle and keep w alive until it returns.

// invoke runs a call that returns nothing but its status.
func invoke[W wrapper[H], H ~uintptr](w *W, call func(H) cdt.Status) error {
	h, err := handleOf(w)
	if err != nil {
		return err
	}
	err = check(call(h))
	runtime.KeepAlive(w)
	return err
}

// query runs a call that fills one out-value (a count, a size, a name) and returns it.
func query[W wrapper[H], H ~uintptr, T any](w *W, call func(H, *T) cdt.Status) (T, error) {
	var out T
	h, err := handleOf(w)
	if err != nil {
		return out, err
	}
	err = check(call(h, &out))
	runtime.KeepAlive(w)
	return out, err
}

// peek runs a query that cannot fail on a live handle (a dtype, a count, a name) and
// returns its value, or T's zero value when w is nil or closed: the getters built on it
// return no error, and their zero value is documented as what a closed handle reads as.
func peek[W wrapper[H], H ~uintptr, T any](w *W, call func(H, *T) cdt.Status) T {
	v, err := query(w, call)
	if err != nil {
		var zero T
		return zero
	}
	return v
}

// asInt converts what a query of a C count returns to the int the API returns:
// asInt(query(t, cdt.Dt_tensor_numel)).
func asInt[N int32 | int64](n N, err error) (int, error) { return int(n), err }

// withTensors runs a call that also takes tensors (a collective, Loader.Next, a train
// step, a tensor operation), checking w, then each tensor in order, before it, and keeping
// all of them alive through it.
func withTensors[W wrapper[H], H ~uintptr](w *W, tensors []*Tensor,
	call func(H, []cdt.Tensor) cdt.Status) error {
	h, err := handleOf(w)
	if err != nil {
		return err
	}
	hs := make([]cdt.Tensor, len(tensors))
	for i, t := range tensors {
		if hs[i], err = t.handle(); err != nil {
			return err
		}
	}
	err = check(call(h, hs))
	runtime.KeepAlive(w)
	runtime.KeepAlive(tensors)
	return err
}

// reportJSON reads one of w's JSON reports (a (buf, capacity, needed) call) with readJSON,
// keeping w alive through every call readJSON makes.
func reportJSON[W wrapper[H], H ~uintptr](w *W,
	report func(H, []byte, *int64) cdt.Status) (string, error) {
	h, err := handleOf(w)
	if err != nil {
		return "", err
	}
	defer runtime.KeepAlive(w)
	return readJSON(func(buf []byte, needed *int64) cdt.Status { return report(h, buf, needed) })
}

// int32Arg converts a Go int argument to the C int32 it becomes, or fails naming it.
func int32Arg(name string, v int) (int32, error) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, invalid("%s = %d does not fit in int32", name, v)
	}
	return int32(v), nil
}
