/* A C program on the runtime: loads three linear attention backward
 * kernels (attn.linear_backward): non-causal with the state's gradients
 * (elu + 1) and without (relu), causal with them; runs them on random f32
 * inputs (GQA, D != Dv, lengths that are not multiples of any chunk or vector,
 * Sq != Sk) into poisoned gradients, checks dQ, dK, dV, dS0 and dz0 against a
 * float64 reference of docs/spec.md's "Gradient of linear attention"
 * written row by row, that one thread and three give the same bits, and
 * that the runtime refuses bad calls with a message and writes nothing.
 * Prints PASS or what failed. */
#include "attn/runtime.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { B = 2, HQ = 4, HKV = 2, SQ = 53, SK = 101, D = 24, DV = 40 };
enum { G = HQ / HKV };

static float q[B][HQ][SQ][D], k[B][HKV][SK][D], v[B][HKV][SK][DV];
static float o[B][HQ][SQ][DV], dout[B][HQ][SQ][DV];
static float state[B][HKV][D][DV], norm[B][HKV][D];
static float ds1[B][HKV][D][DV], dz1[B][HKV][D];
static float dq[B][HQ][SQ][D], dk[B][HKV][SK][D], dv[B][HKV][SK][DV];
static float ds0[B][HKV][D][DV], dz0[B][HKV][D];
static float dq1[B][HQ][SQ][D], dk1[B][HKV][SK][D], dv1[B][HKV][SK][DV];
static double rdq[B][HQ][SQ][D], rdk[B][HKV][SK][D], rdv[B][HKV][SK][DV];
static double rds[B][HKV][D][DV], rdz[B][HKV][D];
static int failures;

