/*===- runtime.h - The attn runtime: load, check and run compiled kernels -===*
 *
 * A small C library. It loads a kernel library made by `attn-compile`, checks
 * every argument of a call against the kernel's recorded signature, and runs
 * the kernel's work items on a thread pool across all cores. Every failure
 * returns a status and leaves a readable message in `attn_last_error()`
 * (per thread); nothing here aborts or writes outside the caller's buffers.
 *
 * It includes no MLIR header and links no MLIR library.
 *===----------------------------------------------------------------------===*/
#ifndef ATTN_RUNTIME_H
#define ATTN_RUNTIME_H

#include "attn/kernel_abi.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility; only what is marked here is
 * exported, so its internals never clash with a program's symbols. */
#if defined(_WIN32)
#define ATTN_RUNTIME_EXPORT
#else
#define ATTN_RUNTIME_EXPORT __attribute__((visibility("default")))
#endif

typedef enum attn_status {
  ATTN_OK = 0,
  /* A tensor or size does not fit the kernel, or a NULL where none may be. */
  ATTN_ERROR_INVALID_ARGUMENT = 1,
  /* Not a shared library, or not an attn kernel library. */
  ATTN_ERROR_LOAD = 2,
  /* No kernel of that name. */
  ATTN_ERROR_NOT_FOUND = 3,
  /* The kernel needs an instruction this CPU (or its OS) does not offer. */
  ATTN_ERROR_UNSUPPORTED_CPU = 4,
  /* A GPU was asked for and none is present. */
  ATTN_ERROR_NO_DEVICE = 5,
  ATTN_ERROR_OUT_OF_MEMORY = 6,
  ATTN_ERROR_INTERNAL = 7
} attn_status;

/* The message of the last failure on this thread ("" if none). */
ATTN_RUNTIME_EXPORT const char *attn_last_error(void);
ATTN_RUNTIME_EXPORT const char *attn_status_name(attn_status status);

/* A view of caller memory: the logical shape and element strides (in
 * elements, may be 0 for broadcast or negative) of a tensor. Unused trailing
 * dims are ignored. `data` may be NULL only when the tensor has no element. */
typedef struct attn_tensor {
  void *data;
  attn_dtype dtype;
  int32_t rank;
  int64_t shape[4];
  int64_t strides[4];
} attn_tensor;

/* A dense row-major tensor of the given shape (rank <= 4). */
ATTN_RUNTIME_EXPORT attn_tensor attn_tensor_contiguous(void *data,
                                                       attn_dtype dtype,
                                                       int32_t rank,
                                                       const int64_t *shape);

/* -- Kernel libraries ----------------------------------------------------- */

typedef struct attn_module attn_module;

/* Loads a shared library made by attn-compile. Refuses files that are not
 * shared libraries, libraries without the attn symbol, other ABI versions. */
ATTN_RUNTIME_EXPORT attn_status attn_module_load(const char *path,
                                                 attn_module **out);
/* Registers kernels already linked into the program (no dlopen). */
ATTN_RUNTIME_EXPORT attn_status
attn_module_from_library(const attn_library *library, attn_module **out);
/* Frees the module (NULL is a no-op). Refused (ATTN_ERROR_INVALID_ARGUMENT)
 * while calls on its kernels are running. */
ATTN_RUNTIME_EXPORT attn_status attn_module_unload(attn_module *module);

/* The kernels in library order; attn_module_kernel returns NULL for an index
 * out of range. */
ATTN_RUNTIME_EXPORT int32_t attn_module_num_kernels(const attn_module *module);
ATTN_RUNTIME_EXPORT const attn_kernel_desc *
attn_module_kernel(const attn_module *module, int32_t index);
ATTN_RUNTIME_EXPORT attn_status attn_module_find(const attn_module *module,
                                                 const char *name,
                                                 const attn_kernel_desc **out);

