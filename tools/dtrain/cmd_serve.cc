// dtrain serve: a checkpoint, or with --model a Hugging Face model directory and its
// tokenizer, behind an OpenAI-compatible HTTP API (our own epoll server, http_server.h; see
// docs/dependencies.md): POST /v1/completions and (--model) POST /v1/chat/completions,
// streamed as server-sent events when "stream": true; GET /v1/models[/ID], GET /health,
// GET /metrics (Prometheus). Requests run on a dt_server: continuous batching over a paged
// KV cache, on --tp / --pp / --replicas ranks of this process. The first Ctrl-C (or
// SIGTERM) stops taking requests and lets those in flight finish for up to --drain-seconds;
// a second ends at once (docs/serving.md: exit codes).
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <deque>
#include <fcntl.h>
#include <memory>
#include <mutex>
#include <thread>
#include <unistd.h>

#include "commands.h"
#include "flags.h"
#include "hf_args.h"
#include "http_server.h"
#include "serve_chat.h"
#include "serve_http.h"
#include "serve_requests.h"
#include "serve_responses.h"

namespace dtcli {
namespace {

struct ServeArgs {
  std::string checkpoint = "runs/latest/ckpt", host = "127.0.0.1", model_name, port_file, json,
      backend = "local";
  std::string model, chat_template, precision;  // --model DIR: a Hugging Face directory
  int64_t port = 8000, tp = 1, pp = 1, replicas = 1, block_size = 16, kv_blocks = 0, kv_cache_mib = 64;
  int64_t max_num_seqs = 16, max_batched_tokens = 256, drain_seconds = 60;
  // HTTP limits (http::Limits; docs/serving.md): 0 for max_body_bytes derives it from the context.
  int64_t max_body_bytes = 0, max_header_bytes = 16 << 10, max_headers = 64, header_timeout = 10,
          body_timeout = 30, idle_timeout = 15, write_timeout = 30, max_requests_per_connection = 1000,
          max_connections = 1024, max_pending = 256;
  bool no_prefix_caching = false;
};

// The first signal drains; a second ends at once (its number is the exit code's).
std::atomic<int> g_signals{0}, g_last_signal{0};
extern "C" void on_signal(int sig) {
  g_last_signal = sig;
  ++g_signals;
}

using Server = std::unique_ptr<dt_server, Deleter<dt_server, dt_server_destroy>>;

std::string text_of(dt_server* s, dt_status (*fn)(dt_server*, char*, size_t, size_t*), const char* what) {
  return read_text([&](char* b, size_t c, size_t* n) { return fn(s, b, c, n); }, what);
}

// A file named by a flag is checked before the model loads: a run must not serve for hours
// and then fail to write its port or its statistics.
void check_writable(const std::string& path, const char* flag) {
  if (path.empty()) return;
  const bool existed = ::access(path.c_str(), F_OK) == 0;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw UsageError(std::string(flag) + " " + path + ": cannot write there (" + std::strerror(errno) + ")");
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
}

// Parsing a body and tokenizing its prompt can take milliseconds: done off the HTTP thread,
// by a few workers, so /health and the other connections never wait behind it.
class Workers {
 public:
  explicit Workers(int n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { run(); });
  }
  ~Workers() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void post(std::function<void()> f) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      q_.push_back(std::move(f));
    }
    cv_.notify_one();
  }
  size_t queued() {
    std::lock_guard<std::mutex> lk(mu_);
    return q_.size();
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> f;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || !q_.empty(); });
        if (q_.empty()) return;
        f = std::move(q_.front());
        q_.pop_front();
      }
      f();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

void send_error(http::Exchange& ex, const HttpError& e, const http::Headers& extra = {}) {
  ex.respond(e.status, "application/json", e.body(), extra);
}

HttpError server_error(int status, const std::string& message, const std::string& code) {
  return HttpError{status, message, status >= 500 ? "server_error" : "invalid_request_error", "", code};
}

