// nn/activation_bytes against the ledger: after a forward and a backward of one micro-batch,
// the activation bytes the model and its GPTActs hold are exactly the inventory's (the
// planner's memory model stands on it; cli_test.sh plan holds the tp, pp and ZeRO layouts'
// whole peaks to it through dtrain train --report).
#include "core/allocator.h"
#include "nn/activation_bytes.h"
#include "nn/gpt.h"
#include "unit/test_util.h"

namespace dt {
namespace DT_TEST_NS {

struct Case {
  const char* name;
  bool llama, checkpoint;
  int64_t kv_heads;
  DType dtype;
  int64_t experts = 0, shared_d_ff = 0;  // a mixture of experts (top 2), a shared expert (gated)
};

TEST(ActivationBytes, EqualTheLedgerAfterAForwardAndBackward) {
  const Case cases[] = {{"gpt", false, false, 0, DType::F32},       {"gpt, recompute", false, true, 0, DType::F32},
                        {"llama gqa", true, false, 2, DType::F32},  {"llama gqa, recompute", true, true, 2, DType::F32},
                        {"gpt bf16", false, false, 0, DType::BF16}, {"llama bf16", true, false, 1, DType::BF16},
                        {"moe", true, false, 2, DType::F32, 4},    {"moe, recompute", true, true, 2, DType::F32, 4},
                        {"moe bf16, shared expert", true, false, 2, DType::BF16, 4, 24}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    nn::GPTConfig c;
    c.vocab_size = 37;
    c.context = 16;
    c.n_layer = 3;
    c.d_model = 32;
    c.n_head = 4;
    c.d_ff = 48;
    if (k.llama) c = c.llama_style();
    if (k.kv_heads) c.n_kv_head = k.kv_heads;
    c.checkpoint = k.checkpoint;
    c.n_experts = k.experts;
    c.moe_shared_d_ff = k.shared_d_ff;
    c.moe_shared_gate = k.shared_d_ff > 0;
    c.dtype = k.dtype;
    nn::GPT model(c);
    const int64_t B = 3, T = 16;
    std::vector<int32_t> v(static_cast<size_t>(B * T));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>((i * 7) % 37);
    const Tensor ids = test::from_ints(v, {B, T});
    Ledger& l = ledger_for(Device::cpu());
    const int64_t before = l.current(DT_MEM_ACTIVATION);
    nn::GPTActs acts;
    model.forward_loss(ids, ids, acts);
    model.backward(acts);
    nn::ActsLayout layout;
    layout.batch = B;
    layout.seq = T;
    const nn::ActsBytes want = nn::activation_bytes(model.config(), layout);
    EXPECT_EQ(static_cast<double>(l.current(DT_MEM_ACTIVATION) - before), want.per_micro_batch + want.shared);
    EXPECT_EQ(want.recompute_saved > 0, k.checkpoint);
  }
}

}  // namespace
}  // namespace dt
