package org.dtrain;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.Test;

/** The Cleaner safety net: an unclosed handle that becomes unreachable is released, with a warning. */
class LeakTest {
  private static final long MIB = 1 << 20;

  /** Makes a 1 MiB tensor and drops it unclosed; returns the ledger while it was held. */
  private static long leakATensor() {
    Tensor t = new Tensor(DType.F32, MIB / 4);
    t.fillUniform(1, "leak", 0, 0, 1);
    return Fixtures.ledger();
  }

  /** Collects until the ledger is back to {@code start} (bounded: 10 s); true when it is. */
  private static boolean releasedBackTo(long start) throws InterruptedException {
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (System.nanoTime() < deadline) {
      System.gc();
      if (Fixtures.ledger() == start) return true;
      Thread.sleep(20);
    }
    return false;
  }

  @Test
  void anUnclosedHandleIsReleasedByTheCleanerAndLoggedOnce() throws Exception {
    Fixtures.settleLeaks();
    Logger log = Logger.getLogger("org.dtrain"); // held: java.util.logging keeps loggers weakly
    List<LogRecord> records = Collections.synchronizedList(new ArrayList<>());
    Handler capture = new Handler() {
      @Override
      public void publish(LogRecord r) {
        records.add(r);
      }

      @Override
      public void flush() {}

      @Override
      public void close() {}
    };
    log.addHandler(capture);
    try {
      Handle.resetLeakWarnings();
      long start = Fixtures.ledger();
      long released = Handle.leaksReleased();
      assertTrue(leakATensor() >= start + MIB);
      assertTrue(releasedBackTo(start), "the leaked tensor's memory was released");
      assertTrue(Handle.leaksReleased() > released);
      List<LogRecord> warnings = new ArrayList<>();
      synchronized (records) {
        for (LogRecord r : records) {
          if (r.getMessage().contains("org.dtrain.Tensor was not closed")) warnings.add(r);
        }
      }
      assertEquals(1, warnings.size(), "one warning names the class");
      assertEquals(Level.WARNING, warnings.get(0).getLevel());

      // Once per class: more leaks of it are released without more warnings.
      leakATensor();
      leakATensor();
      assertTrue(releasedBackTo(start));
      long tensorWarnings;
      synchronized (records) {
        tensorWarnings = records.stream().filter(r -> r.getMessage().contains("Tensor was not closed")).count();
      }
      assertEquals(1, tensorWarnings);
    } finally {
      log.removeHandler(capture);
    }
  }

  @Test
  void closedAndHeldHandlesAreNeverCleaned() throws Exception {
    Fixtures.settleLeaks();
    long released = Handle.leaksReleased();
    List<Tensor> held = new ArrayList<>();
    for (int i = 0; i < 100; i++) {
      Tensor t = new Tensor(DType.F32, 16);
      if (i % 2 == 0) {
        t.close();
      } else {
        held.add(t);
      }
    }
    Fixtures.settleLeaks();
    assertEquals(released, Handle.leaksReleased());
    for (Tensor t : held) {
      t.copyFrom(new float[16]);
      t.close();
    }
  }
}
