package org.dtrain;

import static java.lang.ref.Reference.reachabilityFence;

import org.dtrain.internal.DtrainNative;

/**
 * Streaming decode (dt_detokenizer): {@link #push} takes one id at a time and returns the
 * text that became final (often "", never half a character; a SentencePiece leading space
 * handled as a whole decode handles it), {@link #finish} the rest, so the pieces
 * concatenate to {@link Tokenizer#decode} of all the ids. It keeps what it needs of its
 * tokenizer alive, so the tokenizer may be closed first. One thread at a time.
 */
public final class Detokenizer extends Handle {
  /** A detokenizer that leaves special tokens out. */
  public Detokenizer(Tokenizer tokenizer) {
    this(tokenizer, true);
  }

  public Detokenizer(Tokenizer tokenizer, boolean skipSpecialTokens) {
    super(DtrainNative.dt_detokenizer_create(require(tokenizer, "tokenizer"), skipSpecialTokens ? 1 : 0),
        DtrainNative::dt_detokenizer_destroy);
    reachabilityFence(tokenizer);
  }

  /** Adds one id; returns the text it made final ("" while it waits for more). */
  public String push(int id) {
    DtrainNative.dt_detokenizer_push(ptr(), id);
    return text();
  }

  /** Ends the stream; returns what was held back (an incomplete UTF-8 tail as U+FFFD). A
   *  later push throws DtrainException INVALID_ARGUMENT. */
  public String finish() {
    DtrainNative.dt_detokenizer_finish(ptr());
    return text();
  }

  /** The final text not yet returned (push and finish return it already). */
  public String text() {
    try {
      return DtrainNative.dt_detokenizer_text(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  @Override
  public String toString() {
    return isClosed() ? "Detokenizer(closed)" : "Detokenizer";
  }
}
