/* A C program on the runtime: a backward kernel that also writes the
 * gradient of the bias table its score_mod reads (spec key dcaptures=0,
 * attn_run_options::grad_captures). The modifiers are flex-modifiers.mlir's:
 * s + table[h, clamp(j - i, 0, 8)] with document masking (ids captured as
 * i32). B = 2, Hq = 4 over Hkv = 2, Sq = 21, Sk = 37: the forward's O and
 * LSE, then the backward into partial sums poisoned with NaN (one row per
 * batch and key/value head), summed here and checked against a float64
 * reference; the same bits on 1 and 3 threads; a wrong partial refused. */
#include "attn/runtime.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { B = 2, HQ = 4, HKV = 2, SQ = 21, SK = 37, D = 16, NB = 9 };

static float q[B][HQ][SQ][D], k[B][HKV][SK][D], v[B][HKV][SK][D];
static float o[B][HQ][SQ][D], lse[B][HQ][SQ], dout[B][HQ][SQ][D];
static float dq[B][HQ][SQ][D], dk[B][HKV][SK][D], dv[B][HKV][SK][D];
static float table[HQ][NB];
static int32_t docs[SK];
static float partials[2][B * HKV][HQ * NB];

static unsigned state = 12345u;
static float next_random(void) {
  state = state * 1664525u + 1013904223u;
  return (float)((state >> 8) & 0xffff) / 65536.0f - 0.5f;
}

static int bucket(int i, int j) {
  int d = j - i;
  return d < 0 ? 0 : d > 8 ? 8 : d;
}

/* The table's gradient in float64: Σ dS' = P·(dP − Δ) at each bucket. */
static void reference(double grad[HQ][NB]) {
  memset(grad, 0, sizeof(double) * HQ * NB);
  const double scale = 1.0 / sqrt((double)D);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < HQ; ++h) {
      int g = h / (HQ / HKV);
      for (int i = 0; i < SQ; ++i) {
        double s[SK], m = -INFINITY, sum = 0, out[D] = {0}, delta = 0;
        for (int j = 0; j < SK; ++j) {
          s[j] = -INFINITY;
          if (docs[i] != docs[j])
            continue;
          double dot = 0;
          for (int d = 0; d < D; ++d)
            dot += (double)q[b][h][i][d] * k[b][g][j][d];
          s[j] = dot * scale + table[h][bucket(i, j)];
          m = fmax(m, s[j]);
        }
        for (int j = 0; j < SK; ++j)
          sum += exp(s[j] - m);
        for (int j = 0; j < SK; ++j)
          for (int d = 0; d < D; ++d)
            out[d] += exp(s[j] - m) / sum * v[b][g][j][d];
        for (int d = 0; d < D; ++d)
          delta += (double)dout[b][h][i][d] * out[d];
        for (int j = 0; j < SK; ++j) {
          if (docs[i] != docs[j])
            continue;
          double p = exp(s[j] - m) / sum, dp = 0;
          for (int d = 0; d < D; ++d)
            dp += (double)dout[b][h][i][d] * v[b][g][j][d];
          grad[h][bucket(i, j)] += p * (dp - delta);
        }
      }
    }
}

