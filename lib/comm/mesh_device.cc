// The mesh's device communicators (comm/mesh.h): NCCL over a group of GPUs, bootstrapped
// over the host backend. Every layer above asks the mesh for them, so the choice of
// transport lives here alone.
#include "comm/mesh.h"
#ifdef DTRAIN_HAVE_NCCL
#include "comm/nccl/nccl_comm.h"
#endif

#include "core/error.h"

namespace dt::comm {

void Mesh::make_device_comms(const std::string& axes, const std::vector<Device>& devices) {
  const std::string canon = canonical_axes(axes);
  DT_CHECK(devices.size() == local_.size(), "make_device_comms: " + std::to_string(devices.size()) +
                                                " devices for " + std::to_string(local_.size()) +
                                                " local ranks; required: one per local rank");
  for (const Device& d : devices)
    if (d.type != DeviceType::CUDA)
      fail(DT_ERR_UNSUPPORTED, "device communicators over \"" + canon + "\" for " + d.str() +
                                   ": only GPUs (cuda:N) have them; a CPU buffer uses comm()");
  {
    std::lock_guard<std::mutex> g(comm_mu_);
    bool made = true;
    for (size_t i = 0; i < local_.size(); ++i) {
      auto it = device_of_.find({local_[i], canon});
      if (it == device_of_.end()) {
        made = false;
        continue;
      }
      DT_CHECK(it->second == devices[i], "make_device_comms over \"" + canon + "\": rank " + std::to_string(local_[i]) +
                                             " drives " + it->second.str() + " already, not " + devices[i].str());
    }
    if (made) return;
  }
#ifdef DTRAIN_HAVE_NCCL
  NcclOptions options;
  options.timeout_s = timeout_s_;
  std::map<std::pair<int, std::string>, std::unique_ptr<Communicator>> made;
  if (local_.size() == 1) {
    // One rank per process (mpi): rank 0 of the group makes NCCL's unique id and the host
    // backend's communicator over the same group broadcasts it (collective: a rank thread).
    run([&](int, int rank) { made[{rank, canon}] = make_nccl_comm(comm(rank, canon), devices[0].index, options); });
  } else {
    // Every rank of every group is local (the local backend): one call per group, from
    // this thread, each rank driving its own GPU.
    std::map<int, size_t> local_index;
    for (size_t i = 0; i < local_.size(); ++i) local_index[local_[i]] = i;
    for (size_t i = 0; i < local_.size(); ++i) {
      if (made.count({local_[i], canon})) continue;
      const std::vector<int> members = group_members(local_[i], canon);
      std::vector<int> gpus;
      for (int r : members) {
        auto it = local_index.find(r);
        DT_CHECK(it != local_index.end(), "make_device_comms over \"" + canon + "\": rank " + std::to_string(r) +
                                              " of the group is in another process");
        gpus.push_back(devices[it->second].index);
      }
      std::vector<std::unique_ptr<Communicator>> comms = make_nccl_comms(gpus, canon, options);
      for (size_t k = 0; k < members.size(); ++k) made[{members[k], canon}] = std::move(comms[k]);
    }
  }
  std::lock_guard<std::mutex> g(comm_mu_);
  for (size_t i = 0; i < local_.size(); ++i) device_of_[{local_[i], canon}] = devices[i];
  for (auto& [key, c] : made) {
    auto& history = histories_[key.first];
    if (!history) history = std::make_shared<CollHistory>();
    c->set_history(history);
    device_comms_[key] = std::move(c);
  }
#else
  fail(DT_ERR_UNSUPPORTED, "communicators over GPUs need NCCL; this build has none (DTRAIN_WITH_NCCL=OFF)");
#endif
}

Communicator& Mesh::device_comm(int rank, const std::string& axes) {
  const std::string canon = canonical_axes(axes);
  std::lock_guard<std::mutex> g(comm_mu_);
  auto it = device_comms_.find({rank, canon});
  DT_CHECK(it != device_comms_.end(), "rank " + std::to_string(rank) + " has no device communicator over \"" + canon +
                                          "\"; make_device_comms(\"" + canon + "\", devices) makes them");
  return *it->second;
}

}  // namespace dt::comm
