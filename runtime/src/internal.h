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

/* cuda.c: launches a GPU kernel on checked arguments (on `stream` without
 * waiting, or on the default stream, waiting for it when `stream` is NULL),
 * and drops the images loaded for a library's kernels before it is
 * unloaded. */
attn_status attn_cuda_launch(const attn_kernel_desc *kernel,
                             const attn_kernel_args *args, void *stream);
/* A linear or additive attention kernel, on the default stream, waiting
 * for it. */
attn_status attn_cuda_launch_linear(const attn_kernel_desc *kernel,
                                    const attn_linear_args *args);
attn_status attn_cuda_launch_additive(const attn_kernel_desc *kernel,
                                      const attn_additive_args *args);
/* A backward kernel, on `stream` as attn_cuda_launch. */
attn_status attn_cuda_launch_backward(const attn_kernel_desc *kernel,
                                      const attn_backward_args *args,
                                      void *stream);
void attn_cuda_forget(const attn_library *library);

/* The refusal of an entry point that has no sinks to pass (attn_run,
 * attn_prepare...) for a kernel that takes them. */
attn_status attn_sinks_needed(const attn_kernel_desc *kernel);

/* The refusal of an entry point that has no captures to pass for a kernel
 * whose modifiers read some. */
attn_status attn_captures_needed(const attn_kernel_desc *kernel);

/* Checks a call's captured tensors against the kernel's descriptor (count,
 * ranks, element types, static sizes, strides, extents, and no overlap with
 * the `written` tensors) and puts them in args->captures. */
attn_status attn_prepare_captures(const attn_kernel_desc *kernel,
                                  const attn_tensor *captures, int32_t count,
                                  const attn_tensor *const *written,
                                  int num_written, attn_kernel_args *args);

/* The checks of attn_fill_block_table (the kernel has a block table; the
 * sizes against its static ones; the captures as a call's, the table
 * [B or 1, Hq or 1, ceil(Sq/QB), ceil(Sk/KB)] (each at least 1), written,
 * so without self-overlap and disjoint from the others); fills `args` with
 * the sizes and the captures, every other tensor NULL. */
attn_status attn_prepare_block_table(const attn_kernel_desc *kernel,
                                     int64_t batch, int64_t heads_q,
                                     int64_t seq_q, int64_t seq_k,
                                     const attn_tensor *captures, int32_t count,
                                     attn_kernel_args *args);

/* attn_prepare_weights without the captures: every check of a weights
 * call's other tensors. */
attn_status attn_prepare_weights_tensors(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *mask, const attn_tensor *lse,
    const attn_tensor *weights, attn_kernel_args *args);

/* The refusal of attn_run_backward and attn_prepare_backward for a kernel
 * that writes dM (they have no grad_mask to pass). */
attn_status attn_grad_mask_needed(const attn_kernel_desc *kernel);
/* Checks the captures' gradients of a backward call (options->grad_captures,
 * `captures` the call's captures, already checked) and fills them into
 * `args` (whose forward sizes are set); none of them may overlap the call's
 * other tensors (`others`, NULL entries skipped), the captures or each
 * other. */
attn_status attn_prepare_grad_captures(
    const attn_kernel_desc *kernel, const attn_tensor *grad_captures,
    const attn_tensor *captures, const attn_tensor *const *others,
    const char *const *other_names, int num_others, attn_backward_args *args);

/* attn_prepare_backward with dM (NULL for a kernel without): every check of
 * a backward call's tensors. */
attn_status attn_prepare_backward_tensors(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value, const attn_tensor *mask,
    const attn_tensor *output, const attn_tensor *lse,
    const attn_tensor *grad_output, const attn_tensor *grad_lse,
    const attn_tensor *grad_query, const attn_tensor *grad_key,
    const attn_tensor *grad_value, const attn_tensor *grad_mask,
    attn_backward_args *args);

/* attn_prepare with the sinks (NULL for a kernel without): every check of
 * a forward call's tensors. */
attn_status attn_prepare_forward(const attn_kernel_desc *kernel,
                                 const attn_tensor *query,
                                 const attn_tensor *key,
                                 const attn_tensor *value,
                                 const attn_tensor *mask,
                                 const attn_tensor *output,
                                 const attn_tensor *lse,
                                 const attn_tensor *sinks,
                                 attn_kernel_args *args);

#endif /* ATTN_RUNTIME_INTERNAL_H */
