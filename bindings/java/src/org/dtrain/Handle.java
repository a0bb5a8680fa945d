package org.dtrain;

import java.lang.ref.Cleaner;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongConsumer;

/**
 * An owned libdtrain handle. close() releases it and is idempotent; a closed handle used
 * again throws IllegalStateException. The library reference-counts, so handles close in
 * any order (a child keeps its parent alive). Close what you make (try-with-resources):
 * a handle that becomes unreachable unclosed is released by a {@link Cleaner} as a safety
 * net, later and on another thread, and the first such leak of each class is logged
 * (System.Logger "org.dtrain", WARNING) so that it can be found and fixed.
 *
 * <p>Because the Cleaner may run as soon as a handle is unreachable, each method that
 * passes a raw handle to the library keeps the objects it came from reachable until the
 * call returns ({@code Reference.reachabilityFence}); otherwise a leaked temporary such as
 * {@code model.param("w").toFloatArray()} could be released in the middle of its own call.
 */
public abstract sealed class Handle implements AutoCloseable
    permits Options, Tensor, Mesh, Model, Optimizer, Engine, Dataset, Loader, Server, CancelToken,
        Tokenizer, Detokenizer {
  /** The one thread that releases what became unreachable (also Tensor's buffer views). */
  static final Cleaner CLEANER = Cleaner.create(task -> {
    Thread t = new Thread(task, "dtrain-cleaner");
    t.setDaemon(true);
    return t;
  });
  private static final Set<String> WARNED = ConcurrentHashMap.newKeySet();
  private static final AtomicLong LEAKS_RELEASED = new AtomicLong();

  /**
   * The raw handle and how to release it: all the Cleaner holds, so it must not refer to
   * the Handle (which would then never become unreachable).
   */
  private static final class Raw implements Runnable {
    private final String type;
    private final LongConsumer destroy;
    private volatile long ptr; // written under this object's lock

    Raw(String type, long ptr, LongConsumer destroy) {
      this.type = type;
      this.ptr = ptr;
      this.destroy = destroy;
    }

    synchronized long take() {
      long p = ptr;
      ptr = 0;
      return p;
    }

    /** The Cleaner's action: runs only for a handle that was never closed. */
    @Override
    public void run() {
      long p = take();
      if (p == 0) return;
      LEAKS_RELEASED.incrementAndGet();
      if (WARNED.add(type)) {
        System.getLogger("org.dtrain").log(System.Logger.Level.WARNING, type
            + " was not closed; the garbage collector's Cleaner released it. Close every "
            + "handle (try-with-resources) to release native memory promptly. (Logged once per class.)");
      }
      destroy.accept(p);
    }
  }

  private final Raw raw;
  private final Cleaner.Cleanable cleanable;

  /** Owns {@code ptr}; {@code destroy} (a static method reference) releases it once. */
  Handle(long ptr, LongConsumer destroy) {
    if (ptr == 0) throw new IllegalStateException(getClass().getSimpleName() + ": null handle");
    this.raw = new Raw(getClass().getName(), ptr, destroy);
    this.cleanable = CLEANER.register(this, raw);
  }

  /** The raw handle; throws IllegalStateException once closed. */
  final long ptr() {
    long p = raw.ptr;
    if (p == 0) throw new IllegalStateException(getClass().getSimpleName() + " is closed");
    return p;
  }

  /** True once close() ran. */
  public final boolean isClosed() {
    return raw.ptr == 0;
  }

  @Override
  public final void close() {
    if (isClosed()) return;
    closing();
    long p = raw.take();
    if (p == 0) return; // another thread closed it meanwhile
    cleanable.clean(); // unregisters; the action finds nothing left to release
    raw.destroy.accept(p);
  }

  /** Runs at the start of the first close(), while the handle is still open. */
  void closing() {}

  /**
   * Runs {@code call} with the raw handle unless it is closed, holding the lock that
   * close() takes, so that the handle cannot be released during the call. For calls that
   * may race with close() from another thread (a cancel). False when closed.
   */
  final boolean ifOpen(LongConsumer call) {
    synchronized (raw) {
      long p = raw.ptr;
      if (p == 0) return false;
      call.accept(p);
      return true;
    }
  }

  /** Handles released by the Cleaner so far (never closed by their owner). */
  static long leaksReleased() {
    return LEAKS_RELEASED.get();
  }

  /** Lets the next leak of each class be logged again (for tests). */
  static void resetLeakWarnings() {
    WARNED.clear();
  }

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
