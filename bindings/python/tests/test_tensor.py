"""Tensors take and give any buffer of their dtype and size, without an extra copy."""
import array

import pytest

import dtrain

np = pytest.importorskip("numpy")


def test_numpy_round_trip_and_shape():
    t = dtrain.Tensor("f32", (3, 4))
    assert t.shape == (3, 4) and t.numel == 12 and t.nbytes == 48 and t.dtype == "f32"
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t.copy_from(a)
    assert np.array_equal(t.numpy(), a)
    out = np.zeros((3, 4), dtype=np.float32)
    assert t.copy_to(out) is out and np.array_equal(out, a)
    t.close()


def test_memoryview_array_and_bytearray():
    t = dtrain.Tensor("i32", (5,))
    t.copy_from(array.array("i", [1, 2, 3, 4, 5]))
    assert t.tolist() == [1, 2, 3, 4, 5]
    raw = bytearray(20)
    t.copy_to(memoryview(raw))
    assert array.array("i", bytes(raw)).tolist() == [1, 2, 3, 4, 5]
    t.copy_from(bytes(20))  # raw bytes fit any dtype
    assert t.tolist() == [0] * 5


def test_bf16_and_f16_values():
    for dtype in ("bf16", "f16"):
        t = dtrain.Tensor(dtype, (4,))
        f = dtrain.Tensor("f32", (4,)).copy_from(np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32))
        dtrain.native.dt_tensor_copy(f._h, t._h)
        assert t.tolist() == [1.0, -2.0, 0.5, 3.0]


def test_wrong_dtype_is_type_error_and_wrong_size_value_error():
    t = dtrain.Tensor("f32", (4,))
    with pytest.raises(TypeError, match="accepts"):
        t.copy_from(np.zeros(4, dtype=np.float64))
    with pytest.raises(TypeError, match="accepts"):
        t.copy_from(np.zeros(4, dtype=np.int32))
    with pytest.raises(ValueError, match="has 12 bytes"):
        t.copy_from(np.zeros(3, dtype=np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        t.copy_from(np.zeros((4, 2), dtype=np.float32)[:, 0])
    with pytest.raises(TypeError, match="buffer protocol"):
        t.copy_from([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(TypeError, match="writable"):
        t.copy_to(bytes(16))
    with pytest.raises(ValueError, match="dtype"):
        dtrain.Tensor("f64", (2,))
    with pytest.raises(dtrain.InvalidArgumentError):
        dtrain.Tensor("f32", (0, 3))


def test_the_data_goes_straight_in():
    # A numpy view's memory is read in place: writing through it and copying again works.
    base = np.zeros(8, dtype=np.float32)
    t = dtrain.Tensor("f32", (8,))
    base[3] = 7.0
    t.copy_from(base)
    assert t.tolist()[3] == 7.0


def test_mesh_all_reduce_over_pieces():
    with dtrain.Mesh("local", 4) as mesh:
        t = mesh.tensor("f32", (3,))
        assert t.piece_count == 4
        for i in range(4):
            with t.piece(i) as p:
                p.copy_from(np.full(3, i + 1, dtype=np.float32))
        mesh.all_reduce(t, "world", "sum")
        for i in range(4):
            with t.piece(i) as p:
                assert p.tolist() == [10.0, 10.0, 10.0]
        calls, nbytes, _ = mesh.comm_stats(0, "world", "all_reduce")
        assert calls == 1 and nbytes == 12
        t.close()
