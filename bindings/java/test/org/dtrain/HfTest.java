package org.dtrain;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Hugging Face models and tokenizers through the binding, held to the fixtures' references:
 * transformers' greedy ids (tests/fixtures/hf/models/NAME/reference.safetensors), the
 * tokenizers library's ids (tokenizers/FAMILY/cases.json) and transformers' chat template
 * output (chat_templates.json), copied here.
 */
class HfTest {
  /** tests/fixtures/hf of the source tree (test.sh passes -Ddtrain.test.fixtures). */
  static final Path HF = Path.of(System.getProperty("dtrain.test.fixtures", "../../tests/fixtures"), "hf");
  static final String UNICODE = "Héllo, \"wörld\" — what's 2+2? 😀 日本語 naïve\n\tcafé";

  // reference.safetensors: prompt_ids and transformers' greedy_ids.
  static final int[] QWEN2_PROMPT = {21, 146, 184, 497, 457, 233, 334, 185, 237, 186, 176, 152};
  static final int[] QWEN2_GREEDY = {48, 48, 48, 48, 48, 48, 48, 48};
  static final int[] LLAMA_PROMPT = {437, 381, 26, 180, 288, 267, 394, 470, 306, 192, 5, 361};
  static final int[] LLAMA_GREEDY = {442, 413, 172, 413, 410, 413, 410, 413};

  // chat_templates.json: conversation "2" and what transformers renders with "chatml".
  static final List<Message> CONVERSATION = List.of(
      Message.user("Héllo, \"wörld\" — what's 2+2? 😀"), Message.assistant("  It's 4.\n\nAnything else?  "));
  static final String CHATML_2 = "<|im_start|>user\nHéllo, \"wörld\" — what's 2+2? 😀<|im_end|>\n"
      + "<|im_start|>assistant\n  It's 4.\n\nAnything else?  <|im_end|>\n";
  static final String GENERATION_PROMPT = "<|im_start|>assistant\n";

  static String modelDir(String name) {
    return HF.resolve("models").resolve(name).toString();
  }

  static String tokenizerJson(String family) {
    return HF.resolve("tokenizers").resolve(family).resolve("tokenizer.json").toString();
  }

  /** An integer field of a JSON report (the library writes them compactly). */
  static long jsonLong(String json, String key) {
    Matcher m = Pattern.compile("\"" + key + "\":(-?\\d+)").matcher(json);
    assertTrue(m.find(), key + " in " + json);
    return Long.parseLong(m.group(1));
  }

  static int[] greedy(Model model, int[] prompt, int n) {
    try (Optimizer opt = new Optimizer(model, "sgd", Map.of("lr", 0.0));
        Engine engine = new Engine(null, model, opt)) {
      return engine.generate(prompt, Map.of("max_new_tokens", n));
    }
  }

  @Test
  void fromHfGeneratesTheReferenceGreedyIds() {
    for (String name : new String[] {"qwen2", "llama"}) {
      String info = Hf.inspectJson(modelDir(name));
      assertTrue(info.contains(name.equals("qwen2") ? "\"Qwen2ForCausalLM\"" : "\"LlamaForCausalLM\""), info);
      try (Model model = Model.fromHf(modelDir(name))) {
        assertEquals(jsonLong(info, "parameters"), model.paramCount());
        int[] prompt = name.equals("qwen2") ? QWEN2_PROMPT : LLAMA_PROMPT;
        int[] want = name.equals("qwen2") ? QWEN2_GREEDY : LLAMA_GREEDY;
        assertArrayEquals(want, greedy(model, prompt, want.length), name);
      }
    }
    try (Model model = Model.fromHf(modelDir("qwen2"), Map.of("precision", "f32", "context", 32))) {
      assertTrue(model.paramCount() > 0);
    }
  }

  @Test
  void saveHfRoundTrip(@TempDir Path dir) {
    String module = dir.resolve("module").toString();
    String fromEngine = dir.resolve("engine").toString();
    long count;
    try (Model model = Model.fromHf(modelDir("qwen2"))) {
      count = model.paramCount();
      model.saveHf(module, Map.of("tokenizer_from", HF.resolve("tokenizers/qwen2").toString(),
          "eos_token_ids", new int[] {7, 9}));
      try (Optimizer opt = new Optimizer(model, "sgd"); Engine engine = new Engine(null, model, opt)) {
        engine.saveHf(fromEngine, Map.of("precision", "bf16"));
      }
    }
    assertTrue(Files.isRegularFile(dir.resolve("module/tokenizer.json")));
    assertTrue(Hf.inspectJson(module).contains("\"eos_token_ids\":[7,9]"), Hf.inspectJson(module));
    assertTrue(Hf.inspectJson(fromEngine).contains("\"stored_dtype\":\"bf16\""), Hf.inspectJson(fromEngine));
    try (Model again = Model.fromHf(module)) {
      assertEquals(count, again.paramCount());
      assertArrayEquals(QWEN2_GREEDY, greedy(again, QWEN2_PROMPT, QWEN2_GREEDY.length));
    }
    try (Model again = Model.fromHf(fromEngine, Map.of("precision", "stored"))) {
      assertEquals(count, again.paramCount());
    }
    try (Tokenizer copied = new Tokenizer(module); Tokenizer original = new Tokenizer(tokenizerJson("qwen2"))) {
      assertArrayEquals(original.encode(UNICODE), copied.encode(UNICODE));
    }
  }

