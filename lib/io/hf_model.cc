#include "io/hf_model.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "core/error.h"
#include "io/file_util.h"
#include "io/json_limits.h"
#include "io/safetensors.h"

namespace dt::io {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// ---- The name map, declared once: which Hugging Face tensors make each parameter. ------

// Rows [row0, row0 + rows) of our parameter are the HF tensor `hf`, stored [rows, cols]
// (or [cols, rows] when `transposed`: GPT-2's Conv1D). 1-D parameters: rows = elements.
struct Piece {
  std::string hf;
  int64_t row0, rows;
  bool transposed;
};

bool is_gpt2(const std::string& arch) { return arch == "GPT2LMHeadModel"; }

std::vector<Piece> pieces_of(const std::string& arch, const nn::Parameter& p, const nn::GPTConfig& raw) {
  const nn::GPTConfig c = raw.resolved();
  const std::string& n = p.name;
  const int64_t rows = p.shape.empty() ? 1 : p.shape[0];
  const bool gpt2 = is_gpt2(arch);
  const auto whole = [&](const std::string& hf, bool t = false) { return std::vector<Piece>{{hf, 0, rows, t}}; };
  // A SwiGLU fc (gate rows, then up rows, F each) from its two Hugging Face tensors.
  const auto gate_up = [](const std::string& gate, const std::string& up, int64_t F) {
    return std::vector<Piece>{{gate, 0, F, false}, {up, F, F, false}};
  };
  if (n == "wte.weight") return whole(gpt2 ? "transformer.wte.weight" : "model.embed_tokens.weight");
  if (n == "wpe.weight") return whole("transformer.wpe.weight");
  if (n == "lm_head.weight") return whole("lm_head.weight");
  if (n.rfind("ln_f.", 0) == 0) return whole((gpt2 ? "transformer.ln_f." : "model.norm.") + n.substr(5));
  if (n.rfind("blocks.", 0) != 0) invalid("parameter \"" + n + "\" has no Hugging Face name (" + arch + ")");
  const size_t dot = n.find('.', 7);
  const std::string layer = n.substr(7, dot - 7), rest = n.substr(dot + 1);
  const std::string kind = rest.substr(rest.rfind('.') + 1);  // "weight" or "bias"
  if (gpt2) {
    const std::string L = "transformer.h." + layer + ".";
    static const std::map<std::string, std::string> names = {
        {"ln1", "ln_1"}, {"ln2", "ln_2"}, {"attn.qkv", "attn.c_attn"}, {"attn.proj", "attn.c_proj"},
        {"mlp.fc", "mlp.c_fc"}, {"mlp.proj", "mlp.c_proj"}};
    const std::string module = rest.substr(0, rest.rfind('.'));
    auto it = names.find(module);
    if (it == names.end()) invalid("parameter \"" + n + "\" has no Hugging Face name (" + arch + ")");
    // Conv1D weights are [in, out]; LayerNorm weights and every bias are vectors.
    return whole(L + it->second + "." + kind, kind == "weight" && module != "ln1" && module != "ln2");
  }
  const std::string L = "model.layers." + layer + ".";
  const int64_t D = c.head_dim(), q = c.n_head * D, kv = c.n_kv_head * D;
  if (rest == "ln1.weight") return whole(L + "input_layernorm.weight");
  if (rest == "ln2.weight") return whole(L + "post_attention_layernorm.weight");
  if (rest == "attn.qkv.weight" || rest == "attn.qkv.bias")
    return {{L + "self_attn.q_proj." + kind, 0, q, false},
            {L + "self_attn.k_proj." + kind, q, kv, false},
            {L + "self_attn.v_proj." + kind, q + kv, kv, false}};
  if (rest == "attn.proj.weight") return whole(L + "self_attn.o_proj.weight");
  if (rest == "mlp.fc.weight")
    return gate_up(L + "mlp.gate_proj.weight", L + "mlp.up_proj.weight", c.d_ff);
  if (rest == "mlp.proj.weight") return whole(L + "mlp.down_proj.weight");
  // Qwen2-MoE: mlp.gate is the router; the experts and the shared expert are Llama MLPs.
  if (arch == "Qwen2MoeForCausalLM") {
    if (rest == "moe.router.weight") return whole(L + "mlp.gate.weight");
    if (rest == "moe.shared_gate.weight") return whole(L + "mlp.shared_expert_gate.weight");
    std::string mlp, what;
    if (rest.rfind("moe.shared.", 0) == 0) {
      mlp = L + "mlp.shared_expert.", what = rest.substr(11);
    } else if (rest.rfind("moe.experts.", 0) == 0) {
      const size_t at = rest.find('.', 12);
      mlp = L + "mlp.experts." + rest.substr(12, at - 12) + ".", what = rest.substr(at + 1);
    }
    const int64_t F = rest.rfind("moe.shared.", 0) == 0 ? c.moe_shared_d_ff : c.d_ff;
    if (what == "fc.weight") return gate_up(mlp + "gate_proj.weight", mlp + "up_proj.weight", F);
    if (what == "proj.weight") return whole(mlp + "down_proj.weight");
    invalid("parameter \"" + n + "\" has no Hugging Face name (" + arch + ")");
  }
  // Mixtral: block_sparse_moe.gate is the router; each expert's w1 (gate), w3 (up), w2 (down).
  if (rest == "moe.router.weight") return whole(L + "block_sparse_moe.gate.weight");
  if (rest.rfind("moe.experts.", 0) == 0) {
    const size_t at = rest.find('.', 12);
    const std::string E = L + "block_sparse_moe.experts." + rest.substr(12, at - 12) + ".", what = rest.substr(at + 1);
    if (what == "fc.weight") return gate_up(E + "w1.weight", E + "w3.weight", c.d_ff);
    if (what == "proj.weight") return whole(E + "w2.weight");
  }
  invalid("parameter \"" + n + "\" has no Hugging Face name (" + arch + ")");
}

// Tensors a checkpoint may carry that are derived, not parameters: skipped on import.
bool derived_buffer(const std::string& arch, const std::string& name, bool tied) {
  auto ends = [&](const std::string& s) { return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0; };
  if (ends(".rotary_emb.inv_freq")) return true;
  if (tied && name == "lm_head.weight") return true;  // a tied head saved anyway: the embedding's copy
  return is_gpt2(arch) && (ends(".attn.bias") || ends(".attn.masked_bias"));
}

// The stored shape of a piece of parameter p.
Shape piece_shape(const nn::Parameter& p, const Piece& pc) {
  if (p.shape.size() <= 1) return {pc.rows};
  return pc.transposed ? Shape{p.shape[1], pc.rows} : Shape{pc.rows, p.shape[1]};
}

// ---- Element copies between dtypes, optionally transposing a [rows, cols] block. -------

template <class S, class D>
void convert(const S* src, D* dst, int64_t rows, int64_t cols, bool transposed) {
  if (!transposed) {
    const int64_t n = rows * cols;
    if constexpr (std::is_same_v<S, D>) {
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(S));
    } else {
      for (int64_t i = 0; i < n; ++i) dst[i] = from_f32<D>(to_f32(src[i]));
    }
    return;
  }
  // dst [rows, cols] = src [cols, rows] transposed, in tiles that stay in cache.
  constexpr int64_t B = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += B)
    for (int64_t c0 = 0; c0 < cols; c0 += B)
      for (int64_t r = r0; r < std::min(rows, r0 + B); ++r)
        for (int64_t k = c0; k < std::min(cols, c0 + B); ++k)
          dst[r * cols + k] = from_f32<D>(to_f32(src[k * rows + r]));
}

