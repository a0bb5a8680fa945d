package org.dtrain;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.dtrain.internal.DtrainNative;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ErrorsTest {
  @Test
  void unknownEngineOptionNamesTheKey() {
    try (Model model = Model.gpt(Fixtures.GPT); Optimizer opt = new Optimizer(model, "adamw", Fixtures.ADAMW)) {
      DtrainException e = assertThrows(DtrainException.class,
          () -> new Engine(null, model, opt, Map.of("micro_batchez", 2)));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertEquals("DT_ERR_INVALID_ARGUMENT", e.statusName());
      assertTrue(e.getMessage().contains("micro_batchez"), e.getMessage());
      assertTrue(e.toString().contains("DT_ERR_INVALID_ARGUMENT"), e.toString());
      assertTrue(e instanceof RuntimeException);
    }
  }

  @Test
  void unknownMeshOptionNamesTheKey() {
    DtrainException e = assertThrows(DtrainException.class, () -> new Mesh("local", 2, Map.of("dq", 2)));
    assertEquals(Status.INVALID_ARGUMENT, e.status());
    assertTrue(e.getMessage().contains("dq"), e.getMessage());
    e = assertThrows(DtrainException.class, () -> new Mesh("carrier-pigeon", 2));
    assertTrue(e.getMessage().contains("carrier-pigeon"), e.getMessage());
    e = assertThrows(DtrainException.class, () -> new Mesh("local", 0));
    assertEquals(Status.INVALID_ARGUMENT, e.status());
  }

  @Test
  void unknownDatasetKind() {
    DtrainException e = assertThrows(DtrainException.class, () -> new Dataset("subtraction", Map.of()));
    assertEquals(Status.INVALID_ARGUMENT, e.status());
    assertTrue(e.getMessage().contains("subtraction"), e.getMessage());
  }

  @Test
  void missingFilesAreIoErrors(@TempDir Path dir) {
    String stem = dir.resolve("nothing-here/gpt").toString();
    try (Model model = Model.gpt(Fixtures.GPT);
        Optimizer opt = new Optimizer(model, "adamw");
        Engine engine = new Engine(null, model, opt)) {
      DtrainException e = assertThrows(DtrainException.class, () -> engine.load(stem));
      assertEquals(Status.IO, e.status());
      assertEquals("DT_ERR_IO", e.statusName());
      assertTrue(e.getMessage().contains("nothing-here"), e.getMessage());
    }
    DtrainException e = assertThrows(DtrainException.class, () -> Model.fromCheckpoint(stem));
    assertEquals(Status.IO, e.status());
    e = assertThrows(DtrainException.class, () -> Model.checkpointInfoJson(stem));
    assertEquals(Status.IO, e.status());
    e = assertThrows(DtrainException.class,
        () -> new Dataset("text", Map.of("path", dir.resolve("absent.txt").toString(), "context", 8)));
    assertTrue(e.getMessage().contains("absent.txt"), e.getMessage());
  }

  @Test
  void messagesKeepNonAsciiText(@TempDir Path dir) {
    String path = dir.resolve("naïve-日本-𝄞/missing.txt").toString();
    DtrainException e = assertThrows(DtrainException.class,
        () -> new Dataset("text", Map.of("path", path, "context", 8)));
    assertTrue(e.getMessage().contains("naïve-日本-𝄞"), e.getMessage());
  }

  @Test
  void badOptionValues() {
    try (Model model = Model.gpt(Fixtures.GPT)) {
      DtrainException e = assertThrows(DtrainException.class,
          () -> new Optimizer(model, "adamw", Map.of("lr", "fast")));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage().contains("lr"), e.getMessage());
      e = assertThrows(DtrainException.class, () -> new Optimizer(model, "adagrad"));
      assertTrue(e.getMessage().contains("adagrad"), e.getMessage());
    }
    DtrainException e = assertThrows(DtrainException.class, () -> Model.gpt(Map.of("preset", "gpt-huge")));
    assertTrue(e.getMessage().contains("gpt-huge"), e.getMessage());
  }

  @Test
  void theRawLayerReportsNullHandles() {
    // org.dtrain.internal passes handles as longs: 0 is NULL, which the library rejects.
    DtrainException e = assertThrows(DtrainException.class, () -> DtrainNative.dt_tensor_numel(0));
    assertEquals(Status.INVALID_ARGUMENT, e.status());
    e = assertThrows(DtrainException.class, () -> DtrainNative.dt_engine_train_step(0, 0, 0));
    assertEquals(Status.INVALID_ARGUMENT, e.status());
    e = assertThrows(DtrainException.class, () -> DtrainNative.dt_engine_last_stats_json(0));
    assertEquals(Status.INVALID_ARGUMENT, e.status());
    e = assertThrows(DtrainException.class, () -> DtrainNative.dt_server_stats_json(0));
    assertEquals(Status.INVALID_ARGUMENT, e.status());
    DtrainNative.dt_server_destroy(0);
    DtrainNative.dt_tensor_destroy(0);
    NullPointerException npe = assertThrows(NullPointerException.class,
        () -> DtrainNative.dtj_tensor_copy_from_f32(0, null));
    assertTrue(npe.getMessage().contains("array"), npe.getMessage());
  }

  @Test
  void theMessageBelongsToTheFailingThread() throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(4);
    try {
      List<Future<String>> results = new ArrayList<>();
      for (int t = 0; t < 8; t++) {
        String key = "bogus_key_" + t;
        Callable<String> job = () -> {
          for (int k = 0; k < 50; k++) {
            try {
              new Mesh("local", 1, Map.of(key, 1)).close();
              return "no error";
            } catch (DtrainException e) {
              if (!e.getMessage().contains(key)) return "thread " + key + " saw: " + e.getMessage();
            }
          }
          return key;
        };
        results.add(pool.submit(job));
      }
      for (int t = 0; t < 8; t++) assertEquals("bogus_key_" + t, results.get(t).get());
    } finally {
      pool.shutdownNow();
    }
  }
}
