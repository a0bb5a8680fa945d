package org.dtrain;

import static java.lang.ref.Reference.reachabilityFence;

import java.util.Arrays;
import java.util.Iterator;
import java.util.NoSuchElementException;
import org.dtrain.internal.DtrainNative;

/**
 * A request submitted to a {@link Server}: an iterator over its new token ids as the server
 * makes them, which ends when the request ends ({@link #state()} then says how). hasNext()
 * waits for the next token (dt_server_poll, on the calling thread). Read it from one
 * thread; cancel() may come from any. close() cancels a request still running, so that
 * leaving a try-with-resources block early frees its place on the server.
 */
public final class Request implements Iterator<Integer>, AutoCloseable {
  /** Where a request stands (DT_REQUEST_*, by ordinal). */
  public enum State { WAITING, RUNNING, PREEMPTED, FINISHED, ABORTED, REJECTED }

  private static final int POLL_MS = 100; // one poll's wait; hasNext polls until news
  private final Server server; // kept reachable while the request is read
  private final long id;
  private final int[] chunk = new int[256];
  private int[] pending = new int[0];
  private int at;
  private int state;
  private volatile boolean done; // read by cancel() without the lock a reader holds

  Request(Server server, long id) {
    this.server = server;
    this.id = id;
  }

  /** The request's id on its server. */
  public long id() {
    return id;
  }

  private synchronized void poll(int timeoutMs) {
    long[] r = DtrainNative.dt_server_poll(server.ptr(), id, chunk, timeoutMs);
    reachabilityFence(server);
    int n = (int) r[0];
    if (n > 0) {
      int left = pending.length - at;
      int[] next = Arrays.copyOfRange(pending, at, at + left + n);
      System.arraycopy(chunk, 0, next, left, n);
      pending = next;
      at = 0;
    }
    state = (int) r[1];
    done = r[2] != 0;
  }

  /** True when another token comes; waits for it, false once the request ended. */
  @Override
  public synchronized boolean hasNext() {
    while (at == pending.length) {
      if (done) return false;
      poll(POLL_MS);
    }
    return true;
  }

  @Override
  public synchronized Integer next() {
    if (!hasNext()) throw new NoSuchElementException("request " + id + " ended");
    return pending[at++];
  }

  /** Waits for the request to end and returns the tokens not yet read. */
  public synchronized int[] readAll() {
    int[] out = new int[0];
    int n = 0;
    while (hasNext()) {
      if (n == out.length) out = Arrays.copyOf(out, Math.max(16, 2 * n));
      out[n++] = pending[at++];
    }
    return Arrays.copyOf(out, n);
  }

  /** Where the request stands now. */
  public synchronized State state() {
    if (!done) poll(0);
    State[] all = State.values();
    if (state < 0 || state >= all.length) throw new IllegalStateException("unknown request state " + state);
    return all[state];
  }

  /** Aborts the request (its KV blocks are freed; iteration then ends, state ABORTED).
   *  Returns false when it had already ended. */
  public boolean cancel() {
    if (done) return false;
    try {
      DtrainNative.dt_server_cancel(server.ptr(), id);
      return true;
    } catch (DtrainException e) {
      if (e.status() == Status.NOT_FOUND) return false; // it ended in the meantime
      throw e;
    } finally {
      reachabilityFence(server);
    }
  }

  /** Cancels the request unless it has ended (or its server was closed, which ended it). */
  @Override
  public void close() {
    if (!done && !server.isClosed()) cancel();
  }

  @Override
  public String toString() {
    return "Request(" + id + (done ? ", done)" : ")");
  }
}
