// Send and receive over shared memory, as a rendezvous: the sender posts a message (its
// buffer, not a copy) and waits until the receiver has copied it into its own buffer.
// Messages between one pair with one tag arrive in the order they were sent.
#include "comm/local/algo_util.h"
#include "comm/local/local_comm.h"

namespace dt::comm::local {

void run_send(Group& g, int me, const void* buf, int64_t count, DType dtype, int peer, int tag) {
  auto msg = std::make_shared<Message>();
  msg->buf = buf;
  msg->count = count;
  msg->dtype = dtype;
  {
    std::lock_guard<std::mutex> lk(g.mailbox_mutex());
    g.mailbox(me, peer, tag).push_back(msg);
  }
  g.world().notify_all();
  g.wait_for([&] { return msg->taken.load(std::memory_order_acquire); }, "send",
             [&] { return std::vector<int>{peer}; });
}

void run_recv(Group& g, int me, void* buf, int64_t count, DType dtype, int peer, int tag) {
  std::shared_ptr<Message> msg;
  g.wait_for(
      [&] {
        std::lock_guard<std::mutex> lk(g.mailbox_mutex());
        auto& box = g.mailbox(peer, me, tag);
        if (box.empty()) return false;
        msg = box.front();
        box.pop_front();
        return true;
      },
      "recv", [&] { return std::vector<int>{peer}; });
  if (msg->count != count || msg->dtype != dtype) {
    std::string err = "recv on axis " + g.axis() + ": rank " + std::to_string(g.global_rank(peer)) + " sent " +
                      std::to_string(msg->count) + " " + dtype_name(msg->dtype) + " elements (tag " +
                      std::to_string(tag) + "); rank " + std::to_string(g.global_rank(me)) + " expected " +
                      std::to_string(count) + " " + dtype_name(dtype);
    g.world().fail(DT_ERR_COMM, err);
    g.world().throw_failure();
  }
  copy_elems(buf, msg->buf, count, dtype);
  msg->taken.store(true, std::memory_order_release);
  g.world().notify_all();
}

}  // namespace dt::comm::local