/* ATTN_OK when this CPU has every feature the kernel was compiled for
 * (always for a GPU kernel). */
ATTN_RUNTIME_EXPORT attn_status
attn_kernel_check_cpu(const attn_kernel_desc *kernel);

/* Where the kernel runs (descriptors older than the `device` field: CPU). */
ATTN_RUNTIME_EXPORT attn_device
attn_kernel_device(const attn_kernel_desc *kernel);

/* -- CUDA GPUs ------------------------------------------------------------ */

/* The runtime loads the CUDA driver (libcuda.so.1) the first time a GPU is
 * needed and uses device 0. Without a driver or a GPU these return
 * ATTN_ERROR_NO_DEVICE with a message saying which is missing. */

/* ATTN_OK when GPU 0 can run kernels; its name and compute capability. Any
 * output may be NULL. */
ATTN_RUNTIME_EXPORT attn_status attn_cuda_device(char *name, size_t name_size,
                                                 int32_t *major,
                                                 int32_t *minor);
ATTN_RUNTIME_EXPORT attn_status attn_cuda_malloc(size_t bytes, void **out);
ATTN_RUNTIME_EXPORT attn_status attn_cuda_free(void *pointer);
typedef enum attn_copy_direction {
  ATTN_COPY_TO_DEVICE = 0,
  ATTN_COPY_TO_HOST = 1
} attn_copy_direction;
ATTN_RUNTIME_EXPORT attn_status attn_cuda_copy(void *dst, const void *src,
                                               size_t bytes,
                                               attn_copy_direction direction);

/* -- Thread pool ---------------------------------------------------------- */

typedef struct attn_thread_pool attn_thread_pool;

/* A pool of `num_threads` threads in all, the caller of parallel_for being one
 * of them (so num_threads - 1 are started); num_threads <= 0 means one per
 * online core. */
ATTN_RUNTIME_EXPORT attn_status attn_thread_pool_create(int32_t num_threads,
                                                        attn_thread_pool **out);
/* A pool over a team of threads someone else owns (an OpenMP runtime, the
 * intra-op pool of a framework), so that attn's work and the framework's run
 * on the same threads instead of competing for the cores: `run(team_ctx,
 * num_threads, fn, fn_ctx)` must call fn(fn_ctx) once on each of at most
 * `num_threads` threads at once, the calling thread among them, and return
 * when every call has returned (GOMP_parallel's contract). A team smaller
 * than asked (a nested parallel region) is fine: every call still runs all
 * of its items. The pool starts no thread; its size is num_threads (>= 1). */
typedef void (*attn_team_fn)(void *fn_ctx);
typedef void (*attn_team_run_fn)(void *team_ctx, int32_t num_threads,
                                 attn_team_fn fn, void *fn_ctx);
ATTN_RUNTIME_EXPORT attn_status
attn_thread_pool_create_on_team(int32_t num_threads, attn_team_run_fn run,
                                void *team_ctx, attn_thread_pool **out);
ATTN_RUNTIME_EXPORT void attn_thread_pool_destroy(attn_thread_pool *pool);
ATTN_RUNTIME_EXPORT int32_t attn_thread_pool_size(const attn_thread_pool *pool);
/* An attn_parallel_for_fn: pass it, with the pool, to a generated kernel's
 * entry point to run it on all cores. Safe to call from several threads at
 * once and from inside a task; a NULL pool runs task(task_ctx, 0, n) inline. */
ATTN_RUNTIME_EXPORT void attn_thread_pool_parallel_for(void *pool, int64_t n,
                                                       attn_task_fn task,
                                                       void *task_ctx);

/* -- Running -------------------------------------------------------------- */

/* Checks every argument against the kernel (element types, ranks, shapes,
 * GQA ratio, mask broadcast shape, strides and the extent of each buffer,
 * null pointers, an output that overlaps an input or the LSE) and runs it.
 * `mask` and `lse` may be NULL (as the kernel requires). `pool` may be NULL:
 * the call then runs on the calling thread only. A GPU kernel takes device
 * pointers (attn_cuda_malloc) and returns when it has finished; `pool` is
 * not used. */
