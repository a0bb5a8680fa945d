// The cost model's unit of work: one micro-batch forward and backward through a part of a
// transformer on one rank (a block's attention half and feed-forward half, the head and the
// loss, the embedding), at that rank's rates (engine/plan_rates.h). engine/plan_cost.cc adds
// them up per pipeline stage and places them on the step's critical path.
#pragma once
#include "engine/plan_rates.h"
#include "nn/activation_bytes.h"

namespace dt::engine::blocks {

// A forward and a backward of one micro-batch through some part of the model, and the
// model FLOPs of its matmuls (for MFU). wait_f, wait_b: the parts of f and b that are the
// cluster's fitted waits (ring steps, all-to-alls), where a rank idles rather than works.
struct Work {
  double f = 0, b = 0, flops = 0, wait_f = 0, wait_b = 0;
  Work& operator+=(const Work& o) {
    f += o.f;
    b += o.b;
    flops += o.flops;
    wait_f += o.wait_f;
    wait_b += o.wait_b;
    return *this;
  }
};

// One rank's share of the layers' shapes: its widths, and a micro-batch's rows (B
// sequences of T tokens, this rank's T / cp under context parallelism, Tg the whole
// sequence; Rl: a norm region's rows, split over tp by SP). A mixture of experts: E experts
// over ep ranks, top k, each expert's width Fe (whole on every tp rank), a shared expert's Fs.
struct Shapes : rates::Widths {
  double B = 0, T = 0, Tg = 0, R = 0, Rl = 0, cp = 1;
  double E = 0, k = 0, ep = 1, Fe = 0, Fs = 0;
  nn::ExpertRows rows;  // the rows this rank keeps and its experts receive
  bool moe = false;
};

// The links a layout's axes cross (the mesh is ordered {dp, pp, ep, cp, tp}, tp fastest).
struct Links {
  const Link *tp, *cp, *ep, *pp, *dp;
};

// Each returns the part's work; attention_work and ffn_work also the communication inside
// it (cp's exposed ring transfers, ep's all-to-alls), which their times include.
Work attention_work(const Shapes& s, const rates::Rates& r, const Link& cp_link, double& cp_comm);
Work mlp_work(const Shapes& s, const rates::Rates& r, double rows, double F, double calls);
Work ffn_work(const Shapes& s, const rates::Rates& r, const Link& ep_link, double& ep_comm);
Work head_work(const Shapes& s, const rates::Rates& r);
Work embed_work(const Shapes& s, const rates::Rates& r, bool learned);

}  // namespace dt::engine::blocks
