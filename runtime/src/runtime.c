/*===- runtime.c - Errors, kernel libraries and running kernels ------------===*
 *
 * The entry points of the runtime that are not argument checks (check.c), CPU
 * checks (cpu.c) or the thread pool (thread_pool.c): the per-thread error
 * message, loading and validating kernel libraries, and attn_run.
 *
 * Every live module is in one registry so that attn_run can find the module
 * a kernel descriptor belongs to and count the calls running on it: a module
 * whose code is still running must not be dlclose'd under it.
 *===----------------------------------------------------------------------===*/
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include "internal.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/* Per thread, so that concurrent calls never see each other's messages. */
static _Thread_local char last_error[1024];

attn_status attn_fail(attn_status status, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  vsnprintf(last_error, sizeof(last_error), format, ap);
  va_end(ap);
  return status;
}

const char *attn_last_error(void) { return last_error; }

const char *attn_status_name(attn_status status) {
  switch (status) {
  case ATTN_OK:
    return "ATTN_OK";
  case ATTN_ERROR_INVALID_ARGUMENT:
    return "ATTN_ERROR_INVALID_ARGUMENT";
  case ATTN_ERROR_LOAD:
    return "ATTN_ERROR_LOAD";
  case ATTN_ERROR_NOT_FOUND:
    return "ATTN_ERROR_NOT_FOUND";
  case ATTN_ERROR_UNSUPPORTED_CPU:
    return "ATTN_ERROR_UNSUPPORTED_CPU";
  case ATTN_ERROR_NO_DEVICE:
    return "ATTN_ERROR_NO_DEVICE";
  case ATTN_ERROR_OUT_OF_MEMORY:
    return "ATTN_ERROR_OUT_OF_MEMORY";
  case ATTN_ERROR_INTERNAL:
    return "ATTN_ERROR_INTERNAL";
  }
  return "ATTN_ERROR_UNKNOWN";
}

const char *attn_dtype_name(int32_t dtype) {
  switch (dtype) {
  case ATTN_F32:
    return "f32";
  case ATTN_F16:
    return "f16";
  case ATTN_BF16:
    return "bf16";
  case ATTN_BOOL:
    return "bool";
  case ATTN_I32:
    return "i32";
  case ATTN_I64:
    return "i64";
  }
  return "an unknown element type";
}

//===----------------------------------------------------------------------===//
// Kernel libraries
//===----------------------------------------------------------------------===//

struct attn_module {
  void *handle; /* from dlopen; NULL for attn_module_from_library */
  const attn_library *library;
  char *origin; /* the path, for messages */
  /* Calls running on this module's kernels. Only incremented with
   * registry_lock held, so that unload sees a count no call can race past. */
  _Atomic int64_t active_calls;
  attn_module *next;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static attn_module *registry;

/* Checks everything the runtime later relies on without re-checking: a
 * descriptor that passes is safe to read and to call. */
attn_device attn_kernel_device(const attn_kernel_desc *kernel) {
  if (!kernel || kernel->struct_size < offsetof(attn_kernel_desc, device) +
                                           sizeof(kernel->device))
    return ATTN_DEVICE_CPU;
  return (attn_device)kernel->device;
}

/* Whether the descriptor is recent enough to have the key split's fields. */
static int has_split_fields(const attn_kernel_desc *k) {
  return k->struct_size >=
         offsetof(attn_kernel_desc, merge_run) + sizeof(k->merge_run);
}

/* Whether the descriptor is recent enough to have the kind's fields. */
static int has_kind_fields(const attn_kernel_desc *k) {
  return k->struct_size >=
         offsetof(attn_kernel_desc, backward_run) + sizeof(k->backward_run);
}

int attn_kernel_has_dropout(const attn_kernel_desc *kernel) {
  return kernel &&
         kernel->struct_size >= offsetof(attn_kernel_desc, has_dropout) +
                                    sizeof(kernel->has_dropout) &&
         kernel->has_dropout != 0;
}

int attn_kernel_dropout_bits(const attn_kernel_desc *kernel) {
  if (!attn_kernel_has_dropout(kernel))
    return 0;
  return kernel->has_dropout == 1 ? 32 : 16;
}

/* Checks a call's dropout against the kernel: a probability in [0, 1) for a
 * kernel with dropout, 0 for one without. */
static attn_status check_dropout(const attn_kernel_desc *k, float p) {
  if (!(p >= 0.0f && p < 1.0f))
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "dropout_p is %g but must be in [0, 1)", (double)p);
  if (p != 0.0f && !attn_kernel_has_dropout(k))
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "dropout_p is %g but kernel '%s' has no dropout "
                     "(compile it with the spec key 'dropout')",
                     (double)p, k->name);
  return ATTN_OK;
}

attn_kernel_kind attn_kernel_kind_of(const attn_kernel_desc *kernel) {
  if (!kernel || !has_kind_fields(kernel))
    return ATTN_KERNEL_FORWARD;
  return (attn_kernel_kind)kernel->kind;
}

int attn_kernel_has_key_split(const attn_kernel_desc *kernel) {
  return kernel && attn_kernel_device(kernel) == ATTN_DEVICE_CPU &&
         has_split_fields(kernel) && kernel->partial_run != NULL;
}

static attn_status validate_gpu_kernel(const attn_kernel_desc *k,
                                       const char *origin) {
  const attn_gpu_kernel *gpu = k->gpu;
  if (!gpu)
    return attn_fail(ATTN_ERROR_LOAD,
                     "%s: GPU kernel '%s' has no attn_gpu_kernel record",
                     origin, k->name);
  if (!gpu->image || gpu->image_size == 0 || !gpu->entry || !gpu->arch ||
      (gpu->image_format != ATTN_GPU_PTX &&
       gpu->image_format != ATTN_GPU_CUBIN))
    return attn_fail(ATTN_ERROR_LOAD,
                     "%s: GPU kernel '%s' has no image, entry or "
                     "architecture, or an unknown image format",
                     origin, k->name);
  if (gpu->image_format == ATTN_GPU_PTX &&
      ((const char *)gpu->image)[gpu->image_size - 1] != '\0')
    return attn_fail(ATTN_ERROR_LOAD,
                     "%s: GPU kernel '%s' has PTX that does not end in a NUL "
                     "within its %" PRIu64 " bytes",
                     origin, k->name, (uint64_t)gpu->image_size);
  if (gpu->block_threads < 1 || gpu->block_threads > 1024 ||
      gpu->block_rows < 1 || gpu->shared_bytes < 0)
    return attn_fail(ATTN_ERROR_LOAD,
                     "%s: GPU kernel '%s' has an invalid launch shape (%" PRId32
                     " threads, %" PRId32 " rows, %" PRId32 " shared bytes)",
                     origin, k->name, gpu->block_threads, gpu->block_rows,
                     gpu->shared_bytes);
  return ATTN_OK;
}

