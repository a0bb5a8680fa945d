#include "parallel/axis_strategies.h"

#include "core/error.h"
#include "parallel/cp_strategy.h"
#include "parallel/ddp_strategy.h"
#include "parallel/ep_strategy.h"
#include "parallel/pipeline_strategy.h"
#include "parallel/tp_strategy.h"
#include "parallel/zero_strategy.h"

namespace dt::parallel {
namespace {

// ZeRO-2 and -3 zero the gradients before each micro-batch's backward and take them after
// it: the other strategies must then not accumulate into them across micro-batches.
bool fresh_grads(const PartContext& c) { return c.layout.data_parallel_size() > 1 && c.options.zero >= 2; }

std::unique_ptr<Strategy> make_pipeline(const PartContext& c) {
  return std::make_unique<PipelineStrategy>(c.model, *c.layout.group(c.li, comm::kPp), c.options.pp_schedule,
                                            c.layout.virtual_stages(), c.options.micro_batches, c.layout.device(c.li),
                                            fresh_grads(c));
}

std::unique_ptr<Strategy> make_tensor_parallel(const PartContext& c) {
  return std::make_unique<TpStrategy>(c.units, *c.layout.group(c.li, comm::kTp), c.layout.device(c.li),
                                      c.layout.options().sequence_parallel, fresh_grads(c));
}

std::unique_ptr<Strategy> make_expert_parallel(const PartContext& c) {
  const Layout& l = c.layout;
  if (c.options.zero > 0) {  // ZeRO over dp, the shared gradients first over ep (ep_strategy.h)
    const std::string all = std::string(l.dp() > 1 ? "dp*" : "") + (l.pp() > 1 ? "pp*" : "") + "ep";
    return std::make_unique<EpStrategy>(c.units, *l.batch_group(c.li), *l.group(c.li, comm::kDp),
                                        *l.group(c.li, comm::kEp), *l.group(c.li, all), c.options.zero, c.opt,
                                        l.device(c.li));
  }
  return std::make_unique<EpStrategy>(c.units, *l.batch_group(c.li), l.group(c.li, comm::kDp),
                                      *l.group(c.li, l.pp() > 1 ? "pp*ep" : "ep"), l.group(c.li, comm::kPp),
                                      c.options.bucket_bytes, l.device(c.li));
}

std::unique_ptr<Strategy> make_context_parallel(const PartContext& c) {
  return std::make_unique<CpStrategy>(*c.layout.group(c.li, comm::kCp), c.layout.device(c.li));
}

// DDP or ZeRO over dp, and over cp too: cp ranks train shares of the same rows, so their
// gradients sum as dp's do (one reduction over dp x cp), while the rows split over dp alone.
std::unique_ptr<Strategy> make_data_parallel(const PartContext& c) {
  const Layout& l = c.layout;
  if (l.ep() > 1) return nullptr;  // the ep strategy reduces over dp x ep
  comm::Communicator& group = *l.group(c.li, l.cp() == 1 ? "dp" : l.dp() == 1 ? "cp" : "dp*cp");
  comm::Communicator* rows = l.group(c.li, comm::kDp);
  if (c.options.zero > 0) {
    auto z = std::make_unique<ZeroStrategy>(c.units, group, c.options.zero, c.opt);
    z->split_rows_over(rows);
    return z;
  }
  auto d = std::make_unique<DdpStrategy>(c.units, group, c.options.bucket_bytes);
  d->split_rows_over(rows);
  return d;
}

struct AxisStrategy {
  int axis;
  std::unique_ptr<Strategy> (*make)(const PartContext&);
  int also = -1;  // a second axis whose ranks the strategy also serves (made when either is > 1)
};
// In attach order (see the header).
constexpr AxisStrategy kAxisStrategies[] = {
    {comm::kPp, make_pipeline},
    {comm::kTp, make_tensor_parallel},
    {comm::kEp, make_expert_parallel},
    {comm::kCp, make_context_parallel},
    {comm::kDp, make_data_parallel, comm::kCp},
};

}  // namespace

void check_strategies(const Layout& layout, const StrategyOptions& o, const optim::Optimizer& opt) {
  DT_CHECK(!(layout.ep() > 1 && o.zero > 0 && layout.dp() == 1),
           "zero = " + std::to_string(o.zero) + " with expert parallelism (ep = " + std::to_string(layout.ep()) +
               ") and dp = 1: ZeRO shards over dp; accepted with ep > 1: zero 0 (DDP over ep), or dp >= 2");
  DT_CHECK(!(layout.pp() > 1 && layout.data_parallel_size() > 1 && o.zero == 3),
           "zero = 3 with pipeline parallelism (pp = " + std::to_string(layout.pp()) + "): ZeRO-3 gathers each unit's "
           "values around every forward and backward, which a pipeline interleaves across micro-batches; "
           "accepted with pp > 1: zero 0 (DDP), 1 or 2");
  if (layout.data_parallel_size() > 1 && layout.device(0).type == DeviceType::CUDA && o.zero > 0 && opt.offloaded())
    fail(DT_ERR_UNSUPPORTED, "zero = " + std::to_string(o.zero) + " with an offloaded optimizer on GPUs: ZeRO shards "
                             "the state over NCCL, which needs it on the GPU; use zero = 0 (DDP) with offload, or "
                             "no offload");
}

bool strategy_owns_optimizer(const Layout& layout, const StrategyOptions& o) {
  return layout.data_parallel_size() > 1 && o.zero > 0;
}

std::vector<std::unique_ptr<Strategy>> make_strategies(const PartContext& part) {
  std::vector<std::unique_ptr<Strategy>> out;
  for (const AxisStrategy& s : kAxisStrategies)
    if (part.layout.size(s.axis) > 1 || (s.also >= 0 && part.layout.size(s.also) > 1))
      if (auto made = s.make(part)) out.push_back(std::move(made));
  return out;
}

}  // namespace dt::parallel
