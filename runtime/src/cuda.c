/*===- cuda.c - The CUDA backend: driver API loaded at run time ------------===*
 *
 * GPU kernels run through the CUDA driver API, which this file loads with
 * dlopen the first time a GPU is needed: the runtime builds and links without
 * CUDA, and on a machine without a driver or a GPU every GPU call fails with
 * ATTN_ERROR_NO_DEVICE and a message saying which of the two is missing.
 *
 * Device 0's primary context is used. A kernel's image is loaded once (per
 * descriptor) and kept until its module is unloaded. Launches are
 * synchronous: attn_run returns when the kernel has finished, and a launch
 * or execution error comes back as a status with the driver's message.
 *===----------------------------------------------------------------------===*/
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include "internal.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The few driver API types and constants used (cuda.h is not needed). */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;
enum {
  CUDA_SUCCESS = 0,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
};

static struct {
  CUresult (*init)(unsigned);
  CUresult (*deviceGetCount)(int *);
  CUresult (*deviceGet)(CUdevice *, int);
  CUresult (*deviceGetName)(char *, int, CUdevice);
  CUresult (*deviceGetAttribute)(int *, int, CUdevice);
  CUresult (*primaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*ctxSetCurrent)(CUcontext);
  CUresult (*ctxSynchronize)(void);
  CUresult (*moduleLoadData)(CUmodule *, const void *);
  CUresult (*moduleUnload)(CUmodule);
  CUresult (*moduleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*funcSetAttribute)(CUfunction, int, int);
  CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, unsigned, CUstream, void **,
                           void **);
  CUresult (*memAlloc)(CUdeviceptr *, size_t);
  CUresult (*memFree)(CUdeviceptr);
  CUresult (*memcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*memcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*getErrorString)(CUresult, const char **);
} cu;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static attn_status init_status;
static char init_message[512];
static CUdevice device;
static CUcontext context;
static int device_major, device_minor, device_shared_optin;
static char device_name[128];

static const char *cu_error(CUresult result) {
  const char *text = NULL;
  if (cu.getErrorString && cu.getErrorString(result, &text) == CUDA_SUCCESS &&
      text)
    return text;
  return "unknown CUDA error";
}

