// A shared library opened at run time (dlopen) and the symbols looked up in it. libdtrain
// loads the device libraries it calls into (cuBLAS, NCCL) this way instead of linking them:
// a CUDA build then starts, and runs on the CPU, on a machine without them, and a process
// that never touches a GPU does not pay for mapping and relocating libcublasLt (hundreds of
// MB; about 0.14 s of every process start on the CI machine).
//
// Threads: not synchronized; each user fills its table of entry points once, inside a
// function-local static's initializer (which C++ runs once), and only reads it after. The
// handle stays open for the life of the process (the library's own static
// destructors would otherwise run while a cuBLAS handle or an NCCL communicator is alive).
#pragma once
#include <string>
#include <vector>

namespace dt {

class SharedLibrary {
 public:
  // The first of `candidates` (file names searched as dlopen searches them, or paths) that
  // loads. When none does, returns a library that is not loaded(), whose why() names every
  // candidate tried and the loader's message for each.
  static SharedLibrary open(const std::vector<std::string>& candidates);

  bool loaded() const { return handle_ != nullptr; }
  const std::string& path() const { return path_; }  // the candidate that loaded
  const std::string& why() const { return why_; }    // why none loaded

  // The symbol's address, or nullptr when the library lacks it (why() then says so).
  void* symbol(const char* name);

 private:
  void* handle_ = nullptr;
  std::string path_, why_;
};

// The candidates for a library named by its SONAME: first the path in the environment
// variable `env_override` when set (an explicit choice: only it is tried), then the SONAME
// as the dynamic loader finds it (LD_LIBRARY_PATH, the cache, the caller's RUNPATH), then
// the SONAME in `build_dir`, where the build found the library.
std::vector<std::string> library_candidates(const char* env_override, const std::string& soname,
                                            const std::string& build_dir);

}  // namespace dt
