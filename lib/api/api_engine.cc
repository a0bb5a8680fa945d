// dt_engine: training steps, evaluation, generation and checkpoints over a GPT module.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "comm/mesh.h"
#include "engine/generate.h"
#include "engine/trainer.h"
#include "io/checkpoint.h"
#include "lib/api/firewall.h"
#include "lib/api/sampling_keys.h"
#include "nn/gpt.h"

using dt::api::guard;
using dt::api::need;

// The engine holds its module, optimizer and mesh by shared_ptr: TrainEngine keeps plain
// references to the first two, so they must outlive it whatever order the host destroys
// the handles in. `engine` is declared last so that it is destroyed first.
struct dt_engine {
  std::shared_ptr<dt::nn::Module> module;
  dt::nn::GPT* gpt = nullptr;
  std::shared_ptr<dt::optim::Optimizer> opt;
  std::shared_ptr<dt::comm::Mesh> mesh;
  std::string last_stats;     // metrics JSON of the last successful train step ("" before any)
  std::string last_generate;  // statistics JSON of the last successful generate ("" before any)
  std::unique_ptr<dt::engine::Trainer> engine;
  std::shared_ptr<dt::api::ModuleViews> views;  // the module's, pointed at this engine
  ~dt_engine() {
    if (views && views->trainer == engine.get()) views->trainer = nullptr;
  }
};

namespace dt::api {

void view_read(const dt_tensor* t) {
  if (t && t->views && t->views->trainer) t->views->trainer->refresh_host();
}

void view_written(const dt_tensor* t, bool strict) {
  if (t && t->views && t->views->trainer) t->views->trainer->host_written(t->param, strict);
}

}  // namespace dt::api

