/* Loads a GPU kernel library made by `attn-compile --target sm_NN` through
 * the runtime, checks what its descriptor says, and calls it. Without a GPU
 * the call must fail cleanly with ATTN_ERROR_NO_DEVICE; with one, it must
 * succeed on device buffers. */
#include "attn/runtime.h"
#include "kernels.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc != 2)
    return 2;
  attn_module *module = NULL;
  const attn_kernel_desc *kernel = NULL;
  if (attn_module_load(argv[1], &module) != ATTN_OK ||
      attn_module_find(module, "gpu_causal", &kernel) != ATTN_OK) {
    printf("load failed: %s\n", attn_last_error());
    return 1;
  }
  const attn_gpu_kernel *gpu = kernel->gpu;
  printf("device %d arch %s %s entry %s threads %d rows %d shared %d\n",
         (int)attn_kernel_device(kernel), gpu->arch,
         gpu->image_format == ATTN_GPU_CUBIN ? "cubin" : "ptx", gpu->entry,
         gpu->block_threads, gpu->block_rows, gpu->shared_bytes);
  /* The header's launch shape agrees with the descriptor. */
  attn_kernel_args args;
  memset(&args, 0, sizeof(args));
  args.batch = 2;
  args.heads_q = 4;
  args.seq_q = 130;
  unsigned grid[3], block[3];
  gpu_causal_launch_shape(&args, grid, block);
  printf("grid %u %u %u block %u\n", grid[0], grid[1], grid[2], block[0]);
  if (block[0] != (unsigned)gpu->block_threads ||
      gpu_causal_SHARED_BYTES != gpu->shared_bytes)
    return 1;

  /* [B=1, H=2, S=8, D=64] f16 buffers. */
  int64_t q_shape[4] = {1, 2, 8, 64}, lse_shape[3] = {1, 2, 8};
  size_t bytes = 2 * 8 * 64 * 2;
  void *q = NULL, *k = NULL, *v = NULL, *o = NULL, *lse = NULL;
  static unsigned char host[2 * 8 * 64 * 2];
  attn_status status = attn_cuda_malloc(bytes, &q);
  if (status == ATTN_ERROR_NO_DEVICE) {
    printf("no device: %s\n", attn_last_error());
    /* attn_run reaches the same answer through its own path. */
    static unsigned char host_out[sizeof(host)], host_lse[2 * 8 * 4];
    attn_tensor t = attn_tensor_contiguous(host, ATTN_F16, 4, q_shape);
    attn_tensor l = attn_tensor_contiguous(host_lse, ATTN_F32, 3, lse_shape);
    attn_tensor out = attn_tensor_contiguous(host_out, ATTN_F16, 4, q_shape);
    status = attn_run(kernel, &t, &t, &t, NULL, &out, &l, NULL);
    printf("run: %s: %s\n", attn_status_name(status), attn_last_error());
    attn_module_unload(module);
    return status == ATTN_ERROR_NO_DEVICE ? 0 : 1;
  }
  if (status != ATTN_OK || attn_cuda_malloc(bytes, &k) != ATTN_OK ||
      attn_cuda_malloc(bytes, &v) != ATTN_OK ||
      attn_cuda_malloc(bytes, &o) != ATTN_OK ||
      attn_cuda_malloc(2 * 8 * 4, &lse) != ATTN_OK) {
    printf("malloc failed: %s\n", attn_last_error());
    return 1;
  }
  memset(host, 0x3c, sizeof(host)); /* 1.0 in f16 (0x3c3c ~ 1.06) */
  attn_cuda_copy(q, host, bytes, ATTN_COPY_TO_DEVICE);
  attn_cuda_copy(k, host, bytes, ATTN_COPY_TO_DEVICE);
  attn_cuda_copy(v, host, bytes, ATTN_COPY_TO_DEVICE);
  attn_tensor tq = attn_tensor_contiguous(q, ATTN_F16, 4, q_shape);
  attn_tensor tk = attn_tensor_contiguous(k, ATTN_F16, 4, q_shape);
  attn_tensor tv = attn_tensor_contiguous(v, ATTN_F16, 4, q_shape);
  attn_tensor to = attn_tensor_contiguous(o, ATTN_F16, 4, q_shape);
  attn_tensor tl = attn_tensor_contiguous(lse, ATTN_F32, 3, lse_shape);
  status = attn_run(kernel, &tq, &tk, &tv, NULL, &to, &tl, NULL);
  printf("run: %s\n", attn_status_name(status));
  /* Every V row is the same: so is every output row. */
  static unsigned char out[2 * 8 * 64 * 2];
  attn_cuda_copy(out, o, bytes, ATTN_COPY_TO_HOST);
  int same = memcmp(out, host, bytes) == 0;
  printf("output %s\n", same ? "equals V" : "differs from V");
  attn_cuda_free(q);
  attn_cuda_free(k);
  attn_cuda_free(v);
  attn_cuda_free(o);
  attn_cuda_free(lse);
  attn_module_unload(module);
  return status == ATTN_OK && same ? 0 : 1;
}
