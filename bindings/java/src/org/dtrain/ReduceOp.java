package org.dtrain;

import org.dtrain.internal.DtrainNative;

/** Reductions of the mesh collectives. */
public enum ReduceOp {
  SUM(DtrainNative.DT_REDUCE_SUM),
  AVG(DtrainNative.DT_REDUCE_AVG),
  MAX(DtrainNative.DT_REDUCE_MAX),
  MIN(DtrainNative.DT_REDUCE_MIN),
  PROD(DtrainNative.DT_REDUCE_PROD);

  private final int code;

  ReduceOp(int code) {
    this.code = code;
  }

  /** The dt_reduce_op code. */
  public int code() {
    return code;
  }
}