void convert_any(const void* src, DType st, void* dst, DType dt, int64_t rows, int64_t cols, bool transposed) {
  dispatch_float(st, [&](auto s) {
    using S = decltype(s);
    dispatch_float(dt, [&](auto d) {
      using D = decltype(d);
      convert(static_cast<const S*>(src), static_cast<D*>(dst), rows, cols, transposed);
    });
  });
}

// ---- Reading the directory. ------------------------------------------------------------

// A shard name from an index: a plain file name in the directory.
std::string shard_path(const std::string& dir, const std::string& index_path, const std::string& name) {
  const bool plain = !name.empty() && name.find('/') == std::string::npos && name.find('\\') == std::string::npos &&
                     name != "." && name != ".." && name.find('\0') == std::string::npos;
  if (!plain)
    fail(DT_ERR_IO, index_path + ": shard \"" + name + "\" is not a plain file name in the model directory "
                                 "(a path, \"..\" or empty: refused)");
  return dir + "/" + name;
}

struct OpenShard {
  std::string path;
  std::unique_ptr<ReadOnlyFile> file;
  StHeader header;
};

}  // namespace

const std::vector<std::string>& hf_tokenizer_files() {
  static const std::vector<std::string> files = {"tokenizer.json",         "tokenizer_config.json",
                                                 "special_tokens_map.json", "chat_template.jinja",
                                                 "tokenizer.model",        "vocab.json",
                                                 "merges.txt",             "added_tokens.json"};
  return files;
}

