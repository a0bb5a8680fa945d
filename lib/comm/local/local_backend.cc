// The local backend: all ranks are threads of this process. Groups are created on first
// use and shared by their members' communicators.
#include <map>
#include <mutex>

#include "comm/backend.h"
#include "comm/local/local_comm.h"

namespace dt::comm {
namespace {

class LocalBackend : public Backend {
 public:
  explicit LocalBackend(const BackendOptions& o)
      : world_(std::make_shared<local::World>(o.world_size, local::WorldOptions{o.timeout_s, o.check_args})) {}
  const char* name() const override { return "local"; }
  int world_size() const override { return world_->size(); }
  std::vector<int> local_ranks() const override {
    std::vector<int> r(world_->size());
    for (int i = 0; i < world_->size(); ++i) r[i] = i;
    return r;
  }
  std::unique_ptr<Communicator> make_comm(int rank, const std::string& axes, const std::vector<int>& members) override {
    std::shared_ptr<local::Group> group;
    {
      std::lock_guard<std::mutex> g(mu_);
      auto& slot = groups_[{axes, members}];
      if (!slot) slot = std::make_shared<local::Group>(world_, axes, members);
      group = slot;
    }
    int member = 0;
    while (members[member] != rank) ++member;
    return std::make_unique<local::LocalComm>(group, member);
  }
  void abort(const std::string& reason) override { world_->abort(reason); }
  void set_departed(int rank, bool departed) override { world_->set_departed(rank, departed); }
  void check_healthy() override { world_->check_healthy(); }

 private:
  std::shared_ptr<local::World> world_;
  std::mutex mu_;
  std::map<std::pair<std::string, std::vector<int>>, std::shared_ptr<local::Group>> groups_;
};

}  // namespace

std::unique_ptr<Backend> make_local_backend(const BackendOptions& options) {
  return std::make_unique<LocalBackend>(options);
}

}  // namespace dt::comm
