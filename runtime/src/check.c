/*===- check.c - Checking a call's tensors against a kernel ----------------===*
 *
 * attn_prepare: everything a compiled kernel assumes and cannot check itself.
 * A kernel indexes its tensors with the strides it is given and no bounds, so
 * every shape, element type, stride and buffer extent is checked here, before
 * any kernel code runs. Each refusal names the tensor, the dimension, what
 * was expected and what was found.
 *
 * The checks run in a fixed order of concerns (missing tensors, ranks and
 * element types, sizes, shapes against each other and against the kernel,
 * then memory: extents, aliasing within the outputs, overlap between the
 * outputs and everything else), so that the first message is the most basic
 * thing wrong.
 *===----------------------------------------------------------------------===*/
#include "internal.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

attn_tensor attn_tensor_contiguous(void *data, attn_dtype dtype, int32_t rank,
                                   const int64_t *shape) {
  attn_tensor t;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.dtype = dtype;
  t.rank = rank;
  if (rank < 0 || rank > 4 || !shape)
    return t; /* attn_prepare refuses the rank */
  /* A product that overflows saturates, so that attn_prepare still sees a
   * tensor too large to address rather than a wrapped, plausible stride. */
  int64_t stride = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    t.shape[d] = shape[d];
    t.strides[d] = stride;
    int64_t size = shape[d] > 1 ? shape[d] : 1;
    if (__builtin_mul_overflow(stride, size, &stride))
      stride = INT64_MAX;
  }
  return t;
}

//===----------------------------------------------------------------------===//
// One tensor at a time
//===----------------------------------------------------------------------===//

/* A tensor's part in the call, for checks and messages. */
typedef struct role {
  const char *name;
  int32_t rank;
  const char *dims[4];
  const char *shape_text;
} role;

static const role query_role = {
    "query", 4, {"B", "Hq", "Sq", "D"}, "[B, Hq, Sq, D]"};
static const role key_role = {
    "key", 4, {"B", "Hkv", "Sk", "D"}, "[B, Hkv, Sk, D]"};
static const role value_role = {
    "value", 4, {"B", "Hkv", "Sk", "Dv"}, "[B, Hkv, Sk, Dv]"};
static const role mask_role = {
    "mask", 4, {"B", "H", "Sq", "Sk"}, "[B or 1, Hq or 1, Sq or 1, Sk]"};
static const role output_role = {
    "output", 4, {"B", "Hq", "Sq", "Dv"}, "[B, Hq, Sq, Dv]"};
static const role lse_role = {"lse", 3, {"B", "Hq", "Sq", NULL}, "[B, Hq, Sq]"};
static const role sinks_role = {"sinks", 1, {"Hq", NULL, NULL, NULL}, "[Hq]"};

static size_t element_size(int32_t dtype) {
  switch (dtype) {
  case ATTN_F32:
    return 4;
  case ATTN_F16:
  case ATTN_BF16:
    return 2;
  case ATTN_BOOL:
    return 1;
  case ATTN_I32:
    return 4;
  case ATTN_I64:
    return 8;
  }
  return 0;
}

/* "[a, b, c]" of a tensor's first `rank` sizes or strides, for messages. */
static const char *format_dims(char *buffer, size_t size, const int64_t *dims,
                               int32_t rank) {
  size_t used = (size_t)snprintf(buffer, size, "[");
  for (int32_t d = 0; d < rank && used < size; ++d)
    used += (size_t)snprintf(buffer + used, size - used, "%s%" PRId64,
                             d ? ", " : "", dims[d]);
  if (used < size)
    snprintf(buffer + used, size - used, "]");
  return buffer;
}

static attn_status check_rank_and_dtype(const attn_tensor *t, const role *r,
                                        int32_t dtype, const char *dtype_why) {
  if (t->rank != r->rank)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "%s: rank is %" PRId32 " but must be %" PRId32 " %s",
                     r->name, t->rank, r->rank, r->shape_text);
  if ((int32_t)t->dtype != dtype)
    return attn_fail(
        ATTN_ERROR_INVALID_ARGUMENT, "%s: element type is %s but %s %s",
        r->name, attn_dtype_name(t->dtype), dtype_why, attn_dtype_name(dtype));
  return ATTN_OK;
}

/* Sizes are not negative, the element count fits in 64 bits, and data is
 * NULL only for a tensor without elements. */
static attn_status check_sizes_and_data(const attn_tensor *t, const role *r) {
  for (int32_t d = 0; d < r->rank; ++d)
    if (t->shape[d] < 0)
      return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                       "%s: dim %" PRId32 " (%s) is %" PRId64
                       " but sizes must be >= 0",
                       r->name, d, r->dims[d], t->shape[d]);
  int64_t elements = 1;
  bool overflows = false;
  for (int32_t d = 0; d < r->rank; ++d)
    overflows |= __builtin_mul_overflow(elements, t->shape[d], &elements);
  bool empty = false;
  for (int32_t d = 0; d < r->rank; ++d)
    empty |= t->shape[d] == 0;
  if (overflows && !empty) {
    char shape[128];
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "%s: shape %s has more elements than fit in 64 bits (the "
                     "element count overflows)",
                     r->name,
                     format_dims(shape, sizeof(shape), t->shape, r->rank));
  }
  if (!t->data && !empty)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "%s: data is NULL but the tensor has %" PRId64 " elements",
                     r->name, elements);
  return ATTN_OK;
}

//===----------------------------------------------------------------------===//
// Shapes against each other and against the kernel
//===----------------------------------------------------------------------===//

static attn_status expect_size(const attn_tensor *t, const role *r, int32_t d,
                               const char *whose, int64_t expected) {
  if (t->shape[d] == expected)
    return ATTN_OK;
  return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                   "%s: dim %" PRId32 " (%s) is %" PRId64 " but %s %s=%" PRId64,
                   r->name, d, r->dims[d], t->shape[d], whose, r->dims[d],
                   expected);
}

/* A mask dim of the query's size `full`, or 1 where the kernel broadcasts
 * it (or where `full` is 1 anyway). */
static attn_status check_mask_dim(const attn_kernel_desc *k,
                                  const attn_tensor *mask, int32_t d,
                                  const char *full_name, int64_t full) {
  int64_t size = mask->shape[d];
  if (size == full)
    return ATTN_OK;
  bool may_broadcast = k->mask_broadcast[d] != 0;
  if (size == 1 && may_broadcast)
    return ATTN_OK;
  if (size == 1)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "mask: dim %" PRId32 " (%s) is 1 but kernel '%s' was not "
                     "compiled to broadcast the mask over %s; it must be "
                     "query's %s=%" PRId64,
                     d, mask_role.dims[d], k->name, mask_role.dims[d],
                     full_name, full);
  return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                   "mask: dim %" PRId32 " (%s) is %" PRId64
                   " but must be query's %s=%" PRId64 "%s",
                   d, mask_role.dims[d], size, full_name, full,
                   may_broadcast ? " or 1" : "");
}

/* The global indices a kernel computes with (a score_mod's or mask_mod's b,
 * h, q_idx and kv_idx, dropout's counter) lie below 2^31 (docs/spec.md): a
 * larger size is refused, never wrapped. */
static attn_status check_index_range(const int64_t sizes[4]) {
  static const char *const names[4] = {"B", "Hq", "Sq", "Sk"};
  for (int d = 0; d < 4; ++d)
    if (sizes[d] > INT32_MAX)
      return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                       "%s is %" PRId64 " but attn's kernels index positions "
                       "below 2^31 (at most %" PRId32 ")",
                       names[d], sizes[d], INT32_MAX);
  return ATTN_OK;
}

/* The shapes of a call against one another and the kernel; V and O may be
 * NULL (a weights call has neither). */
static attn_status check_shapes(const attn_kernel_desc *k, const attn_tensor *q,
                                const attn_tensor *key, const attn_tensor *v,
                                const attn_tensor *mask, const attn_tensor *o,
                                const attn_tensor *lse) {
  attn_status s;
  const int64_t batch = q->shape[0], heads_q = q->shape[1], seq_q = q->shape[2];
  char compiled_for[160];
  snprintf(compiled_for, sizeof(compiled_for), "kernel '%s' was compiled for",
           k->name);

  if ((s = expect_size(q, &query_role, 3, compiled_for, k->head_dim)))
    return s;

  if ((s = expect_size(key, &key_role, 0, "query's", batch)))
    return s;
  const int64_t heads_kv = key->shape[1], seq_k = key->shape[2];
  if (heads_kv < 1)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "key: dim 1 (Hkv) is 0 but at least one key/value head "
                     "is needed");
  if (heads_q % heads_kv != 0)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "key: dim 1 (Hkv) is %" PRId64 " but query's Hq=%" PRId64
                     " is not a multiple of it",
                     heads_kv, heads_q);
  if ((s = expect_size(key, &key_role, 3, compiled_for, k->head_dim)))
    return s;
  const int64_t index_sizes[4] = {batch, heads_q, seq_q, seq_k};
  if ((s = check_index_range(index_sizes)))
    return s;

  if (v && ((s = expect_size(v, &value_role, 0, "query's", batch)) ||
            (s = expect_size(v, &value_role, 1, "key's", heads_kv)) ||
            (s = expect_size(v, &value_role, 2, "key's", seq_k)) ||
            (s = expect_size(v, &value_role, 3, compiled_for, k->value_dim))))
    return s;

  if (mask) {
    if ((s = check_mask_dim(k, mask, 0, "B", batch)) ||
        (s = check_mask_dim(k, mask, 1, "Hq", heads_q)) ||
        (s = check_mask_dim(k, mask, 2, "Sq", seq_q)) ||
        (s = expect_size(mask, &mask_role, 3, "key's", seq_k)))
      return s;
  }

  if (o && ((s = expect_size(o, &output_role, 0, "query's", batch)) ||
            (s = expect_size(o, &output_role, 1, "query's", heads_q)) ||
            (s = expect_size(o, &output_role, 2, "query's", seq_q)) ||
            (s = expect_size(o, &output_role, 3, compiled_for, k->value_dim))))
    return s;

  if (lse) {
    if ((s = expect_size(lse, &lse_role, 0, "query's", batch)) ||
        (s = expect_size(lse, &lse_role, 1, "query's", heads_q)) ||
        (s = expect_size(lse, &lse_role, 2, "query's", seq_q)))
      return s;
  }

  /* Sizes the kernel was specialized for; its code may rely on them. */
  static const char *const static_names[5] = {"B", "Hq", "Hkv", "Sq", "Sk"};
  const attn_tensor *static_tensor[5] = {q, q, key, q, key};
  const role *static_role[5] = {&query_role, &query_role, &key_role,
                                &query_role, &key_role};
  const int32_t static_dim[5] = {0, 1, 1, 2, 2};
  for (int i = 0; i < 5; ++i) {
    int64_t expected = k->static_sizes[i];
    int64_t actual = static_tensor[i]->shape[static_dim[i]];
    if (expected != ATTN_DYNAMIC && actual != expected)
      return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                       "%s: dim %" PRId32 " (%s) is %" PRId64
                       " but kernel '%s' was compiled for %s=%" PRId64 " only",
                       static_role[i]->name, static_dim[i], static_names[i],
                       actual, k->name, static_names[i], expected);
  }
  return ATTN_OK;
}

