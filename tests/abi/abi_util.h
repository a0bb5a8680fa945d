// What every ABI test needs: OK(), expect_error() on a status and its message, and Opts,
// an options bag that releases itself. Tests here use only the public header.
#pragma once
#include <dtrain/dtrain.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#define OK(call) ASSERT_EQ((call), DT_OK) << dt_last_error_message()

// status is `want` and the thread's last message holds every fragment.
inline void expect_error(dt_status status, dt_status want, std::initializer_list<const char*> fragments) {
  EXPECT_EQ(status, want) << dt_status_string(status) << ": " << dt_last_error_message();
  std::string msg = dt_last_error_message();
  if (std::getenv("DTRAIN_TEST_VERBOSE")) std::printf("%s\n", msg.c_str());
  for (const char* f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "message: " << msg << "\nmissing: " << f;
}

// Owns an options bag for one call.
struct Opts {
  dt_options* o = nullptr;
  Opts() { EXPECT_EQ(dt_options_create(&o), DT_OK); }
  ~Opts() { dt_options_destroy(o); }
  Opts(const Opts&) = delete;
  Opts& operator=(const Opts&) = delete;
  Opts& i(const char* k, int64_t v) { EXPECT_EQ(dt_options_set_int(o, k, v), DT_OK); return *this; }
  Opts& d(const char* k, double v) { EXPECT_EQ(dt_options_set_double(o, k, v), DT_OK); return *this; }
  Opts& b(const char* k, bool v) { EXPECT_EQ(dt_options_set_bool(o, k, v ? 1 : 0), DT_OK); return *this; }
  Opts& s(const char* k, const char* v) { EXPECT_EQ(dt_options_set_string(o, k, v), DT_OK); return *this; }
};
