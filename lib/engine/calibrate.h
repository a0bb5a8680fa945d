// dtrain plan --calibrate: this machine as a cluster (engine/cluster.h), measured rather than
// read from a data sheet: short runs of the kernels the cost model divides by (GEMMs on one
// core and on the kernel pool, the fused attention, an elementwise add) and of the local
// backend's all-reduce between two rank threads. Each rate is the best of a few repeats after
// a warm-up (first touch of fresh memory is slow here); the whole takes a few seconds.
#pragma once
#include <functional>
#include <string>

#include "engine/cluster.h"

namespace dt::engine {

// progress(what): called before each measurement (a long command shows progress).
Cluster calibrate_local(const std::function<void(const std::string&)>& progress = {});

}  // namespace dt::engine
