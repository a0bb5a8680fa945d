package org.dtrain;

import static java.lang.ref.Reference.reachabilityFence;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.dtrain.internal.DtrainNative;

/**
 * A Hugging Face tokenizer (dt_tokenizer): tokenizer.json (byte-level BPE, or
 * SentencePiece-style BPE with byte fallback), with the model's chat template
 * (tokenizer_config.json) and end-of-sequence ids (generation_config.json). Immutable, so
 * unlike the other handles any number of threads may use one at once (none may close it
 * meanwhile).
 *
 * <pre>{@code
 * try (Tokenizer tok = new Tokenizer("models/qwen2");
 *      Detokenizer text = tok.detokenizer(true)) {
 *   String prompt = tok.applyChatTemplate(List.of(Message.user("Hi!")), true);
 *   int[] ids = tok.encode(prompt, false);  // the template's text carries its special tokens
 *   try (TokenStream tokens = engine.stream(ids, Map.of("max_new_tokens", 64))) {
 *     while (tokens.hasNext()) System.out.print(text.push(tokens.next()));
 *   }
 *   System.out.println(text.finish());
 * }
 * }</pre>
 */
public final class Tokenizer extends Handle {
  /**
   * Loads the tokenizer at {@code path}: a model directory (its tokenizer.json, and if
   * present tokenizer_config.json and generation_config.json) or a tokenizer.json file.
   * DtrainException IO for a missing or malformed file, INVALID_ARGUMENT naming what
   * libdtrain does not implement exactly.
   */
  public Tokenizer(String path) {
    this(path, null);
  }

  /** chatTemplate: null for the file's own, or a built-in family to use instead ("chatml",
   *  "llama3", "llama2", "mistral", "zephyr"). */
  public Tokenizer(String path, String chatTemplate) {
    super(create(requireArg(path, "path"), chatTemplate), DtrainNative::dt_tokenizer_destroy);
  }

  private static long create(String path, String chatTemplate) {
    if (chatTemplate == null) return DtrainNative.dt_tokenizer_create(path, 0);
    try (Options o = new Options().setString("chat_template", chatTemplate)) {
      return DtrainNative.dt_tokenizer_create(path, o.ptr());
    }
  }

  /** The token ids of {@code text}, with the post-processor's special tokens (Llama's BOS). */
  public int[] encode(String text) {
    return encode(text, true);
  }

  /** The token ids of {@code text} (as UTF-8; a lone surrogate reads as '?'). */
  public int[] encode(String text, boolean addSpecialTokens) {
    byte[] utf8 = requireArg(text, "text").getBytes(StandardCharsets.UTF_8);
    try {
      return DtrainNative.dt_tokenizer_encode(ptr(), utf8, addSpecialTokens ? 1 : 0);
    } finally {
      reachabilityFence(this);
    }
  }

  /** The text of {@code ids}, special tokens left out. */
  public String decode(int[] ids) {
    return decode(ids, true);
  }

  /** The text of {@code ids}; DtrainException INVALID_ARGUMENT for an id outside the vocabulary. */
  public String decode(int[] ids, boolean skipSpecialTokens) {
    try {
      return DtrainNative.dt_tokenizer_decode(ptr(), requireArg(ids, "ids"), skipSpecialTokens ? 1 : 0);
    } finally {
      reachabilityFence(this);
    }
  }

  /** The vocabulary's size: the largest id + 1. */
  public long vocabSize() {
    try {
      return DtrainNative.dt_tokenizer_vocab_size(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /** The id of a token's text (e.g. "<|im_end|>"); DtrainException NOT_FOUND if it has none. */
  public int tokenToId(String token) {
    try {
      return DtrainNative.dt_tokenizer_token_to_id(ptr(), requireArg(token, "token"));
    } finally {
      reachabilityFence(this);
    }
  }

  /**
   * The special tokens as JSON: {"bos_token":..,"eos_token":..,"bos_token_id":..,
   * "eos_token_ids":[..] (what generation stops at: pass them as "stop_tokens"),
   * "vocab_size":..,"special":[{"id":..,"content":..},..],"chat_template":bool}.
   */
  public String infoJson() {
    try {
      return DtrainNative.dt_tokenizer_info_json(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /** applyChatTemplate(messages, true): ending with the assistant's turn to be generated. */
  public String applyChatTemplate(List<Message> messages) {
    return applyChatTemplate(messages, true);
  }

  /**
   * Renders a conversation with the chat template, byte for byte as transformers'
   * apply_chat_template(messages, tokenize=False, add_generation_prompt=...). Encode the
   * text with addSpecialTokens false: its special tokens are in it. DtrainException
   * INVALID_ARGUMENT with the template's message when it raises (roles that do not
   * alternate, ...); NOT_FOUND when the tokenizer has none (pass a chatTemplate).
   */
  public String applyChatTemplate(List<Message> messages, boolean addGenerationPrompt) {
    String json = messagesJson(requireArg(messages, "messages"));
    try {
      return DtrainNative.dt_tokenizer_apply_chat_template(ptr(), json, addGenerationPrompt ? 1 : 0);
    } finally {
      reachabilityFence(this);
    }
  }

  /** A streaming decode of this tokenizer's ids (special tokens left out or not). */
  public Detokenizer detokenizer(boolean skipSpecialTokens) {
    return new Detokenizer(this, skipSpecialTokens);
  }

  /** The messages as the C call reads them: [{"role":..,"content":..},..]. */
  static String messagesJson(List<Message> messages) {
    StringBuilder out = new StringBuilder("[");
    for (int i = 0; i < messages.size(); ++i) {
      Message m = requireArg(messages.get(i), "messages[" + i + "]");
      out.append(i == 0 ? "" : ",").append("{\"role\":");
      quote(out, m.role());
      out.append(",\"content\":");
      quote(out, m.content());
      out.append('}');
    }
    return out.append(']').toString();
  }

  /** s as a JSON string (control characters escaped; everything else as it is). */
  private static void quote(StringBuilder out, String s) {
    out.append('"');
    for (int i = 0; i < s.length(); ++i) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    out.append('"');
  }

  @Override
  public String toString() {
    return isClosed() ? "Tokenizer(closed)" : "Tokenizer(" + vocabSize() + " tokens)";
  }
}
