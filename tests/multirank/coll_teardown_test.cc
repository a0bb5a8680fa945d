// Failing in the middle of traffic is memory safe: when a collective ends with an error, no
// rank leaves it while a peer may still read or write its buffers. Each rank's buffers live
// on its own stack or heap and are freed as the error unwinds, so a rank that left early
// shows up as a heap-use-after-free under ASan or TSan (and as garbage or a crash without).
#include <atomic>
#include <random>

#include "core/allocator.h"
#include "multirank/coll_util.h"
#include "nn/parameter.h"
#include "parallel/grad_buckets.h"

namespace dt::comm::test {
namespace DT_TEST_NS {

// Ranks run large all-reduces (long data phases) while another thread aborts at a random
// moment, so the abort lands at every stage: arriving, reducing, copying, fencing.
TEST(Teardown, AbortDuringLargeAllReduces) {
  std::mt19937 gen(7);
  int aborted = 0;
  for (int trial = 0; trial < 12; ++trial) {
    auto mesh = world_mesh(4, 60);
    std::thread aborter([&, delay = gen() % 15000] {
      std::this_thread::sleep_for(std::chrono::microseconds(delay));
      mesh->abort("stress");
    });
    std::atomic<bool> started[4] = {false, false, false, false}, finished[4] = {false, false, false, false};
    std::string run_error;
    auto out = run_outcomes(*mesh, [&](int rank) {
      started[rank] = true;
      Communicator& c = mesh->comm(rank, "world");
      for (int i = 0; i < 1000; ++i) {
        std::vector<float> x(40000, 1.0f);  // fresh heap memory every call
        c.all_reduce(x.data(), x.data(), 40000, DType::F32, ReduceOp::Sum);
        EXPECT_EQ(x[39999], 4.0f);
      }
      finished[rank] = true;
    }, &run_error);
    aborter.join();
    // A rank either saw the abort, or had finished every call before it landed (a starved
    // aborter thread on a loaded machine can come late), or never started because the abort
    // came first and run() refused the failed mesh; anything else is a bug.
    for (int r = 0; r < 4; ++r) {
      const bool refused = !started[r] && run_error.find("stress") != std::string::npos;
      EXPECT_TRUE(out[r].code == DT_ERR_ABORTED || (out[r].code == DT_OK && finished[r]) || refused)
          << r << ": " << out[r].what << " (run: " << run_error << ")";
      aborted += out[r].code == DT_ERR_ABORTED;
    }
  }
  EXPECT_GT(aborted, 0) << "no abort ever landed during traffic: the test tested nothing";
}

// The same with every kind of collective in the loop, on sub-communicators too, and the
// abort coming from a rank that throws.
TEST(Teardown, RankThrowingDuringMixedTraffic) {
  for (int trial = 0; trial < 12; ++trial) {
    auto mesh = axes_mesh({2, 1, 1, 1, 2}, 60);
    std::string run_error;
    run_outcomes(
        *mesh,
        [&](int rank) {
          std::mt19937 gen(static_cast<unsigned>(trial));  // the same calls on every rank
          for (int i = 0;; ++i) {
            if (rank == 3 && i == 3 + trial) throw std::runtime_error("rank 3 gives up");
            const char* axis = i % 3 == 0 ? "world" : i % 3 == 1 ? "tp" : "dp";
            Communicator& c = mesh->comm(rank, axis);
            const int n = c.size();
            std::vector<float> a(20000 * n, 1.0f), b(20000 * n);
            std::vector<int64_t> counts(n, 20000);
            switch (gen() % 5) {
              case 0: c.all_reduce(a.data(), b.data(), 20000, DType::F32, ReduceOp::Sum); break;
              case 1: c.all_gather(a.data(), b.data(), 20000, DType::F32); break;
              case 2: c.reduce_scatter(a.data(), b.data(), 20000, DType::F32, ReduceOp::Sum); break;
              case 3: c.broadcast(a.data(), b.data(), 20000 * n, DType::F32, 0); break;
              default: c.all_to_all(a.data(), counts, b.data(), counts, DType::F32); break;
            }
          }
        },
        &run_error);
    EXPECT_EQ(run_error, "rank 3 gives up");
  }
}

// All-to-all counts that do not match: every rank sees it, and none frees its counts
// while the others are still checking them.
TEST(Teardown, AllToAllCountMismatchRepeated) {
  for (int trial = 0; trial < 30; ++trial) {
    auto mesh = world_mesh(4, 60);
    auto out = run_outcomes(*mesh, [&](int rank) {
      auto sc = std::make_unique<std::vector<int64_t>>(4, 2);
      auto rc = std::make_unique<std::vector<int64_t>>(4, 2);
      if (rank == trial % 4) (*sc)[(rank + 1) % 4] = 1;
      std::vector<int16_t> s(8), r(8);
      mesh->comm(rank, "world").all_to_all(s.data(), *sc, r.data(), *rc, DType::BF16);
    });
    for (int r = 0; r < 4; ++r) EXPECT_EQ(out[r].code, DT_ERR_COMM) << out[r].what;
  }
}

// A communicator whose all-reduces never finish by themselves, like NCCL work still on the
// device: it records, at the moment each is waited for, whether the bucket buffers (the
// only CommBuffer bytes) were still alive.
class InFlightComm : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const std::string& axis() const override { return axis_; }
  CommLedger& ledger() override { return ledger_; }
  std::vector<int64_t> buffer_bytes_at_wait;