static attn_status validate_library(const attn_library *library,
                                    const char *origin) {
  if (library->magic != ATTN_LIBRARY_MAGIC)
    return attn_fail(ATTN_ERROR_LOAD,
                     "%s: is not an attn kernel library (its %s has magic "
                     "0x%016" PRIx64 ", expected 0x%016" PRIx64 ")",
                     origin, ATTN_LIBRARY_SYMBOL, (uint64_t)library->magic,
                     (uint64_t)ATTN_LIBRARY_MAGIC);
  if (library->abi_version != ATTN_KERNEL_ABI_VERSION)
    return attn_fail(ATTN_ERROR_LOAD,
                     "%s: was compiled for attn kernel ABI version %" PRIu32
                     " but this runtime supports version %d",
                     origin, library->abi_version, ATTN_KERNEL_ABI_VERSION);
  if (library->num_kernels > INT32_MAX)
    return attn_fail(ATTN_ERROR_LOAD, "%s: lists %" PRIu32 " kernels", origin,
                     library->num_kernels);
  if (library->num_kernels > 0 && !library->kernels)
    return attn_fail(ATTN_ERROR_LOAD,
                     "%s: lists %" PRIu32 " kernels but its kernel table is "
                     "NULL",
                     origin, library->num_kernels);
  for (uint32_t i = 0; i < library->num_kernels; ++i) {
    const attn_kernel_desc *k = library->kernels[i];
    if (!k)
      return attn_fail(ATTN_ERROR_LOAD, "%s: kernel %" PRIu32 " is NULL",
                       origin, i);
    /* The version and size come first: before they pass, no other field of
     * the descriptor is known to be where this runtime expects it. */
    if (k->abi_version != ATTN_KERNEL_ABI_VERSION)
      return attn_fail(ATTN_ERROR_LOAD,
                       "%s: kernel %" PRIu32 " has ABI version %" PRIu32
                       " but this runtime supports version %d",
                       origin, i, k->abi_version, ATTN_KERNEL_ABI_VERSION);
    if (k->struct_size < offsetof(attn_kernel_desc, device))
      return attn_fail(ATTN_ERROR_LOAD,
                       "%s: kernel %" PRIu32 " has a %" PRIu32
                       "-byte descriptor but ABI version %d needs at least "
                       "%zu bytes",
                       origin, i, k->struct_size, ATTN_KERNEL_ABI_VERSION,
                       offsetof(attn_kernel_desc, device));
    if (!k->name)
      return attn_fail(ATTN_ERROR_LOAD, "%s: kernel %" PRIu32 " has no name",
                       origin, i);
    attn_device device = attn_kernel_device(k);
    attn_kernel_kind kind = attn_kernel_kind_of(k);
    if (kind != ATTN_KERNEL_FORWARD && kind != ATTN_KERNEL_BACKWARD &&
        kind != ATTN_KERNEL_WEIGHTS && kind != ATTN_KERNEL_LINEAR &&
        kind != ATTN_KERNEL_ADDITIVE && kind != ATTN_KERNEL_MHA &&
        kind != ATTN_KERNEL_ADDITIVE_BACKWARD &&
        kind != ATTN_KERNEL_LINEAR_BACKWARD)
      return attn_fail(ATTN_ERROR_LOAD,
                       "%s: kernel '%s' is of an unknown kind %d", origin,
                       k->name, (int)kind);
    if (kind == ATTN_KERNEL_BACKWARD &&
        k->struct_size <
            offsetof(attn_kernel_desc, captures) + sizeof(k->captures))
      return attn_fail(ATTN_ERROR_LOAD,
                       "%s: backward kernel '%s' was compiled by an older "
                       "attn-compile, for an attn_backward_args without the "
                       "captures' fields: compile it again",
                       origin, k->name);
    if (attn_kernel_num_captures(k) < 0 ||
        attn_kernel_num_captures(k) > ATTN_MAX_CAPTURES ||
        (attn_kernel_num_captures(k) > 0 && !k->captures))
      return attn_fail(ATTN_ERROR_LOAD,
                       "%s: kernel '%s' has %" PRId32 " captures (at most %d, "
                       "each described)",
                       origin, k->name, attn_kernel_num_captures(k),
                       ATTN_MAX_CAPTURES);
    if (attn_kernel_has_sinks(k) && kind != ATTN_KERNEL_FORWARD)
      return attn_fail(ATTN_ERROR_LOAD,
                       "%s: kernel '%s' takes sinks but is not a forward "
                       "kernel",
                       origin, k->name);
    if (device == ATTN_DEVICE_CUDA && kind != ATTN_KERNEL_FORWARD) {
      /* The kinds the GPU lowering makes besides the forward: their
       * record, and what their kind needs other than CPU entry points. */
      if (kind != ATTN_KERNEL_BACKWARD && kind != ATTN_KERNEL_LINEAR &&
          kind != ATTN_KERNEL_ADDITIVE)
        return attn_fail(ATTN_ERROR_LOAD,
                         "%s: kernel '%s' runs on the GPU, but its kind has "
                         "CPU kernels only",
                         origin, k->name);
      attn_status status = validate_gpu_kernel(k, origin);
      if (status != ATTN_OK)
        return status;
      if ((kind == ATTN_KERNEL_BACKWARD && !k->has_lse) ||
          (kind == ATTN_KERNEL_LINEAR &&
           k->struct_size <
               offsetof(attn_kernel_desc, chunk) + sizeof(k->chunk)) ||
          (kind == ATTN_KERNEL_ADDITIVE &&
           (k->struct_size < offsetof(attn_kernel_desc, has_weights) +
                                 sizeof(k->has_weights) ||
            k->query_dim < 1 || k->additive_dim < 1)))
        return attn_fail(ATTN_ERROR_LOAD,
                         "%s: GPU kernel '%s' lacks the fields of its kind",
                         origin, k->name);
    } else if (kind == ATTN_KERNEL_BACKWARD) {
      if (device != ATTN_DEVICE_CPU || !k->backward_run ||
          !k->backward_work_items || !k->has_lse)
        return attn_fail(ATTN_ERROR_LOAD,
                         "%s: backward kernel '%s' lacks its CPU entry "
                         "points or its LSE",
                         origin, k->name);
    } else if (kind == ATTN_KERNEL_LINEAR) {
      if (k->struct_size <
              offsetof(attn_kernel_desc, chunk) + sizeof(k->chunk) ||
          device != ATTN_DEVICE_CPU || !k->linear_run || !k->linear_work_items)
        return attn_fail(ATTN_ERROR_LOAD,
                         "%s: linear attention kernel '%s' lacks its CPU "
                         "entry points",
                         origin, k->name);
    } else if (kind == ATTN_KERNEL_LINEAR_BACKWARD) {
      if (k->struct_size < offsetof(attn_kernel_desc, linear_backward_run) +
                               sizeof(k->linear_backward_run) ||
          device != ATTN_DEVICE_CPU || !k->linear_backward_run ||
          !k->linear_backward_work_items)
        return attn_fail(ATTN_ERROR_LOAD,
                         "%s: linear attention backward kernel '%s' lacks "
                         "its CPU entry points",
                         origin, k->name);
    } else if (kind == ATTN_KERNEL_ADDITIVE) {
      if (k->struct_size < offsetof(attn_kernel_desc, has_weights) +
                               sizeof(k->has_weights) ||
          device != ATTN_DEVICE_CPU || !k->additive_run ||
          !k->additive_work_items || k->query_dim < 1 || k->additive_dim < 1)
        return attn_fail(ATTN_ERROR_LOAD,
                         "%s: additive attention kernel '%s' lacks its CPU "
                         "entry points or its dims",
                         origin, k->name);
    } else if (kind == ATTN_KERNEL_ADDITIVE_BACKWARD) {
      if (k->struct_size < offsetof(attn_kernel_desc, additive_backward_run) +
                               sizeof(k->additive_backward_run) ||
          device != ATTN_DEVICE_CPU || !k->additive_backward_run ||
          !k->additive_backward_work_items || k->query_dim < 1 ||
          k->additive_dim < 1)
        return attn_fail(ATTN_ERROR_LOAD,
                         "%s: additive attention backward kernel '%s' lacks "
                         "its CPU entry points or its dims",
                         origin, k->name);
    } else if (kind == ATTN_KERNEL_MHA) {
      if (k->struct_size <
              offsetof(attn_kernel_desc, has_bias) + sizeof(k->has_bias) ||
          device != ATTN_DEVICE_CPU || !k->mha_run || !k->mha_work_items ||
          k->num_heads < 1 || k->embed_dim < 1 || k->key_embed_dim < 1 ||
          k->value_embed_dim < 1 || k->embed_dim % k->num_heads != 0)
        return attn_fail(ATTN_ERROR_LOAD,
                         "%s: multi-head attention layer '%s' lacks its CPU "
                         "entry points or its dims",
                         origin, k->name);
    } else if (device == ATTN_DEVICE_CUDA) {
      attn_status status = validate_gpu_kernel(k, origin);
      if (status != ATTN_OK)
        return status;
    } else if (device != ATTN_DEVICE_CPU) {
      return attn_fail(ATTN_ERROR_LOAD,
                       "%s: kernel '%s' runs on an unknown device %d", origin,
                       k->name, (int)device);
    } else if (!k->run || !k->work_items) {
      return attn_fail(ATTN_ERROR_LOAD,
                       "%s: kernel '%s' has a NULL %s function", origin,
                       k->name, k->run ? "work_items" : "run");
    } else if (has_split_fields(k)) {
      int present = (k->partial_work_items != NULL) + (k->partial_run != NULL) +
                    (k->merge_work_items != NULL) + (k->merge_run != NULL);
      if (present != 0 && present != 4)
        return attn_fail(ATTN_ERROR_LOAD,
                         "%s: kernel '%s' has %d of the key split's 4 "
                         "functions; it needs all or none",
                         origin, k->name, present);
    }
    if (attn_kernel_has_block_table(k)) {
      int64_t table = k->block_table_capture;
      if (kind != ATTN_KERNEL_FORWARD || device != ATTN_DEVICE_CPU ||
          !k->block_table_work_items || k->block_table_rows < 1 ||
          k->block_table_keys < 1 || table < 0 ||
          table >= attn_kernel_num_captures(k) ||
          k->captures[table].rank != 4 || k->captures[table].dtype != ATTN_I32)
        return attn_fail(ATTN_ERROR_LOAD,
                         "%s: kernel '%s' fills a block table but its entry "
                         "points, block sizes or table capture are invalid",
                         origin, k->name);
    }
    if (k->dtype != ATTN_F32 && k->dtype != ATTN_F16 && k->dtype != ATTN_BF16)
      return attn_fail(ATTN_ERROR_LOAD,
                       "%s: kernel '%s' has element type %" PRId32
                       ", not f32, f16 or bf16",
                       origin, k->name, k->dtype);
    if (k->mask_kind < ATTN_MASK_NONE || k->mask_kind > ATTN_MASK_BIAS)
      return attn_fail(ATTN_ERROR_LOAD,
                       "%s: kernel '%s' has an unknown mask kind %" PRId32,
                       origin, k->name, k->mask_kind);
    if (k->head_dim < 1 || k->value_dim < 1)
      return attn_fail(ATTN_ERROR_LOAD,
                       "%s: kernel '%s' has head dims D=%" PRId64
                       " and Dv=%" PRId64 "; both must be at least 1",
                       origin, k->name, k->head_dim, k->value_dim);
  }
  return ATTN_OK;
}

