package org.dtrain;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TrainingTest {
  private static final int STEPS = 6;
  private static final int RESUME_AT = 4;

  private static int[] tokens(String s) {
    byte[] b = s.getBytes(StandardCharsets.US_ASCII);
    int[] t = new int[b.length];
    for (int i = 0; i < b.length; i++) t[i] = b[i];
    return t;
  }

  /** Trains the sample's configuration; stops after `steps` (saving at `stem` when not null). */
  private static List<Double> train(int steps, String stem) {
    List<Double> losses = new ArrayList<>();
    try (Fixtures.Training run = new Fixtures.Training()) {
      assertEquals("", run.engine.lastStatsJson(), "no stats before a step");
      for (int s = 0; s < steps; s++) {
        run.loader.next(run.inputs, run.targets);
        losses.add(run.engine.trainStep(run.inputs, run.targets));
      }
      assertEquals(steps, run.engine.step());
      String stats = run.engine.lastStatsJson();
      assertTrue(stats.contains("\"loss\"") && stats.contains("\"step\""), stats);
      if (stem != null) run.engine.save(stem);
    }
    return losses;
  }

  @Test
  void lossIsFiniteAndFalls() {
    List<Double> losses = train(STEPS, null);
    for (double l : losses) assertTrue(Double.isFinite(l) && l > 0, losses.toString());
    assertTrue(losses.get(STEPS - 1) < losses.get(0) - 0.5, "loss should fall: " + losses);
  }

  @Test
  void resumeFromACheckpointMatchesAnUninterruptedRun(@TempDir Path dir) throws Exception {
    List<Double> straight = train(RESUME_AT + 1, null);
    String stem = dir.resolve("ckpt/gpt").toString();
    List<Double> first = train(RESUME_AT, stem);
    assertEquals(straight.subList(0, RESUME_AT), first, "the same run reproduces bitwise");
    assertTrue(Files.exists(dir.resolve("ckpt/gpt.index.json")));

    String info = Model.checkpointInfoJson(stem);
    assertTrue(info.contains("\"step\":" + RESUME_AT) || info.contains("\"step\": " + RESUME_AT), info);

    // A fresh engine of the checkpoint's model; the loader seeks to where the run stopped.
    try (Fixtures.Training run = new Fixtures.Training(() -> Model.fromCheckpoint(stem))) {
      run.engine.load(stem);
      long step = run.engine.step();
      assertEquals(RESUME_AT, step);
      long perEpoch = run.loader.batchesPerEpoch();
      assertTrue(perEpoch > RESUME_AT);
      run.loader.seek(step / perEpoch, step % perEpoch);
      assertEquals(new Loader.Position(0, RESUME_AT), run.loader.position());
      run.loader.next(run.inputs, run.targets);
      double resumed = run.engine.trainStep(run.inputs, run.targets);
      assertEquals(straight.get(RESUME_AT), resumed, 0.0, "the resumed step's loss");
    }
  }

  @Test
  void evalGenerateAndStream(@TempDir Path dir) {
    try (Model model = Model.gpt(Fixtures.GPT);
        Optimizer opt = new Optimizer(model, "adamw", Fixtures.ADAMW);
        Engine engine = new Engine(null, model, opt);
        Dataset data = new Dataset("addition", Fixtures.DATA);
        Loader loader = new Loader(data, Map.of("batch", 4, "seed", 3));
        Tensor inputs = new Tensor(DType.I32, 4, data.context());
        Tensor targets = new Tensor(DType.I32, 4, data.context())) {
      assertTrue(data.size() > 0);
      Dataset.Example ex = data.example(0);
      assertEquals(data.context(), ex.inputs().length);
      assertEquals(data.context(), ex.targets().length);
      assertThrows(DtrainException.class, () -> data.example(data.size()));

      loader.next(inputs, targets);
      double before = engine.eval(inputs, targets);
      assertEquals(before, engine.eval(inputs, targets), 0.0, "eval changes nothing");
      assertEquals(0, engine.step());
      double trained = engine.trainStep(inputs, targets);
      assertEquals(before, trained, 1e-9, "train_step reports the loss before its update");

      int[][] prompts = {tokens("123+456="), tokens("9+9=")};
      Options greedy = new Options().set("max_new_tokens", 5);
      int[][] out = engine.generate(prompts, greedy);
      assertEquals(2, out.length);
      assertEquals(5, out[0].length);
      assertEquals(5, out[1].length);
      for (int[] row : out) for (int t : row) assertTrue(t >= 0 && t < 256);
      assertArrayEquals(out[0], engine.generate(prompts[0], Map.of("max_new_tokens", 5)), "greedy is deterministic");
      assertTrue(engine.lastGenerateStatsJson().contains("new_tokens"), engine.lastGenerateStatsJson());

      List<int[]> streamed = new ArrayList<>();
      int[][] again = engine.generate(prompts, greedy, (p, t) -> streamed.add(new int[] {p, t}));
      assertArrayEquals(out[0], again[0]);
      assertArrayEquals(out[1], again[1]);
      assertEquals(10, streamed.size());
      int[] firsts = {0, 0};
      for (int[] pt : streamed) assertEquals(out[pt[0]][firsts[pt[0]]++], pt[1]);

      // A listener that throws stops the generation: it is called no more, its exception
      // propagates, and the engine generates again as before.
      int[] calls = {0};
      IllegalStateException boom = assertThrows(IllegalStateException.class,
          () -> engine.generate(prompts, greedy, (p, t) -> {
            calls[0]++;
            throw new IllegalStateException("listener failed");
          }));
      assertEquals("listener failed", boom.getMessage());
      assertEquals(1, calls[0]);
      assertArrayEquals(out[1], engine.generate(prompts, greedy)[1]);
      greedy.close();

      assertEquals(3, engine.generate(prompts[1], Map.of("max_new_tokens", 3)).length);
      DtrainException e = assertThrows(DtrainException.class,
          () -> engine.generate(prompts, Map.of("max_new_tokens", 1000)));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      e = assertThrows(DtrainException.class, () -> engine.generate(prompts, Map.of("temprature", 1.0)));
      assertTrue(e.getMessage().contains("temprature"), e.getMessage());
      assertThrows(IllegalArgumentException.class, () -> engine.generate(new int[0][], (Options) null));

      // A loader rejects tensors of the wrong dtype before the native call.
      try (Tensor f = new Tensor(DType.F32, 4, data.context())) {
        assertThrows(IllegalArgumentException.class, () -> loader.next(f, targets));
      }
    }
  }

  @Test
  void hostDrivenLoop() {
    try (Model mlp = Model.sequential(Map.of("layers", "linear:2:16,gelu,linear:16:1", "seed", 3));
        Optimizer sgd = new Optimizer(mlp, "sgd", Map.of("lr", 0.05));
        Tensor x = new Tensor(DType.F32, 8, 2);
        Tensor y = new Tensor(DType.F32, 8, 1)) {
      float[] xs = new float[16];
      float[] ys = new float[8];
      for (int i = 0; i < 8; i++) {
        xs[2 * i] = i / 8f;
        xs[2 * i + 1] = 1 - i / 8f;
        ys[i] = 0.5f * xs[2 * i] - 0.25f;
      }
      x.copyFrom(xs);
      y.copyFrom(ys);
      assertEquals(List.of("0.weight", "0.bias", "2.weight", "2.bias"), mlp.paramNames());
      double first = 0;
      double last = 0;
      for (int step = 0; step < 40; step++) {
        mlp.zeroGrad();
        try (Tensor pred = mlp.forward(x)) {
          assertArrayEquals(new long[] {8, 1}, pred.shape());
          Dtrain.LossWithGrad lg = Dtrain.lossWithGrad("mse", pred, y);
          try (Tensor grad = lg.grad()) {
            assertEquals(lg.loss(), Dtrain.loss("mse", pred, y), 0.0);
            if (step == 0) {
              first = lg.loss();
              try (Tensor dx = mlp.backwardWithInputGrad(grad)) {
                assertArrayEquals(new long[] {8, 2}, dx.shape());
              }
            } else {
              mlp.backward(grad);
            }
            last = lg.loss();
          }
        }
        sgd.step();
      }
      assertTrue(last < first, "mse should fall: " + first + " -> " + last);
      sgd.setLr(0.01);
      DtrainException e = assertThrows(DtrainException.class, () -> sgd.setLr(-1));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
    }
  }
}
