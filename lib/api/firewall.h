// The exception firewall: every extern "C" entry point runs its body through guard(),
// which turns any exception into a dt_status and the thread's last-error message.
#pragma once
#include <cerrno>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/cancel.h"
#include "core/error.h"
#include "core/options.h"
#include "core/tensor.h"

namespace dt::comm {
class Mesh;
}
namespace dt::nn {
class Module;
class GPT;
}
namespace dt::optim {
class Optimizer;
}
namespace dt::engine {
class TrainEngine;
class Trainer;
}
namespace dt::api {
// What keeps a module's parameter views true while an engine trains the module: the
// engine made over it (dt_engine_create sets it, its destroy clears it). Shared by the
// module handle and every view taken from it.
struct ModuleViews {
  dt::engine::Trainer* trainer = nullptr;
};
}

struct dt_options {
  dt::Options opts;
};

struct dt_tensor {
  dt::Tensor t;             // the tensor; for a mesh tensor, piece 0, so plain code keeps working
  std::string device_name;  // what dt_tensor_device returns
  // A mesh tensor: one piece per local rank of `mesh` (pieces[0] is t), and the mesh it
  // belongs to, kept alive so that the destroy order does not matter. Empty otherwise.
  std::vector<dt::Tensor> pieces;
  std::shared_ptr<dt::comm::Mesh> mesh;
  // Whatever else the tensor views into and must keep alive (a module, for a parameter view).
  std::shared_ptr<void> owner;
  // A parameter view: the module's views and the parameter's name (view_read, view_written).
  std::shared_ptr<dt::api::ModuleViews> views;
  std::string param;
};

struct dt_mesh {
  std::shared_ptr<dt::comm::Mesh> mesh;  // shared with the mesh tensors made on it
};

// Children hold their parents by shared_ptr, so handles can be destroyed in any order.
struct dt_module {
  dt_module() = default;
  dt_module(std::shared_ptr<dt::nn::Module> m, dt::nn::GPT* g) : module(std::move(m)), gpt(g) {}
  std::shared_ptr<dt::nn::Module> module;
  dt::nn::GPT* gpt = nullptr;  // the same object when the module is a GPT; null for an MLP
  // MLP and sequential modules, driven by the host (dt_module_forward / _backward): set up
  // on first use, holding the saved activations of the one batch in flight.
  std::function<const dt::Tensor&(const dt::Tensor&)> forward;
  std::function<void(const dt::Tensor&, dt::Tensor*)> backward;
  std::shared_ptr<dt::api::ModuleViews> views = std::make_shared<dt::api::ModuleViews>();
};

struct dt_optimizer {
  std::shared_ptr<dt::nn::Module> module;  // the module whose parameters it updates
  std::shared_ptr<dt::optim::Optimizer> opt;
};

