// Send and receive over shared memory. A send copies its buffer into a message and
// returns (eager); the receiver copies it out. Messages between one pair with one tag
// arrive in the order they were sent; different tags are independent.
#include "comm/local/algo_util.h"
#include "comm/local/local_comm.h"

namespace dt::comm::local {

void run_send(Group& g, int me, const void* buf, int64_t count, DType dtype, int peer, int tag) {
  auto msg = std::make_shared<Message>();
  const char* p = static_cast<const char*>(buf);
  if (count > 0) msg->data.assign(p, p + count * static_cast<int64_t>(dtype_size(dtype)));
  msg->count = count;
  msg->dtype = dtype;
  {
    std::lock_guard<std::mutex> lk(g.mailbox_mutex());
    g.mailbox(me, peer, tag).push_back(std::move(msg));
  }
  g.world().notify_all();
}

void run_recv(Group& g, int me, void* buf, int64_t count, DType dtype, int peer, int tag) {
  std::shared_ptr<Message> msg;
  g.wait_for(
      me, [&] {
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
  copy_elems(buf, msg->data.data(), count, dtype);
}

}  // namespace dt::comm::local
