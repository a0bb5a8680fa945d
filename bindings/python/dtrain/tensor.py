"""dtrain.Tensor: a dense array in libdtrain's memory, shared with numpy and any DLPack
library without a copy where the memory allows, and filled from or read into any buffer
(numpy arrays, memoryview, bytearray, array.array).

    t = dtrain.Tensor.from_numpy(a)    # a's memory, lent (no copy)
    v = t.numpy()                       # a numpy view of t's memory (no copy)
    x = torch.from_dlpack(t)            # DLPack, both ways: dtrain.from_dlpack(x)

numpy has no bfloat16: a bf16 tensor is read as float32 with to_numpy(dtype="float32")
(a copy) or as its raw bits with view_bits() (uint16, a view); DLPack carries it as
bfloat16 (kDLBfloat, 16 bits), which torch reads as torch.bfloat16.
"""
from __future__ import annotations

import array
import contextlib
import sys
from typing import TYPE_CHECKING, Any, Iterable, Optional, Tuple, Union

from . import native
from ._handle import Handle, options_ptr

if TYPE_CHECKING:
    import numpy as _np  # not `numpy`: Tensor.numpy would hide it in the class's annotations

F32, BF16, F16, I32, I64 = native.DT_F32, native.DT_BF16, native.DT_F16, native.DT_I32, native.DT_I64
_BY_NAME = {"f32": F32, "bf16": BF16, "f16": F16, "i32": I32, "i64": I64}
# Buffer formats (struct codes) that hold each dtype; raw bytes ('B') fit any of them.
_FORMATS = {F32: "f", BF16: "Hh", F16: "eHh", I32: "i", I64: "ql"}
_NUMPY = {F32: "float32", F16: "float16", I32: "int32", I64: "int64"}  # bf16: none
_ITEMSIZE = {F32: 4, BF16: 2, F16: 2, I32: 4, I64: 8}
_ENDIAN = "<" if sys.byteorder == "little" else ">"
_TYPESTR = {F32: "f4", F16: "f2", I32: "i4", I64: "i8", BF16: "u2"}  # bf16: its bits
# The dtype a buffer's format says, for from_numpy: 'H' (uint16) is bf16 only when asked.
_FROM_FORMAT = {"f": F32, "e": F16, "i": I32, "q": I64}
# DLPack (type code, bits) of each dtype: kDLInt 0, kDLFloat 2, kDLBfloat 4.
_DLPACK = {(2, 32): F32, (2, 16): F16, (4, 16): BF16, (0, 32): I32, (0, 64): I64}
_DL_CPU, _DL_CUDA = 1, 2

DType = Union[str, int]
Shape = Union[int, Iterable[int]]


def dtype_of(dtype: DType) -> int:
    """The dt_dtype code of "f32"/"bf16"/"f16"/"i32"/"i64" (or of a code)."""
    if isinstance(dtype, str):
        if dtype not in _BY_NAME:
            raise ValueError("dtype %r: accepted: %s" % (dtype, ", ".join(_BY_NAME)))
        return _BY_NAME[dtype]
    if dtype not in _FORMATS:
        raise ValueError("dtype %r: accepted: %s" % (dtype, ", ".join(_BY_NAME)))
    return dtype


def _layout(dtype: DType, shape: Shape) -> Tuple[int, Optional[array.array], int]:
    """(dt_dtype, shape as an int64 buffer or None for a scalar, ndim): what every tensor
    constructor of the C API takes."""
    if isinstance(shape, int):
        shape = (shape,)
    try:
        dims = array.array("q", shape)
    except (TypeError, OverflowError):
        raise TypeError("shape must be a sequence of ints, not %r" % (shape,)) from None
    return dtype_of(dtype), (dims if len(dims) else None), len(dims)


def _tag_options(tag: Optional[str], stack: contextlib.ExitStack) -> Any:
    """The options of a tensor constructor: the ledger tag, if one is given."""
    return options_ptr({"tag": tag} if tag else None, stack)


