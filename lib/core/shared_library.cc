#include "core/shared_library.h"

#include <dlfcn.h>

#include <cstdlib>

namespace dt {

SharedLibrary SharedLibrary::open(const std::vector<std::string>& candidates) {
  SharedLibrary lib;
  for (const std::string& c : candidates) {
    // RTLD_LOCAL: the library's symbols serve only our lookups, never another library's
    // unresolved names.
    lib.handle_ = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib.handle_) {
      lib.path_ = c;
      lib.why_.clear();
      return lib;
    }
    const char* e = dlerror();
    lib.why_ += (lib.why_.empty() ? "" : "; ") + c + ": " + (e ? e : "not loadable");
  }
  if (candidates.empty()) lib.why_ = "no candidate to load";
  return lib;
}

void* SharedLibrary::symbol(const char* name) {
  if (!handle_) return nullptr;
  dlerror();  // clear a stale message
  void* p = dlsym(handle_, name);
  if (!p) {
    const char* e = dlerror();
    why_ = path_ + " lacks " + name + (e ? std::string(" (") + e + ")" : std::string());
  }
  return p;
}

std::vector<std::string> library_candidates(const char* env_override, const std::string& soname,
                                            const std::string& build_dir) {
  const char* forced = env_override ? std::getenv(env_override) : nullptr;
  if (forced && *forced) return {forced};
  std::vector<std::string> out{soname};
  if (!build_dir.empty()) out.push_back(build_dir + "/" + soname);
  return out;
}

}  // namespace dt
