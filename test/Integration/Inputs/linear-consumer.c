/* A C program on the runtime: loads a causal linear attention kernel with a
 * state and a non-causal one without, runs them on random f32 inputs (GQA,
 * D != Dv, lengths that are not multiples of any chunk or vector) into
 * poisoned outputs, checks O and the final state against a float64
 * reference written token by token (the kernel computes chunks), checks
 * that a sequence run in two calls (the second starting from the first's
 * final state, updated in place) gives the one call's outputs, that one
 * thread and three give the same bits, and that the runtime refuses bad
 * calls with a message and writes nothing. Prints PASS or what failed. */
#include "attn/runtime.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { B = 2, HQ = 4, HKV = 2, S = 101, D = 24, DV = 40, G = HQ / HKV };
enum { SPLIT = 37 }; /* the two calls: rows [0, SPLIT) and [SPLIT, S) */

static float q[B][HQ][S][D], k[B][HKV][S][D], v[B][HKV][S][DV];
static float o[B][HQ][S][DV], o1[B][HQ][S][DV];
static float state[B][HKV][D][DV], norm[B][HKV][D];
static float state1[B][HKV][D][DV], norm1[B][HKV][D];
static double ro[B][HQ][S][DV], rstate[B][HKV][D][DV], rnorm[B][HKV][D];
static int failures;

