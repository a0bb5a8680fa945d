// dtrain generate: loads a checkpoint and continues a prompt, streaming the new text as it
// is made; dtrain eval: loss and perplexity of a checkpoint on a dataset, or exact-match
// accuracy on held-out problems for the addition task.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "flags.h"
#include "hf_args.h"

namespace dtcli {
namespace {

// "\n" in a flag's value means a newline (shells make a real one awkward to type).
std::string unescape(const std::string& s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'n' || s[i + 1] == 't' || s[i + 1] == '\\')) {
      r += s[i + 1] == 'n' ? '\n' : s[i + 1] == 't' ? '\t' : '\\';
      ++i;
    } else {
      r += s[i];
    }
  }
  return r;
}

struct GenerateArgs {
  std::string checkpoint = "runs/latest/ckpt", prompt, stop, json;
  std::string model, chat, chat_template, precision;  // --model DIR: a Hugging Face directory and its tokenizer
  bool ignore_eos = false;
  int64_t max_new_tokens = 64, top_k = 0, seed = 0, tp = 1, pp = 1;
  double temperature = 0.0, top_p = 1.0;
};

// dt_engine_generate's options from the sampling flags.
Options sampling_options(const GenerateArgs& a) {
  Options g = make_options();
  set(g.get(), "max_new_tokens", a.max_new_tokens);
  set(g.get(), "temperature", a.temperature);
  set(g.get(), "top_k", a.top_k);
  set(g.get(), "top_p", a.top_p);
  set(g.get(), "seed", a.seed);
  return g;
}

// A model's bytes need not be UTF-8 (a byte-level model emits any byte; a BPE text can end
// inside a character), which JSON text must be: bytes that are not are written as U+FFFD
// instead of failing after the work (nlohmann's default is to throw type_error 316).
std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// Streams to stdout: the prompt with the first token (so a refused request prints
// nothing), then each token as it comes.
struct Stream {
  const std::string* prompt;
  bool started = false;
};

void print_token(void* user, int32_t, int32_t token) {
  Stream& s = *static_cast<Stream*>(user);
  if (!s.started) std::fputs(s.prompt->c_str(), stdout), s.started = true;
  std::fputc(static_cast<unsigned char>(token), stdout);
  std::fflush(stdout);
}

// --model: the tokens through the model's tokenizer, printed as they become final text
// (dt_detokenizer), ending at the model's end-of-sequence ids and at the --stop text.
struct TextStream {
  dt_detokenizer* detok;
  std::string stop, text;
  size_t printed = 0;
  bool stopped = false;
  // Prints what is final, holding back what could be the start of the stop text.
  void flush(bool last) {
    const size_t at = stop.empty() ? std::string::npos : text.find(stop);
    if (at != std::string::npos) text.resize(at), stopped = true;
    const size_t hold = stopped || last || stop.empty() ? 0 : std::min(text.size(), stop.size() - 1);
    const size_t ready = text.size() - hold;
    if (ready > printed) std::fwrite(text.data() + printed, 1, ready - printed, stdout), printed = ready;
    std::fflush(stdout);
  }
};

int32_t print_text(void* user, int32_t, int32_t token) {
  TextStream& s = *static_cast<TextStream*>(user);
  check(dt_detokenizer_push(s.detok, token), "decoding");
  s.text += read_text([&](char* b, size_t c, size_t* n) { return dt_detokenizer_text(s.detok, b, c, n); }, "decoding");
  s.flush(false);
  return s.stopped ? 1 : 0;
}

