# The warnings every target of ours compiles with (the library, the CLI, the benchmarks).
set(DTRAIN_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wno-unused-parameter)
# DTRAIN_WERROR=ON (tools/test.sh's Release pass, so CI) turns them into errors: a warning
# then stops the change that brought it rather than piling up. Off by default, so that a
# newer compiler with new warnings never stops a user's build.
option(DTRAIN_WERROR "Treat the library's compiler warnings as errors" OFF)
if(DTRAIN_WERROR)
  list(APPEND DTRAIN_WARNINGS -Werror)
endif()
