package org.dtrain;

import java.util.Objects;

/**
 * One turn of a conversation for {@link Tokenizer#applyChatTemplate}: a role ("system",
 * "user" or "assistant") and its content.
 */
public record Message(String role, String content) {
  public Message {
    Objects.requireNonNull(role, "role must not be null");
    Objects.requireNonNull(content, "content must not be null");
  }

  public static Message system(String content) {
    return new Message("system", content);
  }

  public static Message user(String content) {
    return new Message("user", content);
  }

  public static Message assistant(String content) {
    return new Message("assistant", content);
  }
}