//===----------------------------------------------------------------------===//
// Memory: extents, aliasing, overlap
//===----------------------------------------------------------------------===//

/* The bytes [begin, end) that a tensor's elements lie in; empty for a tensor
 * without elements. */
typedef struct extent {
  bool empty;
  uintptr_t begin, end;
} extent;

static attn_status overflow_error(const attn_tensor *t, const role *r) {
  char shape[128], strides[160];
  return attn_fail(
      ATTN_ERROR_INVALID_ARGUMENT,
      "%s: shape %s with strides %s spans more bytes than the address space "
      "holds (the extent overflows)",
      r->name, format_dims(shape, sizeof(shape), t->shape, r->rank),
      format_dims(strides, sizeof(strides), t->strides, r->rank));
}

static attn_status compute_extent(const attn_tensor *t, const role *r,
                                  extent *out) {
  out->empty = false;
  for (int32_t d = 0; d < r->rank; ++d)
    if (t->shape[d] == 0) {
      out->empty = true;
      out->begin = out->end = 0;
      return ATTN_OK;
    }
  /* Lowest and highest element offsets, then bytes, then addresses; each
   * step checked, since a wrapped value would pass every later check. */
  int64_t low = 0, high = 0;
  for (int32_t d = 0; d < r->rank; ++d) {
    int64_t step;
    if (t->shape[d] == 1)
      continue;
    if (__builtin_mul_overflow(t->strides[d], t->shape[d] - 1, &step) ||
        __builtin_add_overflow(step < 0 ? low : high, step,
                               step < 0 ? &low : &high))
      return overflow_error(t, r);
  }
  int64_t elem = (int64_t)element_size(t->dtype);
  int64_t low_bytes, high_bytes;
  if (__builtin_mul_overflow(low, elem, &low_bytes) ||
      __builtin_mul_overflow(high, elem, &high_bytes) ||
      __builtin_add_overflow(high_bytes, elem, &high_bytes))
    return overflow_error(t, r);
  uintptr_t base = (uintptr_t)t->data;
  uint64_t below = 0 - (uint64_t)low_bytes; /* low_bytes <= 0 */
  if (below > base ||
      __builtin_add_overflow(base, (uint64_t)high_bytes, &out->end))
    return overflow_error(t, r);
  out->begin = base - below;
  return ATTN_OK;
}

/* An output element written twice from two index tuples would make the
 * result depend on the order the kernel's threads run in. Sorted by |stride|,
 * each dim must step past everything the smaller dims reach. This is
 * sufficient, and necessary for the layouts people use; an exotic
 * interleaving that is disjoint but fails it is refused, never miscomputed. */
static attn_status check_no_self_overlap(const attn_tensor *t, const role *r) {
  int32_t order[4], n = 0;
  for (int32_t d = 0; d < r->rank; ++d) {
    if (t->shape[d] <= 1)
      continue;
    if (t->strides[d] == 0)
      return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                       "%s: dim %" PRId32 " (%s) has stride 0 but size %" PRId64
                       ", so distinct %s elements would share memory",
                       r->name, d, r->dims[d], t->shape[d], r->name);
    order[n++] = d;
  }
  uint64_t magnitude[4];
  for (int32_t d = 0; d < r->rank; ++d)
    magnitude[d] = t->strides[d] < 0 ? 0 - (uint64_t)t->strides[d]
                                     : (uint64_t)t->strides[d];
  for (int32_t i = 1; i < n; ++i)
    for (int32_t j = i; j > 0 && magnitude[order[j]] < magnitude[order[j - 1]];
         --j) {
      int32_t swap = order[j];
      order[j] = order[j - 1];
      order[j - 1] = swap;
    }
  uint64_t reach = 0; /* the largest offset the smaller dims span */
  for (int32_t i = 0; i < n; ++i) {
    int32_t d = order[i];
    if (magnitude[d] <= reach) {
      char strides[160];
      return attn_fail(
          ATTN_ERROR_INVALID_ARGUMENT,
          "%s: strides %s make distinct elements share memory: dim %" PRId32
          " (%s) has stride %" PRId64 " but the dims with smaller strides "
          "already span %" PRIu64 " elements",
          r->name, format_dims(strides, sizeof(strides), t->strides, r->rank),
          d, r->dims[d], t->strides[d], reach + 1);
    }
    uint64_t step;
    if (__builtin_mul_overflow(magnitude[d], (uint64_t)(t->shape[d] - 1),
                               &step) ||
        __builtin_add_overflow(reach, step, &reach))
      return overflow_error(t, r);
  }
  return ATTN_OK;
}

static attn_status check_disjoint(const char *written, const extent *a,
                                  const char *other, const extent *b) {
  if (a->empty || b->empty || a->end <= b->begin || b->end <= a->begin)
    return ATTN_OK;
  return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                   "%s overlaps %s: %s occupies bytes [0x%" PRIxPTR
                   ", 0x%" PRIxPTR ") and %s [0x%" PRIxPTR ", 0x%" PRIxPTR ")",
                   written, other, written, a->begin, a->end, other, b->begin,
                   b->end);
}

//===----------------------------------------------------------------------===//
// attn_prepare
//===----------------------------------------------------------------------===//

static const char *mask_kind_text(int32_t kind) {
  return kind == ATTN_MASK_BOOL ? "a bool keep-mask" : "an additive bias mask";
}

/* "<role>: tensor is NULL" for the first of `count` required tensors that
 * is missing. */
static attn_status check_required(const attn_tensor *const *tensors,
                                  const role *const *roles, int count) {
  for (int i = 0; i < count; ++i)
    if (!tensors[i])
      return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "%s: tensor is NULL",
                       roles[i]->name);
  return ATTN_OK;
}

/* Each present tensor on its own: rank, element type (`why` says why it
 * must be `dtypes[i]`), sizes and data. */
static attn_status check_each(const attn_tensor *const *tensors,
                              const role *const *roles, const int32_t *dtypes,
                              const char *const *why, int count) {
  for (int i = 0; i < count; ++i) {
    if (!tensors[i])
      continue;
    attn_status s =
        check_rank_and_dtype(tensors[i], roles[i], dtypes[i], why[i]);
    if (s == ATTN_OK)
      s = check_sizes_and_data(tensors[i], roles[i]);
    if (s != ATTN_OK)
      return s;
  }
  return ATTN_OK;
}

/* The extents of `count` tensors (empty for an absent one). */
static attn_status compute_extents(const attn_tensor *const *tensors,
                                   const role *const *roles, extent *extents,
                                   int count) {
  for (int i = 0; i < count; ++i) {
    extents[i].empty = true;
    attn_status s;
    if (tensors[i] && (s = compute_extent(tensors[i], roles[i], &extents[i])))
      return s;
  }
  return ATTN_OK;
}

/* Whether two tensors are the same memory with the same layout. */
static bool same_tensor(const attn_tensor *a, const attn_tensor *b) {
  if (!a || !b || a->data != b->data || a->rank != b->rank)
    return false;
  for (int32_t d = 0; d < a->rank; ++d)
    if (a->shape[d] != b->shape[d] || a->strides[d] != b->strides[d])
      return false;
  return true;
}

/* The memory of the tensors a call writes, all[written[i]] for i < n: each
 * without self-overlap and disjoint from every other of the `count`
 * tensors, except that it may be exactly all[alias[i]] (the same memory
 * with the same layout: updated in place; -1 for none). */
static attn_status check_written(const attn_tensor *const *all,
                                 const role *const *roles, int count,
                                 const int *written, const int *alias, int n) {
  extent extents[16];
  attn_status s;
  if (count > 16)
    return attn_fail(ATTN_ERROR_INTERNAL, "check_written: %d tensors", count);
  if ((s = compute_extents(all, roles, extents, count)))
    return s;
  for (int i = 0; i < n; ++i) {
    int w = written[i];
    if (!all[w])
      continue;
    if (!extents[w].empty && (s = check_no_self_overlap(all[w], roles[w])))
      return s;
    for (int o = 0; o < count; ++o) {
      if (o == w || (o == alias[i] && same_tensor(all[w], all[o])))
        continue;
      if ((s = check_disjoint(roles[w]->name, &extents[w], roles[o]->name,
                              &extents[o])))
        return s;
    }
  }
  return ATTN_OK;
}

/* A mask exactly where the kernel takes one. */
static attn_status check_mask_presence(const attn_kernel_desc *k,
                                       const attn_tensor *mask) {
  if (k->mask_kind == ATTN_MASK_NONE && mask)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "mask: kernel '%s' takes no mask but one was given",
                     k->name);
  if (k->mask_kind != ATTN_MASK_NONE && !mask)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "mask: kernel '%s' needs %s %s but mask is NULL", k->name,
                     mask_kind_text(k->mask_kind), mask_role.shape_text);
  return ATTN_OK;
}

int attn_kernel_has_sinks(const attn_kernel_desc *kernel) {
  return kernel &&
         kernel->struct_size >= offsetof(attn_kernel_desc, has_sinks) +
                                    sizeof(kernel->has_sinks) &&
         kernel->has_sinks != 0;
}

attn_status attn_sinks_needed(const attn_kernel_desc *k) {
  return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                   "sinks: kernel '%s' takes attention sinks %s; pass them "
                   "with attn_run_with or attn_prepare_with",
                   k->name, sinks_role.shape_text);
}

//===----------------------------------------------------------------------===//
// The tensors that modifiers capture
//===----------------------------------------------------------------------===//

int32_t attn_kernel_num_captures(const attn_kernel_desc *kernel) {
  if (!kernel || kernel->struct_size < offsetof(attn_kernel_desc, captures) +
                                           sizeof(kernel->captures))
    return 0;
  return kernel->num_captures;
}

attn_status attn_captures_needed(const attn_kernel_desc *k) {
  return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                   "captures: kernel '%s' has modifiers that read %" PRId32
                   " captured tensors; pass them in attn_run_options "
                   "(attn_run_with, attn_run_backward_with)",
                   k->name, attn_kernel_num_captures(k));
}