static attn_status register_module(void *handle, const attn_library *library,
                                   const char *origin, attn_module **out) {
  attn_module *module = calloc(1, sizeof(*module));
  char *origin_copy = module ? malloc(strlen(origin) + 1) : NULL;
  if (!module || !origin_copy) {
    free(module);
    return attn_fail(ATTN_ERROR_OUT_OF_MEMORY,
                     "%s: out of memory while registering the module", origin);
  }
  strcpy(origin_copy, origin);
  module->handle = handle;
  module->library = library;
  module->origin = origin_copy;
  atomic_init(&module->active_calls, 0);

  pthread_mutex_lock(&registry_lock);
  module->next = registry;
  registry = module;
  pthread_mutex_unlock(&registry_lock);
  *out = module;
  return ATTN_OK;
}

attn_status attn_module_load(const char *path, attn_module **out) {
  if (!out)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "attn_module_load: out is NULL");
  *out = NULL;
  if (!path)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "attn_module_load: path is NULL");

  /* RTLD_NOW: an unresolved symbol fails here rather than in the middle of a
   * kernel. RTLD_LOCAL: two kernel libraries never bind to each other. */
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    return attn_fail(ATTN_ERROR_LOAD, "cannot load kernel library '%s': %s",
                     path, why ? why : "unknown dlopen error");
  }
  dlerror();
  const attn_library *library = dlsym(handle, ATTN_LIBRARY_SYMBOL);
  if (!library) {
    dlclose(handle);
    return attn_fail(ATTN_ERROR_LOAD,
                     "%s: is not an attn kernel library (no %s symbol)", path,
                     ATTN_LIBRARY_SYMBOL);
  }
  attn_status status = validate_library(library, path);
  if (status == ATTN_OK)
    status = register_module(handle, library, path, out);
  if (status != ATTN_OK)
    dlclose(handle);
  return status;
}

attn_status attn_module_from_library(const attn_library *library,
                                     attn_module **out) {
  if (!out)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "attn_module_from_library: out is NULL");
  *out = NULL;
  if (!library)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "attn_module_from_library: library is NULL");
  const char *origin = "linked kernel library";
  attn_status status = validate_library(library, origin);
  if (status != ATTN_OK)
    return status;
  return register_module(NULL, library, origin, out);
}

attn_status attn_module_unload(attn_module *module) {
  if (!module)
    return ATTN_OK;
  pthread_mutex_lock(&registry_lock);
  /* Found by address before anything is read through it, so that unloading
   * twice is refused rather than reading freed memory. */
  attn_module **link = &registry;
  while (*link && *link != module)
    link = &(*link)->next;
  if (!*link) {
    pthread_mutex_unlock(&registry_lock);
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "attn_module_unload: not a loaded module (unloaded "
                     "twice?)");
  }
  int64_t active = atomic_load(&module->active_calls);
  if (active > 0) {
    pthread_mutex_unlock(&registry_lock);
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "%s: cannot unload while %" PRId64
                     " call(s) on its kernels are running",
                     module->origin, active);
  }
  *link = module->next;
  pthread_mutex_unlock(&registry_lock);

  attn_cuda_forget(module->library);
  if (module->handle)
    dlclose(module->handle);
  free(module->origin);
  free(module);
  return ATTN_OK;
}

