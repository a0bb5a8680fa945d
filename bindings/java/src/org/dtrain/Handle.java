package org.dtrain;

import java.util.Objects;

/**
 * An owned libdtrain handle. close() releases it and is idempotent; a closed handle used
 * again throws IllegalStateException. The library reference-counts, so handles close in
 * any order (a child keeps its parent alive). There is no finalizer: close what you make
 * (try-with-resources); an unclosed handle is released at exit only.
 */
public abstract sealed class Handle implements AutoCloseable
    permits Options, Tensor, Mesh, Model, Optimizer, Engine, Dataset, Loader, Server {
  private volatile long ptr;

  Handle(long ptr) {
    if (ptr == 0) throw new IllegalStateException(getClass().getSimpleName() + ": null handle");
    this.ptr = ptr;
  }

  /** The raw handle; throws IllegalStateException once closed. */
  final long ptr() {
    long p = ptr;
    if (p == 0) throw new IllegalStateException(getClass().getSimpleName() + " is closed");
    return p;
  }

  /** True once close() ran. */
  public final boolean isClosed() {
    return ptr == 0;
  }

  @Override
  public final void close() {
    long p;
    synchronized (this) {
      p = ptr;
      ptr = 0;
    }
    if (p != 0) destroy(p);
  }

  /** Releases the raw handle (called once). */
  abstract void destroy(long p);

  /** The raw handle of a required argument: NullPointerException naming it when null. */
  static long require(Handle h, String name) {
    Objects.requireNonNull(h, () -> name + " must not be null");
    return h.ptr();
  }

  /** The raw handle of an optional argument: 0 when null. */
  static long optional(Handle h) {
    return h == null ? 0 : h.ptr();
  }

  static <T> T requireArg(T value, String name) {
    return Objects.requireNonNull(value, () -> name + " must not be null");
  }
}
