package org.dtrain;

import static java.lang.ref.Reference.reachabilityFence;

import java.util.Map;
import java.util.function.Function;
import org.dtrain.internal.DtrainNative;

/**
 * A bag of typed values under string keys (dt_options), read by the call it is passed to;
 * that call rejects unknown keys and values of the wrong type, naming what it accepts.
 * Build one fluently, {@code new Options().set("lr", 0.003).set("seed", 1)}, or from a map,
 * {@code Options.of(Map.of("lr", 0.003))}. Every call that takes Options also takes a
 * {@code Map<String, ?>}.
 */
public final class Options extends Handle {
  /** An empty bag. */
  public Options() {
    super(DtrainNative.dt_options_create(), DtrainNative::dt_options_destroy);
  }

  /**
   * A bag holding every entry of {@code values}: Integer, Long, Short, Byte as int;
   * Double, Float as double; Boolean as bool; String (any CharSequence) as string; an int[]
   * of token ids ("stop_tokens", "eos_token_ids") as the string "3,7".
   */
  public static Options of(Map<String, ?> values) {
    requireArg(values, "values");
    Options options = new Options();
    try {
      values.forEach(options::set);
    } catch (RuntimeException e) {
      options.close();
      throw e;
    }
    return options;
  }

  /** Options.of(values), or null when values is null. */
  static Options ofNullable(Map<String, ?> values) {
    return values == null ? null : of(values);
  }

  /**
   * How a call that takes a Map reaches the library: {@code call} gets Options.ofNullable(
   * values), which is closed once it returns (the library keeps no reference to it).
   */
  static <R> R with(Map<String, ?> values, Function<Options, R> call) {
    try (Options options = ofNullable(values)) {
      return call.apply(options);
    }
  }

  /** Sets {@code key} to a value of the type that the value's class maps to (see of()). */
  public Options set(String key, Object value) {
    requireArg(key, "key");
    if (value == null) throw new NullPointerException("value of option \"" + key + "\" must not be null");
    if (value instanceof Boolean b) return setBool(key, b);
    if (value instanceof Integer || value instanceof Long || value instanceof Short
        || value instanceof Byte) {
      return setInt(key, ((Number) value).longValue());
    }
    if (value instanceof Double || value instanceof Float) {
      return setDouble(key, ((Number) value).doubleValue());
    }
    if (value instanceof CharSequence s) return setString(key, s.toString());
    if (value instanceof int[] ids) {
      StringBuilder list = new StringBuilder();
      for (int id : ids) list.append(list.length() == 0 ? "" : ",").append(id);
      return setString(key, list.toString());
    }
    throw new IllegalArgumentException("option \"" + key + "\": a " + value.getClass().getName()
        + " is not an option value (use an int, long, double, boolean, String or int[])");
  }

  public Options setInt(String key, long value) {
    DtrainNative.dt_options_set_int(ptr(), requireArg(key, "key"), value);
    reachabilityFence(this);
    return this;
  }

  public Options setDouble(String key, double value) {
    DtrainNative.dt_options_set_double(ptr(), requireArg(key, "key"), value);
    reachabilityFence(this);
    return this;
  }

  public Options setBool(String key, boolean value) {
    DtrainNative.dt_options_set_bool(ptr(), requireArg(key, "key"), value ? 1 : 0);
    reachabilityFence(this);
    return this;
  }

  public Options setString(String key, String value) {
    DtrainNative.dt_options_set_string(ptr(), requireArg(key, "key"),
        requireArg(value, "value of option \"" + key + "\""));
    reachabilityFence(this);
    return this;
  }

  /** The int at {@code key}: DtrainException NOT_FOUND if absent, INVALID_ARGUMENT if another type. */
  public long getInt(String key) {
    try {
      return DtrainNative.dt_options_get_int(ptr(), requireArg(key, "key"));
    } finally {
      reachabilityFence(this);
    }
  }

  /** The double at {@code key} (an int value is read as a double too). */
  public double getDouble(String key) {
    try {
      return DtrainNative.dt_options_get_double(ptr(), requireArg(key, "key"));
    } finally {
      reachabilityFence(this);
    }
  }

  public boolean getBool(String key) {
    try {
      return DtrainNative.dt_options_get_bool(ptr(), requireArg(key, "key")) != 0;
    } finally {
      reachabilityFence(this);
    }
  }

  public String getString(String key) {
    try {
      return DtrainNative.dt_options_get_string(ptr(), requireArg(key, "key"));
    } finally {
      reachabilityFence(this);
    }
  }

  /** Number of keys. */
  public long count() {
    try {
      return DtrainNative.dt_options_count(ptr());
    } finally {
      reachabilityFence(this);
    }
  }

  /** The int at key, or {@code fallback} when the key is absent or holds another type. */
  long getIntOr(String key, long fallback) {
    try {
      return getInt(key);
    } catch (DtrainException e) {
      return fallback;
    }
  }

  @Override
  public String toString() {
    return isClosed() ? "Options(closed)" : "Options(" + count() + " keys)";
  }
}
