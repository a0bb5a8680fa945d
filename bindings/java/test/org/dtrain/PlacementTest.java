package org.dtrain;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The mesh's last two axes from Java: expert parallelism (mixtral-tiny's experts over ep 2,
 * each rank routing its 8 rows) and context parallelism (gpt-tiny's 12-token examples in 4
 * chunks over cp 2, ring attention) give dp 2's losses on the same batches.
 */
class PlacementTest {
  private static List<Double> losses(String preset, Map<String, Object> axes) {
    List<Double> out = new ArrayList<>();
    try (Mesh mesh = new Mesh("local", 2, axes);
        Model model = Model.gpt(Map.of("preset", preset, "seed", 1));
        Optimizer opt = new Optimizer(model, "adamw", Fixtures.ADAMW);
        Engine engine = new Engine(mesh, model, opt);
        Dataset data = new Dataset("addition", Fixtures.DATA);
        Loader loader = new Loader(data, Fixtures.LOADER);
        Tensor in = new Tensor(DType.I32, Fixtures.BATCH, data.context());
        Tensor tg = new Tensor(DType.I32, Fixtures.BATCH, data.context())) {
      for (int s = 0; s < 3; s++) {
        loader.next(in, tg);
        out.add(engine.trainStep(in, tg));
      }
    }
    return out;
  }

  private static void expectSameLosses(String preset, String axis) {
    List<Double> dp = losses(preset, Map.of("dp", 2));
    List<Double> other = losses(preset, Map.of(axis, 2));
    for (int i = 0; i < dp.size(); i++)
      assertEquals(dp.get(i), other.get(i), 1e-5 * Math.abs(dp.get(i)), axis + " 2: " + other + ", dp 2: " + dp);
  }

  @Test
  void expertParallelMatchesDataParallel() {
    expectSameLosses("mixtral-tiny", "ep");
  }

  @Test
  void contextParallelMatchesDataParallel() {
    expectSameLosses("gpt-tiny", "cp");
  }
}
