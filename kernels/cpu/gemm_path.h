// Which GEMM path each dtype takes on this CPU, chosen once at run time from what the CPU
// has (cpu_features.h) and, where the instruction set alone cannot tell, from measured peaks
// (peak_loops.h):
//   bf16: libdtrain's AMX kernel (amx_gemm.h) when the CPU has usable AMX-BF16 tiles (one
//         core measured ~15x its f32 FMA peak here); else the backend's AVX512-BF16 kernel
//         when its dot product measures at least kNativeBf16MinGain x the FMA rate (an AMD
//         EPYC ran it at 0.5x, where a bf16 GEMM loses); else both operands widened to f32.
//   f32:  the backend's sgemm (its own widest kernel). f16: widened to f32.
// DTRAIN_CPU_BF16_GEMM=0 forces widening, =1 the native path where the CPU and backend have
// one (unset: the choice above). DTRAIN_CPU_MAX_ISA (cpu_features.h) caps both.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/cpu/peak_loops.h"

namespace dt::kernels::cpu {

constexpr double kNativeBf16MinGain = 1.25;

struct GemmChoice {
  std::string f32;          // e.g. "onednn sgemm (avx512_core_amx)"
  bool bf16_native = false; // bf16 x bf16 -> f32 without widening: one of the two below
  bool bf16_amx = false;    // on libdtrain's AMX kernel (amx_gemm.h)
  std::string bf16;         // "amx-bf16 (libdtrain tiles)", "avx512-bf16 (<backend>)" or "f32 (widened)"
  std::string bf16_reason;  // one sentence: why
  std::string f16 = "f32 (widened)";
  PeakRate fma, bf16_dot;   // measured only when the choice needed them (reps 0 otherwise)
};

// C (f32, ldc) = alpha * op(A) op(B) + beta * C on the chosen native bf16 kernel: AMX tiles
// or the backend's gemm_bf16. Single-threaded, callable from many threads at once; only
// when gemm_choice().bf16_native. Kernels made of many small products (attention) call it.
void native_bf16_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                      int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Chosen once, on first use (thread-safe); about 30 ms when it has to measure.
const GemmChoice& gemm_choice();

// The CPU, its instruction sets, the cap and the GEMM choice as one JSON object (for
// dt_runtime_info_json and `dtrain info`).
std::string cpu_runtime_json();

}  // namespace dt::kernels::cpu