static float uniform(unsigned *seed) {
  *seed = *seed * 1664525u + 1013904223u;
  return (float)((*seed >> 8) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static void fill(float *x, size_t n, unsigned *seed, float scale,
                 float offset) {
  for (size_t i = 0; i < n; ++i)
    x[i] = scale * uniform(seed) + offset;
}

static void fail(const char *what) {
  printf("FAIL: %s (%s)\n", what, attn_last_error());
  ++failures;
}

static int relu;
static double phi(double x) {
  if (relu)
    return x > 0 ? x : 0;
  return x > 0 ? x + 1 : exp(x);
}
static double slope(double x) {
  if (relu)
    return x > 0 ? 1 : 0;
  return x > 0 ? 1 : exp(x);
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

/* O of the state the rows see (the forward's, to the f32 it is stored
 * in), as the gradient reads it. */
static void forward_output(void) {
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < HQ; ++h)
      for (int i = 0; i < SQ; ++i) {
        int g = h / G;
        double den = 1e-6;
        for (int d = 0; d < D; ++d)
          den += phi(q[b][h][i][d]) * norm[b][g][d];
        for (int e = 0; e < DV; ++e) {
          double num = 0;
          for (int d = 0; d < D; ++d)
            num += phi(q[b][h][i][d]) * state[b][g][d][e];
          o[b][h][i][e] = (float)(num / den);
        }
      }
}

/* dK and dV of key j from the state gradients rds, rdz it sees. */
static void key_gradients(int b, int g, int j) {
  for (int d = 0; d < D; ++d) {
    double dphi = rdz[b][g][d];
    for (int e = 0; e < DV; ++e)
      dphi += rds[b][g][d][e] * v[b][g][j][e];
    rdk[b][g][j][d] = dphi * slope(k[b][g][j][d]);
  }
  for (int e = 0; e < DV; ++e) {
    double sum = 0;
    for (int d = 0; d < D; ++d)
      sum += rds[b][g][d][e] * phi(k[b][g][j][d]);
    rdv[b][g][j][e] = sum;
  }
}

/* Causal (Sq = Sk = SQ, the first SQ keys): O of the initial state in
 * `state`, `norm` plus each row's prefix of keys. */
static double prefix[SQ + 1][D][DV], prefix_norm[SQ + 1][D];
static void causal_prefix(int b, int g) {
  for (int d = 0; d < D; ++d) {
    prefix_norm[0][d] = norm[b][g][d];
    for (int e = 0; e < DV; ++e)
      prefix[0][d][e] = state[b][g][d][e];
  }
  for (int j = 0; j < SQ; ++j)
    for (int d = 0; d < D; ++d) {
      double fk = phi(k[b][g][j][d]);
      prefix_norm[j + 1][d] = prefix_norm[j][d] + fk;
      for (int e = 0; e < DV; ++e)
        prefix[j + 1][d][e] = prefix[j][d][e] + fk * v[b][g][j][e];
    }
}

static void causal_forward_output(void) {
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < HKV; ++g) {
      causal_prefix(b, g);
      for (int h = g * G; h < (g + 1) * G; ++h)
        for (int i = 0; i < SQ; ++i) {
          double den = 1e-6;
          for (int d = 0; d < D; ++d)
            den += phi(q[b][h][i][d]) * prefix_norm[i + 1][d];
          for (int e = 0; e < DV; ++e) {
            double num = 0;
            for (int d = 0; d < D; ++d)
              num += phi(q[b][h][i][d]) * prefix[i + 1][d][e];
            o[b][h][i][e] = (float)(num / den);
          }
        }
    }
}

/* The causal gradient: row i's dφ(Q) from its prefix state, key j's from
 * the rows i >= j (suffix sums, run backward in time). */
static void causal_reference(void) {
  static double grad[HQ][SQ][DV], coeff[HQ][SQ];
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < HKV; ++g) {
      causal_prefix(b, g);
      for (int h = g * G; h < (g + 1) * G; ++h)
        for (int i = 0; i < SQ; ++i) {
          double den = 1e-6, c = 0;
          for (int d = 0; d < D; ++d)
            den += phi(q[b][h][i][d]) * prefix_norm[i + 1][d];
          for (int e = 0; e < DV; ++e) {
            grad[h][i][e] = dout[b][h][i][e] / den;
            c -= grad[h][i][e] * o[b][h][i][e];
          }
          coeff[h][i] = c;
          for (int d = 0; d < D; ++d) {
            double dphi = c * prefix_norm[i + 1][d];
            for (int e = 0; e < DV; ++e)
              dphi += prefix[i + 1][d][e] * grad[h][i][e];
            rdq[b][h][i][d] = dphi * slope(q[b][h][i][d]);
          }
        }
      for (int d = 0; d < D; ++d) {
        rdz[b][g][d] = dz1[b][g][d];
        for (int e = 0; e < DV; ++e)
          rds[b][g][d][e] = ds1[b][g][d][e];
      }
      for (int j = SQ - 1; j >= 0; --j) {
        for (int h = g * G; h < (g + 1) * G; ++h)
          for (int d = 0; d < D; ++d) {
            double fq = phi(q[b][h][j][d]);
            rdz[b][g][d] += coeff[h][j] * fq;
            for (int e = 0; e < DV; ++e)
              rds[b][g][d][e] += fq * grad[h][j][e];
          }
        key_gradients(b, g, j);
      }
    }
}

/* The worst error of the first SQ rows of a [B, HKV, SK, W] gradient. */
static double causal_key_error(const float *got, const double *want,
                               int width) {
  double worst = 0;
  for (int bg = 0; bg < B * HKV; ++bg) {
    size_t at = (size_t)bg * SK * width;
    double e = relative_error(got + at, want + at, (size_t)SQ * width);
    worst = e > worst ? e : worst;
  }
  return worst;
}

/* docs/spec.md's gradient, non-causal: every row sees S and z. */
static void reference(int with_state) {
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < HKV; ++g) {
      for (int d = 0; d < D; ++d) {
        rdz[b][g][d] = with_state ? dz1[b][g][d] : 0;
        for (int e = 0; e < DV; ++e)
          rds[b][g][d][e] = with_state ? ds1[b][g][d][e] : 0;
      }
      for (int h = g * G; h < (g + 1) * G; ++h)
        for (int i = 0; i < SQ; ++i) {
          double den = 1e-6, grad[DV], c = 0;
          for (int d = 0; d < D; ++d)
            den += phi(q[b][h][i][d]) * norm[b][g][d];
          for (int e = 0; e < DV; ++e) {
            grad[e] = dout[b][h][i][e] / den;
            c -= grad[e] * o[b][h][i][e];
          }
          for (int d = 0; d < D; ++d) {
            double dphi = c * norm[b][g][d], fq = phi(q[b][h][i][d]);
            for (int e = 0; e < DV; ++e) {
              dphi += state[b][g][d][e] * grad[e];
              rds[b][g][d][e] += fq * grad[e];
            }
            rdz[b][g][d] += c * fq;
            rdq[b][h][i][d] = dphi * slope(q[b][h][i][d]);
          }
        }
      for (int j = 0; j < SK; ++j) {
        key_gradients(b, g, j);
      }
    }
}

