// DT_TEST_SANITIZED: 1 in the sanitizer builds (the ASan and TSan passes of tools/test.sh),
// where code runs several times slower and the heaviest test matrices run thinner. GCC says
// so by macro, clang (which builds those passes) by __has_feature.
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DT_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DT_TEST_SANITIZED 1
#endif
#endif
#ifndef DT_TEST_SANITIZED
#define DT_TEST_SANITIZED 0
#endif
