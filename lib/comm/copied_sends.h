// Eager point-to-point sends of copies: send() copies the tensor into a buffer of its own,
// starts the send and returns at once, so the caller may reuse its tensor and go on (a
// pipeline's schedules assume sends never wait; the stream between stages is scratch the
// next micro-batch overwrites). The buffers live until their sends complete: finished ones
// are dropped at the next send, wait() waits for the rest, and the destructor waits and
// drops errors (the step that issued a send reports its failure). One thread drives it.
#pragma once
#include <deque>
#include <utility>

#include "comm/communicator.h"
#include "core/tensor.h"

namespace dt::comm {

class CopiedSends {
 public:
  explicit CopiedSends(Communicator& comm) : comm_(comm) {}
  ~CopiedSends();
  CopiedSends(const CopiedSends&) = delete;
  CopiedSends& operator=(const CopiedSends&) = delete;
  void send(const Tensor& t, int peer, int tag);
  void wait();

 private:
  Communicator& comm_;
  std::deque<std::pair<WorkPtr, Tensor>> inflight_;
};

}  // namespace dt::comm