// The figures of the HTTP layer, after the engine's (Prometheus text).
std::string http_metrics(const http::Counters& c, int64_t in_flight) {
  std::string s;
  auto metric = [&](const char* name, const char* type, const char* help, int64_t v) {
    s += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
         std::to_string(v) + "\n";
  };
  metric("dtrain_http_connections_open", "gauge", "Connections open now.", c.connections_open);
  metric("dtrain_http_connections_total", "counter", "Connections accepted.", c.connections_total);
  metric("dtrain_http_connections_refused_total", "counter", "Connections over --max-connections (503).", c.connections_refused);
  metric("dtrain_http_requests_total", "counter", "Requests read.", c.requests);
  metric("dtrain_http_requests_in_flight", "gauge", "Completions parsed or running (--max-pending).", in_flight);
  s += "# HELP dtrain_http_refused_total Requests answered by the HTTP layer's limits.\n"
       "# TYPE dtrain_http_refused_total counter\n";
  s += "dtrain_http_refused_total{reason=\"body_too_large\"} " + std::to_string(c.too_large) + "\n";
  s += "dtrain_http_refused_total{reason=\"headers_too_large\"} " + std::to_string(c.header_too_large) + "\n";
  s += "dtrain_http_refused_total{reason=\"timeout\"} " + std::to_string(c.timeouts) + "\n";
  s += "dtrain_http_refused_total{reason=\"malformed\"} " + std::to_string(c.bad_requests) + "\n";
  s += "dtrain_http_refused_total{reason=\"busy\"} " + std::to_string(c.busy) + "\n";
  metric("dtrain_http_dropped_slow_readers_total", "counter", "Connections dropped for not reading (--write-timeout).",
         c.dropped_slow_readers);
  metric("dtrain_http_client_resets_total", "counter", "Requests whose client went away before the answer.", c.resets);
  return s;
}

// The name a model directory goes by: its base name ("models/qwen2/" -> "qwen2").
std::string dir_name(const std::string& dir) {
  std::filesystem::path p = std::filesystem::absolute(dir).lexically_normal();
  std::string name = p.filename().string();
  if (name.empty()) name = p.parent_path().filename().string();
  return name.empty() ? "dtrain" : name;
}

// Everything the routes need.
struct Routes {
  dt_server* server;
  const ServedModel& model;
  http::Server& http;
  Workers& workers;
  int64_t max_pending;
  std::atomic<bool>& draining;
  std::atomic<int64_t> next_id{1};

  void operator()(const std::shared_ptr<http::Exchange>& ex) {
    const http::Request& rq = ex->request();
    const std::string& p = rq.path;
    auto only = [&](const char* method) {
      if (rq.method == method) return true;
      send_error(*ex, server_error(405, "the method " + rq.method + " is not allowed on " + p + "; accepted: " + method,
                                   "method_not_allowed"), {{"Allow", method}});
      return false;
    };
    if (p == "/health") {
      if (only("GET"))
        ex->respond(draining ? 503 : 200, "application/json", draining ? "{\"status\":\"draining\"}" : "{\"status\":\"ok\"}");
    } else if (p == "/metrics") {
      if (only("GET"))
        ex->respond(200, "text/plain; version=0.0.4",
                    text_of(server, dt_server_metrics_text, "dt_server_metrics_text") +
                        http_metrics(http.counters(), completions_in_flight()));
    } else if (p == "/v1/models" || p.rfind("/v1/models/", 0) == 0) {
      if (!only("GET")) return;
      const nlohmann::json card = {{"id", model.name}, {"object", "model"}, {"created", 0}, {"owned_by", "dtrain"},
                                   {"max_model_len", model.context}, {"vocab_size", model.vocab}};
      if (p == "/v1/models") return ex->respond(200, "application/json", dump({{"object", "list"}, {"data", {card}}}));
      const std::string id = p.substr(std::string("/v1/models/").size());
      if (id == model.name) return ex->respond(200, "application/json", dump(card));
      send_error(*ex, HttpError{404, "The model '" + id + "' does not exist; this server has '" + model.name + "'",
                                "invalid_request_error", "model", "model_not_found"});
    } else if (p == "/v1/completions" || p == "/v1/chat/completions") {
      if (only("POST")) completion(ex, p == "/v1/chat/completions");
    } else {
      send_error(*ex, server_error(404, "no such endpoint " + p + "; try POST /v1/completions, POST /v1/chat/completions, "
                                   "GET /v1/models, /health, /metrics", "not_found"));
    }
  }