 protected:
  WorkPtr issue(const CollRequest&, bool) override {
    struct Pending : Work {
      InFlightComm* c;
      explicit Pending(InFlightComm* comm) : c(comm) {}
      bool test() override { return false; }
      void wait() override { c->buffer_bytes_at_wait.push_back(ledger_for(Device::cpu()).current(DT_MEM_COMM_BUFFER)); }
    };
    return std::make_shared<Pending>(this);
  }

 private:
  std::string axis_ = "dp";
  CommLedger ledger_;
};

// An exception mid-backward destroys the buckets with all-reduces in flight: each is waited
// for before its buffer goes back to the allocator (NCCL would still be writing it).
TEST(Teardown, GradBucketsWaitForInFlightWorkBeforeFreeingTheirBuffers) {
  std::vector<nn::Parameter> params(3);
  for (int i = 0; i < 3; ++i) {
    params[i].name = "p" + std::to_string(i);
    params[i].shape = {1000};
    params[i].value = Tensor::zeros({1000}, DType::F32, Device::cpu(), MemTag::Param);
    params[i].grad = Tensor::zeros({1000}, DType::F32, Device::cpu(), MemTag::Grad);
  }
  const int64_t before = ledger_for(Device::cpu()).current(DT_MEM_COMM_BUFFER);
  InFlightComm comm;
  {
    parallel::GradBuckets buckets({{&params[2]}, {&params[1]}, {&params[0]}}, comm, 4000);  // a bucket each
    ASSERT_EQ(buckets.num_buckets(), 3);
    buckets.mark_ready({&params[2]});
    buckets.mark_ready({&params[1]});  // two launched, the third never: backward threw here
    ASSERT_EQ(ledger_for(Device::cpu()).current(DT_MEM_COMM_BUFFER) - before, 3 * 4000);
  }
  ASSERT_EQ(comm.buffer_bytes_at_wait.size(), 2u) << "every in-flight all-reduce is waited for";
  for (int64_t b : comm.buffer_bytes_at_wait) EXPECT_EQ(b - before, 3 * 4000) << "waited while the buffers lived";
  EXPECT_EQ(ledger_for(Device::cpu()).current(DT_MEM_COMM_BUFFER), before);
}

}  // namespace
}  // namespace dt::comm::test