static void init_driver(void) {
  init_status = ATTN_ERROR_NO_DEVICE;
  void *handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    snprintf(init_message, sizeof(init_message),
             "no GPU: the NVIDIA driver library libcuda.so.1 is not on this "
             "machine (%s)",
             why ? why : "dlopen failed");
    return;
  }
  struct {
    void **slot;
    const char *name;
  } symbols[] = {
      {(void **)&cu.init, "cuInit"},
      {(void **)&cu.deviceGetCount, "cuDeviceGetCount"},
      {(void **)&cu.deviceGet, "cuDeviceGet"},
      {(void **)&cu.deviceGetName, "cuDeviceGetName"},
      {(void **)&cu.deviceGetAttribute, "cuDeviceGetAttribute"},
      {(void **)&cu.primaryCtxRetain, "cuDevicePrimaryCtxRetain"},
      {(void **)&cu.ctxSetCurrent, "cuCtxSetCurrent"},
      {(void **)&cu.ctxSynchronize, "cuCtxSynchronize"},
      {(void **)&cu.moduleLoadData, "cuModuleLoadData"},
      {(void **)&cu.moduleUnload, "cuModuleUnload"},
      {(void **)&cu.moduleGetFunction, "cuModuleGetFunction"},
      {(void **)&cu.funcSetAttribute, "cuFuncSetAttribute"},
      {(void **)&cu.launchKernel, "cuLaunchKernel"},
      {(void **)&cu.memAlloc, "cuMemAlloc_v2"},
      {(void **)&cu.memFree, "cuMemFree_v2"},
      {(void **)&cu.memcpyHtoD, "cuMemcpyHtoD_v2"},
      {(void **)&cu.memcpyDtoH, "cuMemcpyDtoH_v2"},
      {(void **)&cu.getErrorString, "cuGetErrorString"},
  };
  for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); ++i) {
    *symbols[i].slot = dlsym(handle, symbols[i].name);
    if (!*symbols[i].slot) {
      snprintf(init_message, sizeof(init_message),
               "no GPU: libcuda.so.1 lacks %s (driver too old?)",
               symbols[i].name);
      return;
    }
  }
  CUresult result = cu.init(0);
  if (result != CUDA_SUCCESS) {
    snprintf(init_message, sizeof(init_message),
             "no GPU: the CUDA driver does not start (cuInit: %s)",
             cu_error(result));
    return;
  }
  int count = 0;
  if (cu.deviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    snprintf(init_message, sizeof(init_message),
             "no GPU: the CUDA driver finds no device");
    return;
  }
  if ((result = cu.deviceGet(&device, 0)) != CUDA_SUCCESS ||
      (result = cu.primaryCtxRetain(&context, device)) != CUDA_SUCCESS) {
    snprintf(init_message, sizeof(init_message), "GPU 0 cannot be used: %s",
             cu_error(result));
    return;
  }
  cu.deviceGetName(device_name, sizeof(device_name), device);
  cu.deviceGetAttribute(&device_major,
                        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  cu.deviceGetAttribute(&device_minor,
                        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  cu.deviceGetAttribute(&device_shared_optin,
                        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                        device);
  init_status = ATTN_OK;
}

/* Starts the driver once and makes device 0's context current on this
 * thread. */
static attn_status use_device(void) {
  pthread_once(&init_once, init_driver);
  if (init_status != ATTN_OK)
    return attn_fail(init_status, "%s", init_message);
  CUresult result = cu.ctxSetCurrent(context);
  if (result != CUDA_SUCCESS)
    return attn_fail(ATTN_ERROR_INTERNAL, "cuCtxSetCurrent: %s",
                     cu_error(result));
  return ATTN_OK;
}

attn_status attn_cuda_device(char *name, size_t name_size, int32_t *major,
                             int32_t *minor) {
  attn_status status = use_device();
  if (status != ATTN_OK)
    return status;
  if (name && name_size > 0)
    snprintf(name, name_size, "%s", device_name);
  if (major)
    *major = device_major;
  if (minor)
    *minor = device_minor;
  return ATTN_OK;
}

//===----------------------------------------------------------------------===//
// Device memory
//===----------------------------------------------------------------------===//

attn_status attn_cuda_malloc(size_t bytes, void **out) {
  if (!out)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "attn_cuda_malloc: out is "
                                                  "NULL");
  *out = NULL;
  attn_status status = use_device();
  if (status != ATTN_OK)
    return status;
  CUdeviceptr pointer = 0;
  CUresult result = cu.memAlloc(&pointer, bytes ? bytes : 1);
  if (result != CUDA_SUCCESS)
    return attn_fail(ATTN_ERROR_OUT_OF_MEMORY,
                     "cannot allocate %zu bytes on the GPU: %s", bytes,
                     cu_error(result));
  *out = (void *)(uintptr_t)pointer;
  return ATTN_OK;
}

attn_status attn_cuda_free(void *pointer) {
  if (!pointer)
    return ATTN_OK;
  attn_status status = use_device();
  if (status != ATTN_OK)
    return status;
  CUresult result = cu.memFree((CUdeviceptr)(uintptr_t)pointer);
  return result == CUDA_SUCCESS ? ATTN_OK
                                : attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                                            "cuMemFree: %s", cu_error(result));
}

attn_status attn_cuda_copy(void *dst, const void *src, size_t bytes,
                           attn_copy_direction direction) {
  if (bytes == 0)
    return ATTN_OK;
  if (!dst || !src)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "attn_cuda_copy: NULL %s",
                     dst ? "source" : "destination");
  attn_status status = use_device();
  if (status != ATTN_OK)
    return status;
  CUresult result =
      direction == ATTN_COPY_TO_DEVICE
          ? cu.memcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, bytes)
          : cu.memcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, bytes);
  return result == CUDA_SUCCESS
             ? ATTN_OK
             : attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                         "copying %zu bytes %s the GPU: %s", bytes,
                         direction == ATTN_COPY_TO_DEVICE ? "to" : "from",
                         cu_error(result));
}

//===----------------------------------------------------------------------===//
// Loaded kernels
//===----------------------------------------------------------------------===//

typedef struct loaded_kernel {
  const attn_kernel_desc *kernel;
  CUmodule module;
  CUfunction function;
  struct loaded_kernel *next;
} loaded_kernel;

static pthread_mutex_t loaded_lock = PTHREAD_MUTEX_INITIALIZER;
static loaded_kernel *loaded;

/* The number of an "sm_NN[a]" architecture (86 for sm_86), and whether it
 * is architecture-specific ("a": that exact GPU only). */
static int arch_number(const char *arch, bool *specific) {
  int number = 0, length = 0;
  *specific = false;
  if (arch && sscanf(arch, "sm_%d%n", &number, &length) == 1)
    *specific = arch[length] == 'a';
  return number;
}

