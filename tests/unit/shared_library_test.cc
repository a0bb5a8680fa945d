// Libraries loaded at run time (core/shared_library.h): the first loadable candidate wins, a
// failure names every candidate tried, a missing symbol is reported rather than crashing, and
// an environment override is the only candidate. In CUDA builds, cuBLAS and NCCL load through
// their tables with no GPU present, and neither is linked (a process that does not use them
// never maps them).
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "core/shared_library.h"
#include "unit/test_util.h"
#if DTRAIN_HAVE_CUDA
#include "kernels/cuda/cublas_api.h"
#endif
#if DTRAIN_HAVE_NCCL
#include "comm/nccl/nccl_api.h"
#endif

namespace dt {
namespace DT_TEST_NS {

TEST(SharedLibrary, TheFirstLoadableCandidateWins) {
  SharedLibrary lib = SharedLibrary::open({"libdtrain-no-such-library.so.9", "libm.so.6"});
  ASSERT_TRUE(lib.loaded()) << lib.why();
  EXPECT_EQ(lib.path(), "libm.so.6");
  auto cosine = reinterpret_cast<double (*)(double)>(lib.symbol("cos"));
  ASSERT_NE(cosine, nullptr);
  EXPECT_DOUBLE_EQ(cosine(0.5), std::cos(0.5));
  EXPECT_EQ(lib.symbol("dt_no_such_symbol"), nullptr);
  EXPECT_NE(lib.why().find("dt_no_such_symbol"), std::string::npos) << lib.why();
}

TEST(SharedLibrary, FailureNamesEveryCandidateTried) {
  SharedLibrary lib = SharedLibrary::open({"libdtrain-absent-a.so.1", "/nowhere/libdtrain-absent-b.so.1"});
  EXPECT_FALSE(lib.loaded());
  EXPECT_NE(lib.why().find("libdtrain-absent-a.so.1"), std::string::npos) << lib.why();
  EXPECT_NE(lib.why().find("/nowhere/libdtrain-absent-b.so.1"), std::string::npos) << lib.why();
  EXPECT_EQ(lib.symbol("cos"), nullptr);
  EXPECT_FALSE(SharedLibrary::open({}).loaded());
}

TEST(SharedLibrary, CandidatesHonourTheOverrideAlone) {
  unsetenv("DTRAIN_TEST_LIBRARY");
  EXPECT_EQ(library_candidates("DTRAIN_TEST_LIBRARY", "libx.so.2", "/opt/x/lib"),
            (std::vector<std::string>{"libx.so.2", "/opt/x/lib/libx.so.2"}));
  EXPECT_EQ(library_candidates("DTRAIN_TEST_LIBRARY", "libx.so.2", ""), (std::vector<std::string>{"libx.so.2"}));
  setenv("DTRAIN_TEST_LIBRARY", "/elsewhere/libx.so", 1);
  EXPECT_EQ(library_candidates("DTRAIN_TEST_LIBRARY", "libx.so.2", "/opt/x/lib"),
            (std::vector<std::string>{"/elsewhere/libx.so"}));
  unsetenv("DTRAIN_TEST_LIBRARY");
}

#if DTRAIN_HAVE_CUDA || DTRAIN_HAVE_NCCL
// Whether a library of this name is mapped into the process now.
bool mapped(const char* stem) {
  struct Find {
    const char* stem;
    bool found = false;
  } f{stem};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* p) {
        auto* f = static_cast<Find*>(p);
        if (info->dlpi_name && std::string(info->dlpi_name).find(f->stem) != std::string::npos) f->found = true;
        return 0;
      },
      &f);
  return f.found;
}

// What the process had mapped when it started, before any test ran (static initialization
// comes after the loader has mapped every library the executable needs).
#endif
#if DTRAIN_HAVE_CUDA
const bool g_cublas_at_start = mapped("libcublas");
#endif
#if DTRAIN_HAVE_NCCL
const bool g_nccl_at_start = mapped("libnccl");
#endif

#if DTRAIN_HAVE_CUDA || DTRAIN_HAVE_NCCL
// In a fresh process (the table is filled once per process): the variable points at nothing
// there, so asking for the table is an error of `code` naming that path.
template <typename Ask>
void missing_library_is_an_error(const char* variable, dt_status code, Ask ask) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // re-executed: nothing loaded yet
  EXPECT_EXIT(
      {
        setenv(variable, "/nowhere/libdtrain-test-missing.so", 1);
        try {
          ask();
        } catch (const Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::exit(e.code() == code ? 0 : 1);
        }
        std::exit(2);
      },
      ::testing::ExitedWithCode(0), "could not be loaded.*/nowhere/libdtrain-test-missing.so.*set ");
}
#endif

#if DTRAIN_HAVE_CUDA
TEST(SharedLibrary, AMissingCublasIsAnErrorNamingWhereItLooked) {
  missing_library_is_an_error("DTRAIN_CUBLAS_LIBRARY", DT_ERR_UNSUPPORTED, [] { kernels::cuda::cublas(); });
}

TEST(SharedLibrary, CublasLoadsOnFirstUseOnly) {
  // This executable links the archive that calls cuBLAS, yet did not start with it mapped.
  EXPECT_FALSE(g_cublas_at_start);
  const kernels::cuda::CublasApi& api = kernels::cuda::cublas();
  EXPECT_NE(api.cublasGemmStridedBatchedEx, nullptr);
  EXPECT_NE(std::string(api.cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED)), "");
  EXPECT_TRUE(mapped("libcublas"));
}
#endif

#if DTRAIN_HAVE_NCCL
TEST(SharedLibrary, AMissingNcclIsAnErrorNamingWhereItLooked) {
  missing_library_is_an_error("DTRAIN_NCCL_LIBRARY", DT_ERR_COMM, [] { comm::nccl(); });
}

TEST(SharedLibrary, NcclLoadsWithTheMajorVersionBuiltAgainst) {
  EXPECT_FALSE(g_nccl_at_start);
  const comm::NcclApi& api = comm::nccl();
  int version = 0;
  ASSERT_EQ(api.ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version / 10000, NCCL_MAJOR);
  EXPECT_NE(std::string(api.ncclGetErrorString(ncclInvalidArgument)), "");
  EXPECT_TRUE(mapped("libnccl"));
}
#endif

}  // namespace DT_TEST_NS
}  // namespace dt
