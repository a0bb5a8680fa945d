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
type Tensor struct{ obj object[cdt.Tensor] }

func wrapTensor(p cdt.Tensor) *Tensor {
	t := &Tensor{}
	t.obj.set(p, cdt.Dt_tensor_destroy)
	runtime.SetFinalizer(t, func(t *Tensor) { t.obj.release() })
	return t
}

func (t *Tensor) handle() (cdt.Tensor, error) {
	if t == nil {
		return 0, nilHandle("Tensor")
	}
	return t.obj.get("Tensor")
}

// Close releases the tensor (its bytes return to the pool). Idempotent.
func (t *Tensor) Close() error {
	if t != nil {
		runtime.SetFinalizer(t, nil)
		t.obj.release()
	}
	return nil
}

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
	o, free, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	defer free()
	var p cdt.Tensor
	if err := check(cdt.Dt_tensor_create(int32(dtype), firstInt64(dims), int32(len(dims)), device, o, &p)); err != nil {
		return nil, err
	}
	return wrapTensor(p), nil
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

// DType returns the element type.
func (t *Tensor) DType() (DType, error) {
	h, err := t.handle()
	if err != nil {
		return 0, err
	}
	var d int32
	err = check(cdt.Dt_tensor_dtype(h, &d))
	runtime.KeepAlive(t)
	return DType(d), err
}

// Shape returns the sizes of the dimensions (of one piece, for a mesh tensor).
func (t *Tensor) Shape() ([]int, error) {
	h, err := t.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(t)
	var ndim int32
	if err := check(cdt.Dt_tensor_ndim(h, &ndim)); err != nil {
		return nil, err
	}
	dims := make([]int64, MaxDims)
	if err := check(cdt.Dt_tensor_shape(h, &dims[0], MaxDims)); err != nil {
		return nil, err
	}
	shape := make([]int, ndim)
	for i := range shape {
		shape[i] = int(dims[i])
	}
	return shape, nil
}

// Numel returns the number of elements.
func (t *Tensor) Numel() (int, error) {
	h, err := t.handle()
	if err != nil {
		return 0, err
	}
	var n int64
	err = check(cdt.Dt_tensor_numel(h, &n))
	runtime.KeepAlive(t)
	return int(n), err
}

// NBytes returns the size of the data in bytes.
func (t *Tensor) NBytes() (int, error) {
	h, err := t.handle()
	if err != nil {
		return 0, err
	}
	var n int64
	err = check(cdt.Dt_tensor_nbytes(h, &n))
	runtime.KeepAlive(t)
	return int(n), err
}

// Device returns the device the tensor lives on ("cpu", "cuda:0", ...).
func (t *Tensor) Device() (string, error) {
	h, err := t.handle()
	if err != nil {
		return "", err
	}
	var s string
	err = check(cdt.Dt_tensor_device(h, &s))
	runtime.KeepAlive(t)
	return s, err
}

// PieceCount returns the number of pieces: one per local rank for a mesh tensor, else 1.
func (t *Tensor) PieceCount() (int, error) {
	h, err := t.handle()
	if err != nil {
		return 0, err
	}
	var n int32
	err = check(cdt.Dt_tensor_piece_count(h, &n))
	runtime.KeepAlive(t)
	return int(n), err
}

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

// expect checks, before any copy, that the tensor holds want elements of dtype (or, for
// dtype 0, want bytes) and returns its handle.
func (t *Tensor) expect(dtype DType, n int, what string) (cdt.Tensor, error) {
	h, err := t.handle()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(t)
	if dtype == 0 {
		var nb int64
		if err := check(cdt.Dt_tensor_nbytes(h, &nb)); err != nil {
			return 0, err
		}
		if int64(n) != nb {
			return 0, invalid("%s has %d bytes; the tensor has %d", what, n, nb)
		}
		return h, nil
	}
	var d int32
	if err := check(cdt.Dt_tensor_dtype(h, &d)); err != nil {
		return 0, err
	}
	if DType(d) != dtype {
		return 0, invalid("%s holds %s elements; the tensor's dtype is %s", what, dtype, DType(d))
	}
	var numel int64
	if err := check(cdt.Dt_tensor_numel(h, &numel)); err != nil {
		return 0, err
	}
	if int64(n) != numel {
		return 0, invalid("%s has %d elements; the tensor has %d", what, n, numel)
	}
	return h, nil
}

// The copies below move data straight between the slice's memory and the tensor, with no
// intermediate buffer. The slice must have exactly the tensor's element count and the
// matching dtype (or, for the byte forms, exactly its byte size).

// CopyFromFloat32 copies src into an f32 tensor.
func (t *Tensor) CopyFromFloat32(src []float32) error {
	h, err := t.expect(F32, len(src), "the []float32")
	if err != nil {
		return err
	}
	err = check(cdt.Dt_tensor_copy_from_host(h, unsafe.Pointer(&src[0]), int64(len(src))*4))
	runtime.KeepAlive(t)
	return err
}

// CopyFromInt32 copies src into an i32 tensor.
func (t *Tensor) CopyFromInt32(src []int32) error {
	h, err := t.expect(I32, len(src), "the []int32")
	if err != nil {
		return err
	}
	err = check(cdt.Dt_tensor_copy_from_host(h, unsafe.Pointer(&src[0]), int64(len(src))*4))
	runtime.KeepAlive(t)
	return err
}