  void completion(const std::shared_ptr<http::Exchange>& ex, bool chat) {
    if (draining) return send_error(*ex, server_error(503, "the server is shutting down", "unavailable"), {{"Retry-After", "5"}});
    if (completions_in_flight() + static_cast<int64_t>(workers.queued()) >= max_pending) {
      http.count_busy();
      return send_error(*ex, server_error(503, "the server has " + std::to_string(max_pending) +
                                                   " requests in flight (dtrain serve --max-pending); retry later",
                                          "overloaded"), {{"Retry-After", "1"}});
    }
    workers.post([this, ex, chat] {
      try {
        const CompletionRequest r = chat ? parse_chat(ex->request().body, model) : parse_completion(ex->request().body, model);
        start_completion(server, model, chat, r, ex, (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++));
      } catch (const HttpError& e) {
        send_error(*ex, e);
      } catch (const std::exception& e) {
        send_error(*ex, server_error(500, e.what(), ""));
      }
    });
  }
};

int run_serve(const ServeArgs& a) {
  const bool hf = !a.model.empty();
  if (!hf && !a.chat_template.empty())
    throw UsageError("--chat-template needs --model DIR (a checkpoint's tokens are bytes: it has no chat template)");
  if (!hf && !a.precision.empty()) throw UsageError("--precision needs --model DIR (a checkpoint keeps its own)");
  if (a.backend != "local" && a.backend != "mpi")
    throw UsageError("--backend \"" + a.backend + "\"; accepted: local (ranks as threads), mpi (under mpirun)");
  const bool mpi = a.backend == "mpi";
  if (mpi && a.replicas != 1)
    throw UsageError("--replicas with --backend mpi: the replicas are mpirun's processes / (tp x pp); leave it out");
  check_writable(a.port_file, "--port-file");
  check_writable(a.json, "--json");
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
  std::string text_side = "tokens are bytes";
  if (hf) {
    model.tokenizer = tok.get();
    const nlohmann::json info = tokenizer_info(tok.get());
    std::string eos;
    for (const auto& e : info["eos_token_ids"]) {
      const int64_t t = e.get<int64_t>();
      if (t < 0 || t >= model.vocab) {
        std::fprintf(stderr, "dtrain serve: warning: the end-of-sequence id %lld is outside the model's vocabulary "
                     "of %lld; generation does not stop at it\n", static_cast<long long>(t), static_cast<long long>(model.vocab));
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

  http::Limits lim;
  // The largest body a request of this context needs: a prompt of `context` tokens as JSON
  // (up to ~6 bytes per byte escaped, or ids as decimal text), with room for the rest.
  lim.max_body_bytes = static_cast<size_t>(a.max_body_bytes > 0 ? a.max_body_bytes
                                                                 : std::max<int64_t>(1 << 20, 64 * model.context + (64 << 10)));
  lim.max_header_bytes = static_cast<size_t>(a.max_header_bytes);
  lim.max_headers = static_cast<int>(a.max_headers);
  lim.header_timeout_ms = static_cast<int>(a.header_timeout * 1000);
  lim.body_timeout_ms = static_cast<int>(a.body_timeout * 1000);
  lim.idle_timeout_ms = static_cast<int>(a.idle_timeout * 1000);
  lim.write_timeout_ms = static_cast<int>(a.write_timeout * 1000);
  lim.max_requests_per_connection = static_cast<int>(a.max_requests_per_connection);
  lim.max_connections = static_cast<int>(a.max_connections);
  std::atomic<bool> draining{false};
  Workers workers(2);
  std::unique_ptr<Routes> routes;
  http::Server http(lim, [&](std::shared_ptr<http::Exchange> ex) { (*routes)(ex); });
  routes.reset(new Routes{raw, model, http, workers, a.max_pending, draining});
  http.set_error_body([](int status, const std::string& m) {
    const char* code = status == 413 ? "body_too_large" : status == 431 ? "headers_too_large" : status == 408 ? "timeout"
                       : status == 503 ? "overloaded" : "malformed_request";
    return server_error(status, m, code).body();
  });
  int port = 0;
  try {
    port = http.listen(a.host, static_cast<int>(a.port));
  } catch (const std::exception& e) {
    throw CliError(std::string(e.what()) + " (--host, --port)");
  }
  if (!a.port_file.empty()) write_file(a.port_file, std::to_string(port) + "\n");  // before the announcement
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  http.start();
  std::fprintf(stderr, "dtrain serve: %s on http://%s:%d (%s, %lld KV blocks of %lld positions per replica; %s)\n",
               model.name.c_str(), a.host.c_str(), port, st0["layout"].get<std::string>().c_str(),
               static_cast<long long>(st0["kv_cache"]["blocks_per_replica"].get<int64_t>()),
               static_cast<long long>(a.block_size), text_side.c_str());
  while (g_signals == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));

  // Drain: no new connections or requests; those in flight finish up to the deadline.
  draining = true;
  http.stop_accepting();
  std::fprintf(stderr, "dtrain serve: draining the requests in flight (up to %llds; Ctrl-C again ends them now)\n",
               static_cast<long long>(a.drain_seconds));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(a.drain_seconds);
  bool drained = false;
  while (!drained && g_signals < 2 && std::chrono::steady_clock::now() < deadline) {
    drained = dt_server_drain(raw, 100) == DT_OK && completions_in_flight() == 0 && workers.queued() == 0;
  }
  const bool forced = !drained && g_signals >= 2;
  if (!drained) cut_off_completions(forced ? "the server was stopped (a second signal)"
                                            : "the server is shutting down (--drain-seconds passed)");
  // The answers' last bytes (a stream's final event included) go out, then every connection
  // closes, slow ones too.
  const auto flush_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(forced ? 500 : 2000);
  while ((completions_in_flight() > 0 || http.busy_connections() > 0) && std::chrono::steady_clock::now() < flush_until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  http.stop();
  const nlohmann::json st = nlohmann::json::parse(text_of(raw, dt_server_stats_json, "dt_server_stats_json"));
  std::fprintf(stderr, "dtrain serve: %lld finished, %lld aborted, %lld rejected; %lld tokens generated, %.0f tokens/s; "
               "TTFT p50 %.1f ms, p99 %.1f ms%s\n",
               static_cast<long long>(st["requests"]["finished"].get<int64_t>()),
               static_cast<long long>(st["requests"]["aborted"].get<int64_t>()),
               static_cast<long long>(st["requests"]["rejected"].get<int64_t>()),
               static_cast<long long>(st["tokens"]["generated"].get<int64_t>()), st["tokens_per_s"].get<double>(),
               1e3 * st["ttft_s"]["p50"].get<double>(), 1e3 * st["ttft_s"]["p99"].get<double>(),
               drained ? "" : forced ? " (stopped by a second signal)" : " (some still running when the drain timed out)");
  if (!a.json.empty()) write_file(a.json, st.dump(2) + "\n");
  // 0: every request finished; 3: the drain deadline cut some off; 128 + N: a second signal N.
  return drained ? 0 : forced ? 128 + g_last_signal : 3;
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
  add_int(c, "--drain-seconds", a->drain_seconds, {0, 86400}, "On Ctrl-C, how long requests in flight may finish "
          "(a second Ctrl-C ends them at once)");
  add_int(c, "--max-body-bytes", a->max_body_bytes, {0, 1 << 30, "64 bytes per context position, at least 1 MiB"},
          "Largest request body (413 above)");
  add_int(c, "--max-header-bytes", a->max_header_bytes, {256, 1 << 20}, "Largest request line and headers (431 above)");
  add_int(c, "--max-headers", a->max_headers, {1, 1024}, "Most header lines per request (431 above)");
  add_int(c, "--header-timeout", a->header_timeout, {1, 3600}, "Seconds for a request's headers to arrive (408)");
  add_int(c, "--body-timeout", a->body_timeout, {1, 3600}, "Seconds for a request's body to arrive (408)");
  add_int(c, "--idle-timeout", a->idle_timeout, {1, 3600}, "Seconds a keep-alive connection may wait for its next request");
  add_int(c, "--write-timeout", a->write_timeout, {1, 3600}, "Seconds a client may leave an answer unread before it is dropped");
  add_int(c, "--max-requests-per-connection", a->max_requests_per_connection, {1, 1 << 20},
          "Requests on one keep-alive connection before it closes");
  add_int(c, "--max-connections", a->max_connections, {1, 1 << 16}, "Connections open at once (more get 503)");
  add_int(c, "--max-pending", a->max_pending, {1, 1 << 16}, "Completions parsed or running at once (more get 503 with Retry-After)");
  c->add_option("--backend", a->backend, "local: the ranks as threads of this process; mpi: one rank per process of "
                "mpirun (rank 0 serves HTTP)")->capture_default_str();
  c->add_option("--json", a->json, "On exit, write the server's statistics as JSON to this file");
  c->callback([a] { throw Exit{run_serve(*a)}; });
}

}  // namespace dtcli
