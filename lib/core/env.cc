#include "core/env.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace dt {

int64_t env_int(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const char* v = std::getenv(name);
  if (!v) return fallback;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (*v != '\0' && *end == '\0' && x >= lo && x <= hi) return x;
  std::fprintf(stderr, "libdtrain: %s='%s' ignored: accepted integers %lld..%lld; using %lld\n", name, v,
               static_cast<long long>(lo), static_cast<long long>(hi), static_cast<long long>(fallback));
  return fallback;
}

int env_choice(const char* name, std::initializer_list<const char*> accepted) {
  const char* v = std::getenv(name);
  if (!v) return -1;
  int i = 0;
  std::string list;
  for (const char* a : accepted) {
    if (std::string(v) == a) return i;
    list += (i++ ? ", " : "") + std::string(a);
  }
  std::fprintf(stderr, "libdtrain: %s='%s' ignored: accepted values are %s\n", name, v, list.c_str());
  return -1;
}

}  // namespace dt
