/*===- internal.h - What the runtime's source files share -----------------===*
 *
 * Not installed. The error reporting every entry point uses, and the hooks
 * between the files of the runtime (argument checks, CPU checks, the module
 * registry).
 *===----------------------------------------------------------------------===*/
#ifndef ATTN_RUNTIME_INTERNAL_H
#define ATTN_RUNTIME_INTERNAL_H

#include "attn/runtime.h"

/* Formats the calling thread's last error message and returns `status`, so
 * that a failing check reads `return attn_fail(..., "...", ...);`. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
attn_status
attn_fail(attn_status status, const char *format, ...);

/* The name a message uses for an element type ("f32", "bool", ...). */
const char *attn_dtype_name(int32_t dtype);

#endif /* ATTN_RUNTIME_INTERNAL_H */