int32_t attn_module_num_kernels(const attn_module *module) {
  return module ? (int32_t)module->library->num_kernels : 0;
}

const attn_kernel_desc *attn_module_kernel(const attn_module *module,
                                           int32_t index) {
  if (!module || index < 0 || (uint32_t)index >= module->library->num_kernels)
    return NULL;
  return module->library->kernels[index];
}

attn_status attn_module_find(const attn_module *module, const char *name,
                             const attn_kernel_desc **out) {
  if (!out)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "attn_module_find: out is NULL");
  *out = NULL;
  if (!module || !name)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "attn_module_find: %s is NULL",
                     module ? "name" : "module");
  const attn_library *library = module->library;
  for (uint32_t i = 0; i < library->num_kernels; ++i) {
    if (strcmp(library->kernels[i]->name, name) == 0) {
      *out = library->kernels[i];
      return ATTN_OK;
    }
  }
  /* List what there is: the usual cause is a typo or a stale library. */
  char names[512] = "";
  size_t used = 0;
  for (uint32_t i = 0; i < library->num_kernels && used < sizeof(names); ++i) {
    int n = snprintf(names + used, sizeof(names) - used, "%s'%s'",
                     i ? ", " : "", library->kernels[i]->name);
    if (n < 0)
      break;
    used += (size_t)n;
  }
  return attn_fail(ATTN_ERROR_NOT_FOUND,
                   "%s: no kernel named '%s' (it has %" PRIu32 ": %s)",
                   module->origin, name, library->num_kernels,
                   library->num_kernels ? names : "none");
}

/* The live module whose library lists `kernel`, with one more active call
 * counted; NULL when the kernel belongs to no module (linked statically and
 * never registered), which is allowed. */
static attn_module *pin_owner(const attn_kernel_desc *kernel) {
  pthread_mutex_lock(&registry_lock);
  attn_module *owner = NULL;
  for (attn_module *m = registry; m && !owner; m = m->next)
    for (uint32_t i = 0; i < m->library->num_kernels; ++i)
      if (m->library->kernels[i] == kernel) {
        owner = m;
        break;
      }
  if (owner)
    atomic_fetch_add(&owner->active_calls, 1);
  pthread_mutex_unlock(&registry_lock);
  return owner;
}

static void unpin(attn_module *owner) {
  if (owner)
    atomic_fetch_sub(&owner->active_calls, 1);
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

typedef struct run_context {
  const attn_kernel_desc *kernel;
  const attn_kernel_args *args;
  int64_t splits;   /* the key split's phases: ranges per work item */
  float *workspace; /* and their states */
} run_context;

static void run_work_items(void *context, int64_t begin, int64_t end) {
  const run_context *run = context;
  run->kernel->run(run->args, begin, end);
}

static void run_partial_items(void *context, int64_t begin, int64_t end) {
  const run_context *run = context;
  run->kernel->partial_run(run->args, run->splits, run->workspace, begin, end);
}

static void run_merge_items(void *context, int64_t begin, int64_t end) {
  const run_context *run = context;
  run->kernel->merge_run(run->args, run->splits, run->workspace, begin, end);
}

static void run_items(attn_thread_pool *pool, int64_t items, attn_task_fn task,
                      void *context) {
  if (items <= 0)
    return;
  if (pool)
    attn_thread_pool_parallel_for(pool, items, task, context);
  else
    task(context, 0, items);
}

/* Keys per range below which a split costs more than it spreads: the
 * merge reads each range's state once, and a range is whole key tiles. */
#define ATTN_MIN_KEYS_PER_SPLIT 512

/* The runtime's choice for attn_run: split only when the call has fewer
 * work items than threads, into enough ranges for every thread to take
 * one (items x splits >= threads), each at least ATTN_MIN_KEYS_PER_SPLIT
 * keys. */
static int64_t choose_splits(const attn_kernel_args *args, int64_t items,
                             attn_thread_pool *pool) {
  int64_t threads = pool ? attn_thread_pool_size(pool) : 1;
  if (items <= 0 || items >= threads)
    return 1;
  int64_t splits = (threads + items - 1) / items;
  int64_t most = args->seq_k / ATTN_MIN_KEYS_PER_SPLIT;
  return splits < most ? splits : (most > 1 ? most : 1);
}

/* Runs the key split's two phases over a workspace of its own. */
static attn_status run_split(const attn_kernel_desc *kernel,
                             const attn_kernel_args *args, int64_t splits,
                             attn_thread_pool *pool) {
  int64_t floats = ATTN_SPLIT_WORKSPACE_FLOATS(args, kernel->value_dim, splits);
  if (floats <= 0 || (uint64_t)floats > SIZE_MAX / sizeof(float) / 2)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s': a split into %" PRId64
                     " key ranges needs a workspace too large to allocate",
                     kernel->name, splits);
  /* 64-byte aligned, rounded up to a whole number of alignments. */
  size_t bytes = ((size_t)floats * sizeof(float) + 63) & ~(size_t)63;
  float *workspace = aligned_alloc(64, bytes);
  if (!workspace)
    return attn_fail(ATTN_ERROR_OUT_OF_MEMORY,
                     "kernel '%s': cannot allocate the %zu-byte split-KV "
                     "workspace",
                     kernel->name, bytes);
  run_context context = {kernel, args, splits, workspace};
  int64_t partial = kernel->partial_work_items(args, splits);
  int64_t merge = kernel->merge_work_items(args, splits);
  attn_status status = ATTN_OK;
  if (partial < 0 || merge < 0) {
    status = attn_fail(ATTN_ERROR_INTERNAL,
                       "kernel '%s' reported %" PRId64 " partial and %" PRId64
                       " merge work items",
                       kernel->name, partial, merge);
  } else {
    /* parallel_for returns when every item has run: the merge sees every
     * range's state. */
    run_items(pool, partial, run_partial_items, &context);
    run_items(pool, merge, run_merge_items, &context);
  }
  free(workspace);
  return status;
}

/* The error of a kernel whose work_items returned a negative count. */
static attn_status bad_work_items(const attn_kernel_desc *kernel,
                                  int64_t items) {
  return attn_fail(ATTN_ERROR_INTERNAL,
                   "kernel '%s' reported %" PRId64 " work items", kernel->name,
                   items);
}

attn_status attn_run_split(const attn_kernel_desc *kernel,
                           const attn_tensor *query, const attn_tensor *key,
                           const attn_tensor *value, const attn_tensor *mask,
                           const attn_tensor *output, const attn_tensor *lse,
                           int64_t key_splits, attn_thread_pool *pool) {
  if (attn_kernel_has_dropout(kernel))
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s' has dropout: run it with attn_run_dropout "
                     "(a probability and a seed)",
                     kernel->name);
  if (attn_kernel_has_sinks(kernel))
    return attn_sinks_needed(kernel);
  if (attn_kernel_num_captures(kernel) > 0)
    return attn_captures_needed(kernel);
  attn_run_options options = {.struct_size = sizeof(options),
                              .key_splits = key_splits};
  return attn_run_with(kernel, query, key, value, mask, output, lse, &options,
                       pool);
}