HfModelDir hf_open(const std::string& dir_in, bool need_weights) {
  HfModelDir out;
  out.dir = dir_in.empty() ? "." : dir_in;
  const std::string& dir = out.dir;
  if (!fs::is_directory(dir)) fail(DT_ERR_IO, dir + ": not a directory (expected a Hugging Face model directory)");
  const std::string config_path = dir + "/config.json";
  if (!file_exists(config_path)) fail(DT_ERR_IO, config_path + ": missing (every Hugging Face model has one)");
  const json config = read_bounded_json_file(config_path, "a model config.json");
  const std::string gen_path = dir + "/generation_config.json";
  json generation;
  const bool has_gen = file_exists(gen_path);
  if (has_gen) generation = read_bounded_json_file(gen_path, "a generation_config.json");
  out.config = hf_config_from_json(config, has_gen ? &generation : nullptr, config_path);
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (file_exists(index_path)) {
    const json idx = read_bounded_json_file(index_path, "a shard index");
    if (!idx.is_object() || !idx.contains("weight_map") || !idx["weight_map"].is_object())
      fail(DT_ERR_IO, index_path + ": no \"weight_map\" object");
    std::set<std::string> names;
    for (const auto& [tensor, file] : idx["weight_map"].items()) {
      if (!file.is_string()) fail(DT_ERR_IO, index_path + ": weight_map[\"" + tensor + "\"] is not a file name");
      names.insert(file.get<std::string>());
    }
    for (const std::string& n : names) out.files.push_back(shard_path(dir, index_path, n));
  } else if (file_exists(dir + "/model.safetensors")) {
    out.files.push_back(dir + "/model.safetensors");
  } else if (need_weights) {
    fail(DT_ERR_IO, dir + ": no model.safetensors and no model.safetensors.index.json (only safetensors "
                          "weights are read; convert a pytorch_model.bin with transformers' save_pretrained)");
  }
  for (const std::string& f : out.files) {
    std::error_code ec;
    if (!fs::is_regular_file(f, ec)) fail(DT_ERR_IO, f + ": missing or not a regular file (a shard of " + dir + ")");
    out.weight_bytes += fs::file_size(f, ec);
  }
  return out;
}

