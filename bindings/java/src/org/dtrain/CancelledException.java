package org.dtrain;

/**
 * A call was cancelled ({@link Status#CANCELLED}): a {@link CancelToken} was raised or a
 * {@link TokenStream} was closed early. Nothing it used is broken: a cancelled train step
 * changed nothing (the step count and the weights are as before) and the engine takes the
 * next call.
 */
public class CancelledException extends DtrainException {
  private static final long serialVersionUID = 1L;

  public CancelledException(String message) {
    super(Status.CANCELLED.code(), message);
  }
}
