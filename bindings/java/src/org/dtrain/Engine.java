package org.dtrain;

import static java.lang.ref.Reference.reachabilityFence;

import java.util.Map;
import java.util.function.Supplier;
import org.dtrain.internal.DtrainNative;

/**
 * Trains, evaluates, generates with and checkpoints a GPT (dt_engine). With a mesh whose
 * axes above 1 are "dp" and "tp" it trains data and tensor parallel. It keeps the mesh, model
 * and optimizer alive, so those may be closed first. One thread at a time; while a
 * {@link TokenStream} of it is open, the stream's own thread uses it (other calls throw
 * IllegalStateException), and closing the engine closes that stream first.
 *
 * <p>trainStep, eval and generate take an optional {@link CancelToken}: raised from any
 * thread, it ends the call with {@link CancelledException} at the next check point and the
 * engine stays usable (a cancelled train step changes nothing).
 */
public final class Engine extends Handle {
  private static final int DEFAULT_MAX_NEW_TOKENS = 16;

  private volatile TokenStream stream; // the open stream, whose worker thread uses the engine

  /** An engine with no options; mesh may be null (this process alone). */
  public Engine(Mesh mesh, Model model, Optimizer optimizer) {
    this(mesh, model, optimizer, (Options) null);
  }

  /** options: null or "micro_batches", "max_grad_norm", "schedule", "zero", ... (dtrain.h). */
  public Engine(Mesh mesh, Model model, Optimizer optimizer, Options options) {
    super(DtrainNative.dt_engine_create(optional(mesh), require(model, "model"),
        require(optimizer, "optimizer"), optional(options)), DtrainNative::dt_engine_destroy);
    reachabilityFence(mesh);
    reachabilityFence(model);
    reachabilityFence(optimizer);
    reachabilityFence(options);
  }

  public Engine(Mesh mesh, Model model, Optimizer optimizer, Map<String, ?> options) {
    super(create(mesh, model, optimizer, options), DtrainNative::dt_engine_destroy);
    reachabilityFence(mesh);
    reachabilityFence(model);
    reachabilityFence(optimizer);
  }

  private static long create(Mesh mesh, Model model, Optimizer optimizer, Map<String, ?> map) {
    long me = optional(mesh);
    long mo = require(model, "model");
    long op = require(optimizer, "optimizer");
    return Options.with(map, o -> DtrainNative.dt_engine_create(me, mo, op, optional(o)));
  }

  /** One optimizer step on a batch of i32 [B, T] tensors; returns the loss before the update. */
  public double trainStep(Tensor inputs, Tensor targets) {
    try {
      return DtrainNative.dt_engine_train_step(engine(), require(inputs, "inputs"),
          require(targets, "targets"));
    } finally {
      reachabilityFence(this);
      reachabilityFence(inputs);
      reachabilityFence(targets);
    }
  }

  /** trainStep, ended by {@code cancel} (CancelledException; then nothing changed). */
  public double trainStep(Tensor inputs, Tensor targets, CancelToken cancel) {
    return cancellable(cancel, () -> trainStep(inputs, targets));
  }

  /** The mean loss of a batch, changing nothing. */
  public double eval(Tensor inputs, Tensor targets) {
    try {
      return DtrainNative.dt_engine_eval(engine(), require(inputs, "inputs"), require(targets, "targets"));
    } finally {
      reachabilityFence(this);
      reachabilityFence(inputs);
      reachabilityFence(targets);
    }
  }

  /** eval, ended by {@code cancel} (CancelledException). */
  public double eval(Tensor inputs, Tensor targets, CancelToken cancel) {
    return cancellable(cancel, () -> eval(inputs, targets));
  }

  /** Saves parameters and optimizer state as "<pathStem>.index.json" and a data file. */
  public void save(String pathStem) {
    DtrainNative.dt_engine_save(engine(), requireArg(pathStem, "pathStem"));
    reachabilityFence(this);
  }

  /** Loads what save wrote at pathStem (nothing changes on failure: DT_ERR_IO if missing). */
  public void load(String pathStem) {
    DtrainNative.dt_engine_load(engine(), requireArg(pathStem, "pathStem"));
    reachabilityFence(this);
  }

  /**
   * Writes the engine's current weights as a Hugging Face directory, as {@link Model#saveHf}
   * does, gathered first under tp, pp, dp or ZeRO (collective: under mpirun every process
   * calls it, and rank 0 writes). The same options (null: none).
   */
  public void saveHf(String dir, Options options) {
    DtrainNative.dt_engine_save_hf(engine(), requireArg(dir, "dir"), optional(options));
    reachabilityFence(this);
    reachabilityFence(options);
  }

