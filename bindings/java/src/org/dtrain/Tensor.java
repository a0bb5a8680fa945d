package org.dtrain;

import static java.lang.ref.Reference.reachabilityFence;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.ReadOnlyBufferException;
import java.util.Arrays;
import org.dtrain.internal.DtrainNative;

/**
 * A dense, row-major n-dimensional array on one device (dt_tensor), or a mesh tensor with
 * one piece per local rank ({@link #onMesh}). Host copies take the Java array of the
 * dtype, or a direct ByteBuffer of native-order bytes; they cross JNI without an extra copy
 * and a wrong length or dtype throws IllegalArgumentException before the native call:
 * <ul>
 *   <li>float[]: F32; int[]: I32; long[]: I64; short[]: the raw bits of BF16 or F16;
 *   <li>double[]: values of any floating dtype (converted through f32 by the library);
 *   <li>byte[] and ByteBuffer: the raw bytes of any dtype (length = nbytes()).
 * </ul>
 * Without any copy: {@link #asByteBuffer()} views a CPU tensor's memory as a direct
 * ByteBuffer, and {@link #wrap} makes a tensor over a direct ByteBuffer's memory.
 */
public final class Tensor extends Handle {
  private final DType dtype;
  private final long[] shape;
  private final long numel;

  /** A zero-filled CPU tensor; no shape is a scalar. */
  public Tensor(DType dtype, long... shape) {
    this(dtype, shape, "cpu", null);
  }

  /** A zero-filled tensor on {@code device} ("cpu" or "cuda:N"). */
  public Tensor(DType dtype, long[] shape, String device) {
    this(dtype, shape, device, null);
  }

  /** A zero-filled tensor; options: null or {"tag": a MemTag name}. */
  public Tensor(DType dtype, long[] shape, String device, Options options) {
    super(DtrainNative.dt_tensor_create(requireArg(dtype, "dtype").code(),
        requireArg(shape, "shape"), requireArg(device, "device"), optional(options)),
        DtrainNative::dt_tensor_destroy);
    reachabilityFence(options);
    this.dtype = dtype;
    this.shape = shape.clone();
    this.numel = product(this.shape);
  }

  private Tensor(long handle, DType dtype, long[] shape) {
    super(handle, DtrainNative::dt_tensor_destroy);
    this.dtype = dtype;
    this.shape = shape;
    this.numel = product(shape);
  }

  /**
   * Adopts a handle the library made, queried first (dtype and shape never change): a
   * failed query releases it here, before a Tensor (and its Cleaner) owns it.
   */
  static Tensor adopt(long handle) {
    DType dtype;
    long[] shape;
    try {
      dtype = DType.of(DtrainNative.dt_tensor_dtype(handle));
      shape = DtrainNative.dt_tensor_shape(handle);
    } catch (RuntimeException e) {
      DtrainNative.dt_tensor_destroy(handle);
      throw e;
    }
    return new Tensor(handle, dtype, shape);
  }

