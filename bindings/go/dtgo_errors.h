// Shared by the cgo preambles that call the library with a callback (stream.go,
// server.go): the calling thread's error message, copied in the same native call that
// failed, since the Go side may resume on another OS thread whose message is not this one.
#ifndef DTGO_ERRORS_H
#define DTGO_ERRORS_H
#include <stdlib.h>
#include <string.h>
#include <dtrain/dtrain.h>

// A malloc'd copy of dt_last_error_message() when status is not DT_OK (NULL if that
// allocation failed); NULL on success. The caller frees it.
static inline char* dtgo_error_copy(dt_status status) {
  if (status == DT_OK) return NULL;
  const char* msg = dt_last_error_message();
  size_t len = msg ? strlen(msg) : 0;
  char* copy = (char*)malloc(len + 1);
  if (copy != NULL) {
    if (len) memcpy(copy, msg, len);
    copy[len] = '\0';
  }
  return copy;
}
#endif