class _Memory:
    """Owns the native tensor. The Tensor holds it, and so does every numpy view and DLPack
    export of its memory: the dt_tensor is destroyed when the last of them lets go, so
    Tensor.close() never frees memory that a view still reads."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: Any) -> None:
        self.ptr = ptr

    def __del__(self) -> None:
        ptr, self.ptr = self.ptr, None
        if ptr is not None:
            try:
                native.dt_tensor_destroy(ptr)
            except Exception:  # interpreter shutdown: nothing left to report to
                pass


class _ArrayView:
    """What np.asarray reads a tensor's memory through (__array_interface__): numpy keeps
    this object, and so the memory, alive as the array's base."""

    __slots__ = ("__array_interface__", "_memory")

    def __init__(self, interface: dict, memory: _Memory) -> None:
        self.__array_interface__ = interface
        self._memory = memory


class Tensor(Handle):
    """Tensor(dtype, shape, device="cpu", tag=None): zero-filled. tag names what the memory
    ledger counts it as ("param", "activation", ...; default "workspace").

    close() ends this handle; memory still viewed by a numpy array or a DLPack consumer
    stays valid until they let it go."""

    _destroy = staticmethod(native.dt_tensor_destroy)

    def __init__(self, dtype: Optional[DType], shape: Optional[Shape], device: str = "cpu",
                 tag: Optional[str] = None, _ptr: Any = None) -> None:
        if _ptr is None:
            if dtype is None or shape is None:
                raise TypeError("Tensor(dtype, shape): both are required")
            with contextlib.ExitStack() as stack:
                _ptr = native.dt_tensor_create(*_layout(dtype, shape), device, _tag_options(tag, stack))
        super().__init__(_ptr)
        self._memory: Optional[_Memory] = _Memory(_ptr)

    def close(self) -> None:
        self._ptr = None
        self._memory = None  # destroys the dt_tensor unless a view still holds it

    # ---- what it is ---------------------------------------------------------------
    @property
    def dtype(self) -> str:
        return native.dt_dtype_name(native.dt_tensor_dtype(self._h))

    @property
    def shape(self) -> Tuple[int, ...]:
        dims = array.array("q", [0] * native.dt_tensor_ndim(self._h))
        if len(dims):
            native.dt_tensor_shape(self._h, dims)
        return tuple(dims)

    @property
    def numel(self) -> int:
        return native.dt_tensor_numel(self._h)

    @property
    def nbytes(self) -> int:
        return native.dt_tensor_nbytes(self._h)

    @property
    def device(self) -> str:
        return native.dt_tensor_device(self._h)

    @property
    def data_ptr(self) -> int:
        """The address of element 0 (host or device memory); valid while the tensor lives."""
        return native.dt_tensor_data(self._h)

    # ---- copies through the buffer protocol ---------------------------------------
    def _check(self, buf: Any, arg: str) -> memoryview:
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

    def copy_from(self, src: Any) -> "Tensor":
        """Writes the tensor from `src`, a buffer of its dtype and byte size."""
        native.dt_tensor_copy_from_host(self._h, self._check(src, "src"))
        return self

    def copy_to(self, dst: Any) -> Any:
        """Reads the tensor into `dst`, a writable buffer of its dtype and byte size."""
        view = self._check(dst, "dst")
        if view.readonly:
            raise TypeError("dst must be writable")
        native.dt_tensor_copy_to_host(self._h, view)
        return dst

    def tolist(self) -> list:
        """The values as a flat list (f32/f16/bf16 as float via f32, integers as int)."""
        code = native.dt_tensor_dtype(self._h)
        if code in (I32, I64):
            out = array.array("i" if code == I32 else "q", bytes(self.nbytes))
            return self.copy_to(out).tolist()
        with self.to(F32) as f32:
            return f32.copy_to(array.array("f", bytes(f32.nbytes))).tolist()

    def to(self, dtype: DType) -> "Tensor":
        """A new tensor of `dtype` on the same device with the values converted (a copy)."""
        out = Tensor(dtype, self.shape, device=self.device)
        native.dt_tensor_copy(self._h, out._h)
        return out

    # ---- numpy --------------------------------------------------------------------
    def _interface(self, typestr: str) -> _ArrayView:
        if self.device != "cpu":
            raise TypeError("a tensor on %s has no host memory to view: to_numpy() copies it" % self.device)
        interface = {"shape": self.shape, "typestr": _ENDIAN + typestr, "version": 3,
                     "data": (native.dt_tensor_data(self._h), False)}
        assert self._memory is not None  # open: self._h said so
        return _ArrayView(interface, self._memory)

    def numpy(self) -> "_np.ndarray":
        """A numpy array viewing the tensor's memory (no copy; writes go both ways; the
        memory lives as long as the array). A bf16 tensor has no numpy dtype: TypeError,
        use to_numpy(dtype="float32") or view_bits()."""
        import numpy as np
        code = native.dt_tensor_dtype(self._h)
        if code == BF16:
            raise TypeError("numpy has no bfloat16: to_numpy(dtype='float32') converts (a copy), "
                            "view_bits() views the raw bits as uint16")
        return np.asarray(self._interface(_TYPESTR[code]))

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> "_np.ndarray":
        """np.asarray(tensor): numpy() (a view); np.array(tensor) copies it."""
        arr = self.to_numpy() if copy else self.numpy()
        return arr if dtype is None else arr.astype(dtype, copy=False)

    def view_bits(self) -> "_np.ndarray":
        """The raw bits of a bf16 or f16 tensor as a uint16 numpy view (no copy)."""
        import numpy as np
        if native.dt_tensor_dtype(self._h) not in (BF16, F16):
            raise TypeError("view_bits() is for bf16 and f16 tensors; this one is %s" % self.dtype)
        return np.asarray(self._interface("u2"))

    def to_numpy(self, dtype: Any = None) -> "_np.ndarray":
        """A new numpy array with the values (a copy), converted to `dtype` if given. A bf16
        tensor needs a dtype (numpy has no bfloat16): "float32" converts exactly."""
        import numpy as np
        code = native.dt_tensor_dtype(self._h)
        if code == BF16:
            if dtype is None:
                raise TypeError("numpy has no bfloat16: pass dtype='float32' (exact), or view_bits()")
            with self.to(F32) as f32:
                return f32.to_numpy().astype(dtype, copy=False)
        out = self.copy_to(np.empty(self.shape, dtype=_NUMPY[code]))
        return out if dtype is None else out.astype(dtype, copy=False)

    @classmethod
    def from_numpy(cls, arr: Any, dtype: Optional[DType] = None) -> "Tensor":
        """A tensor over the memory of `arr` (a numpy array or any buffer): no copy when it
        is C-contiguous, writable and aligned (writes then go both ways, and `arr` stays
        alive while the tensor does); otherwise a copy. Its format picks the dtype: float32,
        float16, int32, int64; uint16 bits are bf16 with dtype="bf16"; raw bytes (1-D)
        take the dtype given."""
        view = memoryview(arr)
        fmt = view.format.lstrip("<=@!")
        fmt = "q" if fmt == "l" and view.itemsize == 8 else fmt
        shape: Tuple[int, ...] = tuple(view.shape or ())
        if dtype is not None:
            code = dtype_of(dtype)
            if fmt in "Bbc" and view.ndim == 1 and view.nbytes % _ITEMSIZE[code] == 0:
                shape = (view.nbytes // _ITEMSIZE[code],)  # raw bytes: as many elements as fit
            elif fmt not in _FORMATS[code]:
                raise TypeError("a %s tensor cannot take elements of format %r" % (native.dt_dtype_name(code),
                                                                                   view.format))
        elif fmt in _FROM_FORMAT:
            code = _FROM_FORMAT[fmt]
        else:
            raise TypeError("from_numpy takes float32, float16, int32 or int64 (uint16 with dtype='bf16'), "
                            "not format %r: convert first (e.g. arr.astype('float32'))" % view.format)
        if view.c_contiguous and not view.readonly and view.nbytes > 0:
            address = native._buffer_address(view)
            if address % _ITEMSIZE[code] == 0:
                # The view holds the buffer export (a numpy array can't be resized under
                # it); libdtrain drops it when the tensor is destroyed.
                return cls(None, None, _ptr=native.dt_tensor_create_from_memory(
                    *_layout(code, shape), "cpu", address, view))
        out = cls(code, shape)
        return out.copy_from(view.tobytes(order="C"))

    # ---- DLPack -------------------------------------------------------------------
    def __dlpack_device__(self) -> Tuple[int, int]:
        """(kDLCPU 1, 0) or (kDLCUDA 2, N)."""
        device = self.device
        return (_DL_CPU, 0) if device == "cpu" else (_DL_CUDA, int(device.split(":")[1]))

    def __dlpack__(self, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Optional[bool] = None) -> Any:
        """A DLPack capsule viewing the tensor (no copy unless copy=True). dtrain's calls
        finish their work before they return, so there is no stream to order against.
        The memory stays valid until the consumer releases it, even after close()."""
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError("the tensor is on %s, not DLPack device %s" % (self.device, tuple(dl_device)))
        if copy:
            with self.to(native.dt_tensor_dtype(self._h)) as twin:
                return twin.__dlpack__()
        return native._dlpack_export(self._h, self._memory)

    # ---- values -------------------------------------------------------------------
    def fill_normal(self, seed: int, name: str, mean: float = 0.0, std: float = 1.0,
                    offset: int = 0) -> "Tensor":
        """Values keyed by (seed, name, element index): equal wherever made."""
        native.dt_tensor_fill_normal(self._h, seed, name, offset, mean, std)
        return self

    def fill_uniform(self, seed: int, name: str, low: float = 0.0, high: float = 1.0,
                     offset: int = 0) -> "Tensor":
        native.dt_tensor_fill_uniform(self._h, seed, name, offset, low, high)
        return self

    @property
    def piece_count(self) -> int:
        return native.dt_tensor_piece_count(self._h)

    def piece(self, local_index: int) -> "Tensor":
        """A plain tensor viewing the piece of local rank `local_index` of a mesh tensor."""
        return Tensor(None, None, _ptr=native.dt_tensor_piece(self._h, local_index))

    def __repr__(self) -> str:
        if self.closed:
            return "Tensor(closed)"
        return "Tensor(%s, %s, %s)" % (self.dtype, list(self.shape), self.device)


def from_dlpack(obj: Any) -> Tensor:
    """A Tensor over the memory of `obj` (anything with __dlpack__, e.g. a numpy array or a
    torch tensor, or a "dltensor" capsule): no copy when it is dense row-major and aligned
    (the producer's memory then lives as long as the tensor); a strided host tensor is
    copied. dtypes: float32, float16, bfloat16, int32, int64."""
    if hasattr(obj, "__dlpack__"):
        capsule = obj.__dlpack__()
    else:
        capsule = obj
    owner = native._dlpack_take(capsule)  # from here on, `owner` releases the producer's memory
    address, shape, strides, (code, bits, lanes), (dev_type, dev_id) = native._dlpack_describe(owner)
    dtype = _DLPACK.get((code, bits)) if lanes == 1 else None
    if dtype is None:
        raise TypeError("DLPack dtype (code %d, %d bits, %d lanes) has no dtrain dtype: float32, float16, "
                        "bfloat16, int32 or int64" % (code, bits, lanes))
    if dev_type == _DL_CPU:
        device = "cpu"
    elif dev_type == _DL_CUDA:
        device = "cuda:%d" % dev_id
    else:
        raise BufferError("DLPack device type %d: dtrain takes CPU (1) and CUDA (2) memory" % dev_type)
    dense = strides is None or all(st == want for st, want, n in zip(strides, _row_major(shape), shape) if n > 1)
    if dense and address % _ITEMSIZE[dtype] == 0 and 0 not in shape:
        return Tensor(None, None, _ptr=native.dt_tensor_create_from_memory(
            *_layout(dtype, shape), device, address, owner))
    if device != "cpu":
        raise BufferError("a strided or unaligned tensor on %s: make it contiguous first" % device)
    out = Tensor(dtype, shape)
    native._dlpack_gather(owner, out._h)
    return out


def _row_major(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))