void hf_load_weights(const HfModelDir& d, nn::GPT& model) {
  DT_CHECK(model.whole() && model.tp().size() == 1 && model.device().type == DeviceType::CPU,
           "hf_load_weights: the model must be whole (no tp split, no pipeline stage) and on the CPU");
  const std::string& arch = d.config.architecture;
  const nn::GPTConfig& c = model.config();
  // Open every file and index its tensors (a name may appear once across all shards).
  std::vector<OpenShard> shards;
  std::map<std::string, std::pair<const OpenShard*, const StEntry*>> found;
  shards.reserve(d.files.size());
  for (const std::string& f : d.files) {
    OpenShard s;
    s.path = f;
    s.file = std::make_unique<ReadOnlyFile>(f);
    s.header = st_read_header(*s.file);
    shards.push_back(std::move(s));
  }
  for (const OpenShard& s : shards)
    for (const StEntry& e : s.header.entries) {
      auto [it, fresh] = found.emplace(e.name, std::make_pair(&s, &e));
      if (!fresh) fail(DT_ERR_IO, s.path + ": tensor \"" + e.name + "\" is also in " + it->second.first->path);
    }
  auto lookup = [&](const std::string& hf) -> const std::pair<const OpenShard*, const StEntry*>* {
    auto it = found.find(hf);
    if (it == found.end() && is_gpt2(arch) && hf.rfind("transformer.", 0) == 0) it = found.find(hf.substr(12));
    return it == found.end() ? nullptr : &it->second;
  };
  // Check everything first.
  struct Job {
    nn::Parameter* p;
    Piece piece;
    const OpenShard* shard;
    const StEntry* entry;
  };
  std::vector<Job> jobs;
  std::set<const StEntry*> used;
  for (nn::Parameter* p : model.parameters())
    for (const Piece& pc : pieces_of(arch, *p, c)) {
      const auto* hit = lookup(pc.hf);
      if (!hit) fail(DT_ERR_IO, d.dir + ": tensor \"" + pc.hf + "\" is missing (a " + arch + " needs it for " + p->name + ")");
      const StEntry& e = *hit->second;
      if (!is_floating(e.dtype))
        fail(DT_ERR_IO, hit->first->path + ": tensor \"" + e.name + "\" is " + st_dtype_name(e.dtype) +
                            "; accepted: F32, BF16, F16");
      const Shape want = piece_shape(*p, pc);
      if (e.shape != want)
        fail(DT_ERR_IO, hit->first->path + ": tensor \"" + e.name + "\" has shape " + shape_str(e.shape) +
                            "; the config (" + c.str() + ") needs " + shape_str(want));
      if (!used.insert(&e).second) fail(DT_ERR_IO, "tensor \"" + e.name + "\" would fill two parameters");
      jobs.push_back({p, pc, hit->first, &e});
    }
  for (const auto& [name, hit] : found)
    if (!used.count(hit.second) && !derived_buffer(arch, name, c.tied_embeddings))
      fail(DT_ERR_IO, hit.first->path + ": unexpected tensor \"" + name + "\" (not part of a " + arch + " of this config; " +
                          "a different architecture or a config that does not match the weights?)");
  // Then convert each piece straight into its parameter.
  for (const Job& j : jobs) {
    const Tensor& v = j.p->value;
    const int64_t cols = v.ndim() <= 1 ? 1 : v.dim(1);
    char* dst = static_cast<char*>(v.raw()) + static_cast<size_t>(j.piece.row0 * cols) * dtype_size(v.dtype());
    // Read, not mapped: a shard truncated meanwhile is a DT_ERR_IO, not a SIGBUS (ReadOnlyFile).
    const std::vector<unsigned char> src =
        j.shard->file->read(j.shard->header.data_start + j.entry->begin, j.entry->end - j.entry->begin);
    convert_any(src.data(), j.entry->dtype, dst, v.dtype(), j.piece.rows, cols, j.piece.transposed);
  }
}

namespace {

void write_json(const std::string& path, const json& j) {
  const std::string text = j.dump(2) + "\n";
  AtomicFile f(path);
  f.write(text.data(), text.size());
  f.commit();
}

struct OutTensor {
  nn::Parameter* p;
  Piece piece;
  StEntry entry;
};

void write_shard(const std::string& path, std::vector<OutTensor>& ts, DType dtype) {
  std::vector<StEntry> entries;
  for (OutTensor& t : ts) entries.push_back(t.entry);
  const std::string header = st_encode_header(entries, {{"format", "pt"}});
  for (size_t i = 0; i < ts.size(); ++i) ts[i].entry = entries[i];
  std::vector<OutTensor*> order;
  for (OutTensor& t : ts) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->entry.begin < b->entry.begin; });
  AtomicFile f(path);
  f.write(header.data(), header.size());
  std::vector<char> buf;
  for (OutTensor* t : order) {
    const Tensor& v = t->p->value;
    const int64_t cols = v.ndim() <= 1 ? 1 : v.dim(1);
    buf.resize(t->entry.end - t->entry.begin);
    const char* src = static_cast<const char*>(v.raw()) + static_cast<size_t>(t->piece.row0 * cols) * dtype_size(v.dtype());
    // The inverse of the load: a transposed piece is stored [cols, rows].
    if (t->piece.transposed) convert_any(src, v.dtype(), buf.data(), dtype, cols, t->piece.rows, true);
    else convert_any(src, v.dtype(), buf.data(), dtype, t->piece.rows, cols, false);
    f.write(buf.data(), buf.size());
  }
  f.commit();
}

}  // namespace

