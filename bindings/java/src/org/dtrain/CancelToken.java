package org.dtrain;

import org.dtrain.internal.DtrainNative;

/**
 * A flag that stops the engine calls it is passed to (dt_cancel): {@link #cancel()} from
 * any thread (a watchdog, a UI, a deadline) makes a running {@code trainStep}, {@code eval}
 * or {@code generate} throw {@link CancelledException} at its next check point (between
 * layers, before the update, before each decode step), and one started while it is raised
 * throw at once. The engine stays usable. {@link #reset()} lowers it for reuse.
 *
 * <pre>{@code
 * try (CancelToken cancel = new CancelToken()) {
 *   watchdog.schedule(cancel::cancel, 5, TimeUnit.SECONDS);
 *   double loss = engine.trainStep(x, y, cancel);  // or CancelledException, step unchanged
 * }
 * }</pre>
 */
public final class CancelToken extends Handle {
  public CancelToken() {
    super(DtrainNative.dt_cancel_create(), DtrainNative::dt_cancel_destroy);
  }

  /** Raises the flag. Any thread; never blocks on the call it stops; a no-op once closed. */
  public void cancel() {
    ifOpen(DtrainNative::dt_cancel_request);
  }

  /** True while the flag is raised. */
  public boolean isCancelled() {
    int[] raised = new int[1];
    ifOpen(p -> raised[0] = DtrainNative.dt_cancel_is_requested(p));
    return raised[0] != 0;
  }

  /** Lowers the flag, for the next call. */
  public void reset() {
    if (!ifOpen(DtrainNative::dt_cancel_reset)) ptr(); // closed: IllegalStateException
  }

  @Override
  public String toString() {
    return isClosed() ? "CancelToken(closed)" : "CancelToken(" + (isCancelled() ? "cancelled)" : "not cancelled)");
  }
}
