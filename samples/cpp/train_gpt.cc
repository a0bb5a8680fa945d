// Trains a tiny GPT data-parallel on 3-digit addition, saves a checkpoint and continues a
// prompt: the C API from C++, with each handle owned by a unique_ptr and each failed
// status thrown as an exception.
//   ./train_gpt_cpp [checkpoint-stem]
// Build: c++ -std=c++17 train_gpt.cc $(pkg-config --cflags --libs dtrain) -o train_gpt_cpp
#include <dtrain/dtrain.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {
void check(dt_status s, const char* what) {
  if (s != DT_OK) throw std::runtime_error(std::string(what) + ": " + dt_last_error_message());
}

template <typename T, void (*Destroy)(T*)>
struct Deleter {
  void operator()(T* p) const { Destroy(p); }
};
using Options = std::unique_ptr<dt_options, Deleter<dt_options, dt_options_destroy>>;
using Mesh = std::unique_ptr<dt_mesh, Deleter<dt_mesh, dt_mesh_destroy>>;
using Model = std::unique_ptr<dt_module, Deleter<dt_module, dt_module_destroy>>;
using Optimizer = std::unique_ptr<dt_optimizer, Deleter<dt_optimizer, dt_optimizer_destroy>>;
using Engine = std::unique_ptr<dt_engine, Deleter<dt_engine, dt_engine_destroy>>;
using Dataset = std::unique_ptr<dt_dataset, Deleter<dt_dataset, dt_dataset_destroy>>;
using Loader = std::unique_ptr<dt_loader, Deleter<dt_loader, dt_loader_destroy>>;
using Tensor = std::unique_ptr<dt_tensor, Deleter<dt_tensor, dt_tensor_destroy>>;

// Options from a list of key/value pairs (numbers and strings).
struct Value {
  Value(const char* s) : text(s) {}
  Value(long long i) : integer(i), is_int(true) {}
  Value(double d) : real(d) {}
  const char* text = nullptr;
  long long integer = 0;
  double real = 0;
  bool is_int = false;
};
Options options(std::initializer_list<std::pair<const char*, Value>> values) {
  dt_options* raw = nullptr;
  check(dt_options_create(&raw), "options");
  Options o(raw);
  for (const auto& [key, v] : values) {
    if (v.text) check(dt_options_set_string(raw, key, v.text), key);
    else if (v.is_int) check(dt_options_set_int(raw, key, v.integer), key);
    else check(dt_options_set_double(raw, key, v.real), key);
  }
  return o;
}

template <typename Handle, typename Create, typename... Args>
Handle make(Create create, Args... args) {
  typename Handle::pointer raw = nullptr;
  check(create(args..., &raw), "create");
  return Handle(raw);
}
}  // namespace

int main(int argc, char** argv) try {
  const std::string stem = argc > 1 ? argv[1] : "sample-ckpt/gpt";
  Mesh mesh = make<Mesh>(dt_mesh_create, "local", 2, nullptr);
  Model model = make<Model>(dt_module_create_gpt, options({{"preset", "gpt-tiny"}, {"seed", 1LL}}).get());
  Optimizer opt = make<Optimizer>(dt_optimizer_create, model.get(), "adamw", options({{"lr", 0.003}}).get());
  Engine engine = make<Engine>(dt_engine_create, mesh.get(), model.get(), opt.get(), nullptr);
  Dataset data = make<Dataset>(dt_dataset_create, "addition",
                               options({{"digits", 3LL}, {"seed", 7LL}, {"split", "train"}}).get());
  Loader loader = make<Loader>(dt_loader_create, data.get(), options({{"batch", 16LL}, {"seed", 0LL}}).get());

  int64_t context = 0;
  check(dt_dataset_context(data.get(), &context), "context");
  const int64_t shape[2] = {16, context};
  Tensor inputs = make<Tensor>(dt_tensor_create, DT_I32, shape, 2, "cpu", nullptr);
  Tensor targets = make<Tensor>(dt_tensor_create, DT_I32, shape, 2, "cpu", nullptr);
  for (int step = 1; step <= 30; ++step) {
    double loss = 0;
    check(dt_loader_next(loader.get(), inputs.get(), targets.get()), "next batch");
    check(dt_engine_train_step(engine.get(), inputs.get(), targets.get(), &loss), "train step");
    std::printf("step %d loss %.8f\n", step, loss);
  }
  check(dt_engine_save(engine.get(), stem.c_str()), "save");
  std::printf("saved %s\n", stem.c_str());

  const std::string prompt = "123+456=";
  std::vector<int32_t> tokens(prompt.begin(), prompt.end());
  int64_t length = static_cast<int64_t>(tokens.size()), n_new = 0;
  std::vector<int32_t> out(5);
  check(dt_engine_generate(engine.get(), tokens.data(), &length, 1, options({{"max_new_tokens", 5LL}}).get(),
                           out.data(), 5, &n_new), "generate");
  std::string text = prompt;
  for (int64_t i = 0; i < n_new; ++i) text += out[i] >= 32 && out[i] < 127 ? char(out[i]) : '?';
  std::printf("%s\n", text.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