void hf_save(nn::GPT& model, const std::string& dir, const HfSaveOptions& o) {
  DT_CHECK(model.whole() && model.tp().size() == 1 && model.device().type == DeviceType::CPU,
           "hf_save: the model must be whole (no tp split, no pipeline stage) and on the CPU");
  DT_CHECK(is_floating(o.dtype), std::string("hf_save: dtype ") + dtype_name(o.dtype) + "; accepted: f32, bf16, f16");
  const nn::GPTConfig& c = model.config();
  std::string why;
  const std::string arch = o.architecture.empty() ? hf_architecture_of(c, &why) : o.architecture;
  DT_CHECK(!arch.empty(), "hf_save: no Hugging Face architecture for this model: " + why);
  const std::string derived = hf_architecture_of(c, &why);
  DT_CHECK(derived == arch || (derived == "LlamaForCausalLM" && arch == "MistralForCausalLM"),
           "hf_save: architecture \"" + arch + "\" does not fit this model (" +
               (derived.empty() ? why : "it is a " + derived) + ")");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(DT_ERR_IO, dir + ": cannot create the directory (" + ec.message() + ")");
  // The tensors, in parameter order, cut into shards of at most max_shard_bytes.
  std::vector<std::vector<OutTensor>> shards(1);
  uint64_t in_shard = 0;
  for (nn::Parameter* p : model.parameters())
    for (const Piece& pc : pieces_of(arch, *p, c)) {
      OutTensor t{p, pc, {}};
      t.entry.name = pc.hf;
      t.entry.dtype = o.dtype;
      t.entry.shape = piece_shape(*p, pc);
      const uint64_t bytes = static_cast<uint64_t>(checked_numel(t.entry.shape, o.dtype, pc.hf.c_str())) * dtype_size(o.dtype);
      if (in_shard > 0 && in_shard + bytes > o.max_shard_bytes) shards.emplace_back(), in_shard = 0;
      shards.back().push_back(t);
      in_shard += bytes;
    }
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (shards.size() == 1) {
    write_shard(dir + "/model.safetensors", shards[0], o.dtype);
    fs::remove(index_path, ec);  // a stale index would name other files
  } else {
    json map = json::object();
    uint64_t total = 0;
    char name[64];
    for (size_t s = 0; s < shards.size(); ++s) {
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
      write_shard(dir + "/" + name, shards[s], o.dtype);
      for (const OutTensor& t : shards[s]) map[t.entry.name] = name, total += t.entry.end - t.entry.begin;
    }
    write_json(index_path, {{"metadata", {{"total_size", total}}}, {"weight_map", map}});
    fs::remove(dir + "/model.safetensors", ec);
  }
  write_json(dir + "/config.json", hf_config_to_json(c, arch, o.dtype, o.bos_token_id, o.eos_token_ids));
  write_json(dir + "/generation_config.json", hf_generation_config_json(o.bos_token_id, o.eos_token_ids));
  if (!o.tokenizer_from.empty() && fs::weakly_canonical(o.tokenizer_from, ec) != fs::weakly_canonical(dir, ec))
    for (const std::string& n : hf_tokenizer_files()) {
      const std::string src = o.tokenizer_from + "/" + n;
      if (!file_exists(src)) continue;
      std::vector<char> bytes = read_file(src, uint64_t(256) << 20, "a tokenizer file");
      AtomicFile f(dir + "/" + n);
      f.write(bytes.data(), bytes.size());
      f.commit();
    }
}

}  // namespace dt::io
