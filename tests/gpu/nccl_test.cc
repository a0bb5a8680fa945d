// The nccl backend on the GPUs of this process. Skips cleanly without a usable GPU (on a
// machine without a driver cudaGetDeviceCount fails: any error means "no GPU").
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "comm/nccl/nccl_comm.h"
#include "core/gpu_runtime.h"

namespace dt::comm {
namespace {

int gpus() { return gpu::device_count(); }

TEST(Nccl, AllReduceAndAllGatherOnEveryLocalGpu) {
  if (gpus() < 1) GTEST_SKIP() << "no usable GPU: " << gpu::availability_note();
  std::vector<int> devices;
  for (int d = 0; d < gpus(); ++d) devices.push_back(d);
  auto comms = make_nccl_comms(devices, "world", NcclOptions{30.0});
  const int n = static_cast<int>(devices.size());
  const int64_t count = 1 << 20;
  std::vector<float*> buf(n), gathered(n);
  for (int i = 0; i < n; ++i) {
    cudaSetDevice(devices[i]);
    std::vector<float> host(count, static_cast<float>(i + 1));
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&buf[i]), count * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&gathered[i]), n * count * sizeof(float)), cudaSuccess);
    cudaMemcpy(buf[i], host.data(), count * sizeof(float), cudaMemcpyHostToDevice);
  }
  // One process drives every GPU: issue on all, then wait on all.
  std::vector<WorkPtr> works;
  for (int i = 0; i < n; ++i) works.push_back(comms[i]->all_reduce_async(buf[i], buf[i], count, DType::F32, ReduceOp::Sum));
  for (auto& w : works) w->wait();
  works.clear();
  for (int i = 0; i < n; ++i) works.push_back(comms[i]->all_gather_async(buf[i], gathered[i], count, DType::F32));
  for (auto& w : works) w->wait();
  const float want = n * (n + 1) / 2.0f;
  for (int i = 0; i < n; ++i) {
    cudaSetDevice(devices[i]);
    std::vector<float> host(n * count);
    cudaMemcpy(host.data(), gathered[i], host.size() * sizeof(float), cudaMemcpyDeviceToHost);
    EXPECT_EQ(host[0], want);
    EXPECT_EQ(host.back(), want);
    EXPECT_EQ(comms[i]->ledger().get(CollKind::AllReduce).calls, 1);
    cudaFree(buf[i]);
    cudaFree(gathered[i]);
  }
}

TEST(Nccl, Bf16AverageAndBadArguments) {
  if (gpus() < 1) GTEST_SKIP() << "no usable GPU: " << gpu::availability_note();
  auto comms = make_nccl_comms({0}, "world", NcclOptions{30.0});
  void* d = nullptr;
  cudaSetDevice(0);
  ASSERT_EQ(cudaMalloc(&d, 1024), cudaSuccess);
  comms[0]->all_reduce(d, d, 512, DType::BF16, ReduceOp::Avg);
  EXPECT_THROW(comms[0]->all_reduce(nullptr, d, 5, DType::F32, ReduceOp::Sum), Error);
  EXPECT_THROW(comms[0]->broadcast(d, d, 5, DType::F32, 3), Error);
  cudaFree(d);
}

}  // namespace
}  // namespace dt::comm