ATTN_RUNTIME_EXPORT attn_status attn_run(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value, const attn_tensor *mask,
    const attn_tensor *output, const attn_tensor *lse, attn_thread_pool *pool);

/* attn_run with a choice of split-KV: a decoding kernel (one with the key
 * split's phases, see kernel_abi.h) can split each GQA group's keys into
 * `key_splits` ranges that run as separate work items, then merge them by
 * their log-sum-exp. 0 lets the runtime choose (attn_run: split only when
 * the call has fewer work items than the pool has threads), 1 never splits;
 * more than 1 on a kernel without the phases is an invalid argument. The
 * workspace (B x Hq x Sq x key_splits x (Dv + 2) floats) is allocated per
 * call. Results are bit-identical for equal splits whatever the threads;
 * different splits sum in another order (last bits), so attn_run's results
 * for such a kernel may differ in the last bits between pool sizes. */
ATTN_RUNTIME_EXPORT attn_status attn_run_split(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value, const attn_tensor *mask,
    const attn_tensor *output, const attn_tensor *lse, int64_t key_splits,
    attn_thread_pool *pool);

/* Whether `kernel` has the key split's phases (attn_run_split). */
ATTN_RUNTIME_EXPORT int
attn_kernel_has_key_split(const attn_kernel_desc *kernel);

/* The checks of attn_run alone; fills `args` for kernel->run on success. A
 * kernel with sinks needs attn_prepare_with. */
ATTN_RUNTIME_EXPORT attn_status attn_prepare(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value, const attn_tensor *mask,
    const attn_tensor *output, const attn_tensor *lse, attn_kernel_args *args);

/* Whether a kernel applies dropout (spec key 'dropout'): it then runs with
 * attn_run_dropout (forward) or takes a nonzero dropout_p in
 * attn_run_backward, and refuses attn_run. */
ATTN_RUNTIME_EXPORT int attn_kernel_has_dropout(const attn_kernel_desc *kernel);

/* The random bits a kernel with dropout compares per position: 16, the
 * keep bits of docs/spec.md; 32 for kernels compiled before 2026-12-03,
 * whose bits for a seed differ (pair a forward with a backward of the same
 * kind); 0 without dropout. */
ATTN_RUNTIME_EXPORT int
attn_kernel_dropout_bits(const attn_kernel_desc *kernel);

/* attn_run for a kernel with dropout: each weight is dropped with
 * probability `dropout_p` (in [0, 1)) and the kept ones scaled by
 * 1 / (1 - dropout_p); the keep bits are Philox 4x32-10 of `dropout_seed`
 * and the position (docs/spec.md), the LSE that of the undropped softmax.
 * The backward of the call takes the same probability and seed. */
ATTN_RUNTIME_EXPORT attn_status attn_run_dropout(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value, const attn_tensor *mask,
    const attn_tensor *output, const attn_tensor *lse, float dropout_p,
    uint64_t dropout_seed, attn_thread_pool *pool);

/* Whether a kernel takes attention sinks (spec key 'sinks'): it then runs
 * with attn_run_with (options->sinks) and refuses attn_run. */
ATTN_RUNTIME_EXPORT int attn_kernel_has_sinks(const attn_kernel_desc *kernel);

/* How many tensors a kernel's score and mask modifiers capture (0 for a
 * kernel without modifiers): attn_run_options::captures. */
ATTN_RUNTIME_EXPORT int32_t
attn_kernel_num_captures(const attn_kernel_desc *kernel);

/* What a forward call takes besides the tensors of attn_run. Zero it, set
 * struct_size = sizeof(attn_run_options) and then what the kernel needs;
 * fields that a later runtime adds lie past an older caller's struct_size
 * and count as zero. */
