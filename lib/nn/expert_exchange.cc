#include "nn/expert_exchange.h"

#include "core/error.h"
#include "core/tensor_copy.h"
#include "core/trace.h"
#include "nn/module.h"

namespace dt::nn {

void ExpertExchange::plan(const EpGroup& ep, const std::vector<int64_t>& tokens) {
  ep_ = ep;
  const int P = ep.size();
  const int64_t E = static_cast<int64_t>(tokens.size());
  DT_CHECK(E % P == 0, "expert parallelism: " + std::to_string(E) + " experts over ep = " + std::to_string(P) +
                           "; accepted: experts divisible by ep");
  local_experts_ = E / P;
  from_.assign(static_cast<size_t>(P * local_experts_), 0);
  ep.comm->all_to_all(tokens.data(), std::vector<int64_t>(static_cast<size_t>(P), local_experts_), from_.data(),
                      std::vector<int64_t>(static_cast<size_t>(P), local_experts_), DType::I64);
  send_rows_.assign(static_cast<size_t>(P), 0);
  recv_rows_.assign(static_cast<size_t>(P), 0);
  local_rows_.assign(static_cast<size_t>(local_experts_), 0);
  sent_ = received_ = 0;
  for (int p = 0; p < P; ++p)
    for (int64_t e = 0; e < local_experts_; ++e) {
      const int64_t out = tokens[static_cast<size_t>(p * local_experts_ + e)];
      const int64_t in = from_[static_cast<size_t>(p * local_experts_ + e)];
      DT_CHECK(in >= 0, "expert parallelism: a peer announced a negative row count");
      send_rows_[static_cast<size_t>(p)] += out;
      recv_rows_[static_cast<size_t>(p)] += in;
      local_rows_[static_cast<size_t>(e)] += in;
      sent_ += out;
      received_ += in;
    }
  bytes_out_ = 0;
}

void ExpertExchange::regroup(const Tensor& src, Tensor& dst, bool to_expert_major) const {
  const int P = ep_.size();
  const size_t row_bytes = static_cast<size_t>(src.dim(1)) * dtype_size(src.dtype());
  // Source-major: [source][expert]; expert-major: [expert][source]. Offsets of both, in rows.
  std::vector<int64_t> expert_start(static_cast<size_t>(local_experts_), 0);
  for (int64_t e = 1; e < local_experts_; ++e)
    expert_start[static_cast<size_t>(e)] = expert_start[static_cast<size_t>(e - 1)] + local_rows_[static_cast<size_t>(e - 1)];
  std::vector<int64_t> within(static_cast<size_t>(local_experts_), 0);  // rows of earlier sources per expert
  int64_t source_off = 0;
  char* d = static_cast<char*>(dst.raw());
  const char* s = static_cast<const char*>(src.raw());
  for (int p = 0; p < P; ++p)
    for (int64_t e = 0; e < local_experts_; ++e) {
      const int64_t n = from_[static_cast<size_t>(p * local_experts_ + e)];
      const int64_t expert_off = expert_start[static_cast<size_t>(e)] + within[static_cast<size_t>(e)];
      if (n > 0) {
        const int64_t from = to_expert_major ? source_off : expert_off, to = to_expert_major ? expert_off : source_off;
        copy_bytes(src.device(), d + static_cast<size_t>(to) * row_bytes, s + static_cast<size_t>(from) * row_bytes,
                   static_cast<size_t>(n) * row_bytes);
      }
      within[static_cast<size_t>(e)] += n;
      source_off += n;
    }
}

namespace {
// The all-to-all on the rank's comm track of a trace (core/trace.h), when one is recording.
struct CommSpan {
  explicit CommSpan(std::string what) : name(std::move(what)), t0(trace_enabled() ? trace_now_us() : -1) {}
  ~CommSpan() {
    if (t0 >= 0) trace_record("comm", name, trace_track(trace_current_rank(), true), t0, trace_now_us());
  }
  std::string name;
  double t0;
};

// Row counts per peer as element counts of rows c wide.
std::vector<int64_t> elements(std::vector<int64_t> rows, int64_t c) {
  for (int64_t& v : rows) v *= c;
  return rows;
}
}  // namespace

// Bytes of the rows a call sends to other ranks (its own rows stay).
int64_t ExpertExchange::bytes_to_others(const std::vector<int64_t>& rows_out, const Tensor& t) const {
  int64_t n = 0;
  for (int p = 0; p < ep_.size(); ++p)
    if (p != ep_.rank()) n += rows_out[static_cast<size_t>(p)];
  return n * t.dim(1) * static_cast<int64_t>(dtype_size(t.dtype()));
}

void ExpertExchange::dispatch(const Tensor& xp, Tensor& xr) {
  CommSpan span("all_to_all experts dispatch (" + std::to_string(sent_) + " rows out, " + std::to_string(received_) +
                " in)");
  const int64_t C = xp.dim(1);
  DT_ASSERT(xp.dim(0) == sent_);
  const std::vector<int64_t> sc = elements(send_rows_, C), rc = elements(recv_rows_, C);
  if (received_ == 0) {  // nothing comes to this rank's experts: a token buffer to post into
    Tensor none = Tensor::uninit({1}, xp.dtype(), xp.device());
    ep_.comm->all_to_all(xp.raw(), sc, none.raw(), rc, xp.dtype());
    xr = Tensor();
  } else {
    ensure(staged_, {received_, C}, xp.dtype());
    ep_.comm->all_to_all(xp.raw(), sc, staged_.raw(), rc, xp.dtype());
    ensure(xr, {received_, C}, xp.dtype());
    regroup(staged_, xr, /*to_expert_major=*/true);
  }
  bytes_out_ += bytes_to_others(send_rows_, xp);
}

void ExpertExchange::combine(const Tensor& yr, Tensor& yp) {
  CommSpan span("all_to_all experts combine (" + std::to_string(received_) + " rows out, " + std::to_string(sent_) +
                " in)");
  const int64_t C = yp.dim(1);
  DT_ASSERT(yp.dim(0) == sent_);
  const std::vector<int64_t> sc = elements(recv_rows_, C), rc = elements(send_rows_, C);
  if (received_ == 0) {
    Tensor none = Tensor::uninit({1}, yp.dtype(), yp.device());
    ep_.comm->all_to_all(none.raw(), sc, yp.raw(), rc, yp.dtype());
  } else {
    ensure(staged_, {received_, C}, yr.dtype());
    regroup(yr, staged_, /*to_expert_major=*/false);
    ep_.comm->all_to_all(staged_.raw(), sc, yp.raw(), rc, yp.dtype());
  }
  bytes_out_ += bytes_to_others(recv_rows_, yp);
}

}  // namespace dt::nn
