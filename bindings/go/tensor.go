package dtrain

import (
	"runtime"
	"unsafe"

	"dtrain.dev/dtrain/internal/cdt"
)

// MaxDims is the most dimensions a tensor may have.
const MaxDims = 8

// Tensor is a dense, row-major, n-dimensional array on one device (dt_tensor), or a mesh
// tensor with one piece per local rank (Mesh.NewTensor).
type Tensor struct{ obj *owned[cdt.Tensor] }

// wrapTensor wraps a tensor a native call has made: a view, a piece, a result.
func wrapTensor(p cdt.Tensor) *Tensor { return wrap[Tensor](p, cdt.Dt_tensor_destroy) }

func (t *Tensor) handle() (cdt.Tensor, error) { return handleOf(t) }

// Close releases the tensor (its bytes return to the pool). Idempotent.
func (t *Tensor) Close() error { return closeHandle(t) }

// NewTensor creates a zero-filled CPU tensor of dtype and shape (no sizes: a scalar).
func NewTensor(dtype DType, shape ...int) (*Tensor, error) {
	return NewTensorOn("cpu", dtype, shape, nil)
}

// NewTensorOn creates a zero-filled tensor on device ("cpu" or "cuda:N"; ErrUnsupported
// without that GPU). opts: nil or "tag" (a memory tag name, default "workspace").
func NewTensorOn(device string, dtype DType, shape []int, opts Options) (*Tensor, error) {
	dims, err := shapeArg(shape)
	if err != nil {
		return nil, err
	}
	return create[Tensor](opts, func(o cdt.Options, p *cdt.Tensor) cdt.Status {
		return cdt.Dt_tensor_create(int32(dtype), firstInt64(dims), int32(len(dims)), device, o, p)
	}, cdt.Dt_tensor_destroy)
}

func shapeArg(shape []int) ([]int64, error) {
	if len(shape) > MaxDims {
		return nil, invalid("a shape of %d dims; at most %d", len(shape), MaxDims)
	}
	dims := make([]int64, len(shape))
	for i, d := range shape {
		dims[i] = int64(d)
	}
	return dims, nil
}