namespace dt::api {

void set_last_error(dt_status status, const std::string& message);

// Parameter views of a module an engine trains (api_engine.cc): before a view's values are
// read, the engine makes the module's whole values current (a layout that splits the
// model gathers them); a write is recorded, and the engine carries it into its parts and
// the optimizer's master before its next call. strict: refuse a write the engine cannot
// carry (UNSUPPORTED under ZeRO), before it happens; a raw pointer's possible write is
// recorded where it can be. Nothing for other tensors.
void view_read(const dt_tensor* t);
void view_written(const dt_tensor* t, bool strict);

// The flag of a dt_cancel handle, shared (null for NULL); api_cancel.cc.
std::shared_ptr<CancelFlag> cancel_flag_of(dt_cancel* cancel);

template <class F> dt_status guard(const char* fn, F&& body) noexcept {
  try {
    body();
    return DT_OK;
  } catch (const Error& e) {
    // Messages that already name the entry point (OptionReader's do) are not prefixed twice.
    const std::string prefix = std::string(fn) + ": ", what = e.what();
    set_last_error(e.code(), what.compare(0, prefix.size(), prefix) == 0 ? what : prefix + what);
    return e.code();
  } catch (const std::bad_alloc&) {
    set_last_error(DT_ERR_OUT_OF_MEMORY, std::string(fn) + ": out of host memory");
    return DT_ERR_OUT_OF_MEMORY;
  } catch (const std::system_error& e) {
    // A thread the system refused (EAGAIN: no memory for its stack under a limit, or too
    // many threads) is the process running out of resources, not a bug in libdtrain.
    const int c = e.code().value();
    const bool resources = e.code().category() == std::generic_category() || e.code().category() == std::system_category();
    if (resources && (c == EAGAIN || c == ENOMEM)) {
      set_last_error(DT_ERR_OUT_OF_MEMORY, std::string(fn) + ": out of resources: " + e.what() +
                                               " (the system refused a thread or memory under this process's limits: "
                                               "ulimit -v, -u or a cgroup); lower the ranks (dp x pp x tp) or threads");
      return DT_ERR_OUT_OF_MEMORY;
    }
    set_last_error(DT_ERR_INTERNAL, std::string(fn) + ": internal error: " + e.what());
    return DT_ERR_INTERNAL;
  } catch (const std::exception& e) {
    set_last_error(DT_ERR_INTERNAL, std::string(fn) + ": internal error: " + e.what());
    return DT_ERR_INTERNAL;
  } catch (...) {
    set_last_error(DT_ERR_INTERNAL, std::string(fn) + ": internal error: unknown exception");
    return DT_ERR_INTERNAL;
  }
}

// Throws INVALID_ARGUMENT "<name> is NULL" when p is null; returns p.
template <class T> T* need(T* p, const char* name) {
  if (!p) invalid(std::string(name) + " is NULL; a valid pointer is required");
  return p;
}

// The one dt::Tensor of a plain tensor or of a mesh tensor with a single piece. A call that
// reads or writes data on a tensor of several pieces would silently touch only one, so it
// is an error that points to dt_tensor_piece.
inline const Tensor& single_piece(const dt_tensor* t, const char* name) {
  need(t, name);
  if (t->pieces.size() > 1)
    invalid(std::string(name) + " is a mesh tensor of " + std::to_string(t->pieces.size()) +
            " pieces (one per local rank); take one with dt_tensor_piece");
  return t->t;
}
inline Tensor& single_piece(dt_tensor* t, const char* name) {
  return const_cast<Tensor&>(single_piece(static_cast<const dt_tensor*>(t), name));
}

inline const Options* opts_of(const dt_options* o) { return o ? &o->opts : nullptr; }

// The (dtype, shape, ndim) arguments of the tensor-making calls, checked once: the dtype
// named "dtype", 0 to DT_MAX_DIMS dims, each >= 1, counts within 63 bits. out_numel (may
// be null) gets the element count.
inline Shape shape_arg(dt_dtype dtype, const int64_t* shape, int32_t ndim, DType* out_dtype,
                       int64_t* out_numel = nullptr) {
  *out_dtype = dtype_from_raw(dtype, "dtype");
  DT_CHECK(ndim >= 0 && ndim <= DT_MAX_DIMS,
           "ndim = " + std::to_string(ndim) + "; accepted: 0 to " + std::to_string(DT_MAX_DIMS));
  if (ndim > 0) need(shape, "shape");
  Shape s(shape, shape + ndim);
  const int64_t n = checked_numel(s, *out_dtype, "shape");
  if (out_numel) *out_numel = n;
  return s;
}

// The C API's one way to return text: NUL-terminated into buf, truncated to `capacity`;
// *needed gets the full length including the NUL; buf may be NULL when capacity is 0.
void write_text(const std::string& text, char* buf, size_t capacity, size_t* needed);

// Splits a checkpoint path stem "dir/name" into the directory and the file stem
// ("name.index.json", ...); the error names `arg`.
std::pair<std::string, std::string> split_stem(const char* path_stem, const char* arg = "path_stem");

// Bytes of physical memory (HUGE_VAL when the system does not say).
double physical_memory_bytes();

// Throws DT_ERR_OUT_OF_MEMORY, with the figures, when `bytes` (what `what` would allocate)
// exceed this machine's physical memory: such a request is refused before it allocates,
// not left to the allocator (or to the OOM killer once overcommitted pages are touched).
void refuse_beyond_memory(const std::string& fn, const std::string& what, double bytes);

// dt_module_save_hf's and dt_engine_save_hf's one writer: `options` read and checked under
// the name `fn`, then io::hf_save.
void save_hf(nn::GPT& model, const char* dir, const dt_options* options, const char* fn);

}  // namespace dt::api
