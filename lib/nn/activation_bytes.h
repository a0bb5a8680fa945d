// What one rank's activations take, by inventory rather than estimate: every tensor the Acts
// structs (GPTActs, TransformerBlock::Acts and the layers' Acts) hold after a forward and a
// backward, and the scratch the model shares across micro-batches (sequence parallelism's
// gathered and partial buffers, activation checkpointing's one block). The planner's memory
// model (engine/plan_cost.h) is built on it; tests/unit/nn_activation_bytes_test.cc holds it
// to the ledger's MemTag::Activation bytes exactly (and cli_test.sh plan the tp, pp and ZeRO
// layouts' whole peaks), so a change to an Acts that forgets this file fails there.
#pragma once
#include <cstdint>

#include "nn/config.h"

namespace dt::nn {

struct ActsLayout {
  int64_t batch = 1, seq = 1;   // one micro-batch: sequences (B) and tokens per sequence (T, this rank's under cp)
  int64_t tp = 1;
  int64_t ep = 1;               // a mixture of experts' experts split over ep ranks
  double expert_load = 0;       // ep > 1: the busiest rank's received rows over an even share (0: unstated)
  bool sp = false;              // sequence parallel over tp (tp > 1)
  int begin = 0, end = -1;      // the blocks this rank runs, [begin, end); end -1: every block
  bool embed = true, head = true;  // this rank holds the embedding (first stage) / the head (last)
};

struct ActsBytes {
  double per_micro_batch = 0;  // one GPTActs after a forward and a backward of this rank's part
  double shared = 0;           // once per model: SP buffers, the checkpointed block's scratch
  double recompute_saved = 0;  // per micro-batch: what checkpointing drops (included above when cfg.checkpoint)
};

// cfg: validated and resolved. A mixture of experts routes R top_k rows (dropless; a
// capacity factor keeps at most as many: the count is then an upper bound); under ep the rows its experts receive depend on
// the router and are counted as if it spread them evenly (each rank then receives as many as
// it sends).
ActsBytes activation_bytes(const GPTConfig& cfg, const ActsLayout& layout);

// A mixture of experts' rows on one rank that routes `rows` token rows: the (row, choice)
// pairs it keeps (rows x top_k, dropless; with a capacity factor at most E x capacity), and
// the rows its experts receive under ep. The router decides those, so the caller states
// them as `load`, the busiest rank's rows over an even share (>= 1; `dtrain train --report`
// measures it for every ep from any run of the model, one rank's included, since every
// layout routes the same tokens alike): received = kept x load, at most ep x kept (every
// rank's rows) and, with a capacity factor, E x capacity (each of its E / ep experts takes at
// most the capacity from each of the ep ranks). Unstated (0): dropless, an even share
// (load 1); with a capacity factor, that bound. The cost model prices the experts' work at
// the received rows.
struct ExpertRows {
  double kept = 0, received = 0;
};
ExpertRows expert_rows(const GPTConfig& cfg, double rows, int64_t ep, double load = 0);

}  // namespace dt::nn
