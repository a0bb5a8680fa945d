package org.dtrain;

import static java.lang.ref.Reference.reachabilityFence;

import java.util.Map;
import org.dtrain.internal.DtrainNative;

/**
 * Serves a GPT with continuous batching over a paged KV cache (dt_server), on the server's
 * own thread. Unlike the other handles, a server may be used by many threads at once
 * (submit, read requests, stats); close it once they are done. Closing ends every request
 * still in flight (ABORTED).
 *
 * <pre>{@code
 * try (Server server = new Server(null, model, Map.of("block_size", 16))) {
 *   Request r = server.submit(new int[] {1, 2, 3}, Map.of("max_tokens", 8));
 *   while (r.hasNext()) System.out.println(r.next());
 * }
 * }</pre>
 */
public final class Server extends Handle {
  /** A server over model's current weights (copied: do not train it while the server
   *  lives). mesh: null (one rank) or a "local" mesh (dp replicas, tp, pp). options: null or
   *  "block_size", "kv_blocks", "kv_cache_bytes", "max_num_seqs", "max_batched_tokens",
   *  "prefix_caching", "pp_blocks". */
  public Server(Mesh mesh, Model model, Options options) {
    super(DtrainNative.dt_server_create(optional(mesh), require(model, "model"), optional(options)),
        DtrainNative::dt_server_destroy);
    reachabilityFence(mesh);
    reachabilityFence(model);
    reachabilityFence(options);
  }

  public Server(Mesh mesh, Model model, Map<String, ?> options) {
    super(create(mesh, model, options), DtrainNative::dt_server_destroy);
    reachabilityFence(mesh);
    reachabilityFence(model);
  }

  private static long create(Mesh mesh, Model model, Map<String, ?> map) {
    long me = optional(mesh);
    long mo = require(model, "model");
    return Options.with(map, o -> DtrainNative.dt_server_create(me, mo, optional(o)));
  }

  /**
   * Queues a request for {@code prompt} (token ids) and returns it; iterate it for its new
   * tokens. options: null or "max_tokens" (default 16), "temperature" (0: greedy), "top_k",
   * "top_p", "seed", "stop_tokens" ("3,7"). DtrainException INVALID_ARGUMENT naming a bad
   * key or value; UNAVAILABLE while the server drains or after it failed.
   */
  public Request submit(int[] prompt, Options options) {
    requireArg(prompt, "prompt");
    if (prompt.length == 0) throw new IllegalArgumentException("prompt must hold at least one token");
    try {
      return new Request(this, DtrainNative.dt_server_submit(ptr(), prompt, optional(options)));
    } finally {
      reachabilityFence(options);
    }
  }

  public Request submit(int[] prompt, Map<String, ?> options) {
    return Options.with(options, o -> submit(prompt, o));
  }

  /** Stops accepting requests and waits up to timeoutMs for those in flight to end
   *  (DtrainException TIMEOUT if some still run then). */
  public void drain(int timeoutMs) {
    DtrainNative.dt_server_drain(ptr(), timeoutMs);
    reachabilityFence(this);
  }

  /** Statistics as JSON: {"requests":{"waiting":..,"running":..,"finished":..,..},
   *  "tokens":{..},"tokens_per_s":..,"ttft_s":{..},"itl_s":{..},"kv_cache":{..},..}. */
  public String statsJson() {
    try {
      return DtrainNative.dt_server_stats_json(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /** The same figures in Prometheus text format. */
  public String metricsText() {
    try {
      return DtrainNative.dt_server_metrics_text(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /** The model's context length. */
  public long context() {
    try {
      return DtrainNative.dt_server_model_info(ptr())[0];
    } finally {
      reachabilityFence(this);
    }
  }

  /** The model's vocabulary size. */
  public long vocabSize() {
    try {
      return DtrainNative.dt_server_model_info(ptr())[1];
    } finally {
      reachabilityFence(this);
    }
  }
}