int main(int argc, char **argv) {
  if (argc != 2)
    return 2;
  attn_module *module = NULL;
  const attn_kernel_desc *forward = NULL, *backward = NULL;
  if (attn_module_load(argv[1], &module) != ATTN_OK ||
      attn_module_find(module, "fwd", &forward) != ATTN_OK ||
      attn_module_find(module, "bwd", &backward) != ATTN_OK) {
    printf("FAIL: %s\n", attn_last_error());
    return 1;
  }
  printf("grad_captures: fwd %u bwd %u\n", attn_kernel_grad_captures(forward),
         attn_kernel_grad_captures(backward));
  for (int j = 0; j < SK; ++j)
    docs[j] = j < 13 ? 0 : 1;
  for (int h = 0; h < HQ; ++h)
    for (int e = 0; e < NB; ++e)
      table[h][e] = next_random();
  float *fill[] = {&q[0][0][0][0], &k[0][0][0][0], &v[0][0][0][0],
                   &dout[0][0][0][0]};
  size_t counts[] = {sizeof(q) / 4, sizeof(k) / 4, sizeof(v) / 4,
                     sizeof(dout) / 4};
  for (int t = 0; t < 4; ++t)
    for (size_t n = 0; n < counts[t]; ++n)
      fill[t][n] = 2.0f * next_random();

  int64_t qs[4] = {B, HQ, SQ, D}, ks[4] = {B, HKV, SK, D}, ls[3] = {B, HQ, SQ},
          table_shape[2] = {HQ, NB}, docs_shape[1] = {SK},
          partial_shape[2] = {B * HKV, HQ * NB};
  attn_tensor tq = attn_tensor_contiguous(q, ATTN_F32, 4, qs),
              tk = attn_tensor_contiguous(k, ATTN_F32, 4, ks),
              tv = attn_tensor_contiguous(v, ATTN_F32, 4, ks),
              to = attn_tensor_contiguous(o, ATTN_F32, 4, qs),
              tl = attn_tensor_contiguous(lse, ATTN_F32, 3, ls),
              tdo = attn_tensor_contiguous(dout, ATTN_F32, 4, qs),
              tdq = attn_tensor_contiguous(dq, ATTN_F32, 4, qs),
              tdk = attn_tensor_contiguous(dk, ATTN_F32, 4, ks),
              tdv = attn_tensor_contiguous(dv, ATTN_F32, 4, ks);
  attn_tensor captures[2] = {
      attn_tensor_contiguous(table, ATTN_F32, 2, table_shape),
      attn_tensor_contiguous(docs, ATTN_I32, 1, docs_shape)};
  attn_tensor grads[2] = {
      attn_tensor_contiguous(partials[0], ATTN_F32, 2, partial_shape), {0}};
  attn_run_options options;
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.captures = captures;
  options.num_captures = 2;
  attn_thread_pool *pools[2] = {NULL, NULL};
  attn_thread_pool_create(3, &pools[0]);
  attn_thread_pool_create(1, &pools[1]);
  if (attn_run_with(forward, &tq, &tk, &tv, NULL, &to, &tl, &options,
                    pools[0]) != ATTN_OK) {
    printf("FAIL: %s\n", attn_last_error());
    return 1;
  }
  options.grad_captures = grads;
  for (int run = 0; run < 2; ++run) {
    memset(partials[run], 0xff, sizeof(partials[run])); /* NaN */
    grads[0].data = partials[run];
    if (attn_run_backward_with(backward, &tq, &tk, &tv, NULL, &to, &tl, &tdo,
                               NULL, &tdq, &tdk, &tdv, &options,
                               pools[run]) != ATTN_OK) {
      printf("FAIL: %s\n", attn_last_error());
      return 1;
    }
  }
  double want[HQ][NB], worst = 0, largest = 0;
  reference(want);
  for (int h = 0; h < HQ; ++h)
    for (int e = 0; e < NB; ++e) {
      double got = 0;
      for (int w = 0; w < B * HKV; ++w)
        got += partials[0][w][h * NB + e];
      worst = fmax(worst, fabs(got - want[h][e]));
      largest = fmax(largest, fabs(want[h][e]));
    }
  printf("table gradient error below 1e-4: %d\n",
         largest > 0 && worst <= 1e-4 * largest);
  printf("same bits on 1 and 3 threads: %d\n",
         memcmp(partials[0], partials[1], sizeof(partials[0])) == 0);

  grads[0].shape[1] = HQ * NB - 1;
  if (attn_run_backward_with(backward, &tq, &tk, &tv, NULL, &to, &tl, &tdo,
                             NULL, &tdq, &tdk, &tdv, &options,
                             pools[0]) == ATTN_OK)
    printf("FAIL: a wrong partial was accepted\n");
  else
    printf("refused: %s\n", attn_last_error());
  options.grad_captures = NULL;
  if (attn_run_backward_with(backward, &tq, &tk, &tv, NULL, &to, &tl, &tdo,
                             NULL, &tdq, &tdk, &tdv, &options,
                             pools[0]) == ATTN_OK)
    printf("FAIL: a missing partial was accepted\n");
  else
    printf("refused: %s\n", attn_last_error());
  /* No query head: nothing reaches the table, whose partials are zeros. */
  int64_t qs0[4] = {B, 0, SQ, D}, ls0[3] = {B, 0, SQ};
  attn_tensor tq0 = attn_tensor_contiguous(q, ATTN_F32, 4, qs0),
              to0 = attn_tensor_contiguous(o, ATTN_F32, 4, qs0),
              tl0 = attn_tensor_contiguous(lse, ATTN_F32, 3, ls0),
              tdo0 = attn_tensor_contiguous(dout, ATTN_F32, 4, qs0),
              tdq0 = attn_tensor_contiguous(dq, ATTN_F32, 4, qs0);
  grads[0] = attn_tensor_contiguous(partials[0], ATTN_F32, 2, partial_shape);
  options.grad_captures = grads;
  memset(partials[0], 0xff, sizeof(partials[0]));
  int zeros = attn_run_backward_with(backward, &tq0, &tk, &tv, NULL, &to0, &tl0,
                                     &tdo0, NULL, &tdq0, &tdk, &tdv, &options,
                                     pools[0]) == ATTN_OK;
  for (int w = 0; w < B * HKV; ++w)
    for (int e = 0; e < HQ * NB; ++e)
      zeros &= partials[0][w][e] == 0.0f;
  printf("no query head, partials zero: %d\n", zeros);
  attn_thread_pool_destroy(pools[0]);
  attn_thread_pool_destroy(pools[1]);
  attn_module_unload(module);
  printf("grad-captures-consumer: PASS\n");
  return 0;
}
