// A device names where memory lives: the host CPU or one CUDA GPU.
#pragma once
#include <string>

namespace dt {

enum class DeviceType { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;
  static Device cpu() { return Device{}; }
};

// Parses "cpu" or "cuda:N". Throws INVALID_ARGUMENT naming `arg_name` for anything else.
Device parse_device(const char* text, const char* arg_name);

// Number of usable devices of a kind: 1 for CPU; CUDA devices when built with CUDA and a
// driver answers (any CUDA error means none).
int device_count(DeviceType type);

// Throws UNSUPPORTED when `d` cannot be used by this build or machine.
void require_available(const Device& d);

}  // namespace dt