#define ERROR_OF(got, want)                                                    \
  relative_error(&got[0][0][0][0], &want[0][0][0][0], sizeof(got) / 4)

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s kernels.so\n", argv[0]);
    return 2;
  }
  attn_module *module;
  const attn_kernel_desc *grads, *plain, *forward, *causal;
  if (attn_module_load(argv[1], &module) != ATTN_OK ||
      attn_module_find(module, "lin_grad", &grads) != ATTN_OK ||
      attn_module_find(module, "lin_grad_relu", &plain) != ATTN_OK ||
      attn_module_find(module, "lin_fwd", &forward) != ATTN_OK ||
      attn_module_find(module, "lin_grad_causal", &causal) != ATTN_OK) {
    printf("FAIL: load (%s)\n", attn_last_error());
    return 1;
  }
  printf("kinds: %d %d, state %d %d, feature maps %d %d\n",
         attn_kernel_kind_of(grads), attn_kernel_kind_of(plain),
         grads->has_state, plain->has_state, grads->feature_map,
         plain->feature_map);

  unsigned seed = 7;
  fill(&q[0][0][0][0], sizeof(q) / 4, &seed, 1, 0);
  fill(&k[0][0][0][0], sizeof(k) / 4, &seed, 1, 0);
  fill(&v[0][0][0][0], sizeof(v) / 4, &seed, 1, 0);
  fill(&dout[0][0][0][0], sizeof(dout) / 4, &seed, 1, 0);
  fill(&ds1[0][0][0][0], sizeof(ds1) / 4, &seed, 0.1f, 0);
  fill(&dz1[0][0][0], sizeof(dz1) / 4, &seed, 0.1f, 0);
  /* A state as a forward leaves it: S of order Sk, z positive. */
  fill(&state[0][0][0][0], sizeof(state) / 4, &seed, 10, 5);
  fill(&norm[0][0][0], sizeof(norm) / 4, &seed, 10, 60);

  int64_t qs[4] = {B, HQ, SQ, D}, ks[4] = {B, HKV, SK, D},
          vs[4] = {B, HKV, SK, DV}, os[4] = {B, HQ, SQ, DV},
          ss[4] = {B, HKV, D, DV}, zs[3] = {B, HKV, D};
  attn_tensor tq = attn_tensor_contiguous(q, ATTN_F32, 4, qs);
  attn_tensor tk = attn_tensor_contiguous(k, ATTN_F32, 4, ks);
  attn_tensor tv = attn_tensor_contiguous(v, ATTN_F32, 4, vs);
  attn_tensor to = attn_tensor_contiguous(o, ATTN_F32, 4, os);
  attn_tensor tdo = attn_tensor_contiguous(dout, ATTN_F32, 4, os);
  attn_tensor ts = attn_tensor_contiguous(state, ATTN_F32, 4, ss);
  attn_tensor tz = attn_tensor_contiguous(norm, ATTN_F32, 3, zs);
  attn_tensor tds1 = attn_tensor_contiguous(ds1, ATTN_F32, 4, ss);
  attn_tensor tdz1 = attn_tensor_contiguous(dz1, ATTN_F32, 3, zs);
  attn_tensor tdq = attn_tensor_contiguous(dq, ATTN_F32, 4, qs);
  attn_tensor tdk = attn_tensor_contiguous(dk, ATTN_F32, 4, ks);
  attn_tensor tdv = attn_tensor_contiguous(dv, ATTN_F32, 4, vs);
  attn_tensor tds0 = attn_tensor_contiguous(ds0, ATTN_F32, 4, ss);
  attn_tensor tdz0 = attn_tensor_contiguous(dz0, ATTN_F32, 3, zs);

  attn_thread_pool *pool1, *pool3;
  attn_thread_pool_create(1, &pool1);
  attn_thread_pool_create(3, &pool3);

  /* elu + 1 with the state's gradients, into poisoned gradients. */
  forward_output();
  memset(dq, 0xff, sizeof(dq));
  memset(dk, 0xff, sizeof(dk));
  memset(dv, 0xff, sizeof(dv));
  memset(ds0, 0xff, sizeof(ds0));
  memset(dz0, 0xff, sizeof(dz0));
  if (attn_run_linear_backward(grads, &tq, &tk, &tv, &to, &tdo, &ts, &tz, &tds1,
                               &tdz1, &tdq, &tdk, &tdv, &tds0, &tdz0,
                               pool3) != ATTN_OK)
    fail("with the state's gradients");
  reference(1);
  double eq = ERROR_OF(dq, rdq), ek = ERROR_OF(dk, rdk), ev = ERROR_OF(dv, rdv),
         es = ERROR_OF(ds0, rds),
         ez = relative_error(&dz0[0][0][0], &rdz[0][0][0], sizeof(dz0) / 4);
  int below = eq < 1e-5 && ek < 1e-5 && ev < 1e-5 && es < 1e-5 && ez < 1e-5;
  printf("elu+1, state: dQ dK dV dS0 dz0 errors below 1e-5: %d\n", below);
  if (!below)
    printf("errors: %g %g %g %g %g\n", eq, ek, ev, es, ez);

  /* One thread: the same bits as three. */
  memcpy(dq1, dq, sizeof(dq));
  memcpy(dk1, dk, sizeof(dk));
  memcpy(dv1, dv, sizeof(dv));
  memset(dq, 0xff, sizeof(dq));
  memset(dk, 0xff, sizeof(dk));
  memset(dv, 0xff, sizeof(dv));
  if (attn_run_linear_backward(grads, &tq, &tk, &tv, &to, &tdo, &ts, &tz, &tds1,
                               &tdz1, &tdq, &tdk, &tdv, &tds0, &tdz0,
                               pool1) != ATTN_OK)
    fail("on one thread");
  printf("same bits on 1 and 3 threads: %d\n",
         !memcmp(dq1, dq, sizeof(dq)) && !memcmp(dk1, dk, sizeof(dk)) &&
             !memcmp(dv1, dv, sizeof(dv)));

  /* Causal with the state's gradients: Sq = Sk = SQ (views of the first
   * SQ keys), the state operands the initial state. */
  attn_tensor ck = tk, cv = tv, cdk = tdk, cdv = tdv;
  ck.shape[2] = cv.shape[2] = cdk.shape[2] = cdv.shape[2] = SQ;
  causal_forward_output();
  memset(dq, 0xff, sizeof(dq));
  memset(dk, 0xff, sizeof(dk));
  memset(dv, 0xff, sizeof(dv));
  memset(ds0, 0xff, sizeof(ds0));
  memset(dz0, 0xff, sizeof(dz0));
  if (attn_run_linear_backward(causal, &tq, &ck, &cv, &to, &tdo, &ts, &tz,
                               &tds1, &tdz1, &tdq, &cdk, &cdv, &tds0, &tdz0,
                               pool3) != ATTN_OK)
    fail("causal");
  causal_reference();
  eq = ERROR_OF(dq, rdq);
  ek = causal_key_error(&dk[0][0][0][0], &rdk[0][0][0][0], D);
  ev = causal_key_error(&dv[0][0][0][0], &rdv[0][0][0][0], DV);
  es = ERROR_OF(ds0, rds);
  ez = relative_error(&dz0[0][0][0], &rdz[0][0][0], sizeof(dz0) / 4);
  below = eq < 1e-5 && ek < 1e-5 && ev < 1e-5 && es < 1e-5 && ez < 1e-5;
  printf("causal, state: dQ dK dV dS0 dz0 errors below 1e-5: %d\n", below);
  if (!below)
    printf("errors: %g %g %g %g %g\n", eq, ek, ev, es, ez);
  if (attn_run_linear_backward(causal, &tq, &tk, &tv, &to, &tdo, &ts, &tz,
                               &tds1, &tdz1, &tdq, &tdk, &tdv, &tds0, &tdz0,
                               pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("causal with Sk != Sq was accepted");
  printf("%s\n", attn_last_error());

  /* relu, no state. */
  relu = 1;
  forward_output();
  memset(dq, 0xff, sizeof(dq));
  memset(dk, 0xff, sizeof(dk));
  memset(dv, 0xff, sizeof(dv));
  if (attn_run_linear_backward(plain, &tq, &tk, &tv, &to, &tdo, &ts, &tz, NULL,
                               NULL, &tdq, &tdk, &tdv, NULL, NULL,
                               pool3) != ATTN_OK)
    fail("relu");
  reference(0);
  eq = ERROR_OF(dq, rdq);
  ek = ERROR_OF(dk, rdk);
  ev = ERROR_OF(dv, rdv);
  below = eq < 1e-5 && ek < 1e-5 && ev < 1e-5;
  printf("relu: dQ dK dV errors below 1e-5: %d\n", below);
  if (!below)
    printf("errors: %g %g %g\n", eq, ek, ev);

  /* Bad calls: a message, and nothing written. */
  memcpy(dq1, dq, sizeof(dq));
  memcpy(dk1, dk, sizeof(dk));
  memcpy(dv1, dv, sizeof(dv));
  if (attn_run_linear_backward(grads, &tq, &tk, &tv, &to, &tdo, &ts, &tz, NULL,
                               NULL, &tdq, &tdk, &tdv, NULL, NULL,
                               pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("a state kernel ran without the state's gradients");
  printf("%s\n", attn_last_error());
  if (attn_run_linear_backward(plain, &tq, &tk, &tv, &to, &tdo, &ts, &tz, &tds1,
                               &tdz1, &tdq, &tdk, &tdv, &tds0, &tdz0,
                               pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("state gradients were accepted by a kernel without them");
  printf("%s\n", attn_last_error());
  attn_tensor short_do = tdo;
  short_do.shape[2] = SQ - 1;
  if (attn_run_linear_backward(plain, &tq, &tk, &tv, &to, &short_do, &ts, &tz,
                               NULL, NULL, &tdq, &tdk, &tdv, NULL, NULL,
                               pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("a dO of the wrong length was accepted");
  printf("%s\n", attn_last_error());
  attn_tensor wide_z = tz;
  wide_z.shape[2] = D + 1;
  if (attn_run_linear_backward(plain, &tq, &tk, &tv, &to, &tdo, &ts, &wide_z,
                               NULL, NULL, &tdq, &tdk, &tdv, NULL, NULL,
                               pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("a wrong normalizer was accepted");
  printf("%s\n", attn_last_error());
  attn_tensor on_key = tdk;
  on_key.data = &k[0][0][1][0]; /* dK overlapping K */
  if (attn_run_linear_backward(plain, &tq, &tk, &tv, &to, &tdo, &ts, &tz, NULL,
                               NULL, &tdq, &on_key, &tdv, NULL, NULL,
                               pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("a dK overlapping the key was accepted");
  printf("%s\n", attn_last_error());
  if (attn_run_linear_backward(forward, &tq, &tk, &tv, &to, &tdo, &ts, &tz,
                               NULL, NULL, &tdq, &tdk, &tdv, NULL, NULL,
                               pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("a forward kernel ran as a backward one");
  printf("%s\n", attn_last_error());
  printf("nothing written: %d\n", !memcmp(dq1, dq, sizeof(dq)) &&
                                      !memcmp(dk1, dk, sizeof(dk)) &&
                                      !memcmp(dv1, dv, sizeof(dv)));

  attn_thread_pool_destroy(pool1);
  attn_thread_pool_destroy(pool3);
  attn_module_unload(module);
  printf(failures ? "linear-backward-consumer: FAIL\n"
                  : "linear-backward-consumer: PASS\n");
  return failures != 0;
}
