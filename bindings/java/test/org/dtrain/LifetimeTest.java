package org.dtrain;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class LifetimeTest {
  @Test
  void parentsClosedBeforeTheEngine() {
    Fixtures.Training run = new Fixtures.Training();
    // The engine keeps mesh, model and optimizer alive; the loader keeps the dataset.
    run.mesh.close();
    run.model.close();
    run.opt.close();
    run.data.close();
    run.loader.next(run.inputs, run.targets);
    double loss = run.engine.trainStep(run.inputs, run.targets);
    assertTrue(Double.isFinite(loss));
    assertEquals(1, run.engine.step());
    run.loader.close();
    run.engine.close();
    // Tensors after everything.
    assertEquals(DType.I32, run.inputs.dtype());
    assertTrue(run.inputs.toIntArray().length > 0);
    run.inputs.close();
    run.targets.close();
  }

  @Test
  void viewsOutliveTheirOwners() {
    Tensor weight;
    String name;
    try (Model model = Model.gpt(Fixtures.GPT)) {
      List<String> names = model.paramNames();
      assertEquals(model.paramTensorCount(), names.size());
      name = names.get(0);
      weight = model.param(name);
    }
    try (weight) {
      assertTrue(weight.numel() > 0);
      float[] w = weight.toFloatArray();
      assertEquals(weight.numel(), w.length);
    }
    Tensor piece;
    try (Mesh mesh = new Mesh("local", 2); Tensor x = Tensor.onMesh(mesh, DType.F32, 4)) {
      piece = x.piece(1);
    }
    try (piece) {
      piece.copyFrom(new float[] {1, 2, 3, 4});
      assertEquals(4, piece.toFloatArray()[3]);
    }
  }

  @Test
  void closeIsIdempotentAndUseAfterCloseThrows() {
    Tensor t = new Tensor(DType.F32, 4);
    t.close();
    t.close();
    assertTrue(t.isClosed());
    IllegalStateException e = assertThrows(IllegalStateException.class, () -> t.copyFrom(new float[4]));
    assertTrue(e.getMessage().contains("closed"), e.getMessage());
    assertThrows(IllegalStateException.class, t::toFloatArray);
    assertThrows(IllegalStateException.class, t::device);
    assertDoesNotThrow(t::toString);

    Options o = new Options();
    o.close();
    assertThrows(IllegalStateException.class, () -> o.set("a", 1));
    Model m = Model.gpt(Fixtures.GPT);
    m.close();
    assertThrows(IllegalStateException.class, m::paramCount);
    assertThrows(IllegalStateException.class, () -> new Optimizer(m, "adamw"));
    Mesh mesh = new Mesh("local", 1);
    mesh.close();
    mesh.close();
    assertThrows(IllegalStateException.class, mesh::worldSize);
    try (Tensor live = new Tensor(DType.F32, 1)) {
      assertThrows(IllegalStateException.class, () -> Tensor.onMesh(mesh, DType.F32, 1));
      assertThrows(IllegalStateException.class, () -> live.copyFrom(t));
    }
  }

  @Test
  void nullHandlesNameTheArgument() {
    try (Model model = Model.gpt(Fixtures.GPT); Optimizer opt = new Optimizer(model, "sgd")) {
      NullPointerException e = assertThrows(NullPointerException.class, () -> new Engine(null, null, opt));
      assertTrue(e.getMessage().contains("model"), e.getMessage());
      e = assertThrows(NullPointerException.class, () -> new Engine(null, model, null));
      assertTrue(e.getMessage().contains("optimizer"), e.getMessage());
      e = assertThrows(NullPointerException.class, () -> new Optimizer(null, "adamw"));
      assertTrue(e.getMessage().contains("model"), e.getMessage());
      try (Engine engine = new Engine(null, model, opt); Tensor t = new Tensor(DType.I32, 1, 4)) {
        e = assertThrows(NullPointerException.class, () -> engine.trainStep(null, t));
        assertTrue(e.getMessage().contains("inputs"), e.getMessage());
        e = assertThrows(NullPointerException.class, () -> engine.trainStep(t, null));
        assertTrue(e.getMessage().contains("targets"), e.getMessage());
        e = assertThrows(NullPointerException.class, () -> engine.save(null));
        assertTrue(e.getMessage().contains("pathStem"), e.getMessage());
        e = assertThrows(NullPointerException.class, () -> engine.generate((int[][]) null, (Options) null));
        assertTrue(e.getMessage().contains("prompts"), e.getMessage());
      }
    }
    NullPointerException e = assertThrows(NullPointerException.class, () -> new Loader(null, Fixtures.LOADER));
    assertTrue(e.getMessage().contains("dataset"), e.getMessage());
    e = assertThrows(NullPointerException.class, () -> Tensor.onMesh(null, DType.F32, 2));
    assertTrue(e.getMessage().contains("mesh"), e.getMessage());
    try (Mesh mesh = new Mesh("local", 1)) {
      e = assertThrows(NullPointerException.class, () -> mesh.allReduce("world", null, ReduceOp.SUM));
      assertTrue(e.getMessage().contains("tensor"), e.getMessage());
    }
  }

  @Test
  void manyHandlesAndTheGarbageCollector() throws InterruptedException {
    // Close some, keep some, drop the rest: the Cleaner releases only what was dropped (it
    // logs a warning for that), never what is closed (no double release) or still held.
    List<Tensor> kept = new ArrayList<>();
    for (int i = 0; i < 3000; i++) {
      Tensor t = new Tensor(DType.F32, 64);
      if (i % 3 == 0) {
        t.close();
      } else if (i % 3 == 1) {
        kept.add(t);
      }
      try (Options o = new Options().set("k", i)) {
        assertEquals(i, o.getInt("k"));
      }
    }
    for (int round = 0; round < 3; round++) {
      System.gc();
    }
    for (Tensor t : kept) {
      t.copyFrom(new float[64]);
      t.close();
      t.close();
    }
    try (Model m = Model.gpt(Fixtures.GPT)) {
      for (int i = 0; i < 200; i++) {
        try (Optimizer opt = new Optimizer(m, "sgd"); Tensor p = m.param(m.paramName(0))) {
          assertTrue(p.numel() > 0 && !opt.isClosed());
        }
      }
    }
    Fixtures.settleLeaks(); // the dropped ones are released now, not during a later test
  }
}
