/* A plain C program that uses an attn-compile output: no MLIR, no attn
 * runtime, only the generated header and object file. It runs a causal,
 * bottom-right-aligned GQA kernel with LSE on [B, S, H, D] buffers through
 * its own two-thread parallel-for, and checks every output against a naive
 * double-precision computation. Prints "consumer: PASS" on success. */
#include "kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 2, HQ = 4, HKV = 2, SQ = 37, SK = 53, D = 16, DV = 8 };

/* [B, S, H, D] storage of a logical [B, H, S, D] tensor. */
static int64_t at(int64_t b, int64_t h, int64_t s, int64_t d, int64_t H,
                  int64_t S, int64_t DD) {
  return ((b * S + s) * H + h) * DD + d;
}

struct task {
  attn_task_fn fn;
  void *ctx;
  int64_t begin, end;
};

static void *run_task(void *arg) {
  struct task *t = arg;
  t->fn(t->ctx, t->begin, t->end);
  return NULL;
}

/* An attn_parallel_for_fn: two threads, half of the items each. */
static void two_threads(void *pool, int64_t n, attn_task_fn fn, void *ctx) {
  (void)pool;
  struct task halves[2] = {{fn, ctx, 0, n / 2}, {fn, ctx, n / 2, n}};
  pthread_t thread;
  pthread_create(&thread, NULL, run_task, &halves[1]);
  run_task(&halves[0]);
  pthread_join(thread, NULL);
}

int main(void) {
  static float q[B * SQ * HQ * D], k[B * SK * HKV * D], v[B * SK * HKV * DV];
  static float o[B * SQ * HQ * DV], lse[B * HQ * SQ];
  srand(7);
  for (size_t i = 0; i < sizeof q / sizeof *q; ++i)
    q[i] = (float)rand() / RAND_MAX - 0.5f;
  for (size_t i = 0; i < sizeof k / sizeof *k; ++i)
    k[i] = (float)rand() / RAND_MAX - 0.5f;
  for (size_t i = 0; i < sizeof v / sizeof *v; ++i)
    v[i] = (float)rand() / RAND_MAX - 0.5f;
  for (size_t i = 0; i < sizeof o / sizeof *o; ++i)
    o[i] = NAN;

  attn_kernel_args args = {0};
  args.query = q;
  args.key = k;
  args.value = v;
  args.output = o;
  args.lse = lse;
  args.batch = B;
  args.heads_q = HQ;
  args.heads_kv = HKV;
  args.seq_q = SQ;
  args.seq_k = SK;
  /* Element strides of [B, S, H, D] buffers, in [B, H, S, D] order. */
  int64_t qs[4] = {SQ * HQ * D, D, HQ * D, 1};
  int64_t ks[4] = {SK * HKV * D, D, HKV * D, 1};
  int64_t vs[4] = {SK * HKV * DV, DV, HKV * DV, 1};
  int64_t os[4] = {SQ * HQ * DV, DV, HQ * DV, 1};
  int64_t ls[3] = {HQ * SQ, SQ, 1};
  for (int i = 0; i < 4; ++i) {
    args.query_strides[i] = qs[i];
    args.key_strides[i] = ks[i];
    args.value_strides[i] = vs[i];
    args.output_strides[i] = os[i];
  }
  for (int i = 0; i < 3; ++i)
    args.lse_strides[i] = ls[i];

  causal_gqa(&args, two_threads, NULL);

  double max_err = 0, max_ref = 0;
  const double scale = 1.0 / sqrt((double)D);
  const int64_t off = SK - SQ; /* bottom-right alignment */
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < HQ; ++h)
      for (int64_t i = 0; i < SQ; ++i) {
        int64_t kvh = h / (HQ / HKV);
        double s[SK], m = -INFINITY, l = 0, out[DV] = {0};
        for (int64_t j = 0; j < SK; ++j) {
          s[j] = -INFINITY;
          if (j > i + off)
            continue;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += (double)q[at(b, h, i, d, HQ, SQ, D)] *
                   k[at(b, kvh, j, d, HKV, SK, D)];
          s[j] = scale * dot;
          if (s[j] > m)
            m = s[j];
        }
        for (int64_t j = 0; j < SK; ++j)
          if (s[j] > -INFINITY) {
            double p = exp(s[j] - m);
            l += p;
            for (int64_t e = 0; e < DV; ++e)
              out[e] += p * v[at(b, kvh, j, e, HKV, SK, DV)];
          }
        for (int64_t e = 0; e < DV; ++e) {
          double ref = out[e] / l, got = o[at(b, h, i, e, HQ, SQ, DV)];
          if (!(fabs(got - ref) <= max_err))
            max_err = isnan(got) ? INFINITY : fabs(got - ref);
          if (fabs(ref) > max_ref)
            max_ref = fabs(ref);
        }
        double ref_lse = m + log(l), got_lse = lse[(b * HQ + h) * SQ + i];
        if (!(fabs(got_lse - ref_lse) <= 1e-4 * fabs(ref_lse) + 1e-5)) {
          printf("consumer: FAIL: lse[%ld,%ld,%ld] = %g, expected %g\n",
                 (long)b, (long)h, (long)i, got_lse, ref_lse);
          return 1;
        }
      }
  double rel = max_err / max_ref;
  printf("consumer: %ld work items, max relative error %.3g\n",
         (long)causal_gqa_work_items(&args), rel);
  if (!(rel <= 1e-5)) {
    printf("consumer: FAIL\n");
    return 1;
  }
  printf("consumer: PASS\n");
  return 0;
}
