// check_args under MPI: before moving data, members all-gather their arguments (one
// 24-byte record each, plus the count matrix for all-to-all) and compare them. Every member
// sees the same records, so all of them fail alike with DT_ERR_COMM naming the first member
// that differs, where mismatched MPI collectives would truncate, hang or corrupt memory.
// It costs one small all-gather per collective; check_args = false skips it.
#include <cstring>

#include "comm/mpi/mpi_comm.h"

namespace dt::comm::mpi {
namespace {

struct Args {
  int32_t kind, dtype, op, root;
  int64_t count;
};

Args args_at(const Op& op, int member) {  // op.check = [mine, member 0, ..., member n-1]
  Args a;
  std::memcpy(&a, op.check.data() + sizeof(Args) * (member + 1), sizeof(Args));
  return a;
}

std::string differs(const Args& b, const Args& a) {
  auto kind = [](int32_t k) { return coll_name(static_cast<CollKind>(k)); };
  auto dtype = [](int32_t t) { return dtype_name(static_cast<DType>(t)); };
  auto op = [](int32_t o) { return kernels::reduce_op_name(static_cast<ReduceOp>(o)); };
  if (b.kind != a.kind) return std::string("op ") + kind(b.kind) + " vs " + kind(a.kind);
  if (b.dtype != a.dtype) return std::string("dtype ") + dtype(b.dtype) + " vs " + dtype(a.dtype);
  if (b.count != a.count) return "count " + std::to_string(b.count) + " vs " + std::to_string(a.count);
  if (b.root != a.root) return "root " + std::to_string(b.root) + " vs " + std::to_string(a.root);
  if (b.op != a.op) return std::string("reduce op ") + op(b.op) + " vs " + op(a.op);
  return "";
}

void post_gather(Channel& c, Op& o, size_t record) {
  MPI_Request q;
  c.check(MPI_Iallgather(o.check.data(), static_cast<int>(record), MPI_BYTE, o.check.data() + record,
                         static_cast<int>(record), MPI_BYTE, c.comm(), &q),
          o.what);
  o.reqs.push_back(q);
}

}  // namespace

void add_argument_check(Channel& ch, const CollRequest& r, Op& op) {
  const int n = ch.size();
  Args mine{static_cast<int32_t>(r.kind), static_cast<int32_t>(r.dtype), static_cast<int32_t>(r.op), r.root, r.count};
  op.check.assign(sizeof(Args) * (n + 1), 0);
  std::memcpy(op.check.data(), &mine, sizeof(Args));
  op.steps.push_back([](Channel& c, Op& o) { post_gather(c, o, sizeof(Args)); });
  op.steps.push_back([n](Channel& c, Op& o) {
    const Args first = args_at(o, 0);
    for (int m = 1; m < n; ++m) {
      std::string diff = differs(args_at(o, m), first);
      if (!diff.empty())
        fail(DT_ERR_COMM, c.where(o.what) + ": rank " + std::to_string(c.global_rank(m)) + " called with " + diff +
                              " of rank " + std::to_string(c.global_rank(0)) + " (mismatched collectives)");
    }
  });
  if (r.kind != CollKind::AllToAll) return;
  // All-to-all: every member gathers every member's send and recv counts, so all of them
  // check the whole matrix (and agree on failing).
  std::vector<int64_t> counts(r.send_counts);
  counts.insert(counts.end(), r.recv_counts.begin(), r.recv_counts.end());
  op.steps.push_back([n, counts](Channel& c, Op& o) {
    const size_t record = counts.size() * sizeof(int64_t);
    o.check.assign(record * (n + 1), 0);
    std::memcpy(o.check.data(), counts.data(), record);
    post_gather(c, o, record);
  });
  op.steps.push_back([n](Channel& c, Op& o) {
    auto at = [&](int member, int i) {  // member's [send counts..., recv counts...][i]
      int64_t v;
      std::memcpy(&v, o.check.data() + (static_cast<size_t>(member + 1) * 2 * n + i) * sizeof(int64_t), sizeof v);
      return v;
    };
    for (int p = 0; p < n; ++p)
      for (int q = 0; q < n; ++q)
        if (at(p, q) != at(q, n + p))
          fail(DT_ERR_COMM, c.where(o.what) + ": rank " + std::to_string(c.global_rank(p)) + " sends " +
                                std::to_string(at(p, q)) + " elements to rank " + std::to_string(c.global_rank(q)) +
                                ", which expects " + std::to_string(at(q, n + p)));
  });
}

}  // namespace dt::comm::mpi
