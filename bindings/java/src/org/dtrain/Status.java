package org.dtrain;

import org.dtrain.internal.DtrainNative;

/** The dt_status codes, as {@link DtrainException#status()} returns them. */
public enum Status {
  OK(DtrainNative.DT_OK),
  INVALID_ARGUMENT(DtrainNative.DT_ERR_INVALID_ARGUMENT),
  OUT_OF_MEMORY(DtrainNative.DT_ERR_OUT_OF_MEMORY),
  UNSUPPORTED(DtrainNative.DT_ERR_UNSUPPORTED),
  NOT_FOUND(DtrainNative.DT_ERR_NOT_FOUND),
  IO(DtrainNative.DT_ERR_IO),
  COMM(DtrainNative.DT_ERR_COMM),
  TIMEOUT(DtrainNative.DT_ERR_TIMEOUT),
  /** The mesh was aborted (dt_mesh_abort) or failed. */
  ABORTED(DtrainNative.DT_ERR_ABORTED),
  INTERNAL(DtrainNative.DT_ERR_INTERNAL),
  /** A service cannot take the request now (a server draining or failed). */
  UNAVAILABLE(DtrainNative.DT_ERR_UNAVAILABLE),
  /** The call was cancelled ({@link CancelToken}, a stream left early); its handles stay usable. */
  CANCELLED(DtrainNative.DT_ERR_CANCELLED),
  /** A code this binding does not know (a newer library); {@link DtrainException#code()} has it. */
  UNKNOWN(-1);

  private static final Status[] BY_CODE = byCode();

  private static Status[] byCode() {
    int max = 0;
    for (Status s : values()) max = Math.max(max, s.code);
    Status[] all = new Status[max + 1];
    for (Status s : values()) {
      if (s != UNKNOWN) all[s.code] = s;
    }
    return all;
  }

  private final int code;

  Status(int code) {
    this.code = code;
  }

  /** The dt_status code (-1 for UNKNOWN). */
  public int code() {
    return code;
  }

  /** The status of a code; UNKNOWN for a code this binding does not know. */
  public static Status fromCode(int code) {
    Status s = code >= 0 && code < BY_CODE.length ? BY_CODE[code] : null;
    return s == null ? UNKNOWN : s;
  }

  /** The library's name of the code ("DT_OK", "DT_ERR_TIMEOUT", ..., "DT_ERR_UNKNOWN"). */
  public String libraryName() {
    return Dtrain.statusName(code);
  }
}
