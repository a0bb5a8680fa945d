package org.dtrain;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.ReadOnlyBufferException;
import org.junit.jupiter.api.Test;

class TensorTest {
  @Test
  void createAndQuery() {
    try (Tensor t = new Tensor(DType.F32, 2, 3, 4)) {
      assertEquals(DType.F32, t.dtype());
      assertArrayEquals(new long[] {2, 3, 4}, t.shape());
      assertEquals(3, t.ndim());
      assertEquals(24, t.numel());
      assertEquals(96, t.nbytes());
      assertEquals("cpu", t.device());
      assertEquals(1, t.pieceCount());
      assertArrayEquals(new float[24], t.toFloatArray(), "zero-filled");
      long[] shape = t.shape();
      shape[0] = 99;
      assertArrayEquals(new long[] {2, 3, 4}, t.shape(), "shape() is a copy");
    }
    try (Tensor scalar = new Tensor(DType.I64)) {
      assertEquals(0, scalar.ndim());
      assertEquals(1, scalar.numel());
      scalar.copyFrom(new long[] {-5});
      assertArrayEquals(new long[] {-5}, scalar.toLongArray());
    }
  }

  @Test
  void badShapeIsAnError() {
    DtrainException e = assertThrows(DtrainException.class, () -> new Tensor(DType.F32, 4, -1));
    assertEquals(Status.INVALID_ARGUMENT, e.status());
    e = assertThrows(DtrainException.class, () -> new Tensor(DType.F32, new long[] {2}, "nowhere"));
    assertTrue(e.getMessage().contains("nowhere"), e.getMessage());
    assertThrows(NullPointerException.class, () -> new Tensor(null, 2));
    assertThrows(NullPointerException.class, () -> new Tensor(DType.F32, (long[]) null));
  }

  @Test
  void primitiveRoundTrips() {
    try (Tensor f = new Tensor(DType.F32, 2, 2);
        Tensor i = new Tensor(DType.I32, 3);
        Tensor l = new Tensor(DType.I64, 2)) {
      f.copyFrom(new float[] {1, -2.5f, 3, 1e-3f});
      assertArrayEquals(new float[] {1, -2.5f, 3, 1e-3f}, f.toFloatArray());
      float[] back = new float[4];
      f.copyTo(back);
      assertArrayEquals(new float[] {1, -2.5f, 3, 1e-3f}, back);
      assertArrayEquals(new double[] {1, -2.5, 3, (double) 1e-3f}, f.toDoubleArray());
      f.copyFrom(new double[] {0.25, 0.5, 0.75, 1});
      assertArrayEquals(new float[] {0.25f, 0.5f, 0.75f, 1}, f.toFloatArray());
      i.copyFrom(new int[] {7, Integer.MIN_VALUE, Integer.MAX_VALUE});
      assertArrayEquals(new int[] {7, Integer.MIN_VALUE, Integer.MAX_VALUE}, i.toIntArray());
      l.copyFrom(new long[] {Long.MAX_VALUE, -1});
      assertArrayEquals(new long[] {Long.MAX_VALUE, -1}, l.toLongArray());
      byte[] raw = new byte[16];
      l.copyTo(raw);
      ByteBuffer le = ByteBuffer.wrap(raw).order(ByteOrder.nativeOrder());
      assertEquals(Long.MAX_VALUE, le.getLong(0));
      i.copyFrom(new byte[12]);
      assertArrayEquals(new int[3], i.toIntArray());
    }
  }

  @Test
  void halfPrecision() {
    try (Tensor h = new Tensor(DType.BF16, 3); Tensor f16 = new Tensor(DType.F16, 2)) {
      h.copyFrom(new double[] {1.0, -2.0, 0.5});
      assertArrayEquals(new double[] {1.0, -2.0, 0.5}, h.toDoubleArray());
      short[] bits = new short[3];
      h.copyTo(bits);
      assertEquals((short) 0x3F80, bits[0], "bf16 1.0");
      assertEquals((short) 0xC000, bits[1], "bf16 -2.0");
      f16.copyFrom(new short[] {(short) 0x3C00, (short) 0xC400});
      assertArrayEquals(new double[] {1.0, -4.0}, f16.toDoubleArray());
      double[] rounded = new double[3];
      h.copyFrom(new double[] {1.00390625, 3.0, 1e-40});
      h.copyTo(rounded);
      assertEquals(1.0, rounded[0], "bf16 rounds to nearest even");
      assertEquals(3.0, rounded[1]);
    }
  }

