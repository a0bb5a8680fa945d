// Checkpoints: bitwise round trip (f32, bf16, i64), every corruption case (truncation, a
// huge header length, offsets past the end, unknown dtype, wrong shape, missing tensor)
// giving the right status and leaving the destination untouched, and interrupted writes
// never replacing the good checkpoint.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/rng.h"
#include "io/checkpoint.h"
#include "io/file_util.h"
#include "unit/checkpoint_fixture.h"

namespace dt {
namespace DT_TEST_NS {

namespace fs = std::filesystem;
using json = nlohmann::json;

class IoCheckpoint : public test::CheckpointDirTest {
 protected:
  std::vector<io::CheckpointTensor> tensors(uint64_t seed) override {
    Tensor steps = Tensor::zeros({3}, DType::I64);
    for (int i = 0; i < 3; ++i) steps.data<int64_t>()[i] = (int64_t(1) << 40) + i + int64_t(seed);
    return {{"w", test::randn({4, 5}, DType::F32, seed, "w"), {1, "tp"}},
            {"b", test::randn({3}, DType::BF16, seed, "b"), {}},  // odd byte count: alignment
            {"steps", steps, {}}};
  }
  std::vector<io::CheckpointTensor> blank() {
    return {{"w", Tensor::zeros({4, 5}, DType::F32), {1, "tp"}},
            {"b", Tensor::zeros({3}, DType::BF16), {}},
            {"steps", Tensor::zeros({3}, DType::I64), {}}};
  }
  // Rewrites the data file with `edit` applied to its bytes, then expects load to fail with
  // `code` and a message holding `needle`, and the destination to be left as it was.
  void expect_corrupt(const std::function<void(std::string&)>& edit, dt_status code, const std::string& needle) {
    std::string path = data_file(), bytes = read(path);
    edit(bytes);
    write(path, bytes);
    expect_load_fails(code, needle);
  }
  // The header JSON of the data file, for edits that keep its length.
  static std::string header_of(const std::string& bytes) {
    uint64_t n = 0;
    for (int k = 0; k < 8; ++k) n |= uint64_t(static_cast<unsigned char>(bytes[k])) << (8 * k);
    return bytes.substr(8, n);
  }
  static void replace_in_header(std::string& bytes, const std::string& from, const std::string& to) {
    ASSERT_EQ(from.size(), to.size());
    size_t at = header_of(bytes).find(from);
    ASSERT_NE(at, std::string::npos) << from;
    bytes.replace(8 + at, from.size(), to);
  }
};

TEST_F(IoCheckpoint, RoundTripIsBitwiseWithMetadataAndSpecs) {
  auto src = tensors(1);
  json meta = {{"step", 1234}, {"config", {{"d_model", 64}}}, {"data", {{"epoch", 2}, {"position", 17}}}};
  io::save_checkpoint(dir_, src, meta);
  auto dst = blank();
  json got = io::load_checkpoint(dir_, dst);
  EXPECT_EQ(got, meta);
  for (size_t i = 0; i < src.size(); ++i) EXPECT_TRUE(test::same_bits(dst[i].tensor, src[i].tensor)) << src[i].name;
  json idx = io::read_checkpoint_index(dir_);
  EXPECT_EQ(idx["tensors"]["w"]["shard"]["axis"], "tp");
  EXPECT_EQ(idx["tensors"]["b"]["dtype"], "BF16");
  // The data section starts 8-byte aligned; every tensor at a multiple of its element size.
  std::vector<char> raw = io::read_file(data_file());
  std::string head = header_of(std::string(raw.begin(), raw.end()));
  EXPECT_EQ((8 + head.size()) % 8, 0u);
  json h = json::parse(head);
  EXPECT_EQ(h["steps"]["data_offsets"][0].get<uint64_t>() % 8, 0u);
  EXPECT_EQ(h["w"]["data_offsets"][0].get<uint64_t>() % 4, 0u);
  // A subset loads too; a second save replaces the first and removes its data file.
  std::string first = data_file();
  io::save_checkpoint(dir_, tensors(2), meta);
  EXPECT_FALSE(io::file_exists(first));
  std::vector<io::CheckpointTensor> only_b = {{"b", Tensor::zeros({3}, DType::BF16), {}}};
  io::load_checkpoint(dir_, only_b);
  EXPECT_TRUE(test::same_bits(only_b[0].tensor, tensors(2)[1].tensor));
}

TEST_F(IoCheckpoint, TruncatedFile) {
  io::save_checkpoint(dir_, tensors(1), json::object());
  expect_corrupt([](std::string& b) { b.resize(b.size() - 5); }, DT_ERR_IO, "past the end of the data");
  expect_corrupt([](std::string& b) { b.resize(5); }, DT_ERR_IO, "truncated");
}

TEST_F(IoCheckpoint, HugeHeaderLength) {
  io::save_checkpoint(dir_, tensors(1), json::object());
  expect_corrupt([](std::string& b) { for (int k = 0; k < 8; ++k) b[k] = char(0xff); }, DT_ERR_IO,
                 "runs past the end of the file");
}

TEST_F(IoCheckpoint, OffsetsPastEndOverlapOrWrongSize) {
  io::save_checkpoint(dir_, tensors(1), json::object());
  // The bf16 tensor is last (6 bytes at 104); moving it to 900 puts it past the end.
  expect_corrupt([](std::string& b) { replace_in_header(b, "[104,110]", "[904,910]"); }, DT_ERR_IO, "past the end");
  io::save_checkpoint(dir_, tensors(1), json::object());
  expect_corrupt([](std::string& b) { replace_in_header(b, "[104,110]", "[100,106]"); }, DT_ERR_IO, "overlaps");
  io::save_checkpoint(dir_, tensors(1), json::object());
  expect_corrupt([](std::string& b) { replace_in_header(b, "[104,110]", "[104,108]"); }, DT_ERR_IO, "needs 6");
}

TEST_F(IoCheckpoint, UnknownDtype) {
  io::save_checkpoint(dir_, tensors(1), json::object());
  expect_corrupt([](std::string& b) { replace_in_header(b, "\"BF16\"", "\"Q4_0\""); }, DT_ERR_IO,
                 "unknown dtype \"Q4_0\"");
}

TEST_F(IoCheckpoint, DestinationMismatches) {
  io::save_checkpoint(dir_, tensors(1), json::object());
  auto wrong_shape = tensors(99);
  wrong_shape[0].tensor = test::randn({5, 4}, DType::F32, 99, "w");
  expect_load_fails(DT_ERR_INVALID_ARGUMENT, "[4, 5] in the checkpoint", wrong_shape);
  auto wrong_dtype = tensors(99);
  wrong_dtype[1].tensor = test::randn({3}, DType::F16, 99, "b");
  expect_load_fails(DT_ERR_INVALID_ARGUMENT, "\"b\" is BF16", wrong_dtype);
  auto wrong_spec = tensors(99);
  wrong_spec[0].spec = {};
  expect_load_fails(DT_ERR_INVALID_ARGUMENT, "split(dim=1, tp)", wrong_spec);
  auto extra = tensors(99);
  extra.push_back({"missing", test::randn({2}, DType::F32, 5, "m"), {}});
  expect_load_fails(DT_ERR_NOT_FOUND, "\"missing\"", extra);
}

TEST_F(IoCheckpoint, MissingOrBrokenIndex) {
  expect_load_fails(DT_ERR_IO, "index.json");
  io::save_checkpoint(dir_, tensors(1), json::object());
  std::ofstream(io::checkpoint_index_path(dir_), std::ios::trunc) << "{\"format\": \"dtrain.checkpoint\"";
  expect_load_fails(DT_ERR_IO, "not valid JSON (at byte");
  // Well-formed JSON of the wrong types is a file problem too, not a stray json exception.
  io::save_checkpoint(dir_, tensors(1), json::object());
  json idx = io::read_checkpoint_index(dir_);
  idx["tensors"]["w"]["dtype"] = 7;
  std::ofstream(io::checkpoint_index_path(dir_), std::ios::trunc) << idx.dump();
  expect_load_fails(DT_ERR_IO, "malformed \"tensors\" entry");
  idx["format"] = 3;
  std::ofstream(io::checkpoint_index_path(dir_), std::ios::trunc) << idx.dump();
  expect_load_fails(DT_ERR_IO, "\"format\"");
}

// Random byte flips anywhere in the header or its length: load either succeeds or throws
// a dt::Error with a file or mismatch status, and a failure changes nothing (under ASan
// this is also the parser's memory-safety check).
TEST_F(IoCheckpoint, RandomHeaderCorruptionIsAlwaysACleanError) {
  io::save_checkpoint(dir_, tensors(1), json::object());
  std::string path = data_file();
  std::vector<char> raw = io::read_file(path);
  CounterRng rng(5, "flips");
  size_t head = 8 + header_of(std::string(raw.begin(), raw.end())).size();
  for (uint64_t trial = 0; trial < 300; ++trial) {
    std::string bytes(raw.begin(), raw.end());
    for (uint64_t k = 0; k < 1 + trial % 3; ++k)
      bytes[rng.bits(trial * 8 + 2 * k) % head] = static_cast<char>(rng.bits(trial * 8 + 2 * k + 1) & 0xff);
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
    auto dest = tensors(99);
    auto keep = tensors(99);
    try {
      io::load_checkpoint(dir_, dest);
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == DT_ERR_IO || e.code() == DT_ERR_INVALID_ARGUMENT) << e.what();
      for (size_t i = 0; i < dest.size(); ++i) EXPECT_TRUE(test::same_bits(dest[i].tensor, keep[i].tensor));
    }
  }
}

// A crash mid-save leaves a temp file, or a complete new data file whose index was never
// written: neither replaces the last good checkpoint, and the next save still works.
TEST_F(IoCheckpoint, InterruptedWriteNeverReplacesTheGoodCheckpoint) {
  auto good = tensors(1);
  io::save_checkpoint(dir_, good, {{"step", 1}});
  std::string good_file = data_file();
  std::ofstream(good_file + ".tmp.12345.0", std::ios::binary) << "half a checkpoint";
  std::ofstream(io::checkpoint_index_path(dir_) + ".tmp.12345.1") << "{\"format\":";
  std::ofstream(dir_ + "/checkpoint.000002.safetensors", std::ios::binary) << "newer, but never indexed";
  {  // a save abandoned mid-write (the exception path): its temp is removed, nothing renamed
    io::AtomicFile partial(io::checkpoint_index_path(dir_));
    partial.write("{", 1);
  }
  auto dst = blank();
  EXPECT_EQ(io::load_checkpoint(dir_, dst)["step"], 1);
  for (size_t i = 0; i < good.size(); ++i) EXPECT_TRUE(test::same_bits(dst[i].tensor, good[i].tensor));
  auto next = tensors(2);
  io::save_checkpoint(dir_, next, {{"step", 2}});
  EXPECT_EQ(io::load_checkpoint(dir_, dst)["step"], 2);
  EXPECT_TRUE(test::same_bits(dst[0].tensor, next[0].tensor));
  // A save that fails validation writes nothing.
  auto dup = tensors(3);
  dup[1].name = "w";
  test::expect_invalid([&] { io::save_checkpoint(dir_, dup, json::object()); }, "appears twice");
  EXPECT_EQ(io::load_checkpoint(dir_, dst)["step"], 2);
}

}  // namespace
}  // namespace dt
