package org.dtrain;

import java.util.Map;

/** The sample's configuration, shared by the tests. */
final class Fixtures {
  static final Map<String, Object> GPT = Map.of("preset", "gpt-tiny", "seed", 1);
  static final Map<String, Object> ADAMW = Map.of("lr", 0.003);
  static final Map<String, Object> DATA = Map.of("digits", 3, "seed", 7, "split", "train");
  static final Map<String, Object> LOADER = Map.of("batch", 16, "seed", 0);
  static final int BATCH = 16;

  private Fixtures() {}
}
