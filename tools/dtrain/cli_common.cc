#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "flags.h"

namespace dtcli {

void check(dt_status s, const std::string& what) {
  if (s == DT_OK) return;
  const char* msg = dt_last_error_message();
  throw CliError(what + ": " + (msg ? msg : "") + " [" + dt_status_string(s) + "]");
}

Options make_options() {
  dt_options* o = nullptr;
  check(dt_options_create(&o), "dt_options_create");
  return Options(o);
}
void set(dt_options* o, const char* key, int64_t v) { check(dt_options_set_int(o, key, v), key); }
void set(dt_options* o, const char* key, double v) { check(dt_options_set_double(o, key, v), key); }
void set(dt_options* o, const char* key, const std::string& v) { check(dt_options_set_string(o, key, v.c_str()), key); }
void set_bool(dt_options* o, const char* key, bool v) { check(dt_options_set_bool(o, key, v ? 1 : 0), key); }

Tensor make_batch(int64_t rows, int64_t cols) {
  const int64_t shape[2] = {rows, cols};
  dt_tensor* t = nullptr;
  check(dt_tensor_create(DT_I32, shape, 2, "cpu", nullptr, &t), "dt_tensor_create");
  return Tensor(t);
}

DataSpec parse_data_spec(const std::string& spec) {
  DataSpec d;
  const size_t colon = spec.find(':');
  d.kind = spec.substr(0, colon);
  if (d.kind == "addition" && colon == std::string::npos) return d;
  if ((d.kind == "text" || d.kind == "tokens" || d.kind == "jsonl") && colon != std::string::npos &&
      colon + 1 < spec.size()) {
    d.path = spec.substr(colon + 1);
    if (d.kind == "tokens") {  // tokens:PATH[:WIDTH]
      const size_t last = d.path.rfind(':');
      if (last != std::string::npos && (d.path.substr(last + 1) == "2" || d.path.substr(last + 1) == "4")) {
        d.width = std::stoll(d.path.substr(last + 1));
        d.path = d.path.substr(0, last);
      }
    }
    return d;
  }
  throw CliError("--data \"" + spec + "\"; accepted: addition, text:PATH, jsonl:PATH (with --init hf:DIR), "
                 "tokens:PATH, tokens:PATH:2 (u16), tokens:PATH:4 (u32)");
}

Dataset open_dataset(const DataSpec& spec, int64_t context, int64_t digits, int64_t size, int64_t seed,
                     const std::string& split) {
  // A file the machine cannot hold is refused before it is read: a text file is read whole
  // and becomes an int32 per byte; a token file is mapped, so only the loader's order counts.
  std::error_code no_size;
  const double file_bytes = spec.kind == "addition" ? 0.0 : static_cast<double>(std::filesystem::file_size(spec.path, no_size));
  if (!no_size && spec.kind == "text")
    refuse_if_too_big("--data text:" + spec.path, 5 * file_bytes, "the file's bytes and a 4-byte token for each");
  if (!no_size && spec.kind == "tokens" && context > 0)
    refuse_if_too_big("--data tokens:" + spec.path,
                      example_bytes(static_cast<int64_t>(file_bytes / static_cast<double>(spec.width)) / context),
                      kExampleBytesWhy);
  Options o = make_options();
  if (spec.kind == "addition") {
    set(o.get(), "digits", digits);
    set(o.get(), "size", size);
    set(o.get(), "seed", seed);
    set(o.get(), "split", split);
  } else {
    set(o.get(), "path", spec.path);
    set(o.get(), "context", context);
    if (spec.kind == "tokens") set(o.get(), "width", spec.width);
    if (!spec.tokenizer.empty() && spec.kind != "tokens") set(o.get(), "tokenizer", spec.tokenizer);
    if (!spec.chat_template.empty() && spec.kind == "jsonl") set(o.get(), "chat_template", spec.chat_template);
  }
  dt_dataset* d = nullptr;
  check(dt_dataset_create(spec.kind.c_str(), o.get(), &d), "opening the dataset");
  return Dataset(d);
}

int64_t dataset_size(dt_dataset* d) {
  int64_t n = 0;
  check(dt_dataset_size(d, &n), "dt_dataset_size");
  return n;
}

int64_t dataset_context(dt_dataset* d) {
  int64_t n = 0;
  check(dt_dataset_context(d, &n), "dt_dataset_context");
  return n;
}

namespace {

// Answers problems [begin, end) of `data` in one dt_engine_generate call; adds to `r`.
void answer_chunk(dt_engine* engine, dt_dataset* data, int64_t begin, int64_t end, int64_t show, bool print,
                  ExactMatch& r, int64_t& new_tokens) {
  const int64_t T = dataset_context(data), n = end - begin;
  std::vector<int32_t> in(static_cast<size_t>(T)), tg(static_cast<size_t>(T)), prompts;
  std::vector<int64_t> lengths;
  std::vector<std::vector<int32_t>> answers;
  int64_t longest = 0;
  for (int64_t i = begin; i < end; ++i) {
    check(dt_dataset_example(data, i, in.data(), tg.data()), "dt_dataset_example");
    int64_t p = 0;
    while (p < T && tg[static_cast<size_t>(p)] == -1) ++p;
    if (p == T || p == 0)
      throw CliError("exact match needs examples whose targets are -1 up to an answer (such as --data addition); "
                     "example " + std::to_string(i) + " is not one");
    prompts.insert(prompts.end(), in.begin(), in.begin() + p + 1);
    lengths.push_back(p + 1);
    answers.emplace_back(tg.begin() + p, tg.end());
    longest = std::max<int64_t>(longest, T - p);
  }
  Options g = make_options();
  set(g.get(), "max_new_tokens", longest);
  std::vector<int32_t> out(static_cast<size_t>(n * longest));
  std::vector<int64_t> out_len(static_cast<size_t>(n));
  const double t0 = now_seconds();
  check(dt_engine_generate(engine, prompts.data(), lengths.data(), static_cast<int32_t>(n), g.get(), out.data(),
                           longest, out_len.data()),
        "dt_engine_generate");
  r.seconds += now_seconds() - t0;
  r.total += n;
  int64_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto& want = answers[static_cast<size_t>(i)];
    const int32_t* got = out.data() + i * longest;
    const int64_t got_len = out_len[static_cast<size_t>(i)];
    new_tokens += got_len;
    bool ok = got_len >= static_cast<int64_t>(want.size());
    for (size_t k = 0; ok && k < want.size(); ++k) ok = got[k] == want[k];
    r.right += ok;
    if (print && begin + i < show) {
      std::string q, a;
      for (int64_t k = 0; k < lengths[static_cast<size_t>(i)]; ++k) q += static_cast<char>(prompts[static_cast<size_t>(at + k)]);
      for (int64_t k = 0; k < got_len; ++k)
        if (got[k] != '\n') a += static_cast<char>(got[k]);
      std::string truth;
      for (int32_t c : want)
        if (c != '\n') truth += static_cast<char>(c);
      std::printf("  %s%-*s %s%s\n", q.c_str(), static_cast<int>(want.size()), a.c_str(), ok ? "ok" : "WRONG, expected ",
                  ok ? "" : truth.c_str());
    }
    at += lengths[static_cast<size_t>(i)];
  }
}

}  // namespace

