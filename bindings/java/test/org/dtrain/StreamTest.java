package org.dtrain;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import org.junit.jupiter.api.Test;

/** Engine.stream: an Iterator of tokens that cancels its generation when closed. */
class StreamTest {
  /** gpt-tiny with room for long generations. */
  static final Map<String, Object> GPT = Map.of("preset", "gpt-tiny", "context", 256, "seed", 1);
  static final int[] PROMPT = {'1', '2', '3', '+'};

  @Test
  void aStreamYieldsWhatGenerateReturns() {
    try (Model m = Model.gpt(GPT); Optimizer o = new Optimizer(m, "sgd"); Engine e = new Engine(null, m, o)) {
      Map<String, Object> opts = Map.of("max_new_tokens", 40);
      int[] want = e.generate(PROMPT, opts);
      List<Integer> got = new ArrayList<>();
      try (TokenStream s = e.stream(PROMPT, opts)) {
        for (Integer t : (Iterable<Integer>) () -> s) got.add(t);
        assertFalse(s.hasNext());
        assertThrows(NoSuchElementException.class, s::next);
      }
      assertArrayEquals(want, got.stream().mapToInt(Integer::intValue).toArray());
    }
  }

  @Test
  void leavingAStreamEarlyCancelsItAndLeaksNothing() throws Exception {
    try (Model m = Model.gpt(GPT); Optimizer o = new Optimizer(m, "sgd"); Engine e = new Engine(null, m, o)) {
      int[] want = e.generate(PROMPT, Map.of("max_new_tokens", 8));
      Fixtures.settleLeaks();
      long threads = Fixtures.threadsNamed("dtrain-stream-");
      long start = Fixtures.ledger();
      long during = 0;
      int read = 0;
      try (TokenStream s = e.stream(PROMPT, Map.of("max_new_tokens", 200))) {
        while (s.hasNext()) {
          assertEquals(want[read], s.next());
          if (++read == 2) {
            // The generation waits at most TokenStream.AHEAD tokens ahead, its KV cache held.
            during = Fixtures.ledger();
            break;
          }
        }
      }
      assertTrue(during > start, "the KV cache is allocated while the stream is open");
      assertEquals(start, Fixtures.ledger(), "the memory ledger is back at its start");
      assertEquals(threads, Fixtures.threadsNamed("dtrain-stream-"), "the stream's thread has ended");
      // The engine is free again and unchanged.
      assertArrayEquals(want, e.generate(PROMPT, Map.of("max_new_tokens", 8)));
    }
  }

  @Test
  void theEngineIsTheStreamsUntilItIsClosed() throws Exception {
    try (Model m = Model.gpt(GPT); Optimizer o = new Optimizer(m, "sgd")) {
      Engine e = new Engine(null, m, o);
      long threads = Fixtures.threadsNamed("dtrain-stream-");
      TokenStream s = e.stream(PROMPT, Map.of("max_new_tokens", 200));
      assertTrue(s.hasNext());
      IllegalStateException busy = assertThrows(IllegalStateException.class, () -> e.generate(PROMPT, Map.of()));
      assertTrue(busy.getMessage().contains("streaming"), busy.getMessage());
      assertThrows(IllegalStateException.class, () -> e.stream(PROMPT, null));
      // Closing the engine closes its stream first.
      e.close();
      assertFalse(s.hasNext());
      assertEquals(threads, Fixtures.threadsNamed("dtrain-stream-"));
      s.close(); // idempotent
    }
  }

  @Test
  void aFailedGenerationIsThrownByHasNext() {
    try (Model m = Model.gpt(GPT); Optimizer o = new Optimizer(m, "sgd"); Engine e = new Engine(null, m, o)) {
      try (TokenStream s = e.stream(PROMPT, Map.of("temprature", 1.0))) {
        DtrainException x = assertThrows(DtrainException.class, s::hasNext);
        assertEquals(Status.INVALID_ARGUMENT, x.status());
        assertTrue(x.getMessage().contains("temprature"), x.getMessage());
        assertFalse(s.hasNext());
      }
      assertThrows(IllegalArgumentException.class, () -> e.stream(new int[0], null));
      assertThrows(NullPointerException.class, () -> e.stream(null, null));
      // The engine took no harm and streams again.
      try (TokenStream s = e.stream(PROMPT, Map.of("max_new_tokens", 3))) {
        int n = 0;
        while (s.hasNext()) {
          s.next();
          n++;
        }
        assertEquals(3, n);
      }
    }
  }
}
