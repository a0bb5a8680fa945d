"""dtrain.Tensor: a dense array in libdtrain's memory, filled from and read into any
buffer (numpy arrays, memoryview, bytearray, array.array) without an extra copy."""
import array
import contextlib

from . import native
from ._handle import Handle, options_ptr

F32, BF16, F16, I32, I64 = native.DT_F32, native.DT_BF16, native.DT_F16, native.DT_I32, native.DT_I64
_BY_NAME = {"f32": F32, "bf16": BF16, "f16": F16, "i32": I32, "i64": I64}
# Buffer formats (struct codes) that hold each dtype; raw bytes ('B') fit any of them.
_FORMATS = {F32: "f", BF16: "Hh", F16: "eHh", I32: "i", I64: "ql"}
_NUMPY = {F32: "float32", BF16: "uint16", F16: "float16", I32: "int32", I64: "int64"}


def dtype_of(dtype):
    """The dt_dtype code of "f32"/"bf16"/"f16"/"i32"/"i64" (or of a code)."""
    if isinstance(dtype, str):
        if dtype not in _BY_NAME:
            raise ValueError("dtype %r: accepted: %s" % (dtype, ", ".join(_BY_NAME)))
        return _BY_NAME[dtype]
    if dtype not in _FORMATS:
        raise ValueError("dtype %r: accepted: %s" % (dtype, ", ".join(_BY_NAME)))
    return dtype


def _layout(dtype, shape):
    """(dt_dtype, shape as an int64 buffer or None for a scalar, ndim): what every tensor
    constructor of the C API takes."""
    if isinstance(shape, int):
        shape = (shape,)
    try:
        dims = array.array("q", shape)
    except (TypeError, OverflowError):
        raise TypeError("shape must be a sequence of ints, not %r" % (shape,)) from None
    return dtype_of(dtype), (dims if len(dims) else None), len(dims)


def _tag_options(tag, stack):
    """The options of a tensor constructor: the ledger tag, if one is given."""
    return options_ptr({"tag": tag} if tag else None, stack)


class Tensor(Handle):
    """Tensor(dtype, shape, device="cpu", tag=None): zero-filled. tag names what the memory
    ledger counts it as ("param", "activation", ...; default "workspace")."""

    _destroy = staticmethod(native.dt_tensor_destroy)

    def __init__(self, dtype, shape, device="cpu", tag=None, _ptr=None):
        if _ptr is None:
            with contextlib.ExitStack() as stack:
                _ptr = native.dt_tensor_create(*_layout(dtype, shape), device, _tag_options(tag, stack))
        super().__init__(_ptr)

    @property
    def dtype(self):
        return native.dt_dtype_name(native.dt_tensor_dtype(self._h))

    @property
    def shape(self):
        dims = array.array("q", [0] * native.dt_tensor_ndim(self._h))
        if len(dims):
            native.dt_tensor_shape(self._h, dims)
        return tuple(dims)

    @property
    def numel(self):
        return native.dt_tensor_numel(self._h)

    @property
    def nbytes(self):
        return native.dt_tensor_nbytes(self._h)

    @property
    def device(self):
        return native.dt_tensor_device(self._h)

    def _check(self, buf, arg):
        try:
            view = memoryview(buf)
        except TypeError:
            raise TypeError("%s must support the buffer protocol (numpy array, memoryview, bytearray, "
                            "array.array), not %s" % (arg, type(buf).__name__)) from None
        code = native.dt_tensor_dtype(self._h)
        fmt = view.format.lstrip("<=@!")
        if fmt not in _FORMATS[code] and fmt not in "Bbc":
            raise TypeError("%s holds elements of format %r; a %s tensor accepts %r or raw bytes"
                            % (arg, view.format, self.dtype, _FORMATS[code]))
        if view.nbytes != self.nbytes:
            raise ValueError("%s has %d bytes; the %s tensor of shape %s has %d"
                             % (arg, view.nbytes, self.dtype, self.shape, self.nbytes))
        if not view.c_contiguous:
            raise ValueError("%s must be C-contiguous" % arg)
        return view

    def copy_from(self, src):
        """Writes the tensor from `src`, a buffer of its dtype and byte size."""
        native.dt_tensor_copy_from_host(self._h, self._check(src, "src"))
        return self

    def copy_to(self, dst):
        """Reads the tensor into `dst`, a writable buffer of its dtype and byte size."""
        view = self._check(dst, "dst")
        if view.readonly:
            raise TypeError("dst must be writable")
        native.dt_tensor_copy_to_host(self._h, view)
        return dst

    def numpy(self):
        """A new numpy array with the tensor's values (bf16 comes as its uint16 bits)."""
        import numpy as np
        out = np.empty(self.shape, dtype=_NUMPY[native.dt_tensor_dtype(self._h)])
        return self.copy_to(out)

    def tolist(self):
        """The values as a flat list (f32/f16/bf16 as float via f32, integers as int)."""
        code = native.dt_tensor_dtype(self._h)
        if code in (I32, I64):
            out = array.array("i" if code == I32 else "q", bytes(self.nbytes))
            return self.copy_to(out).tolist()
        f32 = Tensor(F32, self.shape)
        try:
            native.dt_tensor_copy(self._h, f32._h)
            return f32.copy_to(array.array("f", bytes(f32.nbytes))).tolist()
        finally:
            f32.close()

    def fill_normal(self, seed, name, mean=0.0, std=1.0, offset=0):
        """Values keyed by (seed, name, element index): equal wherever made."""
        native.dt_tensor_fill_normal(self._h, seed, name, offset, mean, std)
        return self

    def fill_uniform(self, seed, name, low=0.0, high=1.0, offset=0):
        native.dt_tensor_fill_uniform(self._h, seed, name, offset, low, high)
        return self

    @property
    def piece_count(self):
        return native.dt_tensor_piece_count(self._h)

    def piece(self, local_index):
        """A plain tensor viewing the piece of local rank `local_index` of a mesh tensor."""
        return Tensor(None, None, _ptr=native.dt_tensor_piece(self._h, local_index))

    def __repr__(self):
        if self.closed:
            return "Tensor(closed)"
        return "Tensor(%s, %s, %s)" % (self.dtype, list(self.shape), self.device)
