package org.dtrain;

/**
 * A libdtrain call failed: {@link #status()} is its dt_status code (see {@link Status}) and
 * {@link #getMessage()} the library's message for that failure, read on the thread that
 * failed in the same native call. Thrown by the JNI layer itself.
 */
public class DtrainException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int status;

  /** Made by the native layer: (status code, the library's message). */
  public DtrainException(int status, String message) {
    super(message);
    this.status = status;
  }

  /** The dt_status code, e.g. {@link Status#IO}. */
  public int status() {
    return status;
  }

  /** The code's name, e.g. "DT_ERR_IO". */
  public String statusName() {
    return Dtrain.statusName(status);
  }

  @Override
  public String toString() {
    return getClass().getName() + ": " + statusName() + ": " + getMessage();
  }
}
