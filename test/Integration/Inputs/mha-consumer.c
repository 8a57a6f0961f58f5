/* A C program on the runtime: loads a compiled multi-head attention layer
 * (causal, with biases, a keep-mask broadcast over heads), runs it on
 * random f32 inputs whose input projections are three views of one packed
 * in_proj_weight [3E, E] (as torch.nn.MultiheadAttention stores them), into
 * a poisoned output; checks it against a float64 reference of docs/spec.md's
 * "Multi-head attention layer" written with plain loops, that one thread
 * and three give the same bits, and that the runtime refuses bad calls with
 * a message and writes nothing. Prints PASS or what failed. */
#include "attn/runtime.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { B = 3, SQ = 29, SK = 29, E = 40, H = 5, DH = E / H };

static float x[B][SQ][E], w_in[3 * E][E], b_in[3 * E], w_out[E][E], b_out[E];
static unsigned char keep[B][1][SQ][SK];
static float y[B][SQ][E], y1[B][SQ][E];
static double ref[B][SQ][E];
static int failures;

static float uniform(unsigned *seed) {
  *seed = *seed * 1664525u + 1013904223u;
  return (float)((*seed >> 8) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static void fail(const char *what) {
  printf("FAIL: %s (%s)\n", what, attn_last_error());
  ++failures;
}

/* Projections, per-head causal softmax attention under the mask, merge,
 * output projection; a row with no allowed key gives 0 before W_o. */
static void reference(void) {
  static double q[SQ][E], k[SK][E], v[SK][E], o[SQ][E];
  for (int b = 0; b < B; ++b) {
    for (int i = 0; i < SQ; ++i)
      for (int n = 0; n < E; ++n) {
        double sq = b_in[n], sk = b_in[E + n], sv = b_in[2 * E + n];
        for (int e = 0; e < E; ++e) {
          sq += (double)x[b][i][e] * w_in[n][e];
          sk += (double)x[b][i][e] * w_in[E + n][e];
          sv += (double)x[b][i][e] * w_in[2 * E + n][e];
        }
        q[i][n] = sq, k[i][n] = sk, v[i][n] = sv;
      }
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < SQ; ++i) {
        double s[SK], top = -INFINITY, total = 0;
        for (int j = 0; j < SK; ++j) {
          s[j] = -INFINITY;
          if (j > i || !keep[b][0][i][j])
            continue;
          double dot = 0;
          for (int d = 0; d < DH; ++d)
            dot += q[i][h * DH + d] * k[j][h * DH + d];
          s[j] = dot / sqrt((double)DH);
          top = s[j] > top ? s[j] : top;
        }
        for (int j = 0; j < SK; ++j)
          total += s[j] == -INFINITY ? 0 : exp(s[j] - top);
        for (int d = 0; d < DH; ++d) {
          double acc = 0;
          for (int j = 0; j < SK; ++j)
            if (s[j] != -INFINITY)
              acc += exp(s[j] - top) / total * v[j][h * DH + d];
          o[i][h * DH + d] = acc;
        }
      }
    for (int i = 0; i < SQ; ++i)
      for (int n = 0; n < E; ++n) {
        double acc = b_out[n];
        for (int e = 0; e < E; ++e)
          acc += o[i][e] * w_out[n][e];
        ref[b][i][n] = acc;
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
  const attn_kernel_desc *layer;
  if (attn_module_load(argv[1], &module) != ATTN_OK ||
      attn_module_find(module, "layer", &layer) != ATTN_OK) {
    printf("FAIL: load (%s)\n", attn_last_error());
    return 1;
  }
  printf("kind %d, E %lld, heads %lld, head dim %lld, bias %d\n",
         attn_kernel_kind_of(layer), (long long)layer->embed_dim,
         (long long)layer->num_heads, (long long)layer->head_dim,
         layer->has_bias);

  unsigned seed = 7;
  for (float *p = &x[0][0][0]; p < &x[0][0][0] + sizeof(x) / 4; ++p)
    *p = uniform(&seed);
  for (float *p = &w_in[0][0]; p < &w_in[0][0] + sizeof(w_in) / 4; ++p)
    *p = uniform(&seed) * 0.3f;
  for (float *p = &w_out[0][0]; p < &w_out[0][0] + sizeof(w_out) / 4; ++p)
    *p = uniform(&seed) * 0.3f;
  for (int n = 0; n < 3 * E; ++n)
    b_in[n] = uniform(&seed) * 0.1f;
  for (int n = 0; n < E; ++n)
    b_out[n] = uniform(&seed) * 0.1f;
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < SQ; ++i)
      for (int j = 0; j < SK; ++j)
        keep[b][0][i][j] = uniform(&seed) > -0.6f;
  for (int j = 0; j < SK; ++j) /* a row with no key: the output bias */
    keep[1][0][4][j] = 0;

  int64_t xs[3] = {B, SQ, E}, ws[2] = {E, E}, bs[1] = {3 * E}, os[1] = {E},
          ms[4] = {B, 1, SQ, SK};
  attn_tensor tx = attn_tensor_contiguous(x, ATTN_F32, 3, xs);
  attn_tensor twq = attn_tensor_contiguous(w_in[0], ATTN_F32, 2, ws);
  attn_tensor twk = attn_tensor_contiguous(w_in[E], ATTN_F32, 2, ws);
  attn_tensor twv = attn_tensor_contiguous(w_in[2 * E], ATTN_F32, 2, ws);
  attn_tensor tbin = attn_tensor_contiguous(b_in, ATTN_F32, 1, bs);
  attn_tensor two = attn_tensor_contiguous(w_out, ATTN_F32, 2, ws);
  attn_tensor tbo = attn_tensor_contiguous(b_out, ATTN_F32, 1, os);
  attn_tensor tm = attn_tensor_contiguous(keep, ATTN_BOOL, 4, ms);
  attn_tensor ty = attn_tensor_contiguous(y, ATTN_F32, 3, xs);

  attn_thread_pool *pool1, *pool3;
  attn_thread_pool_create(1, &pool1);
  attn_thread_pool_create(3, &pool3);

  memset(y, 0xff, sizeof(y));
  if (attn_run_mha(layer, &tx, &tx, &tx, &twq, &twk, &twv, &tbin, &two, &tbo,
                   &tm, &ty, pool3) != ATTN_OK)
    fail("layer");
  reference();
  double err = relative_error(&y[0][0][0], &ref[0][0][0], sizeof(y) / 4);
  printf("error below 1e-5: %d\n", err < 1e-5);
  if (!(err < 1e-5))
    printf("error: %g\n", err);
  printf("empty row is the output bias: %d\n",
         !memcmp(y[1][4], b_out, sizeof(b_out)));

  memcpy(y1, y, sizeof(y));
  memset(y, 0xff, sizeof(y));
  if (attn_run_mha(layer, &tx, &tx, &tx, &twq, &twk, &twv, &tbin, &two, &tbo,
                   &tm, &ty, pool1) != ATTN_OK)
    fail("layer on one thread");
  printf("same bits on 1 and 3 threads: %d\n", !memcmp(y1, y, sizeof(y)));

  /* Bad calls: a message, and nothing written. */
  attn_tensor narrow = two;
  narrow.shape[1] = E - 8;
  if (attn_run_mha(layer, &tx, &tx, &tx, &twq, &twk, &twv, &tbin, &narrow, &tbo,
                   &tm, &ty, pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("a narrow W_o was accepted");
  printf("%s\n", attn_last_error());
  if (attn_run_mha(layer, &tx, &tx, &tx, &twq, &twk, &twv, NULL, &two, &tbo,
                   &tm, &ty, pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("a missing bias was accepted");
  printf("%s\n", attn_last_error());
  attn_tensor heads_mask = tm;
  heads_mask.shape[1] = 2;
  if (attn_run_mha(layer, &tx, &tx, &tx, &twq, &twk, &twv, &tbin, &two, &tbo,
                   &heads_mask, &ty, pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("a mask of 2 heads was accepted");
  printf("%s\n", attn_last_error());
  attn_tensor on_input = ty;
  on_input.data = x;
  if (attn_run_mha(layer, &tx, &tx, &tx, &twq, &twk, &twv, &tbin, &two, &tbo,
                   &tm, &on_input, pool3) != ATTN_ERROR_INVALID_ARGUMENT)
    fail("an output overlapping the input was accepted");
  printf("%s\n", attn_last_error());
  if (attn_run(layer, &tx, &tx, &tx, NULL, &ty, NULL, pool3) !=
      ATTN_ERROR_INVALID_ARGUMENT)
    fail("a layer ran as attention");
  printf("%s\n", attn_last_error());
  printf("nothing written: %d\n", !memcmp(y1, y, sizeof(y)));

  attn_thread_pool_destroy(pool1);
  attn_thread_pool_destroy(pool3);
  attn_module_unload(module);
  printf(failures ? "mha-consumer: FAIL\n" : "mha-consumer: PASS\n");
  return failures != 0;
}
