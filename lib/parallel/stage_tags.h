// The registry of tags on messages between pipeline stages (parallel/stage_stream.h): every
// user of a pp communicator takes its tags from here, declared once, so none can take
// another's messages.
#pragma once

namespace dt::parallel {

// The registry: every tag a message between stages may carry, declared once.
enum class StageTag : int {
  TiedTableGrad = 2,    // the last stage's share of the tied table's gradient, to the first
  TiedTableValue = 3,   // the first stage's token table, to the last stage's tied head
  GenerateHidden = 5,   // pipelined generation: a prompt's hidden states, stage to stage
  GenerateTokens = 6,   // pipelined generation: the sampled tokens, from the last stage
  ServeHidden = 7,      // serving: a step's hidden states, stage to stage
  ServeLogits = 8,      // serving across processes: a replica's logits to world rank 0
  ScheduleBase = 16,    // training schedules: message_tag(), 16 and up
};

// A training schedule's message (parallel/pipeline_schedule.h): activations (gradient =
// false) or gradients to `receiving_virtual_stage`.
inline int message_tag(bool gradient, int receiving_virtual_stage) {
  return static_cast<int>(StageTag::ScheduleBase) + 2 * receiving_virtual_stage + (gradient ? 1 : 0);
}
inline int tag_of(StageTag t) { return static_cast<int>(t); }

}  // namespace dt::parallel
