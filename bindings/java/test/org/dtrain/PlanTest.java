package org.dtrain;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** The layout planner: a costed plan, a search of a cluster's layouts, an unknown cluster. */
class PlanTest {
  static final Map<String, Object> TINY = Map.of("n_layer", 2, "d_model", 64, "n_head", 2, "vocab_size", 256,
      "context", 64);

  /** The number after the first "key": that follows {@code after} in a compact JSON report. */
  static double numberAfter(String json, String after, String key) {
    int from = json.indexOf(after);
    assertTrue(from >= 0, after + " in " + json);
    Matcher m = Pattern.compile("\"" + Pattern.quote(key) + "\":(-?[0-9.eE+-]+)").matcher(json);
    assertTrue(m.find(from + after.length()), key + " after " + after + " in " + json);
    return Double.parseDouble(m.group(1));
  }

  @Test
  void planWithAClusterCostsTheStepAndEachRank() {
    String json = Dtrain.planJson(TINY, Map.of("dp", 2, "zero", 1, "cluster", "cpu-default"));
    assertTrue(numberAfter(json, "\"cost\":", "step_s") > 0, json);
    assertTrue(numberAfter(json, "\"ranks\":[", "peak_bytes") > 0, json);
  }

  @Test
  void searchFindsTheFastestLayouts() {
    String json = Dtrain.planJson(TINY, Map.of("cluster", "h100-node", "search", true, "global_batch", 16));
    assertTrue(json.startsWith("{\"search\":"), json);
    assertTrue(json.contains("\"best\":[{"), json);
  }

  /** A small cluster's JSON with this fitted efficiency. */
  static String cluster(double efficiency) {
    return "{\"name\": \"m\", \"devices_per_host\": 2, \"device_memory\": 1e9, \"matmul_flops_f32\": 1e11,"
        + " \"matmul_flops_16\": 1e11, \"attention_flops_f32\": 1e10, \"attention_flops_16\": 1e10,"
        + " \"memory_bandwidth\": 1e10, \"compute_efficiency\": " + efficiency
        + ", \"intra\": {\"bandwidth\": 1e9, \"latency\": 1e-6}}";
  }

  @Test
  void medianOfClustersAndABadOneNamed() {
    String json = Dtrain.medianClusterJson("[" + cluster(0.9) + ", " + cluster(1.2) + ", " + cluster(1.0) + "]");
    assertTrue(json.contains("\"compute_efficiency\": 1.0"), json);
    DtrainException e = assertThrows(DtrainException.class,
        () -> Dtrain.medianClusterJson("[" + cluster(1.0) + ", {\"name\": 3}]"));
    assertEquals(Status.INVALID_ARGUMENT, e.status());
    assertTrue(e.getMessage().contains("clusters[1]"), e.getMessage());
  }

  @Test
  void unknownClusterIsNotFoundNamingTheBuiltInOnes() {
    DtrainException e = assertThrows(DtrainException.class,
        () -> Dtrain.planJson(TINY, Map.of("cluster", "no-such-cluster")));
    assertEquals(Status.NOT_FOUND, e.status());
    assertTrue(e.getMessage().contains("cpu-default"), e.getMessage());
  }
}
