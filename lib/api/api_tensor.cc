// dt_tensor: create/destroy, host copies, queries, random fills, and the ops a host can
// call directly.
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/gpu_runtime.h"
#include "core/tensor_copy.h"
#include "core/random_fill.h"
#include "kernels/ops.h"
#include "lib/api/firewall.h"

using dt::api::guard;
using dt::api::need;

namespace {

// Calls that touch data need a single piece; the queries below read `t` directly, since
// every piece of a mesh tensor has the same dtype, shape and device.
// A tensor these calls only read (const), or may write: a parameter view's engine hears of both.
const dt::Tensor& tensor_of(const dt_tensor* t, const char* name) {
  const dt::Tensor& x = dt::api::single_piece(t, name);
  dt::api::view_read(t);
  return x;
}
dt::Tensor& tensor_of(dt_tensor* t, const char* name) {
  dt::Tensor& x = dt::api::single_piece(t, name);
  dt::api::view_written(t, true);
  return x;
}
const dt::Tensor& info_of(const dt_tensor* t, const char* name) { return need(t, name)->t; }

void check_bytes(const dt::Tensor& t, size_t bytes) {
  DT_CHECK(bytes == t.nbytes(), "bytes = " + std::to_string(bytes) + "; required: the tensor's byte size, " +
                                    std::to_string(t.nbytes()) + " (" + dt::shape_str(t.shape()) + " of " +
                                    dt::dtype_name(t.dtype()) + ")");
}

dt_status fill(const char* fn, dt_tensor* tensor, dt::Distribution d, uint64_t seed, const char* name,
               int64_t offset, float a, float b) {
  return guard(fn, [&] { dt::fill_random(tensor_of(tensor, "tensor"), d, seed, need(name, "name"), offset, a, b); });
}

}  // namespace

