// Helpers shared by the collective tests on the local backend: meshes, deterministic
// per-rank inputs of any dtype, an independent reference reduction and bitwise comparison.
//
// The reference folds in rank order in f32 (int64 for integers) and rounds once, which is
// the contract of kernels::reduce, so results are compared bit for bit, never with a
// tolerance: a collective that reorders its fold, or rounds twice, fails here.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "comm/mesh.h"
#include "core/error.h"

namespace dt::comm::test {

using Bytes = std::vector<unsigned char>;

inline const DType kDTypes[] = {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64};
inline const ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod};

// A world of n ranks on the dp axis (its communicator is also reachable as "world").
inline std::shared_ptr<Mesh> world_mesh(int n, double timeout_s = 60) {
  BackendOptions o;
  o.timeout_s = timeout_s;
  return Mesh::create("local", {n, 1, 1, 1, 1}, o);
}

inline std::shared_ptr<Mesh> axes_mesh(const Coords& axes, double timeout_s = 60) {
  BackendOptions o;
  o.timeout_s = timeout_s;
  return Mesh::create("local", axes, o);
}

inline int64_t esize(DType t) { return static_cast<int64_t>(dtype_size(t)); }

// Calls f with a value of the storage type of t (float, bf16, f16, int32_t, int64_t).
template <class F> auto with_type(DType t, F&& f) {
  switch (t) {
    case DType::BF16: return f(bf16{});
    case DType::F16: return f(f16{});
    case DType::I32: return f(int32_t{});
    case DType::I64: return f(int64_t{});
    default: return f(float{});
  }
}

inline uint64_t mix(uint64_t x) {  // splitmix64: cheap, so large inputs stay fast under TSan
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// count elements for `rank`. Floats: [-1.5, 1.5] with a full mantissa (so the fold order
// shows in the low bits, and an 8-rank product stays far from overflow). Integers: small
// values, so sum and product stay exact; i64 adds multiples of 2^33 (except for products)
// to exercise the upper half.
inline Bytes make_input(DType t, int64_t count, int rank, uint64_t seed, ReduceOp op = ReduceOp::Sum) {
  Bytes b(static_cast<size_t>(count * esize(t)));
  with_type(t, [&](auto tag) {
    using T = decltype(tag);
    T* p = reinterpret_cast<T*>(b.data());
    for (int64_t i = 0; i < count; ++i) {
      uint64_t h = mix(seed * 1000003u + static_cast<uint64_t>(rank) * 7919u + mix(static_cast<uint64_t>(i)));
      if constexpr (std::is_integral_v<T>) {
        int64_t v = static_cast<int64_t>(h % 7) - 3;
        if (std::is_same_v<T, int64_t> && op != ReduceOp::Prod) v += static_cast<int64_t>((h >> 20) % 5) << 33;
        p[i] = static_cast<T>(v);
      } else {
        p[i] = from_f32<T>(static_cast<float>(static_cast<int64_t>(h % 3000001) - 1500000) * 1e-6f);
      }
    }
    return 0;
  });
  return b;
}

// Elements [lo, hi) of op over in[0..n) (rank order), as the collectives must produce them.
inline Bytes reference(DType t, ReduceOp op, const std::vector<Bytes>& in, int64_t lo, int64_t hi) {
  Bytes out(static_cast<size_t>((hi - lo) * esize(t)));
  with_type(t, [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<std::is_integral_v<T>, int64_t, float>;
    auto ld = [&](size_t r, int64_t i) -> A {
      T v;
      std::memcpy(&v, in[r].data() + i * sizeof(T), sizeof(T));
      if constexpr (std::is_integral_v<T>) return v;
      else return to_f32(v);
    };
    for (int64_t i = lo; i < hi; ++i) {
      A acc = ld(0, i);
      for (size_t r = 1; r < in.size(); ++r) {
        A x = ld(r, i);
        switch (op) {
          case ReduceOp::Sum:
          case ReduceOp::Avg: acc = acc + x; break;
          case ReduceOp::Prod: acc = acc * x; break;
          case ReduceOp::Max: acc = x > acc ? x : acc; break;
          case ReduceOp::Min: acc = x < acc ? x : acc; break;
        }
      }
      if (op == ReduceOp::Avg) acc = acc / static_cast<A>(in.size());
      T v;
      if constexpr (std::is_integral_v<T>) v = static_cast<T>(acc);
      else v = from_f32<T>(acc);
      std::memcpy(out.data() + (i - lo) * sizeof(T), &v, sizeof(T));
    }
    return 0;
  });
  return out;
}

inline std::string elem_str(DType t, const Bytes& b, int64_t i) {
  return with_type(t, [&](auto tag) {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, b.data() + i * sizeof(T), sizeof(T));
    std::ostringstream s;
    if constexpr (std::is_integral_v<T>) s << v;
    else s.precision(9), s << to_f32(v);
    return s.str();
  });
}

