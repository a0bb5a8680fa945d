#include "core/device.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/gpu_runtime.h"

namespace dt {

std::string Device::str() const {
  return type == DeviceType::CPU ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Device parse_device(const char* text, const char* arg_name) {
  const std::string accepted = "; accepted: \"cpu\" or \"cuda:N\" (N >= 0)";
  if (!text) invalid(std::string(arg_name) + " is NULL" + accepted);
  if (std::strcmp(text, "cpu") == 0) return Device::cpu();
  if (std::strncmp(text, "cuda:", 5) == 0 && text[5] >= '0' && text[5] <= '9') {
    char* end = nullptr;
    long idx = std::strtol(text + 5, &end, 10);
    if (*end == '\0' && idx >= 0 && idx < 1024) return Device{DeviceType::CUDA, static_cast<int>(idx)};
  }
  invalid(std::string(arg_name) + ": unknown device \"" + text + "\"" + accepted);
}

int device_count(DeviceType type) {
  if (type == DeviceType::CPU) return 1;
  return gpu::device_count();
}

void require_available(const Device& d) {
  if (d.type == DeviceType::CPU) return;
  int n = gpu::device_count();
  if (d.index >= n)
    fail(DT_ERR_UNSUPPORTED, "device " + d.str() + " is not available: " + gpu::availability_note() +
                                 " (CUDA devices found: " + std::to_string(n) + ")");
}

}  // namespace dt
