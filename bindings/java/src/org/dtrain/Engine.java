package org.dtrain;

import java.util.Map;
import org.dtrain.internal.DtrainNative;

/**
 * Trains, evaluates, generates with and checkpoints a GPT (dt_engine). With a mesh whose
 * axes above 1 are "dp" and "tp" it trains data and tensor parallel. It keeps the mesh, model and optimizer
 * alive, so those may be closed first. One thread at a time.
 */
public final class Engine extends Handle {
  private static final int DEFAULT_MAX_NEW_TOKENS = 16;

  /** An engine with no options; mesh may be null (this process alone). */
  public Engine(Mesh mesh, Model model, Optimizer optimizer) {
    this(mesh, model, optimizer, (Options) null);
  }

  /** options: null or "micro_batches", "max_grad_norm", "schedule", "zero", ... (dtrain.h). */
  public Engine(Mesh mesh, Model model, Optimizer optimizer, Options options) {
    super(DtrainNative.dt_engine_create(optional(mesh), require(model, "model"),
        require(optimizer, "optimizer"), optional(options)));
  }

  public Engine(Mesh mesh, Model model, Optimizer optimizer, Map<String, ?> options) {
    super(create(mesh, model, optimizer, options));
  }

  private static long create(Mesh mesh, Model model, Optimizer optimizer, Map<String, ?> map) {
    long me = optional(mesh);
    long mo = require(model, "model");
    long op = require(optimizer, "optimizer");
    return Options.with(map, o -> DtrainNative.dt_engine_create(me, mo, op, optional(o)));
  }

  /** One optimizer step on a batch of i32 [B, T] tensors; returns the loss before the update. */
  public double trainStep(Tensor inputs, Tensor targets) {
    return DtrainNative.dt_engine_train_step(ptr(), require(inputs, "inputs"),
        require(targets, "targets"));
  }

  /** The mean loss of a batch, changing nothing. */
  public double eval(Tensor inputs, Tensor targets) {
    return DtrainNative.dt_engine_eval(ptr(), require(inputs, "inputs"), require(targets, "targets"));
  }

  /** Saves parameters and optimizer state as "<pathStem>.index.json" and a data file. */
  public void save(String pathStem) {
    DtrainNative.dt_engine_save(ptr(), requireArg(pathStem, "pathStem"));
  }

  /** Loads what save wrote at pathStem (nothing changes on failure: DT_ERR_IO if missing). */
  public void load(String pathStem) {
    DtrainNative.dt_engine_load(ptr(), requireArg(pathStem, "pathStem"));
  }

  /** Optimizer steps taken so far. */
  public long step() {
    return DtrainNative.dt_engine_step(ptr());
  }

  /** The last train step's metrics as one JSON line ("" before any). */
  public String lastStatsJson() {
    return DtrainNative.dt_engine_last_stats_json(ptr());
  }

  /** The last generate's statistics as JSON ("" before any). */
  public String lastGenerateStatsJson() {
    return DtrainNative.dt_engine_last_generate_stats_json(ptr());
  }

  /**
   * Continues each prompt; returns the new tokens of each. options: null or
   * "max_new_tokens" (default 16), "temperature" (0: greedy), "top_k", "top_p", "seed",
   * "stop_token".
   */
  public int[][] generate(int[][] prompts, Options options) {
    return generate(prompts, options, null);
  }

  public int[][] generate(int[][] prompts, Map<String, ?> options) {
    return Options.with(options, o -> generate(prompts, o, null));
  }

  /** One prompt's new tokens. */
  public int[] generate(int[] prompt, Options options) {
    return generate(new int[][] {requireArg(prompt, "prompt")}, options, null)[0];
  }

  public int[] generate(int[] prompt, Map<String, ?> options) {
    return generate(new int[][] {requireArg(prompt, "prompt")}, options)[0];
  }

  /** generate, calling {@code listener} with every token as it is made (null: none). */
  public int[][] generate(int[][] prompts, Options options, TokenListener listener) {
    long e = ptr();
    requireArg(prompts, "prompts");
    if (prompts.length == 0) throw new IllegalArgumentException("prompts must hold at least one prompt");
    long total = 0;
    long[] lengths = new long[prompts.length];
    for (int i = 0; i < prompts.length; ++i) {
      requireArg(prompts[i], "prompts[" + i + "]");
      lengths[i] = prompts[i].length;
      total += prompts[i].length;
    }
    if (total > Integer.MAX_VALUE - 8) throw new IllegalArgumentException("prompts too long");
    int[] tokens = new int[(int) total];
    int at = 0;
    for (int[] p : prompts) {
      System.arraycopy(p, 0, tokens, at, p.length);
      at += p.length;
    }
    long maxNew = options == null ? DEFAULT_MAX_NEW_TOKENS
        : options.getIntOr("max_new_tokens", DEFAULT_MAX_NEW_TOKENS);
    // The library validates max_new_tokens; the capacity only has to hold what it allows.
    long capacity = Math.max(1, Math.min(maxNew, (Integer.MAX_VALUE - 8) / prompts.length));
    int[] out = new int[(int) (capacity * prompts.length)];
    long[] outLengths = new long[prompts.length];
    long o = optional(options);
    if (listener == null) {
      DtrainNative.dt_engine_generate(e, tokens, lengths, o, out, capacity, outLengths);
    } else {
      DtrainNative.dt_engine_generate_stream(e, tokens, lengths, o, listener, out, capacity, outLengths);
    }
    int[][] result = new int[prompts.length][];
    for (int i = 0; i < prompts.length; ++i) {
      int n = (int) Math.min(outLengths[i], capacity);
      result[i] = new int[n];
      System.arraycopy(out, (int) (i * capacity), result[i], 0, n);
    }
    return result;
  }

  @Override
  void destroy(long p) {
    DtrainNative.dt_engine_destroy(p);
  }
}
