package org.dtrain;

import java.util.Map;
import java.util.function.Supplier;

/** The sample's configuration, shared by the tests. */
final class Fixtures {
  static final Map<String, Object> GPT = Map.of("preset", "gpt-tiny", "seed", 1);
  static final Map<String, Object> ADAMW = Map.of("lr", 0.003);
  static final Map<String, Object> DATA = Map.of("digits", 3, "seed", 7, "split", "train");
  static final Map<String, Object> LOADER = Map.of("batch", 16, "seed", 0);
  static final int BATCH = 16;

  private Fixtures() {}

  /** Bytes the CPU memory ledger holds now (every tag). */
  static long ledger() {
    return Dtrain.memoryStats("cpu", MemTag.ALL).currentBytes();
  }

  /**
   * Lets the Cleaner release what earlier tests left unreachable, so that a test comparing
   * the ledger before and after sees only its own allocations: collects until a few rounds
   * in a row release nothing (bounded: 5 s).
   */
  static void settleLeaks() throws InterruptedException {
    long deadline = System.nanoTime() + 5_000_000_000L;
    long seen = Handle.leaksReleased();
    for (int quiet = 0; quiet < 3 && System.nanoTime() < deadline; ) {
      System.gc();
      Thread.sleep(20);
      long now = Handle.leaksReleased();
      quiet = now == seen ? quiet + 1 : 0;
      seen = now;
    }
  }

  /** Threads whose name starts with {@code prefix} that are alive now. */
  static long threadsNamed(String prefix) {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.isAlive() && t.getName().startsWith(prefix)).count();
  }

  /**
   * The sample's training set-up: a local mesh of 2, a model, adamw, an engine, the addition
   * data, its loader and one batch of i32 inputs and targets. close() closes whatever the
   * test has not closed yet (close() is idempotent), the last made first.
   */
  static final class Training implements AutoCloseable {
    final Mesh mesh;
    final Model model;
    final Optimizer opt;
    final Engine engine;
    final Dataset data;
    final Loader loader;
    final Tensor inputs;
    final Tensor targets;

    /** With a GPT of the sample's configuration. */
    Training() {
      this(() -> Model.gpt(GPT));
    }

    /** With the model {@code model} makes (made after the mesh; owned from then on). */
    Training(Supplier<Model> model) {
      try {
        mesh = new Mesh("local", 2);
        this.model = model.get();
        opt = new Optimizer(this.model, "adamw", ADAMW);
        engine = new Engine(mesh, this.model, opt);
        data = new Dataset("addition", DATA);
        loader = new Loader(data, LOADER);
        inputs = new Tensor(DType.I32, BATCH, data.context());
        targets = new Tensor(DType.I32, BATCH, data.context());
      } catch (RuntimeException e) {
        close(); // what was made so far
        throw e;
      }
    }

    @Override
    public void close() {
      for (Handle h : new Handle[] {targets, inputs, loader, data, engine, opt, model, mesh}) {
        if (h != null) h.close();
      }
    }
  }
}
