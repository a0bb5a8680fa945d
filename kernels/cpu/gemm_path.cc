#include "kernels/cpu/gemm_path.h"

#include <nlohmann/json.hpp>

#include <cstdio>

#include "core/env.h"
#include "kernels/cpu/amx_gemm.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/cpu_features.h"

namespace dt::kernels::cpu {
namespace {

std::string fmt_ratio(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return buf;
}

GemmChoice choose() {
  const CpuFeatures& f = cpu_features();
  GemmChoice c;
  c.f32 = std::string(blas_name()) + " sgemm (" + blas_kernel_isa() + ")";
  const bool cpu_bf16 = f.amx_bf16 || (f.avx512_bf16 && backend_has_bf16_gemm());
  const std::string native_name =
      f.amx_bf16 ? "amx-bf16 (libdtrain tiles)" : std::string("avx512-bf16 (") + blas_name() + ")";
  const int64_t forced = env_int("DTRAIN_CPU_BF16_GEMM", -1, 0, 1);
  auto widen = [&](std::string why) {
    c.bf16 = "f32 (widened)";
    c.bf16_reason = std::move(why);
    return c;
  };
  auto native = [&](std::string why) {
    c.bf16_native = true;
    c.bf16_amx = f.amx_bf16;
    c.bf16 = native_name;
    c.bf16_reason = std::move(why);
    return c;
  };
  if (!cpu_bf16) {
    std::string why = f.avx512_bf16 ? std::string("no AMX-BF16, and the ") + blas_name() + " backend has no bf16 GEMM"
                                    : "this CPU has neither AMX-BF16 nor AVX512-BF16";
    if (f.amx_bf16_in_cpu && !f.amx_denied.empty()) why = "AMX-BF16 is present but unusable: " + f.amx_denied;
    else if (f.capped) why += std::string(" under DTRAIN_CPU_MAX_ISA=") + isa_level_name(f.cap);
    return widen(why);
  }
  if (forced == 0) return widen("DTRAIN_CPU_BF16_GEMM=0");
  if (forced == 1) return native("DTRAIN_CPU_BF16_GEMM=1");
  if (f.amx_bf16) return native("AMX-BF16 tiles");
  // AVX512-BF16 alone: its rate against f32 FMA differs between CPUs, so measure both.
  c.fma = measure_peak(widest_fma_loop(), 0.002, 5);
  c.bf16_dot = measure_peak(PeakLoop::DotBf16Avx512, 0.002, 5);
  double gain = c.fma.median_gflops > 0 ? c.bf16_dot.median_gflops / c.fma.median_gflops : 0;
  std::string measured = "the bf16 dot product measured " + fmt_ratio(gain) + "x the f32 FMA rate";
  if (gain >= kNativeBf16MinGain) return native(measured);
  return widen(measured + " (native needs >= " + fmt_ratio(kNativeBf16MinGain) + "x)");
}

}  // namespace

const GemmChoice& gemm_choice() {
  static const GemmChoice choice = choose();
  return choice;
}

bool gemm_bf16_native() { return gemm_choice().bf16_native && !gemm_choice().bf16_amx; }

void native_bf16_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                      int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (gemm_choice().bf16_amx) amx_gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, nullptr, ldc);
  else gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

std::string cpu_runtime_json() {
  const CpuFeatures& f = cpu_features();
  const GemmChoice& c = gemm_choice();
  nlohmann::json j;
  j["cpu"] = f.cpu_name;
  j["isa_level"] = isa_level_name(f.level());
  j["isa"] = {{"avx2_fma", f.avx2_fma}, {"avx512", f.avx512f}, {"avx512_bf16", f.avx512_bf16},
              {"avx512_fp16", f.avx512_fp16}, {"amx_bf16", f.amx_bf16}};
  j["amx_bf16_in_cpu"] = f.amx_bf16_in_cpu;
  if (!f.amx_denied.empty()) j["amx_denied"] = f.amx_denied;
  j["max_isa_cap"] = nullptr;
  if (f.capped) j["max_isa_cap"] = isa_level_name(f.cap);
  j["blas"] = blas_name();
  nlohmann::json g = {{"f32", c.f32}, {"bf16", c.bf16}, {"bf16_native", c.bf16_native}, {"bf16_amx", c.bf16_amx},
                      {"bf16_reason", c.bf16_reason}, {"f16", c.f16}};
  if (c.fma.reps > 0) g["fma_gflops_1core"] = c.fma.median_gflops;
  if (c.bf16_dot.reps > 0) g["bf16_dot_gflops_1core"] = c.bf16_dot.median_gflops;
  j["gemm"] = g;
  return j.dump();
}

}  // namespace dt::kernels::cpu