func firstInt64(s []int64) *int64 {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

// The getters below cannot fail on a live tensor, so they return no error; a nil or closed
// tensor reads as the zero value (dtype 0, a nil shape, 0 elements, device "").

// DType returns the element type.
func (t *Tensor) DType() DType { return DType(peek(t, cdt.Dt_tensor_dtype)) }

// Shape returns the sizes of the dimensions (of one piece, for a mesh tensor): empty, not
// nil, for a scalar.
func (t *Tensor) Shape() []int {
	h, err := t.handle()
	if err != nil {
		return nil
	}
	var ndim int32
	dims := make([]int64, MaxDims)
	st := cdt.Dt_tensor_ndim(h, &ndim)
	if st.OK() {
		st = cdt.Dt_tensor_shape(h, &dims[0], MaxDims)
	}
	runtime.KeepAlive(t)
	if !st.OK() {
		return nil
	}
	shape := make([]int, ndim)
	for i := range shape {
		shape[i] = int(dims[i])
	}
	return shape
}

// Numel returns the number of elements.
func (t *Tensor) Numel() int { return int(peek(t, cdt.Dt_tensor_numel)) }

// NBytes returns the size of the data in bytes.
func (t *Tensor) NBytes() int { return int(peek(t, cdt.Dt_tensor_nbytes)) }

// Device returns the device the tensor lives on ("cpu", "cuda:0", ...).
func (t *Tensor) Device() string { return peek(t, cdt.Dt_tensor_device) }

// PieceCount returns the number of pieces: one per local rank for a mesh tensor, else 1.
func (t *Tensor) PieceCount() int { return int(peek(t, cdt.Dt_tensor_piece_count)) }

// Piece returns a plain tensor that views piece localIndex of a mesh tensor (sharing its
// storage; writes through either are seen by both).
func (t *Tensor) Piece(localIndex int) (*Tensor, error) {
	h, err := t.handle()
	if err != nil {
		return nil, err
	}
	i, err := int32Arg("localIndex", localIndex)
	if err != nil {
		return nil, err
	}
	var p cdt.Tensor
	err = check(cdt.Dt_tensor_piece(h, i, &p))
	runtime.KeepAlive(t)
	if err != nil {
		return nil, err
	}
	return wrapTensor(p), nil
}

// expect checks, before any copy or view, that t is live and holds n elements of dtype
// (or, for dtype 0, n bytes); what names the slice in the error.
func (t *Tensor) expect(dtype DType, n int, what string) error {
	if _, err := t.handle(); err != nil {
		return err
	}
	if dtype == 0 {
		if nb := t.NBytes(); n != nb {
			return invalid("%s has %d bytes; the tensor has %d", what, n, nb)
		}
		return nil
	}
	if d := t.DType(); d != dtype {
		return invalid("%s holds %s elements; the tensor's dtype is %s", what, dtype, d)
	}
	if numel := t.Numel(); n != numel {
		return invalid("%s has %d elements; the tensor has %d", what, n, numel)
	}
	return nil
}

// The copies below move data straight between the slice's memory and the tensor, with no
// intermediate buffer. The slice must have exactly the tensor's element count and the
// matching dtype (or, for the byte forms, exactly its byte size).

// copyHost runs one of those copies (dt_tensor_copy_from_host or _to_host) between t and
// the memory of s, once expect has checked s against t; what names s in its errors.
func copyHost[E float32 | int32 | int64 | byte](t *Tensor, dtype DType, s []E, what string,
	move func(cdt.Tensor, unsafe.Pointer, int64) cdt.Status) error {
	if err := t.expect(dtype, len(s), what); err != nil || len(s) == 0 {
		return err // (a tensor has at least one element: len(s) == 0 only fails)
	}
	return invoke(t, func(h cdt.Tensor) cdt.Status {
		return move(h, unsafe.Pointer(&s[0]), int64(len(s))*int64(unsafe.Sizeof(s[0])))
	})
}

// CopyFromFloat32 copies src into an f32 tensor.
func (t *Tensor) CopyFromFloat32(src []float32) error {
	return copyHost(t, F32, src, "the []float32", cdt.Dt_tensor_copy_from_host)
}

// CopyFromInt32 copies src into an i32 tensor.
func (t *Tensor) CopyFromInt32(src []int32) error {
	return copyHost(t, I32, src, "the []int32", cdt.Dt_tensor_copy_from_host)
}

// CopyFromInt64 copies src into an i64 tensor.
func (t *Tensor) CopyFromInt64(src []int64) error {
	return copyHost(t, I64, src, "the []int64", cdt.Dt_tensor_copy_from_host)
}

// CopyFromBytes copies the raw bytes of src (the tensor's dtype, native byte order).
func (t *Tensor) CopyFromBytes(src []byte) error {
	return copyHost(t, 0, src, "the []byte", cdt.Dt_tensor_copy_from_host)
}

// CopyToFloat32 copies an f32 tensor into dst.
func (t *Tensor) CopyToFloat32(dst []float32) error {
	return copyHost(t, F32, dst, "the []float32", cdt.Dt_tensor_copy_to_host)
}

// CopyToInt32 copies an i32 tensor into dst.
func (t *Tensor) CopyToInt32(dst []int32) error {
	return copyHost(t, I32, dst, "the []int32", cdt.Dt_tensor_copy_to_host)
}

// CopyToInt64 copies an i64 tensor into dst.
func (t *Tensor) CopyToInt64(dst []int64) error {
	return copyHost(t, I64, dst, "the []int64", cdt.Dt_tensor_copy_to_host)
}

// CopyToBytes copies the tensor's raw bytes into dst.
func (t *Tensor) CopyToBytes(dst []byte) error {
	return copyHost(t, 0, dst, "the []byte", cdt.Dt_tensor_copy_to_host)
}

// Float32s returns a new slice with a copy of the contents of an f32 tensor (Float32View
// shares the tensor's memory instead).
func (t *Tensor) Float32s() ([]float32, error) {
	s := make([]float32, t.Numel())
	return s, t.CopyToFloat32(s)
}

// Int32s returns a new slice with a copy of the contents of an i32 tensor.
func (t *Tensor) Int32s() ([]int32, error) {
	s := make([]int32, t.Numel())
	return s, t.CopyToInt32(s)
}

// CopyTo copies the tensor into dst, converting the dtype; element counts must match.
func (t *Tensor) CopyTo(dst *Tensor) error {
	return withTensors(t, []*Tensor{dst}, func(src cdt.Tensor, ts []cdt.Tensor) cdt.Status {
		return cdt.Dt_tensor_copy(src, ts[0])
	})
}

// FillNormal fills a floating tensor with normal values (mean, std) keyed by
// (seed, name, element index); offset is the global index of element 0.
func (t *Tensor) FillNormal(seed uint64, name string, offset int64, mean, std float32) error {
	return invoke(t, func(h cdt.Tensor) cdt.Status {
		return cdt.Dt_tensor_fill_normal(h, seed, name, offset, mean, std)
	})
}

// FillUniform fills a floating tensor with values in [lo, hi), keyed as for FillNormal.
func (t *Tensor) FillUniform(seed uint64, name string, offset int64, lo, hi float32) error {
	return invoke(t, func(h cdt.Tensor) cdt.Status {
		return cdt.Dt_tensor_fill_uniform(h, seed, name, offset, lo, hi)
	})
}

// MatMul computes c = op(a) @ op(b), op transposing the last two dims when asked.
func MatMul(a, b *Tensor, transA, transB bool, c *Tensor) error {
	return withTensors(a, []*Tensor{b, c}, func(ha cdt.Tensor, ts []cdt.Tensor) cdt.Status {
		return cdt.Dt_matmul(ha, ts[0], boolArg(transA), boolArg(transB), ts[1])
	})
}

// Softmax computes y = softmax(x) over the last dim.
func Softmax(x, y *Tensor) error {
	return withTensors(x, []*Tensor{y}, func(hx cdt.Tensor, ts []cdt.Tensor) cdt.Status {
		return cdt.Dt_softmax(hx, ts[0])
	})
}

func boolArg(b bool) int32 {
	if b {
		return 1
	}
	return 0
}
