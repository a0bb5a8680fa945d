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