attn_status attn_run_dropout(const attn_kernel_desc *kernel,
                             const attn_tensor *query, const attn_tensor *key,
                             const attn_tensor *value, const attn_tensor *mask,
                             const attn_tensor *output, const attn_tensor *lse,
                             float dropout_p, uint64_t dropout_seed,
                             attn_thread_pool *pool) {
  if (attn_kernel_has_sinks(kernel))
    return attn_sinks_needed(kernel);
  if (attn_kernel_num_captures(kernel) > 0)
    return attn_captures_needed(kernel);
  attn_run_options options = {.struct_size = sizeof(options),
                              .dropout_p = dropout_p,
                              .dropout_seed = dropout_seed};
  return attn_run_with(kernel, query, key, value, mask, output, lse, &options,
                       pool);
}

/* The options a call gave, as this runtime's struct: fields past the
 * caller's struct_size are zero. */
static attn_status read_options(const attn_run_options *given,
                                attn_run_options *options) {
  memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(*options);
  if (!given)
    return ATTN_OK;
  if (given->struct_size < offsetof(attn_run_options, sinks) ||
      given->struct_size > 4096)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "options: struct_size is %" PRIu32 "; set it to "
                     "sizeof(attn_run_options) after zeroing the struct",
                     given->struct_size);
  size_t size = given->struct_size < sizeof(*options) ? given->struct_size
                                                      : sizeof(*options);
  memcpy(options, given, size);
  options->struct_size = sizeof(*options);
  return ATTN_OK;
}

/* A stream is a GPU launch's: refused for a CPU kernel rather than ignored. */
static attn_status check_stream(const attn_kernel_desc *kernel,
                                const attn_run_options *options) {
  if (options->cuda_stream && attn_kernel_device(kernel) != ATTN_DEVICE_CUDA)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "options: cuda_stream is given but kernel '%s' runs on "
                     "the CPU",
                     kernel->name);
  return ATTN_OK;
}

/* attn_prepare_with once the options are read (read_options). */
static attn_status prepare_with(const attn_kernel_desc *kernel,
                                const attn_tensor *query,
                                const attn_tensor *key,
                                const attn_tensor *value,
                                const attn_tensor *mask,
                                const attn_tensor *output,
                                const attn_tensor *lse,
                                const attn_run_options *options,
                                attn_kernel_args *args) {
  attn_status status = ATTN_OK;
  if (options->grad_mask || options->grad_captures)
    status = attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                       "options: %s is a backward call's "
                       "(attn_run_backward_with)",
                       options->grad_mask ? "grad_mask" : "grad_captures");
  if (status == ATTN_OK)
    status = check_stream(kernel, options);
  if (status == ATTN_OK)
    status = check_dropout(kernel, options->dropout_p);
  if (status == ATTN_OK)
    status = attn_prepare_forward(kernel, query, key, value, mask, output, lse,
                                  options->sinks, args);
  if (status == ATTN_OK) {
    const attn_tensor *written[2] = {output, lse};
    status = attn_prepare_captures(kernel, options->captures,
                                   options->num_captures, written, 2, args);
  }
  if (status == ATTN_OK) {
    args->dropout_p = options->dropout_p;
    args->dropout_seed = options->dropout_seed;
  }
  return status;
}

attn_status attn_prepare_with(const attn_kernel_desc *kernel,
                              const attn_tensor *query, const attn_tensor *key,
                              const attn_tensor *value, const attn_tensor *mask,
                              const attn_tensor *output, const attn_tensor *lse,
                              const attn_run_options *given,
                              attn_kernel_args *args) {
  if (!kernel)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  attn_run_options options;
  attn_status status = read_options(given, &options);
  if (status == ATTN_OK)
    status = prepare_with(kernel, query, key, value, mask, output, lse,
                          &options, args);
  return status;
}

attn_status attn_run_with(const attn_kernel_desc *kernel,
                          const attn_tensor *query, const attn_tensor *key,
                          const attn_tensor *value, const attn_tensor *mask,
                          const attn_tensor *output, const attn_tensor *lse,
                          const attn_run_options *given,
                          attn_thread_pool *pool) {
  if (!kernel)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  attn_run_options options;
  attn_status read = read_options(given, &options);
  if (read != ATTN_OK)
    return read;
  int64_t key_splits = options.key_splits;
  if (key_splits < 0)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "key_splits is %" PRId64 "; it must be 0 (the runtime "
                     "chooses), 1 (no split) or more",
                     key_splits);
  if (attn_kernel_kind_of(kernel) == ATTN_KERNEL_BACKWARD)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s' computes gradients: run it with "
                     "attn_run_backward",
                     kernel->name);
  if (attn_kernel_kind_of(kernel) == ATTN_KERNEL_WEIGHTS)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s' computes the attention weights: run it "
                     "with attn_run_weights",
                     kernel->name);
  if (attn_kernel_kind_of(kernel) == ATTN_KERNEL_LINEAR)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s' computes linear attention: run it with "
                     "attn_run_linear",
                     kernel->name);
  if (attn_kernel_kind_of(kernel) == ATTN_KERNEL_ADDITIVE)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s' computes additive attention: run it with "
                     "attn_run_additive",
                     kernel->name);
  if (attn_kernel_kind_of(kernel) == ATTN_KERNEL_MHA)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s' is a multi-head attention layer: run it "
                     "with attn_run_mha",
                     kernel->name);
  /* Pinned before the descriptor is read, so that an unload on another
   * thread cannot free the code this call is about to run. */
  attn_module *owner = pin_owner(kernel);
  attn_kernel_args args;
  attn_status status = prepare_with(kernel, query, key, value, mask, output,
                                    lse, &options, &args);
  if (status == ATTN_OK)
    status = attn_kernel_check_cpu(kernel);
  if (status == ATTN_OK && key_splits > 1 && !attn_kernel_has_key_split(kernel))
    status = attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                       "kernel '%s' has no key split (attn-compile gives "
                       "decoding kernels, static Sq <= 4, one); run it with "
                       "key_splits 0 or 1",
                       kernel->name);
  /* No query row to compute. Sk == 0 is not such a case: every row is then
   * fully masked and the kernel still writes O = 0 and LSE = -inf. */
  if (status != ATTN_OK || args.batch == 0 || args.heads_q == 0 ||
      args.seq_q == 0) {
    unpin(owner);
    return status;
  }
  if (attn_kernel_device(kernel) == ATTN_DEVICE_CUDA) {
    status = attn_cuda_launch(kernel, &args, options.cuda_stream);
    unpin(owner);
    return status;
  }
  int64_t items = kernel->work_items(&args);
  if (items < 0) {
    unpin(owner);
    return bad_work_items(kernel, items);
  }
  int64_t splits = key_splits;
  if (splits == 0)
    splits = attn_kernel_has_key_split(kernel)
                 ? choose_splits(&args, items, pool)
                 : 1;
  if (splits > 1) {
    status = run_split(kernel, &args, splits, pool);
  } else {
    run_context context = {kernel, &args, 1, NULL};
    run_items(pool, items, run_work_items, &context);
  }
  unpin(owner);
  return status;
}

