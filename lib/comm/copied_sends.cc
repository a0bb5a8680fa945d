#include "comm/copied_sends.h"

#include "core/device_scope.h"
#include "core/tensor_copy.h"

namespace dt::comm {

CopiedSends::~CopiedSends() {
  for (auto& s : inflight_) wait_ignoring_errors(s.first);
}

void CopiedSends::send(const Tensor& t, int peer, int tag) {
  while (!inflight_.empty() && inflight_.front().first->test()) inflight_.pop_front();  // reap those done
  ScopedDevice on(t.device());
  Tensor copy = Tensor::uninit(t.shape(), t.dtype(), t.device(), MemTag::Activation);
  copy_tensor(t, copy);
  WorkPtr w = comm_.send_async(copy.raw(), copy.numel(), copy.dtype(), peer, tag);
  inflight_.emplace_back(std::move(w), std::move(copy));
}

void CopiedSends::wait() {
  while (!inflight_.empty()) {
    inflight_.front().first->wait();
    inflight_.pop_front();
  }
}

}  // namespace dt::comm
