// Trains a tiny GPT on 3-digit addition with 2 data-parallel ranks in this process, saves a
// checkpoint and completes "123+456=". Build and run: see README.md next to this file.
// Idioms shown: try-with-resources for every handle, a watchdog that cancels a stuck train
// step (CancelToken) and the answer read token by token from a stream (TokenStream).

import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.dtrain.CancelToken;
import org.dtrain.DType;
import org.dtrain.Dataset;
import org.dtrain.Engine;
import org.dtrain.Loader;
import org.dtrain.Mesh;
import org.dtrain.Model;
import org.dtrain.Optimizer;
import org.dtrain.Tensor;
import org.dtrain.TokenStream;

public class TrainGpt {
  /** A train step that takes longer than this is stuck: the watchdog cancels it. */
  private static final long STEP_DEADLINE_S = 120;

  public static void main(String[] args) {
    String stem = args.length > 0 ? args[0] : "sample-ckpt/gpt";
    // DTRAIN_BACKEND=mpi under mpirun: one rank per process, and rank 0 prints.
    boolean mpi = "mpi".equals(System.getenv("DTRAIN_BACKEND"));
    ScheduledExecutorService watchdog = Executors.newSingleThreadScheduledExecutor(task -> {
      Thread t = new Thread(task, "watchdog");
      t.setDaemon(true);
      return t;
    });

    try (Mesh mesh = mpi ? new Mesh("mpi", 0) : new Mesh("local", 2);
        Model model = Model.gpt(Map.of("preset", "gpt-tiny", "seed", 1));
        Optimizer optimizer = new Optimizer(model, "adamw", Map.of("lr", 0.003));
        Engine engine = new Engine(mesh, model, optimizer);
        Dataset dataset = new Dataset("addition", Map.of("digits", 3, "seed", 7, "split", "train"));
        Loader loader = new Loader(dataset, Map.of("batch", 16, "seed", 0));
        Tensor inputs = new Tensor(DType.I32, 16, dataset.context());
        Tensor targets = new Tensor(DType.I32, 16, dataset.context());
        CancelToken cancel = new CancelToken()) {

      boolean printer = mesh.localRank(0) == 0;
      for (int step = 1; step <= 30; step++) {
        loader.next(inputs, targets);
        // cancel() may come from any thread; the step then throws CancelledException and
        // changes nothing (here it ends the run instead of hanging on a stuck machine).
        ScheduledFuture<?> alarm = watchdog.schedule(cancel::cancel, STEP_DEADLINE_S, TimeUnit.SECONDS);
        double loss;
        try {
          loss = engine.trainStep(inputs, targets, cancel);
        } finally {
          alarm.cancel(false);
        }
        if (printer) System.out.println("step " + step + " loss " + String.format(Locale.ROOT, "%.8f", loss));
      }

      engine.save(stem);
      if (printer) System.out.println("saved " + stem);

      String prompt = "123+456=";
      byte[] bytes = prompt.getBytes(StandardCharsets.US_ASCII);
      int[] tokens = new int[bytes.length];
      for (int i = 0; i < bytes.length; i++) tokens[i] = bytes[i];
      // Each token as soon as it is made; leaving the block early would stop the generation.
      StringBuilder line = new StringBuilder(prompt);
      try (TokenStream stream = engine.stream(tokens, Map.of("max_new_tokens", 5))) {
        while (stream.hasNext()) {
          int token = stream.next();
          line.append(token >= 0x20 && token < 0x7f ? (char) token : '?');
        }
      }
      if (printer) System.out.println(line);
    } finally {
      watchdog.shutdownNow();
    }
  }
}