int attn_kernel_has_block_table(const attn_kernel_desc *kernel) {
  return kernel &&
         kernel->struct_size >=
             offsetof(attn_kernel_desc, block_table_capture) +
                 sizeof(kernel->block_table_capture) &&
         kernel->block_table_run != NULL;
}

static void run_block_table_items(void *context, int64_t begin, int64_t end) {
  const run_context *run = context;
  run->kernel->block_table_run(run->args, begin, end);
}

attn_status attn_fill_block_table(const attn_kernel_desc *kernel, int64_t batch,
                                  int64_t heads_q, int64_t seq_q, int64_t seq_k,
                                  const attn_tensor *captures,
                                  int32_t num_captures,
                                  attn_thread_pool *pool) {
  if (!kernel)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  attn_module *owner = pin_owner(kernel);
  attn_kernel_args args;
  attn_status status = attn_prepare_block_table(
      kernel, batch, heads_q, seq_q, seq_k, captures, num_captures, &args);
  if (status == ATTN_OK)
    status = attn_kernel_check_cpu(kernel);
  if (status == ATTN_OK) {
    int64_t items = kernel->block_table_work_items(&args);
    if (items < 0) {
      status = bad_work_items(kernel, items);
    } else {
      run_context context = {kernel, &args, 1, NULL};
      run_items(pool, items, run_block_table_items, &context);
    }
  }
  unpin(owner);
  return status;
}

attn_status attn_run(const attn_kernel_desc *kernel, const attn_tensor *query,
                     const attn_tensor *key, const attn_tensor *value,
                     const attn_tensor *mask, const attn_tensor *output,
                     const attn_tensor *lse, attn_thread_pool *pool) {
  return attn_run_split(kernel, query, key, value, mask, output, lse, 0, pool);
}

//===----------------------------------------------------------------------===//
// The backward
//===----------------------------------------------------------------------===//

/* Writes +0 into every element of a checked 4-d tensor (all-zero bits in
 * each of the float types). */
static void zero_tensor(const attn_tensor *t) {
  size_t size = t->dtype == ATTN_F32 ? 4 : 2;
  for (int64_t a = 0; a < t->shape[0]; ++a)
    for (int64_t b = 0; b < t->shape[1]; ++b)
      for (int64_t c = 0; c < t->shape[2]; ++c)
        for (int64_t d = 0; d < t->shape[3]; ++d)
          memset((char *)t->data + (a * t->strides[0] + b * t->strides[1] +
                                    c * t->strides[2] + d * t->strides[3]) *
                                       (int64_t)size,
                 0, size);
}

typedef struct backward_context {
  const attn_kernel_desc *kernel;
  const attn_backward_args *args;
} backward_context;

static void run_backward_items(void *context, int64_t begin, int64_t end) {
  const backward_context *run = context;
  run->kernel->backward_run(run->args, begin, end);
}

attn_status attn_run_backward(const attn_kernel_desc *kernel,
                              const attn_tensor *query, const attn_tensor *key,
                              const attn_tensor *value, const attn_tensor *mask,
                              const attn_tensor *output, const attn_tensor *lse,
                              const attn_tensor *grad_output,
                              const attn_tensor *grad_lse,
                              const attn_tensor *grad_query,
                              const attn_tensor *grad_key,
                              const attn_tensor *grad_value, float dropout_p,
                              uint64_t dropout_seed, attn_thread_pool *pool) {
  if (attn_kernel_has_grad_mask(kernel))
    return attn_grad_mask_needed(kernel);
  if (attn_kernel_num_captures(kernel) > 0)
    return attn_captures_needed(kernel);
  attn_run_options options = {.struct_size = sizeof(options),
                              .dropout_p = dropout_p,
                              .dropout_seed = dropout_seed};
  return attn_run_backward_with(kernel, query, key, value, mask, output, lse,
                                grad_output, grad_lse, grad_query, grad_key,
                                grad_value, &options, pool);
}

attn_status attn_prepare_backward_with(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value, const attn_tensor *mask,
    const attn_tensor *output, const attn_tensor *lse,
    const attn_tensor *grad_output, const attn_tensor *grad_lse,
    const attn_tensor *grad_query, const attn_tensor *grad_key,
    const attn_tensor *grad_value, const attn_run_options *given,
    attn_backward_args *args) {
  if (!kernel)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  attn_run_options options;
  attn_status status = read_options(given, &options);
  if (status == ATTN_OK && (options.sinks || options.key_splits != 0))
    status = attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                       "options: a backward call takes no sinks or key "
                       "splits (the forward's LSE holds the sinks)");
  if (status == ATTN_OK)
    status = check_stream(kernel, &options);
  if (status == ATTN_OK)
    status = check_dropout(kernel, options.dropout_p);
  if (status == ATTN_OK)
    status = attn_prepare_backward_tensors(
        kernel, query, key, value, mask, output, lse, grad_output, grad_lse,
        grad_query, grad_key, grad_value, options.grad_mask, args);
  if (status == ATTN_OK) {
    const attn_tensor *written[4] = {grad_query, grad_key, grad_value,
                                     options.grad_mask};
    status = attn_prepare_captures(kernel, options.captures,
                                   options.num_captures, written, 4,
                                   &args->forward);
    const attn_tensor *others[12] = {
        query,      key,      value,       mask,
        output,     lse,      grad_output, grad_lse,
        grad_query, grad_key, grad_value,  options.grad_mask};
    static const char *const other_names[12] = {
        "query",      "key",      "value",       "mask",
        "output",     "lse",      "grad_output", "grad_lse",
        "grad_query", "grad_key", "grad_value",  "grad_mask"};
    if (status == ATTN_OK)
      status = attn_prepare_grad_captures(kernel, options.grad_captures,
                                          options.captures, others, other_names,
                                          12, args);
  }
  if (status == ATTN_OK) {
    args->forward.dropout_p = options.dropout_p;
    args->forward.dropout_seed = options.dropout_seed;
  }
  return status;
}

