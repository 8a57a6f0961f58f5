/*===- fake_kernels.c - A kernel library for testing the runtime ----------===*
 *
 * Stands in for a library made by attn-compile, so that the runtime's tests
 * need no compiler: it exports attn_library_v1 like a generated library, and
 * its kernels compute the spec (docs/spec.md) with
 * plain scalar f32 loops. It is written independently of the test's float64
 * reference, so the two check each other.
 *
 * One work item is one block of `block_q` query rows of one (batch, head).
 *===----------------------------------------------------------------------===*/
#include "attn/kernel_abi.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#define FAKE_EXPORT __attribute__((visibility("default")))
#define MAX_VALUE_DIM 16

//===----------------------------------------------------------------------===//
// The computation, shared by every kernel
//===----------------------------------------------------------------------===//

static int64_t blocks_of(const attn_kernel_desc *k, int64_t seq_q) {
  return (seq_q + k->block_q - 1) / k->block_q;
}

static int64_t work_items_of(const attn_kernel_desc *k,
                             const attn_kernel_args *a) {
  return a->batch * a->heads_q * blocks_of(k, a->seq_q);
}

/* The score of (i, j) after scale, soft-cap and bias; false when the position
 * is not allowed. */
static bool score(const attn_kernel_desc *k, const attn_kernel_args *a,
                  int64_t b, int64_t h, int64_t i, int64_t j, float *out) {
  const int64_t group = a->heads_q / a->heads_kv;
  const int64_t diagonal =
      k->alignment == ATTN_ALIGN_BOTTOM_RIGHT ? a->seq_k - a->seq_q : 0;
  if (k->causal && j > i + diagonal)
    return false;
  if (k->window_left != ATTN_UNBOUNDED && j < i + diagonal - k->window_left)
    return false;
  if (k->window_right != ATTN_UNBOUNDED && j > i + diagonal + k->window_right)
    return false;
  const int64_t *ms = a->mask_strides;
  int64_t mask_at = b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3];
  if (k->mask_kind == ATTN_MASK_BOOL &&
      !((const unsigned char *)a->mask)[mask_at])
    return false;

  const float *q = a->query;
  const float *key = a->key;
  const int64_t *qs = a->query_strides, *ks = a->key_strides;
  float s = 0.0f;
  for (int64_t d = 0; d < k->head_dim; ++d)
    s += q[b * qs[0] + h * qs[1] + i * qs[2] + d * qs[3]] *
         key[b * ks[0] + (h / group) * ks[1] + j * ks[2] + d * ks[3]];
  s *= k->scale;
  if (k->softcap > 0.0f)
    s = k->softcap * tanhf(s / k->softcap);
  if (k->mask_kind == ATTN_MASK_BIAS) {
    s += ((const float *)a->mask)[mask_at];
    if (s == -INFINITY)
      return false;
  }
  *out = s;
  return true;
}