attn_status attn_prepare_captures(const attn_kernel_desc *k,
                                  const attn_tensor *captures, int32_t count,
                                  const attn_tensor *const *written,
                                  int num_written, attn_kernel_args *args) {
  int32_t expected = attn_kernel_num_captures(k);
  if (count != expected || (count > 0 && !captures))
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "captures: kernel '%s' reads %" PRId32
                     " captured tensors but %" PRId32 " were given%s",
                     k->name, expected, count,
                     count > 0 && !captures ? " (and captures is NULL)" : "");
  for (int32_t i = 0; i < count; ++i) {
    const attn_tensor *t = &captures[i];
    const attn_capture_desc *want = &k->captures[i];
    char name[32], shape_text[64];
    snprintf(name, sizeof(name), "capture %" PRId32, i);
    snprintf(shape_text, sizeof(shape_text), "of rank %" PRId32, want->rank);
    role r = {name, want->rank, {"0", "1", "2", "3"}, shape_text};
    char why[160];
    snprintf(why, sizeof(why), "kernel '%s' takes", k->name);
    attn_status s = check_rank_and_dtype(t, &r, want->dtype, why);
    if (s == ATTN_OK)
      s = check_sizes_and_data(t, &r);
    if (s != ATTN_OK)
      return s;
    for (int32_t d = 0; d < want->rank; ++d) {
      /* Indices are clamped into [0, size - 1]: every dim needs an element. */
      if (t->shape[d] < 1)
        return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                         "%s: dim %" PRId32 " is %" PRId64
                         " but a captured tensor needs at least one element "
                         "in every dim (its indices are clamped into it)",
                         name, d, t->shape[d]);
      if (want->static_sizes[d] >= 0 && t->shape[d] != want->static_sizes[d])
        return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                         "%s: dim %" PRId32 " is %" PRId64 " but kernel '%s' "
                         "was compiled for %" PRId64,
                         name, d, t->shape[d], k->name, want->static_sizes[d]);
      if (t->strides[d] < 0)
        return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                         "%s: stride %" PRId32 " is %" PRId64
                         " but a captured tensor's strides must be >= 0",
                         name, d, t->strides[d]);
    }
    extent e;
    if ((s = compute_extent(t, &r, &e)))
      return s;
    for (int w = 0; w < num_written; ++w) {
      extent out;
      if (!written[w] ||
          compute_extent(written[w], &output_role, &out) != ATTN_OK)
        continue; /* checked with its own role before */
      if ((s = check_disjoint("an output", &out, name, &e)))
        return s;
    }
    args->captures[i].data = t->data;
    for (int32_t d = 0; d < want->rank; ++d) {
      args->captures[i].sizes[d] = t->shape[d];
      args->captures[i].strides[d] = t->strides[d];
    }
  }
  return ATTN_OK;
}

attn_status attn_prepare_block_table(const attn_kernel_desc *k, int64_t batch,
                                     int64_t heads_q, int64_t seq_q,
                                     int64_t seq_k, const attn_tensor *captures,
                                     int32_t count, attn_kernel_args *args) {
  if (!attn_kernel_has_block_table(k))
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s' has no block table to fill (only a CPU "
                     "forward kernel whose op names one, attn.block_mask, "
                     "compiled by this attn-compile, has)",
                     k->name);
  memset(args, 0, sizeof(*args));
  const int64_t sizes[4] = {batch, heads_q, seq_q, seq_k};
  const char *names[4] = {"batch", "heads_q", "seq_q", "seq_k"};
  const int static_index[4] = {0, 1, 3, 4};
  for (int d = 0; d < 4; ++d) {
    if (sizes[d] < 0)
      return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                       "%s is %" PRId64 " but sizes must be >= 0", names[d],
                       sizes[d]);
    int64_t want = k->static_sizes[static_index[d]];
    if (want >= 0 && sizes[d] != want)
      return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                       "%s is %" PRId64 " but kernel '%s' was compiled for "
                       "%" PRId64,
                       names[d], sizes[d], k->name, want);
  }
  attn_status s = check_index_range(sizes);
  if (s != ATTN_OK ||
      (s = attn_prepare_captures(k, captures, count, NULL, 0, args)) != ATTN_OK)
    return s;
  int32_t index = k->block_table_capture;
  const attn_tensor *table = &captures[index];
  char name[48];
  snprintf(name, sizeof(name), "block table (capture %" PRId32 ")", index);
  role r = {name,
            4,
            {"B", "Hq", "Sq/QB", "Sk/KB"},
            "[B or 1, Hq or 1, ceil(Sq/QB), ceil(Sk/KB)]"};
  const int64_t blocks[4] = {
      batch, heads_q, seq_q > 0 ? (seq_q - 1) / k->block_table_rows + 1 : 1,
      seq_k > 0 ? (seq_k - 1) / k->block_table_keys + 1 : 1};
  for (int32_t d = 0; d < 4; ++d) {
    bool broadcast = d < 2 && table->shape[d] == 1;
    if (table->shape[d] == blocks[d] || broadcast)
      continue;
    if (d < 2)
      return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                       "%s: dim %" PRId32 " is %" PRId64 " but must be 1 or "
                       "%" PRId64 " (the call's %s)",
                       name, d, table->shape[d], blocks[d],
                       d == 0 ? "batch" : "query heads");
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "%s: dim %" PRId32 " is %" PRId64 " but must be %" PRId64
                     " (%s = %" PRId64 " in blocks of %" PRId64 ", at least 1)",
                     name, d, table->shape[d], blocks[d],
                     d == 2 ? "seq_q" : "seq_k", d == 2 ? seq_q : seq_k,
                     d == 2 ? k->block_table_rows : k->block_table_keys);
  }
  if ((s = check_no_self_overlap(table, &r)))
    return s;
  extent written;
  if ((s = compute_extent(table, &r, &written)))
    return s;
  for (int32_t i = 0; i < count; ++i) {
    extent other;
    char other_name[32];
    snprintf(other_name, sizeof(other_name), "capture %" PRId32, i);
    role o = {other_name, k->captures[i].rank, {"0", "1", "2", "3"}, ""};
    if (i == index || compute_extent(&captures[i], &o, &other) != ATTN_OK)
      continue;
    if ((s = check_disjoint(name, &written, other_name, &other)))
      return s;
  }
  args->batch = batch;
  args->heads_q = args->heads_kv = heads_q;
  args->seq_q = seq_q;
  args->seq_k = seq_k;
  return ATTN_OK;
}

attn_status attn_prepare(const attn_kernel_desc *k, const attn_tensor *query,
                         const attn_tensor *key, const attn_tensor *value,
                         const attn_tensor *mask, const attn_tensor *output,
                         const attn_tensor *lse, attn_kernel_args *args) {
  if (attn_kernel_has_sinks(k))
    return attn_sinks_needed(k);
  if (attn_kernel_num_captures(k) > 0)
    return attn_captures_needed(k);
  return attn_prepare_forward(k, query, key, value, mask, output, lse, NULL,
                              args);
}

attn_status
attn_prepare_forward(const attn_kernel_desc *k, const attn_tensor *query,
                     const attn_tensor *key, const attn_tensor *value,
                     const attn_tensor *mask, const attn_tensor *output,
                     const attn_tensor *lse, const attn_tensor *sinks,
                     attn_kernel_args *args) {
  if (!k)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  if (!args)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "attn_prepare: args is NULL");
  memset(args, 0, sizeof(*args));

  /* Which tensors are there. */
  const attn_tensor *required[4] = {query, key, value, output};
  const role *required_role[4] = {&query_role, &key_role, &value_role,
                                  &output_role};
  attn_status present = check_required(required, required_role, 4);
  if (present == ATTN_OK)
    present = check_mask_presence(k, mask);
  if (present != ATTN_OK)
    return present;
  if (!k->has_lse && lse)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "lse: kernel '%s' writes no log-sum-exp but an lse "
                     "tensor was given",
                     k->name);
  if (k->has_lse && !lse)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "lse: kernel '%s' writes the log-sum-exp %s but lse is "
                     "NULL",
                     k->name, lse_role.shape_text);
  if (!attn_kernel_has_sinks(k) && sinks)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "sinks: kernel '%s' takes no attention sinks but sinks "
                     "were given (compile it with the spec key 'sinks')",
                     k->name);
  if (attn_kernel_has_sinks(k) && !sinks)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "sinks: kernel '%s' takes attention sinks %s but sinks "
                     "is NULL",
                     k->name, sinks_role.shape_text);

  /* Each tensor on its own. */
  char takes[160];
  snprintf(takes, sizeof(takes), "kernel '%s' takes", k->name);
  const attn_tensor *all[7] = {query, key, value, mask, output, lse, sinks};
  const role *all_role[7] = {&query_role,  &key_role, &value_role, &mask_role,
                             &output_role, &lse_role, &sinks_role};
  char mask_takes[200];
  snprintf(mask_takes, sizeof(mask_takes), "kernel '%s' takes %s of", k->name,
           k->mask_kind == ATTN_MASK_BOOL ? "a keep-mask" : "an additive bias");
  const int32_t all_dtype[7] = {
      k->dtype, k->dtype,
      k->dtype, k->mask_kind == ATTN_MASK_BOOL ? ATTN_BOOL : k->dtype,
      k->dtype, ATTN_F32,
      ATTN_F32};
  const char *all_why[7] = {takes,
                            takes,
                            takes,
                            mask_takes,
                            takes,
                            "the log-sum-exp is always",
                            "the sink logits are always"};
  attn_status s = check_each(all, all_role, all_dtype, all_why, 7);
  if (s == ATTN_OK)
    s = check_shapes(k, query, key, value, mask, output, lse);
  if (s == ATTN_OK && sinks)
    s = expect_size(sinks, &sinks_role, 0, "query's", query->shape[1]);
  if (s != ATTN_OK)
    return s;

  /* Memory. */
  extent extents[7];
  if ((s = compute_extents(all, all_role, extents, 7)))
    return s;
  if ((!extents[4].empty &&
       (s = check_no_self_overlap(output, &output_role))) ||
      (lse && !extents[5].empty && (s = check_no_self_overlap(lse, &lse_role))))
    return s;
  for (int i = 0; i < 7; ++i) /* what the output and the lse must not hit */
    if ((i != 4 && (s = check_disjoint("output", &extents[4], all_role[i]->name,
                                       &extents[i]))) ||
        (i != 4 && i != 5 &&
         (s = check_disjoint("lse", &extents[5], all_role[i]->name,
                             &extents[i]))))
      return s;

  /* All good: the kernel's view of the call. */
  args->query = query->data;
  args->key = key->data;
  args->value = value->data;
  args->output = output->data;
  args->batch = query->shape[0];
  args->heads_q = query->shape[1];
  args->heads_kv = key->shape[1];
  args->seq_q = query->shape[2];
  args->seq_k = key->shape[2];
  memcpy(args->query_strides, query->strides, sizeof(args->query_strides));
  memcpy(args->key_strides, key->strides, sizeof(args->key_strides));
  memcpy(args->value_strides, value->strides, sizeof(args->value_strides));
  memcpy(args->output_strides, output->strides, sizeof(args->output_strides));
  if (mask) {
    args->mask = mask->data;
    /* The kernel reads a full [B, Hq, Sq, Sk] mask: a broadcast dim is one
     * whose stride is 0. */
    for (int d = 0; d < 4; ++d)
      args->mask_strides[d] = mask->shape[d] == 1 ? 0 : mask->strides[d];
  }
  if (lse) {
    args->lse = lse->data;
    memcpy(args->lse_strides, lse->strides, sizeof(args->lse_strides));
  }
  if (sinks) {
    args->sinks = sinks->data;
    args->sinks_strides[0] = sinks->strides[0];
  }
  return ATTN_OK;
}

//===----------------------------------------------------------------------===//
// attn_prepare_backward
//===----------------------------------------------------------------------===//

static const role grad_output_role = {
    "grad_output", 4, {"B", "Hq", "Sq", "Dv"}, "[B, Hq, Sq, Dv]"};
static const role grad_lse_role = {
    "grad_lse", 3, {"B", "Hq", "Sq", NULL}, "[B, Hq, Sq]"};
static const role grad_query_role = {
    "grad_query", 4, {"B", "Hq", "Sq", "D"}, "[B, Hq, Sq, D]"};
static const role grad_key_role = {
    "grad_key", 4, {"B", "Hkv", "Sk", "D"}, "[B, Hkv, Sk, D]"};
static const role grad_value_role = {
    "grad_value", 4, {"B", "Hkv", "Sk", "Dv"}, "[B, Hkv, Sk, Dv]"};