attn_status attn_run_backward_with(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value, const attn_tensor *mask,
    const attn_tensor *output, const attn_tensor *lse,
    const attn_tensor *grad_output, const attn_tensor *grad_lse,
    const attn_tensor *grad_query, const attn_tensor *grad_key,
    const attn_tensor *grad_value, const attn_run_options *options,
    attn_thread_pool *pool) {
  if (!kernel)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  if (attn_kernel_kind_of(kernel) != ATTN_KERNEL_BACKWARD)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s' is not a backward kernel: "
                     "attn_run_backward takes one (attn-compile's spec key "
                     "'backward')",
                     kernel->name);
  attn_module *owner = pin_owner(kernel);
  attn_backward_args args;
  attn_status status = attn_prepare_backward_with(
      kernel, query, key, value, mask, output, lse, grad_output, grad_lse,
      grad_query, grad_key, grad_value, options, &args);
  if (status == ATTN_OK && attn_kernel_device(kernel) == ATTN_DEVICE_CUDA) {
    /* The kernel writes every gradient, dK and dV of a call without query
     * heads included (its key blocks then see no row). */
    attn_run_options read;
    status = read_options(options, &read);
    if (status == ATTN_OK)
      status = attn_cuda_launch_backward(kernel, &args, read.cuda_stream);
    unpin(owner);
    return status;
  }
  if (status == ATTN_OK)
    status = attn_kernel_check_cpu(kernel);
  if (status != ATTN_OK) {
    unpin(owner);
    return status;
  }
  /* No query head: nothing reaches dK and dV, which are then 0 (the
   * kernel has no work item to write them). */
  if (args.forward.heads_q == 0) {
    zero_tensor(grad_key);
    zero_tensor(grad_value);
    /* And the captures' partials, a row per (batch, key/value head). */
    for (int32_t n = 0; n < attn_kernel_num_captures(kernel); ++n) {
      if (!args.grad_captures[n])
        continue;
      int64_t elements = 1;
      for (int32_t d = 0; d < kernel->captures[n].rank; ++d)
        elements *= args.forward.captures[n].sizes[d];
      for (int64_t w = 0; w < args.forward.batch * args.forward.heads_kv; ++w)
        memset(args.grad_captures[n] + w * args.grad_capture_row_strides[n], 0,
               (size_t)elements * sizeof(float));
    }
    unpin(owner);
    return ATTN_OK;
  }
  int64_t items = kernel->backward_work_items(&args);
  if (items < 0) {
    unpin(owner);
    return bad_work_items(kernel, items);
  }
  backward_context context = {kernel, &args};
  run_items(pool, items, run_backward_items, &context);
  unpin(owner);
  return ATTN_OK;
}

//===----------------------------------------------------------------------===//
// The attention weights
//===----------------------------------------------------------------------===//

attn_status attn_run_weights(const attn_kernel_desc *kernel,
                             const attn_tensor *query, const attn_tensor *key,
                             const attn_tensor *mask, const attn_tensor *lse,
                             const attn_tensor *weights, float dropout_p,
                             uint64_t dropout_seed, attn_thread_pool *pool) {
  if (attn_kernel_num_captures(kernel) > 0)
    return attn_captures_needed(kernel);
  attn_run_options options = {.struct_size = sizeof(options),
                              .dropout_p = dropout_p,
                              .dropout_seed = dropout_seed};
  return attn_run_weights_with(kernel, query, key, mask, lse, weights,
                               &options, pool);
}

attn_status attn_run_weights_with(const attn_kernel_desc *kernel,
                                  const attn_tensor *query,
                                  const attn_tensor *key,
                                  const attn_tensor *mask,
                                  const attn_tensor *lse,
                                  const attn_tensor *weights,
                                  const attn_run_options *given,
                                  attn_thread_pool *pool) {
  if (!kernel)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  if (attn_kernel_kind_of(kernel) != ATTN_KERNEL_WEIGHTS)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s' is not a weights kernel: attn_run_weights "
                     "takes one (attn-compile's spec key 'weights')",
                     kernel->name);
  attn_run_options options;
  attn_status read = read_options(given, &options);
  if (read == ATTN_OK && (options.sinks || options.key_splits != 0 ||
                          options.grad_mask || options.grad_captures))
    read = attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "options: a weights call takes no sinks, key splits, "
                     "grad_mask or grad_captures (give it the forward's LSE, "
                     "which holds the sinks)");
  if (read == ATTN_OK)
    read = check_stream(kernel, &options);
  if (read != ATTN_OK)
    return read;
  float dropout_p = options.dropout_p;
  uint64_t dropout_seed = options.dropout_seed;
  attn_module *owner = pin_owner(kernel);
  attn_kernel_args args;
  attn_status status = check_dropout(kernel, dropout_p);
  if (status == ATTN_OK)
    status = attn_prepare_weights_tensors(kernel, query, key, mask, lse,
                                          weights, &args);
  if (status == ATTN_OK) {
    const attn_tensor *written[1] = {weights};
    status = attn_prepare_captures(kernel, options.captures,
                                   options.num_captures, written, 1, &args);
  }
  args.dropout_p = dropout_p;
  args.dropout_seed = dropout_seed;
  if (status == ATTN_OK)
    status = attn_kernel_check_cpu(kernel);
  /* No row to write (Sk == 0 has rows of no element). */
  if (status != ATTN_OK || args.batch == 0 || args.heads_q == 0 ||
      args.seq_q == 0 || args.seq_k == 0) {
    unpin(owner);
    return status;
  }
  int64_t items = kernel->work_items(&args);
  status = items < 0 ? bad_work_items(kernel, items) : ATTN_OK;
  if (status == ATTN_OK) {
    run_context context = {kernel, &args, 1, NULL};
    run_items(pool, items, run_work_items, &context);
  }
  unpin(owner);
  return status;
}

//===----------------------------------------------------------------------===//
// Linear attention
//===----------------------------------------------------------------------===//

typedef struct linear_context {
  const attn_kernel_desc *kernel;
  const attn_linear_args *args;
} linear_context;

static void run_linear_items(void *context, int64_t begin, int64_t end) {
  const linear_context *run = context;
  run->kernel->linear_run(run->args, begin, end);
}

attn_status
attn_run_linear(const attn_kernel_desc *kernel, const attn_tensor *query,
                const attn_tensor *key, const attn_tensor *value,
                const attn_tensor *initial_state,
                const attn_tensor *initial_normalizer,
                const attn_tensor *output, const attn_tensor *final_state,
                const attn_tensor *final_normalizer, attn_thread_pool *pool) {
  if (!kernel)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  if (attn_kernel_kind_of(kernel) != ATTN_KERNEL_LINEAR)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s' is not a linear attention kernel: "
                     "attn_run_linear takes one (attn-compile's spec key "
                     "'linear')",
                     kernel->name);
  attn_module *owner = pin_owner(kernel);
  attn_linear_args args;
  attn_status status = attn_prepare_linear(
      kernel, query, key, value, initial_state, initial_normalizer, output,
      final_state, final_normalizer, &args);
  if (status == ATTN_OK)
    status = attn_kernel_check_cpu(kernel);
  if (status != ATTN_OK) {
    unpin(owner);
    return status;
  }
  if (attn_kernel_device(kernel) == ATTN_DEVICE_CUDA) {
    /* An empty grid is no launch: nothing to write but an empty state. */
    if (args.batch > 0 && args.heads_kv > 0)
      status = attn_cuda_launch_linear(kernel, &args);
    unpin(owner);
    return status;
  }
  int64_t items = kernel->linear_work_items(&args);
  if (items < 0) {
    unpin(owner);
    return bad_work_items(kernel, items);
  }
  linear_context context = {kernel, &args};
  run_items(pool, items, run_linear_items, &context);
  unpin(owner);
  return ATTN_OK;
}

typedef struct linear_backward_context {
  const attn_kernel_desc *kernel;
  const attn_linear_backward_args *args;
} linear_backward_context;

static void run_linear_backward_items(void *context, int64_t begin,
                                      int64_t end) {
  const linear_backward_context *run = context;
  run->kernel->linear_backward_run(run->args, begin, end);
}

