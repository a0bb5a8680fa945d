package org.dtrain;

import org.dtrain.internal.DtrainNative;

/** The dt_status codes that {@link DtrainException#status()} returns. */
public final class Status {
  public static final int OK = DtrainNative.DT_OK;
  public static final int INVALID_ARGUMENT = DtrainNative.DT_ERR_INVALID_ARGUMENT;
  public static final int OUT_OF_MEMORY = DtrainNative.DT_ERR_OUT_OF_MEMORY;
  public static final int UNSUPPORTED = DtrainNative.DT_ERR_UNSUPPORTED;
  public static final int NOT_FOUND = DtrainNative.DT_ERR_NOT_FOUND;
  public static final int IO = DtrainNative.DT_ERR_IO;
  public static final int COMM = DtrainNative.DT_ERR_COMM;
  public static final int TIMEOUT = DtrainNative.DT_ERR_TIMEOUT;
  public static final int ABORTED = DtrainNative.DT_ERR_ABORTED;
  public static final int INTERNAL = DtrainNative.DT_ERR_INTERNAL;
  /** A service cannot take the request now (a server draining or failed). */
  public static final int UNAVAILABLE = DtrainNative.DT_ERR_UNAVAILABLE;

  private Status() {}

  /** The name of a code ("DT_OK", "DT_ERR_TIMEOUT", ...; "DT_ERR_UNKNOWN" for others). */
  public static String name(int status) {
    return Dtrain.statusName(status);
  }
}
