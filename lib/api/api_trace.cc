// dt_trace_*: the timeline of compute and communication per rank, as Chrome trace JSON.
#include <fstream>

#include "core/trace.h"
#include "lib/api/firewall.h"

using dt::api::guard;
using dt::api::need;

extern "C" {

dt_status dt_trace_enable(int32_t on) {
  return guard("dt_trace_enable", [&] {
    DT_CHECK(on == 0 || on == 1, "on = " + std::to_string(on) + "; accepted: 0 (stop) or 1 (start, clearing)");
    dt::trace_enable(on == 1);
  });
}

dt_status dt_trace_write(const char* path) {
  return guard("dt_trace_write", [&] {
    const std::string p = need(path, "path");
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f << dt::trace_json();
    f.close();
    if (!f) dt::fail(DT_ERR_IO, "path = \"" + p + "\": cannot write the trace there");
  });
}

}  // extern "C"