typedef struct attn_run_options {
  uint32_t struct_size;
  /* The sink logits [Hq] f32 (any stride), for a kernel with sinks
   * (docs/spec.md, "Attention sinks"); NULL for one without. Read only. */
  const attn_tensor *sinks;
  /* Dropout, for a kernel with dropout: as attn_run_dropout's. */
  float dropout_p;
  uint64_t dropout_seed;
  /* As attn_run_split's: 0 lets the runtime choose, 1 never splits. */
  int64_t key_splits;
  /* attn_run_backward_with: dM [B, Hq, Sq, Sk] f32, written, for a
   * backward kernel that has it (attn_kernel_has_grad_mask; spec key
   * 'dbias'): the gradient of every score, so of an additive bias before
   * its broadcast dims are summed (by the caller); 0 at excluded
   * positions. NULL for other kernels. */
  const attn_tensor *grad_mask;
  /* The tensors that the kernel's score_mod and mask_mod read, in the order
   * of its op's captures(...): `num_captures` of them, each of the rank and
   * element type the kernel's descriptor gives (attn_kernel_num_captures,
   * attn_kernel_desc::captures), every dim at least 1, strides >= 0. Read
   * only; none may overlap an output. */
  const attn_tensor *captures;
  int32_t num_captures;
  /* A GPU kernel's CUDA stream (a CUstream or cudaStream_t of GPU 0's
   * primary context, which PyTorch's streams on cuda:0 are): the kernel is
   * queued on it and the call returns without waiting for it, as any
   * launch on a stream does. NULL: the default stream, and the call waits
   * for the kernel to finish. Not for CPU kernels. */
  void *cuda_stream;
  /* attn_run_backward_with, for a backward kernel whose score_mod's
   * captured tensors have gradients (attn_kernel_grad_captures; spec key
   * 'dcaptures'): an array of num_captures tensors, entry n for capture n
   * where the kernel has its gradient (other entries are not read). Entry n
   * is f32 [B * Hkv, N], N the capture's element count, each row
   * contiguous (strides {>= N, 1}); written: row b * Hkv + hkv is the
   * partial gradient that work item (batch b, key/value head hkv) adds up,
   * in the capture's row-major order. The capture's gradient is the sum of
   * the rows (deterministic: no two work items write one row). NULL for
   * other kernels. */
  const attn_tensor *grad_captures;
} attn_run_options;

/* attn_run with every per-call input: `options` may be NULL for a kernel
 * that needs none of them (then it is attn_run). attn_run, attn_run_split
 * and attn_run_dropout are this call with one option set. */
ATTN_RUNTIME_EXPORT attn_status attn_run_with(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value, const attn_tensor *mask,
    const attn_tensor *output, const attn_tensor *lse,
    const attn_run_options *options, attn_thread_pool *pool);

/* attn_prepare with the options' tensors and dropout (key_splits is not
 * checked: it is a choice of attn_run_with, not of the kernel's call). */
ATTN_RUNTIME_EXPORT attn_status attn_prepare_with(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value, const attn_tensor *mask,
    const attn_tensor *output, const attn_tensor *lse,
    const attn_run_options *options, attn_kernel_args *args);

/* Whether a kernel can fill its block table from its own mask_mod
 * (attn_fill_block_table): a CPU forward kernel whose op names a table
 * (`attn.block_mask`), compiled by an attn-compile that gives it the entry
 * points. */
ATTN_RUNTIME_EXPORT int
attn_kernel_has_block_table(const attn_kernel_desc *kernel);