extern "C" {

dt_status dt_tensor_create(dt_dtype dtype, const int64_t* shape, int32_t ndim, const char* device,
                           const dt_options* options, dt_tensor** out) {
  return guard("dt_tensor_create", [&] {
    need(out, "out");
    dt::DType dt_;
    dt::Shape s = dt::api::shape_arg(dtype, shape, ndim, &dt_);
    dt::Device d = dt::parse_device(device, "device");
    dt::OptionReader r(dt::api::opts_of(options), "dt_tensor_create", {"tag"});
    dt::MemTag tag = dt::parse_mem_tag(r.get_string("tag", "workspace").c_str(), "option \"tag\"");
    auto* h = new dt_tensor();
    try {
      h->t = dt::Tensor::zeros(s, dt_, d, tag);
    } catch (...) {
      delete h;
      throw;
    }
    h->device_name = d.str();
    *out = h;
  });
}

void dt_tensor_destroy(dt_tensor* tensor) { delete tensor; }

dt_status dt_tensor_copy_from_host(dt_tensor* tensor, const void* src, size_t bytes) {
  return guard("dt_tensor_copy_from_host", [&] {
    dt::Tensor& t = tensor_of(tensor, "tensor");
    need(src, "src");
    check_bytes(t, bytes);
    if (t.device().type == dt::DeviceType::CPU) std::memcpy(t.raw(), src, bytes);
    else dt::gpu::copy_to_device(t.device().index, t.raw(), src, bytes);
  });
}

dt_status dt_tensor_copy_to_host(const dt_tensor* tensor, void* dst, size_t bytes) {
  return guard("dt_tensor_copy_to_host", [&] {
    const dt::Tensor& t = tensor_of(tensor, "tensor");
    need(dst, "dst");
    check_bytes(t, bytes);
    if (t.device().type == dt::DeviceType::CPU) std::memcpy(dst, t.raw(), bytes);
    else dt::gpu::copy_to_host(t.device().index, dst, t.raw(), bytes);
  });
}

dt_status dt_tensor_copy(const dt_tensor* src, dt_tensor* dst) {
  return guard("dt_tensor_copy", [&] {
    const dt::Tensor& s = tensor_of(src, "src");
    dt::Tensor& d = tensor_of(dst, "dst");
    if (s.device() == d.device()) return dt::kernels::cast(s, d);
    DT_CHECK(s.numel() == d.numel(), "dst has " + std::to_string(d.numel()) + " elements; required: " +
                                         std::to_string(s.numel()) + ", as src");
    // Across devices: move the bytes to dst's device, then convert there if need be.
    if (s.dtype() == d.dtype()) return dt::copy_tensor(s, d);
    dt::Tensor moved = dt::to_device(s, d.device());
    dt::kernels::cast(moved, d);
  });
}

dt_status dt_tensor_dtype(const dt_tensor* tensor, dt_dtype* out) {
  return guard("dt_tensor_dtype", [&] {
    need(out, "out");
    *out = static_cast<dt_dtype>(info_of(tensor, "tensor").dtype());
  });
}

dt_status dt_tensor_ndim(const dt_tensor* tensor, int32_t* out) {
  return guard("dt_tensor_ndim", [&] {
    need(out, "out");
    *out = info_of(tensor, "tensor").ndim();
  });
}

dt_status dt_tensor_shape(const dt_tensor* tensor, int64_t* dims, int32_t capacity) {
  return guard("dt_tensor_shape", [&] {
    const dt::Tensor& t = info_of(tensor, "tensor");
    DT_CHECK(capacity >= t.ndim(), "capacity = " + std::to_string(capacity) + "; required: >= ndim, " +
                                       std::to_string(t.ndim()));
    if (t.ndim() > 0) need(dims, "dims");
    for (int i = 0; i < t.ndim(); ++i) dims[i] = t.shape()[i];
  });
}

dt_status dt_tensor_numel(const dt_tensor* tensor, int64_t* out) {
  return guard("dt_tensor_numel", [&] {
    need(out, "out");
    *out = info_of(tensor, "tensor").numel();
  });
}

dt_status dt_tensor_nbytes(const dt_tensor* tensor, size_t* out) {
  return guard("dt_tensor_nbytes", [&] {
    need(out, "out");
    *out = info_of(tensor, "tensor").nbytes();
  });
}

dt_status dt_tensor_device(const dt_tensor* tensor, const char** out) {
  return guard("dt_tensor_device", [&] {
    need(out, "out");
    need(tensor, "tensor");
    *out = tensor->device_name.c_str();
  });
}

dt_status dt_tensor_data(const dt_tensor* tensor, void** out) {
  return guard("dt_tensor_data", [&] {
    need(out, "out");
    *out = tensor_of(tensor, "tensor").raw();
    dt::api::view_written(tensor, false);  // the pointer may be written through
  });
}

dt_status dt_tensor_create_from_memory(dt_dtype dtype, const int64_t* shape, int32_t ndim, const char* device,
                                       void* data, dt_release_callback release, void* user, dt_tensor** out) {
  bool lent = false;  // once the storage holds the loan, its destructor ends it
  dt_status st = guard("dt_tensor_create_from_memory", [&] {
    need(out, "out");
    need(data, "data");
    dt::DType t;
    int64_t n = 0;
    dt::Shape s = dt::api::shape_arg(dtype, shape, ndim, &t, &n);
    dt::Device d = dt::parse_device(device, "device");
    dt::require_available(d);
    auto h = std::make_unique<dt_tensor>();
    std::function<void()> end;
    if (release) end = [release, user] { release(user); };
    auto storage = dt::Storage::borrow(d, data, static_cast<size_t>(n) * dt::dtype_size(t), std::move(end));
    lent = true;
    h->t = dt::Tensor::over(s, t, std::move(storage));
    h->device_name = d.str();
    *out = h.release();
  });
  if (st != DT_OK && !lent && release) release(user);
  return st;
}

dt_status dt_tensor_fill_normal(dt_tensor* tensor, uint64_t seed, const char* name, int64_t offset, float a, float b) {
  return fill("dt_tensor_fill_normal", tensor, dt::Distribution::Normal, seed, name, offset, a, b);
}

dt_status dt_tensor_fill_uniform(dt_tensor* tensor, uint64_t seed, const char* name, int64_t offset, float a,
                                 float b) {
  return fill("dt_tensor_fill_uniform", tensor, dt::Distribution::Uniform, seed, name, offset, a, b);
}

dt_status dt_matmul(const dt_tensor* a, const dt_tensor* b, int32_t trans_a, int32_t trans_b, dt_tensor* c) {
  return guard("dt_matmul", [&] {
    dt::kernels::matmul(tensor_of(a, "a"), tensor_of(b, "b"), tensor_of(c, "c"), trans_a != 0, trans_b != 0);
  });
}

dt_status dt_softmax(const dt_tensor* x, dt_tensor* y) {
  return guard("dt_softmax", [&] { dt::kernels::softmax_forward(tensor_of(x, "x"), tensor_of(y, "y")); });
}

}  // extern "C"
