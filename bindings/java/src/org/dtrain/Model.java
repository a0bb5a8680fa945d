package org.dtrain;

import static java.lang.ref.Reference.reachabilityFence;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.dtrain.internal.DtrainNative;

/**
 * A model with named parameters (dt_module): a GPT ({@link #gpt}), an MLP or a sequential
 * container. (Not "Module": that name is java.lang.Module's.) Optimizers, engines and
 * parameter views made from it keep it alive, so it may be closed before them.
 */
public final class Model extends Handle {
  private Model(long handle) {
    super(handle, DtrainNative::dt_module_destroy);
  }

  /** A GPT of the "gpt-small" shape. */
  public static Model gpt() {
    return gpt((Options) null);
  }

  /** A GPT. config keys: "preset" ("gpt-tiny", "gpt-small", "llama-tiny"), "vocab_size",
   *  "context", "n_layer", "n_head", "d_model", "seed", "precision", ... (see dtrain.h). */
  public static Model gpt(Options config) {
    try {
      return new Model(DtrainNative.dt_module_create_gpt(optional(config)));
    } finally {
      reachabilityFence(config);
    }
  }

  public static Model gpt(Map<String, ?> config) {
    return Options.with(config, Model::gpt);
  }

  /** Number of parameters {@link #gpt(Options)} would make with {@code config}, counted from
   *  the config without building the model or allocating: size a model first, even one this
   *  machine could not hold. The same keys and errors as gpt(). */
  public static long gptParamCount(Options config) {
    try {
      return DtrainNative.dt_module_gpt_param_count(optional(config));
    } finally {
      reachabilityFence(config);
    }
  }

  public static long gptParamCount(Map<String, ?> config) {
    return Options.with(config, Model::gptParamCount);
  }

  /** An MLP: "sizes" ("in,hidden...,out", required), "act", "seed". */
  public static Model mlp(Options config) {
    try {
      return new Model(DtrainNative.dt_module_create_mlp(require(config, "config")));
    } finally {
      reachabilityFence(config);
    }
  }

  public static Model mlp(Map<String, ?> config) {
    return Options.with(requireArg(config, "config"), Model::mlp);
  }

  /** A sequential container: "layers" (e.g. "linear:4:32,gelu,linear:32:1"), "seed", "init_std". */
  public static Model sequential(Options config) {
    try {
      return new Model(DtrainNative.dt_module_create_sequential(require(config, "config")));
    } finally {
      reachabilityFence(config);
    }
  }

  public static Model sequential(Map<String, ?> config) {
    return Options.with(requireArg(config, "config"), Model::sequential);
  }

  /** The GPT a checkpoint was saved from, freshly initialized (load weights with Engine.load). */
  public static Model fromCheckpoint(String pathStem) {
    return new Model(DtrainNative.dt_module_create_from_checkpoint(requireArg(pathStem, "pathStem")));
  }

  /**
   * A GPT from a Hugging Face model directory (config.json and model.safetensors or its
   * shards: GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM), with
   * its weights, in f32. DtrainException IO naming the file for a missing or malformed
   * directory, INVALID_ARGUMENT naming what is not supported. See {@link Hf#inspectJson}.
   */
  public static Model fromHf(String dir) {
    return fromHf(dir, (Options) null);
  }

  /** fromHf with options: "precision" ("f32", the default, "bf16", "f16", or "stored": the
   *  files' dtype) and "context" (the longest sequence; default max_position_embeddings). */
  public static Model fromHf(String dir, Options options) {
    try {
      return new Model(DtrainNative.dt_module_create_from_hf(requireArg(dir, "dir"), optional(options)));
    } finally {
      reachabilityFence(options);
    }
  }

  public static Model fromHf(String dir, Map<String, ?> options) {
    requireArg(dir, "dir");
    return Options.with(options, o -> fromHf(dir, o));
  }

  /**
   * Writes this GPT as a Hugging Face directory that transformers loads (config.json,
   * generation_config.json, model.safetensors or shards), created if missing. After training
   * through an engine, use {@link Engine#saveHf}, which gathers the weights first.
   */
  public void saveHf(String dir) {
    saveHf(dir, (Options) null);
  }

  /** saveHf with options: "precision" ("f32", "bf16", "f16"; default: the model's),
   *  "architecture", "tokenizer_from" (a directory whose tokenizer files are copied over),
   *  "bos_token_id", "eos_token_id", "eos_token_ids" (an int[] or "1,2"), "max_shard_bytes". */
  public void saveHf(String dir, Options options) {
    DtrainNative.dt_module_save_hf(ptr(), requireArg(dir, "dir"), optional(options));
    reachabilityFence(this);
    reachabilityFence(options);
  }

  public void saveHf(String dir, Map<String, ?> options) {
    requireArg(dir, "dir");
    Options.with(options, o -> {
      saveHf(dir, o);
      return null;
    });
  }

  /** A checkpoint's metadata as JSON ({"step":..,"config":{..},"tensors":..}). */
  public static String checkpointInfoJson(String pathStem) {
    return DtrainNative.dt_checkpoint_info_json(requireArg(pathStem, "pathStem"));
  }

  /** Number of scalar parameters. */
  public long paramCount() {
    try {
      return DtrainNative.dt_module_param_count(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /** Number of parameter tensors. */
  public long paramTensorCount() {
    try {
      return DtrainNative.dt_module_param_count_tensors(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /** Name of parameter tensor {@code index}. */
  public String paramName(long index) {
    try {
      return DtrainNative.dt_module_param_name(ptr(), index);
    } finally {
      reachabilityFence(this);
    }
  }

  /** Every parameter tensor's name, in the library's fixed order. */
  public List<String> paramNames() {
    long n = paramTensorCount();
    List<String> names = new ArrayList<>((int) n);
    for (long i = 0; i < n; ++i) names.add(paramName(i));
    return Collections.unmodifiableList(names);
  }

  /** A tensor viewing parameter {@code name} (keeps the model alive). */
  public Tensor param(String name) {
    try {
      return Tensor.adopt(DtrainNative.dt_module_param(ptr(), requireArg(name, "name")));
    } finally {
      reachabilityFence(this);
    }
  }

  /** Forward of a sequential or MLP model: x f32 [N, in] to a new [N, out] tensor. */
  public Tensor forward(Tensor x) {
    try {
      return Tensor.adopt(DtrainNative.dt_module_forward(ptr(), require(x, "x")));
    } finally {
      reachabilityFence(this);
      reachabilityFence(x);
    }
  }

  /** Backward of the last forward from dy; gradients accumulate. */
  public void backward(Tensor dy) {
    DtrainNative.dt_module_backward_no_dx(ptr(), require(dy, "dy"));
    reachabilityFence(this);
    reachabilityFence(dy);
  }

  /** Backward of the last forward, returning the input's gradient [N, in]. */
  public Tensor backwardWithInputGrad(Tensor dy) {
    try {
      return Tensor.adopt(DtrainNative.dt_module_backward(ptr(), require(dy, "dy")));
    } finally {
      reachabilityFence(this);
      reachabilityFence(dy);
    }
  }

  /** Sets every parameter's gradient to zero. */
  public void zeroGrad() {
    DtrainNative.dt_module_zero_grad(ptr());
    reachabilityFence(this);
  }

  @Override
  public String toString() {
    return isClosed() ? "Model(closed)" : "Model(" + paramCount() + " parameters)";
  }
}