/* Whether GPU 0 runs an image for `arch`: PTX on any GPU at least as new;
 * a cubin on its major architecture at a minor version at least as new (or,
 * for an "a" architecture, on that GPU exactly). */
static bool device_runs(const attn_gpu_kernel *gpu) {
  bool specific = false;
  int needed = arch_number(gpu->arch, &specific);
  int device_number = device_major * 10 + device_minor;
  if (gpu->image_format != ATTN_GPU_CUBIN && !specific)
    return device_number >= needed;
  if (specific)
    return device_number == needed;
  return device_major == needed / 10 && device_minor >= needed % 10;
}

static attn_status load_function(const attn_kernel_desc *kernel,
                                 CUfunction *out) {
  const attn_gpu_kernel *gpu = kernel->gpu;
  pthread_mutex_lock(&loaded_lock);
  for (loaded_kernel *k = loaded; k; k = k->next)
    if (k->kernel == kernel) {
      *out = k->function;
      pthread_mutex_unlock(&loaded_lock);
      return ATTN_OK;
    }
  if (!device_runs(gpu)) {
    pthread_mutex_unlock(&loaded_lock);
    return attn_fail(ATTN_ERROR_UNSUPPORTED_CPU,
                     "kernel '%s' was compiled to %s for %s but GPU 0 (%s) "
                     "is sm_%d%d",
                     kernel->name,
                     gpu->image_format == ATTN_GPU_CUBIN ? "cubin" : "PTX",
                     gpu->arch, device_name, device_major, device_minor);
  }
  loaded_kernel *entry = calloc(1, sizeof(*entry));
  if (!entry) {
    pthread_mutex_unlock(&loaded_lock);
    return attn_fail(ATTN_ERROR_OUT_OF_MEMORY, "out of memory");
  }
  CUresult result = cu.moduleLoadData(&entry->module, gpu->image);
  if (result == CUDA_SUCCESS)
    result = cu.moduleGetFunction(&entry->function, entry->module, gpu->entry);
  if (result == CUDA_SUCCESS && gpu->shared_bytes > 48 * 1024)
    result = cu.funcSetAttribute(
        entry->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        gpu->shared_bytes);
  if (result != CUDA_SUCCESS) {
    if (entry->module)
      cu.moduleUnload(entry->module);
    free(entry);
    pthread_mutex_unlock(&loaded_lock);
    return attn_fail(ATTN_ERROR_LOAD,
                     "cannot load GPU kernel '%s' (%s, %d bytes of shared "
                     "memory; the device allows %d): %s",
                     kernel->name, gpu->entry, gpu->shared_bytes,
                     device_shared_optin, cu_error(result));
  }
  entry->kernel = kernel;
  entry->next = loaded;
  loaded = entry;
  *out = entry->function;
  pthread_mutex_unlock(&loaded_lock);
  return ATTN_OK;
}

void attn_cuda_forget(const attn_library *library) {
  pthread_mutex_lock(&loaded_lock);
  /* cuModuleUnload acts on the current context, which this thread (not
   * necessarily the one that loaded the modules) may not have yet; and a
   * kernel launched on a caller's stream may still be running. */
  if (loaded) {
    cu.ctxSetCurrent(context);
    cu.ctxSynchronize();
  }
  for (loaded_kernel **link = &loaded; *link;) {
    loaded_kernel *k = *link;
    bool owned = false;
    for (uint32_t i = 0; i < library->num_kernels; ++i)
      owned |= library->kernels[i] == k->kernel;
    if (owned) {
      *link = k->next;
      cu.moduleUnload(k->module);
      free(k);
    } else {
      link = &k->next;
    }
  }
  pthread_mutex_unlock(&loaded_lock);
}

/* A grid of (x, y, z) blocks, checked against CUDA's limits. */
static attn_status check_grid(const attn_kernel_desc *kernel,
                              const int64_t grid[3]) {
  if (grid[0] > INT32_MAX || grid[1] > 65535 || grid[2] > 65535)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s': a grid of (%" PRId64 ", %" PRId64
                     ", %" PRId64 ") blocks exceeds CUDA's limits "
                     "(2^31-1, 65535, 65535)",
                     kernel->name, grid[0], grid[1], grid[2]);
  return ATTN_OK;
}

/* Launches `kernel` on `grid` (checked) with the parameters `pointers`
 * (attn_gpu_kernel_params' or another kind's): on `stream` without
 * waiting, or on the default stream, waiting for it. */