ExactMatch exact_match(dt_engine* engine, dt_dataset* data, int64_t problems, int64_t show, bool print) {
  // A chunk's prompts, answers and KV cache are held at once; 1024 keeps that small and the
  // default 500 problems in one call.
  constexpr int64_t kChunk = 1024;
  const int64_t n = std::min(problems, dataset_size(data));
  ExactMatch r;
  int64_t new_tokens = 0;
  for (int64_t begin = 0; begin < n; begin += kChunk)
    answer_chunk(engine, data, begin, std::min(n, begin + kChunk), show, print, r, new_tokens);
  r.tokens_per_s = r.seconds > 0 ? static_cast<double>(new_tokens) / r.seconds : 0.0;
  return r;
}

EvalLoss eval_loss(dt_engine* engine, dt_dataset* data, int64_t batch, int64_t batches) {
  const int64_t size = dataset_size(data), T = dataset_context(data);
  EvalLoss r;
  r.batch = std::min(batch, size);
  Options lo = make_options();
  set(lo.get(), "batch", r.batch);
  set_bool(lo.get(), "shuffle", false);
  dt_loader* l = nullptr;
  check(dt_loader_create(data, lo.get(), &l), "dt_loader_create");
  Loader loader(l);
  int64_t per_epoch = 0;
  check(dt_loader_batches_per_epoch(l, &per_epoch), "dt_loader_batches_per_epoch");
  r.batches = batches == 0 ? per_epoch : std::min(batches, per_epoch);  // per_epoch >= 1: batch <= size
  Tensor in = make_batch(r.batch, T), tg = make_batch(r.batch, T);
  double sum = 0.0;
  for (int64_t b = 0; b < r.batches; ++b) {
    check(dt_loader_next(l, in.get(), tg.get()), "dt_loader_next");
    double loss = 0.0;
    check(dt_engine_eval(engine, in.get(), tg.get(), &loss), "dt_engine_eval");
    sum += loss;
  }
  r.loss = sum / static_cast<double>(r.batches);
  return r;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string format_duration(double s) {
  if (!(s >= 0) || s > 1e7) return "--:--";
  const int64_t t = static_cast<int64_t>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(t / 60), static_cast<long long>(t % 60));
  return buf;
}

