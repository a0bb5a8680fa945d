// Writes the fuzzers' seed corpora: valid files of each kind, made by the library itself
// (so the seeds follow the format as it is today, with no binary files in the repository).
//   fuzz_seeds DIR   ->  DIR/<harness>/<seed files>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "core/tensor.h"
#include "dtrain/dtrain.h"
#include "io/checkpoint.h"

namespace fs = std::filesystem;

namespace {

void put(const fs::path& file, const std::string& bytes) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}

std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A small GPT saved by an engine (config, optimizer state and all), into `stem`.
bool save_gpt(const std::string& stem, bool llama) {
  dt_options* o = nullptr;
  dt_options_create(&o);
  for (auto [k, v] : {std::pair<const char*, int64_t>{"vocab_size", 16}, {"context", 8}, {"n_layer", 1},
                      {"n_head", 2}, {"d_model", 8}})
    dt_options_set_int(o, k, v);
  if (llama) dt_options_set_string(o, "preset", "llama-tiny");
  dt_module* m = nullptr;
  dt_optimizer* opt = nullptr;
  dt_engine* e = nullptr;
  bool ok = dt_module_create_gpt(o, &m) == DT_OK && dt_optimizer_create(m, "adamw", nullptr, &opt) == DT_OK &&
            dt_engine_create(nullptr, m, opt, nullptr, &e) == DT_OK && dt_engine_save(e, stem.c_str()) == DT_OK;
  if (!ok) std::cerr << "fuzz_seeds: " << dt_last_error_message() << "\n";
  dt_engine_destroy(e), dt_optimizer_destroy(opt), dt_module_destroy(m), dt_options_destroy(o);
  return ok;
}

int write_seeds(const fs::path& out) {
  const fs::path work = out / "work";
  fs::remove_all(work);
  fs::create_directories(work);
  for (bool llama : {false, true}) {
    const std::string name = llama ? "llama" : "gpt";
    if (!save_gpt((work / name).string(), llama)) return 1;
    const nlohmann::json idx = dt::io::read_checkpoint_index(work.string(), name);
    put(out / "checkpoint_index" / (name + ".index.json"), slurp(work / (name + ".index.json")));
    const std::string data = idx["weight_map"].begin().value().get<std::string>();
    put(out / "safetensors" / (name + ".safetensors"), slurp(work / data));
  }
  // A file of tensors of four dtypes and ranks, written by the checkpoint writer directly.
  std::vector<dt::io::CheckpointTensor> ts = {{"f32", dt::Tensor::zeros({2, 3}, dt::DType::F32), {}},
                                              {"bf16", dt::Tensor::zeros({3}, dt::DType::BF16), {}},
                                              {"i64", dt::Tensor::zeros({1}, dt::DType::I64), {}},
                                              {"f16", dt::Tensor::zeros({2, 1, 2}, dt::DType::F16), {}}};
  dt::io::save_checkpoint(work.string(), ts, {{"step", 3}});
  put(out / "checkpoint_index" / "dtypes.index.json", slurp(work / "checkpoint.index.json"));
  put(out / "safetensors" / "dtypes.safetensors", slurp(work / "checkpoint.000001.safetensors"));
  // Token files: byte 0 picks the width (bit 0) and a vocabulary bound (bit 1), byte 1 the context.
  put(out / "token_dataset" / "u16", std::string("\x00\x04" "\x01\x00\x02\x00\x03\x00\x04\x00\x05\x00\x06\x00", 14));
  put(out / "token_dataset" / "u32", std::string("\x03\x02" "\x01\x00\x00\x00\x2b\x01\x00\x00\x07\x00\x00\x00", 14));
  put(out / "token_dataset" / "text", std::string("\x00\x08") + "the quick brown fox jumps over the lazy dog\n");
  put(out / "layers_spec" / "mlp", "linear:4:32,gelu,layernorm:32,linear:32:1");
  put(out / "layers_spec" / "nobias", "linear:3:5:nobias,silu,rmsnorm:5,linear:5:2");
  // dtrain serve's request parser: whole requests, pipelined, chunked, refused.
  put(out / "http_request" / "get", "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  put(out / "http_request" / "post", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 13\r\n\r\n"
                                     "{\"prompt\":\"a\"}GET / HTTP/1.0\r\n\r\n");
  put(out / "http_request" / "chunked", "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                                        "Expect: 100-continue\r\n\r\n5;x=1\r\nhello\r\n0\r\nT: 1\r\n\r\n");
  put(out / "http_request" / "smuggle", "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc");
  fs::remove_all(work);
  std::cout << "fuzz_seeds: wrote " << out.string() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_seeds DIR\n";
    return 2;
  }
  try {
    return write_seeds(argv[1]);
  } catch (const std::exception& e) {
    std::cerr << "fuzz_seeds: " << e.what() << "\n";
    return 1;
  }
}
