// A cluster as the planner sees it (engine/plan_cost.h): hosts of devices, what one device
// computes and holds, and the links between devices in a host and between hosts. Built-in
// descriptions of GPU nodes come from their data sheets (docs/planner-hardware.md names the
// source of every figure); this machine's comes from `dtrain plan --calibrate`
// (engine/calibrate.h), which measures the rates instead of reading them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dt::engine {

// One kind of link: bytes per second one device sends in one direction (what a ring
// all-reduce's bus bandwidth reaches), and the fixed cost of one collective call or message.
struct Link {
  double bandwidth = 0;  // bytes/s: an all-reduce's wire bytes (2 (n-1)/n of the buffer) per second
  double latency = 0;    // s per call
  // Other kinds where they differ (0: as bandwidth): wire bytes ((n-1)/n of the whole) per
  // second of an all-gather and a reduce-scatter, and a point-to-point message's bytes.
  double all_gather = 0, reduce_scatter = 0, p2p = 0;
  double gather_bw() const { return all_gather > 0 ? all_gather : bandwidth; }
  double scatter_bw() const { return reduce_scatter > 0 ? reduce_scatter : bandwidth; }
  double p2p_bw() const { return p2p > 0 ? p2p : bandwidth; }
};

struct Cluster {
  std::string name, source;
  bool cpu = false;            // devices are the host's cores, which in-process ranks share
  int64_t hosts = 1;
  int64_t devices_per_host = 1;
  double device_memory = 0;    // bytes one device (CPU: the host) holds
  // Achieved rates (what a planner should divide by; the data-sheet peaks x efficiency):
  double matmul_flops_f32 = 0, matmul_flops_16 = 0;  // FLOP/s of one device's large GEMMs
  double matmul_call_s = 0;                          // fixed cost per GEMM call (launch, threading)
  // Small GEMMs run below the large ones' rate: the fraction of it at each size (the cube
  // root of M K N), interpolated on log size; empty: every GEMM at the rate.
  std::vector<double> matmul_sizes, matmul_efficiency;
  double matmul_rate_at(double size) const;  // the fraction at `size` (1 when no curve)
  double attention_flops_f32 = 0, attention_flops_16 = 0;  // the fused attention kernel, forward
  double memory_bandwidth = 0;                       // bytes/s elementwise kernels stream
  // Activations and RoPE, whose CPU kernels compute more than they stream: seconds per
  // element on one core, forward and backward (measured by dtrain plan --calibrate; 0: priced
  // by the bytes they stream, as on GPUs, where they are bound by memory).
  double gelu_fwd_s = 0, gelu_bwd_s = 0, swiglu_fwd_s = 0, swiglu_bwd_s = 0, rope_fwd_s = 0, rope_bwd_s = 0;
  double op_call_s = 0;                              // fixed cost per elementwise kernel call
  // CPU: one rank alone in a process runs its kernels on every core (a thread pool) at
  // pool_speedup x one core's rate; ranks beyond the cores share them.
  double pool_speedup = 1;
  // CPU: a core's speed while every core computes (ranks side by side share caches, memory
  // and clocks), as a fraction of its speed alone.
  double shared_core_speed = 1;
  double attention_backward_ratio = 2.5;  // the fused attention's backward time over its forward's
  // What a whole forward and backward reaches of the rates above (kernels in a step run on
  // colder caches than alone): the cost model's time for a reference model over the measured
  // time (dtrain plan --calibrate); 1 for data-sheet clusters, whose rates are achieved ones.
  double compute_efficiency = 1;
  // Serving (engine/plan_serve.h), fitted by dtrain plan --calibrate to a reference model's
  // paged forward (1 for data-sheet clusters): what a prefill chunk and a decode step reach
  // of the cost model's time, and the paged attention's cost on one core per cached position
  // it stages per query head (the CPU kernel copies each sequence's keys and values out of
  // their blocks; a GPU reads them in place: 0).
  double prefill_efficiency = 1, decode_efficiency = 1, kv_row_s = 0;
  // A mixture of experts' cost on one core per routed (row, choice) pair and block, forward
  // and backward, beyond what the cost model itemizes (the routing read back to the host,
  // the slots and auxiliary losses computed there, the experts' row ranges run one by one):
  // fitted by dtrain plan --calibrate to a reference mixture; 0 for data-sheet clusters.
  double moe_row_s = 0;
  // Context parallelism's cost per ring step and layer, forward and backward, beyond what the
  // cost model itemizes (the ranks waiting for each other at every exchange, the partial
  // results' bookkeeping): fitted by dtrain plan --calibrate to a cp 2 reference against its
  // dp 2 twin (the same rows a rank); 0 for data-sheet clusters.
  double ring_step_s = 0;
  // Expert parallelism's cost per all-to-all and layer (five a layer: the counts, dispatch
  // and combine forward, dispatch and combine backward), beyond what the cost model itemizes
  // with the busiest rank's rows (the ranks waking for each other at every exchange): fitted
  // by dtrain plan --calibrate to a mixture over ep 2 against its dp 2 twin, at the load its
  // steps routed; 0 for data-sheet clusters.
  double ep_exchange_s = 0;
  // What activation recompute costs, as a fraction of the blocks' forward it reruns: fitted
  // by dtrain plan --calibrate to a reference with and without recompute. On a CPU it is
  // below 1: recomputed blocks write one block's scratch, which stays in cache, where a plain
  // step's forward writes every block's activations to memory. 1 for data-sheet clusters.
  double recompute_ratio = 1;
  Link intra, inter;           // between devices of a host; between hosts (per device)
  // CPU: between ranks of one host in separate processes (Open MPI's shared memory), when
  // calibrated (bandwidth 0: as intra); the in-process ranks of the local backend use intra.
  Link processes;
  bool overlap_comm = true;    // collectives progress beside compute (GPU streams); CPU: they take a core
  // The data-sheet figures, for the record (peak_* are not used by the cost model).
  double peak_flops_f32 = 0, peak_flops_16 = 0;

  int64_t devices() const { return hosts * devices_per_host; }
  // INVALID_ARGUMENT naming the field and its accepted range.
  void check() const;
};

nlohmann::json cluster_to_json(const Cluster& c);
nlohmann::json link_to_json(const Link& l);
// Every field optional but "name"; unknown keys refused by name (a typo must not silently
// plan for a different machine). `what` names the source in messages.
Cluster cluster_from_json(const nlohmann::json& j, const std::string& what);

// Field by field, the median of several measurements of one machine (dtrain plan --calibrate
// --calibrate-repeats N): each rate, each fitted residue, each link figure (of the runs that
// measured that link) and each point of the GEMM curve; names, flags and counts from the first.
// On a shared host one calibration's fitted residues move by 10-20% within a minute, being
// differences of best-of timings; the median of a few holds still. Empty: INVALID_ARGUMENT.
Cluster median_cluster(const std::vector<Cluster>& runs);

// "a100-node", "h100-node", "h200-node" (8 GPUs a host; hosts = 1, set by the caller),
// "cpu-default" (a conservative 2-core host for when nothing was calibrated).
std::vector<std::string> builtin_cluster_names();
// NOT_FOUND naming the accepted names.
Cluster builtin_cluster(const std::string& name);
// A built-in name, optionally with ":HOSTS" ("h100-node:16"), or a cluster's JSON text.
Cluster parse_cluster(const std::string& text, const std::string& what);

}  // namespace dt::engine
