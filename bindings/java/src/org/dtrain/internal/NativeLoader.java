package org.dtrain.internal;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Loads the native code once per process, before the first native call, from the first of:
 * <ol>
 *   <li>the file named by the system property {@code dtrain.jni.library} (or the environment
 *       variable {@code DTRAIN_JNI_LIBRARY}): libdtrain_jni.so, which finds libdtrain.so.0
 *       next to itself (its RUNPATH is $ORIGIN) or where the dynamic loader looks;
 *   <li>the jar itself: {@code /native/<os>-<arch>/} holds the libraries and a file
 *       {@code libraries} naming them in load order (libdtrain.so.0, then libdtrain_jni.so).
 *       They are copied to a new private directory (under {@code dtrain.native.dir}, default
 *       java.io.tmpdir) and loaded from there by absolute path, libdtrain first, so that
 *       neither java.library.path nor LD_LIBRARY_PATH is needed. The copies are deleted as
 *       soon as they are loaded (Linux keeps a loaded library mapped), so nothing is left
 *       behind even by a JVM that is killed; {@code -Ddtrain.native.keep=true} keeps them
 *       until the JVM exits instead (for debuggers and profilers that read the files);
 *   <li>{@code java.library.path}: libdtrain_jni by name.
 * </ol>
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
      } else if (!loadFromJar()) {
        System.loadLibrary("dtrain_jni");
      }
    } catch (UnsatisfiedLinkError | UncheckedIOException e) {
      UnsatisfiedLinkError wrapped = new UnsatisfiedLinkError("cannot load the dtrain native libraries ("
          + "this jar carries them for " + platform() + " only; or name libdtrain_jni.so with"
          + " -Ddtrain.jni.library=FILE, or put it on -Djava.library.path): " + e.getMessage());
      wrapped.initCause(e);
      throw wrapped;
    }
    loaded = true;
  }

  /** "linux-x86_64", "linux-aarch64", ...: the jar's directory for this machine. */
  static String platform() {
    String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
    String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
    if (os.startsWith("linux")) os = "linux";
    if (arch.equals("amd64") || arch.equals("x86-64")) arch = "x86_64";
    if (arch.equals("arm64")) arch = "aarch64";
    return os + "-" + arch;
  }

  /** Extracts and loads the jar's libraries; false when the jar has none for this platform. */
  private static boolean loadFromJar() {
    String dir = "/native/" + platform() + "/";
    List<String> names = libraryNames(dir + "libraries");
    if (names.isEmpty()) return false;
    boolean keep = Boolean.getBoolean("dtrain.native.keep");
    List<Path> files = new ArrayList<>();
    try {
      String parent = System.getProperty("dtrain.native.dir");
      Path to = parent == null || parent.isEmpty()
          ? Files.createTempDirectory("dtrain-native-")
          : Files.createTempDirectory(Paths.get(parent), "dtrain-native-");
      files.add(to);
      for (String name : names) {
        Path file = to.resolve(name);
        try (InputStream in = NativeLoader.class.getResourceAsStream(dir + name)) {
          if (in == null) throw new IOException("the jar lacks " + dir + name);
          Files.copy(in, file);
        }
        files.add(file);
      }
      for (int i = 1; i < files.size(); i++) System.load(files.get(i).toAbsolutePath().toString());
    } catch (IOException e) {
      throw new UncheckedIOException("extracting " + dir + " from the jar", e);
    } finally {
      if (keep) {
        // deleteOnExit works in reverse order of registration: the files, then their directory.
        for (Path f : files) f.toFile().deleteOnExit();
      } else {
        for (int i = files.size() - 1; i >= 0; i--) delete(files.get(i));
      }
    }
    return true;
  }

  private static void delete(Path file) {
    try {
      Files.deleteIfExists(file);
    } catch (IOException e) {
      file.toFile().deleteOnExit();
    }
  }

  /** The names listed in the jar's resource {@code index}, one per line; none if it is absent. */
  private static List<String> libraryNames(String index) {
    List<String> names = new ArrayList<>();
    try (InputStream in = NativeLoader.class.getResourceAsStream(index)) {
      if (in == null) return names;
      BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
      for (String line = r.readLine(); line != null; line = r.readLine()) {
        line = line.strip();
        if (!line.isEmpty() && !line.startsWith("#")) names.add(line);
      }
    } catch (IOException e) {
      throw new UncheckedIOException("reading " + index, e);
    }
    return names;
  }
}