  @Test
  void directByteBuffers() {
    try (Tensor t = new Tensor(DType.F32, 4)) {
      ByteBuffer in = ByteBuffer.allocateDirect(4 * 4 + 8).order(ByteOrder.nativeOrder());
      in.position(8);
      for (int k = 0; k < 4; k++) in.putFloat(8 + 4 * k, k + 0.5f);
      in.limit(24);
      t.copyFrom(in);
      assertEquals(8, in.position(), "position unchanged");
      assertArrayEquals(new float[] {0.5f, 1.5f, 2.5f, 3.5f}, t.toFloatArray());

      ByteBuffer out = ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder());
      t.copyTo(out);
      assertEquals(2.5f, out.getFloat(8));

      assertThrows(IllegalArgumentException.class, () -> t.copyFrom(ByteBuffer.allocate(16)),
          "a heap buffer is not direct");
      assertThrows(IllegalArgumentException.class, () -> t.copyFrom(ByteBuffer.allocateDirect(15)));
      assertThrows(ReadOnlyBufferException.class, () -> t.copyTo(ByteBuffer.allocateDirect(16).asReadOnlyBuffer()));
      t.copyFrom(ByteBuffer.allocateDirect(16).asReadOnlyBuffer());
      assertArrayEquals(new float[4], t.toFloatArray());
    }
  }

  @Test
  void wrongLengthOrDtypeIsIllegalArgument() {
    try (Tensor f = new Tensor(DType.F32, 2, 3); Tensor i = new Tensor(DType.I32, 6)) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> f.copyFrom(new float[5]));
      assertTrue(e.getMessage().contains("5") && e.getMessage().contains("6"), e.getMessage());
      assertThrows(IllegalArgumentException.class, () -> f.copyFrom(new float[7]));
      assertThrows(IllegalArgumentException.class, () -> f.copyTo(new float[5]));
      e = assertThrows(IllegalArgumentException.class, () -> f.copyFrom(new int[6]));
      assertTrue(e.getMessage().contains("I32"), e.getMessage());
      assertThrows(IllegalArgumentException.class, () -> i.copyFrom(new float[6]));
      assertThrows(IllegalArgumentException.class, () -> i.copyFrom(new double[6]));
      assertThrows(IllegalArgumentException.class, () -> i.copyFrom(new long[6]));
      assertThrows(IllegalArgumentException.class, () -> f.copyFrom(new short[6]));
      assertThrows(IllegalArgumentException.class, () -> f.copyFrom(new byte[23]));
      assertThrows(IllegalArgumentException.class, () -> i.toFloatArray());
      assertThrows(NullPointerException.class, () -> f.copyFrom((float[]) null));
      assertThrows(NullPointerException.class, () -> f.copyFrom((Tensor) null));
    }
  }

  @Test
  void copyConvertsBetweenTensors() {
    try (Tensor f = new Tensor(DType.F32, 3); Tensor i = new Tensor(DType.I32, 3); Tensor odd = new Tensor(DType.F32, 4)) {
      f.copyFrom(new float[] {1.9f, -2.9f, 3});
      i.copyFrom(f);
      assertArrayEquals(new int[] {1, -2, 3}, i.toIntArray(), "floats truncate toward zero");
      DtrainException e = assertThrows(DtrainException.class, () -> odd.copyFrom(f));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
    }
  }

  @Test
  void matmulSoftmaxAndFills() {
    try (Tensor a = new Tensor(DType.F32, 2, 3); Tensor b = new Tensor(DType.F32, 3, 2);
        Tensor c = new Tensor(DType.F32, 2, 2); Tensor p = new Tensor(DType.F32, 2, 2)) {
      a.copyFrom(new float[] {1, 2, 3, 4, 5, 6});
      b.copyFrom(new float[] {1, 0, 0, 1, 1, 1});
      Tensor.matmul(a, b, c);
      assertArrayEquals(new float[] {4, 5, 10, 11}, c.toFloatArray());
      Tensor.softmax(c, p);
      float[] s = p.toFloatArray();
      assertEquals(1.0, s[0] + s[1], 1e-6);
      assertTrue(s[1] > s[0]);
      DtrainException e = assertThrows(DtrainException.class, () -> Tensor.matmul(a, a, c));
      assertEquals(Status.INVALID_ARGUMENT, e.status());

      try (Tensor whole = new Tensor(DType.F32, 8); Tensor half = new Tensor(DType.F32, 4)) {
        whole.fillNormal(42, "w", 0, 0f, 1f);
        half.fillNormal(42, "w", 4, 0f, 1f);
        float[] w = whole.toFloatArray();
        float[] h = half.toFloatArray();
        for (int k = 0; k < 4; k++) assertEquals(w[4 + k], h[k], "a shard equals that slice of the whole");
        whole.fillUniform(1, "u", 0, 2f, 3f);
        for (float v : whole.toFloatArray()) assertTrue(v >= 2f && v < 3f);
      }
    }
  }

  @Test
  void meshTensorsAndAllReduce() {
    try (Mesh mesh = new Mesh("local", 2); Tensor x = Tensor.onMesh(mesh, DType.F32, 3)) {
      assertEquals(2, mesh.worldSize());
      assertEquals(2, mesh.localRankCount());
      assertEquals(2, mesh.axisSize("dp"));
      assertEquals(2, mesh.axisSize("world"));
      assertEquals(1, mesh.coord(1, "dp"));
      assertEquals("local", mesh.backend());
      assertEquals(2, x.pieceCount());
      for (int r = 0; r < 2; r++) {
        try (Tensor piece = x.piece(r)) {
          piece.copyFrom(new float[] {mesh.localRank(r) + 1, 10, 100});
        }
      }
      DtrainException whole = assertThrows(DtrainException.class, () -> x.copyFrom(new float[3]));
      assertEquals(Status.INVALID_ARGUMENT, whole.status());
      mesh.allReduce("world", x, ReduceOp.SUM);
      for (int r = 0; r < 2; r++) {
        try (Tensor piece = x.piece(r)) {
          assertArrayEquals(new float[] {3, 20, 200}, piece.toFloatArray());
        }
      }
      Mesh.CommStats stats = mesh.commStats(0, "world", "all_reduce");
      assertEquals(1, stats.calls());
      assertTrue(stats.bytes() > 0);
      assertTrue(mesh.commWireBytes(0, "world", "all_reduce") > 0);
      String json = mesh.commReportJson();
      assertTrue(json.contains("all_reduce"), json);
      mesh.barrier("world");
      String history = mesh.commHistoryJson();
      assertTrue(history.contains("\"failure\":null") && history.contains("\"kind\":\"barrier\""), history);
      try (Tensor plain = new Tensor(DType.F32, 3)) {
        DtrainException e = assertThrows(DtrainException.class, () -> mesh.allReduce("world", plain, ReduceOp.SUM));
        assertEquals(Status.INVALID_ARGUMENT, e.status());
      }
    }
  }
}