  @Test
  void stopTokensEndTheGeneration() {
    try (Model model = Model.fromHf(modelDir("llama"));
        Optimizer opt = new Optimizer(model, "sgd");
        Engine engine = new Engine(null, model, opt)) {
      int[] want = {LLAMA_GREEDY[0], LLAMA_GREEDY[1], LLAMA_GREEDY[2]};
      assertArrayEquals(want, engine.generate(LLAMA_PROMPT,
          Map.of("max_new_tokens", 8, "stop_tokens", new int[] {LLAMA_GREEDY[2], 0})));
      assertArrayEquals(want, engine.generate(LLAMA_PROMPT,
          Map.of("max_new_tokens", 8, "stop_tokens", String.valueOf(LLAMA_GREEDY[2]))));
    }
  }

  @Test
  void tokenizerRoundTripAndTheTokenizersLibrarysIds() {
    // cases.json's "❤️✨😀": ids, ids with special tokens, and their decodings.
    Object[][] cases = {
      {"qwen2", new int[] {158, 251, 97, 171, 116, 237, 158, 250, 101, 371},
          new int[] {158, 251, 97, 171, 116, 237, 158, 250, 101, 371}, "❤️✨😀"},
      {"llama2", new int[] {328, 229, 160, 167, 242, 187, 146, 229, 159, 171, 243, 162, 155, 131},
          new int[] {1, 328, 229, 160, 167, 242, 187, 146, 229, 159, 171, 243, 162, 155, 131}, "<s> ❤️✨😀"},
    };
    for (Object[] c : cases) {
      try (Tokenizer tok = new Tokenizer(tokenizerJson((String) c[0]))) {
        int[] ids = tok.encode(UNICODE);
        assertTrue(ids.length > 10);
        assertEquals(UNICODE, tok.decode(ids));
        assertEquals(512, tok.vocabSize());
        assertArrayEquals((int[]) c[1], tok.encode("❤️✨😀", false), (String) c[0]);
        assertArrayEquals((int[]) c[2], tok.encode("❤️✨😀"), (String) c[0]);
        assertEquals(c[3], tok.decode((int[]) c[2], false));
        assertEquals("❤️✨😀", tok.decode((int[]) c[2], true));
        assertEquals("", tok.decode(new int[0]));
      }
    }
  }

  @Test
  void specialTokensAndInfo() {
    try (Tokenizer tok = new Tokenizer(tokenizerJson("llama2"))) {
      int bos = tok.tokenToId("<s>");
      assertEquals(bos, tok.encode("hi")[0]);
      String info = tok.infoJson();
      assertTrue(info.contains("{\"content\":\"<s>\",\"id\":" + bos + "}")
          || info.contains("{\"id\":" + bos + ",\"content\":\"<s>\"}"), info);
      assertTrue(info.contains("\"chat_template\":false"), info);
      DtrainException e = assertThrows(DtrainException.class, () -> tok.tokenToId("no-such-token"));
      assertEquals(Status.NOT_FOUND, e.status());
      e = assertThrows(DtrainException.class, () -> tok.applyChatTemplate(CONVERSATION));
      assertEquals(Status.NOT_FOUND, e.status());
      assertTrue(e.getMessage().contains("chat_template"), e.getMessage());
      e = assertThrows(DtrainException.class, () -> tok.decode(new int[] {512}));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
    }
  }

