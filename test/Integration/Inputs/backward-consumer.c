/* A C program on the runtime: loads a forward kernel (with LSE) and its
 * backward kernel, runs both on random f32 inputs (causal GQA, D != Dv,
 * sizes that are not multiples of any tile), checks dQ, dK and dV against a
 * float64 reference that materializes P, checks that the gradients are the
 * same bits on one thread and on three, and that the runtime refuses bad
 * calls with a message and writes nothing. Prints PASS or what failed. */
#include "attn/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, HQ = 4, HKV = 2, SQ = 37, SK = 53, D = 24, DV = 16, G = HQ / HKV };

static float q[B][HQ][SQ][D], k[B][HKV][SK][D], v[B][HKV][SK][DV];
static float o[B][HQ][SQ][DV], lse[B][HQ][SQ], dout[B][HQ][SQ][DV];
static float dq[B][HQ][SQ][D], dk[B][HKV][SK][D], dv[B][HKV][SK][DV];
static float dq1[B][HQ][SQ][D], dk1[B][HKV][SK][D], dv1[B][HKV][SK][DV];
static double rq[B][HQ][SQ][D], rk[B][HKV][SK][D], rv[B][HKV][SK][DV];
static int failures;

static float uniform(unsigned *state) {
  *state = *state * 1664525u + 1013904223u;
  return (float)((*state >> 8) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static void fail(const char *what) {
  printf("FAIL: %s (%s)\n", what, attn_last_error());
  ++failures;
}

/* Causal, bottom-right: row i sees keys j <= i + SK - SQ. */
static void reference(void) {
  const double scale = 1.0 / sqrt((double)D);
  memset(rq, 0, sizeof(rq));
  memset(rk, 0, sizeof(rk));
  memset(rv, 0, sizeof(rv));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < HQ; ++h)
      for (int i = 0; i < SQ; ++i) {
        int kv = h / G, last = i + SK - SQ;
        double s[SK], p[SK], dp[SK], m = -INFINITY, sum = 0, mean = 0;
        for (int j = 0; j <= last; ++j) {
          s[j] = 0;
          for (int c = 0; c < D; ++c)
            s[j] += (double)q[b][h][i][c] * k[b][kv][j][c];
          s[j] *= scale;
          m = s[j] > m ? s[j] : m;
        }
        for (int j = 0; j <= last; ++j)
          sum += exp(s[j] - m);
        for (int j = 0; j <= last; ++j) {
          p[j] = exp(s[j] - m) / sum;
          dp[j] = 0;
          for (int c = 0; c < DV; ++c)
            dp[j] += (double)dout[b][h][i][c] * v[b][kv][j][c];
          mean += p[j] * dp[j];
        }
        for (int j = 0; j <= last; ++j) {
          double ds = p[j] * (dp[j] - mean) * scale;
          for (int c = 0; c < DV; ++c)
            rv[b][kv][j][c] += p[j] * dout[b][h][i][c];
          for (int c = 0; c < D; ++c) {
            rq[b][h][i][c] += ds * k[b][kv][j][c];
            rk[b][kv][j][c] += ds * q[b][h][i][c];
          }
        }
      }
}

static double relative_error(const float *got, const double *want, size_t n) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    double e = fabs((double)got[i] - want[i]);
    if (!(e <= worst))
      worst = e; /* NaN included */
    scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
  }
  return worst / (scale > 0 ? scale : 1);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s kernels.so\n", argv[0]);
    return 2;
  }
  attn_module *module;
  const attn_kernel_desc *forward, *backward;
  if (attn_module_load(argv[1], &module) != ATTN_OK ||
      attn_module_find(module, "fwd", &forward) != ATTN_OK ||
      attn_module_find(module, "bwd", &backward) != ATTN_OK) {
    printf("FAIL: load (%s)\n", attn_last_error());
    return 1;
  }
  printf("kinds: fwd %d bwd %d grad_lse %d\n", attn_kernel_kind_of(forward),
         attn_kernel_kind_of(backward), backward->has_grad_lse);

  unsigned state = 7;
  for (float *x = &q[0][0][0][0]; x < &q[0][0][0][0] + sizeof(q) / 4; ++x)
    *x = uniform(&state);
  for (float *x = &k[0][0][0][0]; x < &k[0][0][0][0] + sizeof(k) / 4; ++x)
    *x = uniform(&state);
  for (float *x = &v[0][0][0][0]; x < &v[0][0][0][0] + sizeof(v) / 4; ++x)
    *x = uniform(&state);
  for (float *x = &dout[0][0][0][0]; x < &dout[0][0][0][0] + sizeof(dout) / 4;
       ++x)
    *x = uniform(&state);

  int64_t qs[4] = {B, HQ, SQ, D}, ks[4] = {B, HKV, SK, D},
          vs[4] = {B, HKV, SK, DV}, os[4] = {B, HQ, SQ, DV}, ls[3] = {B, HQ, SQ};
  attn_tensor tq = attn_tensor_contiguous(q, ATTN_F32, 4, qs);
  attn_tensor tk = attn_tensor_contiguous(k, ATTN_F32, 4, ks);
  attn_tensor tv = attn_tensor_contiguous(v, ATTN_F32, 4, vs);
  attn_tensor to = attn_tensor_contiguous(o, ATTN_F32, 4, os);
  attn_tensor tl = attn_tensor_contiguous(lse, ATTN_F32, 3, ls);
  attn_tensor tdo = attn_tensor_contiguous(dout, ATTN_F32, 4, os);
  attn_tensor tdq = attn_tensor_contiguous(dq, ATTN_F32, 4, qs);
  attn_tensor tdk = attn_tensor_contiguous(dk, ATTN_F32, 4, ks);
  attn_tensor tdv = attn_tensor_contiguous(dv, ATTN_F32, 4, vs);

  attn_thread_pool *pool1, *pool3;
  attn_thread_pool_create(1, &pool1);
  attn_thread_pool_create(3, &pool3);
  if (attn_run(forward, &tq, &tk, &tv, NULL, &to, &tl, pool3) != ATTN_OK)
    fail("forward");

  /* Poisoned outputs: every element must be written. */
  memset(dq, 0xff, sizeof(dq));
  memset(dk, 0xff, sizeof(dk));
  memset(dv, 0xff, sizeof(dv));
  if (attn_run_backward(backward, &tq, &tk, &tv, NULL, &to, &tl, &tdo, NULL,
                        &tdq, &tdk, &tdv, 0.0f, 0, pool3) != ATTN_OK)
    fail("backward");
  reference();
  double eq = relative_error(&dq[0][0][0][0], &rq[0][0][0][0], sizeof(dq) / 4);
  double ek = relative_error(&dk[0][0][0][0], &rk[0][0][0][0], sizeof(dk) / 4);
  double ev = relative_error(&dv[0][0][0][0], &rv[0][0][0][0], sizeof(dv) / 4);
  printf("errors below 1e-4: %d %d %d\n", eq < 1e-4, ek < 1e-4, ev < 1e-4);
  if (!(eq < 1e-4 && ek < 1e-4 && ev < 1e-4))
    printf("errors: %g %g %g\n", eq, ek, ev);

  /* One thread: the same bits. */
  memcpy(dq1, dq, sizeof(dq));
  memcpy(dk1, dk, sizeof(dk));
  memcpy(dv1, dv, sizeof(dv));
  if (attn_run_backward(backward, &tq, &tk, &tv, NULL, &to, &tl, &tdo, NULL,
                        &tdq, &tdk, &tdv, 0.0f, 0, pool1) != ATTN_OK)
    fail("backward on one thread");
  printf("same bits on 1 and 3 threads: %d\n",
         !memcmp(dq1, dq, sizeof(dq)) && !memcmp(dk1, dk, sizeof(dk)) &&
             !memcmp(dv1, dv, sizeof(dv)));

  /* Bad calls: a message, and nothing written. */
  memset(dq, 0x7f, sizeof(dq));
  memcpy(dq1, dq, sizeof(dq));
  attn_tensor short_do = tdo;
  short_do.shape[2] = SQ - 1;
  if (attn_run_backward(backward, &tq, &tk, &tv, NULL, &to, &tl, &short_do,
                        NULL, &tdq, &tdk, &tdv, 0.0f, 0, pool3) !=
      ATTN_ERROR_INVALID_ARGUMENT)
    fail("a short grad_output was accepted");
  printf("%s\n", attn_last_error());
  attn_tensor overlapping = tdk;
  overlapping.data = dq;
  if (attn_run_backward(backward, &tq, &tk, &tv, NULL, &to, &tl, &tdo, NULL,
                        &tdq, &overlapping, &tdv, 0.0f, 0, pool3) !=
      ATTN_ERROR_INVALID_ARGUMENT)
    fail("overlapping gradients were accepted");
  printf("%s\n", attn_last_error());
  if (attn_run_backward(backward, &tq, &tk, &tv, NULL, &to, &tl, &tdo, &tl,
                        &tdq, &tdk, &tdv, 0.0f, 0, pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("a grad_lse was accepted by a kernel without one");
  printf("%s\n", attn_last_error());
  if (attn_run_backward(forward, &tq, &tk, &tv, NULL, &to, &tl, &tdo, NULL,
                        &tdq, &tdk, &tdv, 0.0f, 0, pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("a forward kernel ran as a backward one");
  printf("%s\n", attn_last_error());
  if (attn_run(backward, &tq, &tk, &tv, NULL, &to, &tl, pool3) !=
      ATTN_ERROR_INVALID_ARGUMENT)
    fail("a backward kernel ran as a forward one");
  printf("%s\n", attn_last_error());
  printf("nothing written: %d\n", !memcmp(dq1, dq, sizeof(dq)));

  attn_thread_pool_destroy(pool1);
  attn_thread_pool_destroy(pool3);
  attn_module_unload(module);
  printf(failures ? "backward-consumer: FAIL\n" : "backward-consumer: PASS\n");
  return failures != 0;
}
