/* A C program on the runtime: a kernel with document masking and its block
 * table fills the table from its own mask_mod (attn_fill_block_table), then
 * runs with it. Two documents, tokens [0, 30) and [30, 80) of Sq = 80
 * queries and Sk = 75 keys, in blocks of 16 x 16: prints the table (0: the
 * block keeps nothing, 2: all of it, 1: some; the last key block is cut at
 * 75, so never full), runs the kernel on it and checks that every query
 * attends only its own document (V = the key's document id, so O = the
 * query's), then prints what a wrong table shape gets. */
#include "attn/runtime.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { B = 1, H = 2, SQ = 80, SK = 75, D = 32, QB = 5, KB = 5 };

static float q[B][H][SQ][D], k[B][H][SK][D], v[B][H][SK][D], o[B][H][SQ][D];
static int64_t docs[SQ];
static int32_t table[1][H][QB][KB];

int main(int argc, char **argv) {
  if (argc != 2)
    return 2;
  attn_module *module = NULL;
  const attn_kernel_desc *kernel = NULL;
  if (attn_module_load(argv[1], &module) != ATTN_OK ||
      attn_module_find(module, "docs", &kernel) != ATTN_OK) {
    printf("FAIL: %s\n", attn_last_error());
    return 1;
  }
  printf("has table: %d, capture %d, %lld x %lld\n",
         attn_kernel_has_block_table(kernel), kernel->block_table_capture,
         (long long)kernel->block_table_rows,
         (long long)kernel->block_table_keys);
  for (int i = 0; i < SQ; ++i)
    docs[i] = i < 30 ? 0 : 1;
  int64_t docs_shape[1] = {SQ}, table_shape[4] = {1, H, QB, KB};
  attn_tensor captures[2] = {
      attn_tensor_contiguous(docs, ATTN_I64, 1, docs_shape),
      attn_tensor_contiguous(table, ATTN_I32, 4, table_shape)};
  memset(table, 0x7f, sizeof(table));
  attn_thread_pool *pool = NULL;
  attn_thread_pool_create(3, &pool);
  if (attn_fill_block_table(kernel, B, H, SQ, SK, captures, 2, pool) !=
      ATTN_OK) {
    printf("FAIL: %s\n", attn_last_error());
    return 1;
  }
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < QB; ++i) {
      printf("head %d row %d:", h, i);
      for (int j = 0; j < KB; ++j)
        printf(" %d", table[0][h][i][j]);
      printf("\n");
    }

  /* V carries each key's document id: a query that sees only its own
   * document gets its id in every element of O. */
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < SQ; ++i)
      for (int d = 0; d < D; ++d)
        q[0][h][i][d] = (float)((i * 7 + d * 3) % 11) / 11.0f;
    for (int j = 0; j < SK; ++j)
      for (int d = 0; d < D; ++d) {
        k[0][h][j][d] = (float)((j * 5 + d) % 13) / 13.0f;
        v[0][h][j][d] = (float)docs[j];
      }
  }
  int64_t qs[4] = {B, H, SQ, D}, ks[4] = {B, H, SK, D};
  attn_tensor tq = attn_tensor_contiguous(q, ATTN_F32, 4, qs),
              tk = attn_tensor_contiguous(k, ATTN_F32, 4, ks),
              tv = attn_tensor_contiguous(v, ATTN_F32, 4, ks),
              to = attn_tensor_contiguous(o, ATTN_F32, 4, qs);
  attn_run_options options;
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.captures = captures;
  options.num_captures = 2;
  if (attn_run_with(kernel, &tq, &tk, &tv, NULL, &to, NULL, &options, pool) !=
      ATTN_OK) {
    printf("FAIL: %s\n", attn_last_error());
    return 1;
  }
  double worst = 0;
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < SQ; ++i)
      for (int d = 0; d < D; ++d)
        worst = fmax(worst, fabs(o[0][h][i][d] - (double)docs[i]));
  printf("own document only: %s (max |O - id| = %g)\n",
         worst <= 1e-6 ? "yes" : "no", worst);

  /* A table for 4 key blocks where 75 keys need 5. */
  captures[1].shape[3] = 4;
  if (attn_fill_block_table(kernel, B, H, SQ, SK, captures, 2, pool) == ATTN_OK)
    printf("FAIL: a wrong table was accepted\n");
  else
    printf("refused: %s\n", attn_last_error());
  attn_thread_pool_destroy(pool);
  attn_module_unload(module);
  return 0;
}