static const role grad_mask_role = {
    "grad_mask", 4, {"B", "Hq", "Sq", "Sk"}, "[B, Hq, Sq, Sk]"};

int attn_kernel_has_grad_mask(const attn_kernel_desc *kernel) {
  return kernel &&
         kernel->struct_size >= offsetof(attn_kernel_desc, has_grad_mask) +
                                    sizeof(kernel->has_grad_mask) &&
         kernel->has_grad_mask != 0;
}

uint32_t attn_kernel_grad_captures(const attn_kernel_desc *kernel) {
  if (!kernel ||
      kernel->struct_size < offsetof(attn_kernel_desc, block_table_capture) +
                                sizeof(kernel->block_table_capture) ||
      attn_kernel_kind_of(kernel) != ATTN_KERNEL_BACKWARD)
    return 0;
  return kernel->grad_captures;
}

attn_status attn_prepare_grad_captures(
    const attn_kernel_desc *k, const attn_tensor *grad_captures,
    const attn_tensor *captures, const attn_tensor *const *others,
    const char *const *other_names, int num_others, attn_backward_args *args) {
  uint32_t bits = attn_kernel_grad_captures(k);
  if (!bits && grad_captures)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "grad_captures: kernel '%s' writes no captured tensor's "
                     "gradient but grad_captures was given (compile it with "
                     "the spec key 'dcaptures')",
                     k->name);
  if (!bits)
    return ATTN_OK;
  if (!grad_captures)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "grad_captures: kernel '%s' writes the gradients of "
                     "captured tensors (bits 0x%" PRIx32 ") but "
                     "grad_captures is NULL",
                     k->name, bits);
  const int64_t work_items = args->forward.batch * args->forward.heads_kv;
  extent extents[ATTN_MAX_CAPTURES];
  char names[ATTN_MAX_CAPTURES][32];
  for (int32_t n = 0; n < attn_kernel_num_captures(k); ++n) {
    if (!(bits & (1u << n)))
      continue;
    const attn_tensor *t = &grad_captures[n];
    int64_t elements = 1;
    for (int32_t d = 0; d < captures[n].rank; ++d)
      elements *= captures[n].shape[d];
    snprintf(names[n], sizeof(names[n]), "grad_captures[%" PRId32 "]", n);
    char shape_text[64];
    snprintf(shape_text, sizeof(shape_text),
             "[B * Hkv, N] = [%" PRId64 ", %" PRId64 "]", work_items, elements);
    role r = {names[n], 2, {"B * Hkv", "N"}, shape_text};
    attn_status s = check_rank_and_dtype(
        t, &r, ATTN_F32, "a captured tensor's gradient is always");
    if (s == ATTN_OK)
      s = check_sizes_and_data(t, &r);
    char count[48];
    snprintf(count, sizeof(count), "capture %" PRId32 "'s element count", n);
    if (s == ATTN_OK)
      s = expect_size(t, &r, 0, "the call's", work_items);
    if (s == ATTN_OK)
      s = expect_size(t, &r, 1, count, elements);
    if (s != ATTN_OK)
      return s;
    if (elements > 1 && t->strides[1] != 1)
      return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                       "%s: stride 1 is %" PRId64 " but each row must be "
                       "contiguous (stride 1)",
                       names[n], t->strides[1]);
    if (work_items > 1 && t->strides[0] < elements)
      return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                       "%s: stride 0 is %" PRId64 " but rows of %" PRId64
                       " elements must not overlap (stride >= %" PRId64 ")",
                       names[n], t->strides[0], elements, elements);
    if ((s = compute_extent(t, &r, &extents[n])))
      return s;
    /* Nothing else of the call, read or written, may share its memory. */
    for (int o = 0; o < num_others; ++o) {
      role other = {other_names[o],
                    others[o] ? others[o]->rank : 0,
                    {"0", "1", "2", "3"},
                    ""};
      extent e;
      if (!others[o] || compute_extent(others[o], &other, &e) != ATTN_OK)
        continue; /* checked with its own role before */
      if ((s = check_disjoint(names[n], &extents[n], other_names[o], &e)))
        return s;
    }
    for (int32_t c = 0; c < attn_kernel_num_captures(k); ++c) {
      char capture[32];
      snprintf(capture, sizeof(capture), "capture %" PRId32, c);
      role cr = {capture, captures[c].rank, {"0", "1", "2", "3"}, ""};
      extent e;
      if (compute_extent(&captures[c], &cr, &e) != ATTN_OK)
        continue;
      if ((s = check_disjoint(names[n], &extents[n], capture, &e)))
        return s;
    }
    for (int32_t m = 0; m < n; ++m)
      if ((bits & (1u << m)) &&
          (s = check_disjoint(names[n], &extents[n], names[m], &extents[m])))
        return s;
    args->grad_captures[n] = t->data;
    args->grad_capture_row_strides[n] = t->strides[0];
  }
  return ATTN_OK;
}

attn_status attn_grad_mask_needed(const attn_kernel_desc *k) {
  return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                   "grad_mask: kernel '%s' writes the bias's gradient %s; "
                   "pass it with attn_run_backward_with or "
                   "attn_prepare_backward_with",
                   k->name, grad_mask_role.shape_text);
}

attn_status attn_prepare_backward(
    const attn_kernel_desc *k, const attn_tensor *query, const attn_tensor *key,
    const attn_tensor *value, const attn_tensor *mask,
    const attn_tensor *output, const attn_tensor *lse,
    const attn_tensor *grad_output, const attn_tensor *grad_lse,
    const attn_tensor *grad_query, const attn_tensor *grad_key,
    const attn_tensor *grad_value, attn_backward_args *args) {
  if (attn_kernel_has_grad_mask(k))
    return attn_grad_mask_needed(k);
  if (attn_kernel_num_captures(k) > 0)
    return attn_captures_needed(k);
  return attn_prepare_backward_tensors(k, query, key, value, mask, output, lse,
                                       grad_output, grad_lse, grad_query,
                                       grad_key, grad_value, NULL, args);
}

attn_status attn_prepare_backward_tensors(
    const attn_kernel_desc *k, const attn_tensor *query, const attn_tensor *key,
    const attn_tensor *value, const attn_tensor *mask,
    const attn_tensor *output, const attn_tensor *lse,
    const attn_tensor *grad_output, const attn_tensor *grad_lse,
    const attn_tensor *grad_query, const attn_tensor *grad_key,
    const attn_tensor *grad_value, const attn_tensor *grad_mask,
    attn_backward_args *args) {
  if (!k)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  if (!args)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "attn_prepare_backward: args is NULL");
  memset(args, 0, sizeof(*args));
  if (attn_kernel_kind_of(k) != ATTN_KERNEL_BACKWARD)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s' is a forward kernel, not a backward one",
                     k->name);
  if (!output)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "output: the forward's O %s is NULL; the backward reads "
                     "it",
                     output_role.shape_text);
  if (!lse)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "lse: the forward's log-sum-exp %s is NULL; the backward "
                     "recomputes the weights from it",
                     lse_role.shape_text);
  /* The forward's tensors, with O and LSE read (the captures are the
   * caller's to add: attn_prepare_captures). */
  attn_status s = attn_prepare_forward(k, query, key, value, mask, output,
                                       lse, NULL, &args->forward);
  if (s != ATTN_OK)
    return s;

  const attn_tensor *required[4] = {grad_output, grad_query, grad_key,
                                    grad_value};
  const role *required_role[4] = {&grad_output_role, &grad_query_role,
                                  &grad_key_role, &grad_value_role};
  if ((s = check_required(required, required_role, 4)))
    return s;
  if (!k->has_grad_lse && grad_lse)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "grad_lse: kernel '%s' takes no dLSE but one was given "
                     "(compile it with the spec key 'lse')",
                     k->name);
  if (k->has_grad_lse && !grad_lse)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "grad_lse: kernel '%s' takes dLSE %s but grad_lse is NULL",
                     k->name, grad_lse_role.shape_text);
  if (!attn_kernel_has_grad_mask(k) && grad_mask)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "grad_mask: kernel '%s' writes no bias gradient but "
                     "grad_mask was given (compile it with the spec key "
                     "'dbias')",
                     k->name);
  if (attn_kernel_has_grad_mask(k) && !grad_mask)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "grad_mask: kernel '%s' writes the bias's gradient %s "
                     "but grad_mask is NULL",
                     k->name, grad_mask_role.shape_text);

  /* Each gradient on its own, then shaped as what it is the gradient of. */
  char takes[160];
  snprintf(takes, sizeof(takes), "kernel '%s' takes", k->name);
  /* dM is shaped as the scores: [B, Hq] of the query, Sq, and Sk of the
   * key. */
  const attn_tensor scores_like = {
      NULL,
      ATTN_F32,
      4,
      {query->shape[0], query->shape[1], query->shape[2], key->shape[2]},
      {0}};
  const attn_tensor *grads[6] = {grad_output, grad_lse, grad_query,
                                 grad_key,    grad_value, grad_mask};
  const role *grad_role[6] = {&grad_output_role, &grad_lse_role,
                              &grad_query_role,  &grad_key_role,
                              &grad_value_role,  &grad_mask_role};
  const attn_tensor *like[6] = {output, lse, query, key, value, &scores_like};
  const char *like_name[6] = {"output's", "lse's",   "query's",
                              "key's",    "value's", "the scores'"};
  const int32_t grad_dtype[6] = {k->dtype, ATTN_F32, k->dtype,
                                 k->dtype, k->dtype, ATTN_F32};
  for (int i = 0; i < 6; ++i) {
    if (!grads[i])
      continue;
    s = check_rank_and_dtype(grads[i], grad_role[i], grad_dtype[i],
                             i == 1   ? "the log-sum-exp is always"
                             : i == 5 ? "the bias's gradient is always"
                                      : takes);
    if (s == ATTN_OK)
      s = check_sizes_and_data(grads[i], grad_role[i]);
    for (int32_t d = 0; s == ATTN_OK && d < grad_role[i]->rank; ++d)
      s = expect_size(grads[i], grad_role[i], d, like_name[i],
                      like[i]->shape[d]);
    if (s != ATTN_OK)
      return s;
  }

  /* Memory: the gradients written must not share memory with anything. */
  const attn_tensor *all[12] = {query,      key,      value,       mask,
                                output,     lse,      grad_output, grad_lse,
                                grad_query, grad_key, grad_value,  grad_mask};
  const role *all_role[12] = {
      &query_role,      &key_role,      &value_role,       &mask_role,
      &output_role,     &lse_role,      &grad_output_role, &grad_lse_role,
      &grad_query_role, &grad_key_role, &grad_value_role,  &grad_mask_role};
  static const int written[4] = {8, 9, 10, 11}, alias[4] = {-1, -1, -1, -1};
  if ((s = check_written(all, all_role, 12, written, alias, 4)))
    return s;

  args->grad_output = grad_output->data;
  args->grad_query = grad_query->data;
  args->grad_key = grad_key->data;
  args->grad_value = grad_value->data;
  memcpy(args->grad_output_strides, grad_output->strides,
         sizeof(args->grad_output_strides));
  memcpy(args->grad_query_strides, grad_query->strides,
         sizeof(args->grad_query_strides));
  memcpy(args->grad_key_strides, grad_key->strides,
         sizeof(args->grad_key_strides));
  memcpy(args->grad_value_strides, grad_value->strides,
         sizeof(args->grad_value_strides));
  if (grad_lse) {
    args->grad_lse = grad_lse->data;
    memcpy(args->grad_lse_strides, grad_lse->strides,
           sizeof(args->grad_lse_strides));
  }
  if (grad_mask) {
    args->grad_mask = grad_mask->data;
    memcpy(args->grad_mask_strides, grad_mask->strides,
           sizeof(args->grad_mask_strides));
  }
  return ATTN_OK;
}

