package org.dtrain;

import static java.lang.ref.Reference.reachabilityFence;

import java.util.Map;
import org.dtrain.internal.DtrainNative;

/**
 * Batches of a dataset in a seeded order (dt_loader): options "batch" (required), "seed",
 * "shuffle". Keeps the dataset alive. One thread at a time.
 */
public final class Loader extends Handle {
  /** Where the next batch comes from. */
  public record Position(long epoch, long batchIndex) {}

  public Loader(Dataset dataset, Options options) {
    super(DtrainNative.dt_loader_create(require(dataset, "dataset"), optional(options)),
        DtrainNative::dt_loader_destroy);
    reachabilityFence(dataset);
    reachabilityFence(options);
  }

  public Loader(Dataset dataset, Map<String, ?> options) {
    super(create(dataset, options), DtrainNative::dt_loader_destroy);
    reachabilityFence(dataset);
  }

  private static long create(Dataset dataset, Map<String, ?> map) {
    long d = require(dataset, "dataset");
    return Options.with(map, o -> DtrainNative.dt_loader_create(d, optional(o)));
  }

  /** Writes the next batch into i32 CPU tensors [batch, context]; then advances. */
  public void next(Tensor inputs, Tensor targets) {
    long i = require(inputs, "inputs");
    long t = require(targets, "targets");
    if (inputs.dtype() != DType.I32 || targets.dtype() != DType.I32) {
      throw new IllegalArgumentException("inputs and targets must be I32 tensors");
    }
    DtrainNative.dt_loader_next(ptr(), i, t);
    reachabilityFence(this);
    reachabilityFence(inputs);
    reachabilityFence(targets);
  }

  /** Full batches per epoch. */
  public long batchesPerEpoch() {
    try {
      return DtrainNative.dt_loader_batches_per_epoch(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  public Position position() {
    long[] p = DtrainNative.dt_loader_position(ptr());
    reachabilityFence(this);
    return new Position(p[0], p[1]);
  }

  /** Moves to batch {@code batchIndex} of {@code epoch}. */
  public void seek(long epoch, long batchIndex) {
    DtrainNative.dt_loader_seek(ptr(), epoch, batchIndex);
    reachabilityFence(this);
  }
}