// "" when got and want are bitwise identical; otherwise where they first differ.
inline std::string bitwise_diff(DType t, const Bytes& got, const Bytes& want) {
  if (got.size() != want.size())
    return "size " + std::to_string(got.size()) + " bytes, want " + std::to_string(want.size());
  if (got.empty() || std::memcmp(got.data(), want.data(), got.size()) == 0) return "";
  const int64_t n = static_cast<int64_t>(got.size()) / esize(t);
  for (int64_t i = 0; i < n; ++i)
    if (std::memcmp(got.data() + i * esize(t), want.data() + i * esize(t), static_cast<size_t>(esize(t))) != 0)
      return "element " + std::to_string(i) + " of " + std::to_string(n) + ": got " + elem_str(t, got, i) +
             ", want " + elem_str(t, want, i);
  return "";
}

inline Bytes slice(const Bytes& b, DType t, int64_t lo, int64_t hi) {
  return Bytes(b.begin() + lo * esize(t), b.begin() + hi * esize(t));
}

// A pointer into b, or null for an empty buffer (the API accepts null when count is 0,
// and passing it exercises that path).
inline void* ptr(Bytes& b) { return b.empty() ? nullptr : b.data(); }

// A random pause of 0..50 us (a sleep or a yield), to shuffle the order ranks arrive in.
class Jitter {
 public:
  explicit Jitter(uint64_t seed) : gen_(seed) {}
  void operator()() {
    unsigned r = gen_() % 8;
    if (r == 0) return;
    if (r < 3) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(gen_() % 50));
  }

 private:
  std::mt19937_64 gen_;
};

// The error a failing call reports; FAILs the test when nothing was thrown.
template <class F> Error expect_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an Error";
  return Error(DT_OK, "");
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// What one rank saw: the dt::Error it threw (code DT_OK if none) and when, in seconds
// since the run started.
struct Outcome {
  dt_status code = DT_OK;
  std::string what;
  double seconds = 0;
};

// Runs fn on every rank and records each rank's outcome. run()'s own error (the first
// failing rank's) goes to *run_error when given.
template <class F> std::vector<Outcome> run_outcomes(Mesh& mesh, F&& fn, std::string* run_error = nullptr) {
  std::vector<Outcome> out(static_cast<size_t>(mesh.world_size()));
  auto t0 = std::chrono::steady_clock::now();
  try {
    mesh.run([&](int, int rank) {
      try {
        fn(rank);
      } catch (const Error& e) {
        out[rank] = {e.code(), e.what(), seconds_since(t0)};
        throw;
      }
    });
  } catch (const std::exception& e) {
    if (run_error) *run_error = e.what();
  }
  return out;
}

// A rank that never joins but stays alive until the world has failed (then returns
// normally, so it is never the error that run() reports).
inline void idle_until_failed(Mesh& mesh) {
  for (;;) {
    try {
      mesh.check_healthy();
    } catch (const Error&) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace dt::comm::test
