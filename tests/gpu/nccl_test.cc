// The nccl backend on the GPUs of this process. Skips cleanly without a usable GPU (on a
// machine without a driver cudaGetDeviceCount fails: any error means "no GPU").
//
// Each communicator is driven from its own thread, as the trainer does: an issue returns
// only once NCCL has launched it, and the first operation waits for every peer to connect
// (nccl_comm.h), so one thread issuing for every rank in turn would wait forever.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

#include "comm/nccl/nccl_comm.h"
#include "core/error.h"
#include "core/gpu_runtime.h"

namespace dt::comm {
namespace {

int gpus() { return gpu::device_count(); }

// Runs body(i) for every rank i on its own thread; rethrows nothing (EXPECTs inside).
void on_every_rank(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back(body, i);
  for (auto& t : threads) t.join();
}

TEST(Nccl, AllReduceAndAllGatherOnEveryLocalGpu) {
  if (gpus() < 1) GTEST_SKIP() << "no usable GPU: " << gpu::availability_note();
  std::vector<int> devices;
  for (int d = 0; d < gpus(); ++d) devices.push_back(d);
  const int live_before = nccl_live_communicators();
  {
    auto comms = make_nccl_comms(devices, "world", NcclOptions{60.0});
    EXPECT_EQ(nccl_live_communicators() - live_before, static_cast<int>(devices.size()));
    const int n = static_cast<int>(devices.size());
    const int64_t count = 1 << 20;
    const float want = n * (n + 1) / 2.0f;
    on_every_rank(n, [&](int i) {
      cudaSetDevice(devices[i]);
      float *buf = nullptr, *gathered = nullptr;
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&buf), count * sizeof(float)), cudaSuccess);
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&gathered), n * count * sizeof(float)), cudaSuccess);
      std::vector<float> host(count, static_cast<float>(i + 1));
      cudaMemcpy(buf, host.data(), count * sizeof(float), cudaMemcpyHostToDevice);
      try {
        comms[i]->all_reduce_async(buf, buf, count, DType::F32, ReduceOp::Sum)->wait();
        comms[i]->all_gather(buf, gathered, count, DType::F32);
      } catch (const Error& e) {
        ADD_FAILURE() << "rank " << i << ": " << e.what();
      }
      std::vector<float> out(n * count);
      cudaMemcpy(out.data(), gathered, out.size() * sizeof(float), cudaMemcpyDeviceToHost);
      EXPECT_EQ(out[0], want) << "rank " << i;
      EXPECT_EQ(out.back(), want) << "rank " << i;
      EXPECT_EQ(comms[i]->ledger().get(CollKind::AllReduce).calls, 1);
      cudaFree(buf);
      cudaFree(gathered);
    });
  }
  // Every communicator was flushed and freed (a not-ready ncclCommDestroy frees nothing).
  EXPECT_EQ(nccl_live_communicators(), live_before);
}

TEST(Nccl, Bf16AverageBarrierAndBadArguments) {
  if (gpus() < 1) GTEST_SKIP() << "no usable GPU: " << gpu::availability_note();
  const int live_before = nccl_live_communicators();
  {
    auto comms = make_nccl_comms({0}, "world", NcclOptions{30.0});
    void* d = nullptr;
    cudaSetDevice(0);
    ASSERT_EQ(cudaMalloc(&d, 1024), cudaSuccess);
    comms[0]->all_reduce(d, d, 512, DType::BF16, ReduceOp::Avg);
    comms[0]->barrier();
    comms[0]->barrier();
    EXPECT_THROW(comms[0]->all_reduce(nullptr, d, 5, DType::F32, ReduceOp::Sum), Error);
    EXPECT_THROW(comms[0]->broadcast(d, d, 5, DType::F32, 3), Error);
    // A host pointer would be an illegal address on the device: refused by name instead,
    // and the communicator still works.
    std::vector<float> host(8);
    try {
      comms[0]->all_reduce(host.data(), d, 8, DType::F32, ReduceOp::Sum);
      ADD_FAILURE() << "a host send buffer was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), DT_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find("send is host memory"), std::string::npos) << e.what();
    }
    comms[0]->all_reduce(d, d, 8, DType::F32, ReduceOp::Sum);
    // A Work dropped before anyone waited for it waits itself (its buffers are in use).
    comms[0]->all_reduce_async(d, d, 256, DType::F32, ReduceOp::Sum).reset();
    cudaFree(d);
  }
  EXPECT_EQ(nccl_live_communicators(), live_before);
}

}  // namespace
}  // namespace dt::comm