//===----------------------------------------------------------------------===//
// attn_prepare_weights
//===----------------------------------------------------------------------===//

static const role weights_role = {
    "weights", 4, {"B", "Hq", "Sq", "Sk"}, "[B, Hq, Sq, Sk]"};

attn_status
attn_prepare_weights(const attn_kernel_desc *k, const attn_tensor *query,
                     const attn_tensor *key, const attn_tensor *mask,
                     const attn_tensor *lse, const attn_tensor *weights,
                     attn_kernel_args *args) {
  if (attn_kernel_num_captures(k) > 0)
    return attn_captures_needed(k);
  return attn_prepare_weights_tensors(k, query, key, mask, lse, weights, args);
}

attn_status attn_prepare_weights_tensors(
    const attn_kernel_desc *k, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *mask, const attn_tensor *lse,
    const attn_tensor *weights, attn_kernel_args *args) {
  if (!k)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  if (!args)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "attn_prepare_weights: args is NULL");
  memset(args, 0, sizeof(*args));
  if (attn_kernel_kind_of(k) != ATTN_KERNEL_WEIGHTS)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s' is not a weights kernel", k->name);
  const attn_tensor *required[3] = {query, key, weights};
  const role *required_role[3] = {&query_role, &key_role, &weights_role};
  attn_status s = check_required(required, required_role, 3);
  if (s == ATTN_OK)
    s = check_mask_presence(k, mask);
  if (s != ATTN_OK)
    return s;
  if (!k->has_lse && lse)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "lse: kernel '%s' computes each row's own log-sum-exp "
                     "but an lse tensor was given (compile it with the spec "
                     "key 'lse' to read the forward's)",
                     k->name);
  if (k->has_lse && !lse)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "lse: kernel '%s' normalizes by the forward's "
                     "log-sum-exp %s but lse is NULL",
                     k->name, lse_role.shape_text);

  char takes[160];
  snprintf(takes, sizeof(takes), "kernel '%s' takes", k->name);
  char mask_takes[200];
  snprintf(mask_takes, sizeof(mask_takes), "kernel '%s' takes %s of", k->name,
           k->mask_kind == ATTN_MASK_BOOL ? "a keep-mask" : "an additive bias");
  const attn_tensor *all[5] = {query, key, mask, lse, weights};
  const role *all_role[5] = {&query_role, &key_role, &mask_role, &lse_role,
                             &weights_role};
  const int32_t all_dtype[5] = {
      k->dtype, k->dtype, k->mask_kind == ATTN_MASK_BOOL ? ATTN_BOOL : k->dtype,
      ATTN_F32, ATTN_F32};
  const char *all_why[5] = {takes, takes, mask_takes,
                            "the log-sum-exp is always",
                            "the attention weights are always"};
  if ((s = check_each(all, all_role, all_dtype, all_why, 5)) ||
      (s = check_shapes(k, query, key, NULL, mask, NULL, lse)))
    return s;
  const int64_t *q = query->shape;
  if ((s = expect_size(weights, &weights_role, 0, "query's", q[0])) ||
      (s = expect_size(weights, &weights_role, 1, "query's", q[1])) ||
      (s = expect_size(weights, &weights_role, 2, "query's", q[2])) ||
      (s = expect_size(weights, &weights_role, 3, "key's", key->shape[2])))
    return s;

  /* Memory: the weights written share memory with nothing. */
  static const int written[1] = {4}, alias[1] = {-1};
  if ((s = check_written(all, all_role, 5, written, alias, 1)))
    return s;

  args->query = query->data;
  args->key = key->data;
  args->output = weights->data;
  args->batch = q[0];
  args->heads_q = q[1];
  args->heads_kv = key->shape[1];
  args->seq_q = q[2];
  args->seq_k = key->shape[2];
  memcpy(args->query_strides, query->strides, sizeof(args->query_strides));
  memcpy(args->key_strides, key->strides, sizeof(args->key_strides));
  memcpy(args->output_strides, weights->strides, sizeof(args->output_strides));
  if (mask) {
    args->mask = mask->data;
    for (int d = 0; d < 4; ++d)
      args->mask_strides[d] = mask->shape[d] == 1 ? 0 : mask->strides[d];
  }
  if (lse) {
    args->lse = (float *)lse->data;
    memcpy(args->lse_strides, lse->strides, sizeof(args->lse_strides));
  }
  return ATTN_OK;
}

//===----------------------------------------------------------------------===//
// attn_prepare_linear
//===----------------------------------------------------------------------===//

static const role state_in_role = {
    "initial_state", 4, {"B", "Hkv", "D", "Dv"}, "[B, Hkv, D, Dv]"};
static const role normalizer_in_role = {
    "initial_normalizer", 3, {"B", "Hkv", "D", NULL}, "[B, Hkv, D]"};
static const role state_out_role = {
    "final_state", 4, {"B", "Hkv", "D", "Dv"}, "[B, Hkv, D, Dv]"};
static const role normalizer_out_role = {
    "final_normalizer", 3, {"B", "Hkv", "D", NULL}, "[B, Hkv, D]"};

/* What every prepare of a kind of kernel starts with: the kernel and the
 * args are there (the args zeroed, `size` bytes) and the kernel is of
 * `kind`, which `what` names (`key`: attn-compile's spec key for it). */
static attn_status check_kernel_of_kind(const attn_kernel_desc *k, void *args,
                                        size_t size, const char *entry,
                                        attn_kernel_kind kind, const char *what,
                                        const char *key) {
  if (!k)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  if (!args)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "%s: args is NULL", entry);
  memset(args, 0, size);
  if (attn_kernel_kind_of(k) != kind)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s' is not %s kernel (attn-compile's spec key "
                     "'%s')",
                     k->name, what, key);
  return ATTN_OK;
}

attn_status attn_prepare_linear(
    const attn_kernel_desc *k, const attn_tensor *query, const attn_tensor *key,
    const attn_tensor *value, const attn_tensor *initial_state,
    const attn_tensor *initial_normalizer, const attn_tensor *output,
    const attn_tensor *final_state, const attn_tensor *final_normalizer,
    attn_linear_args *args) {
  attn_status s =
      check_kernel_of_kind(k, args, sizeof(*args), "attn_prepare_linear",
                           ATTN_KERNEL_LINEAR, "a linear attention", "linear");
  if (s != ATTN_OK)
    return s;
  const attn_tensor *all[8] = {query,         key,
                               value,         output,
                               initial_state, initial_normalizer,
                               final_state,   final_normalizer};
  const role *all_role[8] = {&query_role,     &key_role,
                             &value_role,     &output_role,
                             &state_in_role,  &normalizer_in_role,
                             &state_out_role, &normalizer_out_role};
  int required = k->has_state ? 8 : 4;
  s = check_required(all, all_role, required);
  if (s != ATTN_OK)
    return s;
  for (int i = 4; i < 8 && !k->has_state; ++i)
    if (all[i])
      return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                       "%s: kernel '%s' takes no state but one was given "
                       "(compile it with the spec key 'state')",
                       all_role[i]->name, k->name);

  char takes[160];
  snprintf(takes, sizeof(takes), "kernel '%s' takes", k->name);
  const int32_t all_dtype[8] = {k->dtype, k->dtype, k->dtype, k->dtype,
                                ATTN_F32, ATTN_F32, ATTN_F32, ATTN_F32};
  const char *why_state = "linear attention's state is always";
  const char *all_why[8] = {takes,     takes,     takes,     takes,
                            why_state, why_state, why_state, why_state};
  if ((s = check_each(all, all_role, all_dtype, all_why, 8)) ||
      (s = check_shapes(k, query, key, value, NULL, output, NULL)))
    return s;
  const int64_t batch = query->shape[0], heads_kv = key->shape[1];
  if (k->causal && key->shape[2] != query->shape[2])
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "key: dim 2 (Sk) is %" PRId64 " but kernel '%s' is "
                     "causal linear attention, where query i sees keys 0..i: "
                     "Sk must equal query's Sq=%" PRId64,
                     key->shape[2], k->name, query->shape[2]);
  for (int i = 4; i < 8 && k->has_state; ++i) {
    const attn_tensor *t = all[i];
    const role *r = all_role[i];
    if ((s = expect_size(t, r, 0, "query's", batch)) ||
        (s = expect_size(t, r, 1, "key's", heads_kv)) ||
        (s = expect_size(t, r, 2, "the kernel's", k->head_dim)) ||
        (r->rank == 4 &&
         (s = expect_size(t, r, 3, "the kernel's", k->value_dim))))
      return s;
  }

  /* Memory: O and the final state share memory with nothing, except that
   * the final state may be the initial one itself (updated in place). */
  static const int written[3] = {3, 6, 7}, alias[3] = {-1, 4, 5};
  if ((s = check_written(all, all_role, 8, written, alias, 3)))
    return s;

  args->query = query->data;
  args->key = key->data;
  args->value = value->data;
  args->output = output->data;
  args->batch = batch;
  args->heads_q = query->shape[1];
  args->heads_kv = heads_kv;
  args->seq_q = query->shape[2];
  args->seq_k = key->shape[2];
  memcpy(args->query_strides, query->strides, sizeof(args->query_strides));
  memcpy(args->key_strides, key->strides, sizeof(args->key_strides));
  memcpy(args->value_strides, value->strides, sizeof(args->value_strides));
  memcpy(args->output_strides, output->strides, sizeof(args->output_strides));
  if (k->has_state) {
    args->initial_state = initial_state->data;
    args->initial_normalizer = initial_normalizer->data;
    args->final_state = final_state->data;
    args->final_normalizer = final_normalizer->data;
    memcpy(args->initial_state_strides, initial_state->strides,
           sizeof(args->initial_state_strides));
    memcpy(args->initial_normalizer_strides, initial_normalizer->strides,
           sizeof(args->initial_normalizer_strides));
    memcpy(args->final_state_strides, final_state->strides,
           sizeof(args->final_state_strides));
    memcpy(args->final_normalizer_strides, final_normalizer->strides,
           sizeof(args->final_normalizer_strides));
  }
  return ATTN_OK;
}

//===----------------------------------------------------------------------===//
// attn_prepare_linear_backward
//===----------------------------------------------------------------------===//

static const role state_role = {
    "state", 4, {"B", "Hkv", "D", "Dv"}, "[B, Hkv, D, Dv]"};
static const role normalizer_role = {
    "normalizer", 3, {"B", "Hkv", "D", NULL}, "[B, Hkv, D]"};
static const role grad_final_state_role = {
    "grad_final_state", 4, {"B", "Hkv", "D", "Dv"}, "[B, Hkv, D, Dv]"};
