package org.dtrain;

/**
 * A libdtrain call failed: {@link #status()} says how (a {@link Status}), {@link #code()}
 * is the raw dt_status and {@link #getMessage()} the library's message for that failure,
 * read on the thread that failed in the same native call. Thrown by the JNI layer itself;
 * a cancelled call throws the subclass {@link CancelledException}.
 */
public class DtrainException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int code;

  /** Made by the native layer: (status code, the library's message). */
  public DtrainException(int code, String message) {
    super(message);
    this.code = code;
  }

  /** What failed, e.g. {@link Status#IO}; UNKNOWN for a code this binding does not know. */
  public Status status() {
    return Status.fromCode(code);
  }

  /** The raw dt_status code. */
  public int code() {
    return code;
  }

  /** The code's name, e.g. "DT_ERR_IO". */
  public String statusName() {
    return Dtrain.statusName(code);
  }

  @Override
  public String toString() {
    return getClass().getName() + ": " + statusName() + ": " + getMessage();
  }
}
