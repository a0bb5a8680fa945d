// dtrain serve: a checkpoint, or with --model a Hugging Face model directory and its
// tokenizer, behind an OpenAI-compatible HTTP API (cpp-httplib; see docs/dependencies.md):
// POST /v1/completions and (--model) POST /v1/chat/completions, streamed as server-sent
// events when "stream": true; GET /v1/models, GET /health, GET /metrics (Prometheus).
// Requests run on a dt_server: continuous batching over a paged KV cache, on --tp / --pp /
// --replicas ranks of this process. Ctrl-C (or SIGTERM) stops taking requests, lets those in
// flight finish, and exits 0.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <httplib.h>
#include <memory>
#include <thread>

#include "commands.h"
#include "flags.h"
#include "hf_args.h"
#include "serve_chat.h"
#include "serve_http.h"

namespace dtcli {
namespace {

struct ServeArgs {
  std::string checkpoint = "runs/latest/ckpt", host = "127.0.0.1", model_name, port_file, json,
      backend = "local";
  std::string model, chat_template, precision;  // --model DIR: a Hugging Face directory
  int64_t port = 8000, tp = 1, pp = 1, replicas = 1, block_size = 16, kv_blocks = 0, kv_cache_mib = 64;
  int64_t max_num_seqs = 16, max_batched_tokens = 256, drain_seconds = 60;
  bool no_prefix_caching = false;
};

// The first Ctrl-C drains; a second one (or the end of --drain-seconds) ends the requests
// still running.
std::atomic<bool> g_stop{false}, g_force{false};
std::atomic<int> g_open{0};  // completions whose response is not finished
extern "C" void on_signal(int) {
  if (g_stop) g_force = true;
  g_stop = true;
}

using Server = std::unique_ptr<dt_server, Deleter<dt_server, dt_server_destroy>>;

std::string text_of(dt_server* s, dt_status (*fn)(dt_server*, char*, size_t, size_t*), const char* what) {
  return read_text([&](char* b, size_t c, size_t* n) { return fn(s, b, c, n); }, what);
}

void send_error(httplib::Response& res, const HttpError& e) {
  res.status = e.status;
  res.set_content(e.body(), "application/json");
}

std::string sse(const nlohmann::json& j) {
  return "data: " + j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

// POST /v1/completions (chat false) or /v1/chat/completions (chat true).
void handle_request(dt_server* server, const ServedModel& m, bool chat, std::atomic<int64_t>& next_id,
                    const httplib::Request& req, httplib::Response& res) {
  CompletionRequest r;
  std::shared_ptr<Completion> c;
  try {
    r = chat ? parse_chat(req.body, m) : parse_completion(req.body, m);
    c = std::shared_ptr<Completion>(new Completion(server, m, r), [](Completion* p) {
      delete p;
      --g_open;
    });
    ++g_open;
  } catch (const HttpError& e) {
    return send_error(res, e);
  }
  const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++);
  if (!r.stream) {
    std::string text;
    while (!c->done()) {
      if (g_force) c->cancel();
      text += c->advance(1000);
    }
    if (c->finish_reason() == "rejected")
      return send_error(res, HttpError{400, "the server cannot run this request (its KV cache or context is too small)",
                                       "invalid_request_error", "", "rejected"});
    const nlohmann::json j =
        chat ? chat_completion_json(id, m.name, text, c->finish_reason(), c->prompt_tokens(), c->completion_tokens())
             : completion_json(id, m.name, text, c->finish_reason(), c->prompt_tokens(), c->completion_tokens());
    res.set_content(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
    return;
  }
  // Server-sent events: (chat) a first chunk with the assistant's role, a chunk per piece of
  // text, a last chunk with the finish reason, (stream_options.include_usage) a chunk with the
  // usage, then [DONE]. A client that goes away fails a write: the request is cancelled (the
  // releaser), its KV blocks freed.
  res.set_header("Cache-Control", "no-cache");
  const bool usage = r.include_usage;
  auto started = std::make_shared<bool>(!chat);
  res.set_chunked_content_provider(
      "text/event-stream",
      [c, id, chat, usage, started, model = m.name](size_t, httplib::DataSink& sink) {
        auto piece_chunk = [&](const std::string& text, const std::string& finish) {
          if (chat)
            return chat_chunk_json(id, model, finish.empty() ? nlohmann::json{{"content", text}} : nlohmann::json::object(),
                                   finish, usage);
          nlohmann::json j = chunk_json(id, model, text, finish);
          if (usage) j["usage"] = nullptr;
          return j;
        };
        if (!*started) {
          const std::string ev = sse(chat_chunk_json(id, model, {{"role", "assistant"}, {"content", ""}}, "", usage));
          if (!sink.write(ev.data(), ev.size())) return false;
          *started = true;
        }
        if (g_force) c->cancel();
        const std::string piece = c->advance(200);
        if (!piece.empty()) {
          const std::string ev = sse(piece_chunk(piece, ""));
          if (!sink.write(ev.data(), ev.size())) return false;
        }
        if (c->done()) {
          std::string last = sse(piece_chunk("", c->finish_reason()));
          if (usage) {
            nlohmann::json u = chat ? chat_usage_chunk_json(id, model, c->prompt_tokens(), c->completion_tokens())
                                    : nlohmann::json{{"id", id}, {"object", "text_completion"}, {"created", unix_seconds()},
                                                     {"model", model}, {"choices", nlohmann::json::array()},
                                                     {"usage", usage_json(c->prompt_tokens(), c->completion_tokens())}};
            last += sse(u);
          }
          last += "data: [DONE]\n\n";
          if (!sink.write(last.data(), last.size())) return false;
          sink.done();
        }
        return true;
      },
      [c](bool success) {
        if (!success && !c->done()) c->cancel();
      });
}

// The name a model directory goes by: its base name ("models/qwen2/" -> "qwen2").
std::string dir_name(const std::string& dir) {
  std::filesystem::path p = std::filesystem::absolute(dir).lexically_normal();
  std::string name = p.filename().string();
  if (name.empty()) name = p.parent_path().filename().string();
  return name.empty() ? "dtrain" : name;
}

int run_serve(const ServeArgs& a) {
  const bool hf = !a.model.empty();
  if (!hf && !a.chat_template.empty())
    throw UsageError("--chat-template needs --model DIR (a checkpoint's tokens are bytes: it has no chat template)");
  if (!hf && !a.precision.empty()) throw UsageError("--precision needs --model DIR (a checkpoint keeps its own)");
  Loaded l;
  Tokenizer tok;
  if (hf) {  // the tokenizer first: a directory without one fails before the weights load
    tok = load_tokenizer(a.model, a.chat_template);
    l.model = load_hf_module(a.model, a.precision, 0);
  } else {
    l = load_checkpoint(a.checkpoint);  // the weights, into the module
    l.engine.reset();
  }
  Mesh mesh;
  if (a.backend != "local" && a.backend != "mpi")
    throw CliError("--backend \"" + a.backend + "\"; accepted: local (ranks as threads), mpi (under mpirun)");
  const bool mpi = a.backend == "mpi";
  if (mpi && a.replicas != 1)
    throw CliError("--replicas with --backend mpi: the replicas are mpirun's processes / (tp x pp); leave it out");
  if (mpi || a.tp * a.pp * a.replicas > 1) {
    Options mo = make_options();
    set(mo.get(), "tp", a.tp);
    set(mo.get(), "pp", a.pp);
    dt_mesh* m = nullptr;
    check(dt_mesh_create(a.backend.c_str(), mpi ? 0 : static_cast<int32_t>(a.tp * a.pp * a.replicas), mo.get(), &m),
          mpi ? "creating the mesh (--backend mpi: run under mpirun)" : "creating the mesh (--tp, --pp, --replicas)");
    mesh.reset(m);
  }
  Options so = make_options();
  set(so.get(), "block_size", a.block_size);
  if (a.kv_blocks > 0) set(so.get(), "kv_blocks", a.kv_blocks);
  set(so.get(), "kv_cache_bytes", a.kv_cache_mib << 20);
  set(so.get(), "max_num_seqs", a.max_num_seqs);
  set(so.get(), "max_batched_tokens", a.max_batched_tokens);
  set_bool(so.get(), "prefix_caching", !a.no_prefix_caching);
  dt_server* raw = nullptr;
  check(dt_server_create(mesh.get(), l.model.get(), so.get(), &raw), "creating the server");
  Server server(raw);
  int32_t rank = 0;
  if (mesh) check(dt_mesh_local_rank(mesh.get(), 0, &rank), "dt_mesh_local_rank");
  if (rank != 0) {  // under mpirun: run the steps world rank 0 sends until its server stops
    dt_status st;
    while ((st = dt_server_drain(raw, 3600 * 1000)) == DT_ERR_TIMEOUT) {
    }
    check(st, "following world rank 0");
    return 0;
  }
  ServedModel model;
  model.name = !a.model_name.empty() ? a.model_name : hf ? dir_name(a.model) : "dtrain";
  check(dt_server_model_info(raw, &model.context, &model.vocab), "dt_server_model_info");
  const nlohmann::json st0 = nlohmann::json::parse(text_of(raw, dt_server_stats_json, "dt_server_stats_json"));
  model.kv_positions = st0["kv_cache"]["blocks_per_replica"].get<int64_t>() * a.block_size;
  const int64_t context = model.context, vocab = model.vocab;
  std::string text_side = "tokens are bytes";
  if (hf) {
    model.tokenizer = tok.get();
    const nlohmann::json info = tokenizer_info(tok.get());
    std::string eos;
    for (const auto& e : info["eos_token_ids"]) {
      const int64_t t = e.get<int64_t>();
      if (t < 0 || t >= vocab) {
        std::fprintf(stderr, "dtrain serve: warning: the end-of-sequence id %lld is outside the model's vocabulary "
                     "of %lld; generation does not stop at it\n", static_cast<long long>(t), static_cast<long long>(vocab));
        continue;
      }
      model.eos_ids.push_back(static_cast<int32_t>(t));
      eos += (eos.empty() ? "" : ",") + std::to_string(t);
    }
    text_side = "text through its tokenizer, ending at " +
                (eos.empty() ? std::string("no end-of-sequence id") : "id " + eos) + "; " +
                (!info.value("chat_template", false) ? std::string("no chat template (--chat-template)")
                 : a.chat_template.empty()           ? std::string("its chat template")
                                                     : "the " + a.chat_template + " chat template");
  }

  httplib::Server http;
  http.new_task_queue = [] { return new httplib::ThreadPool(64); };  // one per open stream
  std::atomic<int64_t> next_id{1};
  std::atomic<bool> draining{false};
  http.Post("/v1/completions", [&](const httplib::Request& req, httplib::Response& res) {
    handle_request(raw, model, false, next_id, req, res);
  });
  http.Post("/v1/chat/completions", [&](const httplib::Request& req, httplib::Response& res) {
    handle_request(raw, model, true, next_id, req, res);
  });
  http.Get("/v1/models", [&](const httplib::Request&, httplib::Response& res) {
    const nlohmann::json j = {{"object", "list"},
                              {"data", {{{"id", model.name}, {"object", "model"}, {"created", 0},
                                         {"owned_by", "dtrain"}, {"max_model_len", context},
                                         {"vocab_size", vocab}}}}};
    res.set_content(j.dump(), "application/json");
  });
  http.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    res.status = draining ? 503 : 200;
    res.set_content(draining ? "{\"status\":\"draining\"}" : "{\"status\":\"ok\"}", "application/json");
  });
  http.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(text_of(raw, dt_server_metrics_text, "dt_server_metrics_text"), "text/plain; version=0.0.4");
  });
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.status == 404 && res.body.empty())
      res.set_content(HttpError{404, "no such endpoint; try POST /v1/completions, POST /v1/chat/completions, GET /v1/models, /health, /metrics",
                                "invalid_request_error", "", ""}.body(),
                      "application/json");
  });
  const int port = a.port == 0 ? http.bind_to_any_port(a.host) : (http.bind_to_port(a.host, static_cast<int>(a.port)) ? static_cast<int>(a.port) : -1);
  if (port < 0) throw CliError("cannot listen on " + a.host + ":" + std::to_string(a.port) + " (in use?)");
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  std::thread listener([&] { http.listen_after_bind(); });
  struct StopListener {  // also when something below throws: a joinable thread must not die
    httplib::Server& http;
    std::thread& t;
    ~StopListener() {
      if (!t.joinable()) return;
      http.stop();
      t.join();
    }
  } stop_listener{http, listener};
  std::fprintf(stderr, "dtrain serve: %s on http://%s:%d (%s, %lld KV blocks of %lld positions per replica; %s)\n",
               model.name.c_str(), a.host.c_str(), port, st0["layout"].get<std::string>().c_str(),
               static_cast<long long>(st0["kv_cache"]["blocks_per_replica"].get<int64_t>()),
               static_cast<long long>(a.block_size), text_side.c_str());
  if (!a.port_file.empty()) write_file(a.port_file, std::to_string(port) + "\n");
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Drain: new requests get 503, the ones in flight finish, then the listener stops.
  draining = true;
  std::fprintf(stderr, "dtrain serve: draining the requests in flight (up to %llds)\n",
               static_cast<long long>(a.drain_seconds));
  const dt_status drained = dt_server_drain(raw, static_cast<int32_t>(a.drain_seconds * 1000));
  g_force = true;  // what is still running past the drain ends now
  // The responses' last chunks go out before the listener stops (a few seconds at most).
  for (int i = 0; i < 500 && g_open > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  http.stop();
  listener.join();
  const std::string stats = text_of(raw, dt_server_stats_json, "dt_server_stats_json");
  const nlohmann::json st = nlohmann::json::parse(stats);
  std::fprintf(stderr, "dtrain serve: %lld finished, %lld aborted, %lld rejected; %lld tokens generated, %.0f tokens/s; "
               "TTFT p50 %.1f ms, p99 %.1f ms%s\n",
               static_cast<long long>(st["requests"]["finished"].get<int64_t>()),
               static_cast<long long>(st["requests"]["aborted"].get<int64_t>()),
               static_cast<long long>(st["requests"]["rejected"].get<int64_t>()),
               static_cast<long long>(st["tokens"]["generated"].get<int64_t>()), st["tokens_per_s"].get<double>(),
               1e3 * st["ttft_s"]["p50"].get<double>(), 1e3 * st["ttft_s"]["p99"].get<double>(),
               drained == DT_OK ? "" : " (some still running when the drain timed out)");
  if (!a.json.empty()) write_file(a.json, st.dump(2) + "\n");
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* c = app.add_subcommand("serve", "Serve a checkpoint or a Hugging Face model over an OpenAI-compatible HTTP API");
  c->footer("Examples:\n  dtrain serve --checkpoint runs/latest/ckpt --port 8000 --tp 2\n"
            "  curl localhost:8000/v1/completions -d '{\"model\":\"dtrain\",\"prompt\":\"12+34=\",\"max_tokens\":4}'\n"
            "  dtrain serve --model models/Qwen2.5-0.5B-Instruct --port 8000\n"
            "  curl localhost:8000/v1/chat/completions -d '{\"model\":\"Qwen2.5-0.5B-Instruct\",\"messages\":"
            "[{\"role\":\"user\",\"content\":\"Hi\"}]}'");
  CLI::Option* ck = c->add_option("--checkpoint", a->checkpoint, "Checkpoint stem (what dtrain train wrote: RUN_DIR/ckpt)")
                        ->capture_default_str();
  CLI::Option* mo = c->add_option("--model", a->model,
                                  "A Hugging Face model directory (config.json, safetensors, tokenizer.json, "
                                  "tokenizer_config.json) instead of --checkpoint: text through its tokenizer, "
                                  "generation ends at its end-of-sequence ids, and POST /v1/chat/completions with its "
                                  "chat template");
  ck->excludes(mo);
  c->add_option("--chat-template", a->chat_template, "With --model: a built-in chat template instead of the model's "
                "(chatml, llama3, llama2, mistral, zephyr)");
  c->add_option("--precision", a->precision, "With --model: the weights as f32 (default), bf16, f16 or stored (the files' dtype)");
  c->add_option("--host", a->host, "Address to listen on")->capture_default_str();
  add_int(c, "--port", a->port, {0, 65535, "any free port"}, "TCP port");
  c->add_option("--port-file", a->port_file, "Write the port listened on to this file (with --port 0)");
  c->add_option("--model-name", a->model_name, "The model's name in the API (default: dtrain; with --model the "
                "directory's base name)");
  add_int(c, "--tp", a->tp, {1, 1024}, "Tensor-parallel ranks per replica (heads and the KV cache split)");
  add_int(c, "--pp", a->pp, {1, 1024}, "Pipeline stages per replica (blocks and their KV cache placed)");
  add_int(c, "--replicas", a->replicas, {1, 1024}, "Data-parallel replicas behind the router (least outstanding tokens)");
  add_int(c, "--block-size", a->block_size, {1, 1024}, "Positions per KV cache block");
  add_int(c, "--kv-blocks", a->kv_blocks, {0, 1 << 30, "from --kv-cache-mib"}, "KV cache blocks per replica");
  add_int(c, "--kv-cache-mib", a->kv_cache_mib, {1, 1 << 20}, "KV cache memory per rank, MiB");
  add_int(c, "--max-num-seqs", a->max_num_seqs, {1, 4096}, "Requests running at once");
  add_int(c, "--max-batched-tokens", a->max_batched_tokens, {1, 1 << 20}, "Tokens per step (bounds prefill chunks)");
  c->add_flag("--no-prefix-caching", a->no_prefix_caching, "Do not share KV blocks between equal prompt prefixes");
  add_int(c, "--drain-seconds", a->drain_seconds, {0, 86400}, "On Ctrl-C, how long requests in flight may finish");
  c->add_option("--backend", a->backend, "local: the ranks as threads of this process; mpi: one rank per process of "
                "mpirun (rank 0 serves HTTP)")->capture_default_str();
  c->add_option("--json", a->json, "On exit, write the server's statistics as JSON to this file");
  c->callback([a] { throw Exit{run_serve(*a)}; });
}

}  // namespace dtcli