/* Fills the block table of a call with sizes B, Hq, Sq, Sk from the
 * kernel's own mask_mod and causal band or window (docs/spec.md, "Score and
 * mask modifiers" 7), as FlexAttention's create_block_mask does from a
 * Python mask_mod: entry
 * [b, h, i, j] is 0 where the mask_mod keeps no position of query rows
 * [i·QB, (i+1)·QB) and keys [j·KB, (j+1)·KB) (within Sq and Sk), 2 where it
 * keeps every one of the QB x KB (a block cut by the end of a sequence is
 * never full), 1 otherwise. `captures` are the call's, as in
 * attn_run_options (num_captures of them); the table among them, capture
 * kernel->block_table_capture, is i32 [B or 1, Hq or 1, max(1, ceil(Sq /
 * QB)), max(1, ceil(Sk / KB))] (a dim of 1 covers every batch or head) and
 * is written; the others are read. The entries do not depend on the pool. A
 * table so made keeps a run of the kernel exact; the kernel then skips the
 * blocks of 0 and runs those of 2 without the mask_mod. */
ATTN_RUNTIME_EXPORT attn_status attn_fill_block_table(
    const attn_kernel_desc *kernel, int64_t batch, int64_t heads_q,
    int64_t seq_q, int64_t seq_k, const attn_tensor *captures,
    int32_t num_captures, attn_thread_pool *pool);

/* Whether a kernel computes the forward function, its gradients, its
 * attention weights, linear or additive attention, or a multi-head
 * attention layer (older kernels are forward kernels). */
ATTN_RUNTIME_EXPORT attn_kernel_kind
attn_kernel_kind_of(const attn_kernel_desc *kernel);

/* Runs a backward kernel: the gradients dQ, dK, dV of the forward with the
 * kernel's attributes (docs/spec.md, "The gradient"). `query` ... `mask` are
 * the forward's inputs, `output` and `lse` its O and LSE (read),
 * `grad_output` dO (shaped as O), `grad_lse` dLSE (shaped as LSE, f32) for a
 * kernel that takes it and NULL otherwise; `grad_query`, `grad_key` and
 * `grad_value` (shaped and typed as Q, K, V) are overwritten and must not
 * overlap any other tensor or one another. Every check of attn_run applies;
 * nothing is written when one fails. The result does not depend on the
 * pool's size. A kernel with dropout takes the forward's `dropout_p` and
 * `dropout_seed` (and regenerates its keep bits); others take 0 and any
 * seed. */
ATTN_RUNTIME_EXPORT attn_status attn_run_backward(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value, const attn_tensor *mask,
    const attn_tensor *output, const attn_tensor *lse,
    const attn_tensor *grad_output, const attn_tensor *grad_lse,
    const attn_tensor *grad_query, const attn_tensor *grad_key,
    const attn_tensor *grad_value, float dropout_p, uint64_t dropout_seed,
    attn_thread_pool *pool);

/* Whether a backward kernel also writes the bias's gradient dM (spec key
 * 'dbias'): it then runs with attn_run_backward_with (options->grad_mask)
 * and refuses attn_run_backward. */
ATTN_RUNTIME_EXPORT int
attn_kernel_has_grad_mask(const attn_kernel_desc *kernel);

/* Which captured tensors a backward kernel writes the gradient of (spec key
 * 'dcaptures'): bit n for capture n; 0 for other kernels. It then runs
 * with attn_run_backward_with (options->grad_captures). */
ATTN_RUNTIME_EXPORT uint32_t
attn_kernel_grad_captures(const attn_kernel_desc *kernel);

/* attn_run_backward with the options (dropout's probability and seed, and
 * grad_mask for a kernel that writes dM; sinks and key_splits do not apply
 * and must be unset). `options` may be NULL for a kernel that needs none. */
ATTN_RUNTIME_EXPORT attn_status attn_run_backward_with(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value, const attn_tensor *mask,
    const attn_tensor *output, const attn_tensor *lse,
    const attn_tensor *grad_output, const attn_tensor *grad_lse,
    const attn_tensor *grad_query, const attn_tensor *grad_key,
    const attn_tensor *grad_value, const attn_run_options *options,
    attn_thread_pool *pool);

