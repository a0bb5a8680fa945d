// Files from outside are hostile until checked: each defect a tester found in the loaders
// is a case here. A JSON index nested 100,000 deep, a config claiming a billion layers, a
// FIFO in place of a file, a data file with a 2 GiB hole, a header of millions of tiny
// values, safetensors that break the format (a repeated name, a gap, bytes after the last
// tensor), and wrong JSON types: each is a DT_ERR_IO in our words naming the file, at once
// and without touching the destination. Saves: temps of dead writers and orphaned data files
// are removed by the next save; a full disk is DT_ERR_IO and the last checkpoint still loads.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "dtrain/dtrain.h"
#include "io/checkpoint.h"
#include "io/file_util.h"
#include "io/safetensors.h"
#include "unit/checkpoint_fixture.h"

namespace dt {
namespace DT_TEST_NS {

namespace fs = std::filesystem;
using json = nlohmann::json;

class IoHostile : public test::CheckpointDirTest {
 protected:
  std::vector<io::CheckpointTensor> tensors(uint64_t seed) override {
    return {{"w", test::randn({4, 5}, DType::F32, seed, "w"), {}}, {"b", test::randn({3}, DType::BF16, seed, "b"), {}}};
  }
};

TEST_F(IoHostile, DeeplyNestedIndexIsRefusedWithoutRecursion) {
  io::save_checkpoint(dir_, tensors(1), json::object());
  json idx = io::read_checkpoint_index(dir_);
  std::string text = idx.dump();
  // 100,000 levels inside "metadata": a recursive copy or destroy would overflow the stack.
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  text.replace(text.find("\"metadata\":{}"), 13, "\"metadata\":{\"x\":" + deep + "}");
  write(index(), text);
  expect_load_fails(DT_ERR_IO, "nested deeper than");
  // The same through the C API: dt_checkpoint_info_json and dt_module_create_from_checkpoint.
  size_t needed = 0;
  EXPECT_EQ(dt_checkpoint_info_json((dir_ + "/checkpoint").c_str(), nullptr, 0, &needed), DT_ERR_IO);
  EXPECT_NE(std::string(dt_last_error_message()).find("nested deeper than"), std::string::npos);
  dt_module* m = nullptr;
  EXPECT_EQ(dt_module_create_from_checkpoint((dir_ + "/checkpoint").c_str(), &m), DT_ERR_IO);
  EXPECT_EQ(m, nullptr);
}

TEST_F(IoHostile, TooManyValuesOrDuplicateKeysInTheIndex) {
  io::save_checkpoint(dir_, tensors(1), json::object());
  std::string text = io::read_checkpoint_index(dir_).dump();
  std::string many = "[0";
  for (int i = 0; i < 2200000; ++i) many += ",0";
  many += "]";
  std::string big = text;
  big.replace(big.find("\"metadata\":{}"), 13, "\"metadata\":{\"x\":" + many + "}");
  write(index(), big);
  expect_load_fails(DT_ERR_IO, "values; the limit");
  std::string dup = text;
  dup.replace(dup.find("\"metadata\":{}"), 13, "\"metadata\":{},\"metadata\":{\"step\":3}");
  write(index(), dup);
  expect_load_fails(DT_ERR_IO, "the key \"metadata\" appears twice");
}

TEST_F(IoHostile, WrongJsonTypesAreOurOwnMessages) {
  io::save_checkpoint(dir_, tensors(1), json{{"step", 5}});
  json idx = io::read_checkpoint_index(dir_);
  idx["metadata"]["step"] = "five";
  write(index(), idx.dump());
  expect_load_fails(DT_ERR_IO, "metadata \"step\" is not a non-negative integer");
  idx["metadata"] = {{"config", 3}};
  write(index(), idx.dump());
  expect_load_fails(DT_ERR_IO, "metadata \"config\" is not an object");
  idx["metadata"] = json::object();
  idx["generation"] = int64_t(1) << 62;  // "+ 1" on the next save must not overflow
  write(index(), idx.dump());
  expect_load_fails(DT_ERR_IO, "\"generation\"");
}

// Issue 31: numbers that wrap and names that hold a NUL, refused as the index is read.
TEST_F(IoHostile, IndexShardDimsAndShapesThatWrapAreRefused) {
  io::save_checkpoint(dir_, tensors(1), json::object());
  const json saved = io::read_checkpoint_index(dir_);
  json idx = saved;
  idx["tensors"]["w"]["shard"]["dim"] = UINT64_MAX;  // get<int> made this -1: "whole"
  write(index(), idx.dump());
  expect_load_fails(DT_ERR_IO, "shard dim 18446744073709551615; accepted: -1 (whole) or a dim of its shape, 0 to 1");
  idx["tensors"]["w"]["shard"]["dim"] = 2;  // past the shape [4, 5]
  write(index(), idx.dump());
  expect_load_fails(DT_ERR_IO, "shard dim 2");
  idx["tensors"]["w"]["shard"]["dim"] = -2;
  write(index(), idx.dump());
  expect_load_fails(DT_ERR_IO, "shard dim -2");
  idx = saved;
  idx["tensors"]["w"]["shape"] = {UINT64_MAX, 5};
  write(index(), idx.dump());
  expect_load_fails(DT_ERR_IO, "accepted: dims from 0 to 2^40");
  idx["tensors"]["w"]["shape"] = {uint64_t(1) << 40, uint64_t(1) << 40};  // each in range, the product not
  write(index(), idx.dump());
  expect_load_fails(DT_ERR_IO, "more than 2^59 elements");
}

TEST_F(IoHostile, ShardNameWithANulIsRefused) {
  io::save_checkpoint(dir_, tensors(1), json::object());
  json idx = io::read_checkpoint_index(dir_);
  const std::string file = idx["weight_map"]["w"].get<std::string>();
  // "<file>\0junk" would open <file>: the name checked is not the file read.
  idx["weight_map"]["w"] = file + std::string(1, '\0') + "junk";
  idx["weight_map"]["b"] = idx["weight_map"]["w"];
  write(index(), idx.dump());
  expect_load_fails(DT_ERR_IO, "no NUL");
  // And below the index, any file opened for reading refuses such a name.
  try {
    io::read_file(dir_ + "/" + file + std::string(1, '\0') + "junk");
    ADD_FAILURE() << "a path with a NUL opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_IO);
    EXPECT_NE(std::string(e.what()).find("NUL byte"), std::string::npos) << e.what();
  }
}

TEST_F(IoHostile, FifoInPlaceOfIndexOrDataFileFailsAtOnce) {
  io::save_checkpoint(dir_, tensors(1), json::object());
  const std::string data = data_file();
  fs::rename(index(), dir_ + "/saved.json");
  ASSERT_EQ(::mkfifo(index().c_str(), 0644), 0);
  expect_load_fails(DT_ERR_IO, "not a regular file (a FIFO)");  // a blocking open would hang here
  fs::remove(index());
  fs::rename(dir_ + "/saved.json", index());
  fs::remove(data);
  ASSERT_EQ(::mkfifo(data.c_str(), 0644), 0);
  expect_load_fails(DT_ERR_IO, "not a regular file (a FIFO)");
  fs::remove(data);
  fs::create_directory(data);
  expect_load_fails(DT_ERR_IO, "not a regular file (a directory)");
}

TEST_F(IoHostile, AbsurdModelConfigIsRefusedBeforeAllocating) {
  dt_options* o = nullptr;
  ASSERT_EQ(dt_options_create(&o), DT_OK);
  for (auto [k, v] : {std::pair<const char*, int64_t>{"vocab_size", 16}, {"context", 8}, {"n_layer", 1}, {"n_head", 2},
                      {"d_model", 8}})
    dt_options_set_int(o, k, v);
  dt_module* m = nullptr;
  dt_optimizer* opt = nullptr;
  dt_engine* e = nullptr;
  ASSERT_EQ(dt_module_create_gpt(o, &m), DT_OK);
  ASSERT_EQ(dt_optimizer_create(m, "sgd", nullptr, &opt), DT_OK);
  ASSERT_EQ(dt_engine_create(nullptr, m, opt, nullptr, &e), DT_OK);
  const std::string stem = dir_ + "/gpt";
  ASSERT_EQ(dt_engine_save(e, stem.c_str()), DT_OK) << dt_last_error_message();
  dt_engine_destroy(e), dt_optimizer_destroy(opt), dt_module_destroy(m), dt_options_destroy(o);
  ASSERT_EQ(dt_module_create_from_checkpoint(stem.c_str(), &m), DT_OK) << dt_last_error_message();
  dt_module_destroy(m);

  const std::string path = io::checkpoint_index_path(dir_, "gpt");
  const json good = io::read_checkpoint_index(dir_, "gpt");
  json idx = good;
  idx["metadata"]["config"]["n_layer"] = 1000000000;  // beyond the accepted range
  write(path, idx.dump());
  m = nullptr;
  EXPECT_EQ(dt_module_create_from_checkpoint(stem.c_str(), &m), DT_ERR_IO);
  EXPECT_NE(std::string(dt_last_error_message()).find("n_layer = 1000000000; accepted: 1 to 4096"), std::string::npos)
      << dt_last_error_message();
  idx = good;
  idx["metadata"]["config"]["n_layer"] = 4096;  // in range, but no data file this small holds it
  idx["metadata"]["config"]["d_model"] = 65536;
  idx["metadata"]["config"]["n_head"] = 64;
  idx["metadata"]["config"]["n_kv_head"] = 64;
  idx["metadata"]["config"]["d_ff"] = 0;
  write(path, idx.dump());
  EXPECT_EQ(dt_module_create_from_checkpoint(stem.c_str(), &m), DT_ERR_IO);
  EXPECT_NE(std::string(dt_last_error_message()).find("bytes of parameters, but its data file holds"), std::string::npos)
      << dt_last_error_message();
  EXPECT_EQ(m, nullptr);
}

TEST_F(IoHostile, SparseDataFileIsNotReadWhole) {
  // "w" is 2 GiB of hole after "b": loading "b" alone must not read (or allocate) the hole.
  const uint64_t big = uint64_t(2) << 30;
  json h = {{"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
            {"w", {{"dtype", "F32"}, {"shape", {big / 4}}, {"data_offsets", {8, 8 + big}}}}};
  const std::string file = "checkpoint.000001.safetensors";
  write(dir_ + "/" + file, safetensors(h.dump(), std::string("\0\0\x80\x3f\0\0\0\x40", 8)));
  const uint64_t head = 8 + h.dump().size();
  ASSERT_EQ(::truncate((dir_ + "/" + file).c_str(), static_cast<off_t>(head + 8 + big)), 0);
  json idx = {{"format", "dtrain.checkpoint"}, {"version", 1}, {"generation", 1}, {"metadata", json::object()},
              {"weight_map", {{"b", file}, {"w", file}}},
              {"tensors", {{"b", {{"dtype", "F32"}, {"shape", {2}}, {"shard", {{"dim", -1}, {"axis", ""}}}}},
                           {"w", {{"dtype", "F32"}, {"shape", {big / 4}}, {"shard", {{"dim", -1}, {"axis", ""}}}}}}}};
  write(index(), idx.dump());
  struct rusage before;
  ::getrusage(RUSAGE_SELF, &before);
  std::vector<io::CheckpointTensor> only_b = {{"b", Tensor::zeros({2}, DType::F32), {}}};
  io::load_checkpoint(dir_, only_b);
  EXPECT_EQ(only_b[0].tensor.data<float>()[0], 1.0f);
  EXPECT_EQ(only_b[0].tensor.data<float>()[1], 2.0f);
  struct rusage after;
  ::getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 256 * 1024) << "KiB of peak growth";
}

TEST_F(IoHostile, SafetensorsThatBreakTheFormat) {
  io::save_checkpoint(dir_, tensors(1), json::object());
  const std::string path = data_file();
  const std::string good = read(path);
  uint64_t n = 0;
  for (int k = 0; k < 8; ++k) n |= uint64_t(static_cast<unsigned char>(good[k])) << (8 * k);
  const std::string header = good.substr(8, n), data = good.substr(8 + n);  // w: [0, 80), b: [80, 86)
  ASSERT_NE(header.find("[80,86]"), std::string::npos) << header;
  // Bytes after the last tensor.
  write(path, good + "junk");
  expect_load_fails(DT_ERR_IO, "4 bytes after the last tensor");
  // A gap between tensors: b moved 2 bytes on, with the file grown to match.
  std::string gap = header;
  gap.replace(gap.find("[80,86]"), 7, "[82,88]");
  write(path, safetensors(gap, data + "xx"));
  expect_load_fails(DT_ERR_IO, "leaves a gap of 2 bytes after tensor \"w\"");
  // A name twice (the JSON parser would silently keep the second).
  std::string dup = header;
  dup.insert(1, "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[80,86]},");
  write(path, safetensors(dup, data));
  expect_load_fails(DT_ERR_IO, "the key \"b\" appears twice");
  // Nesting inside the header is bounded too.
  std::string deep = header;
  deep.insert(1, "\"__metadata__\":{\"x\":" + std::string(1000, '[') + std::string(1000, ']') + "},");
  write(path, safetensors(deep, data));
  expect_load_fails(DT_ERR_IO, "nested deeper than");
}

TEST_F(IoHostile, InterruptedSavesLeaveNothingTheNextSaveKeeps) {
  io::save_checkpoint(dir_, tensors(1), json::object());
  // A writer that died mid-save: a dead pid (a child that has exited) in the temps' names.
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  const std::string dead = std::to_string(child), live = std::to_string(::getppid());
  for (const std::string& name : {"checkpoint.index.json.tmp." + dead + ".0", "checkpoint.000002.safetensors.tmp." + dead + ".1",
                                  "checkpoint.index.json.tmp." + live + ".0", "other.000002.safetensors.tmp." + dead + ".0",
                                  std::string("checkpoint.000009.safetensors"), std::string("checkpoint.notes.safetensors")})
    write(dir_ + "/" + name, "partial");
  io::save_checkpoint(dir_, tensors(2), json::object());
  std::set<std::string> left;
  for (const auto& e : fs::directory_iterator(dir_)) left.insert(e.path().filename().string());
  const std::set<std::string> expected = {"checkpoint.index.json", "checkpoint.000002.safetensors",
                                          "checkpoint.index.json.tmp." + live + ".0",  // a live writer's: kept
                                          "other.000002.safetensors.tmp." + dead + ".0",  // another stem's
                                          "checkpoint.notes.safetensors"};                // not a generation
  EXPECT_EQ(left, expected);
}

TEST_F(IoHostile, FullDiskDuringSaveIsAnIoErrorAndTheLastCheckpointLoads) {
  io::save_checkpoint(dir_, tensors(1), json{{"step", 1}});
  // A file-size limit stands in for a full disk: writes past it fail with EFBIG.
  struct sigaction ignore = {}, old = {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGXFSZ, &ignore, &old);
  struct rlimit saved;
  ::getrlimit(RLIMIT_FSIZE, &saved);
  struct rlimit small = saved;
  small.rlim_cur = 100;  // the data file's header alone is larger
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  try {
    io::save_checkpoint(dir_, tensors(2), json{{"step", 2}});
    ADD_FAILURE() << "the save succeeded past the file-size limit";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_IO) << e.what();
    EXPECT_NE(std::string(e.what()).find("write failed"), std::string::npos) << e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::sigaction(SIGXFSZ, &old, nullptr);
  auto dest = tensors(99);
  EXPECT_EQ(io::load_checkpoint(dir_, dest)["step"], 1);
  auto first = tensors(1);
  for (size_t i = 0; i < dest.size(); ++i) EXPECT_TRUE(test::same_bits(dest[i].tensor, first[i].tensor));
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

}  // namespace
}  // namespace dt
