package org.dtrain;

import static java.lang.ref.Reference.reachabilityFence;

import java.util.Map;
import org.dtrain.internal.DtrainNative;

/**
 * Fixed-length examples (dt_dataset): kind "text" ("path", "context"), "tokens" ("path",
 * "context", "width", "vocab_size") or "addition" ("digits", "size", "seed", "split").
 * Immutable; loaders made from it keep it alive.
 */
public final class Dataset extends Handle {
  /** Example i: context input tokens and the context targets (-1: nothing to learn). */
  public record Example(int[] inputs, int[] targets) {}

  public Dataset(String kind, Options options) {
    super(DtrainNative.dt_dataset_create(requireArg(kind, "kind"), optional(options)),
        DtrainNative::dt_dataset_destroy);
    reachabilityFence(options);
  }

  public Dataset(String kind, Map<String, ?> options) {
    super(create(kind, options), DtrainNative::dt_dataset_destroy);
  }

  private static long create(String kind, Map<String, ?> map) {
    requireArg(kind, "kind");
    return Options.with(map, o -> DtrainNative.dt_dataset_create(kind, optional(o)));
  }

  /** Number of examples. */
  public long size() {
    try {
      return DtrainNative.dt_dataset_size(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /** Tokens per example (T of the [B, T] batches). */
  public long context() {
    try {
      return DtrainNative.dt_dataset_context(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /** Example {@code index} (0 to size() - 1). */
  public Example example(long index) {
    int t = (int) context();
    int[] inputs = new int[t];
    int[] targets = new int[t];
    DtrainNative.dt_dataset_example(ptr(), index, inputs, targets);
    reachabilityFence(this);
    return new Example(inputs, targets);
  }
}