Progress::Progress(int64_t total, int64_t start, bool enabled)
    : total_(total), start_(start), enabled_(enabled), tty_(isatty(STDERR_FILENO) != 0), t0_(now_seconds()) {}

void Progress::update(int64_t done, const std::string& status) {
  if (!enabled_ || total_ <= 0) return;
  const double frac = static_cast<double>(done) / static_cast<double>(total_);
  const int64_t tenth = done * 10 / total_;
  if (!tty_ && tenth == last_tenth_ && done != total_) return;
  last_tenth_ = tenth;
  const double elapsed = now_seconds() - t0_;
  const int64_t run = done - start_;
  const double eta = run > 0 ? elapsed / static_cast<double>(run) * static_cast<double>(total_ - done) : -1.0;
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar += std::string(static_cast<size_t>(kWidth - filled), '.');
  std::fprintf(stderr, "%s[%s] %3d%% %lld/%lld %s | %s elapsed, ETA %s%s", tty_ ? "\r" : "", bar.c_str(),
               static_cast<int>(frac * 100), static_cast<long long>(done), static_cast<long long>(total_),
               status.c_str(), format_duration(elapsed).c_str(), format_duration(eta).c_str(), tty_ ? "\033[K" : "\n");
  std::fflush(stderr);
}

void Progress::finish(const std::string& status) {
  if (!enabled_) return;
  if (tty_ || last_tenth_ != 10) update(total_, status);  // a log already has its 100% line
  if (tty_) std::fprintf(stderr, "\n");
}

void check_writable(const std::string& flag, const std::string& path) {
  errno = 0;
  const bool existed = ::access(path.c_str(), F_OK) == 0;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);  // no O_TRUNC: the old text stays
  if (fd < 0)
    throw UsageError(flag + " " + path + ": cannot write it (" + std::strerror(errno) +
                     "); accepted: a file in an existing, writable directory");
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) throw CliError("cannot write \"" + path + "\"");
}

// tp > 1: the engine runs on a local mesh of tp ranks, each with its part of the model and
// of the KV cache (sharded by heads); pp > 1: of pp x tp ranks, each pp rank its stage's
// blocks and their layers' cache (the prompt's tokens passing stage to stage). The tokens
// are the single-rank model's.
void attach_inference_engine(Loaded& l, int64_t tp, int64_t pp) {
  // Inference needs no optimizer state, but an engine needs an optimizer: plain SGD holds
  // none (only its step counter, which a checkpoint has).
  dt_optimizer* o = nullptr;
  check(dt_optimizer_create(l.model.get(), "sgd", nullptr, &o), "dt_optimizer_create");
  l.opt.reset(o);
  if (tp * pp > 1) {
    Options mo = make_options();
    set(mo.get(), "tp", tp);
    set(mo.get(), "pp", pp);
    dt_mesh* mesh = nullptr;
    check(dt_mesh_create("local", static_cast<int32_t>(tp * pp), mo.get(), &mesh), "creating the mesh (--tp, --pp)");
    l.mesh.reset(mesh);
  }
  dt_engine* e = nullptr;
  check(dt_engine_create(l.mesh.get(), l.model.get(), o, nullptr, &e), "dt_engine_create");
  l.engine.reset(e);
}

Loaded load_checkpoint(const std::string& stem, int64_t tp, int64_t pp) {
  Loaded l;
  dt_module* m = nullptr;
  check(dt_module_create_from_checkpoint(stem.c_str(), &m), "reading the checkpoint");
  l.model.reset(m);
  attach_inference_engine(l, tp, pp);
  dt_engine* e = l.engine.get();
  check(dt_engine_load(e, stem.c_str()), "loading the checkpoint");
  l.info = nlohmann::json::parse(
      read_text([&](char* b, size_t c, size_t* n) { return dt_checkpoint_info_json(stem.c_str(), b, c, n); },
                "dt_checkpoint_info_json"));
  return l;
}

}  // namespace dtcli
