/* Runs a kernel that attn_add_kernel compiled into this program, through
 * the attn runtime (checked arguments, all cores), and checks it against a
 * naive computation. Prints "cmake-consumer: PASS" on success. */
#include "attn/runtime.h"
#include "causal_kernel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 1, HQ = 4, HKV = 2, SQ = 19, SK = 40, D = 32 };

static float q[B * HQ * SQ * D], k[B * HKV * SK * D], v[B * HKV * SK * D];
static float o[B * HQ * SQ * D], lse[B * HQ * SQ];

int main(void) {
  for (size_t i = 0; i < sizeof q / sizeof *q; ++i)
    q[i] = (float)((i * 7919) % 101) / 101.0f - 0.5f;
  for (size_t i = 0; i < sizeof k / sizeof *k; ++i) {
    k[i] = (float)((i * 104729) % 97) / 97.0f - 0.5f;
    v[i] = (float)((i * 1299709) % 89) / 89.0f - 0.5f;
  }

  attn_module *module = NULL;
  const attn_kernel_desc *kernel = NULL;
  attn_thread_pool *pool = NULL;
  if (attn_module_from_library(&causal_kernel_library, &module) != ATTN_OK ||
      attn_module_find(module, "causal_kernel", &kernel) != ATTN_OK ||
      attn_thread_pool_create(0, &pool) != ATTN_OK) {
    printf("cmake-consumer: FAIL: %s\n", attn_last_error());
    return 1;
  }
  int64_t qs[4] = {B, HQ, SQ, D}, ks[4] = {B, HKV, SK, D};
  int64_t os[4] = {B, HQ, SQ, D}, ls[3] = {B, HQ, SQ};
  attn_tensor tq = attn_tensor_contiguous(q, ATTN_F32, 4, qs);
  attn_tensor tk = attn_tensor_contiguous(k, ATTN_F32, 4, ks);
  attn_tensor tv = attn_tensor_contiguous(v, ATTN_F32, 4, ks);
  attn_tensor to = attn_tensor_contiguous(o, ATTN_F32, 4, os);
  attn_tensor tl = attn_tensor_contiguous(lse, ATTN_F32, 3, ls);

  /* A bad call is refused with a message, and writes nothing. */
  attn_tensor bad = tk;
  bad.shape[3] = 16;
  if (attn_run(kernel, &tq, &bad, &tv, NULL, &to, &tl, pool) == ATTN_OK) {
    printf("cmake-consumer: FAIL: a key with D=16 was accepted\n");
    return 1;
  }
  printf("cmake-consumer: bad call refused: %s\n", attn_last_error());

  if (attn_run(kernel, &tq, &tk, &tv, NULL, &to, &tl, pool) != ATTN_OK) {
    printf("cmake-consumer: FAIL: %s\n", attn_last_error());
    return 1;
  }

  double max_err = 0, max_ref = 0;
  for (int h = 0; h < HQ; ++h)
    for (int i = 0; i < SQ; ++i) {
      int kvh = h / (HQ / HKV);
      double s[SK], m = -INFINITY, l = 0;
      for (int j = 0; j < SK; ++j) {
        s[j] = -INFINITY;
        if (j > i + (SK - SQ))
          continue;
        double dot = 0;
        for (int d = 0; d < D; ++d)
          dot += (double)q[(h * SQ + i) * D + d] * k[(kvh * SK + j) * D + d];
        s[j] = dot / sqrt((double)D);
        m = s[j] > m ? s[j] : m;
      }
      for (int j = 0; j < SK; ++j)
        l += s[j] > -INFINITY ? exp(s[j] - m) : 0;
      for (int e = 0; e < D; ++e) {
        double ref = 0;
        for (int j = 0; j < SK; ++j)
          if (s[j] > -INFINITY)
            ref += exp(s[j] - m) / l * v[(kvh * SK + j) * D + e];
        double err = fabs(ref - o[(h * SQ + i) * D + e]);
        max_err = err > max_err || isnan(err) ? err : max_err;
        max_ref = fabs(ref) > max_ref ? fabs(ref) : max_ref;
      }
    }
  attn_thread_pool_destroy(pool);
  attn_module_unload(module);
  printf("cmake-consumer: max relative error %.3g\n", max_err / max_ref);
  if (!(max_err / max_ref <= 1e-5)) {
    printf("cmake-consumer: FAIL\n");
    return 1;
  }
  printf("cmake-consumer: PASS\n");
  return 0;
}