static void run_rows(const attn_kernel_desc *k, const attn_kernel_args *a,
                     int64_t begin, int64_t end) {
  const int64_t blocks = blocks_of(k, a->seq_q);
  const float *v = a->value;
  float *o = a->output;
  const int64_t *vs = a->value_strides, *os = a->output_strides;
  const int64_t group = a->heads_q / a->heads_kv;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t b = item / (a->heads_q * blocks);
    const int64_t h = item / blocks % a->heads_q;
    const int64_t first = item % blocks * k->block_q;
    const int64_t last =
        first + k->block_q < a->seq_q ? first + k->block_q : a->seq_q;
    for (int64_t i = first; i < last; ++i) {
      /* Two passes: the maximum, then exp(s - max), so that no exp ever sees
       * a positive argument. */
      float max = -INFINITY, s;
      bool any = false;
      for (int64_t j = 0; j < a->seq_k; ++j)
        if (score(k, a, b, h, i, j, &s)) {
          max = any && max >= s ? max : s;
          any = true;
        }
      /* A sink is one more score with no value (docs/spec.md). */
      const float sink =
          k->has_sinks ? a->sinks[h * a->sinks_strides[0]] : -INFINITY;
      if (sink != -INFINITY) {
        max = any && max >= sink ? max : sink;
        any = true;
      }
      float sum = sink != -INFINITY ? expf(sink - max) : 0.0f;
      float acc[MAX_VALUE_DIM] = {0};
      if (any)
        for (int64_t j = 0; j < a->seq_k; ++j)
          if (score(k, a, b, h, i, j, &s)) {
            float p = expf(s - max);
            sum += p;
            for (int64_t e = 0; e < k->value_dim; ++e)
              acc[e] +=
                  p *
                  v[b * vs[0] + (h / group) * vs[1] + j * vs[2] + e * vs[3]];
          }
      for (int64_t e = 0; e < k->value_dim; ++e)
        o[b * os[0] + h * os[1] + i * os[2] + e * os[3]] =
            any ? acc[e] / sum : 0.0f;
      if (a->lse) {
        const int64_t *ls = a->lse_strides;
        a->lse[b * ls[0] + h * ls[1] + i * ls[2]] =
            any ? max + logf(sum) : -INFINITY;
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// The kernels
//===----------------------------------------------------------------------===//

/* Each kernel needs its own entry points that know their descriptor, as a
 * generated kernel's code does. */
#define FAKE_KERNEL(ident)                                                     \
  static const attn_kernel_desc ident;                                         \
  static int64_t ident##_work_items(const attn_kernel_args *a) {               \
    return work_items_of(&ident, a);                                           \
  }                                                                            \
  static void ident##_run(const attn_kernel_args *a, int64_t begin,            \
                          int64_t end) {                                       \
    run_rows(&ident, a, begin, end);                                           \
  }

#define DYNAMIC_SIZES                                                          \
  { ATTN_DYNAMIC, ATTN_DYNAMIC, ATTN_DYNAMIC, ATTN_DYNAMIC, ATTN_DYNAMIC }

FAKE_KERNEL(fake_plain)
FAKE_KERNEL(fake_causal_mask)
FAKE_KERNEL(fake_bias_window)
FAKE_KERNEL(fake_static)
FAKE_KERNEL(fake_avx512)
FAKE_KERNEL(fake_amx)
FAKE_KERNEL(fake_sinks)

/* No mask, LSE, D = Dv = 4. */
static const attn_kernel_desc fake_plain = {
    .abi_version = ATTN_KERNEL_ABI_VERSION,
    .struct_size = sizeof(attn_kernel_desc),
    .name = "fake_plain",
    .dtype = ATTN_F32,
    .mask_kind = ATTN_MASK_NONE,
    .alignment = ATTN_ALIGN_NONE,
    .has_lse = 1,
    .window_left = ATTN_UNBOUNDED,
    .window_right = ATTN_UNBOUNDED,
    .head_dim = 4,
    .value_dim = 4,
    .static_sizes = DYNAMIC_SIZES,
    .block_q = 2,
    .scale = 0.5f, /* 1/sqrt(4) */
    .target_cpu = "generic",
    .target_features = "",
    .work_items = fake_plain_work_items,
    .run = fake_plain_run};

/* A bool keep-mask broadcast over any of B, H, Sq; causal, top-left; no LSE. */
static const attn_kernel_desc fake_causal_mask = {
    .abi_version = ATTN_KERNEL_ABI_VERSION,
    .struct_size = sizeof(attn_kernel_desc),
    .name = "fake_causal_mask",
    .dtype = ATTN_F32,
    .mask_kind = ATTN_MASK_BOOL,
    .mask_broadcast = {1, 1, 1},
    .causal = 1,
    .alignment = ATTN_ALIGN_TOP_LEFT,
    .has_lse = 0,
    .window_left = ATTN_UNBOUNDED,
    .window_right = ATTN_UNBOUNDED,
    .head_dim = 4,
    .value_dim = 4,
    .static_sizes = DYNAMIC_SIZES,
    .block_q = 3,
    .scale = 0.5f,
    .target_cpu = "generic",
    .target_features = NULL,
    .work_items = fake_causal_mask_work_items,
    .run = fake_causal_mask_run};

/* An additive bias broadcast over B only; a (2, 1) sliding window aligned
 * bottom-right; soft-capping; LSE; D = 4 and Dv = 3 differ. */
static const attn_kernel_desc fake_bias_window = {
    .abi_version = ATTN_KERNEL_ABI_VERSION,
    .struct_size = sizeof(attn_kernel_desc),
    .name = "fake_bias_window",
    .dtype = ATTN_F32,
    .mask_kind = ATTN_MASK_BIAS,
    .mask_broadcast = {1, 0, 0},
    .causal = 0,
    .alignment = ATTN_ALIGN_BOTTOM_RIGHT,
    .has_lse = 1,
    .window_left = 2,
    .window_right = 1,
    .head_dim = 4,
    .value_dim = 3,
    .static_sizes = DYNAMIC_SIZES,
    .block_q = 1,
    .scale = 0.3f,
    .softcap = 2.0f,
    .target_cpu = "generic",
    .target_features = "-avx512f",
    .work_items = fake_bias_window_work_items,
    .run = fake_bias_window_run};

/* fake_plain specialized for Hq = 4, Hkv = 2. */
static const attn_kernel_desc fake_static = {
    .abi_version = ATTN_KERNEL_ABI_VERSION,
    .struct_size = sizeof(attn_kernel_desc),
    .name = "fake_static",
    .dtype = ATTN_F32,
    .mask_kind = ATTN_MASK_NONE,
    .has_lse = 1,
    .window_left = ATTN_UNBOUNDED,
    .window_right = ATTN_UNBOUNDED,
    .head_dim = 4,
    .value_dim = 4,
    .static_sizes = {ATTN_DYNAMIC, 4, 2, ATTN_DYNAMIC, ATTN_DYNAMIC},
    .block_q = 2,
    .scale = 0.5f,
    .target_cpu = "generic",
    .target_features = "",
    .work_items = fake_static_work_items,
    .run = fake_static_run};

/* Compiled "for" AVX-512, as the CPU kernels are on Zen 4. */
static const attn_kernel_desc fake_avx512 = {
    .abi_version = ATTN_KERNEL_ABI_VERSION,
    .struct_size = sizeof(attn_kernel_desc),
    .name = "fake_avx512",
    .dtype = ATTN_F32,
    .mask_kind = ATTN_MASK_NONE,
    .has_lse = 1,
    .window_left = ATTN_UNBOUNDED,
    .window_right = ATTN_UNBOUNDED,
    .head_dim = 4,
    .value_dim = 4,
    .static_sizes = DYNAMIC_SIZES,
    .block_q = 2,
    .scale = 0.5f,
    .target_cpu = "znver4",
    .target_features = "+avx512f,+avx512bw,+fma,+avx2,-amx-tile,+evex512",
    .work_items = fake_avx512_work_items,
    .run = fake_avx512_run};

/* Compiled "for" AMX, which Zen 4 lacks. */
static const attn_kernel_desc fake_amx = {
    .abi_version = ATTN_KERNEL_ABI_VERSION,
    .struct_size = sizeof(attn_kernel_desc),
    .name = "fake_amx",
    .dtype = ATTN_F32,
    .mask_kind = ATTN_MASK_NONE,
    .has_lse = 1,
    .window_left = ATTN_UNBOUNDED,
    .window_right = ATTN_UNBOUNDED,
    .head_dim = 4,
    .value_dim = 4,
    .static_sizes = DYNAMIC_SIZES,
    .block_q = 2,
    .scale = 0.5f,
    .target_cpu = "sapphirerapids",
    .target_features = "+avx512f,+amx-tile,+amx-bf16",
    .work_items = fake_amx_work_items,
    .run = fake_amx_run};

/* fake_plain with a sink logit per query head. */
static const attn_kernel_desc fake_sinks = {
    .abi_version = ATTN_KERNEL_ABI_VERSION,
    .struct_size = sizeof(attn_kernel_desc),
    .name = "fake_sinks",
    .dtype = ATTN_F32,
    .mask_kind = ATTN_MASK_NONE,
    .alignment = ATTN_ALIGN_NONE,
    .has_lse = 1,
    .window_left = ATTN_UNBOUNDED,
    .window_right = ATTN_UNBOUNDED,
    .head_dim = 4,
    .value_dim = 4,
    .static_sizes = DYNAMIC_SIZES,
    .block_q = 2,
    .scale = 0.5f,
    .target_cpu = "generic",
    .target_features = "",
    .work_items = fake_sinks_work_items,
    .run = fake_sinks_run,
    .has_sinks = 1};

static const attn_kernel_desc *const fake_kernels[] = {
    &fake_plain,  &fake_causal_mask, &fake_bias_window, &fake_static,
    &fake_avx512, &fake_amx,         &fake_sinks};

FAKE_EXPORT const attn_library attn_library_v1 = {
    .magic = ATTN_LIBRARY_MAGIC,
    .abi_version = ATTN_KERNEL_ABI_VERSION,
    .num_kernels = sizeof(fake_kernels) / sizeof(fake_kernels[0]),
    .kernels = fake_kernels,
    .compiler_version = "fake_kernels (test)"};
