// The device a thread is building and running a model on. Parameters (nn::make_param) and
// activation buffers (nn::ensure) are made on it. The CPU unless a ScopedDevice says
// otherwise: a model created with the option "device": "cuda:N" is built under one, and
// the engine runs each of its steps under the device of the model it drives.
#pragma once
#include "core/device.h"

namespace dt {

Device current_device();

// While alive, this thread's models live on `device`; the previous device comes back after.
class ScopedDevice {
 public:
  explicit ScopedDevice(Device device);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  Device previous_;
};

}  // namespace dt
