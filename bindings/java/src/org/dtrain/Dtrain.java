package org.dtrain;

import static java.lang.ref.Reference.reachabilityFence;

import java.util.Map;
import org.dtrain.internal.DtrainNative;

/** Library-wide calls: version, settings, the memory ledger, devices, trace, losses. */
public final class Dtrain {
  /** Bytes held now and at the peak. */
  public record MemoryStats(long currentBytes, long peakBytes) {}

  /** A loss and d loss / d pred (owned by the caller: close it). */
  public record LossWithGrad(double loss, Tensor grad) {}

  private Dtrain() {}

  /** "MAJOR.MINOR.PATCH" of the loaded library. */
  public static String version() {
    return DtrainNative.dt_version();
  }

  /** major*10000 + minor*100 + patch of the loaded library. */
  public static int versionNumber() {
    return DtrainNative.dt_version_number();
  }

  /** The version these bindings were generated from. */
  public static final int BINDING_VERSION_NUMBER = DtrainNative.DT_VERSION_NUMBER;

  /** A status code's name ("DT_OK", "DT_ERR_IO", ...; "DT_ERR_UNKNOWN" for others); see {@link Status}. */
  public static String statusName(int status) {
    return DtrainNative.dt_status_string(status);
  }

  /** Process-wide settings: "threads", "memory_limit_bytes", "pool_cache_bytes". */
  public static void configure(Options options) {
    DtrainNative.dt_configure(Handle.require(options, "options"));
    reachabilityFence(options);
  }

  public static void configure(Map<String, ?> options) {
    try (Options o = Options.of(Handle.requireArg(options, "options"))) {
      configure(o);
    }
  }

  /**
   * Finalizes MPI if libdtrain initialized it ({@code dt_shutdown}). libdtrain also does this
   * when the JVM exits normally; call it only where the process ends another way. Idempotent.
   */
  public static void shutdown() {
    DtrainNative.dt_shutdown();
  }

  /** Bytes held by tensors on {@code device} ("cpu", "cuda:N") under {@code tag}. */
  public static MemoryStats memoryStats(String device, MemTag tag) {
    long[] v = DtrainNative.dt_memory_stats(Handle.requireArg(device, "device"),
        Handle.requireArg(tag, "tag").code());
    return new MemoryStats(v[0], v[1]);
  }

  /** The same for one rank's memory. */
  public static MemoryStats memoryRankStats(String device, int rank, MemTag tag) {
    long[] v = DtrainNative.dt_memory_rank_stats(Handle.requireArg(device, "device"), rank,
        Handle.requireArg(tag, "tag").code());
    return new MemoryStats(v[0], v[1]);
  }

  /** Sets every peak on {@code device} to its current value. */
  public static void memoryResetPeak(String device) {
    DtrainNative.dt_memory_reset_peak(Handle.requireArg(device, "device"));
  }

  /** The ledger of {@code device} as JSON. */
  public static String memoryReportJson(String device) {
    return DtrainNative.dt_memory_report_json(Handle.requireArg(device, "device"));
  }

  /** Number of devices of {@code kind} ("cpu": 1; "cuda": 0 without a usable GPU). */
  public static int deviceCount(String kind) {
    return DtrainNative.dt_device_count(Handle.requireArg(kind, "kind"));
  }

  /** Starts (clearing) or stops recording the timeline. */
  public static void traceEnable(boolean on) {
    DtrainNative.dt_trace_enable(on ? 1 : 0);
  }

  /** Writes the recorded timeline as Chrome trace-event JSON. */
  public static void traceWrite(String path) {
    DtrainNative.dt_trace_write(Handle.requireArg(path, "path"));
  }

  /**
   * The layout planner's report as JSON ({@code dt_plan_json}), without building the model:
   * {@code config} holds {@link Model#gpt}'s keys, {@code plan} the layout's ("dp", "tp",
   * "pp", "micro_batch", "seq_len", "accumulation", "sequence_parallel", "pp_schedule",
   * "virtual_stages", ...; null for none). With "cluster" (a built-in name such as
   * "h100-node" or "h100-node:16", or a cluster's JSON text, e.g. {@link
   * #calibrateClusterJson}'s) the report gains "cost" (per rank "memory" and "peak_bytes",
   * "step_s", "tokens_per_s", "mfu", "time", "fits"), read with "zero", "recompute" and
   * "in_process"; "search" true instead returns {"search": ...}, the "top" fastest layouts of
   * the cluster's devices for "global_batch" sequences. An unknown cluster name throws
   * {@link Status#NOT_FOUND}, the message naming the built-in ones.
   */
  public static String planJson(Options config, Options plan) {
    try {
      return DtrainNative.dt_plan_json(Handle.optional(config), Handle.optional(plan));
    } finally {
      reachabilityFence(config);
      reachabilityFence(plan);
    }
  }

  public static String planJson(Map<String, ?> config, Map<String, ?> plan) {
    return Options.with(config, c -> Options.with(plan, p -> planJson(c, p)));
  }

  /**
   * This machine measured as a cluster for {@link #planJson}'s "cluster", as JSON
   * ({@code dt_cluster_calibrate_json}): GEMM, attention and elementwise rates on one core and
   * on all of them, and the local backend's all-reduce latency and bandwidth. It takes a few
   * seconds and times the cores: call it with nothing else heavy running.
   */
  public static String calibrateClusterJson() {
    return DtrainNative.dt_cluster_calibrate_json(0);
  }

  /**
   * The field-by-field median of several calibrations of one machine, as JSON
   * ({@code dt_cluster_median_json}): {@code clusters} is a JSON array of clusters ({@link
   * #calibrateClusterJson}'s); each rate, fitted figure and link figure is their median. On a
   * shared host single calibrations' fitted figures differ by 10-20%.
   */
  public static String medianClusterJson(String clusters) {
    return DtrainNative.dt_cluster_median_json(Handle.requireArg(clusters, "clusters"));
  }

  /** A loss ("mse" or "cross_entropy") of pred against target. */
  public static double loss(String kind, Tensor pred, Tensor target) {
    try {
      return DtrainNative.dt_loss(Handle.requireArg(kind, "kind"), Handle.require(pred, "pred"),
          Handle.require(target, "target"));
    } finally {
      reachabilityFence(pred);
      reachabilityFence(target);
    }
  }

  /** A loss and its gradient with respect to pred. */
  public static LossWithGrad lossWithGrad(String kind, Tensor pred, Tensor target) {
    double[] loss = new double[1];
    long grad = DtrainNative.dt_loss_with_grad(Handle.requireArg(kind, "kind"),
        Handle.require(pred, "pred"), Handle.require(target, "target"), loss);
    reachabilityFence(pred);
    reachabilityFence(target);
    return new LossWithGrad(loss[0], Tensor.adopt(grad));
  }
}