namespace {

dt_engine& engine_of(dt_engine* e) { return *need(e, "engine"); }


dt::engine::TrainOptions train_options(const dt_options* options, float base_lr, dt::engine::ParallelOptions& par) {
  dt::OptionReader r(dt::api::opts_of(options), "dt_engine_create",
                     {"micro_batches", "max_grad_norm", "schedule", "warmup_steps", "total_steps", "min_lr_ratio",
                      "loss_scale_init", "loss_scale_growth_interval", "bucket_bytes", "zero",
                      "sequence_parallel", "pp_schedule", "virtual_stages", "pp_blocks"});
  par.sequence_parallel = r.get_bool("sequence_parallel", false);
  par.pp_schedule = r.get_string("pp_schedule", par.pp_schedule);
  par.virtual_stages = static_cast<int>(r.get_int("virtual_stages", par.virtual_stages));
  if (r.has("pp_blocks"))
    par.pp_blocks = dt::engine::parse_block_counts(r.get_string("pp_blocks", ""), "option \"pp_blocks\"");
  par.zero = static_cast<int>(r.get_int("zero", 0));
  DT_CHECK(par.zero == 0 || !r.has("bucket_bytes"),
           "option \"bucket_bytes\" applies to DDP (\"zero\" = 0) only; with \"zero\" = " + std::to_string(par.zero) +
               " gradients are reduced one unit (a block) at a time");
  par.bucket_bytes = r.get_int("bucket_bytes", par.bucket_bytes);
  dt::engine::TrainOptions o;
  o.micro_batches = r.get_int("micro_batches", 1);
  o.max_grad_norm = r.get_double("max_grad_norm", 0.0);
  std::string sched = r.get_string("schedule", "constant");
  int64_t warmup = r.get_int("warmup_steps", 0), total = r.get_int("total_steps", 0);
  double ratio = r.get_double("min_lr_ratio", 0.1);
  if (sched == "constant") {
    for (const char* k : {"warmup_steps", "total_steps", "min_lr_ratio"})
      DT_CHECK(!r.has(k), std::string("option \"") + k + "\" applies only to option \"schedule\" = \"cosine\"");
    o.schedule = dt::optim::LrSchedule::constant(base_lr);
  } else if (sched == "cosine") {
    DT_CHECK(warmup >= 0, "option \"warmup_steps\" = " + std::to_string(warmup) + "; accepted: >= 0");
    DT_CHECK(total > warmup, "option \"total_steps\" = " + std::to_string(total) +
                                 "; accepted: > warmup_steps (" + std::to_string(warmup) + ")");
    DT_CHECK(std::isfinite(ratio) && ratio >= 0 && ratio <= 1,
             "option \"min_lr_ratio\" = " + std::to_string(ratio) + "; accepted: [0, 1]");
    o.schedule = dt::optim::LrSchedule::warmup_cosine(base_lr, warmup, total, static_cast<float>(ratio));
  } else {
    dt::invalid("option \"schedule\" = \"" + sched + "\"; accepted: \"constant\", \"cosine\"");
  }
  // Dynamic loss scaling: accepted for every model, used by f16 ones only.
  const double init = r.get_double("loss_scale_init", o.loss_scaler.init_scale);
  const float init_f = static_cast<float>(init);
  DT_CHECK(init > 0 && std::isfinite(init_f) && init_f > 0,
           "option \"loss_scale_init\" = " + std::to_string(init) + "; accepted: > 0, within f32 range");
  o.loss_scaler.init_scale = init_f;
  // The scaler refuses to back off below min_scale (1 by default); a smaller start lowers it.
  o.loss_scaler.min_scale = std::min(o.loss_scaler.min_scale, o.loss_scaler.init_scale);
  o.loss_scaler.growth_interval = r.get_int("loss_scale_growth_interval", o.loss_scaler.growth_interval);
  DT_CHECK(o.loss_scaler.growth_interval >= 1, "option \"loss_scale_growth_interval\" = " +
                                                   std::to_string(o.loss_scaler.growth_interval) + "; accepted: >= 1");
  o.check();  // the ranges, declared once with the options
  par.check();
  return o;
}


// The engine checks shapes and ids too; checking the dtype here names the C argument
// and says what it holds, where the engine can only describe the tensor it was given.
const dt::Tensor& batch_of(const dt_tensor* t, const char* name) {
  const dt::Tensor& x = dt::api::single_piece(t, name);
  DT_CHECK(x.dtype() == dt::DType::I32, std::string(name) + " has dtype " + dt::dtype_name(x.dtype()) +
                                            "; accepted: i32 token ids, shape [B, T]");
  return x;
}

dt::engine::GenerateOptions generate_options(const dt_options* options) {
  dt::OptionReader r(dt::api::opts_of(options), "dt_engine_generate",
                     {"max_new_tokens", "temperature", "top_k", "top_p", "seed", "stop_token", "stop_tokens"});
  dt::engine::GenerateOptions g;
  g.max_new_tokens = r.get_int("max_new_tokens", g.max_new_tokens);
  dt::api::read_sampling(r, g);
  int64_t stop = r.get_int("stop_token", -1);
  DT_CHECK(stop >= -1 && stop <= INT32_MAX,
           "option \"stop_token\" = " + std::to_string(stop) + "; accepted: -1 (none) or a token id");
  if (stop >= 0) g.stop_tokens.push_back(static_cast<int32_t>(stop));
  dt::api::read_stop_tokens(r, g.stop_tokens);
  return g;
}

std::string generate_stats_json(const dt::engine::GenerateStats& st) {
  nlohmann::json j = {{"new_tokens", st.new_tokens},
                      {"tokens_per_s", st.tokens_per_s},
                      {"time_to_first_token_s", st.time_to_first_token_s},
                      {"inter_token_latency_s", st.inter_token_latency_s}};
  return j.dump();
}

// The streaming callback of either version (both may be NULL: no stream).
struct TokenSink {
  dt_token_callback v1 = nullptr;
  dt_token_callback_v2 v2 = nullptr;
  void* user = nullptr;
};

// The body of dt_engine_generate and its stream forms.
void generate_into(dt_engine& e, const int32_t* prompt_tokens, const int64_t* prompt_lengths, int32_t n_prompts,
                   const dt_options* options, const TokenSink& sink, int32_t* out_tokens,
                   int64_t out_capacity_per_prompt, int64_t* out_lengths) {
  DT_CHECK(n_prompts >= 1, "n_prompts = " + std::to_string(n_prompts) + "; accepted: >= 1");
  need(prompt_tokens, "prompt_tokens");
  need(prompt_lengths, "prompt_lengths");
  need(out_tokens, "out_tokens");
  need(out_lengths, "out_lengths");
  dt::engine::GenerateOptions g = generate_options(options);
  // Checked before generating, so a too-small buffer never holds half an answer.
  DT_CHECK(out_capacity_per_prompt >= g.max_new_tokens,
           "out_capacity_per_prompt = " + std::to_string(out_capacity_per_prompt) +
               "; accepted: >= option \"max_new_tokens\" (" + std::to_string(g.max_new_tokens) + ")");
  const dt::nn::GPTConfig& c = e.gpt->config();
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(n_prompts));
  int64_t at = 0;
  for (int32_t i = 0; i < n_prompts; ++i) {
    const int64_t L = prompt_lengths[i];
    DT_CHECK(L >= 1 && L <= c.context, "prompt_lengths[" + std::to_string(i) + "] = " + std::to_string(L) +
                                           "; accepted: 1 to context (" + std::to_string(c.context) + ")");
    for (int64_t j = at; j < at + L; ++j)
      DT_CHECK(prompt_tokens[j] >= 0 && prompt_tokens[j] < c.vocab_size,
               "prompt_tokens[" + std::to_string(j) + "] = " + std::to_string(prompt_tokens[j]) + " (prompt " +
                   std::to_string(i) + "); accepted: 0 to vocab_size - 1 = " + std::to_string(c.vocab_size - 1));
    prompts[static_cast<size_t>(i)].assign(prompt_tokens + at, prompt_tokens + at + L);
    at += L;
  }
  // A v2 callback's stop: read by the engine before its next step (on tp replicas, from
  // their threads too, hence atomic); the callback is not called after it.
  std::atomic<bool> stop{false};
  if (sink.v1)
    g.on_token = [&](int64_t prompt, int32_t token) { sink.v1(sink.user, static_cast<int32_t>(prompt), token); };
  if (sink.v2) {
    g.on_token = [&](int64_t prompt, int32_t token) {
      if (!stop.load(std::memory_order_relaxed) && sink.v2(sink.user, static_cast<int32_t>(prompt), token) != 0)
        stop.store(true, std::memory_order_release);
    };
    g.should_stop = [&] { return stop.load(std::memory_order_acquire); };
  }
  // The engine's: on the tp replicas, or on the module after gathering (ZeRO-3).
  const dt::engine::GenerateResult res = e.engine->generate(prompts, g);
  // A stop asked for at the very last token still ends the call as cancelled.
  if (res.cancelled || stop.load())
    dt::throw_cancelled("generate", stop.load() ? "the token callback asked to stop" : "dt_cancel_request");
  for (int32_t i = 0; i < n_prompts; ++i) {
    const auto& t = res.tokens[static_cast<size_t>(i)];
    std::copy(t.begin(), t.end(), out_tokens + static_cast<int64_t>(i) * out_capacity_per_prompt);
    out_lengths[i] = static_cast<int64_t>(t.size());
  }
  e.last_generate = generate_stats_json(res.stats);
}

}  // namespace