  public void saveHf(String dir) {
    saveHf(dir, (Options) null);
  }

  public void saveHf(String dir, Map<String, ?> options) {
    requireArg(dir, "dir");
    Options.with(options, o -> {
      saveHf(dir, o);
      return null;
    });
  }

  /** Optimizer steps taken so far. */
  public long step() {
    try {
      return DtrainNative.dt_engine_step(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /** The last train step's metrics as one JSON line ("" before any). */
  public String lastStatsJson() {
    try {
      return DtrainNative.dt_engine_last_stats_json(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /** The last generate's statistics as JSON ("" before any). */
  public String lastGenerateStatsJson() {
    try {
      return DtrainNative.dt_engine_last_generate_stats_json(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /**
   * Continues each prompt; returns the new tokens of each. options: null or
   * "max_new_tokens" (default 16), "temperature" (0: greedy), "top_k", "top_p", "seed",
   * "stop_token", "stop_tokens" (an int[], such as a tokenizer's end-of-sequence ids, or
   * "3,7": a prompt ends after emitting one of them).
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

  /** One prompt's new tokens, ended by {@code cancel} (CancelledException). */
  public int[] generate(int[] prompt, Map<String, ?> options, CancelToken cancel) {
    int[][] prompts = {requireArg(prompt, "prompt")};
    return Options.with(options, o -> generate(prompts, o, null, cancel))[0];
  }

  /**
   * generate, ended by {@code cancel} (CancelledException), calling {@code listener} (null:
   * none) with every token as it is made.
   */
  public int[][] generate(int[][] prompts, Options options, TokenListener listener, CancelToken cancel) {
    return cancellable(cancel, () -> generate(prompts, options, listener));
  }

  /**
   * generate, calling {@code listener} with every token as it is made (null: none). If the
   * listener throws, the generation stops within one decode step and its exception
   * propagates.
   */
  public int[][] generate(int[][] prompts, Options options, TokenListener listener) {
    long e = engine();
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
    reachabilityFence(this);
    reachabilityFence(options);
    int[][] result = new int[prompts.length][];
    for (int i = 0; i < prompts.length; ++i) {
      int n = (int) Math.min(outLengths[i], capacity);
      result[i] = new int[n];
      System.arraycopy(out, (int) (i * capacity), result[i], 0, n);
    }
    return result;
  }

  /**
   * Streams the new tokens of {@code prompt} as an iterator, generated on a thread of the
   * stream's own. Closing it (or leaving its try-with-resources block early) cancels the
   * generation and waits for that thread, so nothing is left behind:
   *
   * <pre>{@code
   * try (TokenStream tokens = engine.stream(prompt, Map.of("max_new_tokens", 64))) {
   *   while (tokens.hasNext()) {
   *     int t = tokens.next();
   *     if (t == '\n') break;   // stops the generation
   *   }
   * }
   * }</pre>
   *
   * options: as for generate (null: the defaults). A failure of the generation is thrown
   * by hasNext().
   */
  public TokenStream stream(int[] prompt, Map<String, ?> options) {
    requireArg(prompt, "prompt");
    if (prompt.length == 0) throw new IllegalArgumentException("prompt must hold at least one token");
    engine();
    Options o = Options.ofNullable(options);
    try {
      return new TokenStream(this, prompt.clone(), o);
    } catch (RuntimeException | Error e) {
      if (o != null) o.close();
      throw e;
    }
  }

  /** Runs {@code call} with {@code cancel} attached, detaching it afterwards. */
  private <R> R cancellable(CancelToken cancel, Supplier<R> call) {
    long e = engine();
    DtrainNative.dt_engine_set_cancel(e, require(cancel, "cancel"));
    try {
      return call.get();
    } finally {
      DtrainNative.dt_engine_set_cancel(e, 0);
      reachabilityFence(this);
      reachabilityFence(cancel);
    }
  }

  /** The raw handle for a call that runs the engine: not while another thread streams. */
  private long engine() {
    TokenStream s = stream;
    if (s != null && !s.runsOn(Thread.currentThread())) {
      throw new IllegalStateException("the engine is streaming: close its TokenStream first");
    }
    return ptr();
  }

  /** TokenStream's: it starts using the engine (one stream at a time). */
  synchronized void streamStarted(TokenStream s) {
    if (stream != null) throw new IllegalStateException("the engine is streaming: close its TokenStream first");
    stream = s;
  }

  /** TokenStream's: its thread is done with the engine. */
  synchronized void streamEnded(TokenStream s) {
    if (stream == s) stream = null;
  }

  @Override
  void closing() {
    TokenStream s = stream;
    if (s != null) s.close();
  }
}
