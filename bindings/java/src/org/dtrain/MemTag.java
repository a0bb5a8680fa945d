package org.dtrain;

import org.dtrain.internal.DtrainNative;

/** What the memory ledger counts bytes as; ALL is the sum, for queries. */
public enum MemTag {
  ALL(DtrainNative.DT_MEM_ALL),
  PARAM(DtrainNative.DT_MEM_PARAM),
  GRAD(DtrainNative.DT_MEM_GRAD),
  OPTIMIZER(DtrainNative.DT_MEM_OPTIMIZER),
  ACTIVATION(DtrainNative.DT_MEM_ACTIVATION),
  KV_CACHE(DtrainNative.DT_MEM_KV_CACHE),
  COMM_BUFFER(DtrainNative.DT_MEM_COMM_BUFFER),
  WORKSPACE(DtrainNative.DT_MEM_WORKSPACE),
  CHECKPOINT(DtrainNative.DT_MEM_CHECKPOINT);

  private final int code;

  MemTag(int code) {
    this.code = code;
  }

  /** The dt_mem_tag code. */
  public int code() {
    return code;
  }

  /** The library's name ("all", "param", ..., "workspace"), as the "tag" option takes it. */
  public String libraryName() {
    return DtrainNative.dt_mem_tag_name(code);
  }
}
