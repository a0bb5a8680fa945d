// The one AMX tile configuration libdtrain uses: all 8 tiles 16 rows x 64 bytes (16 x 16
// f32, or 16 x 32 bf16). Shared by the GEMM (amx_gemm.cc) and the peak loop (peak_loops.cc).
#pragma once
#include <cstdint>

namespace dt::kernels::cpu {

// LDTILECFG's 64-byte operand, palette 1 (Intel SDM).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Loads the configuration. Written as its own asm: GCC 12's _tile_loadconfig tells the
// compiler it reads only a pointer's worth of the struct, so at -O2 the stores that fill
// the rest were dropped and LDTILECFG faulted.
__attribute__((target("amx-tile"))) inline void configure_tiles_16x64() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

}  // namespace dt::kernels::cpu
