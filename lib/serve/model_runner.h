// What runs the model for the serving engine: R replicas (data parallel serving), each one
// whole model or its parts over a tp x pp mesh. The engine hands it one paged batch per
// replica per step and gets back, per replica, the f32 logits of the chunks that sample.
#pragma once
#include <memory>
#include <vector>

#include "nn/gpt.h"
#include "nn/paged_kv.h"

namespace dt::parallel {
class Layout;
}

namespace dt::serve {

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual int replicas() const = 0;
  virtual const nn::GPTConfig& config() const = 0;  // resolved
  // KV bytes one block costs on the rank that holds the most (the memory budget's unit).
  virtual int64_t bytes_per_block(int64_t block_size) const = 0;
  // Every rank's paged cache: num_blocks blocks of block_size positions.
  virtual void create_caches(int64_t num_blocks, int64_t block_size) = 0;
  // One step: batches[r] for replica r (no sequences: replica r idles). logits[r] gets
  // replica r's rows (one per chunk with logits = true, in order) of vocab_size floats.
  virtual void run(const std::vector<nn::PagedBatch>& batches, std::vector<std::vector<float>>& logits) = 0;
  // A line for logs and statistics: "1 replica", "2 replicas x tp 2 x pp 1".
  virtual std::string layout() const = 0;

  // A mesh across processes (mpirun): the process of world rank 0 leads (it schedules and
  // calls run(), which sends each step's plan to every rank); every other process calls
  // follow(), which runs the steps it is sent until the leader calls stop(). The leader
  // calls idle_tick() now and then while it has no work, so that the followers' waits do
  // not time out. In one process: leader() is true and the rest do nothing.
  virtual bool leader() const { return true; }
  virtual void follow() {}
  virtual void idle_tick() {}
  virtual void stop() {}
};

// One whole model on one rank (tests, and the single-process server).
std::unique_ptr<ModelRunner> single_model_runner(nn::GPT& model);

// The parts of a layout (parallel/layout.h) on a mesh of dp x tp x pp (local, or mpi with
// one rank per process; see leader() above), their values current (a fresh layout's are;
// a Trainer's after parts_for_inference()): replica r is dp group r; its ranks run their
// tp parts and pipeline stages, the step's sequences split into up to pp groups that
// follow each other through the stages, so the stages work at once. Interleaved virtual
// stages are refused (INVALID_ARGUMENT): a token would go round the ranks several times.
// No optimizer, no training engine: serving is a layout plus the paged forward.
std::unique_ptr<ModelRunner> layout_runner(parallel::Layout& layout);

}  // namespace dt::serve
