package org.dtrain.internal;

import java.io.File;

/**
 * Loads libdtrain_jni.so once, before the first native call: from the file named by the
 * system property {@code dtrain.jni.library} (or the environment variable
 * {@code DTRAIN_JNI_LIBRARY}) when set, else by name from {@code java.library.path}.
 * libdtrain.so itself is found by the dynamic loader (LD_LIBRARY_PATH or the system paths).
 */
final class NativeLoader {
  private static boolean loaded;

  private NativeLoader() {}

  static synchronized void load() {
    if (loaded) return;
    String path = System.getProperty("dtrain.jni.library");
    if (path == null || path.isEmpty()) path = System.getenv("DTRAIN_JNI_LIBRARY");
    try {
      if (path != null && !path.isEmpty()) {
        System.load(new File(path).getAbsolutePath());
      } else {
        System.loadLibrary("dtrain_jni");
      }
    } catch (UnsatisfiedLinkError e) {
      UnsatisfiedLinkError wrapped = new UnsatisfiedLinkError(
          "cannot load the dtrain JNI library (put libdtrain_jni.so on -Djava.library.path or name"
              + " it with -Ddtrain.jni.library=FILE; libdtrain.so must be on LD_LIBRARY_PATH): "
              + e.getMessage());
      wrapped.initCause(e);
      throw wrapped;
    }
    loaded = true;
  }
}
