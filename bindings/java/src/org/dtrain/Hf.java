package org.dtrain;

import org.dtrain.internal.DtrainNative;

/**
 * Hugging Face model directories: {@link #inspectJson} describes one without loading it;
 * {@link Model#fromHf}, {@link Model#saveHf} and {@link Engine#saveHf} read and write them,
 * and {@link Tokenizer} reads their tokenizers.
 */
public final class Hf {
  private Hf() {}

  /**
   * A model directory's description as JSON, without loading its weights:
   * {"architecture":..,"config":{..},"parameters":..,"stored_dtype":"bf16","weight_bytes":..,
   * "files":[..],"bos_token_id":..,"eos_token_ids":[..],"max_position_embeddings":..}.
   * Errors as {@link Model#fromHf} (IO naming the path for a missing directory).
   */
  public static String inspectJson(String dir) {
    return DtrainNative.dt_hf_inspect_json(Handle.requireArg(dir, "dir"));
  }
}