static const role grad_final_normalizer_role = {
    "grad_final_normalizer", 3, {"B", "Hkv", "D", NULL}, "[B, Hkv, D]"};
static const role grad_initial_state_role = {
    "grad_initial_state", 4, {"B", "Hkv", "D", "Dv"}, "[B, Hkv, D, Dv]"};
static const role grad_initial_normalizer_role = {
    "grad_initial_normalizer", 3, {"B", "Hkv", "D", NULL}, "[B, Hkv, D]"};

/* `t` of `r`'s shape: each dim the same as `like`'s (whose name is
 * `whose`). */
static attn_status expect_shape_of(const attn_tensor *t, const role *r,
                                   const attn_tensor *like, const char *whose) {
  attn_status s;
  for (int32_t d = 0; d < r->rank; ++d)
    if ((s = expect_size(t, r, d, whose, like->shape[d])))
      return s;
  return ATTN_OK;
}

attn_status attn_prepare_linear_backward(
    const attn_kernel_desc *k, const attn_tensor *query, const attn_tensor *key,
    const attn_tensor *value, const attn_tensor *output,
    const attn_tensor *grad_output, const attn_tensor *state,
    const attn_tensor *normalizer, const attn_tensor *grad_final_state,
    const attn_tensor *grad_final_normalizer, const attn_tensor *grad_query,
    const attn_tensor *grad_key, const attn_tensor *grad_value,
    const attn_tensor *grad_initial_state,
    const attn_tensor *grad_initial_normalizer,
    attn_linear_backward_args *args) {
  attn_status s = check_kernel_of_kind(
      k, args, sizeof(*args), "attn_prepare_linear_backward",
      ATTN_KERNEL_LINEAR_BACKWARD, "a linear attention backward",
      "linear,backward");
  if (s != ATTN_OK)
    return s;
  enum { kQ, kK, kV, kO, kDo, kS, kZ, kDq, kDk, kDv, kDs1, kDz1, kDs0, kDz0 };
  const attn_tensor *all[14] = {query,
                                key,
                                value,
                                output,
                                grad_output,
                                state,
                                normalizer,
                                grad_query,
                                grad_key,
                                grad_value,
                                grad_final_state,
                                grad_final_normalizer,
                                grad_initial_state,
                                grad_initial_normalizer};
  const role *all_role[14] = {&query_role,
                              &key_role,
                              &value_role,
                              &output_role,
                              &grad_output_role,
                              &state_role,
                              &normalizer_role,
                              &grad_query_role,
                              &grad_key_role,
                              &grad_value_role,
                              &grad_final_state_role,
                              &grad_final_normalizer_role,
                              &grad_initial_state_role,
                              &grad_initial_normalizer_role};
  s = check_required(all, all_role, k->has_state ? 14 : 10);
  if (s != ATTN_OK)
    return s;
  for (int i = kDs1; i <= kDz0 && !k->has_state; ++i)
    if (all[i])
      return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                       "%s: kernel '%s' takes no state gradients but one was "
                       "given (compile it with the spec key 'state')",
                       all_role[i]->name, k->name);

  char takes[160];
  snprintf(takes, sizeof(takes), "kernel '%s' takes", k->name);
  const char *why_state = "linear attention's state and its gradients are";
  int32_t all_dtype[14];
  const char *all_why[14];
  for (int i = 0; i < 14; ++i) {
    int f32 = i == kS || i == kZ || i >= kDs1;
    all_dtype[i] = f32 ? ATTN_F32 : k->dtype;
    all_why[i] = f32 ? why_state : takes;
  }
  if ((s = check_each(all, all_role, all_dtype, all_why, 14)) ||
      (s = check_shapes(k, query, key, value, NULL, output, NULL)) ||
      (s = expect_shape_of(grad_output, &grad_output_role, output,
                           "output's")) ||
      (s = expect_shape_of(grad_query, &grad_query_role, query, "query's")) ||
      (s = expect_shape_of(grad_key, &grad_key_role, key, "key's")) ||
      (s = expect_shape_of(grad_value, &grad_value_role, value, "value's")))
    return s;
  const int64_t batch = query->shape[0], heads_kv = key->shape[1];
  if (k->causal && key->shape[2] != query->shape[2])
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "key: dim 2 (Sk) is %" PRId64 " but kernel '%s' is "
                     "causal linear attention, where query i sees keys 0..i: "
                     "Sk must equal query's Sq=%" PRId64,
                     key->shape[2], k->name, query->shape[2]);
  for (int i = kS; i <= kDz0; ++i) {
    const attn_tensor *t = all[i];
    const role *r = all_role[i];
    if (!t || i == kDq || i == kDk || i == kDv)
      continue;
    if ((s = expect_size(t, r, 0, "query's", batch)) ||
        (s = expect_size(t, r, 1, "key's", heads_kv)) ||
        (s = expect_size(t, r, 2, "the kernel's", k->head_dim)) ||
        (r->rank == 4 &&
         (s = expect_size(t, r, 3, "the kernel's", k->value_dim))))
      return s;
  }

  /* Memory: what is written shares memory with nothing. */
  static const int written[5] = {kDq, kDk, kDv, kDs0, kDz0},
                   alias[5] = {-1, -1, -1, -1, -1};
  if ((s = check_written(all, all_role, 14, written, alias, 5)))
    return s;

  args->query = query->data;
  args->key = key->data;
  args->value = value->data;
  args->output = output->data;
  args->grad_output = grad_output->data;
  args->state = state->data;
  args->normalizer = normalizer->data;
  args->grad_query = grad_query->data;
  args->grad_key = grad_key->data;
  args->grad_value = grad_value->data;
  args->batch = batch;
  args->heads_q = query->shape[1];
  args->heads_kv = heads_kv;
  args->seq_q = query->shape[2];
  args->seq_k = key->shape[2];
#define ATTN_COPY_STRIDES(field, tensor)                                       \
  memcpy(args->field##_strides, (tensor)->strides,                             \
         sizeof(args->field##_strides))
  ATTN_COPY_STRIDES(query, query);
  ATTN_COPY_STRIDES(key, key);
  ATTN_COPY_STRIDES(value, value);
  ATTN_COPY_STRIDES(output, output);
  ATTN_COPY_STRIDES(grad_output, grad_output);
  ATTN_COPY_STRIDES(state, state);
  ATTN_COPY_STRIDES(normalizer, normalizer);
  ATTN_COPY_STRIDES(grad_query, grad_query);
  ATTN_COPY_STRIDES(grad_key, grad_key);
  ATTN_COPY_STRIDES(grad_value, grad_value);
  if (k->has_state) {
    args->grad_final_state = grad_final_state->data;
    args->grad_final_normalizer = grad_final_normalizer->data;
    args->grad_initial_state = grad_initial_state->data;
    args->grad_initial_normalizer = grad_initial_normalizer->data;
    ATTN_COPY_STRIDES(grad_final_state, grad_final_state);
    ATTN_COPY_STRIDES(grad_final_normalizer, grad_final_normalizer);
    ATTN_COPY_STRIDES(grad_initial_state, grad_initial_state);
    ATTN_COPY_STRIDES(grad_initial_normalizer, grad_initial_normalizer);
  }
#undef ATTN_COPY_STRIDES
  return ATTN_OK;
}

//===----------------------------------------------------------------------===//
// attn_prepare_additive
//===----------------------------------------------------------------------===//

static const role additive_query_role = {
    "query", 3, {"B", "Sq", "Dq", NULL}, "[B, Sq, Dq]"};
static const role additive_keys_role = {
    "keys", 3, {"B", "Sk", "Dk", NULL}, "[B, Sk, Dk]"};
static const role additive_values_role = {
    "values", 3, {"B", "Sk", "Dv", NULL}, "[B, Sk, Dv]"};
static const role query_weight_role = {
    "query_weight", 2, {"A", "Dq", NULL, NULL}, "[A, Dq]"};
static const role key_weight_role = {
    "key_weight", 2, {"A", "Dk", NULL, NULL}, "[A, Dk]"};
static const role score_vector_role = {
    "score_vector", 1, {"A", NULL, NULL, NULL}, "[A]"};
static const role additive_mask_role = {
    "mask", 3, {"B", "Sq", "Sk", NULL}, "[B or 1, Sq or 1, Sk]"};
static const role additive_output_role = {
    "output", 3, {"B", "Sq", "Dv", NULL}, "[B, Sq, Dv]"};
static const role additive_weights_role = {
    "weights", 3, {"B", "Sq", "Sk", NULL}, "[B, Sq, Sk]"};

/* A mask dim of size `full` or, where the kernel broadcasts it, 1. */
static attn_status check_additive_mask_dim(const attn_kernel_desc *k,
                                           const attn_tensor *mask, int32_t d,
                                           int broadcast, int64_t full) {
  const char *name = additive_mask_role.dims[d];
  if (mask->shape[d] == full || (mask->shape[d] == 1 && broadcast))
    return ATTN_OK;
  return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                   "mask: dim %" PRId32 " (%s) is %" PRId64
                   " but must be query's %s=%" PRId64 "%s",
                   d, name, mask->shape[d], name, full,
                   broadcast ? " or 1"
                   : mask->shape[d] == 1
                       ? " (kernel was not compiled to broadcast it)"
                       : "");
}

/* B, Sq and Sk against the static sizes of a kernel without heads
 * (additive attention, the mha layer). */
static attn_status check_headless_static_sizes(const attn_kernel_desc *k,
                                               int64_t batch, int64_t seq_q,
                                               int64_t seq_k) {
  static const char *const static_names[5] = {"B", "", "", "Sq", "Sk"};
  const int64_t actual[5] = {batch, 0, 0, seq_q, seq_k};
  for (int i = 0; i < 5; ++i)
    if (i != 1 && i != 2 && k->static_sizes[i] != ATTN_DYNAMIC &&
        actual[i] != k->static_sizes[i])
      return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                       "%s is %" PRId64 " but kernel '%s' was compiled for "
                       "%s=%" PRId64 " only",
                       static_names[i], actual[i], k->name, static_names[i],
                       k->static_sizes[i]);
  return ATTN_OK;
}

/* The sizes of additive attention's inputs (attn_prepare_additive's and
 * attn_prepare_additive_backward's): the dims the kernel was compiled for,
 * B and Sk shared, the mask's dims, the static sizes. */
