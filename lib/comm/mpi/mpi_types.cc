// dtypes and reduction ops as MPI sees them.
//
// bf16 and f16 have no MPI type: each gets its own 2-byte contiguous type, and every
// reduction on them is a user-defined op whose function folds MPI's two buffers with
// dt::kernels::reduce, in f32, rounded once per fold (a tree of n ranks rounds n-1
// times, where the local backend rounds once: results differ from local in the last bits).
// The ops are declared commutative, which lets MPI pick any algorithm; the MPI
// communicator keeps results identical on every rank by computing each element on one
// rank only (reduce-scatter, then all-gather).
#include <cstdint>

#include "comm/mpi/mpi_world.h"

namespace dt::comm::mpi {
namespace {

constexpr int kNumFloat = 3;  // f32, bf16, f16
constexpr int kNumFold = 4;   // sum, max, min, prod (avg is sum, then divide)

struct Registry {
  bool ready = false;
  MPI_Datatype bf16 = MPI_DATATYPE_NULL, f16 = MPI_DATATYPE_NULL;
  MPI_Op ops[kNumFloat][kNumFold] = {};
};

Registry& registry() {
  static Registry r;  // written once under mpi_mutex(), read-only afterwards
  return r;
}

int float_index(DType t) { return t == DType::F32 ? 0 : t == DType::BF16 ? 1 : 2; }
int fold_index(ReduceOp op) {
  switch (op) {
    case ReduceOp::Max: return 1;
    case ReduceOp::Min: return 2;
    case ReduceOp::Prod: return 3;
    default: return 0;  // Sum, Avg
  }
}

// MPI's contract: inout[i] = in[i] op inout[i]. kernels::reduce lets dst alias srcs[0].
template <DType T, ReduceOp O> void fold(void* in, void* inout, int* len, MPI_Datatype*) {
  const void* srcs[2] = {inout, in};
  try {
    kernels::reduce(O, T, Device::cpu(), srcs, 2, inout, *len);
  } catch (...) {
    // Unreachable (the arguments are valid by construction); an exception must never
    // unwind through MPI's C frames.
  }
}

template <DType T> void create_ops(MPI_Op* ops) {
  MPI_Op_create(&fold<T, ReduceOp::Sum>, 1, &ops[0]);
  MPI_Op_create(&fold<T, ReduceOp::Max>, 1, &ops[1]);
  MPI_Op_create(&fold<T, ReduceOp::Min>, 1, &ops[2]);
  MPI_Op_create(&fold<T, ReduceOp::Prod>, 1, &ops[3]);
}

}  // namespace

// Called by ensure_mpi() with mpi_mutex() held. Never freed: MPI_Finalize releases them,
// and a host-initialized MPI outlives every mesh anyway.
void init_types_locked() {
  Registry& r = registry();
  if (r.ready) return;
  MPI_Type_contiguous(2, MPI_BYTE, &r.bf16);
  MPI_Type_commit(&r.bf16);
  MPI_Type_contiguous(2, MPI_BYTE, &r.f16);
  MPI_Type_commit(&r.f16);
  create_ops<DType::F32>(r.ops[0]);
  create_ops<DType::BF16>(r.ops[1]);
  create_ops<DType::F16>(r.ops[2]);
  r.ready = true;
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    case DType::BF16: return registry().bf16;
    case DType::F16: return registry().f16;
  }
  fail(DT_ERR_INTERNAL, "mpi_type: unknown dtype");
}

MPI_Op mpi_op(DType t, ReduceOp op) {
  // Integers: MPI's ops agree with kernels::reduce (wrapping sum and product).
  // f32 sum and prod: IEEE addition and multiplication are commutative, so MPI's own ops
  // give what the user op would. f32 max and min: MPI's drop a NaN in one operand order
  // and keep it in the other; ours always propagate it, as the local backend does.
  if (!is_floating(t) || (t == DType::F32 && op != ReduceOp::Max && op != ReduceOp::Min)) {
    switch (op) {
      case ReduceOp::Max: return MPI_MAX;
      case ReduceOp::Min: return MPI_MIN;
      case ReduceOp::Prod: return MPI_PROD;
      default: return MPI_SUM;
    }
  }
  return registry().ops[float_index(t)][fold_index(op)];
}

void divide(void* buf, int64_t count, DType t, int n) {
  if (t == DType::I32) {
    auto* p = static_cast<int32_t*>(buf);
    for (int64_t i = 0; i < count; ++i) p[i] /= n;
  } else if (t == DType::I64) {
    auto* p = static_cast<int64_t*>(buf);
    for (int64_t i = 0; i < count; ++i) p[i] /= n;
  } else {
    const float fn = static_cast<float>(n);
    dispatch_float(t, [&](auto tag) {
      using T = decltype(tag);
      T* p = static_cast<T*>(buf);
      for (int64_t i = 0; i < count; ++i) p[i] = from_f32<T>(to_f32(p[i]) / fn);
    });
  }
}

}  // namespace dt::comm::mpi
