// Shared pieces of the `dtrain` command line. It is a client of the public header only:
// whatever it does, a host in C, Go or Java can do through the same calls.
#pragma once
#include <dtrain/dtrain.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtcli {

// A failed library call, carrying dt_last_error_message(); main() prints it and exits 2.
struct CliError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws CliError with the library's message when `s` is not DT_OK.
void check(dt_status s, const std::string& what);

// Owning handles: each releases with its dt_*_destroy.
template <class T, void (*Destroy)(T*)>
struct Deleter {
  void operator()(T* p) const { Destroy(p); }
};
using Options = std::unique_ptr<dt_options, Deleter<dt_options, dt_options_destroy>>;
using Module = std::unique_ptr<dt_module, Deleter<dt_module, dt_module_destroy>>;
using Optimizer = std::unique_ptr<dt_optimizer, Deleter<dt_optimizer, dt_optimizer_destroy>>;
using Engine = std::unique_ptr<dt_engine, Deleter<dt_engine, dt_engine_destroy>>;
using Dataset = std::unique_ptr<dt_dataset, Deleter<dt_dataset, dt_dataset_destroy>>;
using Loader = std::unique_ptr<dt_loader, Deleter<dt_loader, dt_loader_destroy>>;
using Tensor = std::unique_ptr<dt_tensor, Deleter<dt_tensor, dt_tensor_destroy>>;
using Mesh = std::unique_ptr<dt_mesh, Deleter<dt_mesh, dt_mesh_destroy>>;

Options make_options();
void set(dt_options* o, const char* key, int64_t v);
void set(dt_options* o, const char* key, double v);
void set(dt_options* o, const char* key, const std::string& v);
void set_bool(dt_options* o, const char* key, bool v);

// Text a dt_*_json call writes, from one call into `capacity` bytes: for calls that measure
// (dt_cluster_calibrate_json), which must not run again only to be sized, and which under
// mpirun are collective (one rank's text may be longer than another's).
template <class F> std::string read_text_once(F&& call, const char* what, size_t capacity = 1 << 16) {
  std::string s(capacity, '\0');
  size_t got = 0;
  check(call(s.data(), s.size(), &got), what);
  if (got > s.size()) throw CliError(std::string(what) + ": the result needs " + std::to_string(got) + " bytes");
  s.resize(got > 0 ? got - 1 : 0);
  return s;
}

// Text a dt_*_json call writes (asks for the size first).
template <class F> std::string read_text(F&& call, const char* what) {
  size_t needed = 0;
  check(call(nullptr, 0, &needed), what);
  for (;;) {
    std::string s(needed, '\0');
    size_t got = 0;
    check(call(s.data(), s.size(), &got), what);
    // A live text (a server's metrics) may have grown since it was sized: the call then
    // wrote a truncated copy, so ask again with the room it now needs.
    if (got <= s.size()) {
      s.resize(got > 0 ? got - 1 : 0);
      return s;
    }
    needed = got;
  }
}

// i32 [rows, cols] CPU tensor.
Tensor make_batch(int64_t rows, int64_t cols);

// "--data" spec: "addition", "text:PATH", "jsonl:PATH" or "tokens:PATH[:WIDTH]".
struct DataSpec {
  std::string kind, path;
  int64_t width = 2;
  // A model directory (or tokenizer.json) whose tokenizer reads "text" and "jsonl" data
  // (dtrain train --init hf:DIR sets it); "" reads text as bytes. chat_template: a built-in
  // family for "jsonl" conversations instead of the model's own.
  std::string tokenizer, chat_template;
};
DataSpec parse_data_spec(const std::string& spec);

// Opens the dataset a spec names. context is used by text and tokens; digits, size, seed
// and split by addition.
Dataset open_dataset(const DataSpec& spec, int64_t context, int64_t digits, int64_t size, int64_t seed,
                     const std::string& split);
int64_t dataset_size(dt_dataset* d);
int64_t dataset_context(dt_dataset* d);

// Most examples (--train-size) and held-out problems (--problems, --eval-problems) a command
// accepts: more would run for days.
constexpr int64_t kMaxExamples = 1000000000, kMaxProblems = 10000000;
// Host memory a loader needs per example of its dataset (the order of an epoch: one int64
// each), for refusing a dataset the machine cannot hold; kExampleBytesWhy says so.
inline double example_bytes(int64_t examples) { return 8.0 * static_cast<double>(examples); }
constexpr const char* kExampleBytesWhy = "8 bytes per example for a loader's order of an epoch";

// Exact-match evaluation of a task whose targets are masked (-1) up to the answer, such as
// addition: each example's prompt is its inputs up to the first target, the answer its
// targets from there; the model answers greedily, a chunk of problems at a time (memory does
// not grow with `problems`). Prints the first `show` problems.
struct ExactMatch {
  int64_t right = 0, total = 0;
  double seconds = 0.0, tokens_per_s = 0.0;
};
ExactMatch exact_match(dt_engine* engine, dt_dataset* data, int64_t problems, int64_t show, bool print);

// Mean loss over up to `batches` batches of `batch` examples in order (no shuffling); 0
// batches: all of them (one pass). `batches` in the result is how many it ran (at least 1).
struct EvalLoss {
  double loss = 0.0;
  int64_t batches = 0, batch = 0;
};
EvalLoss eval_loss(dt_engine* engine, dt_dataset* data, int64_t batch, int64_t batches);

// Prints to stderr what the user should see; "\r"-redrawn on a terminal, a line per
// tenth otherwise (logs stay readable).
class Progress {
 public:
  Progress(int64_t total, int64_t start, bool enabled);
  void update(int64_t done, const std::string& status);
  void finish(const std::string& status);

 private:
  int64_t total_, start_, last_tenth_ = -1;
  bool enabled_, tty_;
  double t0_;
};

double now_seconds();
std::string format_duration(double seconds);

// An SVG line chart of (step, loss) pairs: log-scale loss axis, labelled ticks.
void write_loss_svg(const std::string& path, const std::vector<std::pair<int64_t, double>>& points,
                    const std::string& title);

// Writes `text` to `path`, replacing it (CliError naming the path on failure).
void write_file(const std::string& path, const std::string& text);
// Refuses (UsageError naming `flag`, the path and the system's reason) an output file that
// could not be written, before the work whose result it would hold: a file it creates to
// find out is removed again, an existing one is left as it was.
void check_writable(const std::string& flag, const std::string& path);

// A model and an engine from a checkpoint stem (e.g. runs/latest/ckpt), its weights loaded;
// info: dt_checkpoint_info_json's. tp, pp > 1: the engine on a local mesh of those ranks.
struct Loaded {
  Module model;
  Optimizer opt;
  Mesh mesh;  // --tp, --pp: the ranks of this process (released after the engine)
  Engine engine;
  nlohmann::json info;
};
Loaded load_checkpoint(const std::string& stem, int64_t tp = 1, int64_t pp = 1);
// l.model's engine for inference (SGD, no optimizer state) over tp x pp ranks of this process.
void attach_inference_engine(Loaded& l, int64_t tp, int64_t pp);

}  // namespace dtcli
