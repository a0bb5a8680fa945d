"""Zero-copy: numpy views and DLPack both ways share memory (writes seen on both sides),
lent memory outlives nothing it should not, bf16 is explicit, and what cannot be shared
is copied."""
import gc
import subprocess
import sys

import pytest

import dtrain

np = pytest.importorskip("numpy")


def _torch_works():
    # Imported in a child first: a broken torch install must skip, not crash, this process.
    return subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0


HAVE_TORCH = _torch_works()


def test_numpy_to_dtrain_to_numpy_shares_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = dtrain.Tensor.from_numpy(a)
    assert t.shape == (3, 4) and t.dtype == "f32" and t.data_ptr == a.ctypes.data
    b = t.numpy()
    assert np.shares_memory(a, b) and b.base is not None
    a[1, 2] = -5.0
    assert b[1, 2] == -5.0 and t.tolist()[6] == -5.0  # numpy -> dtrain
    b[0, 0] = 9.0
    t.copy_from(np.full((3, 4), 2.0, dtype=np.float32))
    assert a[0, 0] == 2.0 and np.asarray(t).base is not None  # dtrain -> numpy
    for dtype, name in ((np.float16, "f16"), (np.int32, "i32"), (np.int64, "i64")):
        arr = np.ones((2, 3), dtype=dtype)
        with dtrain.from_numpy(arr) as lent:
            assert lent.dtype == name and np.shares_memory(lent.numpy(), arr)


def test_a_view_outlives_close_and_a_lent_array_outlives_its_name():
    t = dtrain.Tensor("i32", (4,)).copy_from(np.array([1, 2, 3, 4], dtype=np.int32))
    v = t.numpy()
    t.close()  # the view still holds the memory
    gc.collect()
    assert v.tolist() == [1, 2, 3, 4]
    a = np.arange(5, dtype=np.int64)
    lent = dtrain.from_numpy(a)
    del a
    gc.collect()
    assert lent.tolist() == [0, 1, 2, 3, 4]  # the tensor keeps the array alive
    a = np.zeros(3, dtype=np.float32)
    with dtrain.from_numpy(a):
        with pytest.raises(ValueError):
            a.resize(10)  # the buffer is lent: numpy refuses to move it
    a.resize(10, refcheck=False)  # released with the tensor


def test_what_cannot_be_shared_is_copied():
    a = np.arange(8, dtype=np.float32)
    strided = dtrain.from_numpy(a[::2])
    assert strided.tolist() == [0.0, 2.0, 4.0, 6.0] and not np.shares_memory(strided.numpy(), a)
    ro = np.arange(3, dtype=np.int32)
    ro.flags.writeable = False
    assert dtrain.from_numpy(ro).tolist() == [0, 1, 2]
    assert dtrain.from_numpy(bytearray(8), dtype="i32").tolist() == [0, 0]
    unaligned = np.frombuffer(bytearray(17), dtype=np.float32, offset=1)
    unaligned[:] = [1, 2, 3, 4]
    for t in (dtrain.from_numpy(unaligned), dtrain.from_dlpack(unaligned)):
        assert t.tolist() == [1.0, 2.0, 3.0, 4.0] and not np.shares_memory(t.numpy(), unaligned)
    with pytest.raises(TypeError, match="astype"):
        dtrain.from_numpy(np.zeros(3))  # float64: no dtrain dtype
    with pytest.raises(TypeError, match="bf16"):
        dtrain.from_numpy(np.zeros(3, dtype=np.uint16))


def test_bf16_is_explicit():
    t = dtrain.Tensor("f32", (4,)).copy_from(np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)).to("bf16")
    with pytest.raises(TypeError, match="bfloat16"):
        t.numpy()
    with pytest.raises(TypeError, match="bfloat16"):
        t.to_numpy()
    assert t.to_numpy(dtype="float32").tolist() == [1.0, -2.0, 0.5, 3.0]
    bits = t.view_bits()
    assert bits.dtype == np.uint16 and bits[0] == 0x3F80  # 1.0 in bfloat16
    bits[0] = 0x4000  # 2.0, written through the view
    assert t.tolist()[0] == 2.0
    lent = dtrain.from_numpy(bits, dtype="bf16")
    assert lent.dtype == "bf16" and lent.tolist() == [2.0, -2.0, 0.5, 3.0]
    assert dtrain.Tensor("i32", (2,)).to_numpy(dtype="float64").dtype == np.float64


def test_dlpack_round_trip_with_numpy():
    n = np.arange(6, dtype=np.int64).reshape(2, 3)
    d = dtrain.from_dlpack(n)  # numpy -> dtrain -> numpy, all one memory
    assert d.dtype == "i64" and d.shape == (2, 3) and d.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(d)  # numpy marks what it takes through DLPack read-only
    assert a.shape == (2, 3) and a.dtype == np.int64 and np.shares_memory(a, n)
    n[1, 1] = 40
    assert d.tolist()[4] == 40 and a[1, 1] == 40
    d.numpy()[0, 2] = -1
    assert n[0, 2] == -1 and a[0, 2] == -1
    t = dtrain.Tensor("f32", (2, 3))
    b = np.from_dlpack(t)
    t.numpy()[1, 0] = 3.5
    t.close()
    d.close()
    gc.collect()
    assert b[1, 0] == 3.5 and a[0, 2] == -1  # the exports hold the memory past close()
    assert dtrain.from_dlpack(n.T).tolist() == [0, 3, 1, 40, -1, 5]  # strided: copied
    with pytest.raises(TypeError, match="dtype"):
        dtrain.from_dlpack(np.zeros(2, dtype=np.float64))


def test_dlpack_capsule_is_consumed_once_and_every_export_is_released():
    gc.collect()
    start = dtrain.memory_stats("cpu", "all")[0]
    t = dtrain.Tensor("f32", (1000,))
    capsule = t.__dlpack__()
    first = dtrain.from_dlpack(capsule)
    assert first.data_ptr == t.data_ptr
    with pytest.raises(TypeError, match="dltensor"):
        dtrain.from_dlpack(capsule)  # renamed "used_dltensor"
    unused = t.__dlpack__()  # never taken: its destructor releases its hold
    view = t.numpy()
    copy = np.from_dlpack(dtrain.Tensor("i32", (2,)))  # a temporary: numpy keeps it alive
    assert copy.tolist() == [0, 0]
    t.close()
    assert dtrain.memory_stats("cpu", "all")[0] > start  # still viewed
    del capsule, first, unused, view, copy
    gc.collect()
    assert dtrain.memory_stats("cpu", "all")[0] == start


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")
def test_dlpack_with_torch_bf16_both_ways():
    import torch
    f = dtrain.Tensor("f32", (3,)).copy_from(np.array([1.5, -2.0, 0.25], dtype=np.float32))
    b = f.to("bf16")
    x = torch.from_dlpack(b)
    assert x.dtype == torch.bfloat16 and x.tolist() == [1.5, -2.0, 0.25]
    x[0] = 4.0
    assert b.tolist()[0] == 4.0  # the same memory
    y = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.bfloat16)
    z = dtrain.from_dlpack(y)
    assert z.dtype == "bf16" and z.data_ptr == y.data_ptr()
    y[1, 0] = 8.0
    assert z.tolist() == [1.0, 2.0, 8.0, 4.0]
    assert dtrain.from_dlpack(y.t()).tolist() == [1.0, 8.0, 2.0, 4.0]  # strided: copied
    i = torch.from_dlpack(dtrain.from_numpy(np.arange(4, dtype=np.int32)))
    assert i.dtype == torch.int32 and i.tolist() == [0, 1, 2, 3]