static attn_status check_additive_inputs(
    const attn_kernel_desc *k, const attn_tensor *query,
    const attn_tensor *keys, const attn_tensor *values,
    const attn_tensor *query_weight, const attn_tensor *key_weight,
    const attn_tensor *score_vector, const attn_tensor *mask) {
  attn_status s;
  char compiled_for[160];
  snprintf(compiled_for, sizeof(compiled_for), "kernel '%s' was compiled for",
           k->name);
  const int64_t batch = query->shape[0], seq_q = query->shape[1],
                seq_k = keys->shape[1];
  if ((s = expect_size(query, &additive_query_role, 2, compiled_for,
                       k->query_dim)) ||
      (s = expect_size(keys, &additive_keys_role, 0, "query's", batch)) ||
      (s = expect_size(keys, &additive_keys_role, 2, compiled_for,
                       k->head_dim)) ||
      (s = expect_size(values, &additive_values_role, 0, "query's", batch)) ||
      (s = expect_size(values, &additive_values_role, 1, "keys'", seq_k)) ||
      (s = expect_size(values, &additive_values_role, 2, compiled_for,
                       k->value_dim)) ||
      (s = expect_size(query_weight, &query_weight_role, 0, compiled_for,
                       k->additive_dim)) ||
      (s = expect_size(query_weight, &query_weight_role, 1, compiled_for,
                       k->query_dim)) ||
      (s = expect_size(key_weight, &key_weight_role, 0, compiled_for,
                       k->additive_dim)) ||
      (s = expect_size(key_weight, &key_weight_role, 1, compiled_for,
                       k->head_dim)) ||
      (s = expect_size(score_vector, &score_vector_role, 0, compiled_for,
                       k->additive_dim)))
    return s;
  if (mask &&
      ((s = check_additive_mask_dim(k, mask, 0, k->mask_broadcast[0], batch)) ||
       (s = check_additive_mask_dim(k, mask, 1, k->mask_broadcast[2], seq_q)) ||
       (s = expect_size(mask, &additive_mask_role, 2, "keys'", seq_k))))
    return s;
  if ((s = check_headless_static_sizes(k, batch, seq_q, seq_k)))
    return s;

  return ATTN_OK;
}

attn_status
attn_prepare_additive(const attn_kernel_desc *k, const attn_tensor *query,
                      const attn_tensor *keys, const attn_tensor *values,
                      const attn_tensor *query_weight,
                      const attn_tensor *key_weight,
                      const attn_tensor *score_vector, const attn_tensor *mask,
                      const attn_tensor *output, const attn_tensor *weights,
                      attn_additive_args *args) {
  attn_status s = check_kernel_of_kind(
      k, args, sizeof(*args), "attn_prepare_additive", ATTN_KERNEL_ADDITIVE,
      "an additive attention", "additive");
  if (s != ATTN_OK)
    return s;
  const attn_tensor *all[9] = {query,        keys,       values,
                               query_weight, key_weight, score_vector,
                               mask,         output,     weights};
  const role *all_role[9] = {
      &additive_query_role, &additive_keys_role,   &additive_values_role,
      &query_weight_role,   &key_weight_role,      &score_vector_role,
      &additive_mask_role,  &additive_output_role, &additive_weights_role};
  const attn_tensor *required[7] = {
      query, keys, values, query_weight, key_weight, score_vector, output};
  const role *required_role[7] = {&additive_query_role,  &additive_keys_role,
                                  &additive_values_role, &query_weight_role,
                                  &key_weight_role,      &score_vector_role,
                                  &additive_output_role};
  s = check_required(required, required_role, 7);
  if (s == ATTN_OK)
    s = check_mask_presence(k, mask);
  if (s != ATTN_OK)
    return s;
  if (k->has_weights && !weights)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "weights: kernel '%s' writes the weights %s but weights "
                     "is NULL",
                     k->name, additive_weights_role.shape_text);
  if (!k->has_weights && weights)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "weights: kernel '%s' writes no weights but a weights "
                     "tensor was given (compile it with the spec key "
                     "'with_weights')",
                     k->name);

  char takes[160];
  snprintf(takes, sizeof(takes), "kernel '%s' takes", k->name);
  const int32_t all_dtype[9] = {k->dtype,  k->dtype, k->dtype,
                                k->dtype,  k->dtype, k->dtype,
                                ATTN_BOOL, k->dtype, ATTN_F32};
  const char *all_why[9] = {takes,
                            takes,
                            takes,
                            takes,
                            takes,
                            takes,
                            "the keep-mask is always",
                            takes,
                            "the attention weights are always"};
  if ((s = check_each(all, all_role, all_dtype, all_why, 9)))
    return s;
  if ((s = check_additive_inputs(k, query, keys, values, query_weight,
                                 key_weight, score_vector, mask)))
    return s;
  char compiled_for[160];
  snprintf(compiled_for, sizeof(compiled_for), "kernel '%s' was compiled for",
           k->name);
  const int64_t batch = query->shape[0], seq_q = query->shape[1],
                seq_k = keys->shape[1];
  if ((s = expect_size(output, &additive_output_role, 0, "query's", batch)) ||
      (s = expect_size(output, &additive_output_role, 1, "query's", seq_q)) ||
      (s = expect_size(output, &additive_output_role, 2, compiled_for,
                       k->value_dim)))
    return s;
  if (weights &&
      ((s = expect_size(weights, &additive_weights_role, 0, "query's",
                        batch)) ||
       (s = expect_size(weights, &additive_weights_role, 1, "query's",
                        seq_q)) ||
       (s = expect_size(weights, &additive_weights_role, 2, "keys'", seq_k))))
    return s;

  /* Memory: O and the weights share memory with nothing. */
  static const int written[2] = {7, 8}, alias[2] = {-1, -1};
  if ((s = check_written(all, all_role, 9, written, alias, 2)))
    return s;

  args->query = query->data;
  args->keys = keys->data;
  args->values = values->data;
  args->query_weight = query_weight->data;
  args->key_weight = key_weight->data;
  args->score_vector = score_vector->data;
  args->output = output->data;
  args->batch = batch;
  args->seq_q = seq_q;
  args->seq_k = seq_k;
  memcpy(args->query_strides, query->strides, sizeof(args->query_strides));
  memcpy(args->key_strides, keys->strides, sizeof(args->key_strides));
  memcpy(args->value_strides, values->strides, sizeof(args->value_strides));
  memcpy(args->query_weight_strides, query_weight->strides,
         sizeof(args->query_weight_strides));
  memcpy(args->key_weight_strides, key_weight->strides,
         sizeof(args->key_weight_strides));
  memcpy(args->score_vector_strides, score_vector->strides,
         sizeof(args->score_vector_strides));
  memcpy(args->output_strides, output->strides, sizeof(args->output_strides));
  if (mask) {
    args->mask = mask->data;
    for (int d = 0; d < 3; ++d)
      args->mask_strides[d] = mask->shape[d] == 1 ? 0 : mask->strides[d];
  }
  if (weights) {
    args->weights = (float *)weights->data;
    memcpy(args->weights_strides, weights->strides,
           sizeof(args->weights_strides));
  }
  return ATTN_OK;
}

//===----------------------------------------------------------------------===//
// attn_prepare_additive_backward
//===----------------------------------------------------------------------===//

static const role additive_grad_output_role = {
    "grad_output", 3, {"B", "Sq", "Dv", NULL}, "[B, Sq, Dv]"};
static const role grad_qp_role = {
    "grad_qp", 3, {"B", "Sq", "A", NULL}, "[B, Sq, A]"};
static const role grad_kp_role = {
    "grad_kp", 4, {"B", "P", "Sk", "A"}, "[B, P, Sk, A]"};
static const role additive_grad_values_role = {
    "grad_values", 4, {"B", "P", "Sk", "Dv"}, "[B, P, Sk, Dv]"};
static const role grad_v_role = {
    "grad_v", 3, {"B", "P", "A", NULL}, "[B, P, A]"};

attn_status attn_prepare_additive_backward(
    const attn_kernel_desc *k, const attn_tensor *query,
    const attn_tensor *keys, const attn_tensor *values,
    const attn_tensor *query_weight, const attn_tensor *key_weight,
    const attn_tensor *score_vector, const attn_tensor *mask,
    const attn_tensor *grad_output, const attn_tensor *grad_qp,
    const attn_tensor *grad_kp, const attn_tensor *grad_values,
    const attn_tensor *grad_v, attn_additive_backward_args *args) {
  attn_status s = check_kernel_of_kind(
      k, args, sizeof(*args), "attn_prepare_additive_backward",
      ATTN_KERNEL_ADDITIVE_BACKWARD, "an additive attention backward",
      "additive,backward");
  if (s != ATTN_OK)
    return s;
  const attn_tensor *all[12] = {
      query,       keys, values,  query_weight, key_weight,  score_vector,
      grad_output, mask, grad_qp, grad_kp,      grad_values, grad_v};
  const role *all_role[12] = {&additive_query_role,
                              &additive_keys_role,
                              &additive_values_role,
                              &query_weight_role,
                              &key_weight_role,
                              &score_vector_role,
                              &additive_grad_output_role,
                              &additive_mask_role,
                              &grad_qp_role,
                              &grad_kp_role,
                              &additive_grad_values_role,
                              &grad_v_role};
  const attn_tensor *required[11] = {
      query,       keys,    values,  query_weight, key_weight, score_vector,
      grad_output, grad_qp, grad_kp, grad_values,  grad_v};
  const role *required_role[11] = {
      &additive_query_role,       &additive_keys_role, &additive_values_role,
      &query_weight_role,         &key_weight_role,    &score_vector_role,
      &additive_grad_output_role, &grad_qp_role,       &grad_kp_role,
      &additive_grad_values_role, &grad_v_role};
  s = check_required(required, required_role, 11);
  if (s == ATTN_OK)
    s = check_mask_presence(k, mask);
  if (s != ATTN_OK)
    return s;
  char takes[160];
  snprintf(takes, sizeof(takes), "kernel '%s' takes", k->name);
  const char *f32_why = "the gradients are always";
  const int32_t all_dtype[12] = {k->dtype, k->dtype, k->dtype, k->dtype,
                                 k->dtype, k->dtype, k->dtype, ATTN_BOOL,
                                 ATTN_F32, ATTN_F32, ATTN_F32, ATTN_F32};
  const char *all_why[12] = {
      takes,   takes,   takes,   takes,
      takes,   takes,   takes,   "the keep-mask is always",
      f32_why, f32_why, f32_why, f32_why};
  if ((s = check_each(all, all_role, all_dtype, all_why, 12)) ||
      (s = check_additive_inputs(k, query, keys, values, query_weight,
                                 key_weight, score_vector, mask)))
    return s;
  char compiled_for[160];
  snprintf(compiled_for, sizeof(compiled_for), "kernel '%s' was compiled for",
           k->name);
  const int64_t batch = query->shape[0], seq_q = query->shape[1],
                seq_k = keys->shape[1], parts = grad_kp->shape[1];
  if (parts < 1)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "grad_kp: dim 1 (P, the parts of the query rows) is "
                     "%" PRId64 " but must be at least 1",
                     parts);
  if ((s = expect_size(grad_output, &additive_grad_output_role, 0, "query's",
                       batch)) ||
      (s = expect_size(grad_output, &additive_grad_output_role, 1, "query's",
                       seq_q)) ||
      (s = expect_size(grad_output, &additive_grad_output_role, 2, compiled_for,
                       k->value_dim)) ||
      (s = expect_size(grad_qp, &grad_qp_role, 0, "query's", batch)) ||
      (s = expect_size(grad_qp, &grad_qp_role, 1, "query's", seq_q)) ||
      (s = expect_size(grad_qp, &grad_qp_role, 2, compiled_for,
                       k->additive_dim)) ||
      (s = expect_size(grad_kp, &grad_kp_role, 0, "query's", batch)) ||
      (s = expect_size(grad_kp, &grad_kp_role, 2, "keys'", seq_k)) ||
      (s = expect_size(grad_kp, &grad_kp_role, 3, compiled_for,
                       k->additive_dim)) ||
      (s = expect_size(grad_values, &additive_grad_values_role, 0, "query's",
                       batch)) ||
      (s = expect_size(grad_values, &additive_grad_values_role, 1, "grad_kp's",
                       parts)) ||
      (s = expect_size(grad_values, &additive_grad_values_role, 2, "keys'",
                       seq_k)) ||
      (s = expect_size(grad_values, &additive_grad_values_role, 3, compiled_for,
                       k->value_dim)) ||
      (s = expect_size(grad_v, &grad_v_role, 0, "query's", batch)) ||
      (s = expect_size(grad_v, &grad_v_role, 1, "grad_kp's", parts)) ||
      (s = expect_size(grad_v, &grad_v_role, 2, compiled_for, k->additive_dim)))
    return s;

  /* Memory: the four gradients share memory with nothing. */
  static const int written[4] = {8, 9, 10, 11}, alias[4] = {-1, -1, -1, -1};
  if ((s = check_written(all, all_role, 12, written, alias, 4)))
    return s;

  args->query = query->data;
  args->keys = keys->data;
  args->values = values->data;
  args->query_weight = query_weight->data;
  args->key_weight = key_weight->data;
  args->score_vector = score_vector->data;
  args->grad_output = grad_output->data;
  args->grad_qp = (float *)grad_qp->data;
  args->grad_kp = (float *)grad_kp->data;
  args->grad_values = (float *)grad_values->data;
  args->grad_v = (float *)grad_v->data;
  args->batch = batch;
  args->seq_q = seq_q;
  args->seq_k = seq_k;
  args->parts = parts;
  /* Each tensor's strides, in the struct's order. */
  int64_t *const strides[12] = {
      args->query_strides,       args->key_strides,
      args->value_strides,       args->query_weight_strides,
      args->key_weight_strides,  args->score_vector_strides,
      args->grad_output_strides, args->mask_strides,
      args->grad_qp_strides,     args->grad_kp_strides,
      args->grad_values_strides, args->grad_v_strides};
  for (int t = 0; t < 12; ++t)
    if (all[t])
      memcpy(strides[t], all[t]->strides,
             sizeof(int64_t) * (size_t)all_role[t]->rank);
  if (mask) {
    args->mask = mask->data;
    for (int d = 0; d < 3; ++d)
      args->mask_strides[d] = mask->shape[d] == 1 ? 0 : mask->strides[d];
  }
  return ATTN_OK;
}

