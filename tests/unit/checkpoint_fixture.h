// The fixture the checkpoint loader's tests share (io_checkpoint_test, io_hostile_test): a
// fresh directory per test, the files a save wrote, byte-level edits, and the one check every
// corruption case makes: load fails with the expected status and words, and the destination
// keeps every bit it had.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "io/file_util.h"
#include "unit/test_util.h"

namespace dt::test {

class CheckpointDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "dtrain_ckpt_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The tensors a test saves and loads; `seed` makes distinctive contents.
  virtual std::vector<io::CheckpointTensor> tensors(uint64_t seed) = 0;

  std::string index() const { return io::checkpoint_index_path(dir_); }
  // The data file the index names for tensor "w".
  std::string data_file() const {
    return dir_ + "/" + io::read_checkpoint_index(dir_)["weight_map"]["w"].get<std::string>();
  }
  static void write(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
  }
  static std::string read(const std::string& path) {
    std::vector<char> raw = io::read_file(path);
    return std::string(raw.begin(), raw.end());
  }
  // A safetensors file: the 8-byte little-endian header length, `header`, then `data`.
  static std::string safetensors(const std::string& header, const std::string& data) {
    std::string out(8, '\0');
    for (int k = 0; k < 8; ++k) out[k] = static_cast<char>((uint64_t(header.size()) >> (8 * k)) & 0xff);
    return out + header + data;
  }

  // load_checkpoint into `dest` (default: tensors(99)) fails with `code` and a message holding
  // `needle`, in our words (no JSON library's), and leaves `dest` as it was.
  void expect_load_fails(dt_status code, const std::string& needle, std::vector<io::CheckpointTensor> dest = {}) {
    if (dest.empty()) dest = tensors(99);
    std::vector<Tensor> keep;
    for (auto& d : dest) keep.push_back(converted(d.tensor, d.tensor.dtype()));
    try {
      io::load_checkpoint(dir_, dest);
      ADD_FAILURE() << "load succeeded; expected " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "\"" << needle << "\" not in: " << e.what();
      EXPECT_EQ(std::string(e.what()).find("json.exception"), std::string::npos) << e.what();
    }
    for (size_t i = 0; i < dest.size(); ++i) EXPECT_TRUE(same_bits(dest[i].tensor, keep[i])) << dest[i].name;
  }

  std::string dir_;
};

}  // namespace dt::test
