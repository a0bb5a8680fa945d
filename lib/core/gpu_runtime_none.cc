// The "no CUDA in this build" side of gpu_runtime.h.
#ifndef DTRAIN_HAVE_CUDA
#include "core/error.h"
#include "core/gpu_runtime.h"

namespace dt::gpu {

int device_count() { return 0; }
std::string availability_note() { return "libdtrain was built without CUDA (DTRAIN_WITH_CUDA=OFF)"; }
[[noreturn]] static void no_cuda() { fail(DT_ERR_UNSUPPORTED, availability_note()); }
void* device_alloc(int, size_t) { no_cuda(); }
void device_free(int, void*) {}
void* compute_stream(int) { no_cuda(); }
void synchronize(int) { no_cuda(); }
void copy_to_device(int, void*, const void*, size_t) { no_cuda(); }
void copy_to_host(int, void*, const void*, size_t) { no_cuda(); }
void copy_device(int, void*, const void*, size_t) { no_cuda(); }
void memset_zero(int, void*, size_t) { no_cuda(); }

}  // namespace dt::gpu
#endif
