// Every CUDA op against its CPU twin on the same inputs, for f32, bf16 and f16, within
// per-dtype tolerances (gpu_test_util.h). Skips without a usable GPU, except the checks
// that need none: every CPU op has a CUDA kernel in this build.
#include "gpu/gpu_test_util.h"
#include "kernels/cuda/cuda_ops.h"

namespace dt::test {
namespace {

using kernels::OpTable;

TEST(GpuOpTable, EveryCpuOpHasACudaKernel) {
  const OpTable &cpu = kernels::cpu_op_table(), &gpu = kernels::cuda::cuda_op_table();
  // OpTable is a name then function pointers only: compare them slot by slot.
  constexpr size_t slots = (sizeof(OpTable) - sizeof(const char*)) / sizeof(void (*)());
  using Fn = void (*)();
  Fn cpu_slots[slots], gpu_slots[slots];
  std::memcpy(cpu_slots, reinterpret_cast<const char*>(&cpu) + sizeof(const char*), sizeof cpu_slots);
  std::memcpy(gpu_slots, reinterpret_cast<const char*>(&gpu) + sizeof(const char*), sizeof gpu_slots);
  static_assert(sizeof(OpTable) == sizeof(const char*) + slots * sizeof(Fn), "OpTable: a name, then entries");
  for (size_t i = 0; i < slots; ++i) {
    EXPECT_NE(cpu_slots[i], nullptr) << "slot " << i;
    EXPECT_NE(gpu_slots[i], nullptr) << "slot " << i << " has a CPU kernel but no CUDA kernel";
  }
  EXPECT_STREQ(gpu.device_name, "cuda");
}

TEST(GpuOpTable, CudaTensorsWithoutAGpuAreUnsupported) {
  if (gpu::device_count() > 0) GTEST_SKIP() << "a GPU is present";
  try {
    Tensor::zeros({4}, DType::F32, gpu0());
    ADD_FAILURE() << "expected UNSUPPORTED";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DT_ERR_UNSUPPORTED) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
}

class GpuOps : public ::testing::TestWithParam<DType> {
 protected:
  DType dt() const { return GetParam(); }
  Tensor rnd(const Shape& s, const char* name, float std = 1.0f) { return randn(s, dt(), 7, name, std); }
};

TEST_P(GpuOps, MatmulEveryTransposeAndBatchLayout) {
  DT_REQUIRE_GPU();
  struct Case {
    Shape a, b, c;
    bool ta, tb;
  };
  for (const Case& k : {Case{{37, 65}, {65, 29}, {37, 29}, false, false}, Case{{65, 37}, {29, 65}, {37, 29}, true, true},
                        Case{{2, 3, 17, 33}, {33, 40}, {2, 3, 17, 40}, false, false},
                        Case{{3, 33, 17}, {40, 33}, {3, 17, 40}, true, true},
                        Case{{4, 17, 33}, {4, 33, 9}, {4, 17, 9}, false, false},
                        Case{{4, 33, 17}, {4, 9, 33}, {4, 17, 9}, true, true}}) {
    Tensor a = rnd(k.a, "a"), b = rnd(k.b, "b"), c = rnd(k.c, "c");
    Tensor ga = on_gpu(a), gb = on_gpu(b), gc = on_gpu(c);
    kernels::matmul(a, b, c, k.ta, k.tb, 0.5f, 1.0f);
    kernels::matmul(ga, gb, gc, k.ta, k.tb, 0.5f, 1.0f);
    expect_matches(gc, c, dt(), "matmul " + shape_str(k.a) + " x " + shape_str(k.b), 4.0);
  }
}

TEST_P(GpuOps, LayerNormAndRmsNormForwardBackward) {
  DT_REQUIRE_GPU();
  for (int64_t C : {48, 1000}) {
    Tensor x = rnd({3, 5, C}, "x"), w = rnd({C}, "w"), b = rnd({C}, "b"), dy = rnd({3, 5, C}, "dy");
    Tensor y = Tensor::zeros(x.shape(), dt()), mean = Tensor::zeros({15}, DType::F32), rstd = mean;
    rstd = Tensor::zeros({15}, DType::F32);
    Tensor gy = gpu_zeros_like(y), gmean = gpu_zeros_like(mean), grstd = gpu_zeros_like(rstd);
    Tensor gx = on_gpu(x), gw = on_gpu(w), gb = on_gpu(b), gdy = on_gpu(dy);
    kernels::layernorm_forward(x, w, b, 1e-5f, y, mean, rstd);
    kernels::layernorm_forward(gx, gw, gb, 1e-5f, gy, gmean, grstd);
    expect_matches(gy, y, dt(), "layernorm y");
    expect_matches(grstd, rstd, DType::F32, "layernorm rstd", 10.0);
    Tensor dx = Tensor::zeros(x.shape(), dt()), dw = rnd({C}, "dw0"), db = rnd({C}, "db0");
    Tensor gdx = gpu_zeros_like(dx), gdw = on_gpu(dw), gdb = on_gpu(db);
    kernels::layernorm_backward(dy, x, w, mean, rstd, dx, dw, db);
    kernels::layernorm_backward(gdy, gx, gw, gmean, grstd, gdx, gdw, gdb);
    expect_matches(gdx, dx, dt(), "layernorm dx", 4.0);
    expect_matches(gdw, dw, dt(), "layernorm dweight (accumulated)", 4.0);
    expect_matches(gdb, db, dt(), "layernorm dbias (accumulated)", 4.0);

    kernels::rmsnorm_forward(x, w, 1e-6f, y, rstd);
    kernels::rmsnorm_forward(gx, gw, 1e-6f, gy, grstd);
    expect_matches(gy, y, dt(), "rmsnorm y");
    kernels::rmsnorm_backward(dy, x, w, rstd, dx, dw);
    kernels::rmsnorm_backward(gdy, gx, gw, grstd, gdx, gdw);
    expect_matches(gdx, dx, dt(), "rmsnorm dx", 4.0);
    expect_matches(gdw, dw, dt(), "rmsnorm dweight", 4.0);
  }
}

TEST_P(GpuOps, ActivationsForwardBackward) {
  DT_REQUIRE_GPU();
  Tensor x = rnd({1000, 3}, "x", 3.0f), u = rnd({1000, 3}, "u"), dy = rnd({1000, 3}, "dy");
  Tensor gx = on_gpu(x), gu = on_gpu(u), gdy = on_gpu(dy);
  Tensor y = Tensor::zeros(x.shape(), dt()), d1 = y, d2 = y;
  d1 = Tensor::zeros(x.shape(), dt());
  d2 = Tensor::zeros(x.shape(), dt());
  Tensor gy = gpu_zeros_like(y), g1 = gpu_zeros_like(y), g2 = gpu_zeros_like(y);
  kernels::gelu_forward(x, y), kernels::gelu_forward(gx, gy);
  expect_matches(gy, y, dt(), "gelu");
  kernels::gelu_backward(x, dy, d1), kernels::gelu_backward(gx, gdy, g1);
  expect_matches(g1, d1, dt(), "gelu dx");
  kernels::silu_forward(x, y), kernels::silu_forward(gx, gy);
  expect_matches(gy, y, dt(), "silu");
  kernels::silu_backward(x, dy, d1), kernels::silu_backward(gx, gdy, g1);
  expect_matches(g1, d1, dt(), "silu dx");
  kernels::swiglu_forward(x, u, y), kernels::swiglu_forward(gx, gu, gy);
  expect_matches(gy, y, dt(), "swiglu");
  kernels::swiglu_backward(x, u, dy, d1, d2), kernels::swiglu_backward(gx, gu, gdy, g1, g2);
  expect_matches(g1, d1, dt(), "swiglu dgate");
  expect_matches(g2, d2, dt(), "swiglu dup");  // bias + gelu fused: dbias summed over 1000 rows (accumulated onto a copied start).
  Tensor b = rnd({3}, "b"), db = rnd({3}, "db0"), gdb = on_gpu(db);
  kernels::bias_gelu_forward(x, b, y), kernels::bias_gelu_forward(gx, on_gpu(b), gy);
  expect_matches(gy, y, dt(), "bias_gelu");
  kernels::bias_gelu_backward(x, b, dy, d1, db), kernels::bias_gelu_backward(gx, on_gpu(b), gdy, g1, gdb);
  expect_matches(g1, d1, dt(), "bias_gelu dx");
  expect_matches(gdb, db, dt(), "bias_gelu dbias", 8.0);
}

TEST_P(GpuOps, SoftmaxForwardBackward) {
  DT_REQUIRE_GPU();
  for (int64_t C : {7, 1000}) {
    Tensor x = rnd({6, C}, "x", 4.0f), dy = rnd({6, C}, "dy");
    Tensor y = Tensor::zeros(x.shape(), dt()), dx = Tensor::zeros(x.shape(), dt());
    Tensor gy = gpu_zeros_like(y), gdx = gpu_zeros_like(dx);
    kernels::softmax_forward(x, y), kernels::softmax_forward(on_gpu(x), gy);
    expect_matches(gy, y, dt(), "softmax");
    kernels::softmax_backward(y, dy, dx), kernels::softmax_backward(gy, on_gpu(dy), gdx);
    expect_matches(gdx, dx, dt(), "softmax dx", 2.0);
  }
}

// Training shapes, decode over a cache (split keys), and a few queries over a longer cache.
TEST_P(GpuOps, AttentionForwardBackwardPrefillAndDecode) {
  DT_REQUIRE_GPU();
  struct Case {
    int64_t b, tq, tk, hq, hkv, d;
  };
  for (const Case& c : {Case{2, 37, 37, 4, 2, 64}, Case{1, 1, 300, 4, 4, 32}, Case{2, 3, 50, 6, 2, 48},
                        Case{1, 70, 70, 2, 1, 128}, Case{3, 1, 1000, 8, 2, 64}}) {
    std::string what = "attention b" + std::to_string(c.b) + " tq" + std::to_string(c.tq) + " tk" + std::to_string(c.tk);
    Tensor q = rnd({c.b, c.tq, c.hq, c.d}, "q"), k = rnd({c.b, c.tk, c.hkv, c.d}, "k");
    Tensor v = rnd({c.b, c.tk, c.hkv, c.d}, "v"), dout = rnd(q.shape(), "dout");
    Tensor out = Tensor::zeros(q.shape(), dt()), lse = Tensor::zeros({c.b, c.hq, c.tq}, DType::F32);
    Tensor gq = on_gpu(q), gk = on_gpu(k), gv = on_gpu(v), gout = gpu_zeros_like(out), glse = gpu_zeros_like(lse);
    kernels::attention_forward(q, k, v, 0.0f, out, lse);
    kernels::attention_forward(gq, gk, gv, 0.0f, gout, glse);
    expect_matches(gout, out, dt(), what + " out", 2.0);
    expect_matches(glse, lse, DType::F32, what + " lse", 50.0);
    Tensor dq = Tensor::zeros(q.shape(), dt()), dk = Tensor::zeros(k.shape(), dt()), dv = Tensor::zeros(v.shape(), dt());
    Tensor gdq = gpu_zeros_like(dq), gdk = gpu_zeros_like(dk), gdv = gpu_zeros_like(dv);
    kernels::attention_backward(q, k, v, out, lse, dout, 0.0f, dq, dk, dv);
    kernels::attention_backward(gq, gk, gv, gout, glse, on_gpu(dout), 0.0f, gdq, gdk, gdv);
    expect_matches(gdq, dq, dt(), what + " dq", 8.0);
    expect_matches(gdk, dk, dt(), what + " dk", 8.0);
    expect_matches(gdv, dv, dt(), what + " dv", 8.0);
  }
}

// Serving's paged attention: a decode token, a chunk crossing a tile and a whole prompt
// packed in one call, the blocks of a shuffled table written by kv_cache_write.
TEST_P(GpuOps, PagedAttentionAndKvCacheWrite) {
  DT_REQUIRE_GPU();
  const int64_t hq = 4, hkv = 2, d = 64, bs = 16, nb = 40;
  const int64_t lens[3] = {300, 100, 9}, ns[3] = {1, 70, 9};
  Tensor kc = Tensor::zeros({nb, bs, hkv, d}, dt()), vc = Tensor::zeros({nb, bs, hkv, d}, dt());
  Tensor gkc = gpu_zeros_like(kc), gvc = gpu_zeros_like(vc);
  Tensor info = Tensor::zeros({3, 3}, DType::I32), table = Tensor::zeros({3, 19}, DType::I32);
  int64_t row = 0, block = 0;
  for (int i = 0; i < 3; ++i) {
    const int64_t L = lens[i];
    Tensor k = rnd({L, hkv, d}, "k"), v = rnd({L, hkv, d}, "v"), slots = Tensor::zeros({L}, DType::I32);
    for (int64_t b = 0; b < (L + bs - 1) / bs; ++b) table.data<int32_t>()[i * 19 + b] = static_cast<int32_t>((block++ * 7) % nb);
    for (int64_t p = 0; p < L; ++p) slots.data<int32_t>()[p] = table.data<int32_t>()[i * 19 + p / bs] * static_cast<int32_t>(bs) + static_cast<int32_t>(p % bs);
    kernels::kv_cache_write(k, v, slots, kc, vc);
    kernels::kv_cache_write(on_gpu(k), on_gpu(v), on_gpu(slots), gkc, gvc);
    int32_t* in = info.data<int32_t>() + 3 * i;
    in[0] = static_cast<int32_t>(row), in[1] = static_cast<int32_t>(ns[i]), in[2] = static_cast<int32_t>(L);
    row += ns[i];
  }
  expect_matches(gkc, kc, dt(), "kv_cache_write", 0.0);
  Tensor q = rnd({row, hq, d}, "q"), out = Tensor::zeros(q.shape(), dt()), gout = gpu_zeros_like(out);
  kernels::paged_attention_forward(q, kc, vc, info, table, 0.0f, out);
  kernels::paged_attention_forward(on_gpu(q), gkc, gvc, on_gpu(info), on_gpu(table), 0.0f, gout);
  expect_matches(gout, out, dt(), "paged_attention_forward", 2.0);
}

TEST_P(GpuOps, CrossEntropyAndEmbedding) {
  DT_REQUIRE_GPU();
  const int64_t R = 9, V = 500, C = 24;
  Tensor logits = rnd({R, V}, "logits", 3.0f);
  Tensor tg = from_ints({3, 499, -100, 0, 17, 17, 250, -100, 1}, {R});
  Tensor losses = Tensor::zeros({R}, DType::F32), dl = randn({R}, DType::F32, 3, "dl");
  Tensor glosses = gpu_zeros_like(losses), glog = on_gpu(logits), gtg = on_gpu(tg);
  kernels::cross_entropy_forward(logits, tg, -100, losses);
  kernels::cross_entropy_forward(glog, gtg, -100, glosses);
  expect_matches(glosses, losses, DType::F32, "cross_entropy losses", dt() == DType::F32 ? 10.0 : 100.0);
  Tensor dlog = Tensor::zeros(logits.shape(), dt()), gdlog = gpu_zeros_like(dlog);
  kernels::cross_entropy_backward(logits, tg, dl, -100, dlog);
  kernels::cross_entropy_backward(glog, gtg, on_gpu(dl), -100, gdlog);
  expect_matches(gdlog, dlog, dt(), "cross_entropy dlogits");
  // A bad target is rejected before anything is written.
  Tensor bad = on_gpu(from_ints({3, 500, 0, 0, 0, 0, 0, 0, 0}, {R}));
  std::vector<double> before = to_f64(on_cpu(glosses));
  expect_invalid([&] { kernels::cross_entropy_forward(glog, bad, -100, glosses); }, "targets[1] is 500");
  EXPECT_EQ(to_f64(on_cpu(glosses)), before);

  Tensor table = rnd({V, C}, "table"), ids = from_ints({5, 7, -1, 499, 0, 7, 5}, {7});  // -1: no row
  Tensor out = Tensor::zeros({7, C}, dt()), gout = gpu_zeros_like(out), gtable = on_gpu(table), gids = on_gpu(ids);
  kernels::embedding_forward(ids, table, out), kernels::embedding_forward(gids, gtable, gout);
  expect_matches(gout, out, dt(), "embedding forward", 0.0);
  Tensor dout = rnd({7, C}, "dout"), dtable = rnd({V, C}, "dtable0"), gdtable = on_gpu(dtable);
  kernels::embedding_backward(ids, dout, dtable), kernels::embedding_backward(gids, on_gpu(dout), gdtable);
  expect_matches(gdtable, dtable, dt(), "embedding dtable (accumulated)");
  expect_invalid([&] { kernels::embedding_forward(on_gpu(from_ints({-1, 500}, {2})), gtable, gout); }, "holds id 500");
  expect_invalid([&] { kernels::embedding_backward(on_gpu(from_ints({1, 500}, {2})), on_gpu(dout.slice0(0, 2)), gdtable); },
                 "holds id 500");
}

// Mixture-of-experts routing, dispatch and combine (with a dropped choice), and their
// gradients, against the CPU.
TEST_P(GpuOps, MoeRouteDispatchCombine) {
  DT_REQUIRE_GPU();
  const int64_t R = 11, E = 6, C = 40;
  Tensor logits = rnd({R, E}, "logits", 2.0f), glogits = on_gpu(logits);
  for (int64_t k : {1, 2}) {
    for (auto g : {kernels::MoeGating::Softmax, kernels::MoeGating::Sigmoid}) {
      const std::string what = std::string("moe k ") + std::to_string(k) + " " + kernels::moe_gating_name(g);
      Tensor idx = Tensor::zeros({R, k}, DType::I32), gates = Tensor::zeros({R, k}, DType::F32);
      Tensor probs = Tensor::zeros({R, E}, DType::F32), lse = Tensor::zeros({R}, DType::F32);
      Tensor gidx = on_gpu(idx), ggates = on_gpu(gates), gprobs = on_gpu(probs), glse = on_gpu(lse);
      kernels::moe_route(logits, k, g, true, idx, gates, probs, lse);
      kernels::moe_route(glogits, k, g, true, gidx, ggates, gprobs, glse);
      EXPECT_EQ(to_f64(on_cpu(gidx)), to_f64(idx)) << what;
      expect_matches(ggates, gates, DType::F32, what + " gates");
      expect_matches(gprobs, probs, DType::F32, what + " probs");
      Tensor dg = randn({R, k}, DType::F32, 3, "dgates"), coef = randn({E}, DType::F32, 4, "coef", 0.1f);
      Tensor dl = Tensor::zeros({R, E}, dt()), gdl = gpu_zeros_like(dl);
      kernels::moe_route_backward(logits, idx, gates, probs, lse, dg, coef, 0.01f, g, true, dl);
      kernels::moe_route_backward(glogits, gidx, ggates, gprobs, glse, on_gpu(dg), on_gpu(coef), 0.01f, g, true, gdl);
      expect_matches(gdl, dl, dt(), what + " dlogits");
    }
  }
  // Slots of 2 choices per row, one dropped: S = 2R - 1 permuted rows.
  std::vector<int32_t> sl(static_cast<size_t>(2 * R));
  for (int64_t i = 0; i < 2 * R; ++i) sl[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7) % (2 * R));
  for (int32_t& v : sl) v = v == 2 * R - 1 ? -1 : v;
  const int64_t S = 2 * R - 1;
  Tensor slots = from_ints(sl, {R, 2}), gslots = on_gpu(slots);
  Tensor x = rnd({R, C}, "x"), w = randn({R, 2}, DType::F32, 5, "w");
  Tensor xp = Tensor::zeros({S, C}, dt()), gxp = gpu_zeros_like(xp);
  kernels::moe_permute(x, slots, xp), kernels::moe_permute(on_gpu(x), gslots, gxp);
  expect_matches(gxp, xp, dt(), "moe_permute", 0.0);
  Tensor out = Tensor::zeros({R, C}, dt()), gout = gpu_zeros_like(out);
  kernels::moe_unpermute(xp, slots, w, out), kernels::moe_unpermute(gxp, gslots, on_gpu(w), gout);
  expect_matches(gout, out, dt(), "moe_unpermute");
  Tensor dout = rnd({R, C}, "dout"), dyp = Tensor::zeros({S, C}, dt()), gdyp = gpu_zeros_like(dyp);
  Tensor dw = Tensor::zeros({R, 2}, DType::F32), gdw = on_gpu(dw);
  kernels::moe_unpermute_backward(dout, xp, slots, w, dyp, dw);
  kernels::moe_unpermute_backward(on_gpu(dout), gxp, gslots, on_gpu(w), gdyp, gdw);
  expect_matches(gdyp, dyp, dt(), "moe_unpermute dyp");
  expect_matches(gdw, dw, DType::F32, "moe_unpermute dgates", 10.0);
  Tensor dx = Tensor::zeros({R, C}, dt()), gdx = gpu_zeros_like(dx);
  kernels::moe_permute_backward(dyp, slots, dx), kernels::moe_permute_backward(gdyp, gslots, gdx);
  expect_matches(gdx, dx, dt(), "moe_permute dx");
  expect_invalid([&] { kernels::moe_permute(on_gpu(x), on_gpu(from_ints(std::vector<int32_t>(2 * R, 99), {R, 2})), gxp); },
                 "holds 99");
}

// The vocab-parallel cross-entropy ops on one padded shard: columns 0..12 hold vocabulary
// ids 40..52; targets before, in and after the shard, and ignored.
TEST_P(GpuOps, CrossEntropyShard) {
  DT_REQUIRE_GPU();
  const int64_t R = 9, Vs = 16, valid = 13, begin = 40;
  Tensor logits = rnd({R, Vs}, "logits", 3.0f), tg = from_ints({41, 3, -100, 52, 53, 40, 1000, -100, 45}, {R});
  Tensor glog = on_gpu(logits), gtg = on_gpu(tg);
  Tensor m = Tensor::zeros({R}, DType::F32), gm = gpu_zeros_like(m);
  kernels::cross_entropy_shard_max(logits, valid, m), kernels::cross_entropy_shard_max(glog, valid, gm);
  expect_matches(gm, m, DType::F32, "cross_entropy_shard_max", 0.0);
  Tensor p = Tensor::zeros({R, 2}, DType::F32), gp = gpu_zeros_like(p);
  kernels::cross_entropy_shard_forward(logits, tg, begin, valid, -100, m, p);
  kernels::cross_entropy_shard_forward(glog, gtg, begin, valid, -100, gm, gp);
  expect_matches(gp, p, DType::F32, "cross_entropy_shard_forward");
  Tensor lse = randn({R}, DType::F32, 3, "lse"), dl = randn({R}, DType::F32, 3, "dl");
  Tensor d = Tensor::zeros(logits.shape(), dt()), gd = on_gpu(rnd({R, Vs}, "garbage"));  // overwritten
  kernels::cross_entropy_shard_backward(logits, tg, begin, valid, -100, lse, dl, d);
  kernels::cross_entropy_shard_backward(glog, gtg, begin, valid, -100, on_gpu(lse), on_gpu(dl), gd);
  expect_matches(gd, d, dt(), "cross_entropy_shard_backward");
  Tensor bad = on_gpu(from_ints({41, -3, 0, 0, 0, 0, 0, 0, 0}, {R}));
  std::vector<double> before = to_f64(on_cpu(gp));
  expect_invalid([&] { kernels::cross_entropy_shard_forward(glog, bad, begin, valid, -100, gm, gp); }, "targets[1] is -3");
  EXPECT_EQ(to_f64(on_cpu(gp)), before);
}

TEST_P(GpuOps, OptimizersWithMixedPrecisionCopies) {
  DT_REQUIRE_GPU();
  const int64_t n = 10007;
  Tensor p = randn({n}, DType::F32, 1, "p"), m = randn({n}, DType::F32, 2, "m", 0.1f);
  Tensor v = randn({n}, DType::F32, 3, "v", 0.1f), g = rnd({n}, "g");
  kernels::fill(v, 0.5f);
  Tensor gp = on_gpu(p), gm = on_gpu(m), gv = on_gpu(v), copy = Tensor::zeros({n}, dt()), gcopy = gpu_zeros_like(copy);
  kernels::AdamWParams ap;
  ap.lr = 1e-2f, ap.weight_decay = 0.1f, ap.step = 3, ap.grad_scale = 0.5f;
  kernels::adamw_update(p, g, m, v, ap, copy), kernels::adamw_update(gp, on_gpu(g), gm, gv, ap, gcopy);
  expect_matches(gp, p, DType::F32, "adamw param");
  expect_matches(gv, v, DType::F32, "adamw v");
  expect_matches(gcopy, copy, dt(), "adamw param copy");
  kernels::SgdParams sp;
  sp.lr = 0.1f, sp.momentum = 0.9f, sp.nesterov = true, sp.weight_decay = 0.01f;
  Tensor none;
  kernels::sgd_update(p, g, m, sp, none), kernels::sgd_update(gp, on_gpu(g), gm, sp, none);
  expect_matches(gp, p, DType::F32, "sgd param");
  expect_matches(gm, m, DType::F32, "sgd momentum");
}

TEST_P(GpuOps, ElementwiseBiasCastSumSquaresReduce) {
  DT_REQUIRE_GPU();
  Tensor a = rnd({33, 40}, "a"), b = rnd({33, 40}, "b"), bias = rnd({40}, "bias");
  Tensor ga = on_gpu(a), gb = on_gpu(b), out = Tensor::zeros(a.shape(), dt()), gout = gpu_zeros_like(out);
  kernels::add(a, b, out), kernels::add(ga, gb, gout);
  expect_matches(gout, out, dt(), "add");
  kernels::scale(out, -1.5f), kernels::scale(gout, -1.5f);
  kernels::bias_add(out, bias), kernels::bias_add(gout, on_gpu(bias));
  expect_matches(gout, out, dt(), "scale + bias_add");
  Tensor db = rnd({40}, "db"), gdb = on_gpu(db);
  kernels::bias_backward(a, db), kernels::bias_backward(ga, gdb);
  expect_matches(gdb, db, dt(), "bias_backward", 4.0);
  kernels::fill(gout, 2.5f);
  for (double x : to_f64(on_cpu(gout))) ASSERT_EQ(x, 2.5) << "fill";
  double ss = kernels::sum_squares(a), gss = kernels::sum_squares(ga);
  EXPECT_NEAR(gss, ss, 1e-9 * ss);
  for (DType to : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64}) {
    Tensor c = Tensor::zeros(a.shape(), to), gc = Tensor::zeros(a.shape(), to, gpu0());
    Tensor scaled = Tensor::zeros(a.shape(), dt());
    kernels::cast(a, scaled);
    kernels::scale(scaled, 50.0f);
    kernels::cast(scaled, c), kernels::cast(on_gpu(scaled), gc);
    EXPECT_TRUE(same_bits(on_cpu(gc), c)) << "cast " << dtype_name(dt()) << " -> " << dtype_name(to);
  }
  std::vector<Tensor> srcs = {rnd({1001}, "s0"), rnd({1001}, "s1"), rnd({1001}, "s2")};
  std::vector<Tensor> gsrcs = {on_gpu(srcs[0]), on_gpu(srcs[1]), on_gpu(srcs[2])};
  for (kernels::ReduceOp op : {kernels::ReduceOp::Sum, kernels::ReduceOp::Avg, kernels::ReduceOp::Max}) {
    const void* hp[3] = {srcs[0].raw(), srcs[1].raw(), srcs[2].raw()};
    const void* gp[3] = {gsrcs[0].raw(), gsrcs[1].raw(), gsrcs[2].raw()};
    Tensor r = Tensor::zeros({1001}, dt()), gr = gpu_zeros_like(r);
    kernels::reduce(op, dt(), Device::cpu(), hp, 3, r.raw(), 1001);
    kernels::reduce(op, dt(), gpu0(), gp, 3, gr.raw(), 1001);
    EXPECT_TRUE(same_bits(on_cpu(gr), r)) << "reduce " << kernels::reduce_op_name(op) << " folds in source order";
  }
}

TEST_P(GpuOps, MixingDevicesInOneOpIsRejected) {
  DT_REQUIRE_GPU();
  Tensor x = rnd({4, 8}, "x"), gy = gpu_zeros_like(x);
  expect_invalid([&] { kernels::gelu_forward(x, gy); }, "y");
  EXPECT_THROW(Tensor::zeros({4}, DType::F32, Device{DeviceType::CUDA, gpu::device_count()}), Error);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuOps, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtype_name(i.param)); });

}  // namespace
}  // namespace dt::test