attn_status attn_run_linear_backward(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *key, const attn_tensor *value, const attn_tensor *output,
    const attn_tensor *grad_output, const attn_tensor *state,
    const attn_tensor *normalizer, const attn_tensor *grad_final_state,
    const attn_tensor *grad_final_normalizer, const attn_tensor *grad_query,
    const attn_tensor *grad_key, const attn_tensor *grad_value,
    const attn_tensor *grad_initial_state,
    const attn_tensor *grad_initial_normalizer, attn_thread_pool *pool) {
  if (!kernel)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  if (attn_kernel_kind_of(kernel) != ATTN_KERNEL_LINEAR_BACKWARD)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s' is not a linear attention backward kernel: "
                     "attn_run_linear_backward takes one (attn-compile's "
                     "spec keys 'linear,backward')",
                     kernel->name);
  attn_module *owner = pin_owner(kernel);
  attn_linear_backward_args args;
  attn_status status = attn_prepare_linear_backward(
      kernel, query, key, value, output, grad_output, state, normalizer,
      grad_final_state, grad_final_normalizer, grad_query, grad_key, grad_value,
      grad_initial_state, grad_initial_normalizer, &args);
  if (status == ATTN_OK)
    status = attn_kernel_check_cpu(kernel);
  if (status != ATTN_OK) {
    unpin(owner);
    return status;
  }
  int64_t items = kernel->linear_backward_work_items(&args);
  if (items < 0) {
    unpin(owner);
    return bad_work_items(kernel, items);
  }
  linear_backward_context context = {kernel, &args};
  run_items(pool, items, run_linear_backward_items, &context);
  unpin(owner);
  return ATTN_OK;
}

//===----------------------------------------------------------------------===//
// Additive attention
//===----------------------------------------------------------------------===//

typedef struct additive_context {
  const attn_kernel_desc *kernel;
  const attn_additive_args *args;
} additive_context;

static void run_additive_items(void *context, int64_t begin, int64_t end) {
  const additive_context *run = context;
  run->kernel->additive_run(run->args, begin, end);
}

attn_status
attn_run_additive(const attn_kernel_desc *kernel, const attn_tensor *query,
                  const attn_tensor *keys, const attn_tensor *values,
                  const attn_tensor *query_weight,
                  const attn_tensor *key_weight,
                  const attn_tensor *score_vector, const attn_tensor *mask,
                  const attn_tensor *output, const attn_tensor *weights,
                  attn_thread_pool *pool) {
  if (!kernel)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  if (attn_kernel_kind_of(kernel) != ATTN_KERNEL_ADDITIVE)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s' is not an additive attention kernel: "
                     "attn_run_additive takes one (attn-compile's spec key "
                     "'additive')",
                     kernel->name);
  attn_module *owner = pin_owner(kernel);
  attn_additive_args args;
  attn_status status = attn_prepare_additive(
      kernel, query, keys, values, query_weight, key_weight, score_vector, mask,
      output, weights, &args);
  if (status == ATTN_OK)
    status = attn_kernel_check_cpu(kernel);
  if (status != ATTN_OK) {
    unpin(owner);
    return status;
  }
  if (attn_kernel_device(kernel) == ATTN_DEVICE_CUDA) {
    /* An empty grid is no launch (Sk = 0 is not: its rows are 0). */
    if (args.batch > 0 && args.seq_q > 0)
      status = attn_cuda_launch_additive(kernel, &args);
    unpin(owner);
    return status;
  }
  int64_t items = kernel->additive_work_items(&args);
  if (items < 0) {
    unpin(owner);
    return bad_work_items(kernel, items);
  }
  additive_context context = {kernel, &args};
  run_items(pool, items, run_additive_items, &context);
  unpin(owner);
  return ATTN_OK;
}

typedef struct additive_backward_context {
  const attn_kernel_desc *kernel;
  const attn_additive_backward_args *args;
} additive_backward_context;

static void run_additive_backward_items(void *context, int64_t begin,
                                        int64_t end) {
  const additive_backward_context *run = context;
  run->kernel->additive_backward_run(run->args, begin, end);
}

attn_status attn_run_additive_backward(
    const attn_kernel_desc *kernel, const attn_tensor *query,
    const attn_tensor *keys, const attn_tensor *values,
    const attn_tensor *query_weight, const attn_tensor *key_weight,
    const attn_tensor *score_vector, const attn_tensor *mask,
    const attn_tensor *grad_output, const attn_tensor *grad_qp,
    const attn_tensor *grad_kp, const attn_tensor *grad_values,
    const attn_tensor *grad_v, attn_thread_pool *pool) {
  if (!kernel)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  if (attn_kernel_kind_of(kernel) != ATTN_KERNEL_ADDITIVE_BACKWARD)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s' is not an additive attention backward "
                     "kernel: attn_run_additive_backward takes one "
                     "(attn-compile's spec keys 'additive,backward')",
                     kernel->name);
  attn_module *owner = pin_owner(kernel);
  attn_additive_backward_args args;
  attn_status status = attn_prepare_additive_backward(
      kernel, query, keys, values, query_weight, key_weight, score_vector, mask,
      grad_output, grad_qp, grad_kp, grad_values, grad_v, &args);
  if (status == ATTN_OK)
    status = attn_kernel_check_cpu(kernel);
  if (status != ATTN_OK) {
    unpin(owner);
    return status;
  }
  int64_t items = kernel->additive_backward_work_items(&args);
  if (items < 0) {
    unpin(owner);
    return bad_work_items(kernel, items);
  }
  additive_backward_context context = {kernel, &args};
  run_items(pool, items, run_additive_backward_items, &context);
  unpin(owner);
  return ATTN_OK;
}

//===----------------------------------------------------------------------===//
// Multi-head attention layers
//===----------------------------------------------------------------------===//

typedef struct mha_context {
  const attn_kernel_desc *kernel;
  const attn_mha_args *args;
} mha_context;

static void run_mha_items(void *context, int64_t begin, int64_t end) {
  const mha_context *run = context;
  run->kernel->mha_run(run->args, begin, end);
}

attn_status
attn_run_mha(const attn_kernel_desc *kernel, const attn_tensor *query,
             const attn_tensor *key, const attn_tensor *value,
             const attn_tensor *query_weight, const attn_tensor *key_weight,
             const attn_tensor *value_weight, const attn_tensor *in_bias,
             const attn_tensor *out_weight, const attn_tensor *out_bias,
             const attn_tensor *mask, const attn_tensor *output,
             attn_thread_pool *pool) {
  if (!kernel)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  if (attn_kernel_kind_of(kernel) != ATTN_KERNEL_MHA)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "kernel '%s' is not a multi-head attention layer: "
                     "attn_run_mha takes one (attn-compile's spec key 'mha')",
                     kernel->name);
  attn_module *owner = pin_owner(kernel);
  attn_mha_args args;
  attn_status status = attn_prepare_mha(
      kernel, query, key, value, query_weight, key_weight, value_weight,
      in_bias, out_weight, out_bias, mask, output, &args);
  if (status == ATTN_OK)
    status = attn_kernel_check_cpu(kernel);
  if (status != ATTN_OK) {
    unpin(owner);
    return status;
  }
  int64_t items = kernel->mha_work_items(&args);
  if (items < 0) {
    unpin(owner);
    return bad_work_items(kernel, items);
  }
  mha_context context = {kernel, &args};
  run_items(pool, items, run_mha_items, &context);
  unpin(owner);
  return ATTN_OK;
}
