// Files that shrink while in use (issue 31): a token dataset or a checkpoint truncated by
// another process after it was opened must give DT_ERR_IO naming the file, never SIGBUS
// (which a memory mapping raised: the process died with no message).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "dtrain/dtrain.h"
#include "io/checkpoint.h"
#include "io/file_util.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "dtrain_trunc_" + std::to_string(::getpid()) + "_" + name;
}

void write_bytes(const std::string& path, size_t n) {
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>(i % 7);  // tokens 0..6, u16 little-endian
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(n));
}

bool says_truncated(const std::string& msg, const std::string& path) {
  return msg.find(path) != std::string::npos && msg.find("truncated while in use") != std::string::npos;
}

TEST(IoTruncated, ReadOnlyFileReadPastTheNewEndIsAnIoError) {
  const std::string path = temp_path("raw.bin");
  write_bytes(path, 1 << 16);
  io::ReadOnlyFile f(path);
  ASSERT_EQ(f.size(), size_t(1) << 16);
  std::vector<unsigned char> buf(256);
  f.copy_to(1000, buf.data(), buf.size());
  EXPECT_EQ(buf[0], 1000 % 7);
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  try {
    f.copy_to(1000, buf.data(), buf.size());
    ADD_FAILURE() << "read past the new end succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_IO);
    EXPECT_TRUE(says_truncated(e.what(), path)) << e.what();
  }
  f.copy_to(0, buf.data(), 100);  // what is left still reads
  std::remove(path.c_str());
}

TEST(IoTruncated, DatasetExampleThroughTheCApiFailsCleanly) {
  const std::string path = temp_path("tokens.bin");
  write_bytes(path, 2 * 4096);  // 4096 u16 tokens
  dt_options* o = nullptr;
  ASSERT_EQ(dt_options_create(&o), DT_OK);
  ASSERT_EQ(dt_options_set_string(o, "path", path.c_str()), DT_OK);
  ASSERT_EQ(dt_options_set_int(o, "context", 16), DT_OK);
  dt_dataset* d = nullptr;
  ASSERT_EQ(dt_dataset_create("tokens", o, &d), DT_OK) << dt_last_error_message();
  dt_options_destroy(o);
  int32_t in[16], tg[16];
  ASSERT_EQ(dt_dataset_example(d, 200, in, tg), DT_OK);
  ASSERT_EQ(::truncate(path.c_str(), 64), 0);
  EXPECT_EQ(dt_dataset_example(d, 200, in, tg), DT_ERR_IO);
  EXPECT_TRUE(says_truncated(dt_last_error_message(), path)) << dt_last_error_message();
  EXPECT_EQ(dt_dataset_example(d, 0, in, tg), DT_OK);  // the bytes still there still read
  dt_dataset_destroy(d);
  std::remove(path.c_str());
}

TEST(IoTruncated, CheckpointTruncatedBetweenCheckAndCopyIsAnIoError) {
  const std::string dir = temp_path("ckpt");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  io::save_checkpoint(dir, {{"w", test::randn({64, 64}, DType::F32, 1, "w"), {}}}, nlohmann::json::object());
  static std::string data;  // the hook is a plain function pointer
  data = dir + "/" + io::read_checkpoint_index(dir)["weight_map"]["w"].get<std::string>();
  io::g_load_checkpoint_before_copy = [] { ASSERT_EQ(::truncate(data.c_str(), 200), 0); };
  std::vector<io::CheckpointTensor> dest = {{"w", Tensor::zeros({64, 64}, DType::F32), {}}};
  try {
    io::load_checkpoint(dir, dest);
    ADD_FAILURE() << "load of a truncated file succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_IO);
    EXPECT_TRUE(says_truncated(e.what(), data)) << e.what();
  }
  io::g_load_checkpoint_before_copy = nullptr;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dt
