// dtrain plan --calibrate: this machine as a cluster (engine/cluster.h), measured rather than
// read from a data sheet: short runs of the kernels the cost model divides by (GEMMs on one
// core and on the kernel pool, the fused attention, an elementwise add) and of the local
// backend's all-reduce between two rank threads. Each rate is the best of a few repeats after
// a warm-up (first touch of fresh memory is slow here); the whole takes a few seconds.
#pragma once
#include <functional>
#include <string>

#include "engine/cluster.h"

namespace dt::comm {
class Mesh;
}

namespace dt::engine {

// progress(what): called before each measurement (a long command shows progress).
Cluster calibrate_local(const std::function<void(const std::string&)>& progress = {});

// The collectives of a mesh of two ranks over "dp" (each of its local ranks calls in):
// all-reduce latency and bandwidth, all-gather, reduce-scatter and send/recv bandwidths.
// Under mpirun -np 2 (`dtrain plan --calibrate --backend mpi`) it is a CPU cluster's
// "processes" link: what ranks of one host in separate processes pay.
Link time_link(comm::Mesh& mesh);

}  // namespace dt::engine
