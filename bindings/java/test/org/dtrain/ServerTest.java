package org.dtrain;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Serving: a Server's tokens are generate's, cancel, errors, the statistics. */
class ServerTest {
  private static final Map<String, Object> GPT = Map.of("preset", "gpt-tiny", "seed", 3);
  private static final Map<String, Object> SERVE = Map.of("block_size", 4, "kv_blocks", 32);
  private static final int[][] PROMPTS = {{5, 17, 42, 9}, {3, 1, 4, 1, 5, 9, 2, 6}};

  @Test
  void twoRequestsGiveWhatGenerateGivesEachAlone() throws Exception {
    try (Model model = Model.gpt(GPT);
        Optimizer sgd = new Optimizer(model, "sgd", Map.of("lr", 0.0));
        Engine engine = new Engine(null, model, sgd);
        Server server = new Server(null, model, SERVE)) {
      Map<String, Object> greedy = Map.of("max_new_tokens", 5, "temperature", 0.0);
      int[][] want = {engine.generate(PROMPTS[0], greedy), engine.generate(PROMPTS[1], greedy)};
      assertEquals(64, server.context());
      assertTrue(server.vocabSize() > 0);

      Map<String, Object> sampling = Map.of("max_tokens", 5, "temperature", 0.0);
      Request[] requests = {server.submit(PROMPTS[0], sampling), server.submit(PROMPTS[1], sampling)};
      int[][] got = new int[2][];
      // Each request read on its own thread (the server takes calls from any thread).
      Thread other = new Thread(() -> got[1] = requests[1].readAll());
      other.start();
      List<Integer> first = new ArrayList<>();
      requests[0].forEachRemaining(first::add);
      other.join();
      got[0] = first.stream().mapToInt(Integer::intValue).toArray();
      assertArrayEquals(want[0], got[0]);
      assertArrayEquals(want[1], got[1]);
      for (Request r : requests) {
        assertEquals(Request.State.FINISHED, r.state());
        assertFalse(r.hasNext());
        assertFalse(r.cancel(), "an ended request has nothing to cancel");
      }

      Map<?, ?> stats = (Map<?, ?>) new Json(server.statsJson()).value();
      assertEquals(2.0, ((Map<?, ?>) stats.get("requests")).get("finished"), server.statsJson());
      assertTrue(server.metricsText().contains("dtrain_requests"));
      server.drain(10000);
      DtrainException e = assertThrows(DtrainException.class, () -> server.submit(PROMPTS[0], (Options) null));
      assertEquals(Status.UNAVAILABLE, e.status());
    }
  }

  @Test
  void cancelEndsALongRequest() {
    try (Model model = Model.gpt(GPT); Server server = new Server(null, model, SERVE)) {
      // The request takes milliseconds; if one ends before cancel reaches it (a busy
      // machine), cancel says so and the test tries again.
      for (int attempt = 0; attempt < 5; attempt++) {
        Request r = server.submit(new int[] {1, 2, 3}, Map.of("max_tokens", 60));
        if (!r.cancel()) continue;
        int[] tokens = r.readAll();
        assertEquals(Request.State.ABORTED, r.state());
        assertTrue(tokens.length < 60, tokens.length + " tokens");
        return;
      }
      fail("every request ended before cancel reached it");
    }
  }

  @Test
  void leavingARequestEarlyCancelsIt() {
    try (Model model = Model.gpt(GPT); Server server = new Server(null, model, SERVE)) {
      Request left;
      try (Request r = server.submit(new int[] {1, 2, 3}, Map.of("max_tokens", 60))) {
        left = r;
        assertTrue(r.hasNext());
        r.next();
      }
      left.readAll(); // to its end, which the cancel brings
      assertFalse(left.hasNext());
      // Cancelled, unless it had already run to its end (a request takes milliseconds).
      Request.State s = left.state();
      assertTrue(s == Request.State.ABORTED || s == Request.State.FINISHED, s.toString());
      left.close(); // idempotent
    }
  }

  @Test
  void badOptionsNameTheKey() {
    try (Model model = Model.gpt(GPT)) {
      DtrainException e = assertThrows(DtrainException.class,
          () -> new Server(null, model, Map.of("kv_blokcs", 32)));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage().contains("kv_blokcs"), e.getMessage());
      Server server = new Server(null, model, SERVE);
      e = assertThrows(DtrainException.class, () -> server.submit(new int[] {1, 2}, Map.of("max_tokenz", 3)));
      assertTrue(e.getMessage().contains("max_tokenz"), e.getMessage());
      assertThrows(IllegalArgumentException.class, () -> server.submit(new int[0], (Options) null));
      server.close();
      assertThrows(IllegalStateException.class, server::statsJson);
    }
  }

  /** Just enough JSON for the statistics: objects, arrays, numbers, strings, literals. */
  private static final class Json {
    private final String s;
    private int i;

    Json(String s) {
      this.s = s;
    }

    Object value() {
      skip();
      char c = s.charAt(i);
      if (c == '{') {
        Map<String, Object> m = new LinkedHashMap<>();
        for (i++, skip(); s.charAt(i) != '}'; skip()) {
          String key = (String) value();
          skip();
          i++; // ':'
          m.put(key, value());
          skip();
          if (s.charAt(i) == ',') i++;
        }
        i++;
        return m;
      }
      if (c == '[') {
        List<Object> l = new ArrayList<>();
        for (i++, skip(); s.charAt(i) != ']'; skip()) {
          l.add(value());
          skip();
          if (s.charAt(i) == ',') i++;
        }
        i++;
        return l;
      }
      if (c == '"') {
        int end = s.indexOf('"', i + 1);
        String out = s.substring(i + 1, end);
        i = end + 1;
        return out;
      }
      int start = i;
      while (i < s.length() && ",}] \n".indexOf(s.charAt(i)) < 0) i++;
      String word = s.substring(start, i);
      if (word.equals("true") || word.equals("false")) return Boolean.valueOf(word);
      if (word.equals("null")) return null;
      return Double.valueOf(word);
    }

    private void skip() {
      while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
    }
  }
}
