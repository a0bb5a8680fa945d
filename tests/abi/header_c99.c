/* Compiled by ctest with -std=c99 -Wall -Wextra -pedantic -Werror (and again as C++). */
#include <dtrain/dtrain.h>

int main(void) {
  dt_status s = DT_OK;
  dt_tensor* t = 0;
  (void)t;
  return (int)s + (DT_VERSION_NUMBER > 0 ? 0 : 1);
}
