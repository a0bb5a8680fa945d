// Version, status names, the thread-local last error, dtype and tag names.
#include "core/dtype.h"
#include "core/ledger.h"
#include "lib/api/firewall.h"

namespace dt::api {
namespace {
thread_local std::string t_last_error;
}
void set_last_error(dt_status, const std::string& message) { t_last_error = message; }
const std::string& t_last_error_ref() { return t_last_error; }
}  // namespace dt::api

extern "C" {

const char* dt_version(void) {
#define DT_STR2(x) #x
#define DT_STR(x) DT_STR2(x)
  return DT_STR(DT_VERSION_MAJOR) "." DT_STR(DT_VERSION_MINOR) "." DT_STR(DT_VERSION_PATCH);
}

int32_t dt_version_number(void) { return DT_VERSION_NUMBER; }

const char* dt_status_string(dt_status status) {
  switch (status) {
    case DT_OK: return "DT_OK";
    case DT_ERR_INVALID_ARGUMENT: return "DT_ERR_INVALID_ARGUMENT";
    case DT_ERR_OUT_OF_MEMORY: return "DT_ERR_OUT_OF_MEMORY";
    case DT_ERR_UNSUPPORTED: return "DT_ERR_UNSUPPORTED";
    case DT_ERR_NOT_FOUND: return "DT_ERR_NOT_FOUND";
    case DT_ERR_IO: return "DT_ERR_IO";
    case DT_ERR_COMM: return "DT_ERR_COMM";
    case DT_ERR_TIMEOUT: return "DT_ERR_TIMEOUT";
    case DT_ERR_ABORTED: return "DT_ERR_ABORTED";
    case DT_ERR_INTERNAL: return "DT_ERR_INTERNAL";
    case DT_ERR_UNAVAILABLE: return "DT_ERR_UNAVAILABLE";
    case DT_ERR_CANCELLED: return "DT_ERR_CANCELLED";
  }
  return "DT_ERR_UNKNOWN";
}

const char* dt_last_error_message(void) { return dt::api::t_last_error_ref().c_str(); }

size_t dt_dtype_size(dt_dtype dtype) {
  return dt::dtype_valid(dtype) ? dt::dtype_size(static_cast<dt::DType>(dtype)) : 0;
}

const char* dt_dtype_name(dt_dtype dtype) {
  return dt::dtype_valid(dtype) ? dt::dtype_name(static_cast<dt::DType>(dtype)) : "unknown";
}

const char* dt_mem_tag_name(dt_mem_tag tag) { return dt::mem_tag_name(tag); }

}  // extern "C"