int run_generate_hf(const GenerateArgs& a) {
  if (a.prompt.empty() == a.chat.empty())
    throw UsageError("with --model give --prompt TEXT or --chat '[{\"role\":\"user\",\"content\":...}]', not both");
  if (!a.json.empty()) check_writable("--json", a.json);  // before loading and generating, not after
  Loaded l;
  l.model = load_hf_module(a.model, a.precision, 0);
  attach_inference_engine(l, a.tp, a.pp);
  Tokenizer tok = load_tokenizer(a.model, a.chat_template);
  const nlohmann::json info = tokenizer_info(tok.get());
  std::vector<int32_t> ids;
  std::string shown;
  if (!a.chat.empty()) {
    shown = read_text([&](char* b, size_t c, size_t* n) {
      return dt_tokenizer_apply_chat_template(tok.get(), a.chat.c_str(), 1, b, c, n);
    }, "applying the chat template (--chat)");
    ids = encode(tok.get(), shown, false);  // the template's text holds its special tokens
  } else {
    shown = unescape(a.prompt);
    ids = encode(tok.get(), shown, true);
  }
  if (ids.empty()) throw CliError("the prompt encodes to no tokens; accepted: some text");
  const int64_t length = static_cast<int64_t>(ids.size());
  Options g = sampling_options(a);
  if (!a.ignore_eos && !stop_ids_text(info).empty()) set(g.get(), "stop_tokens", stop_ids_text(info));
  dt_detokenizer* d = nullptr;
  check(dt_detokenizer_create(tok.get(), 1, &d), "dt_detokenizer_create");
  std::unique_ptr<dt_detokenizer, Deleter<dt_detokenizer, dt_detokenizer_destroy>> detok(d);
  TextStream stream{d, unescape(a.stop), "", 0, false};
  std::fputs(shown.c_str(), stdout);
  std::vector<int32_t> out(static_cast<size_t>(std::max<int64_t>(a.max_new_tokens, 1)));
  int64_t out_len = 0;
  const dt_status st = dt_engine_generate_stream_v2(l.engine.get(), ids.data(), &length, 1, g.get(), print_text,
                                                    &stream, out.data(), static_cast<int64_t>(out.size()), &out_len);
  if (st != DT_ERR_CANCELLED || !stream.stopped) check(st, "generating");
  check(dt_detokenizer_finish(d), "decoding");
  if (!stream.stopped)
    stream.text += read_text([&](char* b, size_t c, size_t* n) { return dt_detokenizer_text(d, b, c, n); }, "decoding");
  stream.flush(true);
  std::fputc('\n', stdout);
  nlohmann::json st_json = nlohmann::json::parse(read_text(
      [&](char* b, size_t c, size_t* n) { return dt_engine_last_generate_stats_json(l.engine.get(), b, c, n); },
      "dt_engine_last_generate_stats_json"));
  std::fprintf(stderr, "%lld prompt tokens; %s\n", static_cast<long long>(length),
               stream.stopped ? "stopped at the --stop text" : "");
  if (!a.json.empty()) {
    st_json["prompt_tokens"] = ids;
    st_json["text"] = stream.text;
    if (st == DT_OK) st_json["tokens"] = std::vector<int32_t>(out.begin(), out.begin() + out_len);
    write_file(a.json, json_text(st_json));
  }
  return 0;
}

int run_generate(const GenerateArgs& a) {
  if (!a.model.empty()) return run_generate_hf(a);
  if (!a.json.empty()) check_writable("--json", a.json);  // before loading and generating, not after
  Loaded l = load_checkpoint(a.checkpoint, a.tp, a.pp);
  const std::string prompt = unescape(a.prompt);
  if (prompt.empty()) throw CliError("--prompt is empty; accepted: at least one byte of text");
  std::vector<int32_t> ids(prompt.begin(), prompt.end());
  for (int32_t& t : ids) t = static_cast<unsigned char>(t);
  const int64_t length = static_cast<int64_t>(ids.size());
  Options g = sampling_options(a);
  const std::string stop = unescape(a.stop);
  if (stop.size() > 1) throw CliError("--stop \"" + a.stop + "\"; accepted: one byte, such as \"\\n\"");
  if (!stop.empty()) set(g.get(), "stop_token", static_cast<int64_t>(static_cast<unsigned char>(stop[0])));
  std::vector<int32_t> out(static_cast<size_t>(std::max<int64_t>(a.max_new_tokens, 1)));
  int64_t out_len = 0;
  Stream stream{&prompt};
  check(dt_engine_generate_stream(l.engine.get(), ids.data(), &length, 1, g.get(), print_token, &stream, out.data(),
                                  static_cast<int64_t>(out.size()), &out_len),
        "generating");
  if (!stream.started) std::fputs(prompt.c_str(), stdout);  // max_new_tokens 0
  std::fputc('\n', stdout);
  const std::string stats = read_text(
      [&](char* b, size_t c, size_t* n) { return dt_engine_last_generate_stats_json(l.engine.get(), b, c, n); },
      "dt_engine_last_generate_stats_json");
  nlohmann::json st = nlohmann::json::parse(stats);
  std::fprintf(stderr, "%lld new tokens, %.0f tokens/s, time to first token %.1f ms, inter-token latency %.2f ms\n",
               static_cast<long long>(st["new_tokens"].get<int64_t>()), st["tokens_per_s"].get<double>(),
               1e3 * st["time_to_first_token_s"].get<double>(), 1e3 * st["inter_token_latency_s"].get<double>());
  if (!a.json.empty()) {
    st["text"] = std::string(out.begin(), out.begin() + out_len);
    write_file(a.json, json_text(st));
  }
  return 0;
}

struct EvalArgs {
  std::string checkpoint = "runs/latest/ckpt", data = "addition", json;
  int64_t digits = 3, problems = 500, show = 8, context = 0, batch = 32, batches = 50, seed = 2;
};

