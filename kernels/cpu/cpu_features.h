// What this CPU can run, found at run time: the vector and matrix instruction sets the
// kernels and the GEMM backend choose from. The project's machines are not all the same
// CPU (an AMD EPYC with half-rate AVX512-BF16, an Intel Xeon with AMX), so nothing here is
// assumed at build time.
//
// DTRAIN_CPU_MAX_ISA caps what counts as present, to run (and test) the paths of an older
// CPU on a newer one: avx2, avx512, avx512_bf16 or amx (unset: no cap). The GEMM backend
// applies the same cap to its own kernels.
#pragma once
#include <string>

namespace dt::kernels::cpu {

// The ISA levels, each including the ones before it.
enum class IsaLevel { Scalar = 0, Avx2 = 1, Avx512 = 2, Avx512Bf16 = 3, Amx = 4 };

struct CpuFeatures {
  // Present and usable now: reported by CPUID, enabled by the OS, under the cap.
  bool avx2_fma = false;
  bool avx512f = false;      // with BW, DQ, VL (the "avx512_core" set)
  bool avx512_bf16 = false;  // vdpbf16ps: 16 lanes x 2 bf16 products into f32
  bool avx512_fp16 = false;  // f16 arithmetic
  bool amx_bf16 = false;     // tdpbf16ps on 16 x 32 bf16 tiles; the kernel granted the tile state
  // What CPUID reports before the cap and the kernel's permission (for the report).
  bool amx_bf16_in_cpu = false;
  std::string amx_denied;  // why AMX is present in the CPU but not usable; empty otherwise
  IsaLevel cap = IsaLevel::Amx;
  bool capped = false;  // DTRAIN_CPU_MAX_ISA set (and valid)
  std::string cpu_name;

  IsaLevel level() const;
};

// Detected once (thread-safe); the AMX permission request (Linux arch_prctl) is made then.
const CpuFeatures& cpu_features();

// "scalar", "avx2", "avx512", "avx512_bf16", "amx".
const char* isa_level_name(IsaLevel level);

}  // namespace dt::kernels::cpu
