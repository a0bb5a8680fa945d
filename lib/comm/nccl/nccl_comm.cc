#include "comm/nccl/nccl_comm.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include "comm/nccl/nccl_api.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/gpu_runtime.h"

namespace dt::comm {
namespace {

using Clock = std::chrono::steady_clock;

// Communicators made and not yet destroyed or aborted (nccl_live_communicators()).
std::atomic<int> g_live{0};

// How long teardown waits for ncclCommFinalize to flush before it aborts instead: a peer
// that is gone or never finalizes must not keep a destructor waiting for the full timeout.
constexpr double kFinalizeWaitS = 10.0;

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(DT_ERR_COMM, std::string(what) + ": " + cudaGetErrorString(e));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Prod: return ncclProd;
  }
  return ncclSum;
}

// Shared by a communicator and its outstanding Work: the deadline logic lives here.
struct NcclState {
  ncclComm_t comm = nullptr;
  int device = 0;
  int rank = 0, size = 1;
  std::string axis;
  double timeout_s = 300;
  std::atomic<bool> failed{false};
  std::mutex failure_mu;  // guards failure; failed is set only after failure is written
  std::string failure;

  // A communicator nobody destroyed (creation failed part way) is aborted, never leaked.
  ~NcclState() { abort_comm(); }
  // Frees the communicator at once, whatever it is doing; the one place that aborts.
  void abort_comm() {
    if (!comm) return;
    nccl().ncclCommAbort(comm);
    comm = nullptr;
    --g_live;
  }

  // Waits until ready() or the deadline, polling the communicator's async error; on an
  // error or the deadline the communicator is aborted and the error thrown.
  void poll(const std::function<bool()>& ready, const char* what) {
    auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    for (int spins = 0;; ++spins) {
      if (failed) throw_failure(DT_ERR_COMM);
      ncclResult_t async = ncclSuccess;
      if (comm) nccl().ncclCommGetAsyncError(comm, &async);  // null: destroyed, so flushed already
      if (async != ncclSuccess && async != ncclInProgress) {
        set_failed(std::string(what) + " on axis " + axis + ": " + nccl().ncclGetErrorString(async));
        throw_failure(DT_ERR_COMM);
      }
      if (async == ncclSuccess && ready()) return;
      if (Clock::now() > deadline) {
        set_failed(std::string(what) + " on axis " + axis + " timed out (a peer never arrived); communicator aborted");
        throw_failure(DT_ERR_TIMEOUT);
      }
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  void set_failed(const std::string& msg) {
    std::lock_guard<std::mutex> g(failure_mu);
    if (failed) return;
    failure = msg;
    failed = true;
    abort_comm();
  }
  [[noreturn]] void throw_failure(dt_status code) {
    std::lock_guard<std::mutex> g(failure_mu);
    fail(code, failure);
  }
  // Frees the communicator whatever state it is in. A non-blocking ncclCommFinalize answers
  // ncclInProgress, and ncclCommDestroy refuses (and frees nothing) until the communicator
  // is ready again: poll its state, then destroy; on an error or after kFinalizeWaitS, abort.
  void destroy() {
    std::lock_guard<std::mutex> g(failure_mu);
    if (!comm) return;  // aborted already (set_failed)
    ncclResult_t r = nccl().ncclCommFinalize(comm);
    auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(std::min(timeout_s, kFinalizeWaitS)));
    while (r == ncclInProgress && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      if (nccl().ncclCommGetAsyncError(comm, &r) != ncclSuccess) break;
    }
    if (r == ncclSuccess && nccl().ncclCommDestroy(comm) == ncclSuccess) {
      comm = nullptr;
      --g_live;
    } else {
      abort_comm();
    }
  }
  // A call may answer ncclInProgress on a non-blocking communicator: wait for it.
  void check(ncclResult_t r, const char* what) {
    if (r == ncclSuccess) return;
    if (r == ncclInProgress) {
      poll([] { return true; }, what);
      return;
    }
    set_failed(std::string(what) + " on axis " + axis + ": " + nccl().ncclGetErrorString(r));
    throw_failure(DT_ERR_COMM);
  }
};

class NcclWork : public Work {
 public:
  NcclWork(std::shared_ptr<NcclState> s, cudaEvent_t ev, CollKind kind, int64_t bytes, int64_t wire, CommLedger* ledger)
      : s_(std::move(s)), ev_(ev), kind_(kind), bytes_(bytes), wire_(wire), ledger_(ledger), t0_(Clock::now()) {}
  // The device may still read and write the buffers of an operation nobody waited for
  // (an exception unwound past it): wait for it first, unless the communicator is aborted.
  ~NcclWork() override {
    if (!done_ && !s_->failed) try {
        wait();
      } catch (...) {
      }
    cudaEventDestroy(ev_);
  }
  bool test() override {
    if (done_) return true;
    if (!event_done()) return false;
    finish();
    return true;
  }
  void wait() override {
    if (done_) return;
    s_->poll([&] { return event_done(); }, coll_name(kind_));
    finish();
  }