extern "C" {

dt_status dt_engine_create(dt_mesh* mesh, dt_module* module, dt_optimizer* optimizer, const dt_options* options,
                           dt_engine** out) {
  return guard("dt_engine_create", [&] {
    need(module, "module");
    need(optimizer, "optimizer");
    need(out, "out");
    DT_CHECK(module->gpt, "module is not a GPT (an MLP?); accepted: a module from dt_module_create_gpt");
    DT_CHECK(optimizer->module == module->module,
             "optimizer was created over another module; accepted: an optimizer of this module");
    std::shared_ptr<dt::comm::Mesh> m = mesh ? mesh->mesh : nullptr;  // NULL: this process alone
    auto h = std::make_unique<dt_engine>();
    h->module = module->module;
    h->gpt = module->gpt;
    h->opt = optimizer->opt;
    h->mesh = m;
    dt::engine::ParallelOptions par;
    const dt::engine::TrainOptions o = train_options(options, h->opt->lr(), par);
    h->engine = std::make_unique<dt::engine::Trainer>(m, *h->gpt, *h->opt, o, par);
    h->views = module->views;
    h->views->trainer = h->engine.get();
    *out = h.release();
  });
}

void dt_engine_destroy(dt_engine* engine) { delete engine; }

dt_status dt_engine_train_step(dt_engine* engine, const dt_tensor* inputs, const dt_tensor* targets,
                               double* loss_out) {
  return guard("dt_engine_train_step", [&] {
    dt_engine& e = engine_of(engine);
    const dt::Tensor& in = batch_of(inputs, "inputs");
    const dt::Tensor& tg = batch_of(targets, "targets");
    dt::engine::StepStats s = e.engine->train_step(in, tg);
    e.last_stats = dt::engine::metrics_json(s);
    if (loss_out) *loss_out = s.loss;
  });
}

dt_status dt_engine_last_stats_json(dt_engine* engine, char* buf, size_t capacity, size_t* needed) {
  return guard("dt_engine_last_stats_json", [&] { dt::api::write_text(engine_of(engine).last_stats, buf, capacity, needed); });
}

dt_status dt_engine_eval(dt_engine* engine, const dt_tensor* inputs, const dt_tensor* targets, double* loss_out) {
  return guard("dt_engine_eval", [&] {
    dt_engine& e = engine_of(engine);
    const dt::Tensor& in = batch_of(inputs, "inputs");
    const dt::Tensor& tg = batch_of(targets, "targets");
    need(loss_out, "loss_out");
    *loss_out = e.engine->evaluate(in, tg);
  });
}

dt_status dt_engine_generate(dt_engine* engine, const int32_t* prompt_tokens, const int64_t* prompt_lengths,
                             int32_t n_prompts, const dt_options* options, int32_t* out_tokens,
                             int64_t out_capacity_per_prompt, int64_t* out_lengths) {
  return guard("dt_engine_generate", [&] {
    generate_into(engine_of(engine), prompt_tokens, prompt_lengths, n_prompts, options, TokenSink{}, out_tokens,
                  out_capacity_per_prompt, out_lengths);
  });
}

dt_status dt_engine_generate_stream(dt_engine* engine, const int32_t* prompt_tokens, const int64_t* prompt_lengths,
                                    int32_t n_prompts, const dt_options* options, dt_token_callback on_token,
                                    void* user, int32_t* out_tokens, int64_t out_capacity_per_prompt,
                                    int64_t* out_lengths) {
  return guard("dt_engine_generate_stream", [&] {
    need(on_token, "on_token");
    generate_into(engine_of(engine), prompt_tokens, prompt_lengths, n_prompts, options, TokenSink{on_token, nullptr, user},
                  out_tokens, out_capacity_per_prompt, out_lengths);
  });
}

dt_status dt_engine_generate_stream_v2(dt_engine* engine, const int32_t* prompt_tokens, const int64_t* prompt_lengths,
                                       int32_t n_prompts, const dt_options* options, dt_token_callback_v2 on_token,
                                       void* user, int32_t* out_tokens, int64_t out_capacity_per_prompt,
                                       int64_t* out_lengths) {
  return guard("dt_engine_generate_stream_v2", [&] {
    need(on_token, "on_token");
    generate_into(engine_of(engine), prompt_tokens, prompt_lengths, n_prompts, options, TokenSink{nullptr, on_token, user},
                  out_tokens, out_capacity_per_prompt, out_lengths);
  });
}

dt_status dt_engine_set_cancel(dt_engine* engine, dt_cancel* cancel) {
  return guard("dt_engine_set_cancel", [&] { engine_of(engine).engine->set_cancel(dt::api::cancel_flag_of(cancel)); });
}

dt_status dt_engine_last_generate_stats_json(dt_engine* engine, char* buf, size_t capacity, size_t* needed) {
  return guard("dt_engine_last_generate_stats_json",
               [&] { dt::api::write_text(engine_of(engine).last_generate, buf, capacity, needed); });
}

dt_status dt_engine_save(dt_engine* engine, const char* path_stem) {
  return guard("dt_engine_save", [&] {
    dt_engine& e = engine_of(engine);
    auto [dir, stem] = dt::api::split_stem(path_stem);
    e.engine->save(dir, nlohmann::json::object(), stem);
  });
}

dt_status dt_engine_save_async(dt_engine* engine, const char* path_stem) {
  return guard("dt_engine_save_async", [&] {
    dt_engine& e = engine_of(engine);
    auto [dir, stem] = dt::api::split_stem(path_stem);
    e.engine->save_async(dir, nlohmann::json::object(), stem);
  });
}

dt_status dt_engine_save_wait(dt_engine* engine) {
  return guard("dt_engine_save_wait", [&] { engine_of(engine).engine->wait_save(); });
}

dt_status dt_engine_save_hf(dt_engine* engine, const char* dir, const dt_options* options) {
  return guard("dt_engine_save_hf", [&] {
    dt_engine& e = engine_of(engine);
    need(dir, "dir");
    e.engine->with_whole_model([&](dt::nn::GPT& whole) { dt::api::save_hf(whole, dir, options, "dt_engine_save_hf"); });
  });
}

dt_status dt_engine_load(dt_engine* engine, const char* path_stem) {
  return guard("dt_engine_load", [&] {
    dt_engine& e = engine_of(engine);
    auto [dir, stem] = dt::api::split_stem(path_stem);
    // The engine checks the model config, then load_checkpoint validates every file and
    // tensor before writing any, so a failure leaves parameters and optimizer as they were.
    e.engine->load(dir, stem);
  });
}

dt_status dt_engine_step(dt_engine* engine, int64_t* out) {
  return guard("dt_engine_step", [&] {
    dt_engine& e = engine_of(engine);
    need(out, "out");
    *out = e.engine->step();
  });
}

}  // extern "C"
