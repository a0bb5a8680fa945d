// Tensors, fills, ops and the ledger through the C ABI, as a host would use them.
#include "abi_util.h"

#include <cmath>
#include <string>
#include <vector>

namespace DT_TEST_NS {

TEST(Tensor, CreateCopyQueryAndConvert) {
  dt_tensor* t = nullptr;
  int64_t shape[3] = {2, 3, 4};
  OK(dt_tensor_create(DT_F32, shape, 3, "cpu", nullptr, &t));
  dt_dtype dtype = 0;
  int32_t ndim = 0;
  int64_t dims[8] = {}, numel = 0;
  size_t nbytes = 0;
  const char* dev = nullptr;
  OK(dt_tensor_dtype(t, &dtype));
  OK(dt_tensor_ndim(t, &ndim));
  OK(dt_tensor_shape(t, dims, 8));
  OK(dt_tensor_numel(t, &numel));
  OK(dt_tensor_nbytes(t, &nbytes));
  OK(dt_tensor_device(t, &dev));
  EXPECT_EQ(dtype, DT_F32);
  EXPECT_EQ(ndim, 3);
  EXPECT_EQ(dims[2], 4);
  EXPECT_EQ(numel, 24);
  EXPECT_EQ(nbytes, 96u);
  EXPECT_STREQ(dev, "cpu");
  std::vector<float> in(24), out(24, -1);
  for (int i = 0; i < 24; ++i) in[i] = 0.5f * i - 3;
  OK(dt_tensor_copy_from_host(t, in.data(), 96));
  dt_tensor* h = nullptr;
  OK(dt_tensor_create(DT_F16, shape, 3, "cpu", nullptr, &h));
  OK(dt_tensor_copy(t, h));  // f32 -> f16: these values are exact in f16
  dt_tensor* back = nullptr;
  OK(dt_tensor_create(DT_F32, shape, 3, "cpu", nullptr, &back));
  OK(dt_tensor_copy(h, back));
  OK(dt_tensor_copy_to_host(back, out.data(), 96));
  EXPECT_EQ(in, out);
  dt_tensor* ints = nullptr;
  OK(dt_tensor_create(DT_I64, shape, 3, "cpu", nullptr, &ints));
  OK(dt_tensor_copy(t, ints));  // truncation toward zero
  std::vector<int64_t> iv(24);
  OK(dt_tensor_copy_to_host(ints, iv.data(), 192));
  EXPECT_EQ(iv[1], -2);  // -2.5 -> -2
  EXPECT_EQ(iv[23], 8);  // 8.5 -> 8
  for (dt_tensor* x : {t, h, back, ints}) dt_tensor_destroy(x);
}

TEST(Tensor, ScalarAndZeroFill) {
  dt_tensor* s = nullptr;
  OK(dt_tensor_create(DT_F32, nullptr, 0, "cpu", nullptr, &s));
  float v = 1;
  OK(dt_tensor_copy_to_host(s, &v, 4));
  EXPECT_EQ(v, 0.0f);
  dt_tensor_destroy(s);
}

TEST(Tensor, FillIsShardInvariant) {
  int64_t whole_shape[1] = {1000}, shard_shape[1] = {250};
  dt_tensor *whole = nullptr, *shard = nullptr;
  OK(dt_tensor_create(DT_F32, whole_shape, 1, "cpu", nullptr, &whole));
  OK(dt_tensor_create(DT_F32, shard_shape, 1, "cpu", nullptr, &shard));
  OK(dt_tensor_fill_normal(whole, 1234, "h.0.mlp.w", 0, 0.0f, 0.02f));
  OK(dt_tensor_fill_normal(shard, 1234, "h.0.mlp.w", 500, 0.0f, 0.02f));
  std::vector<float> w(1000), s(250);
  OK(dt_tensor_copy_to_host(whole, w.data(), 4000));
  OK(dt_tensor_copy_to_host(shard, s.data(), 1000));
  for (int i = 0; i < 250; ++i) ASSERT_EQ(s[i], w[500 + i]);
  dt_tensor_destroy(whole);
  dt_tensor_destroy(shard);
}

TEST(Tensor, MatmulAndSoftmax) {
  int64_t sa[2] = {2, 3}, sb[2] = {3, 2}, sc[2] = {2, 2};
  dt_tensor *a, *b, *c, *p;
  OK(dt_tensor_create(DT_F32, sa, 2, "cpu", nullptr, &a));
  OK(dt_tensor_create(DT_F32, sb, 2, "cpu", nullptr, &b));
  OK(dt_tensor_create(DT_F32, sc, 2, "cpu", nullptr, &c));
  OK(dt_tensor_create(DT_F32, sc, 2, "cpu", nullptr, &p));
  float av[6] = {1, 2, 3, 4, 5, 6}, bv[6] = {1, 0, 0, 1, 1, 1}, cv[4];
  OK(dt_tensor_copy_from_host(a, av, 24));
  OK(dt_tensor_copy_from_host(b, bv, 24));
  OK(dt_matmul(a, b, 0, 0, c));
  OK(dt_tensor_copy_to_host(c, cv, 16));
  EXPECT_EQ(cv[0], 4);
  EXPECT_EQ(cv[1], 5);
  EXPECT_EQ(cv[2], 10);
  EXPECT_EQ(cv[3], 11);
  OK(dt_softmax(c, p));
  OK(dt_tensor_copy_to_host(p, cv, 16));
  EXPECT_NEAR(cv[0], 1 / (1 + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(cv[2] + cv[3], 1.0, 1e-6);
  for (dt_tensor* x : {a, b, c, p}) dt_tensor_destroy(x);
}

TEST(Ledger, TagsFromOptionsAndJsonReport) {
  int64_t before = 0, after = 0, peak = 0;
  OK(dt_memory_stats("cpu", DT_MEM_KV_CACHE, &before, nullptr));
  dt_options* o = nullptr;
  OK(dt_options_create(&o));
  OK(dt_options_set_string(o, "tag", "kv_cache"));
  int64_t s[2] = {16, 64};
  dt_tensor* kv = nullptr;
  OK(dt_tensor_create(DT_BF16, s, 2, "cpu", o, &kv));
  OK(dt_memory_stats("cpu", DT_MEM_KV_CACHE, &after, &peak));
  EXPECT_EQ(after - before, 16 * 64 * 2);
  EXPECT_GE(peak, after);
  size_t need = 0;
  OK(dt_memory_report_json("cpu", nullptr, 0, &need));
  std::string full(need, '\0');
  OK(dt_memory_report_json("cpu", &full[0], need, &need));
  EXPECT_NE(full.find("\"kv_cache\":{\"current\":" + std::to_string(after)), std::string::npos) << full;
  char small[8];
  OK(dt_memory_report_json("cpu", small, sizeof small, &need));  // truncated, still terminated
  EXPECT_EQ(std::string(small), "{\"devic");
  dt_tensor_destroy(kv);
  OK(dt_memory_stats("cpu", DT_MEM_KV_CACHE, &after, nullptr));
  EXPECT_EQ(after, before);
  EXPECT_EQ(dt_memory_stats("cpu", 42, &after, nullptr), DT_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(dt_mem_tag_name(DT_MEM_COMM_BUFFER), "comm_buffer");
  OK(dt_memory_reset_peak("cpu"));
  dt_options_destroy(o);
}

}  // namespace
