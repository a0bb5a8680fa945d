// Bad input through the C ABI: every case returns a status and a message that names the
// argument and what is accepted; nothing crashes, and the library keeps working after.
#include "abi_util.h"

#include <string>
#include <thread>

namespace DT_TEST_NS {

dt_tensor* tensor(dt_dtype dtype, std::initializer_list<int64_t> shape) {
  dt_tensor* t = nullptr;
  std::vector<int64_t> s(shape);
  EXPECT_EQ(dt_tensor_create(dtype, s.data(), static_cast<int32_t>(s.size()), "cpu", nullptr, &t), DT_OK)
      << dt_last_error_message();
  return t;
}

TEST(BadInput, NullPointersAndHandles) {
  int64_t shape[1] = {4};
  expect_error(dt_tensor_create(DT_F32, shape, 1, "cpu", nullptr, nullptr), DT_ERR_INVALID_ARGUMENT, {"out is NULL"});
  dt_tensor* t = nullptr;
  expect_error(dt_tensor_create(DT_F32, nullptr, 1, "cpu", nullptr, &t), DT_ERR_INVALID_ARGUMENT, {"shape is NULL"});
  EXPECT_EQ(t, nullptr);
  int64_t n = 0;
  expect_error(dt_tensor_numel(nullptr, &n), DT_ERR_INVALID_ARGUMENT, {"tensor is NULL"});
  expect_error(dt_tensor_copy_from_host(nullptr, &n, 8), DT_ERR_INVALID_ARGUMENT, {"tensor is NULL"});
  dt_tensor* ok = tensor(DT_F32, {2});
  expect_error(dt_tensor_copy_to_host(ok, nullptr, 8), DT_ERR_INVALID_ARGUMENT, {"dst is NULL"});
  expect_error(dt_matmul(ok, nullptr, 0, 0, ok), DT_ERR_INVALID_ARGUMENT, {"b is NULL"});
  expect_error(dt_options_set_int(nullptr, "k", 1), DT_ERR_INVALID_ARGUMENT, {"options is NULL"});
  expect_error(dt_memory_stats(nullptr, DT_MEM_ALL, nullptr, nullptr), DT_ERR_INVALID_ARGUMENT, {"device is NULL"});
  dt_tensor_destroy(nullptr);  // no-ops
  dt_options_destroy(nullptr);
  dt_tensor_destroy(ok);
}

TEST(BadInput, DimensionsAndOverflow) {
  dt_tensor* t = nullptr;
  int64_t neg[2] = {3, -2}, zero[2] = {0, 5}, huge[3] = {int64_t(1) << 31, int64_t(1) << 31, int64_t(1) << 31};
  int64_t bytes_overflow[2] = {int64_t(1) << 30, int64_t(1) << 31};  // 2^61 elements of 8 bytes
  expect_error(dt_tensor_create(DT_F32, neg, 2, "cpu", nullptr, &t), DT_ERR_INVALID_ARGUMENT, {"shape[1] = -2", ">= 1"});
  expect_error(dt_tensor_create(DT_F32, zero, 2, "cpu", nullptr, &t), DT_ERR_INVALID_ARGUMENT, {"shape[0] = 0"});
  expect_error(dt_tensor_create(DT_F32, huge, 3, "cpu", nullptr, &t), DT_ERR_INVALID_ARGUMENT, {"63 bits"});
  expect_error(dt_tensor_create(DT_I64, bytes_overflow, 2, "cpu", nullptr, &t), DT_ERR_INVALID_ARGUMENT,
               {"byte size", "63 bits"});
  expect_error(dt_tensor_create(DT_F32, neg, -1, "cpu", nullptr, &t), DT_ERR_INVALID_ARGUMENT, {"ndim = -1", "0 to 8"});
  expect_error(dt_tensor_create(DT_F32, neg, 9, "cpu", nullptr, &t), DT_ERR_INVALID_ARGUMENT, {"ndim = 9"});
  EXPECT_EQ(t, nullptr);
}

TEST(BadInput, UnknownDtypeAndDevice) {
  dt_tensor* t = nullptr;
  int64_t s[1] = {4};
  expect_error(dt_tensor_create(99, s, 1, "cpu", nullptr, &t), DT_ERR_INVALID_ARGUMENT, {"dtype", "DT_F32", "DT_I64"});
  expect_error(dt_tensor_create(0, s, 1, "cpu", nullptr, &t), DT_ERR_INVALID_ARGUMENT, {"unknown dtype 0"});
  expect_error(dt_tensor_create(DT_F32, s, 1, "tpu", nullptr, &t), DT_ERR_INVALID_ARGUMENT, {"\"tpu\"", "\"cpu\"", "cuda:N"});
  expect_error(dt_tensor_create(DT_F32, s, 1, "cuda:x", nullptr, &t), DT_ERR_INVALID_ARGUMENT, {"cuda:x"});
  int32_t gpus = -1;
  ASSERT_EQ(dt_device_count("cuda", &gpus), DT_OK);
  if (gpus == 0)  // a well-formed device this machine does not have
    expect_error(dt_tensor_create(DT_F32, s, 1, "cuda:0", nullptr, &t), DT_ERR_UNSUPPORTED, {"cuda:0", "not available"});
  // The memory queries too: a GPU that is not here has no ledger to read (not an empty one).
  int64_t bytes = -1;
  expect_error(dt_memory_stats("cuda:999", DT_MEM_ALL, &bytes, nullptr), DT_ERR_UNSUPPORTED, {"cuda:999", "not available"});
  expect_error(dt_memory_rank_stats("cuda:999", 0, DT_MEM_ALL, &bytes, nullptr), DT_ERR_UNSUPPORTED, {"cuda:999"});
  expect_error(dt_memory_reset_peak("cuda:999"), DT_ERR_UNSUPPORTED, {"cuda:999"});
  expect_error(dt_memory_stats("tpu", DT_MEM_ALL, &bytes, nullptr), DT_ERR_INVALID_ARGUMENT, {"\"tpu\""});
  EXPECT_EQ(bytes, -1);
  expect_error(dt_device_count("opencl", &gpus), DT_ERR_INVALID_ARGUMENT, {"\"cpu\", \"cuda\""});
  EXPECT_EQ(dt_dtype_size(77), 0u);
  EXPECT_STREQ(dt_dtype_name(77), "unknown");
}

TEST(BadInput, HostBufferOfTheWrongSize) {
  dt_tensor* t = tensor(DT_BF16, {3, 5});
  std::vector<char> buf(100);
  expect_error(dt_tensor_copy_from_host(t, buf.data(), 29), DT_ERR_INVALID_ARGUMENT,
               {"bytes = 29", "30", "[3, 5] of bf16"});
  expect_error(dt_tensor_copy_to_host(t, buf.data(), 31), DT_ERR_INVALID_ARGUMENT, {"bytes = 31"});
  EXPECT_EQ(dt_tensor_copy_to_host(t, buf.data(), 30), DT_OK);
  dt_tensor_destroy(t);
}

TEST(BadInput, UnknownOptionKeyAndWrongType) {
  dt_options* o = nullptr;
  ASSERT_EQ(dt_options_create(&o), DT_OK);
  ASSERT_EQ(dt_options_set_int(o, "colour", 3), DT_OK);
  dt_tensor* t = nullptr;
  int64_t s[1] = {4};
  expect_error(dt_tensor_create(DT_F32, s, 1, "cpu", o, &t), DT_ERR_INVALID_ARGUMENT, {"\"colour\"", "accepted", "\"tag\""});
  expect_error(dt_configure(o), DT_ERR_INVALID_ARGUMENT, {"\"colour\"", "\"threads\"", "\"memory_limit_bytes\""});
  dt_options_destroy(o);

  ASSERT_EQ(dt_options_create(&o), DT_OK);
  ASSERT_EQ(dt_options_set_int(o, "tag", 1), DT_OK);
  expect_error(dt_tensor_create(DT_F32, s, 1, "cpu", o, &t), DT_ERR_INVALID_ARGUMENT, {"\"tag\"", "a string", "got int"});
  ASSERT_EQ(dt_options_set_string(o, "tag", "weights"), DT_OK);
  expect_error(dt_tensor_create(DT_F32, s, 1, "cpu", o, &t), DT_ERR_INVALID_ARGUMENT, {"\"weights\"", "param", "kv_cache"});
  ASSERT_EQ(dt_options_set_string(o, "threads", "two"), DT_OK);
  dt_options_destroy(o);

  ASSERT_EQ(dt_options_create(&o), DT_OK);
  ASSERT_EQ(dt_options_set_string(o, "threads", "two"), DT_OK);
  expect_error(dt_configure(o), DT_ERR_INVALID_ARGUMENT, {"\"threads\"", "an int", "got string"});
  ASSERT_EQ(dt_options_set_int(o, "threads", 0), DT_OK);
  expect_error(dt_configure(o), DT_ERR_INVALID_ARGUMENT, {"\"threads\" = 0", "1 to 1024"});
  expect_error(dt_options_set_int(o, "", 1), DT_ERR_INVALID_ARGUMENT, {"key is empty"});
  expect_error(dt_options_set_int(o, nullptr, 1), DT_ERR_INVALID_ARGUMENT, {"key is NULL"});
  EXPECT_EQ(t, nullptr);
  dt_options_destroy(o);
}

TEST(BadInput, OptionGetters) {
  dt_options* o = nullptr;
  ASSERT_EQ(dt_options_create(&o), DT_OK);
  ASSERT_EQ(dt_options_set_int(o, "n", 7), DT_OK);
  ASSERT_EQ(dt_options_set_bool(o, "flag", 1), DT_OK);
  ASSERT_EQ(dt_options_set_string(o, "name", "gpt"), DT_OK);
  int64_t i = 0;
  double d = 0;
  int32_t b = 0;
  const char* s = nullptr;
  EXPECT_EQ(dt_options_get_int(o, "n", &i), DT_OK);
  EXPECT_EQ(i, 7);
  EXPECT_EQ(dt_options_get_double(o, "n", &d), DT_OK);  // ints read as doubles
  EXPECT_EQ(d, 7.0);
  EXPECT_EQ(dt_options_get_bool(o, "flag", &b), DT_OK);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(dt_options_get_string(o, "name", &s), DT_OK);
  EXPECT_STREQ(s, "gpt");
  expect_error(dt_options_get_int(o, "missing", &i), DT_ERR_NOT_FOUND, {"\"missing\""});
  expect_error(dt_options_get_int(o, "name", &i), DT_ERR_INVALID_ARGUMENT, {"\"name\"", "holds string", "not int"});
  expect_error(dt_options_get_bool(o, "n", &b), DT_ERR_INVALID_ARGUMENT, {"holds int"});
  int64_t count = 0;
  EXPECT_EQ(dt_options_count(o, &count), DT_OK);
  EXPECT_EQ(count, 3);
  dt_options_destroy(o);
}

TEST(BadInput, UnsatisfiableAllocationIsOutOfMemoryAndTheProcessStaysHealthy) {
  dt_tensor* t = nullptr;
  int64_t s[1] = {int64_t(1) << 42};  // 16 TiB of f32
  expect_error(dt_tensor_create(DT_F32, s, 1, "cpu", nullptr, &t), DT_ERR_OUT_OF_MEMORY, {"cannot allocate"});
  EXPECT_EQ(t, nullptr);
  // A cap from dt_configure turns a large-but-possible allocation into OUT_OF_MEMORY too.
  dt_options* o = nullptr;
  ASSERT_EQ(dt_options_create(&o), DT_OK);
  ASSERT_EQ(dt_options_set_int(o, "memory_limit_bytes", 1 << 20), DT_OK);
  ASSERT_EQ(dt_configure(o), DT_OK);
  int64_t big[1] = {1 << 20};  // 4 MiB
  expect_error(dt_tensor_create(DT_F32, big, 1, "cpu", nullptr, &t), DT_ERR_OUT_OF_MEMORY, {"memory_limit_bytes"});
  ASSERT_EQ(dt_options_set_int(o, "memory_limit_bytes", 0), DT_OK);
  ASSERT_EQ(dt_configure(o), DT_OK);
  dt_options_destroy(o);
  dt_tensor* ok = tensor(DT_F32, {1 << 20});
  EXPECT_NE(ok, nullptr);
  dt_tensor_destroy(ok);
}

TEST(BadInput, OpsReportShapeAndDtypeMismatches) {
  dt_tensor* a = tensor(DT_F32, {4, 5});
  dt_tensor* b = tensor(DT_F32, {6, 7});
  dt_tensor* c = tensor(DT_F32, {4, 7});
  expect_error(dt_matmul(a, b, 0, 0, c), DT_ERR_INVALID_ARGUMENT, {"dt_matmul", "inner dims"});
  dt_tensor* i = tensor(DT_I32, {4, 7});
  expect_error(dt_softmax(i, i), DT_ERR_INVALID_ARGUMENT, {"x has dtype i32", "f32, bf16, f16"});
  expect_error(dt_tensor_copy(a, c), DT_ERR_INVALID_ARGUMENT, {"dst has 28 elements", "20"});
  expect_error(dt_tensor_fill_normal(i, 1, "w", 0, 0, 1), DT_ERR_INVALID_ARGUMENT, {"i32"});
  expect_error(dt_tensor_fill_normal(a, 1, nullptr, 0, 0, 1), DT_ERR_INVALID_ARGUMENT, {"name is NULL"});
  // offset + element index must not wrap past INT64_MAX (20 elements: the last offset is 2^63 - 21).
  expect_error(dt_tensor_fill_normal(a, 1, "w", INT64_MAX, 0, 1), DT_ERR_INVALID_ARGUMENT,
               {"offset = 9223372036854775807", "accepted: 0 to 9223372036854775787"});
  expect_error(dt_tensor_fill_uniform(a, 1, "w", INT64_MAX - 19, 0, 1), DT_ERR_INVALID_ARGUMENT, {"offset"});
  EXPECT_EQ(dt_tensor_fill_uniform(a, 1, "w", INT64_MAX - 20, 0, 1), DT_OK) << dt_last_error_message();
  int64_t dims[1];
  expect_error(dt_tensor_shape(a, dims, 1), DT_ERR_INVALID_ARGUMENT, {"capacity = 1", ">= ndim, 2"});
  for (dt_tensor* t : {a, b, c, i}) dt_tensor_destroy(t);
}

TEST(Errors, StatusNamesAndThreadLocalMessages) {
  EXPECT_STREQ(dt_status_string(DT_OK), "DT_OK");
  EXPECT_STREQ(dt_status_string(DT_ERR_TIMEOUT), "DT_ERR_TIMEOUT");
  EXPECT_STREQ(dt_status_string(DT_ERR_INTERNAL), "DT_ERR_INTERNAL");
  EXPECT_STREQ(dt_status_string(1234), "DT_ERR_UNKNOWN");
  dt_tensor* t = nullptr;
  int64_t s[1] = {-1};
  ASSERT_NE(dt_tensor_create(DT_F32, s, 1, "cpu", nullptr, &t), DT_OK);
  std::string here = dt_last_error_message();
  std::string there;
  std::thread([&] { there = dt_last_error_message(); }).join();
  EXPECT_FALSE(here.empty());
  EXPECT_TRUE(there.empty());  // another thread's failure is not this thread's message
  EXPECT_STREQ(dt_version(), "0.1.0");
  EXPECT_EQ(dt_version_number(), DT_VERSION_NUMBER);
}

}  // namespace
