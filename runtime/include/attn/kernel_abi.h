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
 * versioned: a change that breaks compiled kernels bumps
 *ATTN_KERNEL_ABI_VERSION and the symbol's suffix.
 *
 * The work of one call is split into independent work items (one per batch,
 * query head and query tile). `work_items` says how many there are for given
 * sizes; `run` computes items [begin, end). Items may run concurrently on any
 * threads: that is how a caller uses all cores.
 *
 * A decoding kernel may also split each work item's keys into ranges
 * (split-KV, for calls with fewer GQA groups than threads): `partial_run`
 * computes items of (work item, key range) and leaves each range's softmax
 * state in a caller's workspace, then `merge_run` combines the ranges of
 * each work item into O and LSE. Both phases take the same `splits` and
 * workspace; every partial item must finish before any merge item starts.
 *
 * A backward kernel (`kind` = ATTN_KERNEL_BACKWARD) computes the gradients
 * dQ, dK, dV of the forward with the same attributes (docs/spec.md, "The
 * gradient"): its entry points take an attn_backward_args.
 *
 * A weights kernel (`kind` = ATTN_KERNEL_WEIGHTS) writes the attention
 * weights W [B, Hq, Sq, Sk] f32 of the forward with the same attributes
 * (docs/spec.md, "Attention weights"). Its `run` and `work_items` take an
 * attn_kernel_args whose `output` (with output_strides) is W, whose `lse`
 * is read (when has_lse: the forward's LSE, else the kernel computes each
 * row's own) and whose `value` is not read; value_dim is unused.
 *
 * A linear attention kernel (`kind` = ATTN_KERNEL_LINEAR) computes
 * attn.linear (docs/spec.md, "Linear attention"): its entry points take an
 * attn_linear_args; `work_items` and `run` are NULL. Its work items are one
 * per batch and key/value head. On the GPU (`gpu` set; no entry points)
 * its grid is (ceil(Dv / block_rows), Hkv, B), block_rows being value
 * columns, and attn_gpu_linear_kernel_params lays out its parameters.
 *
 * An additive attention kernel (`kind` = ATTN_KERNEL_ADDITIVE) computes
 * attn.additive (docs/spec.md, "Additive attention"): its entry points take
 * an attn_additive_args; `work_items` and `run` are NULL. Its work items are
 * one per batch and tile of block_q query rows. `head_dim` is Dk,
 * `query_dim` Dq and `additive_dim` A; mask_broadcast[0] and [2] say whether
 * its keep-mask may broadcast over B and Sq. On the GPU (`gpu` set; no entry
 * points) its grid is (ceil(Sq / block_rows), B, 1) and
 * attn_gpu_additive_kernel_params lays out its parameters.
 *
 * An additive attention backward kernel (`kind` =
 * ATTN_KERNEL_ADDITIVE_BACKWARD) computes attn.additive_backward
 * (docs/spec.md, "The gradient of additive attention"): its entry points,
 * `additive_backward_work_items` and `additive_backward_run`, take an
 * attn_additive_backward_args; its work items are one per batch and part of
 * the query rows. Its dims are an additive kernel's.
 *
 * A linear attention backward kernel (`kind` = ATTN_KERNEL_LINEAR_BACKWARD)
 * computes attn.linear_backward, the gradients (docs/spec.md, "Gradient of
 * linear attention"; `causal` as the forward's): its entry points,
 * `linear_backward_work_items` and `linear_backward_run`, take an
 * attn_linear_backward_args; its work items are a linear kernel's (one per
 * batch and key/value head) and `has_state` says whether it reads the final
 * state's gradients and writes the initial state's.
 *
 * A multi-head attention layer (`kind` = ATTN_KERNEL_MHA) computes attn.mha
 * (docs/spec.md, "Multi-head attention layer"): its entry points take an
 * attn_mha_args; `work_items` and `run` are NULL. Its work items are one
 * per batch. `embed_dim` is E, `key_embed_dim` Ek, `value_embed_dim` Ev,
 * `num_heads` H (head_dim = value_dim = E / H); `has_bias` says whether it
 * reads in_bias and out_bias; the mask and attributes are the forward's.
 *
 * A CUDA kernel (`device` = ATTN_DEVICE_CUDA) has no `run`: its descriptor
 * points to an `attn_gpu_kernel` with the PTX or cubin image and its launch
 * shape, and `attn_gpu_kernel_params` lays out its parameters.
 *===----------------------------------------------------------------------===*/
#ifndef ATTN_KERNEL_ABI_H
#define ATTN_KERNEL_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
  ATTN_BOOL = 3, /* masks only: one byte per element, 0 = masked out */
  ATTN_I32 = 4,  /* captured tensors only (ids, buckets) */
  ATTN_I64 = 5   /* captured tensors only */
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

/* The most tensors a kernel's score and mask modifiers capture. */
#define ATTN_MAX_CAPTURES 8

/* A tensor that a kernel's score_mod or mask_mod reads (docs/spec.md,
 * "Score and mask modifiers"): its first `rank` sizes (each >= 1) and
 * element strides count, rank and element type as the kernel's
 * attn_capture_desc says. */
typedef struct attn_capture {
  const void *data;
  int64_t sizes[4];
  int64_t strides[4];
} attn_capture;

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
  /* Dropout (kernels with has_dropout; others never read these): the
   * probability in [0, 1) and the seed of the keep bits (docs/spec.md). */
  float dropout_p;
  uint64_t dropout_seed;
  /* Attention sinks (kernels with has_sinks; others never read these): one
   * f32 logit per query head, [Hq] read with sinks_strides (docs/spec.md,
   * "Attention sinks"). */
  const float *sinks;
  int64_t sinks_strides[1];
  /* The captured tensors of a kernel with modifiers (num_captures in its
   * descriptor; others never read these), in the order of its op's
   * captures(...). */
  attn_capture captures[ATTN_MAX_CAPTURES];
} attn_kernel_args;

/* The arguments of a backward call (attn.attention_backward): the forward's
 * call, whose output and lse are now read (its O and LSE), the incoming
 * gradients and the gradients the kernel writes. Strides as in
 * attn_kernel_args. */
typedef struct attn_backward_args {
  attn_kernel_args forward;
  const void *grad_output; /* dO [B, Hq, Sq, Dv] */
  const float *grad_lse;   /* dLSE [B, Hq, Sq], or NULL without one */
  void *grad_query;        /* dQ [B, Hq, Sq, D] */
  void *grad_key;          /* dK [B, Hkv, Sk, D] */
  void *grad_value;        /* dV [B, Hkv, Sk, Dv] */
  int64_t grad_output_strides[4];
  int64_t grad_lse_strides[3];
  int64_t grad_query_strides[4];
  int64_t grad_key_strides[4];
  int64_t grad_value_strides[4];
  /* For a kernel with has_grad_mask (others never read these): dM
   * [B, Hq, Sq, Sk] f32, the gradient of the scores, so of an additive
   * bias before its broadcast dims are summed. */
  float *grad_mask;
  int64_t grad_mask_strides[4];
  /* For a kernel whose grad_captures has bit n (others never read these):
   * the gradient of captured tensor n as partial sums, one row per work
   * item, row b * Hkv + hkv for batch b and key/value head hkv, each the
   * capture's elements in row-major order (contiguous), rows
   * grad_capture_row_strides[n] elements apart; written. The caller sums
   * the rows. */
  float *grad_captures[ATTN_MAX_CAPTURES];
  int64_t grad_capture_row_strides[ATTN_MAX_CAPTURES];
} attn_backward_args;

/* The arguments of a linear attention call (attn.linear): Q, K, V and O as
 * in attn_kernel_args (no mask; Sq = Sk for a causal kernel), and for a
 * kernel with has_state the initial state S0 [B, Hkv, D, Dv] and normalizer
 * z0 [B, Hkv, D] it reads and the final ones it writes (f32, any strides). */
typedef struct attn_linear_args {
  const void *query; /* [B, Hq, Sq, D] */
  const void *key;   /* [B, Hkv, Sk, D] */
  const void *value; /* [B, Hkv, Sk, Dv] */
  void *output;      /* [B, Hq, Sq, Dv] */
  const float *initial_state;
  const float *initial_normalizer;
  float *final_state;
  float *final_normalizer;
  int64_t batch, heads_q, heads_kv, seq_q, seq_k;
  int64_t query_strides[4];
  int64_t key_strides[4];
  int64_t value_strides[4];
  int64_t output_strides[4];
  int64_t initial_state_strides[4];
  int64_t initial_normalizer_strides[3];
  int64_t final_state_strides[4];
  int64_t final_normalizer_strides[3];
} attn_linear_args;

/* The arguments of a linear attention backward call
 * (attn.linear_backward): the forward's Q, K, V, its output O and dO (the
 * kernel's dtype), the state S [B, Hkv, D, Dv] and normalizer z [B, Hkv, D]
 * (f32: non-causal, the forward's final ones, which every row saw; causal,
 * its initial ones), for a kernel with
 * has_state the final state's gradients dS1, dz1 (read) and the initial
 * state's dS0, dz0 (written, f32), and dQ, dK, dV (the kernel's dtype,
 * written). Any strides. */
typedef struct attn_linear_backward_args {
  const void *query;       /* [B, Hq, Sq, D] */
  const void *key;         /* [B, Hkv, Sk, D] */
  const void *value;       /* [B, Hkv, Sk, Dv] */
  const void *output;      /* [B, Hq, Sq, Dv] */
  const void *grad_output; /* [B, Hq, Sq, Dv] */
  const float *state;
  const float *normalizer;
  const float *grad_final_state;
  const float *grad_final_normalizer;
  void *grad_query; /* [B, Hq, Sq, D] */
  void *grad_key;   /* [B, Hkv, Sk, D] */
  void *grad_value; /* [B, Hkv, Sk, Dv] */
  float *grad_initial_state;
  float *grad_initial_normalizer;
  int64_t batch, heads_q, heads_kv, seq_q, seq_k;
  int64_t query_strides[4];
  int64_t key_strides[4];
  int64_t value_strides[4];
  int64_t output_strides[4];
  int64_t grad_output_strides[4];
  int64_t state_strides[4];
  int64_t normalizer_strides[3];
  int64_t grad_final_state_strides[4];
  int64_t grad_final_normalizer_strides[3];
  int64_t grad_query_strides[4];
  int64_t grad_key_strides[4];
  int64_t grad_value_strides[4];
  int64_t grad_initial_state_strides[4];
  int64_t grad_initial_normalizer_strides[3];
} attn_linear_backward_args;

/* The arguments of an additive attention call (attn.additive): the query
 * rows, keys and values, the network's W_q, W_k and v (all of the kernel's
 * dtype), the optional keep-mask (bytes, read with mask_strides: 0 on a
 * broadcast dim), O, and for a kernel with has_weights the weights (f32). */
typedef struct attn_additive_args {
  const void *query;        /* [B, Sq, Dq] */
  const void *keys;         /* [B, Sk, Dk] */
  const void *values;       /* [B, Sk, Dv] */
  const void *query_weight; /* W_q [A, Dq] */
  const void *key_weight;   /* W_k [A, Dk] */
  const void *score_vector; /* v [A] */
  const void *mask;         /* [B, Sq, Sk], or NULL */
  void *output;             /* [B, Sq, Dv] */
  float *weights;           /* [B, Sq, Sk], or NULL */
  int64_t batch, seq_q, seq_k;
  int64_t query_strides[3];
  int64_t key_strides[3];
  int64_t value_strides[3];
  int64_t query_weight_strides[2];
  int64_t key_weight_strides[2];
  int64_t score_vector_strides[1];
  int64_t mask_strides[3];
  int64_t output_strides[3];
  int64_t weights_strides[3];
} attn_additive_args;

/* The arguments of an additive attention backward call
 * (attn.additive_backward): the forward's inputs and the network (the
 * kernel's dtype), dO (likewise), the optional keep-mask, and the f32
 * gradients it writes: grad_qp [B, Sq, A] and per part of the query rows
 * (`parts` P, dim 1) the partial sums grad_kp [B, P, Sk, A], grad_values
 * [B, P, Sk, Dv] and grad_v [B, P, A]. */
typedef struct attn_additive_backward_args {
  const void *query;        /* [B, Sq, Dq] */
  const void *keys;         /* [B, Sk, Dk] */
  const void *values;       /* [B, Sk, Dv] */
  const void *query_weight; /* W_q [A, Dq] */
  const void *key_weight;   /* W_k [A, Dk] */
  const void *score_vector; /* v [A] */
  const void *grad_output;  /* dO [B, Sq, Dv] */
  const void *mask;         /* [B, Sq, Sk], or NULL */
  float *grad_qp;           /* [B, Sq, A] */
  float *grad_kp;           /* [B, P, Sk, A] */
  float *grad_values;       /* [B, P, Sk, Dv] */
  float *grad_v;            /* [B, P, A] */
  int64_t batch, seq_q, seq_k, parts;
  int64_t query_strides[3];
  int64_t key_strides[3];
  int64_t value_strides[3];
  int64_t query_weight_strides[2];
  int64_t key_weight_strides[2];
  int64_t score_vector_strides[1];
  int64_t grad_output_strides[3];
  int64_t mask_strides[3];
  int64_t grad_qp_strides[3];
  int64_t grad_kp_strides[4];
  int64_t grad_values_strides[4];
  int64_t grad_v_strides[3];
} attn_additive_backward_args;

/* The arguments of a multi-head attention layer's call (attn.mha): the
 * query [B, Sq, E], key [B, Sk, Ek] and value [B, Sk, Ev] inputs, the
 * projections' weights in torch.nn.Linear's [out, in] layout (a packed
 * in_proj_weight [3E, E] is three views of it: rows 0..E-1, E..2E-1,
 * 2E..3E-1), the biases (NULL for a kernel without), the mask (read with
 * mask_strides: 0 on a broadcast dim), and the output; all but a bool mask
 * of the kernel's dtype. */
typedef struct attn_mha_args {
  const void *query;        /* [B, Sq, E] */
  const void *key;          /* [B, Sk, Ek] */
  const void *value;        /* [B, Sk, Ev] */
  const void *query_weight; /* W_q [E, E] */
  const void *key_weight;   /* W_k [E, Ek] */
  const void *value_weight; /* W_v [E, Ev] */
  const void *in_bias;      /* [3E] (q, k, v), or NULL */
  const void *out_weight;   /* W_o [E, E] */
  const void *out_bias;     /* [E], or NULL */
  const void *mask;         /* [B, H, Sq, Sk], or NULL */
  void *output;             /* [B, Sq, E] */
  int64_t batch, seq_q, seq_k;
  int64_t query_strides[3];
  int64_t key_strides[3];
  int64_t value_strides[3];
  int64_t query_weight_strides[2];
  int64_t key_weight_strides[2];
  int64_t value_weight_strides[2];
  int64_t in_bias_strides[1];
  int64_t out_weight_strides[2];
  int64_t out_bias_strides[1];
  int64_t mask_strides[4];
  int64_t output_strides[3];
} attn_mha_args;

/* What a kernel computes: the forward function, its gradients, its
 * attention weights, linear attention, additive attention or a multi-head
 * attention layer. */
typedef enum attn_kernel_kind {
  ATTN_KERNEL_FORWARD = 0,
  ATTN_KERNEL_BACKWARD = 1,
  ATTN_KERNEL_WEIGHTS = 2,
  ATTN_KERNEL_LINEAR = 3,
  ATTN_KERNEL_ADDITIVE = 4,
  ATTN_KERNEL_MHA = 5,
  ATTN_KERNEL_ADDITIVE_BACKWARD = 6,
  ATTN_KERNEL_LINEAR_BACKWARD = 7
} attn_kernel_kind;

/* Linear attention's feature map (attn.linear's feature_map). */
typedef enum attn_feature_map {
  ATTN_FEATURE_ELU_PLUS_ONE = 0, /* elu(x) + 1 */
  ATTN_FEATURE_RELU = 1,         /* max(x, 0) */
  ATTN_FEATURE_IDENTITY = 2      /* x */
} attn_feature_map;

typedef enum attn_device {
  ATTN_DEVICE_CPU = 0,
  ATTN_DEVICE_CUDA = 1
} attn_device;

typedef enum attn_gpu_image_format {
  ATTN_GPU_PTX = 0,  /* text, JIT-compiled by the driver for the device */
  ATTN_GPU_CUBIN = 1 /* machine code for `arch` */
} attn_gpu_image_format;

/* A CUDA kernel: its image and how to launch it for a call's sizes:
 *   grid  = (ceil(seq_q / block_rows), heads_q, batch)
 *   block = (block_threads, 1, 1)
 *   dynamic shared memory = shared_bytes (above 48 KiB the function's
 *   CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES must be raised first). */
typedef struct attn_gpu_kernel {
  const char *arch;     /* e.g. "sm_80": the oldest GPU it runs on */
  int32_t image_format; /* attn_gpu_image_format */
  const void *image;
  uint64_t image_size; /* bytes (PTX: including the terminating NUL) */
  const char *entry;   /* the kernel function's name in the image */
  int32_t block_threads, block_rows, shared_bytes;
} attn_gpu_kernel;

typedef int64_t (*attn_work_items_fn)(const attn_kernel_args *args);
typedef void (*attn_run_fn)(const attn_kernel_args *args, int64_t begin,
                            int64_t end);
/* The phases of a key split into `splits` ranges of
 * ceil(ceil(Sk / splits) / key_tile) * key_tile keys (trailing ranges may be
 * empty). `workspace` holds ATTN_SPLIT_WORKSPACE_FLOATS f32 values, dense:
 * acc [B, Hq, Sq, splits, Dv], then max and sum [B, Hq, Sq, splits]. */
typedef int64_t (*attn_split_work_items_fn)(const attn_kernel_args *args,
                                            int64_t splits);
typedef void (*attn_split_run_fn)(const attn_kernel_args *args, int64_t splits,
                                  float *workspace, int64_t begin, int64_t end);
/* A backward kernel's work items (one per batch and key/value head: each
 * writes the dQ of its query heads and its dK, dV alone). */
typedef int64_t (*attn_backward_work_items_fn)(const attn_backward_args *args);
typedef void (*attn_backward_run_fn)(const attn_backward_args *args,
                                     int64_t begin, int64_t end);
/* A linear attention kernel's work items (one per batch and key/value
 * head: each owns a state and the query heads of its group). */
typedef int64_t (*attn_linear_work_items_fn)(const attn_linear_args *args);
typedef void (*attn_linear_run_fn)(const attn_linear_args *args, int64_t begin,
                                   int64_t end);
/* An additive attention kernel's work items (one per batch and tile of
 * query rows). */
typedef int64_t (*attn_additive_work_items_fn)(const attn_additive_args *args);
typedef void (*attn_additive_run_fn)(const attn_additive_args *args,
                                     int64_t begin, int64_t end);
/* An additive attention backward kernel's work items (one per batch and
 * part of the query rows). */
typedef int64_t (*attn_additive_backward_work_items_fn)(
    const attn_additive_backward_args *args);
typedef void (*attn_additive_backward_run_fn)(
    const attn_additive_backward_args *args, int64_t begin, int64_t end);
/* A linear attention backward kernel's work items (a linear kernel's). */
typedef int64_t (*attn_linear_backward_work_items_fn)(
    const attn_linear_backward_args *args);
typedef void (*attn_linear_backward_run_fn)(
    const attn_linear_backward_args *args, int64_t begin, int64_t end);
/* A multi-head attention layer's work items (one per batch). */
typedef int64_t (*attn_mha_work_items_fn)(const attn_mha_args *args);
typedef void (*attn_mha_run_fn)(const attn_mha_args *args, int64_t begin,
                                int64_t end);
#define ATTN_SPLIT_WORKSPACE_FLOATS(args, value_dim, splits)                   \
  ((args)->batch * (args)->heads_q * (args)->seq_q * (splits) *                \
   ((value_dim) + 2))

/* A captured tensor as the kernel takes it: its element type (ATTN_F32,
 * ATTN_I32 or ATTN_I64), rank (1-4) and the sizes its IR declares
 * (ATTN_DYNAMIC where free). */
typedef struct attn_capture_desc {
  int32_t dtype;
  int32_t rank;
  int64_t static_sizes[4];
} attn_capture_desc;

/* What a kernel computes, recorded by the compiler next to its code. */
typedef struct attn_kernel_desc {
  uint32_t abi_version; /* ATTN_KERNEL_ABI_VERSION */
  uint32_t struct_size; /* sizeof(attn_kernel_desc) when compiled */
  const char *name;
  int32_t dtype;                     /* attn_dtype of Q, K, V and O */
  int32_t mask_kind;                 /* attn_mask_kind */
  int32_t mask_broadcast[3];         /* 1: that mask dim (B, H, Sq) may be 1 */
  int32_t causal;                    /* 0 or 1 */
  int32_t alignment;                 /* attn_alignment */
  int32_t has_lse;                   /* 0 or 1 */
  int64_t window_left, window_right; /* ATTN_UNBOUNDED or >= 0 */
  int64_t head_dim, value_dim;       /* D and Dv */
  /* B, Hq, Hkv, Sq, Sk as declared in the IR; ATTN_DYNAMIC when free. */
  int64_t static_sizes[5];
  int64_t block_q;               /* query rows per work item */
  float scale;                   /* the scale used; 1/sqrt(D) unless set */
  float softcap;                 /* 0 when none */
  const char *target_cpu;        /* e.g. "znver4" */
  const char *target_features;   /* LLVM feature string, e.g. "+avx512f,..." */
  attn_work_items_fn work_items; /* NULL for a GPU kernel */
  attn_run_fn run;               /* NULL for a GPU kernel */
  /* Fields a descriptor has when struct_size covers them (older CPU
   * kernels end before `device` and are CPU kernels). */
  int32_t device;             /* attn_device */
  const attn_gpu_kernel *gpu; /* the CUDA kernel; NULL on the CPU */
  /* The key split's phases, where struct_size covers them; all four NULL for
   * a kernel without them (GPU kernels, prefill, older kernels end here). */
  attn_split_work_items_fn partial_work_items; /* (work items) x splits */
  attn_split_run_fn partial_run;
  attn_split_work_items_fn merge_work_items; /* = work_items */
  attn_split_run_fn merge_run;
  /* Where struct_size covers them (older kernels end above and are forward
   * kernels): the kind, and for a backward kernel (`run` and `work_items`
   * NULL; has_lse 1: it reads the forward's LSE) whether it takes dLSE and
   * its entry points. */
  int32_t kind;         /* attn_kernel_kind */
  int32_t has_grad_lse; /* 0 or 1 */
  attn_backward_work_items_fn backward_work_items;
  attn_backward_run_fn backward_run;
  /* 0: no dropout; else it reads dropout_p and dropout_seed, and draws
   * docs/spec.md's keep bits: 2, 16 bits a position (8 positions a Philox
   * counter); 1, kernels compiled before 2026-12-03, a 32-bit word a
   * position (4 a counter): their bits differ for the same seed. */
  int32_t has_dropout;
  /* Where struct_size covers it (older kernels have no sinks, and their
   * backward kernels predate the sinks' fields in attn_kernel_args, which
   * attn_backward_args embeds: the runtime refuses those). */
  int32_t has_sinks; /* 0 or 1: reads sinks (a forward kernel only) */
  /* Where struct_size covers it: a backward kernel that also writes dM
   * (attn_backward_args::grad_mask; spec key 'dbias'). */
  int32_t has_grad_mask;
  /* Where struct_size covers them (older kernels have no modifiers, and
   * their backward kernels predate the captures in attn_kernel_args: the
   * runtime refuses those): how many tensors the kernel's score_mod and
   * mask_mod read (attn_kernel_args::captures), and what each must be. */
  int32_t num_captures;
  const struct attn_capture_desc *captures;
  /* Where struct_size covers them (older kernels are not linear): a linear
   * attention kernel's entry points, whether it reads an initial state and
   * writes the final one, its feature map (attn_feature_map), eps and rows
   * per chunk. */
  attn_linear_work_items_fn linear_work_items;
  attn_linear_run_fn linear_run;
  int32_t has_state;
  int32_t feature_map;
  float eps;
  int32_t chunk;
  /* Where struct_size covers them (older kernels are not additive): an
   * additive attention kernel's entry points, its Dq and A, and whether it
   * writes the weights. */
  attn_additive_work_items_fn additive_work_items;
  attn_additive_run_fn additive_run;
  int64_t query_dim;
  int64_t additive_dim; /* A */
  int32_t has_weights;
  /* Where struct_size covers them (older kernels are not layers): a
   * multi-head attention layer's entry points, its E, Ek, Ev, heads, and
   * whether it reads the biases. */
  attn_mha_work_items_fn mha_work_items;
  attn_mha_run_fn mha_run;
  int64_t embed_dim;       /* E */
  int64_t key_embed_dim;   /* Ek */
  int64_t value_embed_dim; /* Ev */
  int64_t num_heads;       /* H */
  int32_t has_bias;
  /* 1 for a linear attention kernel whose O is the numerator alone (spec
   * key 'unnormalized'; its eps is unused). It fills what was the struct's
   * tail padding, which older kernels' descriptors hold as 0 (normalized,
   * as they are): struct_size did not change. */
  int32_t unnormalized;
  /* Where struct_size covers them (older kernels have none): for a forward
   * kernel whose op names a block table (docs/spec.md, "Score and mask
   * modifiers" 7), the entry points that fill the table from the kernel's
   * mask_mod (attn_fill_block_table; they take the kernel's own
   * attn_kernel_args, reading only the sizes and the captures and writing
   * only the table, one work item per table row), the table's block sizes
   * QB and KB, and which capture it is. NULL, 0, 0, -1 otherwise. */
  attn_work_items_fn block_table_work_items;
  attn_run_fn block_table_run;
  int64_t block_table_rows; /* QB */
  int64_t block_table_keys; /* KB */
  int32_t block_table_capture;
  /* A backward kernel's captured tensors with a gradient (spec key
   * 'dcaptures'): bit n for capture n (attn_backward_args::grad_captures).
   * It fills what was the struct's tail padding, which older kernels'
   * descriptors hold as 0 (none): struct_size did not change. */
  uint32_t grad_captures;
  /* Where struct_size covers them (older kernels have none): an additive
   * attention backward kernel's entry points. */
  attn_additive_backward_work_items_fn additive_backward_work_items;
  attn_additive_backward_run_fn additive_backward_run;
  /* Where struct_size covers them (older kernels have none): a linear
   * attention backward kernel's entry points. */
  attn_linear_backward_work_items_fn linear_backward_work_items;
  attn_linear_backward_run_fn linear_backward_run;
} attn_kernel_desc;

typedef struct attn_library {
  uint64_t magic;       /* ATTN_LIBRARY_MAGIC */
  uint32_t abi_version; /* ATTN_KERNEL_ABI_VERSION */
  uint32_t num_kernels;
  const attn_kernel_desc *const *kernels;
  const char *compiler_version;
} attn_library;

/* The most parameters a GPU kernel takes: per tensor MLIR's descriptor of a
 * 1-D view (allocated and aligned pointer, offset, size, stride) plus its
 * sizes and strides: a backward kernel's 13 for each of ten 4-D tensors
 * (Q, K, V, mask, O, dO, dQ, dK, dV, dM), 11 each for LSE and dLSE, and up
 * to 13 for each of ATTN_MAX_CAPTURES captured tensors (a forward kernel's
 * sinks, 7, fit in the backward's dO and dQ), and dropout's probability
 * and seed. */
#define ATTN_GPU_MAX_PARAMS (154 + 13 * ATTN_MAX_CAPTURES)

/* One tensor's parameters from values[n]: MLIR's descriptor of a 1-D view
 * (pointer, pointer, 0, elements spanned, 1), then its sizes and its
 * element strides. Returns the next n. */
static inline int attn_gpu_tensor_params(const void *data, int rank,
                                         const int64_t *sizes,
                                         const int64_t *strides,
                                         uint64_t *values, int n) {
  int64_t span = 1;
  for (int i = 0; i < rank; ++i)
    if (sizes[i] > 1)
      span += (sizes[i] - 1) * (strides[i] < 0 ? -strides[i] : strides[i]);
  values[n++] = (uint64_t)(uintptr_t)data;
  values[n++] = (uint64_t)(uintptr_t)data;
  values[n++] = 0;
  values[n++] = (uint64_t)span;
  values[n++] = 1;
  for (int i = 0; i < rank; ++i)
    values[n++] = (uint64_t)sizes[i];
  for (int i = 0; i < rank; ++i)
    values[n++] = (uint64_t)strides[i];
  return n;
}

/* The tensors of an attention call's parameters from values[n], as
 * attn_gpu_kernel_params lays them out: query, key, value, [mask], the
 * modifiers' captured tensors (kernel->captures' ranks), [sinks]
 * (has_sinks), output, and the LSE where `with_lse`. Returns the next n. */
static inline int
attn_gpu_attention_tensor_params(const attn_kernel_desc *kernel,
                                 const attn_kernel_args *args, int with_lse,
                                 uint64_t values[ATTN_GPU_MAX_PARAMS], int n) {
  const int64_t d = kernel->head_dim, dv = kernel->value_dim;
  const int64_t b = args->batch, hq = args->heads_q, hkv = args->heads_kv;
  const int64_t sq = args->seq_q, sk = args->seq_k;
  struct {
    const void *data;
    int rank;
    int64_t sizes[4];
    const int64_t *strides;
    int present;
  } tensors[7 + ATTN_MAX_CAPTURES] = {
      {args->query, 4, {b, hq, sq, d}, args->query_strides, 1},
      {args->key, 4, {b, hkv, sk, d}, args->key_strides, 1},
      {args->value, 4, {b, hkv, sk, dv}, args->value_strides, 1},
      {args->mask,
       4,
       {b, hq, sq, sk},
       args->mask_strides,
       kernel->mask_kind != ATTN_MASK_NONE},
  };
  int count = 4;
  /* Older descriptors end before the captures' fields: none. */
  int32_t captures =
      kernel->struct_size >= offsetof(attn_kernel_desc, captures) +
                                 sizeof(kernel->captures)
          ? kernel->num_captures
          : 0;
  for (int32_t c = 0; c < captures && c < ATTN_MAX_CAPTURES; ++c, ++count) {
    tensors[count].data = args->captures[c].data;
    tensors[count].rank = kernel->captures[c].rank;
    for (int i = 0; i < 4; ++i)
      tensors[count].sizes[i] = args->captures[c].sizes[i];
    tensors[count].strides = args->captures[c].strides;
    tensors[count].present = 1;
  }
  /* Older descriptors end before has_sinks: none. */
  tensors[count].data = args->sinks;
  tensors[count].rank = 1;
  tensors[count].sizes[0] = hq;
  tensors[count].strides = args->sinks_strides;
  tensors[count++].present =
      kernel->struct_size >=
          offsetof(attn_kernel_desc, has_sinks) + sizeof(kernel->has_sinks) &&
      kernel->has_sinks;
  tensors[count].data = args->output;
  tensors[count].rank = 4;
  tensors[count].sizes[0] = b;
  tensors[count].sizes[1] = hq;
  tensors[count].sizes[2] = sq;
  tensors[count].sizes[3] = dv;
  tensors[count].strides = args->output_strides;
  tensors[count++].present = 1;
  tensors[count].data = args->lse;
  tensors[count].rank = 3;
  tensors[count].sizes[0] = b;
  tensors[count].sizes[1] = hq;
  tensors[count].sizes[2] = sq;
  tensors[count].strides = args->lse_strides;
  tensors[count++].present = with_lse;
  for (int t = 0; t < count; ++t)
    if (tensors[t].present)
      n = attn_gpu_tensor_params(tensors[t].data, tensors[t].rank,
                                 tensors[t].sizes, tensors[t].strides, values,
                                 n);
  return n;
}

/* Dropout's parameters from values[n] for a kernel with dropout (none
 * without): the probability, an f32 in the low 4 bytes of its slot, then
 * the 64-bit seed. Returns the next n. */
static inline int attn_gpu_dropout_params(const attn_kernel_desc *kernel,
                                          const attn_kernel_args *args,
                                          uint64_t *values, int n) {
  if (kernel->struct_size < offsetof(attn_kernel_desc, has_dropout) +
                                sizeof(kernel->has_dropout) ||
      !kernel->has_dropout)
    return n;
  uint32_t bits;
  memcpy(&bits, &args->dropout_p, sizeof(bits));
  values[n++] = bits;
  values[n++] = args->dropout_seed;
  return n;
}

/* The parameters of a GPU kernel for `args`, as cuLaunchKernel takes them:
 * `values[i]` holds parameter i (a pointer or an int64), `pointers[i]` points
 * to it. Tensors come in the order query, key, value, [mask], the modifiers'
 * captured tensors (kernel->captures' ranks), [sinks], output, [lse]; each as
 * (pointer, pointer, 0, elements spanned, 1) then its sizes and its element
 * strides; then, with dropout, its probability and seed
 * (attn_gpu_dropout_params). Returns the number of parameters. */
static inline int attn_gpu_kernel_params(const attn_kernel_desc *kernel,
                                         const attn_kernel_args *args,
                                         uint64_t values[ATTN_GPU_MAX_PARAMS],
                                         void *pointers[ATTN_GPU_MAX_PARAMS]) {
  int n = attn_gpu_attention_tensor_params(kernel, args, kernel->has_lse,
                                           values, 0);
  n = attn_gpu_dropout_params(kernel, args, values, n);
  for (int i = 0; i < n; ++i)
    pointers[i] = &values[i];
  return n;
}

/* The parameters of a backward GPU kernel (kind ATTN_KERNEL_BACKWARD, `gpu`
 * set) for `args`, as attn_gpu_kernel_params lays out an attention
 * kernel's: the forward's query, key, value, [mask], captured tensors, O and
 * LSE, then dO, [dLSE] (has_grad_lse), dQ, dK, dV, [dM] (has_grad_mask),
 * and dropout's probability and seed where it has dropout.
 * Its grid is (ceil(Sk / block_rows) + G * ceil(Sq / block_rows), Hkv, B)
 * with G = Hq / Hkv: blocks of block_rows keys (dK, dV), then of block_rows
 * query rows (dQ). Returns the number of parameters. */
static inline int attn_gpu_backward_kernel_params(
    const attn_kernel_desc *kernel, const attn_backward_args *args,
    uint64_t values[ATTN_GPU_MAX_PARAMS], void *pointers[ATTN_GPU_MAX_PARAMS]) {
  const attn_kernel_args *f = &args->forward;
  const int64_t d = kernel->head_dim, dv = kernel->value_dim;
  const int64_t b = f->batch, hq = f->heads_q, hkv = f->heads_kv;
  const int64_t sq = f->seq_q, sk = f->seq_k;
  const int64_t o[4] = {b, hq, sq, dv}, row[3] = {b, hq, sq};
  const int64_t q[4] = {b, hq, sq, d}, k[4] = {b, hkv, sk, d};
  const int64_t v[4] = {b, hkv, sk, dv}, m[4] = {b, hq, sq, sk};
  int n = attn_gpu_attention_tensor_params(kernel, f, 1, values, 0);
  n = attn_gpu_tensor_params(args->grad_output, 4, o, args->grad_output_strides,
                             values, n);
  if (kernel->has_grad_lse)
    n = attn_gpu_tensor_params(args->grad_lse, 3, row, args->grad_lse_strides,
                               values, n);
  n = attn_gpu_tensor_params(args->grad_query, 4, q, args->grad_query_strides,
                             values, n);
  n = attn_gpu_tensor_params(args->grad_key, 4, k, args->grad_key_strides,
                             values, n);
  n = attn_gpu_tensor_params(args->grad_value, 4, v, args->grad_value_strides,
                             values, n);
  if (kernel->has_grad_mask)
    n = attn_gpu_tensor_params(args->grad_mask, 4, m, args->grad_mask_strides,
                               values, n);
  n = attn_gpu_dropout_params(kernel, f, values, n);
  for (int i = 0; i < n; ++i)
    pointers[i] = &values[i];
  return n;
}

/* The parameters of a linear attention GPU kernel (kind ATTN_KERNEL_LINEAR,
 * `gpu` set) for `args`, as attn_gpu_kernel_params lays out an attention
 * kernel's: Q, K, V, [S0, z0], O, [S1, z1] (the state with has_state). Its
 * grid is (ceil(Dv / block_rows), Hkv, B): a linear kernel's block_rows are
 * value columns. Returns the number of parameters. */
static inline int attn_gpu_linear_kernel_params(
    const attn_kernel_desc *kernel, const attn_linear_args *args,
    uint64_t values[ATTN_GPU_MAX_PARAMS], void *pointers[ATTN_GPU_MAX_PARAMS]) {
  const int64_t d = kernel->head_dim, dv = kernel->value_dim;
  const int64_t b = args->batch, hq = args->heads_q, hkv = args->heads_kv;
  const int64_t q[4] = {b, hq, args->seq_q, d}, k[4] = {b, hkv, args->seq_k, d};
  const int64_t v[4] = {b, hkv, args->seq_k, dv},
                o[4] = {b, hq, args->seq_q, dv};
  const int64_t s[4] = {b, hkv, d, dv}, z[3] = {b, hkv, d};
  int n = 0;
  n = attn_gpu_tensor_params(args->query, 4, q, args->query_strides, values, n);
  n = attn_gpu_tensor_params(args->key, 4, k, args->key_strides, values, n);
  n = attn_gpu_tensor_params(args->value, 4, v, args->value_strides, values, n);
  if (kernel->has_state) {
    n = attn_gpu_tensor_params(args->initial_state, 4, s,
                               args->initial_state_strides, values, n);
    n = attn_gpu_tensor_params(args->initial_normalizer, 3, z,
                               args->initial_normalizer_strides, values, n);
  }
  n = attn_gpu_tensor_params(args->output, 4, o, args->output_strides, values,
                             n);
  if (kernel->has_state) {
    n = attn_gpu_tensor_params(args->final_state, 4, s,
                               args->final_state_strides, values, n);
    n = attn_gpu_tensor_params(args->final_normalizer, 3, z,
                               args->final_normalizer_strides, values, n);
  }
  for (int i = 0; i < n; ++i)
    pointers[i] = &values[i];
  return n;
}

/* The parameters of an additive attention GPU kernel (kind
 * ATTN_KERNEL_ADDITIVE, `gpu` set) for `args`, as attn_gpu_kernel_params
 * lays out an attention kernel's: query, keys, values, W_q, W_k, v, [mask]
 * (mask_kind), O, [weights] (has_weights). Its grid is
 * (ceil(Sq / block_rows), B, 1). Returns the number of parameters. */
static inline int attn_gpu_additive_kernel_params(
    const attn_kernel_desc *kernel, const attn_additive_args *args,
    uint64_t values[ATTN_GPU_MAX_PARAMS], void *pointers[ATTN_GPU_MAX_PARAMS]) {
  const int64_t b = args->batch, sq = args->seq_q, sk = args->seq_k;
  const int64_t a = kernel->additive_dim, dq = kernel->query_dim;
  const int64_t dk = kernel->head_dim, dv = kernel->value_dim;
  const int64_t q[3] = {b, sq, dq}, k[3] = {b, sk, dk}, v[3] = {b, sk, dv};
  const int64_t wq[2] = {a, dq}, wk[2] = {a, dk}, va[1] = {a};
  const int64_t o[3] = {b, sq, dv}, w[3] = {b, sq, sk};
  int n = 0;
  n = attn_gpu_tensor_params(args->query, 3, q, args->query_strides, values, n);
  n = attn_gpu_tensor_params(args->keys, 3, k, args->key_strides, values, n);
  n = attn_gpu_tensor_params(args->values, 3, v, args->value_strides, values,
                             n);
  n = attn_gpu_tensor_params(args->query_weight, 2, wq,
                             args->query_weight_strides, values, n);
  n = attn_gpu_tensor_params(args->key_weight, 2, wk, args->key_weight_strides,
                             values, n);
  n = attn_gpu_tensor_params(args->score_vector, 1, va,
                             args->score_vector_strides, values, n);
  if (kernel->mask_kind != ATTN_MASK_NONE)
    n = attn_gpu_tensor_params(args->mask, 3, w, args->mask_strides, values, n);
  n = attn_gpu_tensor_params(args->output, 3, o, args->output_strides, values,
                             n);
  if (kernel->has_weights)
    n = attn_gpu_tensor_params(args->weights, 3, w, args->weights_strides,
                               values, n);
  for (int i = 0; i < n; ++i)
    pointers[i] = &values[i];
  return n;
}

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
