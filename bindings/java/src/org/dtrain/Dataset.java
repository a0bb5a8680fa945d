package org.dtrain;

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
    super(DtrainNative.dt_dataset_create(requireArg(kind, "kind"), optional(options)));
  }

  public Dataset(String kind, Map<String, ?> options) {
    super(create(kind, options));
  }

  private static long create(String kind, Map<String, ?> map) {
    requireArg(kind, "kind");
    return Options.with(map, o -> DtrainNative.dt_dataset_create(kind, optional(o)));
  }

  /** Number of examples. */
  public long size() {
    return DtrainNative.dt_dataset_size(ptr());
  }

  /** Tokens per example (T of the [B, T] batches). */
  public long context() {
    return DtrainNative.dt_dataset_context(ptr());
  }

  /** Example {@code index} (0 to size() - 1). */
  public Example example(long index) {
    int t = (int) context();
    int[] inputs = new int[t];
    int[] targets = new int[t];
    DtrainNative.dt_dataset_example(ptr(), index, inputs, targets);
    return new Example(inputs, targets);
  }

  @Override
  void destroy(long p) {
    DtrainNative.dt_dataset_destroy(p);
  }
}
