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

#include "core/error.h"

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

// A library's table of entry points (Api: a struct of function pointers), filled once: the
// loaders of cuBLAS and NCCL fill one in a function-local static and hand out `get()`.
template <typename Api>
struct EntryPoints {
  Api api;
  std::string error;  // empty when the library loaded and had every entry point

  // Opens the library from library_candidates(); when none loads, `error` names each place
  // tried and how to point at another (`env_override`, or LD_LIBRARY_PATH).
  SharedLibrary open(const char* what, const char* env_override, const std::string& soname,
                     const std::string& build_dir) {
    SharedLibrary lib = SharedLibrary::open(library_candidates(env_override, soname, build_dir));
    if (!lib.loaded())
      error = std::string(what) + " could not be loaded (" + lib.why() + "); set " + env_override +
              " to its path, or add its folder to LD_LIBRARY_PATH";
    return lib;
  }
  // Looks `symbol` up into `slot`; the first one missing becomes the error.
  template <typename F>
  void find(SharedLibrary& lib, F& slot, const char* what, const char* symbol) {
    slot = reinterpret_cast<F>(lib.symbol(symbol));
    if (!slot && error.empty()) error = std::string(what) + ": " + lib.why();
  }
  // The table, or dt::Error `code` with the error.
  const Api& get(dt_status code) const {
    if (!error.empty()) fail(code, error);
    return api;
  }
};

}  // namespace dt