static float uniform(unsigned *seed) {
  *seed = *seed * 1664525u + 1013904223u;
  return (float)((*seed >> 8) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static void fail(const char *what) {
  printf("FAIL: %s (%s)\n", what, attn_last_error());
  ++failures;
}

static double phi(double x) { return x > 0 ? x + 1 : exp(x); }

/* O over keys j <= i (causal) or all keys, from a zero state; the final
 * state. */
static void reference(int causal) {
  memset(rstate, 0, sizeof(rstate));
  memset(rnorm, 0, sizeof(rnorm));
  static double prefix[S + 1][D][DV], prefixNorm[S + 1][D];
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < HKV; ++g) {
      memset(prefix, 0, sizeof(prefix));
      memset(prefixNorm, 0, sizeof(prefixNorm));
      for (int j = 0; j < S; ++j)
        for (int d = 0; d < D; ++d) {
          double fk = phi(k[b][g][j][d]);
          prefixNorm[j + 1][d] = prefixNorm[j][d] + fk;
          for (int e = 0; e < DV; ++e)
            prefix[j + 1][d][e] = prefix[j][d][e] + fk * v[b][g][j][e];
        }
      for (int d = 0; d < D; ++d) {
        rnorm[b][g][d] = prefixNorm[S][d];
        for (int e = 0; e < DV; ++e)
          rstate[b][g][d][e] = prefix[S][d][e];
      }
      for (int h = g * G; h < (g + 1) * G; ++h)
        for (int i = 0; i < S; ++i) {
          int seen = causal ? i + 1 : S;
          double den = 1e-6;
          for (int d = 0; d < D; ++d)
            den += phi(q[b][h][i][d]) * prefixNorm[seen][d];
          for (int e = 0; e < DV; ++e) {
            double num = 0;
            for (int d = 0; d < D; ++d)
              num += phi(q[b][h][i][d]) * prefix[seen][d][e];
            ro[b][h][i][e] = num / den;
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

/* The rows [lo, hi) of a [B, H, S, X] tensor, as a view. */
static attn_tensor rows(attn_tensor t, int64_t lo, int64_t hi) {
  t.data = (char *)t.data + lo * t.strides[2] * 4;
  t.shape[2] = hi - lo;
  return t;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s kernels.so\n", argv[0]);
    return 2;
  }
  attn_module *module;
  const attn_kernel_desc *causal, *plain;
  if (attn_module_load(argv[1], &module) != ATTN_OK ||
      attn_module_find(module, "lin_causal", &causal) != ATTN_OK ||
      attn_module_find(module, "lin_plain", &plain) != ATTN_OK) {
    printf("FAIL: load (%s)\n", attn_last_error());
    return 1;
  }
  printf("kinds: %d %d, state %d %d, chunk %d, eps %g\n",
         attn_kernel_kind_of(causal), attn_kernel_kind_of(plain),
         causal->has_state, plain->has_state, causal->chunk,
         (double)causal->eps);

  unsigned seed = 11;
  for (float *x = &q[0][0][0][0]; x < &q[0][0][0][0] + sizeof(q) / 4; ++x)
    *x = uniform(&seed);
  for (float *x = &k[0][0][0][0]; x < &k[0][0][0][0] + sizeof(k) / 4; ++x)
    *x = uniform(&seed);
  for (float *x = &v[0][0][0][0]; x < &v[0][0][0][0] + sizeof(v) / 4; ++x)
    *x = uniform(&seed);

  int64_t qs[4] = {B, HQ, S, D}, ks[4] = {B, HKV, S, D},
          vs[4] = {B, HKV, S, DV}, os[4] = {B, HQ, S, DV},
          ss[4] = {B, HKV, D, DV}, zs[3] = {B, HKV, D};
  attn_tensor tq = attn_tensor_contiguous(q, ATTN_F32, 4, qs);
  attn_tensor tk = attn_tensor_contiguous(k, ATTN_F32, 4, ks);
  attn_tensor tv = attn_tensor_contiguous(v, ATTN_F32, 4, vs);
  attn_tensor to = attn_tensor_contiguous(o, ATTN_F32, 4, os);
  attn_tensor ts = attn_tensor_contiguous(state, ATTN_F32, 4, ss);
  attn_tensor tz = attn_tensor_contiguous(norm, ATTN_F32, 3, zs);
  attn_tensor ts1 = attn_tensor_contiguous(state1, ATTN_F32, 4, ss);
  attn_tensor tz1 = attn_tensor_contiguous(norm1, ATTN_F32, 3, zs);

  attn_thread_pool *pool1, *pool3;
  attn_thread_pool_create(1, &pool1);
  attn_thread_pool_create(3, &pool3);

  /* Causal, from a zero state, into poisoned O and final state. */
  memset(state, 0, sizeof(state));
  memset(norm, 0, sizeof(norm));
  memset(o, 0xff, sizeof(o));
  memset(state1, 0xff, sizeof(state1));
  memset(norm1, 0xff, sizeof(norm1));
  if (attn_run_linear(causal, &tq, &tk, &tv, &ts, &tz, &to, &ts1, &tz1,
                      pool3) != ATTN_OK)
    fail("causal");
  reference(1);
  double eo = relative_error(&o[0][0][0][0], &ro[0][0][0][0], sizeof(o) / 4);
  double es = relative_error(&state1[0][0][0][0], &rstate[0][0][0][0],
                             sizeof(state1) / 4);
  double ez =
      relative_error(&norm1[0][0][0], &rnorm[0][0][0], sizeof(norm1) / 4);
  printf("causal errors below 1e-5: %d %d %d\n", eo < 1e-5, es < 1e-5,
         ez < 1e-5);
  if (!(eo < 1e-5 && es < 1e-5 && ez < 1e-5))
    printf("errors: %g %g %g\n", eo, es, ez);

  /* The same sequence in two calls, the state updated in place. */
  memcpy(o1, o, sizeof(o));
  memset(o, 0xff, sizeof(o));
  memset(state, 0, sizeof(state));
  memset(norm, 0, sizeof(norm));
  attn_tensor parts[2][4] = {{rows(tq, 0, SPLIT), rows(tk, 0, SPLIT),
                              rows(tv, 0, SPLIT), rows(to, 0, SPLIT)},
                             {rows(tq, SPLIT, S), rows(tk, SPLIT, S),
                              rows(tv, SPLIT, S), rows(to, SPLIT, S)}};
  for (int p = 0; p < 2; ++p)
    if (attn_run_linear(causal, &parts[p][0], &parts[p][1], &parts[p][2], &ts,
                        &tz, &parts[p][3], &ts, &tz, pool3) != ATTN_OK)
      fail("a part of the sequence");
  eo = relative_error(&o[0][0][0][0], &ro[0][0][0][0], sizeof(o) / 4);
  es = relative_error(&state[0][0][0][0], &rstate[0][0][0][0],
                      sizeof(state) / 4);
  printf("two calls, in place, errors below 1e-5: %d %d\n", eo < 1e-5,
         es < 1e-5);

  /* One thread: the same bits as three. */
  memcpy(o1, o, sizeof(o));
  memset(state, 0, sizeof(state));
  memset(norm, 0, sizeof(norm));
  memset(o, 0xff, sizeof(o));
  for (int p = 0; p < 2; ++p)
    if (attn_run_linear(causal, &parts[p][0], &parts[p][1], &parts[p][2], &ts,
                        &tz, &parts[p][3], &ts, &tz, pool1) != ATTN_OK)
      fail("a part of the sequence on one thread");
  printf("same bits on 1 and 3 threads: %d\n", !memcmp(o1, o, sizeof(o)));

  /* Non-causal, no state. */
  memset(o, 0xff, sizeof(o));
  if (attn_run_linear(plain, &tq, &tk, &tv, NULL, NULL, &to, NULL, NULL,
                      pool3) != ATTN_OK)
    fail("non-causal");
  reference(0);
  eo = relative_error(&o[0][0][0][0], &ro[0][0][0][0], sizeof(o) / 4);
  printf("non-causal error below 1e-5: %d\n", eo < 1e-5);

  /* Bad calls: a message, and nothing written. */
  memcpy(o1, o, sizeof(o));
  memcpy(state1, state, sizeof(state));
  attn_tensor short_k = rows(tk, 0, S - 1), short_v = rows(tv, 0, S - 1);
  if (attn_run_linear(causal, &tq, &short_k, &short_v, &ts, &tz, &to, &ts1,
                      &tz1, pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("causal with Sk != Sq was accepted");
  printf("%s\n", attn_last_error());
  if (attn_run_linear(causal, &tq, &tk, &tv, NULL, NULL, &to, NULL, NULL,
                      pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("a state kernel ran without its state");
  printf("%s\n", attn_last_error());
  if (attn_run_linear(plain, &tq, &tk, &tv, &ts, &tz, &to, &ts1, &tz1, pool3) !=
      ATTN_ERROR_INVALID_ARGUMENT)
    fail("a state was accepted by a kernel without one");
  printf("%s\n", attn_last_error());
  attn_tensor wide_z = tz;
  wide_z.shape[2] = D + 1;
  if (attn_run_linear(causal, &tq, &tk, &tv, &ts, &wide_z, &to, &ts1, &tz1,
                      pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("a wrong normalizer was accepted");
  printf("%s\n", attn_last_error());
  attn_tensor on_state = ts1;
  on_state.data = &state[0][0][1][0]; /* overlaps S0 without being it */
  if (attn_run_linear(causal, &tq, &tk, &tv, &ts, &tz, &to, &on_state, &tz1,
                      pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("a final state overlapping the initial one was accepted");
  printf("%s\n", attn_last_error());
  attn_tensor on_query = to;
  on_query.data = q;
  if (attn_run_linear(plain, &tq, &tk, &tv, NULL, NULL, &on_query, NULL, NULL,
                      pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("an output overlapping the query was accepted");
  printf("%s\n", attn_last_error());
  if (attn_run(plain, &tq, &tk, &tv, NULL, &to, NULL, pool3) !=
      ATTN_ERROR_INVALID_ARGUMENT)
    fail("a linear kernel ran as softmax attention");
  printf("%s\n", attn_last_error());
  printf("nothing written: %d\n",
         !memcmp(o1, o, sizeof(o)) && !memcmp(state1, state, sizeof(state)));

  attn_thread_pool_destroy(pool1);
  attn_thread_pool_destroy(pool3);
  attn_module_unload(module);
  printf(failures ? "linear-consumer: FAIL\n" : "linear-consumer: PASS\n");
  return failures != 0;
}
