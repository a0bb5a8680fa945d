// Expert parallelism's token exchange (Megatron's and DeepSpeed's all-to-all dispatcher):
// a mixture of experts whose E experts are split over the ep group, rank r holding experts
// [r E / ep, (r + 1) E / ep). Each rank routes its own tokens; its permuted rows (grouped by
// expert, so by the rank that holds the expert) go to their experts' ranks and come back.
//
//   plan:      the counts, exchanged first (an all-to-all of E integers per rank): how many
//              rows each rank sends to each of my experts;
//   dispatch:  the rows, one all-to-all of variable counts, then regrouped from source-major
//              to expert-major so each local expert's rows are contiguous;
//   combine:   the reverse (expert-major to source-major, the all-to-all back).
// Dispatch and combine are each other's transpose: backward dispatches the output's
// gradient and combines the input's. Bytes per call: this rank's rows for other ranks'
// experts x d_model x the dtype's size, each way.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "core/tensor.h"

namespace dt::nn {

// The group a mixture of experts splits its experts over; comm null: ep = 1.
struct EpGroup {
  comm::Communicator* comm = nullptr;
  int size() const { return comm ? comm->size() : 1; }
  int rank() const { return comm ? comm->rank() : 0; }
};

class ExpertExchange {
 public:
  // tokens: this rank's rows for each of the E (global) experts, in expert order.
  // Collective over ep.
  void plan(const EpGroup& ep, const std::vector<int64_t>& tokens);
  // Rows this rank's experts take (the sum over sources), per local expert, and in all.
  const std::vector<int64_t>& local_rows() const { return local_rows_; }
  int64_t received_rows() const { return received_; }
  // xp: [S, C] this rank's permuted rows -> xr: [received_rows(), C] expert-major (left
  // undefined when no row comes). Collective.
  void dispatch(const Tensor& xp, Tensor& xr);
  // yr: [received_rows(), C] expert-major (may be undefined when none) -> yp: [S, C].
  // Collective.
  void combine(const Tensor& yr, Tensor& yp);
  // Bytes this rank sent to other ranks in the last dispatch + combine pair.
  int64_t bytes_out() const { return bytes_out_; }

 private:
  EpGroup ep_;
  int64_t local_experts_ = 0, sent_ = 0, received_ = 0, bytes_out_ = 0;
  std::vector<int64_t> send_rows_, recv_rows_;  // per peer
  std::vector<int64_t> from_;                   // [source][local expert]: rows
  std::vector<int64_t> local_rows_;
  Tensor staged_;                               // source-major rows (what the all-to-all moves)
  // Copies the (source, expert) segments between source-major and expert-major order.
  void regroup(const Tensor& src, Tensor& dst, bool to_expert_major) const;
  int64_t bytes_to_others(const std::vector<int64_t>& rows_out, const Tensor& t) const;
};

}  // namespace dt::nn
