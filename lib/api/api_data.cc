// dt_dataset (text files, token files, the addition task) and dt_loader (shuffled batches
// of a dataset, with a position that a resumed run seeks back to).
#include <unistd.h>

#include <cmath>
#include <memory>

#include "io/dataset.h"
#include "io/sampler.h"
#include "io/hf_dataset.h"
#include "lib/api/firewall.h"

using dt::api::guard;
using dt::api::need;

struct dt_dataset {
  std::shared_ptr<dt::io::Dataset> data;
};

struct dt_loader {
  std::shared_ptr<dt::io::Dataset> data;  // kept alive: the sampler reads it
  std::unique_ptr<dt::io::Sampler> sampler;
  int64_t batch = 0;
};

namespace {

// The engine's ignore_index (dt_engine_train_step: targets may hold -1).
constexpr int32_t kIgnore = -1;

// Most examples of an "addition" dataset (its option "size"): 2^32. A loader's epoch order
// holds one int64 per example, so even this many need 32 GiB.
constexpr int64_t kMaxAdditionSize = int64_t(1) << 32;

// "text" with a "tokenizer", and "jsonl": read through a model's tokenizer (io/hf_dataset.h).
std::shared_ptr<dt::io::Dataset> tokenized_dataset(const std::string& kind, const dt::Options* o) {
  dt::OptionReader r(o, "dt_dataset_create(\"" + kind + "\")", {"path", "context", "tokenizer", "chat_template"});
  DT_CHECK(r.has("path"), "option \"path\" is required: the " + kind + " file to read");
  DT_CHECK(r.has("context"), "option \"context\" is required: tokens per example (int >= 1)");
  DT_CHECK(r.has("tokenizer"), "option \"tokenizer\" is required for \"" + kind +
                                   "\": a model directory or tokenizer.json whose tokenizer reads the file");
  DT_CHECK(kind == "jsonl" || !r.has("chat_template"), "option \"chat_template\" applies to \"jsonl\" only");
  const std::string path = r.get_string("path", "");
  const int64_t context = r.get_int("context", 0);
  DT_CHECK(context >= 1, "option \"context\" = " + std::to_string(context) + "; accepted: >= 1");
  const dt::io::HfModelText text = dt::io::HfModelText::load(r.get_string("tokenizer", ""), r.get_string("chat_template", ""));
  std::shared_ptr<dt::io::Dataset> d = kind == "jsonl" ? dt::io::hf_jsonl_dataset(path, context, text)
                                                       : dt::io::hf_text_dataset(path, context, text);
  DT_CHECK(d->size() >= 1, "option \"path\" = \"" + path + "\" holds no example of context " +
                               std::to_string(context) + " (a text needs at least context + 1 tokens)");
  return d;
}

std::shared_ptr<dt::io::Dataset> make_dataset(const std::string& kind, const dt_options* options) {
  const dt::Options* o = dt::api::opts_of(options);
  if (kind == "jsonl" || (kind == "text" && o && o->find("tokenizer"))) return tokenized_dataset(kind, o);
  if (kind == "text" || kind == "tokens") {
    std::vector<std::string> keys = {"path", "context"};
    if (kind == "tokens") keys.insert(keys.end(), {"width", "vocab_size"});
    dt::OptionReader r(o, "dt_dataset_create(\"" + kind + "\")", keys);
    DT_CHECK(r.has("path"), "option \"path\" is required: the " + kind + " file to read");
    DT_CHECK(r.has("context"), "option \"context\" is required: tokens per example (int >= 1)");
    const std::string path = r.get_string("path", "");
    const int64_t context = r.get_int("context", 0);
    DT_CHECK(context >= 1, "option \"context\" = " + std::to_string(context) + "; accepted: >= 1");
    std::shared_ptr<dt::io::TokenDataset> d;
    if (kind == "text") {
      d = dt::io::TokenDataset::from_text_file(path, context);
    } else {
      const int64_t width = r.get_int("width", 2);
      DT_CHECK(width == 2 || width == 4, "option \"width\" = " + std::to_string(width) + "; accepted: 2 (u16), 4 (u32)");
      d = dt::io::TokenDataset::from_token_file(path, static_cast<int>(width), context, r.get_int("vocab_size", 0));
    }
    // An empty or too-short file would only fail later, in the loader, without its name.
    DT_CHECK(d->size() >= 1, "option \"path\" = \"" + path + "\" holds " + std::to_string(d->num_tokens()) +
                                 " tokens; accepted: a file of at least context + 1 = " +
                                 std::to_string(context + 1) + " tokens");
    return d;
  }
  if (kind == "addition") {
    dt::OptionReader r(o, "dt_dataset_create(\"addition\")", {"digits", "size", "seed", "split"});
    const int64_t digits = r.get_int("digits", 3), size = r.get_int("size", 100000);
    DT_CHECK(digits >= 1 && digits <= 18, "option \"digits\" = " + std::to_string(digits) + "; accepted: 1 to 18");
    DT_CHECK(size >= 1 && size <= kMaxAdditionSize, "option \"size\" = " + std::to_string(size) + "; accepted: 1 to " +
                                                       std::to_string(kMaxAdditionSize));
    const std::string split = r.get_string("split", "all");
    dt::io::AdditionSplit s = dt::io::AdditionSplit::All;
    if (split == "train")
      s = dt::io::AdditionSplit::Train;
    else if (split == "test")
      s = dt::io::AdditionSplit::HeldOut;
    else
      DT_CHECK(split == "all", "option \"split\" = \"" + split + "\"; accepted: \"all\", \"train\", \"test\"");
    return std::make_shared<dt::io::AdditionDataset>(static_cast<int>(digits), size,
                                                     static_cast<uint64_t>(r.get_int("seed", 0)), kIgnore, s);
  }
  dt::invalid("kind \"" + kind + "\" is unknown; accepted: \"text\", \"tokens\", \"jsonl\", \"addition\"");
}

dt::io::Dataset& data_of(const dt_dataset* d) { return *need(d, "dataset")->data; }
dt_loader& loader_of(dt_loader* l) { return *need(l, "loader"); }

// inputs or targets of dt_loader_next: a plain i32 CPU tensor [batch, context].
dt::Tensor& batch_tensor(dt_tensor* t, const char* name, int64_t batch, int64_t context) {
  dt::Tensor& x = dt::api::single_piece(t, name);
  DT_CHECK(x.dtype() == dt::DType::I32 && x.device().type == dt::DeviceType::CPU && x.ndim() == 2 &&
               x.dim(0) == batch && x.dim(1) == context,
           std::string(name) + " is " + dt::dtype_name(x.dtype()) + " " + dt::shape_str(x.shape()) + " on " +
               x.device().str() + "; accepted: i32 [" + std::to_string(batch) + ", " + std::to_string(context) +
               "] on cpu (the loader's batch and the dataset's context)");
  return x;
}

}  // namespace

