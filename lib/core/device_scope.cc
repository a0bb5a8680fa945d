#include "core/device_scope.h"

namespace dt {
namespace {
thread_local Device t_device;  // the CPU
}

Device current_device() { return t_device; }
ScopedDevice::ScopedDevice(Device device) : previous_(t_device) { t_device = device; }
ScopedDevice::~ScopedDevice() { t_device = previous_; }

}  // namespace dt
