package org.dtrain;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

class BasicsTest {
  @Test
  void versionMatchesTheHeader() {
    assertTrue(Dtrain.version().matches("\\d+\\.\\d+\\.\\d+"), Dtrain.version());
    assertEquals(Dtrain.BINDING_VERSION_NUMBER, Dtrain.versionNumber());
    String[] parts = Dtrain.version().split("\\.");
    assertEquals(Integer.parseInt(parts[0]) * 10000 + Integer.parseInt(parts[1]) * 100
        + Integer.parseInt(parts[2]), Dtrain.versionNumber());
  }

  @Test
  void statusEnum() {
    assertEquals("DT_OK", Dtrain.statusName(Status.OK.code()));
    assertEquals("DT_ERR_INVALID_ARGUMENT", Status.INVALID_ARGUMENT.libraryName());
    assertEquals("DT_ERR_CANCELLED", Status.CANCELLED.libraryName());
    assertEquals("DT_ERR_UNKNOWN", Dtrain.statusName(12345));
    for (Status s : Status.values()) {
      if (s == Status.UNKNOWN) continue;
      assertEquals(s, Status.fromCode(s.code()));
      // The library's name of each code is DT_ERR_ + the enum's name (DT_OK for OK).
      assertEquals(s == Status.OK ? "DT_OK" : "DT_ERR_" + s.name(), s.libraryName());
    }
    assertEquals(Status.UNKNOWN, Status.fromCode(12345));
    assertEquals(Status.UNKNOWN, Status.fromCode(-7));
    DtrainException future = new DtrainException(99, "from a newer library");
    assertEquals(Status.UNKNOWN, future.status());
    assertEquals(99, future.code());
    CancelledException c = new CancelledException("stopped");
    assertEquals(Status.CANCELLED, c.status());
    assertEquals(11, c.code());
  }

  @Test
  void dtypesAndTags() {
    for (DType t : DType.values()) {
      assertEquals(t, DType.of(t.code()));
      assertEquals(t.name().toLowerCase(java.util.Locale.ROOT), t.libraryName());
    }
    assertEquals("kv_cache", MemTag.KV_CACHE.libraryName());
    assertThrows(IllegalArgumentException.class, () -> DType.of(99));
  }

  @Test
  void gptParamCountMatchesTheBuiltModel() {
    Map<String, Object> config = Map.of("preset", "llama-tiny", "n_layer", 3);
    try (Model model = Model.gpt(config)) {
      assertEquals(model.paramCount(), Model.gptParamCount(config));
    }
    DtrainException e = assertThrows(DtrainException.class, () -> Model.gptParamCount(Map.of("n_layer", -1)));
    assertEquals(Status.INVALID_ARGUMENT, e.status());
    assertTrue(e.getMessage().contains("n_layer"), e.getMessage());
  }

  @Test
  void optionsRoundTrip() {
    try (Options o = new Options()) {
      o.set("i", 7).set("l", 1L << 40).set("d", 0.5).set("f", 1.5f).set("b", true).set("s", "héllo ✓ 𝄞");
      assertEquals(6, o.count());
      assertEquals(7, o.getInt("i"));
      assertEquals(1L << 40, o.getInt("l"));
      assertEquals(0.5, o.getDouble("d"));
      assertEquals(1.5, o.getDouble("f"));
      assertEquals(7.0, o.getDouble("i"), "get_double reads an int");
      assertTrue(o.getBool("b"));
      assertEquals("héllo ✓ 𝄞", o.getString("s"));
      o.setInt("i", 8).setString("i", "now a string");
      assertEquals("now a string", o.getString("i"));
      assertEquals(6, o.count());
    }
  }

  @Test
  void optionsFromAMap() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("lr", 0.003);
    m.put("seed", 1);
    m.put("nesterov", false);
    m.put("preset", "gpt-tiny");
    try (Options o = Options.of(m)) {
      assertEquals(4, o.count());
      assertEquals(0.003, o.getDouble("lr"));
      assertEquals(1, o.getInt("seed"));
      assertFalse(o.getBool("nesterov"));
      assertEquals("gpt-tiny", o.getString("preset"));
    }
  }

  @Test
  void optionsErrors() {
    try (Options o = new Options()) {
      o.set("x", 1);
      DtrainException absent = assertThrows(DtrainException.class, () -> o.getInt("missing"));
      assertEquals(Status.NOT_FOUND, absent.status());
      assertEquals("DT_ERR_NOT_FOUND", absent.statusName());
      DtrainException wrongType = assertThrows(DtrainException.class, () -> o.getString("x"));
      assertEquals(Status.INVALID_ARGUMENT, wrongType.status());
      assertThrows(IllegalArgumentException.class, () -> o.set("y", new Object()));
      assertThrows(IllegalArgumentException.class, () -> o.set("y", 'c'));
      NullPointerException npe = assertThrows(NullPointerException.class, () -> o.set(null, 1));
      assertTrue(npe.getMessage().contains("key"), npe.getMessage());
      npe = assertThrows(NullPointerException.class, () -> o.set("v", null));
      assertTrue(npe.getMessage().contains("\"v\""), npe.getMessage());
      DtrainException empty = assertThrows(DtrainException.class, () -> o.setInt("", 1));
      assertEquals(Status.INVALID_ARGUMENT, empty.status());
      IllegalArgumentException nul = assertThrows(IllegalArgumentException.class, () -> o.setString("k", "a\0b"));
      assertTrue(nul.getMessage().contains("U+0000"), nul.getMessage());
    }
    assertThrows(NullPointerException.class, () -> Options.of(null));
  }

  @Test
  void configureAndDevices() {
    Dtrain.configure(Map.of("pool_cache_bytes", 1L << 30));
    DtrainException e = assertThrows(DtrainException.class, () -> Dtrain.configure(Map.of("no_such_setting", 1)));
    assertEquals(Status.INVALID_ARGUMENT, e.status());
    assertTrue(e.getMessage().contains("no_such_setting"), e.getMessage());
    assertEquals(1, Dtrain.deviceCount("cpu"));
    assertTrue(Dtrain.deviceCount("cuda") >= 0);
  }

  @Test
  void memoryLedger() {
    try (Options tag = new Options().set("tag", "activation");
        Tensor t = new Tensor(DType.F32, new long[] {256, 256}, "cpu", tag)) {
      Dtrain.MemoryStats act = Dtrain.memoryStats("cpu", MemTag.ACTIVATION);
      assertTrue(act.currentBytes() >= t.nbytes(), act.toString());
      assertTrue(act.peakBytes() >= act.currentBytes(), act.toString());
      Dtrain.MemoryStats all = Dtrain.memoryStats("cpu", MemTag.ALL);
      assertTrue(all.currentBytes() >= act.currentBytes());
      String json = Dtrain.memoryReportJson("cpu");
      assertTrue(json.startsWith("{") && json.contains("\"device\"") && json.contains("activation"), json);
      Dtrain.memoryResetPeak("cpu");
      Dtrain.MemoryStats rank = Dtrain.memoryRankStats("cpu", 0, MemTag.ALL);
      assertTrue(rank.currentBytes() >= 0);
    }
    DtrainException e = assertThrows(DtrainException.class, () -> Dtrain.memoryStats("tpu", MemTag.ALL));
    assertTrue(e.getMessage().contains("tpu"), e.getMessage());
  }
}
