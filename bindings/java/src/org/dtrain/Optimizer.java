package org.dtrain;

import static java.lang.ref.Reference.reachabilityFence;

import java.util.Map;
import org.dtrain.internal.DtrainNative;

/**
 * Updates every parameter of one model (dt_optimizer): "adamw" (options "lr", "beta1",
 * "beta2", "eps", "weight_decay") or "sgd" ("lr", "momentum", "weight_decay", "nesterov").
 * Keeps the model alive.
 */
public final class Optimizer extends Handle {
  public Optimizer(Model model, String kind) {
    this(model, kind, (Options) null);
  }

  public Optimizer(Model model, String kind, Options options) {
    super(DtrainNative.dt_optimizer_create(require(model, "model"), requireArg(kind, "kind"),
        optional(options)), DtrainNative::dt_optimizer_destroy);
    reachabilityFence(model);
    reachabilityFence(options);
  }

  public Optimizer(Model model, String kind, Map<String, ?> options) {
    super(create(model, kind, options), DtrainNative::dt_optimizer_destroy);
    reachabilityFence(model);
  }

  private static long create(Model model, String kind, Map<String, ?> map) {
    long m = require(model, "model");
    requireArg(kind, "kind");
    return Options.with(map, o -> DtrainNative.dt_optimizer_create(m, kind, optional(o)));
  }

  /** One update from the accumulated gradients (host-driven loops; the engine steps itself). */
  public void step() {
    DtrainNative.dt_optimizer_step(ptr());
    reachabilityFence(this);
  }

  /** The learning rate of the following steps. */
  public void setLr(double lr) {
    DtrainNative.dt_optimizer_set_lr(ptr(), lr);
    reachabilityFence(this);
  }
}