/* attn_run_backward_with's checks alone. */
ATTN_RUNTIME_EXPORT attn_status attn_prepare_backward_with(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value, const attn_tensor *mask,
    const attn_tensor *output, const attn_tensor *lse,
    const attn_tensor *grad_output, const attn_tensor *grad_lse,
    const attn_tensor *grad_query, const attn_tensor *grad_key,
    const attn_tensor *grad_value, const attn_run_options *options,
    attn_backward_args *args);

/* attn_run_backward's checks alone: fills `args` for the kernel's entry
 * points (for callers that drive work items themselves). */
ATTN_RUNTIME_EXPORT attn_status attn_prepare_backward(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value, const attn_tensor *mask,
    const attn_tensor *output, const attn_tensor *lse,
    const attn_tensor *grad_output, const attn_tensor *grad_lse,
    const attn_tensor *grad_query, const attn_tensor *grad_key,
    const attn_tensor *grad_value, attn_backward_args *args);

/* Runs a linear attention kernel (kind ATTN_KERNEL_LINEAR; docs/spec.md,
 * "Linear attention"): O [B, Hq, Sq, Dv] of `query`, `key`, `value` (shaped
 * and typed as attn_run's; no mask; Sq = Sk for a causal kernel) through the
 * kernel's feature map (of a kernel compiled with 'unnormalized', O is the
 * numerator φ(Q)·S alone). A kernel compiled with the spec key 'state' reads
 * the initial state S0 [B, Hkv, D, Dv] and normalizer z0 [B, Hkv, D] (f32)
 * and writes the final ones (S0 and z0 plus every key's contribution) to
 * `final_state` and `final_normalizer`, which may be S0 and z0 themselves
 * (the same memory with the same strides: updated in place) but must not
 * otherwise overlap any tensor; all four are NULL for a kernel without. The
 * output must not overlap any tensor. Nothing is written when a check fails.
 * The result does not depend on the pool's size. */
ATTN_RUNTIME_EXPORT attn_status attn_run_linear(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value,
    const attn_tensor *initial_state, const attn_tensor *initial_normalizer,
    const attn_tensor *output, const attn_tensor *final_state,
    const attn_tensor *final_normalizer, attn_thread_pool *pool);

/* attn_run_linear's checks alone: fills `args` for the kernel's entry
 * points. */
ATTN_RUNTIME_EXPORT attn_status attn_prepare_linear(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value,
    const attn_tensor *initial_state, const attn_tensor *initial_normalizer,
    const attn_tensor *output, const attn_tensor *final_state,
    const attn_tensor *final_normalizer, attn_linear_args *args);

/* Runs a linear attention backward kernel (kind ATTN_KERNEL_LINEAR_BACKWARD;
 * docs/spec.md, "Gradient of linear attention"): from the forward's
 * `query`, `key`, `value` and `output` O (as attn_run_linear takes them;
 * Sq = Sk for a causal kernel), `grad_output` dO [B, Hq, Sq, Dv] (the
 * kernel's dtype) and the state `state` S [B, Hkv, D, Dv] and `normalizer`
 * z [B, Hkv, D] (f32: of a non-causal kernel the forward's final ones,
 * which every row saw; of a causal one its initial ones), writes `grad_query`,
 * `grad_key` and `grad_value` (shaped and typed as Q, K and V). A kernel
 * compiled with the spec key 'state' also reads `grad_final_state` dS1 and
 * `grad_final_normalizer` dz1 (the gradients of the forward's final state,
 * f32; pass zeros when the loss does not use it) and writes
 * `grad_initial_state` dS0 and `grad_initial_normalizer` dz0 (f32); all
 * four are NULL for a kernel without. The written tensors must not overlap
 * any tensor. Nothing is written when a check fails. The result does not
 * depend on the pool's size. */
