// Embedding on CUDA. Forward gathers rows. Backward sums the rows of dout that share an id
// in row order, in f32, and adds each sum into dtable once, as the CPU does: the ids are
// grouped on the host (they are small: one per token), so the result is deterministic and
// matches the CPU without atomics. A negative id is "no row": a zero row forward, no
// gradient backward. Ids >= V are rejected before anything is written.
#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"

namespace dt::kernels::cuda {
namespace {

void check_ids(const char* op, const Tensor& ids, int64_t v) {
  BadIndex bad = find_bad_index(ids.device(), ptr<int32_t>(ids), ids.numel(), std::numeric_limits<int32_t>::min(),
                                static_cast<int32_t>(v), /*allowed=*/0);  // 0 is in range anyway: nothing is exempt
  if (bad.pos < 0) return;
  invalid(std::string(op) + ": ids row " + std::to_string(bad.pos) + " holds id " + std::to_string(bad.value) +
          ", out of range; accepted: [0, " + std::to_string(v) + "), the rows of the table, or < 0 for no row");
}

template <class T> struct Gather {
  const int32_t* ids;
  const T* table;
  T* out;
  int64_t c;
  __device__ void operator()(int64_t i) const {
    int32_t id = ids[i / c];
    out[i] = id >= 0 ? table[static_cast<int64_t>(id) * c + i % c] : st<T>(0.0f);
  }
};

// grid (groups, column blocks): group g's rows order[starts[g] .. starts[g+1]) share one id.
template <class T>
__global__ void group_sum_kernel(const T* dout, const int64_t* order, const int64_t* starts, const int32_t* group_id,
                                 int64_t c, T* dtable) {
  int64_t j = blockIdx.y * int64_t(blockDim.x) + threadIdx.x;
  if (j >= c) return;
  float acc = 0.0f;
  for (int64_t k = starts[blockIdx.x]; k < starts[blockIdx.x + 1]; ++k) acc += ld(dout[order[k] * c + j]);
  T* row = dtable + static_cast<int64_t>(group_id[blockIdx.x]) * c;
  row[j] = st<T>(ld(row[j]) + acc);
}

}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out) {
  int64_t c = table.dim(1);
  check_ids("embedding_forward", ids, table.dim(0));
  with_float(table.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map(table.device(), out.numel(), Gather<T>{ptr<int32_t>(ids), ptr<T>(table), ptr<T>(out), c},
               "embedding_forward");
  });
}

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable) {
  int64_t v = dtable.dim(0), c = dtable.dim(1), n = ids.numel();
  check_ids("embedding_backward", ids, v);
  std::vector<int32_t> id(n);
  gpu::copy_to_host(ids.device().index, id.data(), ids.raw(), n * sizeof(int32_t));
  std::vector<int64_t> order, starts;  // rows with an id (>= 0): negative ids add nothing
  for (int64_t i = 0; i < n; ++i)
    if (id[i] >= 0) order.push_back(i);
  int64_t kept = static_cast<int64_t>(order.size());
  if (kept == 0) return;  // nothing to add, and a grid of no blocks is a launch error
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return id[a] < id[b]; });
  std::vector<int32_t> group_id;
  for (int64_t k = 0; k < kept; ++k)
    if (k == 0 || id[order[k]] != id[order[k - 1]]) {
      starts.push_back(k);
      group_id.push_back(id[order[k]]);
    }
  starts.push_back(kept);
  int64_t groups = static_cast<int64_t>(group_id.size());
  Device d = dtable.device();
  Tensor order_d = Tensor::uninit({kept}, DType::I64, d), starts_d = Tensor::uninit({groups + 1}, DType::I64, d);
  Tensor gid_d = Tensor::uninit({groups}, DType::I32, d);
  gpu::copy_to_device(d.index, order_d.raw(), order.data(), order_d.nbytes());
  gpu::copy_to_device(d.index, starts_d.raw(), starts.data(), starts_d.nbytes());
  gpu::copy_to_device(d.index, gid_d.raw(), group_id.data(), gid_d.nbytes());
  with_float(dtable.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dim3 grid(static_cast<unsigned>(groups), static_cast<unsigned>((c + 127) / 128));
    group_sum_kernel<T><<<grid, 128, 0, stream_of(d)>>>(ptr<T>(dout), ptr<int64_t>(order_d), ptr<int64_t>(starts_d),
                                                       ptr<int32_t>(gid_d), c, ptr<T>(dtable));
  });
  check_launch("embedding_backward");
}

}  // namespace dt::kernels::cuda
