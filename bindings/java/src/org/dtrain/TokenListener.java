package org.dtrain;

/**
 * Receives each generated token as soon as it is chosen ({@link Engine#generate(int[][],
 * Options, TokenListener)}), on the thread that called generate. If it throws, it is called
 * no more and its exception propagates from generate once the library returns.
 */
@FunctionalInterface
public interface TokenListener {
  void onToken(int promptIndex, int token);
}