 private:
  // Whether the event has completed. Any CUDA error (an illegal address in the kernel, a
  // lost device) fails the communicator: it must never read as completion.
  bool event_done() {
    cudaError_t e = cudaEventQuery(ev_);
    if (e == cudaSuccess) return true;
    if (e == cudaErrorNotReady) return false;
    s_->set_failed(std::string(coll_name(kind_)) + " on axis " + s_->axis + ": the device reported " +
                   cudaGetErrorString(e));
    s_->throw_failure(DT_ERR_COMM);
  }
  void finish() {
    done_ = true;
    ledger_->record(kind_, bytes_, wire_, std::chrono::duration<double>(Clock::now() - t0_).count());
  }
  std::shared_ptr<NcclState> s_;
  cudaEvent_t ev_;
  CollKind kind_;
  int64_t bytes_, wire_;
  CommLedger* ledger_;
  Clock::time_point t0_;
  bool done_ = false;
};

class NcclComm : public Communicator {
 public:
  explicit NcclComm(std::shared_ptr<NcclState> s) : s_(std::move(s)) {
    check_cuda(cudaSetDevice(s_->device), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~NcclComm() override {
    cudaSetDevice(s_->device);
    s_->destroy();
    cudaStreamDestroy(stream_);
    if (ready_) cudaEventDestroy(ready_);
  }
  int rank() const override { return s_->rank; }
  int size() const override { return s_->size; }
  const std::string& axis() const override { return s_->axis; }
  CommLedger& ledger() override { return ledger_; }

 protected:
  WorkPtr issue(const CollRequest& r, bool blocking) override {
    if (s_->failed) s_->throw_failure(DT_ERR_COMM);
    check_cuda(cudaSetDevice(s_->device), "cudaSetDevice");
    check_on_device(r, "send", r.send);
    check_on_device(r, "recv", r.recv);
    // The buffers were written by kernels on the device's compute stream (core/gpu_runtime.h):
    // the side stream waits for everything issued there so far, and no longer.
    auto compute = static_cast<cudaStream_t>(gpu::compute_stream(s_->device));
    if (!ready_) check_cuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(ready_, compute), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
    enqueue(r);
    cudaEvent_t ev;
    check_cuda(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(ev, stream_), "cudaEventRecord");
    auto work = std::make_shared<NcclWork>(s_, ev, r.kind, r.bytes, r.wire_bytes, &ledger_);
    if (blocking) work->wait();
    return work;
  }

 private:
  // NCCL does not check its pointers by default, and a host or another GPU's pointer ends
  // in an illegal-address error that kills the communicator: refuse it here, by name.
  // (Null with a nonzero count was refused by Communicator::start.)
  void check_on_device(const CollRequest& r, const char* arg, const void* p) const {
    if (!p) return;
    cudaPointerAttributes a{};
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) cudaGetLastError();  // clear it: not a sticky error
    const bool on_a_gpu = e == cudaSuccess && (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged);
    if (on_a_gpu && a.device == s_->device) return;
    std::string where = e != cudaSuccess ? "not CUDA memory" : on_a_gpu ? "on cuda:" + std::to_string(a.device) : "host memory";
    fail(DT_ERR_INVALID_ARGUMENT, std::string(coll_name(r.kind)) + ": " + arg + " is " + where +
                                      "; required: memory on cuda:" + std::to_string(s_->device) +
                                      " (the communicator's device)");
  }

  void enqueue(const CollRequest& r) {
    ncclComm_t c = s_->comm;
    ncclDataType_t t = nccl_type(r.dtype);
    size_t n = static_cast<size_t>(r.count);
    size_t esz = dtype_size(r.dtype);
    const char* what = coll_name(r.kind);
    switch (r.kind) {
      case CollKind::AllReduce: s_->check(nccl().ncclAllReduce(r.send, r.recv, n, t, nccl_op(r.op), c, stream_), what); break;
      case CollKind::AllGather: s_->check(nccl().ncclAllGather(r.send, r.recv, n, t, c, stream_), what); break;
      case CollKind::ReduceScatter:
        s_->check(nccl().ncclReduceScatter(r.send, r.recv, n, t, nccl_op(r.op), c, stream_), what);
        break;
      case CollKind::Broadcast: s_->check(nccl().ncclBroadcast(r.send, r.recv, n, t, r.root, c, stream_), what); break;
      case CollKind::Reduce: s_->check(nccl().ncclReduce(r.send, r.recv, n, t, nccl_op(r.op), r.root, c, stream_), what); break;
      case CollKind::AllToAll: {
        // Uneven splits: one grouped send/recv per peer.
        s_->check(nccl().ncclGroupStart(), what);
        size_t so = 0, ro = 0;
        for (int p = 0; p < s_->size; ++p) {
          auto sc = static_cast<size_t>(r.send_counts[p]), rc = static_cast<size_t>(r.recv_counts[p]);
          if (sc) nccl().ncclSend(static_cast<const char*>(r.send) + so * esz, sc, t, p, c, stream_);
          if (rc) nccl().ncclRecv(static_cast<char*>(r.recv) + ro * esz, rc, t, p, c, stream_);
          so += sc;
          ro += rc;
        }
        s_->check(nccl().ncclGroupEnd(), what);
        break;
      }
      case CollKind::Send: s_->check(nccl().ncclSend(r.send, n, t, r.root, c, stream_), what); break;
      case CollKind::Recv: s_->check(nccl().ncclRecv(r.recv, n, t, r.root, c, stream_), what); break;
      case CollKind::Barrier: {
        // NCCL has no barrier: an all-reduce of one element does the same. Its buffer comes
        // from the pool (once), so no cudaMalloc/cudaFree runs next to NCCL kernels.
        if (!barrier_buf_) barrier_buf_ = Storage::create(Device{DeviceType::CUDA, s_->device}, sizeof(float), MemTag::CommBuffer);
        void* b = barrier_buf_->data();
        s_->check(nccl().ncclAllReduce(b, b, 1, ncclFloat32, ncclSum, c, stream_), what);
        break;
      }
    }
  }

  std::shared_ptr<NcclState> s_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;  // recorded on the compute stream before each operation
  CommLedger ledger_;
  std::shared_ptr<Storage> barrier_buf_;
};

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

}  // namespace

int nccl_live_communicators() { return g_live.load(); }

std::vector<std::unique_ptr<Communicator>> make_nccl_comms(const std::vector<int>& devices, const std::string& axis,
                                                           const NcclOptions& options) {
  DT_CHECK(!devices.empty(), "devices is empty; required: at least one CUDA device index");
  ncclUniqueId id;
  if (nccl().ncclGetUniqueId(&id) != ncclSuccess) fail(DT_ERR_COMM, "ncclGetUniqueId failed");
  const int n = static_cast<int>(devices.size());
  std::vector<std::shared_ptr<NcclState>> states(n);
  ncclConfig_t config = nonblocking_config();
  if (nccl().ncclGroupStart() != ncclSuccess) fail(DT_ERR_COMM, "ncclGroupStart failed");
  for (int i = 0; i < n; ++i) {
    auto s = std::make_shared<NcclState>();
    s->device = devices[i];
    s->rank = i;
    s->size = n;
    s->axis = axis;
    s->timeout_s = options.timeout_s;
    check_cuda(cudaSetDevice(devices[i]), "cudaSetDevice");
    ncclResult_t r = nccl().ncclCommInitRankConfig(&s->comm, n, id, i, &config);
    if (r != ncclSuccess && r != ncclInProgress)
      fail(DT_ERR_COMM, std::string("ncclCommInitRankConfig: ") + nccl().ncclGetErrorString(r));
    ++g_live;
    states[i] = s;
  }
  ncclResult_t g = nccl().ncclGroupEnd();
  if (g != ncclSuccess && g != ncclInProgress) fail(DT_ERR_COMM, std::string("ncclGroupEnd: ") + nccl().ncclGetErrorString(g));
  std::vector<std::unique_ptr<Communicator>> comms;
  for (auto& s : states) {
    s->poll([] { return true; }, "nccl communicator creation");
    comms.push_back(std::make_unique<NcclComm>(s));
  }
  return comms;
}

std::unique_ptr<Communicator> make_nccl_comm(Communicator& bootstrap, int device, const NcclOptions& options) {
  static_assert(sizeof(ncclUniqueId) % sizeof(int32_t) == 0, "unique id is whole words");
  ncclUniqueId id;
  if (bootstrap.rank() == 0 && nccl().ncclGetUniqueId(&id) != ncclSuccess) fail(DT_ERR_COMM, "ncclGetUniqueId failed");
  bootstrap.broadcast(&id, &id, sizeof(id) / sizeof(int32_t), DType::I32, 0);
  auto s = std::make_shared<NcclState>();
  s->device = device;
  s->rank = bootstrap.rank();
  s->size = bootstrap.size();
  s->axis = bootstrap.axis();
  s->timeout_s = options.timeout_s;
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  ncclConfig_t config = nonblocking_config();
  ncclResult_t r = nccl().ncclCommInitRankConfig(&s->comm, s->size, id, s->rank, &config);
  if (s->comm) ++g_live;
  s->check(r, "ncclCommInitRankConfig");
  s->poll([] { return true; }, "nccl communicator creation");
  return std::make_unique<NcclComm>(s);
}

}  // namespace dt::comm