static attn_status launch(const attn_kernel_desc *kernel, const int64_t grid[3],
                          void **pointers, void *stream) {
  attn_status status = use_device();
  if (status != ATTN_OK)
    return status;
  CUfunction function;
  if ((status = load_function(kernel, &function)) != ATTN_OK)
    return status;
  const attn_gpu_kernel *gpu = kernel->gpu;
  CUresult result = cu.launchKernel(
      function, (unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2],
      (unsigned)gpu->block_threads, 1, 1, (unsigned)gpu->shared_bytes,
      (CUstream)stream, pointers, NULL);
  if (result == CUDA_SUCCESS && !stream)
    result = cu.ctxSynchronize();
  if (result != CUDA_SUCCESS)
    return attn_fail(ATTN_ERROR_INTERNAL, "GPU kernel '%s' failed: %s",
                     kernel->name, cu_error(result));
  return ATTN_OK;
}

attn_status attn_cuda_launch(const attn_kernel_desc *kernel,
                             const attn_kernel_args *args, void *stream) {
  const int64_t rows = kernel->gpu->block_rows;
  const int64_t grid[3] = {(args->seq_q + rows - 1) / rows, args->heads_q,
                           args->batch};
  attn_status status = check_grid(kernel, grid);
  if (status != ATTN_OK)
    return status;
  uint64_t values[ATTN_GPU_MAX_PARAMS];
  void *pointers[ATTN_GPU_MAX_PARAMS];
  attn_gpu_kernel_params(kernel, args, values, pointers);
  return launch(kernel, grid, pointers, stream);
}

attn_status attn_cuda_launch_linear(const attn_kernel_desc *kernel,
                                    const attn_linear_args *args) {
  const int64_t columns = kernel->gpu->block_rows;
  const int64_t grid[3] = {(kernel->value_dim + columns - 1) / columns,
                           args->heads_kv, args->batch};
  attn_status status = check_grid(kernel, grid);
  if (status != ATTN_OK)
    return status;
  /* Every block reads z0 first and the first writes z1 last: in place, a
   * block could read what another wrote. (S is split by columns: each
   * block reads and writes only its own.) */
  if (grid[0] > 1 && kernel->has_state &&
      args->final_normalizer == args->initial_normalizer)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "final_normalizer: on the GPU, kernel '%s' (Dv = %" PRId64
                     ", %" PRId64 " blocks of %" PRId64 " value columns a "
                     "head) cannot update the normalizer in place: give "
                     "final_normalizer a buffer of its own",
                     kernel->name, kernel->value_dim, grid[0], columns);
  uint64_t values[ATTN_GPU_MAX_PARAMS];
  void *pointers[ATTN_GPU_MAX_PARAMS];
  attn_gpu_linear_kernel_params(kernel, args, values, pointers);
  return launch(kernel, grid, pointers, NULL);
}

attn_status attn_cuda_launch_additive(const attn_kernel_desc *kernel,
                                      const attn_additive_args *args) {
  const int64_t rows = kernel->gpu->block_rows;
  const int64_t grid[3] = {(args->seq_q + rows - 1) / rows, args->batch, 1};
  attn_status status = check_grid(kernel, grid);
  if (status != ATTN_OK)
    return status;
  uint64_t values[ATTN_GPU_MAX_PARAMS];
  void *pointers[ATTN_GPU_MAX_PARAMS];
  attn_gpu_additive_kernel_params(kernel, args, values, pointers);
  return launch(kernel, grid, pointers, NULL);
}

attn_status attn_cuda_launch_backward(const attn_kernel_desc *kernel,
                                      const attn_backward_args *args,
                                      void *stream) {
  const attn_kernel_args *f = &args->forward;
  const int64_t rows = kernel->gpu->block_rows;
  /* Blocks of `rows` keys (dK, dV of a key/value head), then of `rows`
   * query rows of each of its G query heads (dQ). */
  const int64_t group = f->heads_kv > 0 ? f->heads_q / f->heads_kv : 0;
  const int64_t grid[3] = {(f->seq_k + rows - 1) / rows +
                               group * ((f->seq_q + rows - 1) / rows),
                           f->heads_kv, f->batch};
  attn_status status = check_grid(kernel, grid);
  if (status != ATTN_OK)
    return status;
  /* Nothing to compute or write (no batch, no head, no key and no row). */
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0)
    return ATTN_OK;
  uint64_t values[ATTN_GPU_MAX_PARAMS];
  void *pointers[ATTN_GPU_MAX_PARAMS];
  attn_gpu_backward_kernel_params(kernel, args, values, pointers);
  return launch(kernel, grid, pointers, stream);
}
