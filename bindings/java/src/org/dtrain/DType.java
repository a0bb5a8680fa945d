package org.dtrain;

import org.dtrain.internal.DtrainNative;

/** Element types of a {@link Tensor}. */
public enum DType {
  F32(DtrainNative.DT_F32, 4),
  BF16(DtrainNative.DT_BF16, 2),
  F16(DtrainNative.DT_F16, 2),
  I32(DtrainNative.DT_I32, 4),
  I64(DtrainNative.DT_I64, 8);

  private final int code;
  private final int size;

  DType(int code, int size) {
    this.code = code;
    this.size = size;
  }

  /** The dt_dtype code. */
  public int code() {
    return code;
  }

  /** Bytes per element. */
  public int size() {
    return size;
  }

  /** True for F32, BF16 and F16. */
  public boolean isFloating() {
    return this == F32 || this == BF16 || this == F16;
  }

  /** The library's name: "f32", "bf16", "f16", "i32", "i64". */
  public String libraryName() {
    return DtrainNative.dt_dtype_name(code);
  }

  /** The DType of a dt_dtype code. */
  public static DType of(int code) {
    for (DType t : values()) {
      if (t.code == code) return t;
    }
    throw new IllegalArgumentException("unknown dtype code " + code);
  }
}