// CopyFromInt64 copies src into an i64 tensor.
func (t *Tensor) CopyFromInt64(src []int64) error {
	h, err := t.expect(I64, len(src), "the []int64")
	if err != nil {
		return err
	}
	err = check(cdt.Dt_tensor_copy_from_host(h, unsafe.Pointer(&src[0]), int64(len(src))*8))
	runtime.KeepAlive(t)
	return err
}

// CopyFromBytes copies the raw bytes of src (the tensor's dtype, native byte order).
func (t *Tensor) CopyFromBytes(src []byte) error {
	h, err := t.expect(0, len(src), "the []byte")
	if err != nil {
		return err
	}
	err = check(cdt.Dt_tensor_copy_from_host(h, unsafe.Pointer(&src[0]), int64(len(src))))
	runtime.KeepAlive(t)
	return err
}

// CopyToFloat32 copies an f32 tensor into dst.
func (t *Tensor) CopyToFloat32(dst []float32) error {
	h, err := t.expect(F32, len(dst), "the []float32")
	if err != nil {
		return err
	}
	err = check(cdt.Dt_tensor_copy_to_host(h, unsafe.Pointer(&dst[0]), int64(len(dst))*4))
	runtime.KeepAlive(t)
	return err
}

// CopyToInt32 copies an i32 tensor into dst.
func (t *Tensor) CopyToInt32(dst []int32) error {
	h, err := t.expect(I32, len(dst), "the []int32")
	if err != nil {
		return err
	}
	err = check(cdt.Dt_tensor_copy_to_host(h, unsafe.Pointer(&dst[0]), int64(len(dst))*4))
	runtime.KeepAlive(t)
	return err
}

// CopyToInt64 copies an i64 tensor into dst.
func (t *Tensor) CopyToInt64(dst []int64) error {
	h, err := t.expect(I64, len(dst), "the []int64")
	if err != nil {
		return err
	}
	err = check(cdt.Dt_tensor_copy_to_host(h, unsafe.Pointer(&dst[0]), int64(len(dst))*8))
	runtime.KeepAlive(t)
	return err
}

// CopyToBytes copies the tensor's raw bytes into dst.
func (t *Tensor) CopyToBytes(dst []byte) error {
	h, err := t.expect(0, len(dst), "the []byte")
	if err != nil {
		return err
	}
	err = check(cdt.Dt_tensor_copy_to_host(h, unsafe.Pointer(&dst[0]), int64(len(dst))))
	runtime.KeepAlive(t)
	return err
}

// Float32s returns a new slice with the contents of an f32 tensor.
func (t *Tensor) Float32s() ([]float32, error) {
	n, err := t.Numel()
	if err != nil {
		return nil, err
	}
	s := make([]float32, n)
	return s, t.CopyToFloat32(s)
}

// Int32s returns a new slice with the contents of an i32 tensor.
func (t *Tensor) Int32s() ([]int32, error) {
	n, err := t.Numel()
	if err != nil {
		return nil, err
	}
	s := make([]int32, n)
	return s, t.CopyToInt32(s)
}

// CopyTo copies the tensor into dst, converting the dtype; element counts must match.
func (t *Tensor) CopyTo(dst *Tensor) error {
	src, err := t.handle()
	if err != nil {
		return err
	}
	d, err := dst.handle()
	if err != nil {
		return err
	}
	err = check(cdt.Dt_tensor_copy(src, d))
	runtime.KeepAlive(t)
	runtime.KeepAlive(dst)
	return err
}

// FillNormal fills a floating tensor with normal values (mean, std) keyed by
// (seed, name, element index); offset is the global index of element 0.
func (t *Tensor) FillNormal(seed uint64, name string, offset int64, mean, std float32) error {
	h, err := t.handle()
	if err != nil {
		return err
	}
	err = check(cdt.Dt_tensor_fill_normal(h, seed, name, offset, mean, std))
	runtime.KeepAlive(t)
	return err
}

// FillUniform fills a floating tensor with values in [lo, hi), keyed as for FillNormal.
func (t *Tensor) FillUniform(seed uint64, name string, offset int64, lo, hi float32) error {
	h, err := t.handle()
	if err != nil {
		return err
	}
	err = check(cdt.Dt_tensor_fill_uniform(h, seed, name, offset, lo, hi))
	runtime.KeepAlive(t)
	return err
}

// MatMul computes c = op(a) @ op(b), op transposing the last two dims when asked.
func MatMul(a, b *Tensor, transA, transB bool, c *Tensor) error {
	ha, err := a.handle()
	if err != nil {
		return err
	}
	hb, err := b.handle()
	if err != nil {
		return err
	}
	hc, err := c.handle()
	if err != nil {
		return err
	}
	err = check(cdt.Dt_matmul(ha, hb, boolArg(transA), boolArg(transB), hc))
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	runtime.KeepAlive(c)
	return err
}

// Softmax computes y = softmax(x) over the last dim.
func Softmax(x, y *Tensor) error {
	hx, err := x.handle()
	if err != nil {
		return err
	}
	hy, err := y.handle()
	if err != nil {
		return err
	}
	err = check(cdt.Dt_softmax(hx, hy))
	runtime.KeepAlive(x)
	runtime.KeepAlive(y)
	return err
}

func boolArg(b bool) int32 {
	if b {
		return 1
	}
	return 0
}
