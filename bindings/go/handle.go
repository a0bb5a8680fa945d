package dtrain

import (
	"math"
	"sync/atomic"
)

// object holds one library handle of kind T (a cdt handle type). Close releases it once;
// later uses see 0 and fail with a "closed" error instead of touching freed memory.
// Every wrapper type also sets a finalizer that releases a handle the program forgot to
// close; Close clears it, so the handle is released exactly once either way. The library
// reference-counts its handles (an engine keeps its mesh, model and optimizer alive), so
// handles may be closed, or collected, in any order.
type object[T ~uintptr] struct {
	p       atomic.Uintptr
	destroy func(T)
}

func (o *object[T]) set(p T, destroy func(T)) {
	o.destroy = destroy
	o.p.Store(uintptr(p))
}

// get returns the live handle, or an error naming the kind if it was closed (or the
// wrapper was never made by a constructor of this package).
func (o *object[T]) get(kind string) (T, error) {
	p := o.p.Load()
	if p == 0 {
		return 0, invalid("the %s is closed", kind)
	}
	return T(p), nil
}

// release destroys the handle if it is still held; safe to call any number of times.
func (o *object[T]) release() {
	if p := o.p.Swap(0); p != 0 && o.destroy != nil {
		o.destroy(T(p))
	}
}

func nilHandle(kind string) error {
	return invalid("a nil *%s was passed where a %s is required", kind, kind)
}

// int32Arg converts a Go int argument to the C int32 it becomes, or fails naming it.
func int32Arg(name string, v int) (int32, error) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, invalid("%s = %d does not fit in int32", name, v)
	}
	return int32(v), nil
}