ATTN_RUNTIME_EXPORT attn_status attn_run_linear_backward(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value, const attn_tensor *output,
    const attn_tensor *grad_output, const attn_tensor *state,
    const attn_tensor *normalizer, const attn_tensor *grad_final_state,
    const attn_tensor *grad_final_normalizer, const attn_tensor *grad_query,
    const attn_tensor *grad_key, const attn_tensor *grad_value,
    const attn_tensor *grad_initial_state,
    const attn_tensor *grad_initial_normalizer, attn_thread_pool *pool);

/* attn_run_linear_backward's checks alone: fills `args` for the kernel's
 * entry points. */
ATTN_RUNTIME_EXPORT attn_status attn_prepare_linear_backward(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value, const attn_tensor *output,
    const attn_tensor *grad_output, const attn_tensor *state,
    const attn_tensor *normalizer, const attn_tensor *grad_final_state,
    const attn_tensor *grad_final_normalizer, const attn_tensor *grad_query,
    const attn_tensor *grad_key, const attn_tensor *grad_value,
    const attn_tensor *grad_initial_state,
    const attn_tensor *grad_initial_normalizer,
    attn_linear_backward_args *args);

/* Runs an additive attention kernel (kind ATTN_KERNEL_ADDITIVE;
 * docs/spec.md, "Additive attention"): O [B, Sq, Dv] of `query` [B, Sq, Dq],
 * `keys` [B, Sk, Dk] and `values` [B, Sk, Dv] with the scoring network
 * `query_weight` W_q [A, Dq], `key_weight` W_k [A, Dk] and `score_vector`
 * v [A] (all of the kernel's dtype, any strides), the keep-mask `mask`
 * [B or 1, Sq or 1, Sk] (bool; NULL for a kernel without), and for a
 * kernel with has_weights the weights [B, Sq, Sk] (f32, written; NULL
 * otherwise). The outputs must not overlap any tensor or each other.
 * Nothing is written when a check fails. */
ATTN_RUNTIME_EXPORT attn_status attn_run_additive(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *keys, const attn_tensor *values,
    const attn_tensor *query_weight, const attn_tensor *key_weight,
    const attn_tensor *score_vector, const attn_tensor *mask,
    const attn_tensor *output, const attn_tensor *weights,
    attn_thread_pool *pool);

/* attn_run_additive's checks alone: fills `args` for the kernel's entry
 * points. */
ATTN_RUNTIME_EXPORT attn_status attn_prepare_additive(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *keys, const attn_tensor *values,
    const attn_tensor *query_weight, const attn_tensor *key_weight,
    const attn_tensor *score_vector, const attn_tensor *mask,
    const attn_tensor *output, const attn_tensor *weights,
    attn_additive_args *args);

/* Runs an additive attention backward kernel (kind
 * ATTN_KERNEL_ADDITIVE_BACKWARD; docs/spec.md, "The gradient of additive
 * attention"): from the forward's `query`, `keys`, `values`, network and
 * `mask` (as attn_run_additive takes them) and `grad_output` dO [B, Sq, Dv]
 * (the kernel's dtype), writes `grad_qp` [B, Sq, A] and, per part of the
 * query rows (P = grad_kp's dim 1, at least 1), `grad_kp` [B, P, Sk, A],
 * `grad_values` [B, P, Sk, Dv] and `grad_v` [B, P, A], all f32, any
 * strides. The outputs must not overlap any tensor or each other. Nothing
 * is written when a check fails. */
ATTN_RUNTIME_EXPORT attn_status attn_run_additive_backward(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *keys, const attn_tensor *values,
    const attn_tensor *query_weight, const attn_tensor *key_weight,
    const attn_tensor *score_vector, const attn_tensor *mask,
    const attn_tensor *grad_output, const attn_tensor *grad_qp,
    const attn_tensor *grad_kp, const attn_tensor *grad_values,
    const attn_tensor *grad_v, attn_thread_pool *pool);

/* attn_run_additive_backward's checks alone: fills `args` for the kernel's
 * entry points. */
