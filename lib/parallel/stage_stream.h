// The one stream between pipeline stages: activations and gradients of training's
// schedules, the tied token table, pipelined generation's hidden states and sampled
// tokens, serving's hidden states. Every message between stages goes through a StageStream
// with a tag from the registry (parallel/stage_tags.h), so that two users of one pp
// communicator can never take each other's messages (three transports once chose their tag
// numbers apart).
//
// Sends are eager (comm/copied_sends.h): send() copies the tensor and returns at once, a
// pipeline's schedules assume sends never wait; wait() waits for those in flight. Between
// one pair of ranks, messages of one tag arrive in the order sent. One thread drives it.
#pragma once
#include "comm/copied_sends.h"
#include "core/tensor.h"
#include "parallel/stage_tags.h"

namespace dt::parallel {

class StageStream {
 public:
  explicit StageStream(comm::Communicator& group) : group_(group), sends_(group) {}
  void send(const Tensor& x, int to, StageTag tag) { sends_.send(x, to, tag_of(tag)); }
  void send(const Tensor& x, int to, int tag) { sends_.send(x, to, tag); }
  // Into x, which has the message's shape and dtype.
  void recv(Tensor& x, int from, StageTag tag) { recv(x, from, tag_of(tag)); }
  void recv(Tensor& x, int from, int tag) { group_.recv(x.raw(), x.numel(), x.dtype(), from, tag); }
  void wait() { sends_.wait(); }

 private:
  comm::Communicator& group_;
  comm::CopiedSends sends_;
};

}  // namespace dt::parallel
