// The exception firewall: every extern "C" entry point runs its body through guard(),
// which turns any exception into a dt_status and the thread's last-error message.
#pragma once
#include <string>

#include "core/error.h"
#include "core/options.h"
#include "core/tensor.h"

struct dt_options {
  dt::Options opts;
};

struct dt_tensor {
  dt::Tensor t;
  std::string device_name;  // what dt_tensor_device returns
};

namespace dt::api {

void set_last_error(dt_status status, const std::string& message);

template <class F> dt_status guard(const char* fn, F&& body) noexcept {
  try {
    body();
    return DT_OK;
  } catch (const Error& e) {
    set_last_error(e.code(), std::string(fn) + ": " + e.what());
    return e.code();
  } catch (const std::bad_alloc&) {
    set_last_error(DT_ERR_OUT_OF_MEMORY, std::string(fn) + ": out of host memory");
    return DT_ERR_OUT_OF_MEMORY;
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

inline const Options* opts_of(const dt_options* o) { return o ? &o->opts : nullptr; }

}  // namespace dt::api