ATTN_RUNTIME_EXPORT attn_status attn_prepare_additive_backward(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *keys, const attn_tensor *values,
    const attn_tensor *query_weight, const attn_tensor *key_weight,
    const attn_tensor *score_vector, const attn_tensor *mask,
    const attn_tensor *grad_output, const attn_tensor *grad_qp,
    const attn_tensor *grad_kp, const attn_tensor *grad_values,
    const attn_tensor *grad_v, attn_additive_backward_args *args);

/* Runs a multi-head attention layer (kind ATTN_KERNEL_MHA; docs/spec.md,
 * "Multi-head attention layer"): `output` [B, Sq, E] of `query` [B, Sq, E],
 * `key` [B, Sk, Ek] and `value` [B, Sk, Ev] through the projections
 * `query_weight` W_q [E, E], `key_weight` W_k [E, Ek], `value_weight`
 * W_v [E, Ev] and `out_weight` W_o [E, E] (torch.nn.Linear's layout), the
 * biases `in_bias` [3E] and `out_bias` [E] for a kernel with has_bias (NULL
 * otherwise), and the mask [B or 1, H or 1, Sq or 1, Sk] (bool or the
 * kernel's dtype, as compiled; NULL for a kernel without). Every tensor but
 * a bool mask is of the kernel's dtype, any strides. The output must not
 * overlap any tensor. Nothing is written when a check fails. */
ATTN_RUNTIME_EXPORT attn_status attn_run_mha(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value,
    const attn_tensor *query_weight, const attn_tensor *key_weight,
    const attn_tensor *value_weight, const attn_tensor *in_bias,
    const attn_tensor *out_weight, const attn_tensor *out_bias,
    const attn_tensor *mask, const attn_tensor *output, attn_thread_pool *pool);

/* attn_run_mha's checks alone: fills `args` for the kernel's entry
 * points. */
ATTN_RUNTIME_EXPORT attn_status attn_prepare_mha(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value,
    const attn_tensor *query_weight, const attn_tensor *key_weight,
    const attn_tensor *value_weight, const attn_tensor *in_bias,
    const attn_tensor *out_weight, const attn_tensor *out_bias,
    const attn_tensor *mask, const attn_tensor *output, attn_mha_args *args);

/* Runs a weights kernel: the attention weights W [B, Hq, Sq, Sk] f32 of the
 * forward with the kernel's attributes (docs/spec.md, "Attention
 * weights"), written to `weights`, which must not overlap any other tensor.
 * `query`, `key` and `mask` are the forward's inputs; `lse` is the forward's
 * LSE (f32 [B, Hq, Sq], read) for a kernel compiled with `lse` and NULL
 * otherwise (the kernel then computes each row's own). Every check of
 * attn_run applies; nothing is written when one fails. A kernel with
 * dropout takes the forward's `dropout_p` and `dropout_seed` (the weights
 * are then the ones that multiplied V); others take 0 and any seed. */
ATTN_RUNTIME_EXPORT attn_status attn_run_weights(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *mask, const attn_tensor *lse,
    const attn_tensor *weights, float dropout_p, uint64_t dropout_seed,
    attn_thread_pool *pool);

/* attn_run_weights with its per-call inputs in `options` (dropout, and
 * the captured tensors of a kernel with modifiers); sinks, key splits and
 * grad_mask are refused. */
ATTN_RUNTIME_EXPORT attn_status attn_run_weights_with(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *mask, const attn_tensor *lse,
    const attn_tensor *weights, const attn_run_options *options,
    attn_thread_pool *pool);

/* attn_run_weights's checks alone: fills `args` for the kernel's entry
 * points (`output` is W). */
ATTN_RUNTIME_EXPORT attn_status attn_prepare_weights(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *mask, const attn_tensor *lse,
    const attn_tensor *weights, attn_kernel_args *args);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_RUNTIME_H */