  @Test
  void applyChatTemplateEqualsTransformers() {
    try (Tokenizer tok = new Tokenizer(tokenizerJson("qwen2"), "chatml")) {
      assertEquals(CHATML_2 + GENERATION_PROMPT, tok.applyChatTemplate(CONVERSATION, true));
      assertEquals(CHATML_2, tok.applyChatTemplate(CONVERSATION, false));
      assertTrue(tok.infoJson().contains("\"chat_template\":true"));
      // Quotes, backslashes and control characters cross as JSON.
      String odd = "a \"q\" \\ \u0001\t z";
      assertEquals("<|im_start|>user\n" + odd + "<|im_end|>\n", tok.applyChatTemplate(List.of(Message.user(odd)), false));
    }
    try (Tokenizer tok = new Tokenizer(tokenizerJson("llama2"), "llama2")) {
      DtrainException e = assertThrows(DtrainException.class,
          () -> tok.applyChatTemplate(List.of(Message.user("a"), Message.user("b"))));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage().contains("alternate"), e.getMessage());
    }
    DtrainException e = assertThrows(DtrainException.class, () -> new Tokenizer(tokenizerJson("qwen2"), "no-such-family"));
    assertEquals(Status.INVALID_ARGUMENT, e.status());
  }

  /** A model directory: tokenizer.json with tokenizer_config.json and generation_config.json. */
  @Test
  void aModelDirectorysTokenizer() {
    try (Tokenizer llama = new Tokenizer(modelDir("llama"), "llama2")) {
      String info = llama.infoJson();
      assertEquals(1, jsonLong(info, "bos_token_id"));
      assertTrue(info.contains("\"eos_token_ids\":[2]") && info.contains("\"bos_token\":\"<s>\""), info);
      // chat_templates.json: transformers' llama2 rendering of conversation "2".
      String want = "<s>[INST] Héllo, \"wörld\" — what's 2+2? 😀 [/INST] It's 4.\n\nAnything else? </s>";
      assertEquals(want, llama.applyChatTemplate(CONVERSATION, true));
      assertEquals(want, llama.applyChatTemplate(CONVERSATION, false));
    }
    try (Tokenizer qwen = new Tokenizer(modelDir("qwen2"));
        Model model = Model.fromHf(modelDir("qwen2"));
        Optimizer opt = new Optimizer(model, "sgd");
        Engine engine = new Engine(null, model, opt);
        Detokenizer d = qwen.detokenizer(true)) {
      String info = qwen.infoJson();
      assertTrue(info.contains("\"eos_token_ids\":[511]") && info.contains("\"chat_template\":true"), info);
      String text = qwen.applyChatTemplate(CONVERSATION); // the directory's own template
      assertTrue(text.endsWith(GENERATION_PROMPT) && text.contains(CONVERSATION.get(1).content()), text);
      // Text in, generation, text out: the model and its tokenizer together.
      int[] out = engine.generate(qwen.encode(text, false),
          Map.of("max_new_tokens", 6, "stop_tokens", new int[] {511}));
      StringBuilder pieces = new StringBuilder();
      for (int id : out) pieces.append(d.push(id));
      pieces.append(d.finish());
      assertTrue(out.length > 0);
      assertEquals(qwen.decode(out), pieces.toString());
    }
  }

  @Test
  void detokenizerPiecesConcatenateToDecode() {
    for (String family : new String[] {"qwen2", "llama2"}) {
      Tokenizer tok = new Tokenizer(tokenizerJson(family));
      int[] ids = tok.encode(UNICODE);
      for (boolean skip : new boolean[] {true, false}) {
        try (Detokenizer d = tok.detokenizer(skip)) {
          List<String> pieces = new ArrayList<>();
          for (int id : ids) {
            String piece = d.push(id);
            if (!piece.isEmpty()) pieces.add(piece);
          }
          pieces.add(d.finish());
          assertTrue(pieces.size() > 2, pieces.toString());
          assertEquals(tok.decode(ids, skip), String.join("", pieces));
          DtrainException e = assertThrows(DtrainException.class, () -> d.push(ids[0]));
          assertTrue(e.getMessage().contains("finish"), e.getMessage());
        }
      }
      // The detokenizer keeps what it needs of a tokenizer closed first.
      Detokenizer d = new Detokenizer(tok);
      tok.close();
      assertThrows(IllegalStateException.class, () -> tok.encode("x"));
      assertTrue(!(d.push(ids[1]) + d.finish()).isEmpty());
      d.close();
      d.close();
      assertThrows(IllegalStateException.class, () -> d.push(1));
      assertThrows(IllegalStateException.class, () -> new Detokenizer(tok));
    }
  }

  @Test
  void oneTokenizerManyThreads() throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(4);
    try (Tokenizer tok = new Tokenizer(tokenizerJson("qwen2"))) {
      int[] want = tok.encode(UNICODE);
      List<Future<Boolean>> results = new ArrayList<>();
      for (int t = 0; t < 8; ++t) {
        results.add(pool.submit(() -> {
          for (int i = 0; i < 50; ++i) {
            if (!java.util.Arrays.equals(want, tok.encode(UNICODE))) return false;
          }
          return true;
        }));
      }
      for (Future<Boolean> r : results) assertTrue(r.get());
    } finally {
      pool.shutdown();
    }
  }

  @Test
  void missingDirectoryIsIoNamingThePath(@TempDir Path dir) {
    String missing = dir.resolve("no-such-model").toString();
    for (Runnable call : new Runnable[] {
        () -> Model.fromHf(missing), () -> Hf.inspectJson(missing), () -> new Tokenizer(missing)}) {
      DtrainException e = assertThrows(DtrainException.class, call::run);
      assertEquals(Status.IO, e.status());
      assertTrue(e.getMessage().contains(missing), e.getMessage());
    }
    DtrainException e = assertThrows(DtrainException.class, () -> Model.fromHf(modelDir("qwen2"), Map.of("precision", "f8")));
    assertEquals(Status.INVALID_ARGUMENT, e.status());
    assertThrows(NullPointerException.class, () -> Model.fromHf(null));
    assertThrows(NullPointerException.class, () -> new Detokenizer(null));
  }
}