int run_eval(const EvalArgs& a) {
  Loaded l = load_checkpoint(a.checkpoint);
  const DataSpec spec = parse_data_spec(a.data);
  const int64_t context = a.context > 0 ? a.context : l.info["config"].value("context", int64_t(0));
  nlohmann::json summary = {{"checkpoint", a.checkpoint}, {"step", l.info.value("step", int64_t(0))}};
  if (spec.kind == "addition") {
    refuse_if_too_big("--problems " + std::to_string(a.problems), example_bytes(a.problems), kExampleBytesWhy);
    Dataset test = open_dataset(spec, context, a.digits, a.problems, a.seed, "test");
    std::printf("held-out %lld-digit problems, answered by greedy generation:\n", static_cast<long long>(a.digits));
    ExactMatch em = exact_match(l.engine.get(), test.get(), a.problems, a.show, true);
    const double acc = em.total ? static_cast<double>(em.right) / static_cast<double>(em.total) : 0.0;
    std::printf("exact match: %lld / %lld = %.1f%%\n", static_cast<long long>(em.right),
                static_cast<long long>(em.total), 100.0 * acc);
    const EvalLoss e = eval_loss(l.engine.get(), test.get(), a.batch, a.batches);
    std::printf("loss on the answers: %.4f (%lld batches of %lld)\n", e.loss, static_cast<long long>(e.batches),
                static_cast<long long>(e.batch));
    summary["exact_match"] = {{"right", em.right}, {"total", em.total}, {"accuracy", acc}};
    summary["loss"] = e.loss;
    summary["batches"] = e.batches;
    summary["batch"] = e.batch;
  } else {
    Dataset data = open_dataset(spec, context, 0, 0, 0, "all");
    const EvalLoss e = eval_loss(l.engine.get(), data.get(), a.batch, a.batches);
    std::printf("loss %.4f, perplexity %.3f (%lld batches of %lld)\n", e.loss, std::exp(e.loss),
                static_cast<long long>(e.batches), static_cast<long long>(e.batch));
    summary["loss"] = e.loss;
    summary["perplexity"] = std::exp(e.loss);
    summary["batches"] = e.batches;
    summary["batch"] = e.batch;
  }
  if (!a.json.empty()) write_file(a.json, summary.dump(2) + "\n");
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* c = app.add_subcommand("generate", "Continue a prompt with a trained model, streaming the text");
  c->footer("Example:\n  dtrain generate --checkpoint runs/latest/ckpt --prompt \"123+456=\" --max-new-tokens 5");
  c->add_option("--checkpoint", a->checkpoint, "Checkpoint stem (what dtrain train wrote: RUN_DIR/ckpt)")->capture_default_str();
  c->add_option("--prompt", a->prompt, "Text to continue (\\n is a newline)");
  c->add_option("--model", a->model,
                "A Hugging Face model directory (instead of --checkpoint): its tokenizer, chat template and stop ids");
  c->add_option("--chat", a->chat, "With --model: a conversation as JSON, rendered with the model's chat template");
  c->add_option("--chat-template", a->chat_template, "With --model: a built-in template instead of the model's "
                "(chatml, llama3, llama2, mistral, zephyr)");
  c->add_option("--precision", a->precision, "With --model: f32 (default), bf16, f16 or stored");
  c->add_flag("--ignore-eos", a->ignore_eos, "With --model: do not stop at the model's end-of-sequence tokens");
  add_int(c, "--max-new-tokens", a->max_new_tokens, {0, 65536}, "Tokens to add (prompt + these must fit the context)");
  add_real(c, "--temperature", a->temperature, {0, 100, "greedy"}, "Higher: more random");
  add_int(c, "--top-k", a->top_k, {1, 16777216, "all"}, "Sample among the k likeliest tokens");
  add_real(c, "--top-p", a->top_p, {1e-6, 1}, "Sample among the likeliest tokens whose probability reaches p");
  add_int(c, "--seed", a->seed, {0, INT64_MAX}, "Sampling seed");
  c->add_option("--stop", a->stop, "Stop after this byte (e.g. \"\\n\"); with --model: at this text (left out)");
  add_int(c, "--tp", a->tp, {1, 1024},
          "Tensor-parallel ranks in this process (heads, features, vocabulary and the KV cache split)");
  add_int(c, "--pp", a->pp, {1, 1024},
          "Pipeline stages in this process (each holds its blocks and their layers' KV cache; x --tp ranks)");
  c->add_option("--json", a->json, "Also write the text and statistics as JSON to this file");
  c->callback([a] { throw Exit{run_generate(*a)}; });
}

void add_eval_command(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* c = app.add_subcommand("eval", "Loss and perplexity of a checkpoint, or exact-match accuracy on addition");
  c->footer("Examples:\n  dtrain eval --checkpoint runs/latest/ckpt --data addition --digits 3\n"
            "  dtrain eval --checkpoint runs/book/ckpt --data text:book.txt");
  c->add_option("--checkpoint", a->checkpoint, "Checkpoint stem")->capture_default_str();
  c->add_option("--data", a->data, "addition | text:PATH | tokens:PATH[:2|:4]")->capture_default_str();
  add_int(c, "--digits", a->digits, {1, 18}, "Operand digits for addition");
  add_int(c, "--problems", a->problems, {1, kMaxProblems}, "Held-out problems for addition");
  add_int(c, "--show", a->show, {0, kMaxProblems}, "Problems to print");
  add_int(c, "--context", a->context, {1, 65536, "the model's"}, "Tokens per example for text and token files");
  add_int(c, "--batch", a->batch, {1, 65536}, "Examples per loss batch");
  add_int(c, "--batches", a->batches, {1, 1000000000, "all: one pass over the data"}, "Most batches for the loss");
  add_int(c, "--seed", a->seed, {0, INT64_MAX}, "Seed of the held-out problems");
  c->add_option("--json", a->json, "Also write the figures as JSON to this file");
  c->callback([a] { throw Exit{run_eval(*a)}; });
}

}  // namespace dtcli
