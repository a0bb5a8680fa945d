// Checkpoints: named tensors in a safetensors file plus a JSON index that carries the run's
// metadata (config, step, RNG and data position: whatever the caller puts there) and each
// tensor's dtype, shape and sharding spec.
//
// Crash safety: a save writes a NEW data file "<stem>.<generation>.safetensors" (atomic:
// temp, fsync, rename, fsync dir), then atomically replaces "<stem>.index.json", which
// names that file; only then is the previous generation's data file removed. A crash at
// any point leaves the old index naming the old, intact data file, so the last completed
// save is always loadable; leftovers (temps, an unreferenced newer file) are ignored.
//
// Loading validates everything before writing to any destination: the index, every
// header (see safetensors.h), that each destination tensor exists with the same dtype,
// shape and sharding spec, and reads the data into memory; then it copies. Errors:
// DT_ERR_IO for a file that is missing, unreadable or malformed; DT_ERR_NOT_FOUND for a
// tensor the checkpoint does not hold (as dtrain.h defines it); DT_ERR_INVALID_ARGUMENT
// for a destination that does not match (dtype, shape, sharding, duplicate names).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/parameter.h"

namespace dt::io {

using CheckpointTensor = nn::StateTensor;  // name, tensor (CPU; loading writes into it in place), spec

void save_checkpoint(const std::string& dir, const std::vector<CheckpointTensor>& tensors,
                     const nlohmann::json& metadata, const std::string& stem = "checkpoint");

// Fills every tensor of `dest` from the checkpoint (which may hold more) and returns the
// metadata saved with it.
nlohmann::json load_checkpoint(const std::string& dir, const std::vector<CheckpointTensor>& dest,
                               const std::string& stem = "checkpoint");
// Tests only: called by load_checkpoint after every file is opened and checked, before any
// byte is copied, so a test can truncate a file in exactly that window. Null in use.
extern void (*g_load_checkpoint_before_copy)();

// The parsed, validated index (for inspection tools).
nlohmann::json read_checkpoint_index(const std::string& dir, const std::string& stem = "checkpoint");
// The same checks on an index's text already in memory (`path` names it in errors).
nlohmann::json parse_checkpoint_index(const std::string& path, const char* text, size_t n);
std::string checkpoint_index_path(const std::string& dir, const std::string& stem = "checkpoint");

}  // namespace dt::io
