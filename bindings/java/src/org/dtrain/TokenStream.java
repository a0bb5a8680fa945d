package org.dtrain;

import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The new tokens of one prompt as {@link Engine#stream} makes them: an iterator whose
 * hasNext() waits for the next token. The generation runs on a thread of the stream's own
 * (named "dtrain-stream-N"), which hands each token over through a queue and runs at most
 * {@value #AHEAD} tokens ahead of the reader (then it waits, its KV cache kept). close()
 * cancels the generation (it stops before its next decode step), waits for that thread to
 * end and releases what the stream holds: use try-with-resources, and leaving the block
 * early stops everything. Read it from one thread; close() may come from any.
 */
public final class TokenStream implements Iterator<Integer>, AutoCloseable {
  private static final AtomicInteger NEXT_ID = new AtomicInteger();
  private static final Object END = new Object(); // the worker's last item
  /** How many tokens the generation may be ahead of the reader. */
  public static final int AHEAD = 32;

  private final Engine engine;
  private final BlockingQueue<Object> queue = new LinkedBlockingQueue<>();
  private final Semaphore room = new Semaphore(AHEAD); // a permit per token the worker may queue
  private final CancelToken cancel = new CancelToken();
  private final Thread worker;
  private volatile boolean closed;
  private RuntimeException failure; // the generation's, written before END is queued
  private Object next; // read ahead by hasNext(): a token or END

  TokenStream(Engine engine, int[] prompt, Options options) {
    this.engine = engine;
    worker = new Thread(() -> generate(prompt, options), "dtrain-stream-" + NEXT_ID.incrementAndGet());
    worker.setDaemon(true);
    try {
      engine.streamStarted(this);
    } catch (RuntimeException e) {
      cancel.close();
      throw e;
    }
    worker.start();
  }

  /** The worker: generates, queueing each token, then END. Owns options. */
  private void generate(int[] prompt, Options options) {
    try (options) {
      engine.generate(new int[][] {prompt}, options, this::hand, cancel);
    } catch (CancelledException e) {
      // close() asked for it: nobody reads on
    } catch (RuntimeException e) {
      failure = e;
    } catch (Error e) {
      failure = new IllegalStateException("the generation failed", e);
    } finally {
      cancel.close(); // detached by generate; close() may still call cancel(), a no-op now
      engine.streamEnded(this);
      queue.add(END);
    }
  }

  /** The worker's listener: queues a token once there is room (close() interrupts the wait). */
  private void hand(int promptIndex, int token) {
    try {
      room.acquire();
    } catch (InterruptedException e) {
      // Thrown through the listener, it stops the generation at once.
      throw new CancelledException("the stream was closed");
    }
    queue.add(token);
  }

  /** True when {@code t} is the thread generating for this stream. */
  boolean runsOn(Thread t) {
    return t == worker;
  }

  /**
   * True when another token comes: waits for it. Throws the generation's failure, once; an
   * interrupt while waiting closes the stream and throws CancelledException.
   */
  @Override
  public boolean hasNext() {
    if (closed) return false;
    if (next == null) {
      try {
        next = queue.take();
        if (next != END) room.release();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        close();
        throw new CancelledException("interrupted while waiting for a token");
      }
    }
    if (next != END) return true;
    RuntimeException f = failure;
    failure = null;
    if (f != null) throw f;
    return false;
  }

  @Override
  public Integer next() {
    if (!hasNext()) throw new NoSuchElementException("the stream has ended");
    Object token = next;
    next = null;
    return (Integer) token;
  }

  /**
   * Cancels the generation if it still runs and waits for its thread to end. Idempotent;
   * hasNext() is false afterwards (an interrupt while waiting is kept for the caller).
   */
  @Override
  public void close() {
    if (closed) return;
    closed = true;
    cancel.cancel(); // the generation stops before its next decode step
    boolean interrupted = false;
    if (Thread.currentThread() != worker) {
      worker.interrupt(); // or at once, if it waits for room in the queue
      while (true) {
        try {
          worker.join();
          break;
        } catch (InterruptedException e) {
          interrupted = true; // the worker ends within one decode step: wait for it
        }
      }
    }
    if (interrupted) Thread.currentThread().interrupt();
  }

  @Override
  public String toString() {
    return "TokenStream(" + worker.getName() + (closed ? ", closed)" : ")");
  }
}
