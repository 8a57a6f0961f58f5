/* Built with `pkg-config --cflags --libs attn` only: the runtime's header
 * and library are found, and a bad library path gives a clear error. */
#include "attn/runtime.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  attn_module *module = NULL;
  if (attn_module_load("/nonexistent/kernels.so", &module) != ATTN_ERROR_LOAD)
    return 1;
  if (strlen(attn_last_error()) == 0)
    return 1;
  printf("pkgconfig-consumer: OK (%s)\n", attn_status_name(ATTN_ERROR_LOAD));
  return 0;
}
