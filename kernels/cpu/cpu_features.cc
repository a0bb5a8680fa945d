#include "kernels/cpu/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "core/env.h"

namespace dt::kernels::cpu {
namespace {

struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned sub) {
  Regs r;
  if (__get_cpuid_max(0, nullptr) < leaf) return r;
  __cpuid_count(leaf, sub, r.a, r.b, r.c, r.d);
  return r;
}

bool bit(unsigned word, int i) { return (word >> i) & 1u; }

// XCR0: which register states the OS saves on a context switch (and so lets us use).
uint64_t xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

std::string brand() {
  if (__get_cpuid_max(0x80000000, nullptr) < 0x80000004) return "";
  char name[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    Regs r;
    __cpuid(0x80000002 + i, r.a, r.b, r.c, r.d);
    std::memcpy(name + 16 * i, &r, 16);
  }
  std::string s(name);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s.substr(s.find_first_not_of(' ') == std::string::npos ? 0 : s.find_first_not_of(' '));
}

// Linux hands out the 8 KiB AMX tile state only to a process that asks (since 5.16);
// without it the first tile instruction faults.
std::string request_amx() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr int kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0)
    return "the kernel refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM; Linux >= 5.16 needed)";
  uint64_t granted = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &granted) != 0 || !((granted >> kXfeatureXtiledata) & 1))
    return "the kernel did not grant the AMX tile state";
  return "";
#else
  return "AMX needs Linux's tile-state permission call";
#endif
}

CpuFeatures detect() {
  CpuFeatures f;
  f.cpu_name = brand();
  int cap = env_choice("DTRAIN_CPU_MAX_ISA", {"avx2", "avx512", "avx512_bf16", "amx"});
  if (cap >= 0) {
    f.cap = static_cast<IsaLevel>(cap + 1);
    f.capped = true;
  }
  Regs l1 = cpuid(1, 0), l7 = cpuid(7, 0), l7s1 = cpuid(7, 1);
  bool osxsave = bit(l1.c, 27);
  uint64_t xcr = osxsave ? xcr0() : 0;
  bool os_avx = (xcr & 0x6) == 0x6, os_avx512 = (xcr & 0xe6) == 0xe6, os_amx = (xcr & 0x60000) == 0x60000;
  bool avx2 = os_avx && bit(l1.c, 28) && bit(l1.c, 12) && bit(l7.b, 5);  // AVX, FMA, AVX2
  bool avx512 = avx2 && os_avx512 && bit(l7.b, 16) && bit(l7.b, 17) && bit(l7.b, 30) && bit(l7.b, 31);  // F DQ BW VL
  bool bf16 = avx512 && bit(l7s1.a, 5);
  bool fp16 = avx512 && bit(l7.d, 23);
  f.amx_bf16_in_cpu = bit(l7.d, 24) && bit(l7.d, 22);  // AMX-TILE, AMX-BF16
  f.avx2_fma = avx2 && f.cap >= IsaLevel::Avx2;
  f.avx512f = avx512 && f.cap >= IsaLevel::Avx512;
  f.avx512_bf16 = bf16 && f.cap >= IsaLevel::Avx512Bf16;
  f.avx512_fp16 = fp16 && f.cap >= IsaLevel::Amx;  // the same CPU generation as AMX
  if (f.amx_bf16_in_cpu && f.cap >= IsaLevel::Amx) {
    if (!os_amx) f.amx_denied = "the OS does not enable the AMX tile state (XCR0)";
    else if (!avx512) f.amx_denied = "AMX without AVX-512 is not used";
    else f.amx_denied = request_amx();
    f.amx_bf16 = f.amx_denied.empty();
  }
  return f;
}

}  // namespace

IsaLevel CpuFeatures::level() const {
  if (amx_bf16) return IsaLevel::Amx;
  if (avx512_bf16) return IsaLevel::Avx512Bf16;
  if (avx512f) return IsaLevel::Avx512;
  if (avx2_fma) return IsaLevel::Avx2;
  return IsaLevel::Scalar;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

const char* isa_level_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::Scalar: return "scalar";
    case IsaLevel::Avx2: return "avx2";
    case IsaLevel::Avx512: return "avx512";
    case IsaLevel::Avx512Bf16: return "avx512_bf16";
    case IsaLevel::Amx: return "amx";
  }
  return "?";
}

}  // namespace dt::kernels::cpu