//===----------------------------------------------------------------------===//
// attn_prepare_mha
//===----------------------------------------------------------------------===//

static const role mha_query_role = {
    "query", 3, {"B", "Sq", "E", NULL}, "[B, Sq, E]"};
static const role mha_key_role = {
    "key", 3, {"B", "Sk", "Ek", NULL}, "[B, Sk, Ek]"};
static const role mha_value_role = {
    "value", 3, {"B", "Sk", "Ev", NULL}, "[B, Sk, Ev]"};
static const role mha_query_weight_role = {
    "query_weight", 2, {"E", "E", NULL, NULL}, "[E, E]"};
static const role mha_key_weight_role = {
    "key_weight", 2, {"E", "Ek", NULL, NULL}, "[E, Ek]"};
static const role mha_value_weight_role = {
    "value_weight", 2, {"E", "Ev", NULL, NULL}, "[E, Ev]"};
static const role mha_in_bias_role = {
    "in_bias", 1, {"3E", NULL, NULL, NULL}, "[3E]"};
static const role mha_out_weight_role = {
    "out_weight", 2, {"E", "E", NULL, NULL}, "[E, E]"};
static const role mha_out_bias_role = {
    "out_bias", 1, {"E", NULL, NULL, NULL}, "[E]"};
static const role mha_output_role = {
    "output", 3, {"B", "Sq", "E", NULL}, "[B, Sq, E]"};

attn_status
attn_prepare_mha(const attn_kernel_desc *k, const attn_tensor *query,
                 const attn_tensor *key, const attn_tensor *value,
                 const attn_tensor *query_weight, const attn_tensor *key_weight,
                 const attn_tensor *value_weight, const attn_tensor *in_bias,
                 const attn_tensor *out_weight, const attn_tensor *out_bias,
                 const attn_tensor *mask, const attn_tensor *output,
                 attn_mha_args *args) {
  attn_status s = check_kernel_of_kind(k, args, sizeof(*args),
                                       "attn_prepare_mha", ATTN_KERNEL_MHA,
                                       "a multi-head attention layer's", "mha");
  if (s != ATTN_OK)
    return s;
  enum { kQ, kK, kV, kWq, kWk, kWv, kBin, kWo, kBo, kMask, kY, kCount };
  const attn_tensor *all[kCount] = {
      query,   key,        value,    query_weight, key_weight, value_weight,
      in_bias, out_weight, out_bias, mask,         output};
  const role *all_role[kCount] = {&mha_query_role,      &mha_key_role,
                                  &mha_value_role,      &mha_query_weight_role,
                                  &mha_key_weight_role, &mha_value_weight_role,
                                  &mha_in_bias_role,    &mha_out_weight_role,
                                  &mha_out_bias_role,   &mask_role,
                                  &mha_output_role};
  const attn_tensor *required[8] = {query,        key,        value,
                                    query_weight, key_weight, value_weight,
                                    out_weight,   output};
  const role *required_role[8] = {&mha_query_role,      &mha_key_role,
                                  &mha_value_role,      &mha_query_weight_role,
                                  &mha_key_weight_role, &mha_value_weight_role,
                                  &mha_out_weight_role, &mha_output_role};
  s = check_required(required, required_role, 8);
  if (s == ATTN_OK)
    s = check_mask_presence(k, mask);
  if (s != ATTN_OK)
    return s;
  for (int i = kBin; i <= kBo; i += kBo - kBin) {
    if (k->has_bias && !all[i])
      return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                       "%s: layer '%s' has biases but %s is NULL",
                       all_role[i]->name, k->name, all_role[i]->name);
    if (!k->has_bias && all[i])
      return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                       "%s: layer '%s' has no biases but one was given "
                       "(compile it with the spec key 'bias')",
                       all_role[i]->name, k->name);
  }

  char takes[160], mask_takes[200];
  snprintf(takes, sizeof(takes), "kernel '%s' takes", k->name);
  snprintf(mask_takes, sizeof(mask_takes), "kernel '%s' takes %s of", k->name,
           k->mask_kind == ATTN_MASK_BOOL ? "a keep-mask" : "an additive bias");
  int32_t all_dtype[kCount];
  const char *all_why[kCount];
  for (int i = 0; i < kCount; ++i) {
    all_dtype[i] = k->dtype;
    all_why[i] = takes;
  }
  all_dtype[kMask] = k->mask_kind == ATTN_MASK_BOOL ? ATTN_BOOL : k->dtype;
  all_why[kMask] = mask_takes;
  if ((s = check_each(all, all_role, all_dtype, all_why, kCount)))
    return s;

  char compiled_for[160];
  snprintf(compiled_for, sizeof(compiled_for), "kernel '%s' was compiled for",
           k->name);
  const int64_t batch = query->shape[0], seq_q = query->shape[1],
                seq_k = key->shape[1], e = k->embed_dim;
  if ((s = expect_size(query, &mha_query_role, 2, compiled_for, e)) ||
      (s = expect_size(key, &mha_key_role, 0, "query's", batch)) ||
      (s = expect_size(key, &mha_key_role, 2, compiled_for,
                       k->key_embed_dim)) ||
      (s = expect_size(value, &mha_value_role, 0, "query's", batch)) ||
      (s = expect_size(value, &mha_value_role, 1, "key's", seq_k)) ||
      (s = expect_size(value, &mha_value_role, 2, compiled_for,
                       k->value_embed_dim)) ||
      (s = expect_size(query_weight, &mha_query_weight_role, 0, compiled_for,
                       e)) ||
      (s = expect_size(query_weight, &mha_query_weight_role, 1, compiled_for,
                       e)) ||
      (s = expect_size(key_weight, &mha_key_weight_role, 0, compiled_for, e)) ||
      (s = expect_size(key_weight, &mha_key_weight_role, 1, compiled_for,
                       k->key_embed_dim)) ||
      (s = expect_size(value_weight, &mha_value_weight_role, 0, compiled_for,
                       e)) ||
      (s = expect_size(value_weight, &mha_value_weight_role, 1, compiled_for,
                       k->value_embed_dim)) ||
      (s = expect_size(out_weight, &mha_out_weight_role, 0, compiled_for, e)) ||
      (s = expect_size(out_weight, &mha_out_weight_role, 1, compiled_for, e)) ||
      (in_bias &&
       (s = expect_size(in_bias, &mha_in_bias_role, 0, compiled_for, 3 * e))) ||
      (out_bias &&
       (s = expect_size(out_bias, &mha_out_bias_role, 0, compiled_for, e))) ||
      (s = expect_size(output, &mha_output_role, 0, "query's", batch)) ||
      (s = expect_size(output, &mha_output_role, 1, "query's", seq_q)) ||
      (s = expect_size(output, &mha_output_role, 2, compiled_for, e)))
    return s;
  if (mask && ((s = check_mask_dim(k, mask, 0, "B", batch)) ||
               (s = check_mask_dim(k, mask, 1, "H", k->num_heads)) ||
               (s = check_mask_dim(k, mask, 2, "Sq", seq_q)) ||
               (s = expect_size(mask, &mask_role, 3, "key's", seq_k))))
    return s;
  if ((s = check_headless_static_sizes(k, batch, seq_q, seq_k)))
    return s;
  /* Memory: the output shares memory with nothing. */
  static const int written[1] = {kY}, alias[1] = {-1};
  if ((s = check_written(all, all_role, kCount, written, alias, 1)))
    return s;

  const void *data[kCount];
  for (int i = 0; i < kCount; ++i)
    data[i] = all[i] ? all[i]->data : NULL;
  args->query = data[kQ];
  args->key = data[kK];
  args->value = data[kV];
  args->query_weight = data[kWq];
  args->key_weight = data[kWk];
  args->value_weight = data[kWv];
  args->in_bias = data[kBin];
  args->out_weight = data[kWo];
  args->out_bias = data[kBo];
  args->output = output->data;
  args->batch = batch;
  args->seq_q = seq_q;
  args->seq_k = seq_k;
  memcpy(args->query_strides, query->strides, sizeof(args->query_strides));
  memcpy(args->key_strides, key->strides, sizeof(args->key_strides));
  memcpy(args->value_strides, value->strides, sizeof(args->value_strides));
  memcpy(args->query_weight_strides, query_weight->strides,
         sizeof(args->query_weight_strides));
  memcpy(args->key_weight_strides, key_weight->strides,
         sizeof(args->key_weight_strides));
  memcpy(args->value_weight_strides, value_weight->strides,
         sizeof(args->value_weight_strides));
  memcpy(args->out_weight_strides, out_weight->strides,
         sizeof(args->out_weight_strides));
  if (in_bias)
    memcpy(args->in_bias_strides, in_bias->strides,
           sizeof(args->in_bias_strides));
  if (out_bias)
    memcpy(args->out_bias_strides, out_bias->strides,
           sizeof(args->out_bias_strides));
  memcpy(args->output_strides, output->strides, sizeof(args->output_strides));
  if (mask) {
    args->mask = mask->data;
    for (int d = 0; d < 4; ++d)
      args->mask_strides[d] = mask->shape[d] == 1 ? 0 : mask->strides[d];
  }
  return ATTN_OK;
}
