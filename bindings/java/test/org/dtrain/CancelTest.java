package org.dtrain;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** CancelToken: a running call ends with CancelledException soon after, and the engine goes on. */
class CancelTest {
  /** A GPT whose train step runs long enough (about a second here) for a cancel to land inside. */
  static final Map<String, Object> BIG = Map.of("preset", "gpt-tiny", "n_layer", 4, "d_model", 256,
      "n_head", 4, "context", 128, "seed", 3);

  /** The engine and a batch of BIG's context, made once per test. */
  static final class Big implements AutoCloseable {
    final Model model = Model.gpt(BIG);
    final Optimizer opt = new Optimizer(model, "adamw", Map.of("lr", 1e-3));
    final Engine engine = new Engine(null, model, opt, Map.of("micro_batches", 4));
    final Tensor inputs = new Tensor(DType.I32, 16, 128);
    final Tensor targets = new Tensor(DType.I32, 16, 128);

    Big() {
      int[] in = new int[16 * 128];
      int[] tg = new int[in.length];
      for (int i = 0; i < in.length; i++) {
        in[i] = i * 7 % 250;
        tg[i] = (i * 7 + 1) % 250;
      }
      inputs.copyFrom(in);
      targets.copyFrom(tg);
    }

    @Override
    public void close() {
      for (Handle h : new Handle[] {targets, inputs, engine, opt, model}) h.close();
    }
  }

  /** Raises {@code cancel} after {@code delayMs} on another thread; when() is when (nanoTime). */
  static final class LateCancel extends Thread {
    private final CancelToken cancel;
    private final long delayMs;
    private final AtomicLong raisedAt = new AtomicLong();

    LateCancel(CancelToken cancel, long delayMs) {
      this.cancel = cancel;
      this.delayMs = delayMs;
      start();
    }

    @Override
    public void run() {
      try {
        Thread.sleep(delayMs);
      } catch (InterruptedException e) {
        return;
      }
      raisedAt.set(System.nanoTime());
      cancel.cancel();
    }

    long when() throws InterruptedException {
      join();
      return raisedAt.get();
    }
  }

  @Test
  void trainStepCancelledFromAnotherThreadReturnsPromptlyAndChangesNothing() throws Exception {
    try (Big b = new Big(); CancelToken cancel = new CancelToken()) {
      b.engine.trainStep(b.inputs, b.targets, cancel); // the first step is the slow one
      long t0 = System.nanoTime();
      b.engine.trainStep(b.inputs, b.targets, cancel);
      long stepMs = (System.nanoTime() - t0) / 1_000_000;
      assertEquals(2, b.engine.step());
      float[] before;
      try (Tensor p = b.model.param(b.model.paramName(0))) {
        before = p.toFloatArray();
      }

      // About 200 ms in (a third of a step where steps are quicker).
      LateCancel late = new LateCancel(cancel, Math.min(200, stepMs / 3));
      CancelledException e = assertThrows(CancelledException.class,
          () -> b.engine.trainStep(b.inputs, b.targets, cancel));
      long returned = System.nanoTime();
      long afterCancelMs = (returned - late.when()) / 1_000_000;
      System.out.println("train step " + stepMs + " ms; cancelled, it returned " + afterCancelMs
          + " ms after the cancel");
      assertTrue(afterCancelMs < 100, "returned " + afterCancelMs + " ms after the cancel");
      assertEquals(Status.CANCELLED, e.status());
      assertTrue(e.getMessage().contains("cancelled"), e.getMessage());
      assertEquals(2, b.engine.step(), "a cancelled step changes nothing");
      try (Tensor p = b.model.param(b.model.paramName(0))) {
        assertArrayEquals(before, p.toFloatArray());
      }

      // Still raised: the next call fails at once; lowered, it trains.
      assertTrue(cancel.isCancelled());
      assertThrows(CancelledException.class, () -> b.engine.trainStep(b.inputs, b.targets, cancel));
      cancel.reset();
      assertFalse(cancel.isCancelled());
      assertTrue(Double.isFinite(b.engine.trainStep(b.inputs, b.targets, cancel)));
      assertEquals(3, b.engine.step());
      // A token is attached only for its call: a raised one does not stop the others.
      cancel.cancel();
      assertTrue(Double.isFinite(b.engine.trainStep(b.inputs, b.targets)));
      assertEquals(4, b.engine.step());
    }
  }

  @Test
  void evalAndGenerateAreCancelledAndTheEngineGoesOn() throws Exception {
    try (Big b = new Big()) {
      double loss = b.engine.eval(b.inputs, b.targets);
      try (CancelToken cancel = new CancelToken()) {
        cancel.cancel();
        assertThrows(CancelledException.class, () -> b.engine.eval(b.inputs, b.targets, cancel));
      }
      assertEquals(loss, b.engine.eval(b.inputs, b.targets), 0.0);

      // A generation stopped from its own listener, through the token, after 3 tokens.
      int[] prompt = {1, 2, 3};
      int[] whole = b.engine.generate(prompt, Map.of("max_new_tokens", 12));
      try (CancelToken cancel = new CancelToken(); Options opts = new Options().set("max_new_tokens", 12)) {
        int[] seen = {0};
        assertThrows(CancelledException.class, () -> b.engine.generate(new int[][] {prompt}, opts,
            (i, t) -> {
              if (++seen[0] == 3) cancel.cancel();
            }, cancel));
        assertEquals(3, seen[0], "stopped before the next decode step");
      }
      // And from another thread, while it runs.
      try (CancelToken cancel = new CancelToken()) {
        CountDownLatch first = new CountDownLatch(1);
        Thread canceller = new Thread(() -> {
          try {
            first.await();
          } catch (InterruptedException e) {
            return;
          }
          cancel.cancel();
        });
        canceller.start();
        try (Options opts = new Options().set("max_new_tokens", 100)) {
          assertThrows(CancelledException.class, () -> b.engine.generate(new int[][] {prompt}, opts,
              (i, t) -> first.countDown(), cancel));
        }
        canceller.join();
      }
      assertArrayEquals(whole, b.engine.generate(prompt, Map.of("max_new_tokens", 12)));
    }
  }

  @Test
  void tokensAreSafeToCancelWhileClosing() throws Exception {
    // cancel() from other threads may race with close(): never a use after free.
    for (int round = 0; round < 200; round++) {
      CancelToken cancel = new CancelToken();
      Thread[] threads = new Thread[3];
      for (int t = 0; t < threads.length; t++) {
        threads[t] = new Thread(() -> {
          for (int k = 0; k < 50; k++) cancel.cancel();
        });
        threads[t].start();
      }
      cancel.close();
      for (Thread t : threads) t.join();
      assertTrue(cancel.isClosed());
      assertFalse(cancel.isCancelled());
      assertThrows(IllegalStateException.class, cancel::reset);
    }
    try (Model m = Model.gpt(Fixtures.GPT); Optimizer o = new Optimizer(m, "sgd");
        Engine e = new Engine(null, m, o); Tensor x = new Tensor(DType.I32, 1, 4)) {
      NullPointerException npe = assertThrows(NullPointerException.class, () -> e.trainStep(x, x, null));
      assertTrue(npe.getMessage().contains("cancel"), npe.getMessage());
    }
  }
}
