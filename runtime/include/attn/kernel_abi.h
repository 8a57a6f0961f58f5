/*===- kernel_abi.h - The binary interface of compiled attn kernels -------===*
 *
 * Every kernel that `attn-compile` emits follows this interface, whether it is
 * linked into a program directly (through the generated header) or loaded at
 * run time by the attn runtime (`attn/runtime.h`). It is plain C and needs no
 * MLIR header or library.
 *
 * A compiled library exports one symbol, `attn_library_v1`, of type
 * `attn_library`. It lists the kernels it holds; each kernel describes itself
 * (`attn_kernel_desc`: element type, head dims, masking, target CPU...) so that
 * the runtime can check a call's arguments before running it. The ABI is
 * versioned: a change that breaks compiled kernels bumps ATTN_KERNEL_ABI_VERSION
 * and the symbol's suffix.
 *
 * The work of one call is split into independent work items (one per batch,
 * query head and query tile). `work_items` says how many there are for given
 * sizes; `run` computes items [begin, end). Items may run concurrently on any
 * threads: that is how a caller uses all cores.
 *===----------------------------------------------------------------------===*/
#ifndef ATTN_KERNEL_ABI_H
#define ATTN_KERNEL_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_KERNEL_ABI_VERSION 1
/* "ATTNKRNL" as a little-endian 64-bit integer. */
#define ATTN_LIBRARY_MAGIC 0x4c4e524b4e545441ull

typedef enum attn_dtype {
  ATTN_F32 = 0,
  ATTN_F16 = 1,
  ATTN_BF16 = 2,
  ATTN_BOOL = 3 /* masks only: one byte per element, 0 = masked out */
} attn_dtype;

typedef enum attn_mask_kind {
  ATTN_MASK_NONE = 0,
  ATTN_MASK_BOOL = 1, /* keep-mask: true attends */
  ATTN_MASK_BIAS = 2  /* additive bias of the query's element type */
} attn_mask_kind;

typedef enum attn_alignment {
  ATTN_ALIGN_NONE = 0, /* neither causal nor windowed */
  ATTN_ALIGN_TOP_LEFT = 1,
  ATTN_ALIGN_BOTTOM_RIGHT = 2
} attn_alignment;

/* Marks an unbounded side of a sliding window, and a dynamic static size. */
#define ATTN_UNBOUNDED (-1)
#define ATTN_DYNAMIC (-1)

/* The arguments of one call. Tensors are in the logical [B, H, S, D] layout
 * of the spec with arbitrary element strides (a [B, S, H, D] buffer is the
 * same tensor with other strides). A mask dimension that broadcasts has
 * size 1 and, for the kernel, stride 0. */
typedef struct attn_kernel_args {
  const void *query; /* [B, Hq, Sq, D] */
  const void *key;   /* [B, Hkv, Sk, D] */
  const void *value; /* [B, Hkv, Sk, Dv] */
  const void *mask;  /* [B, Hq, Sq, Sk] read with mask_strides; or NULL */
  void *output;      /* [B, Hq, Sq, Dv] */
  float *lse;        /* [B, Hq, Sq], or NULL when the kernel has no LSE */
  int64_t batch, heads_q, heads_kv, seq_q, seq_k;
  int64_t query_strides[4];
  int64_t key_strides[4];
  int64_t value_strides[4];
  int64_t mask_strides[4];
  int64_t output_strides[4];
  int64_t lse_strides[3];
} attn_kernel_args;

typedef int64_t (*attn_work_items_fn)(const attn_kernel_args *args);
typedef void (*attn_run_fn)(const attn_kernel_args *args, int64_t begin,
                            int64_t end);

/* What a kernel computes, recorded by the compiler next to its code. */
typedef struct attn_kernel_desc {
  uint32_t abi_version; /* ATTN_KERNEL_ABI_VERSION */
  uint32_t struct_size; /* sizeof(attn_kernel_desc) when compiled */
  const char *name;
  int32_t dtype;     /* attn_dtype of Q, K, V and O */
  int32_t mask_kind; /* attn_mask_kind */
  int32_t mask_broadcast[3]; /* 1: that mask dim (B, H, Sq) may be 1 */
  int32_t causal;    /* 0 or 1 */
  int32_t alignment; /* attn_alignment */
  int32_t has_lse;   /* 0 or 1 */
  int64_t window_left, window_right; /* ATTN_UNBOUNDED or >= 0 */
  int64_t head_dim, value_dim;       /* D and Dv */
  /* B, Hq, Hkv, Sq, Sk as declared in the IR; ATTN_DYNAMIC when free. */
  int64_t static_sizes[5];
  int64_t block_q; /* query rows per work item */
  float scale;     /* the scale used; 1/sqrt(D) unless set */
  float softcap;   /* 0 when none */
  const char *target_cpu;      /* e.g. "znver4" */
  const char *target_features; /* LLVM feature string, e.g. "+avx512f,..." */
  attn_work_items_fn work_items;
  attn_run_fn run;
} attn_kernel_desc;

typedef struct attn_library {
  uint64_t magic;       /* ATTN_LIBRARY_MAGIC */
  uint32_t abi_version; /* ATTN_KERNEL_ABI_VERSION */
  uint32_t num_kernels;
  const attn_kernel_desc *const *kernels;
  const char *compiler_version;
} attn_library;

/* The exported symbol's name. */
#define ATTN_LIBRARY_SYMBOL "attn_library_v1"

/* A parallel-for supplied by the caller: runs task(task_ctx, begin, end) over
 * a partition of [0, n), possibly concurrently, and returns when all ran. */
typedef void (*attn_task_fn)(void *task_ctx, int64_t begin, int64_t end);
typedef void (*attn_parallel_for_fn)(void *pool, int64_t n, attn_task_fn task,
                                     void *task_ctx);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_KERNEL_ABI_H */
