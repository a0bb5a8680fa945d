// Chunked checkpoints (io/checkpoint.h, io/tensor_box.h): boxes and their copies; writers
// that each hold a different cut of the same tensors (row blocks, column blocks, ZeRO's flat
// ranges) commit one checkpoint that loads into any other cut, bitwise; every single-byte
// flip in the data is caught by the checksum (20 of 20); an index whose chunks overlap,
// reach outside the tensor, leave a hole or name a file that is missing is refused naming
// the tensor, before any destination is written; a commit whose writers do not tile a tensor
// is refused too.
#include <filesystem>
#include <numeric>

#include "io/checkpoint.h"
#include "io/tensor_box.h"
#include "nn/tensor_parallel.h"
#include "unit/checkpoint_fixture.h"

namespace dt {
namespace DT_TEST_NS {

using json = nlohmann::json;
using io::Box;

// The elements of `whole` ([R, C] f32) inside box b, as a contiguous tensor.
Tensor cut(const Tensor& whole, const Box& b) {
  Tensor out = Tensor::zeros(b.extent, whole.dtype());
  Box region = b;
  io::copy_region(whole.raw(), io::whole_box(whole.shape()), out.raw(), b, region, dtype_size(whole.dtype()));
  return out;
}

TEST(TensorBox, FlatRangesAreContiguousBoxesInOrder) {
  const Shape shape = {3, 4, 5};
  for (int64_t b = 0; b <= 60; b += 7)
    for (int64_t e = b; e <= 60; e += 11) {
      int64_t next = b;  // each box continues the flat range where the last ended
      for (const Box& box : io::flat_range_boxes(shape, b, e)) {
        int64_t first = 0, stride = 1;
        for (size_t d = shape.size(); d-- > 0;) first += box.offset[d] * stride, stride *= shape[d];
        EXPECT_EQ(first, next) << box.str();
        next += box.numel();
      }
      EXPECT_EQ(next, e) << b << ".." << e;
    }
  EXPECT_LE(io::flat_range_boxes({7, 9}, 5, 60).size(), 3u);
}

TEST(TensorBox, PartBoxesAreWhatTakeShardCuts) {
  // A fused q|k|v of 3 segments, a GQA spec with replicas, a padded vocabulary, a column split.
  const Tensor whole = test::randn({24, 8}, DType::F32, 3, "w");
  std::vector<nn::ShardSpec> specs(4);
  specs[0] = {0, "tp", {8, 8, 8}};
  specs[1] = {0, "tp", {16, 4, 4}, false, {1, 2, 2}};
  specs[2] = {0, "tp", {}, true};
  specs[3] = {1, "tp"};
  for (const nn::ShardSpec& spec : specs)
    for (int r = 0; r < 4; ++r) {
      const Tensor part = nn::take_shard(whole, spec, r, 4);
      for (const io::PartBox& pb : io::part_boxes(spec, whole.shape(), r, 4)) {
        const Tensor a = cut(whole, pb.whole), b = cut(part, pb.part);
        EXPECT_TRUE(test::same_bits(a, b)) << spec.str() << " rank " << r << " " << pb.whole.str();
      }
    }
}

class ShardedCheckpoint : public test::CheckpointDirTest {
 protected:
  std::vector<io::CheckpointTensor> tensors(uint64_t seed) override {
    return {{"w", test::randn({6, 10}, DType::F32, seed, "w"), {}}, {"b", test::randn({7}, DType::BF16, seed, "b"), {}}};
  }
  // Writer r of n holding cut `how` of each tensor: "rows", "cols" or "flat" (ZeRO's ranges).
  static std::vector<io::TensorPieces> cut_for(const std::vector<io::CheckpointTensor>& ts, const std::string& how,
                                               int r, int n) {
    std::vector<io::TensorPieces> out;
    for (const io::CheckpointTensor& t : ts) {
      io::TensorPieces p{t.name, t.tensor.shape(), t.tensor.dtype(), {}, {}};
      std::vector<Box> boxes;
      const int64_t numel = t.tensor.numel();
      if (how == "flat" || t.tensor.ndim() == 1) {
        boxes = io::flat_range_boxes(t.tensor.shape(), numel * r / n, numel * (r + 1) / n);
      } else {
        const int d = how == "rows" ? 0 : 1;
        const int64_t ext = t.tensor.dim(d);
        Box b = io::whole_box(t.tensor.shape());
        b.offset[static_cast<size_t>(d)] = ext * r / n;
        b.extent[static_cast<size_t>(d)] = ext * (r + 1) / n - ext * r / n;
        if (b.numel() > 0) boxes.push_back(b);
      }
      for (const Box& b : boxes) p.pieces.push_back({b, cut(t.tensor, b)});
      out.push_back(p);
    }
    return out;
  }
  void save_as(const std::vector<io::CheckpointTensor>& ts, const std::string& how, int n) {
    const int64_t gen = io::checkpoint_next_generation(dir_, "checkpoint");
    std::vector<json> tables;
    for (int r = 0; r < n; ++r) tables.push_back(io::write_checkpoint_shard(dir_, "checkpoint", gen, r, cut_for(ts, how, r, n)));
    io::commit_checkpoint(dir_, "checkpoint", gen, tables, json{{"step", 3}});
  }
};

TEST_F(ShardedCheckpoint, AnyCutLoadsIntoAnyOtherBitwise) {
  const auto saved = tensors(1);
  for (const std::string save_how : {"rows", "cols", "flat"})
    for (int n : {1, 3, 4}) {
      save_as(saved, save_how, n);
      // Whole, as the single-rank layout loads it.
      auto whole = tensors(99);
      EXPECT_EQ(io::load_checkpoint(dir_, whole)["step"], 3);
      for (size_t i = 0; i < whole.size(); ++i)
        EXPECT_TRUE(test::same_bits(whole[i].tensor, saved[i].tensor)) << save_how << n << " whole " << whole[i].name;
      // And into each other cut, piece by piece.
      for (const std::string load_how : {"rows", "cols", "flat"})
        for (int m : {2, 5})
          for (int r = 0; r < m; ++r) {
            std::vector<io::TensorPieces> want = cut_for(tensors(99), load_how, r, m);
            io::load_checkpoint_pieces(dir_, want);
            const std::vector<io::TensorPieces> ref = cut_for(saved, load_how, r, m);
            for (size_t i = 0; i < want.size(); ++i)
              for (size_t k = 0; k < want[i].pieces.size(); ++k)
                EXPECT_TRUE(test::same_bits(want[i].pieces[k].data, ref[i].pieces[k].data))
                    << "saved " << save_how << " x" << n << ", loaded " << load_how << " " << r << "/" << m;
          }
    }
  // Each save removed the last one's files: one generation's writers remain.
  const json idx = io::read_checkpoint_index(dir_);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) files += e.path().extension() == ".safetensors";
  EXPECT_EQ(files, idx["files"].size());
}

TEST_F(ShardedCheckpoint, ConsolidateWritesOneFileOfTheSameTensors) {
  const auto saved = tensors(1);
  save_as(saved, "flat", 3);
  io::consolidate_checkpoint(dir_, "checkpoint", dir_, "whole");
  const json idx = io::read_checkpoint_index(dir_, "whole");
  EXPECT_EQ(idx["files"].size(), 1u);
  EXPECT_EQ(idx["metadata"]["step"], 3);
  auto back = tensors(99);
  io::load_checkpoint(dir_, back, "whole");
  for (size_t i = 0; i < back.size(); ++i) EXPECT_TRUE(test::same_bits(back[i].tensor, saved[i].tensor)) << back[i].name;
}

TEST_F(ShardedCheckpoint, EverySingleByteFlipInTheDataIsCaught) {
  io::save_checkpoint(dir_, tensors(1), json::object());
  const std::string file = data_file(), good = read(file);
  const size_t header = 8 + static_cast<size_t>(static_cast<unsigned char>(good[0]) | (static_cast<unsigned char>(good[1]) << 8));
  int caught = 0;
  for (int k = 0; k < 20; ++k) {
    std::string bad = good;
    const size_t at = header + (good.size() - header) * static_cast<size_t>(k) / 20;
    bad[at] = static_cast<char>(bad[at] ^ (1 << (k % 8)));
    write(file, bad);
    try {
      auto dest = tensors(99);
      io::load_checkpoint(dir_, dest);
    } catch (const Error& e) {
      caught += e.code() == DT_ERR_IO && std::string(e.what()).find("checksum") != std::string::npos;
    }
  }
  std::printf("single-byte flips in tensor data caught: %d of 20\n", caught);
  EXPECT_EQ(caught, 20);
  write(file, good);
  auto dest = tensors(99);
  io::load_checkpoint(dir_, dest);  // and the intact file loads
}

TEST_F(ShardedCheckpoint, HostileChunksAreRefusedNamingTheTensor) {
  save_as(tensors(1), "rows", 2);
  const json good = io::read_checkpoint_index(dir_);
  auto edit = [&](const std::function<void(json&)>& f) {
    json idx = good;
    f(idx);
    write(index(), idx.dump());
  };
  edit([](json& i) { i["tensors"]["w"]["chunks"][1]["offset"][0] = 2; });  // rows 2..5 over rows 0..3
  expect_load_fails(DT_ERR_IO, "tensor \"w\" chunk 1: box [2:5, 0:10] overlaps chunk 0");
  edit([](json& i) { i["tensors"]["w"]["chunks"][1]["offset"][0] = 4; });
  expect_load_fails(DT_ERR_IO, "reaches outside the tensor's shape [6, 10]");
  edit([](json& i) { i["tensors"]["w"]["chunks"].erase(1); });
  expect_load_fails(DT_ERR_IO, "tensor \"w\": its chunks hold 30 of its 60 elements (a chunk is missing)");
  edit([](json& i) { i["tensors"]["w"]["chunks"][0]["file"] = 7; });
  expect_load_fails(DT_ERR_IO, "\"file\" (an index into \"files\")");
  edit([](json& i) { i["tensors"]["w"]["chunks"][0]["offset"] = {uint64_t(1) << 62, 0}; });
  expect_load_fails(DT_ERR_IO, "accepted: integers from 0 to 2^40");
  edit([](json& i) { i["files"][0] = "../elsewhere.safetensors"; });
  expect_load_fails(DT_ERR_IO, "not a plain file name");
  edit([](json& i) { i["tensors"]["w"]["chunks"][0]["entry"] = "b#0"; });  // another tensor's bytes
  expect_load_fails(DT_ERR_IO, "the file and the index disagree on dtype or shape");
  write(index(), good.dump());
  std::filesystem::remove(dir_ + "/" + good["files"][1].get<std::string>());
  expect_load_fails(DT_ERR_IO, good["files"][1].get<std::string>());
}

TEST_F(ShardedCheckpoint, ACommitWhoseWritersDoNotTileATensorIsRefused) {
  const auto ts = tensors(1);
  const int64_t gen = io::checkpoint_next_generation(dir_, "checkpoint");
  std::vector<json> tables = {io::write_checkpoint_shard(dir_, "checkpoint", gen, 0, cut_for(ts, "rows", 0, 2))};
  try {
    io::commit_checkpoint(dir_, "checkpoint", gen, tables, json::object());
    ADD_FAILURE() << "a checkpoint missing half of every tensor was committed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_INTERNAL) << e.what();
    EXPECT_NE(std::string(e.what()).find("a chunk is missing"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(io::file_exists(index()));
}

}  // namespace
}  // namespace dt