  /**
   * A CPU tensor over {@code buffer}'s memory from its position, without a copy: writes
   * through either are seen by the other. The buffer must be direct, writable, hold at
   * least the tensor's nbytes() remaining bytes, in native byte order, aligned to the
   * element size (ByteBuffer.allocateDirect is). The tensor keeps the buffer reachable
   * until the library is done with the memory (the tensor and every view of it closed).
   * Its bytes are not counted in the memory ledger (they are the JVM's).
   */
  public static Tensor wrap(ByteBuffer buffer, DType dtype, long... shape) {
    requireArg(buffer, "buffer");
    requireArg(dtype, "dtype");
    requireArg(shape, "shape");
    if (!buffer.isDirect()) throw new IllegalArgumentException("buffer must be a direct ByteBuffer");
    if (buffer.isReadOnly()) throw new IllegalArgumentException("buffer must be writable");
    long bytes = dtype.size();
    try {
      for (long d : shape) {
        if (d < 0) throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " has a negative size");
        bytes = Math.multiplyExact(bytes, d);
      }
    } catch (ArithmeticException e) {
      throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " is too large", e);
    }
    if (bytes > buffer.remaining()) {
      throw new IllegalArgumentException("buffer has " + buffer.remaining() + " bytes remaining; a "
          + dtype + " tensor " + Arrays.toString(shape) + " needs " + bytes);
    }
    return adopt(DtrainNative.dtj_tensor_wrap_buffer(dtype.code(), shape, buffer, buffer.position()));
  }

  /** A zero-filled mesh tensor: one CPU piece of {@code shape} per local rank of mesh. */
  public static Tensor onMesh(Mesh mesh, DType dtype, long... shape) {
    return onMesh(mesh, dtype, shape, null);
  }

  public static Tensor onMesh(Mesh mesh, DType dtype, long[] shape, Options options) {
    long m = require(mesh, "mesh");
    requireArg(dtype, "dtype");
    requireArg(shape, "shape");
    try {
      return adopt(DtrainNative.dt_tensor_create_on_mesh(m, dtype.code(), shape, optional(options)));
    } finally {
      reachabilityFence(mesh);
      reachabilityFence(options);
    }
  }

  private static long product(long[] shape) {
    long n = 1;
    for (long d : shape) n *= d;
    return n;
  }

  public DType dtype() {
    return dtype;
  }

  /** The sizes (a copy); empty for a scalar. */
  public long[] shape() {
    return shape.clone();
  }

  public int ndim() {
    return shape.length;
  }

  /** Elements (of one piece, for a mesh tensor). */
  public long numel() {
    return numel;
  }

  public long nbytes() {
    return numel * dtype.size();
  }

  /** "cpu" or "cuda:N". */
  public String device() {
    try {
      return DtrainNative.dt_tensor_device(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /** One per local rank for a mesh tensor; 1 for any other tensor. */
  public int pieceCount() {
    try {
      return DtrainNative.dt_tensor_piece_count(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /** A plain tensor viewing piece {@code localIndex} (shares storage, keeps it alive). */
  public Tensor piece(int localIndex) {
    try {
      return adopt(DtrainNative.dt_tensor_piece(ptr(), localIndex));
    } finally {
      reachabilityFence(this);
    }
  }

  /**
   * The tensor's memory as a direct ByteBuffer in native byte order, without a copy:
   * writes through either are seen by the other. CPU tensors of one piece only (a mesh
   * tensor: use piece(i)). The buffer keeps the memory alive on its own, through a view
   * handle released once the buffer (and every buffer derived from it) is unreachable, so
   * it stays valid after this tensor is closed.
   */
  public ByteBuffer asByteBuffer() {
    if (pieceCount() != 1) {
      throw new IllegalStateException("a mesh tensor of " + pieceCount() + " pieces: view one piece(i)");
    }
    long view = DtrainNative.dt_tensor_piece(ptr(), 0);
    reachabilityFence(this);
    ByteBuffer buffer;
    try {
      buffer = DtrainNative.dtj_tensor_buffer(view);
    } catch (RuntimeException e) {
      DtrainNative.dt_tensor_destroy(view);
      throw e;
    }
    CLEANER.register(buffer, () -> DtrainNative.dt_tensor_destroy(view));
    return buffer.order(ByteOrder.nativeOrder());
  }

  // ---- host copies ------------------------------------------------------------------

  /**
   * The rule of the class comment, for every Java array type: IllegalArgumentException
   * unless {@code array} (argument {@code name}, not null) fits this tensor's dtype and size.
   */
  private void checkArray(Object array, String name) {
    requireArg(array, name);
    if (array instanceof float[] a) {
      expect(dtype == DType.F32, "F32", a.length, "float[]");
    } else if (array instanceof int[] a) {
      expect(dtype == DType.I32, "I32", a.length, "int[]");
    } else if (array instanceof long[] a) {
      expect(dtype == DType.I64, "I64", a.length, "long[]");
    } else if (array instanceof short[] a) {
      expect(dtype == DType.BF16 || dtype == DType.F16, "BF16 or F16", a.length, "short[]");
    } else if (array instanceof double[] a) {
      expect(dtype.isFloating(), "floating", a.length, "double[]");
    } else { // byte[], the one other array overload
      expectBytes(((byte[]) array).length, "byte[]");
    }
  }

  private void expect(boolean dtypeFits, String want, long length, String what) {
    if (!dtypeFits) {
      throw new IllegalArgumentException(what + " needs a " + want + " tensor; this one is " + dtype);
    }
    if (length != numel) {
      throw new IllegalArgumentException(what + " holds " + length + " elements; the tensor "
          + Arrays.toString(shape) + " holds " + numel);
    }
  }

  private void expectBytes(long length, String what) {
    if (length != nbytes()) {
      throw new IllegalArgumentException(what + " holds " + length + " bytes; the tensor holds " + nbytes());
    }
  }

  /** A direct buffer (argument {@code name}), writable when {@code written}, of nbytes() remaining. */
  private void checkBuffer(ByteBuffer buffer, String name, boolean written) {
    requireArg(buffer, name);
    if (!buffer.isDirect()) throw new IllegalArgumentException(name + " must be a direct ByteBuffer");
    if (written && buffer.isReadOnly()) throw new ReadOnlyBufferException();
    expectBytes(buffer.remaining(), "the buffer's remaining()");
  }

  private int arrayLength() {
    if (numel > Integer.MAX_VALUE - 8) {
      throw new UnsupportedOperationException("a tensor of " + numel + " elements does not fit a Java array");
    }
    return (int) numel;
  }

  public void copyFrom(float[] src) {
    checkArray(src, "src");
    DtrainNative.dtj_tensor_copy_from_f32(ptr(), src);
    reachabilityFence(this);
  }

  public void copyFrom(int[] src) {
    checkArray(src, "src");
    DtrainNative.dtj_tensor_copy_from_i32(ptr(), src);
    reachabilityFence(this);
  }

  public void copyFrom(long[] src) {
    checkArray(src, "src");
    DtrainNative.dtj_tensor_copy_from_i64(ptr(), src);
    reachabilityFence(this);
  }

  /** The raw 16-bit patterns of a BF16 or F16 tensor. */
  public void copyFrom(short[] src) {
    checkArray(src, "src");
    DtrainNative.dtj_tensor_copy_from_i16(ptr(), src);
    reachabilityFence(this);
  }

  /** Values into any floating tensor (rounded to its dtype). */
  public void copyFrom(double[] src) {
    checkArray(src, "src");
    DtrainNative.dtj_tensor_copy_from_f64(ptr(), src);
    reachabilityFence(this);
  }

  /** Raw bytes, nbytes() of them, in native byte order. */
  public void copyFrom(byte[] src) {
    checkArray(src, "src");
    DtrainNative.dtj_tensor_copy_from_i8(ptr(), src);
    reachabilityFence(this);
  }

  /**
   * Raw bytes from a direct buffer: its remaining() bytes (= nbytes()) from its position, in
   * native byte order; the position is left unchanged. No copy is made on the Java side.
   */
  public void copyFrom(ByteBuffer src) {
    checkBuffer(src, "src", false);
    DtrainNative.dtj_tensor_copy_from_buffer(ptr(), src, src.position(), src.remaining());
    reachabilityFence(this);
  }

  /** Copies {@code src}'s values into this tensor, converting the dtype (equal numel). */
  public void copyFrom(Tensor src) {
    DtrainNative.dt_tensor_copy(require(src, "src"), ptr());
    reachabilityFence(this);
    reachabilityFence(src);
  }

  public void copyTo(float[] dst) {
    checkArray(dst, "dst");
    DtrainNative.dtj_tensor_copy_to_f32(ptr(), dst);
    reachabilityFence(this);
  }

  public void copyTo(int[] dst) {
    checkArray(dst, "dst");
    DtrainNative.dtj_tensor_copy_to_i32(ptr(), dst);
    reachabilityFence(this);
  }

  public void copyTo(long[] dst) {
    checkArray(dst, "dst");
    DtrainNative.dtj_tensor_copy_to_i64(ptr(), dst);
    reachabilityFence(this);
  }

  public void copyTo(short[] dst) {
    checkArray(dst, "dst");
    DtrainNative.dtj_tensor_copy_to_i16(ptr(), dst);
    reachabilityFence(this);
  }

  public void copyTo(double[] dst) {
    checkArray(dst, "dst");
    DtrainNative.dtj_tensor_copy_to_f64(ptr(), dst);
    reachabilityFence(this);
  }

  public void copyTo(byte[] dst) {
    checkArray(dst, "dst");
    DtrainNative.dtj_tensor_copy_to_i8(ptr(), dst);
    reachabilityFence(this);
  }

  /** Raw bytes into a direct, writable buffer's remaining() (= nbytes()); position unchanged. */
  public void copyTo(ByteBuffer dst) {
    checkBuffer(dst, "dst", true);
    DtrainNative.dtj_tensor_copy_to_buffer(ptr(), dst, dst.position(), dst.remaining());
    reachabilityFence(this);
  }

  public float[] toFloatArray() {
    float[] a = new float[dtype == DType.F32 ? arrayLength() : 0];
    copyTo(a);
    return a;
  }

  public int[] toIntArray() {
    int[] a = new int[dtype == DType.I32 ? arrayLength() : 0];
    copyTo(a);
    return a;
  }

  public long[] toLongArray() {
    long[] a = new long[dtype == DType.I64 ? arrayLength() : 0];
    copyTo(a);
    return a;
  }

  /** The values of a floating tensor as doubles. */
  public double[] toDoubleArray() {
    double[] a = new double[dtype.isFloating() ? arrayLength() : 0];
    copyTo(a);
    return a;
  }

  // ---- fills and operations ---------------------------------------------------------

  /** Normal(mean, std) values keyed by (seed, name, global index offset + i). */
  public void fillNormal(long seed, String name, long offset, float mean, float std) {
    DtrainNative.dt_tensor_fill_normal(ptr(), seed, requireArg(name, "name"), offset, mean, std);
    reachabilityFence(this);
  }

  /** Uniform values in [low, high) keyed by (seed, name, global index offset + i). */
  public void fillUniform(long seed, String name, long offset, float low, float high) {
    DtrainNative.dt_tensor_fill_uniform(ptr(), seed, requireArg(name, "name"), offset, low, high);
    reachabilityFence(this);
  }

  /** c = a @ b. */
  public static void matmul(Tensor a, Tensor b, Tensor c) {
    matmul(a, b, false, false, c);
  }

  /** c = op(a) @ op(b), op transposing the last two dims when asked. */
  public static void matmul(Tensor a, Tensor b, boolean transA, boolean transB, Tensor c) {
    DtrainNative.dt_matmul(require(a, "a"), require(b, "b"), transA ? 1 : 0, transB ? 1 : 0,
        require(c, "c"));
    reachabilityFence(a);
    reachabilityFence(b);
    reachabilityFence(c);
  }

  /** y = softmax(x) over the last dim. */
  public static void softmax(Tensor x, Tensor y) {
    DtrainNative.dt_softmax(require(x, "x"), require(y, "y"));
    reachabilityFence(x);
    reachabilityFence(y);
  }


  @Override
  public String toString() {
    return "Tensor(" + dtype + ", " + Arrays.toString(shape) + (isClosed() ? ", closed)" : ", " + device() + ")");
  }
}
