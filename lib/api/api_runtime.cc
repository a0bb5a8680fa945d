// Process-wide settings and shutdown, the memory ledger and device queries.
#include <cstring>

#include "core/allocator.h"
#include "core/device.h"
#include "core/thread_pool.h"
#include "kernels/cpu/gemm_path.h"
#include "lib/api/firewall.h"
#if defined(DTRAIN_HAVE_MPI)
#include "comm/mpi/mpi_world.h"
#endif

using dt::api::guard;
using dt::api::need;

namespace {

// The device a memory query names: well formed, and present in this build and machine
// (a query for a GPU that is not here is UNSUPPORTED, as creating a tensor there would be,
// rather than an empty ledger that reads like an idle device).
dt::Device ledger_device(const char* device) {
  const dt::Device d = dt::parse_device(device, "device");
  dt::require_available(d);
  return d;
}

}  // namespace

extern "C" {

dt_status dt_configure(const dt_options* options) {
  return guard("dt_configure", [&] {
    dt::OptionReader r(dt::api::opts_of(options), "dt_configure",
                       {"threads", "memory_limit_bytes", "pool_cache_bytes"});
    dt::AllocatorSettings s = dt::allocator_settings();
    int64_t threads = r.get_int("threads", dt::kernel_threads());
    s.memory_limit_bytes = r.get_int("memory_limit_bytes", s.memory_limit_bytes);
    s.pool_cache_bytes = r.get_int("pool_cache_bytes", s.pool_cache_bytes);
    DT_CHECK(threads >= 1 && threads <= 1024,
             "dt_configure: option \"threads\" = " + std::to_string(threads) + "; accepted: 1 to 1024");
    DT_CHECK(s.memory_limit_bytes >= 0, "dt_configure: option \"memory_limit_bytes\" = " +
                                            std::to_string(s.memory_limit_bytes) + "; accepted: >= 0 (0 = no cap)");
    DT_CHECK(s.pool_cache_bytes >= 0, "dt_configure: option \"pool_cache_bytes\" = " +
                                          std::to_string(s.pool_cache_bytes) + "; accepted: >= 0");
    dt::allocator_configure(s);
    dt::set_kernel_threads(static_cast<int>(threads));
  });
}

dt_status dt_shutdown(void) {
  return guard("dt_shutdown", [&] {
#if defined(DTRAIN_HAVE_MPI)
    dt::comm::mpi::shutdown_mpi();
#endif
  });
}

dt_status dt_memory_stats(const char* device, dt_mem_tag tag, int64_t* current_bytes, int64_t* peak_bytes) {
  return guard("dt_memory_stats", [&] {
    dt::Ledger& l = dt::ledger_for(ledger_device(device));
    int64_t cur = l.current(tag), peak = l.peak(tag);
    if (current_bytes) *current_bytes = cur;
    if (peak_bytes) *peak_bytes = peak;
  });
}

dt_status dt_memory_rank_stats(const char* device, int32_t rank, dt_mem_tag tag, int64_t* current_bytes,
                               int64_t* peak_bytes) {
  return guard("dt_memory_rank_stats", [&] {
    dt::Device d = ledger_device(device);
    if (rank < 0 || rank >= dt::kMaxRankLedgers)
      dt::invalid("rank = " + std::to_string(rank) + "; accepted: 0 to " + std::to_string(dt::kMaxRankLedgers - 1));
    const dt::Ledger* l = dt::rank_ledger(d, rank);
    dt::Ledger none;
    int64_t cur = (l ? *l : none).current(tag), peak = (l ? *l : none).peak(tag);
    if (current_bytes) *current_bytes = cur;
    if (peak_bytes) *peak_bytes = peak;
  });
}

dt_status dt_memory_reset_peak(const char* device) {
  return guard("dt_memory_reset_peak", [&] { dt::reset_peaks(ledger_device(device)); });
}

dt_status dt_memory_report_json(const char* device, char* buf, size_t capacity, size_t* needed) {
  return guard("dt_memory_report_json", [&] {
    dt::Device d = ledger_device(device);
    std::string j = dt::ledger_for(d).json(d.str(), dt::pool_cached_bytes(d));
    std::string ranks = ",\"ranks\":[";
    bool first = true;
    for (int r : dt::ranks_with_ledger(d)) {
      ranks += std::string(first ? "" : ",") + "{\"rank\":" + std::to_string(r) +
               ",\"tags\":" + dt::rank_ledger(d, r)->tags_json() + "}";
      first = false;
    }
    j.insert(j.size() - 1, ranks + "]");
    dt::api::write_text(j, buf, capacity, needed);
  });
}

dt_status dt_device_count(const char* kind, int32_t* out) {
  return guard("dt_device_count", [&] {
    need(out, "out");
    need(kind, "kind");
    if (std::strcmp(kind, "cpu") == 0) *out = dt::device_count(dt::DeviceType::CPU);
    else if (std::strcmp(kind, "cuda") == 0) *out = dt::device_count(dt::DeviceType::CUDA);
    else dt::invalid(std::string("kind: unknown device kind \"") + kind + "\"; accepted: \"cpu\", \"cuda\"");
  });
}

dt_status dt_runtime_info_json(char* buf, size_t capacity, size_t* needed) {
  return guard("dt_runtime_info_json", [&] {
    std::string j = std::string("{\"version\":\"") + dt_version() + "\",\"cpu\":" +
                    dt::kernels::cpu::cpu_runtime_json() +
                    ",\"cuda_devices\":" + std::to_string(dt::device_count(dt::DeviceType::CUDA)) + "}";
    dt::api::write_text(j, buf, capacity, needed);
  });
}

}  // extern "C"
