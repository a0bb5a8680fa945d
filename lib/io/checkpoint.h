// Checkpoints: named tensors in safetensors files plus a JSON index that carries the run's
// metadata (config, step, RNG and data position: whatever the caller puts there) and each
// tensor's dtype, whole shape, sharding spec and chunks.
//
// Chunks (format version 2): a tensor is stored as boxes of its whole index space
// (io/tensor_box.h), each an entry of one data file with an XXH3-64 checksum of its bytes in
// the index, verified whenever it is read. A single writer stores each tensor whole, one
// chunk ("<stem>.<generation>.safetensors"); a sharded save (write_checkpoint_shard, one
// file "<stem>.<generation>.r<writer>.safetensors" per writing rank, then one
// commit_checkpoint) stores what each rank owns, so no rank gathers the whole. A load asks
// for boxes (load_checkpoint_pieces) and reads the saved chunks they intersect, so any
// layout reads any other's checkpoint. The index must tile every tensor exactly (chunks
// inside its shape, pairwise disjoint, covering it); version 1 indexes (one whole tensor per
// entry, no checksums) still load.
//
// Crash safety: a save writes NEW data files (atomic: temp, fsync, rename, fsync dir), then
// atomically replaces "<stem>.index.json", which names them; only then are the previous
// generation's data files removed. A crash at any point leaves the old index naming the
// old, intact data files, so the last completed save is always loadable; leftovers (temps,
// unreferenced newer files) are removed by the next save.
//
// Loading validates everything before writing to any destination: the index, every
// header (see safetensors.h), that each destination tensor exists with the same dtype,
// shape and sharding spec, and reads the data into memory and checks its checksums; then
// it copies. Errors:
// DT_ERR_IO for a file that is missing, unreadable or malformed; DT_ERR_NOT_FOUND for a
// tensor the checkpoint does not hold (as dtrain.h defines it); DT_ERR_INVALID_ARGUMENT
// for a destination that does not match (dtype, shape, sharding, duplicate names).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/tensor_box.h"
#include "nn/parameter.h"

namespace dt::io {

inline constexpr const char* kCheckpointFormat = "dtrain.checkpoint";  // the index's "format"
using CheckpointTensor = nn::StateTensor;  // name, tensor (CPU; loading writes into it in place), spec

// A tensor's pieces held by one rank: the whole tensor's name, shape, dtype and sharding
// spec (recorded in the index), and boxes of it with their data (CPU tensors of box.numel()
// elements in row-major order: a save reads them, a load writes them).
struct TensorPieces {
  struct Piece {
    Box box;
    Tensor data;
  };
  std::string name;
  Shape shape;
  DType dtype = DType::F32;
  nn::ShardSpec spec;
  std::vector<Piece> pieces;
};

void save_checkpoint(const std::string& dir, const std::vector<CheckpointTensor>& tensors,
                     const nlohmann::json& metadata, const std::string& stem = "checkpoint");

// Fills every tensor of `dest` from the checkpoint (which may hold more) and returns the
// metadata saved with it. index: the checkpoint's index already read (read_checkpoint_index),
// or null to read it.
nlohmann::json load_checkpoint(const std::string& dir, const std::vector<CheckpointTensor>& dest,
                               const std::string& stem = "checkpoint", const nlohmann::json* index = nullptr);
// Tests only: called by load_checkpoint after every file is opened and checked, before any
// byte is copied, so a test can truncate a file in exactly that window. Null in use.
extern void (*g_load_checkpoint_before_copy)();

// ---- Sharded saves: every writer writes its file, then one commit (engine/state_shards.h
// runs it over a communicator).
// The generation the next save of `stem` writes (the current index's + 1; 1 if none).
int64_t checkpoint_next_generation(const std::string& dir, const std::string& stem);
// Writes `mine` (every piece a chunk) to writer `writer`'s data file of `generation` and
// returns its table for commit_checkpoint; nothing written (and an empty table) when mine
// holds no piece. writer -1: the single writer's file name.
nlohmann::json write_checkpoint_shard(const std::string& dir, const std::string& stem, int64_t generation, int writer,
                                      const std::vector<TensorPieces>& mine);
// The commit point: checks that the writers' tables tile every tensor exactly (INTERNAL
// naming the tensor when not: a writer bug), writes the index, then removes the data
// files of older generations and dead writers' temps (best effort).
void commit_checkpoint(const std::string& dir, const std::string& stem, int64_t generation,
                       const std::vector<nlohmann::json>& tables, const nlohmann::json& metadata);
// Fills every piece of `targets` from the chunks it intersects (each tensor's dtype and
// shape must be the checkpoint's) and returns the metadata. Every file, header and entry
// is checked first in any mode; then, by `mode`:
//   Atomic: every chunk needed is read and its checksum checked before any piece is
//     written (memory: all of them at once);
//   Stream: chunk by chunk, each read (straight into the piece it is exactly, else into one
//     reused buffer), checked, then copied out; a failure may leave pieces half written;
//   VerifyOnly: chunk by chunk into one reused buffer, checked; no piece is written. A
//     caller that must write all or nothing without holding a copy runs VerifyOnly, agrees,
//     then Stream (engine/trainer_checkpoint.cc).
enum class LoadMode { Atomic, Stream, VerifyOnly };
nlohmann::json load_checkpoint_pieces(const std::string& dir, const std::vector<TensorPieces>& targets,
                                      const std::string& stem = "checkpoint", LoadMode mode = LoadMode::Atomic,
                                      const nlohmann::json* index = nullptr);  // as load_checkpoint's

// Rewrites any checkpoint as one writer's (every tensor whole, the metadata's "layout"
// dropped): dt_checkpoint_consolidate. Holds the whole state in memory while it works.
void consolidate_checkpoint(const std::string& src_dir, const std::string& src_stem, const std::string& dst_dir,
                            const std::string& dst_stem);

// The parsed, validated index (for inspection tools). Whatever its version, "files" lists
// its data files and every tensor has "chunks": [{"file": index into files, "entry": the
// safetensors entry, "offset", "extent", "xxh3" (version 2)}].
nlohmann::json read_checkpoint_index(const std::string& dir, const std::string& stem = "checkpoint");
// The same checks on an index's text already in memory (`path` names it in errors).
nlohmann::json parse_checkpoint_index(const std::string& path, const char* text, size_t n);
std::string checkpoint_index_path(const std::string& dir, const std::string& stem = "checkpoint");

}  // namespace dt::io
