package org.dtrain;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import org.junit.jupiter.api.Test;

/** Tensor.asByteBuffer (a tensor's memory out) and Tensor.wrap (a buffer's memory in), no copies. */
class ZeroCopyTest {
  private static final float[] SIX = {1, 2, 3, 4, 5, 6};

  @Test
  void aViewSharesTheTensorsMemoryBothWays() {
    try (Tensor t = new Tensor(DType.F32, 2, 3)) {
      t.copyFrom(SIX);
      ByteBuffer b = t.asByteBuffer();
      assertTrue(b.isDirect());
      assertEquals(24, b.capacity());
      assertEquals(ByteOrder.nativeOrder(), b.order());
      FloatBuffer f = b.asFloatBuffer();
      assertEquals(3f, f.get(2));
      f.put(0, 42f); // a write through the view is the tensor's
      assertEquals(42f, t.toFloatArray()[0]);
      t.copyFrom(new float[] {6, 5, 4, 3, 2, 1}); // and the other way
      assertEquals(6f, f.get(0));
    }
  }

  @Test
  void aViewKeepsItsMemoryAfterTheTensorIsClosed() throws Exception {
    Fixtures.settleLeaks();
    long start = Fixtures.ledger();
    FloatBuffer kept;
    try (Tensor t = new Tensor(DType.F32, 2, 3)) {
      t.copyFrom(SIX);
      kept = t.asByteBuffer().asFloatBuffer(); // a derived buffer holds the view too
    }
    float[] read = new float[6];
    kept.get(0, read);
    assertArrayEquals(SIX, read);
    assertTrue(Fixtures.ledger() > start, "the view holds the memory");
    kept = null;
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (Fixtures.ledger() != start && System.nanoTime() < deadline) {
      System.gc();
      Thread.sleep(20);
    }
    assertEquals(start, Fixtures.ledger(), "released once the buffer is unreachable");
  }

  @Test
  void aTensorOverABufferRoundTrips() throws Exception {
    ByteBuffer buf = ByteBuffer.allocateDirect(4 * 6).order(ByteOrder.nativeOrder());
    buf.asFloatBuffer().put(SIX);
    long start = Fixtures.ledger();
    try (Tensor t = Tensor.wrap(buf, DType.F32, 2, 3); Tensor y = new Tensor(DType.F32, 2, 3)) {
      assertEquals(start + y.nbytes(), Fixtures.ledger(), "the buffer's bytes are the JVM's, not the ledger's");
      assertArrayEquals(SIX, t.toFloatArray());
      t.copyFrom(new float[] {0, 0, 0, 1, 1, 1});
      assertEquals(1f, buf.getFloat(5 * 4), "the tensor writes into the buffer");
      buf.putFloat(0, 7f);
      Tensor.softmax(t, y); // the library reads the buffer's memory
      float[] p = y.toFloatArray();
      assertTrue(p[0] > 0.99f, "softmax of {7, 0, 0}: " + p[0]);
      // Out again: a view of the wrapped tensor is the buffer's own memory.
      t.asByteBuffer().putFloat(4, 9f);
      assertEquals(9f, buf.getFloat(4));
    }

    // The tensor keeps its buffer reachable: ours can be dropped.
    Tensor t = wrapAFreshBuffer();
    System.gc();
    assertArrayEquals(SIX, t.toFloatArray());
    t.close();
  }

  private static Tensor wrapAFreshBuffer() {
    ByteBuffer b = ByteBuffer.allocateDirect(24).order(ByteOrder.nativeOrder());
    b.asFloatBuffer().put(SIX);
    return Tensor.wrap(b, DType.F32, 6);
  }

  @Test
  void whatCannotBeSharedIsRefused() {
    assertThrows(IllegalArgumentException.class, () -> Tensor.wrap(ByteBuffer.allocate(24), DType.F32, 6));
    ByteBuffer direct = ByteBuffer.allocateDirect(24);
    assertThrows(IllegalArgumentException.class, () -> Tensor.wrap(direct.asReadOnlyBuffer(), DType.F32, 6));
    assertThrows(IllegalArgumentException.class, () -> Tensor.wrap(direct, DType.F32, 7));
    assertThrows(IllegalArgumentException.class, () -> Tensor.wrap(direct, DType.F32, -1));
    assertThrows(IllegalArgumentException.class, () -> Tensor.wrap(direct, DType.F32, Long.MAX_VALUE, 2));
    // The library's own checks: memory aligned to the element size (the loan then ends at once).
    DtrainException e = assertThrows(DtrainException.class, () -> Tensor.wrap(direct.position(1), DType.F32, 4));
    assertEquals(Status.INVALID_ARGUMENT, e.status());
    assertTrue(e.getMessage().contains("aligned"), e.getMessage());
    try (Mesh mesh = new Mesh("local", 2); Tensor x = Tensor.onMesh(mesh, DType.F32, 3)) {
      assertThrows(IllegalStateException.class, x::asByteBuffer); // two pieces: view one
      try (Tensor piece = x.piece(1)) {
        piece.copyFrom(new float[] {1, 2, 3});
        assertEquals(2f, piece.asByteBuffer().getFloat(4));
      }
    }
    try (Tensor scalar = new Tensor(DType.I64)) {
      scalar.copyFrom(new long[] {-5});
      assertEquals(-5, scalar.asByteBuffer().getLong(0));
    }
  }
}