extern "C" {

dt_status dt_dataset_create(const char* kind, const dt_options* options, dt_dataset** out) {
  return guard("dt_dataset_create", [&] {
    std::string k = need(kind, "kind");
    need(out, "out");
    *out = new dt_dataset{make_dataset(k, options)};
  });
}

void dt_dataset_destroy(dt_dataset* dataset) { delete dataset; }

dt_status dt_dataset_size(const dt_dataset* dataset, int64_t* out) {
  return guard("dt_dataset_size", [&] { *need(out, "out") = data_of(dataset).size(); });
}

dt_status dt_dataset_context(const dt_dataset* dataset, int64_t* out) {
  return guard("dt_dataset_context", [&] { *need(out, "out") = data_of(dataset).context(); });
}

dt_status dt_dataset_example(const dt_dataset* dataset, int64_t index, int32_t* inputs, int32_t* targets) {
  return guard("dt_dataset_example", [&] {
    const dt::io::Dataset& d = data_of(dataset);
    need(inputs, "inputs");
    need(targets, "targets");
    DT_CHECK(index >= 0 && index < d.size(), "index = " + std::to_string(index) + "; accepted: 0 to " +
                                                 std::to_string(d.size() - 1) + " (dt_dataset_size - 1)");
    d.get(index, inputs, targets);
  });
}

dt_status dt_loader_create(dt_dataset* dataset, const dt_options* options, dt_loader** out) {
  return guard("dt_loader_create", [&] {
    dt::io::Dataset& d = data_of(dataset);
    need(out, "out");
    dt::OptionReader r(dt::api::opts_of(options), "dt_loader_create", {"batch", "seed", "shuffle"});
    DT_CHECK(r.has("batch"), "option \"batch\" is required: examples per batch (int >= 1)");
    dt::io::SamplerOptions so;
    so.batch = r.get_int("batch", 1);
    DT_CHECK(so.batch >= 1, "option \"batch\" = " + std::to_string(so.batch) + "; accepted: >= 1");
    DT_CHECK(so.batch <= d.size(), "option \"batch\" = " + std::to_string(so.batch) + " exceeds the dataset's " +
                                       std::to_string(d.size()) + " examples; accepted: 1 to " +
                                       std::to_string(d.size()));
    // The order of an epoch (one int64 per example) is made at the first batch; a dataset
    // whose order this machine cannot hold is refused now, with the figures.
    dt::api::refuse_beyond_memory("dt_loader_create",
                                  "the dataset's " + std::to_string(d.size()) +
                                      " examples, an epoch's order (8 bytes per example),",
                                  8.0 * static_cast<double>(d.size()));
    so.seed = static_cast<uint64_t>(r.get_int("seed", 0));
    so.shuffle = r.get_bool("shuffle", true);
    auto h = std::make_unique<dt_loader>();
    h->data = dataset->data;
    h->sampler = std::make_unique<dt::io::Sampler>(h->data, so);
    h->batch = so.batch;
    *out = h.release();
  });
}

void dt_loader_destroy(dt_loader* loader) { delete loader; }

dt_status dt_loader_next(dt_loader* loader, dt_tensor* inputs, dt_tensor* targets) {
  return guard("dt_loader_next", [&] {
    dt_loader& l = loader_of(loader);
    const int64_t T = l.data->context();
    dt::Tensor& in = batch_tensor(inputs, "inputs", l.batch, T);
    dt::Tensor& tg = batch_tensor(targets, "targets", l.batch, T);
    l.sampler->next(in, tg);  // fills the caller's tensors in place
  });
}

dt_status dt_loader_batches_per_epoch(dt_loader* loader, int64_t* out) {
  return guard("dt_loader_batches_per_epoch", [&] { *need(out, "out") = loader_of(loader).sampler->batches_per_epoch(); });
}

dt_status dt_loader_position(dt_loader* loader, int64_t* epoch, int64_t* batch_index) {
  return guard("dt_loader_position", [&] {
    dt_loader& l = loader_of(loader);
    *need(epoch, "epoch") = l.sampler->epoch();
    *need(batch_index, "batch_index") = l.sampler->position();
  });
}

dt_status dt_loader_seek(dt_loader* loader, int64_t epoch, int64_t batch_index) {
  return guard("dt_loader_seek", [&] {
    dt_loader& l = loader_of(loader);
    const int64_t per = l.sampler->batches_per_epoch();
    DT_CHECK(epoch >= 0 && epoch <= dt::io::Sampler::kMaxEpoch,
             "epoch = " + std::to_string(epoch) + "; accepted: 0 to 2^62");
    DT_CHECK(batch_index >= 0 && batch_index < per, "batch_index = " + std::to_string(batch_index) +
                                                        "; accepted: 0 to " + std::to_string(per - 1) +
                                                        " (dt_loader_batches_per_epoch - 1)");
    l.sampler->seek(epoch, batch_index);
  });
}

}  // extern "C"
