/*===- cpu.c - Does this CPU run the kernel's instructions? ---------------===*
 *
 * A kernel compiled for "+avx512f" dies with SIGILL on a CPU without
 * AVX-512; attn_kernel_check_cpu turns that into a status and a message. It
 * reads the kernel's LLVM feature string and tests each feature it knows
 * with cpuid. For the AVX, AVX-512 and AMX families the CPU having the
 * instructions is not enough: the OS must also save their registers on a
 * context switch, which XCR0 (read with xgetbv) tells. Linux additionally
 * hands AMX's large tile state out only on request (arch_prctl), which is
 * made here once, the first time a kernel needs AMX.
 *
 * Features this file does not know are not checked: LLVM lists many (+cx8,
 * +x87, +evex512, ...) that every CPU a kernel is compiled for has, or that
 * come with one that is checked.
 *===----------------------------------------------------------------------===*/
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* syscall */
#endif

#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

//===----------------------------------------------------------------------===//
// The host's features
//===----------------------------------------------------------------------===//

/* Which cpuid output word a feature bit is in. */
typedef enum word {
  LEAF1_ECX,
  LEAF1_EDX,
  LEAF7_EBX,
  LEAF7_ECX,
  LEAF7_EDX,
  LEAF7_1_EAX,
  EXT1_ECX,
  NUM_WORDS
} word;

/* The register state the OS must have enabled in XCR0 for the feature. */
typedef enum os_state { OS_NONE, OS_AVX, OS_AVX512, OS_AMX } os_state;

typedef struct feature {
  const char *name; /* LLVM's name */
  word word;
  int bit;
  os_state state;
} feature;

static const feature known_features[] = {
    {"sse", LEAF1_EDX, 25, OS_NONE},
    {"sse2", LEAF1_EDX, 26, OS_NONE},
    {"sse3", LEAF1_ECX, 0, OS_NONE},
    {"pclmul", LEAF1_ECX, 1, OS_NONE},
    {"ssse3", LEAF1_ECX, 9, OS_NONE},
    {"fma", LEAF1_ECX, 12, OS_AVX},
    {"cx16", LEAF1_ECX, 13, OS_NONE},
    {"sse4.1", LEAF1_ECX, 19, OS_NONE},
    {"sse4.2", LEAF1_ECX, 20, OS_NONE},
    {"movbe", LEAF1_ECX, 22, OS_NONE},
    {"popcnt", LEAF1_ECX, 23, OS_NONE},
    {"aes", LEAF1_ECX, 25, OS_NONE},
    {"xsave", LEAF1_ECX, 26, OS_NONE},
    {"avx", LEAF1_ECX, 28, OS_AVX},
    {"f16c", LEAF1_ECX, 29, OS_AVX},
    {"rdrnd", LEAF1_ECX, 30, OS_NONE},
    {"fsgsbase", LEAF7_EBX, 0, OS_NONE},
    {"bmi", LEAF7_EBX, 3, OS_NONE},
    {"avx2", LEAF7_EBX, 5, OS_AVX},
    {"bmi2", LEAF7_EBX, 8, OS_NONE},
    {"avx512f", LEAF7_EBX, 16, OS_AVX512},
    {"avx512dq", LEAF7_EBX, 17, OS_AVX512},
    {"rdseed", LEAF7_EBX, 18, OS_NONE},
    {"adx", LEAF7_EBX, 19, OS_NONE},
    {"avx512ifma", LEAF7_EBX, 21, OS_AVX512},
    {"clflushopt", LEAF7_EBX, 23, OS_NONE},
    {"clwb", LEAF7_EBX, 24, OS_NONE},
    {"avx512cd", LEAF7_EBX, 28, OS_AVX512},
    {"sha", LEAF7_EBX, 29, OS_NONE},
    {"avx512bw", LEAF7_EBX, 30, OS_AVX512},
    {"avx512vl", LEAF7_EBX, 31, OS_AVX512},
    {"avx512vbmi", LEAF7_ECX, 1, OS_AVX512},
    {"avx512vbmi2", LEAF7_ECX, 6, OS_AVX512},
    {"gfni", LEAF7_ECX, 8, OS_NONE},
    {"vaes", LEAF7_ECX, 9, OS_AVX},
    {"vpclmulqdq", LEAF7_ECX, 10, OS_AVX},
    {"avx512vnni", LEAF7_ECX, 11, OS_AVX512},
    {"avx512bitalg", LEAF7_ECX, 12, OS_AVX512},
    {"avx512vpopcntdq", LEAF7_ECX, 14, OS_AVX512},
    {"avx512vp2intersect", LEAF7_EDX, 8, OS_AVX512},
    {"amx-bf16", LEAF7_EDX, 22, OS_AMX},
    {"avx512fp16", LEAF7_EDX, 23, OS_AVX512},
    {"amx-tile", LEAF7_EDX, 24, OS_AMX},
    {"amx-int8", LEAF7_EDX, 25, OS_AMX},
    {"avxvnni", LEAF7_1_EAX, 4, OS_AVX},
    {"avx512bf16", LEAF7_1_EAX, 5, OS_AVX512},
    {"amx-fp16", LEAF7_1_EAX, 21, OS_AMX},
    {"avxifma", LEAF7_1_EAX, 23, OS_AVX},
    {"lzcnt", EXT1_ECX, 5, OS_NONE},
    {"sse4a", EXT1_ECX, 6, OS_NONE},
    {"prfchw", EXT1_ECX, 8, OS_NONE},
    {"xop", EXT1_ECX, 11, OS_AVX},
    {"fma4", EXT1_ECX, 16, OS_AVX},
};

enum { NUM_KNOWN = sizeof(known_features) / sizeof(known_features[0]) };

static bool host_has[NUM_KNOWN];
static size_t known_length[NUM_KNOWN]; /* strlen of each name */
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static uint64_t read_xcr0(void) {
  uint32_t low, high;
  /* Not _xgetbv: that needs the file compiled with -mxsave. */
  __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
  return ((uint64_t)high << 32) | low;
}

static void detect_host(void) {
  uint32_t words[NUM_WORDS] = {0};
  unsigned eax, ebx, ecx, edx;
  unsigned max_leaf = __get_cpuid_max(0, NULL);
  if (max_leaf >= 1 && __get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
    words[LEAF1_ECX] = ecx;
    words[LEAF1_EDX] = edx;
  }
  if (max_leaf >= 7 && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
    unsigned max_subleaf = eax;
    words[LEAF7_EBX] = ebx;
    words[LEAF7_ECX] = ecx;
    words[LEAF7_EDX] = edx;
    if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx))
      words[LEAF7_1_EAX] = eax;
  }
  if (__get_cpuid_max(0x80000000u, NULL) >= 0x80000001u &&
      __get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx))
    words[EXT1_ECX] = ecx;

  /* XCR0 exists only when the OS enabled XSAVE (OSXSAVE, leaf 1 ECX 27). */
  uint64_t xcr0 = (words[LEAF1_ECX] >> 27 & 1) ? read_xcr0() : 0;
  const uint64_t avx_state = 0x6;          /* SSE, AVX */
  const uint64_t avx512_state = 0xe6;      /* + opmask, ZMM_Hi256, Hi16_ZMM */
  const uint64_t amx_state = 0x3ull << 17; /* XTILECFG, XTILEDATA */
  bool os_enabled[4] = {true, (xcr0 & avx_state) == avx_state,
                        (xcr0 & avx512_state) == avx512_state,
                        (xcr0 & amx_state) == amx_state};
  for (int i = 0; i < NUM_KNOWN; ++i) {
    const feature *f = &known_features[i];
    host_has[i] = (words[f->word] >> f->bit & 1) && os_enabled[f->state];
    known_length[i] = strlen(f->name);
  }
}

//===----------------------------------------------------------------------===//
// Feature strings already checked
//===----------------------------------------------------------------------===//

/* Copies of the feature strings that passed the check in this process (a
 * process meets few distinct ones; the copies live as long as it does). A
 * call compares its kernel's string with them, a few hundred bytes each,
 * rather than parsing it again: the parse took about 8 us a call on a
 * Zen 4, more than the kernel of a short decoding step. By content, not by
 * address: a library loaded where an unloaded one was may differ. */
enum { NUM_PASSED = 16 };
static _Atomic(char *) passed[NUM_PASSED];

static bool passed_before(const char *features) {
  for (int i = 0; i < NUM_PASSED; ++i) {
    const char *seen = atomic_load_explicit(&passed[i], memory_order_acquire);
    if (!seen)
      return false; /* slots fill in order */
    if (strcmp(seen, features) == 0)
      return true;
  }
  return false;
}

static void remember_passed(const char *features) {
  char *copy = strdup(features);
  if (!copy)
    return; /* the next call checks again */
  for (int i = 0; i < NUM_PASSED; ++i) {
    char *expected = NULL;
    if (atomic_compare_exchange_strong_explicit(&passed[i], &expected, copy,
                                                memory_order_acq_rel,
                                                memory_order_acquire))
      return;
    if (strcmp(expected, features) == 0)
      break; /* another thread remembered it first */
  }
  free(copy); /* a duplicate, or every slot taken */
}

//===----------------------------------------------------------------------===//
// AMX permission
//===----------------------------------------------------------------------===//

static int amx_permission_error; /* errno of the request, 0 when granted */
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void request_amx(void) {
#if defined(__linux__) && defined(SYS_arch_prctl)
  /* ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, from <asm/prctl.h>; spelled
   * out because older kernel headers lack them. */
  const int arch_req_xcomp_perm = 0x1023;
  const int xfeature_xtiledata = 18;
  if (syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) != 0)
    amx_permission_error = errno;
#endif
}

//===----------------------------------------------------------------------===//
// attn_kernel_check_cpu
//===----------------------------------------------------------------------===//

attn_status attn_kernel_check_cpu(const attn_kernel_desc *kernel) {
  if (!kernel)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  const char *features = kernel->target_features;
  if (!features || !*features || attn_kernel_device(kernel) != ATTN_DEVICE_CPU)
    return ATTN_OK;
  if (passed_before(features))
    return ATTN_OK;
  pthread_once(&host_once, detect_host);

  char missing[512] = "";
  size_t used = 0;
  bool needs_amx = false;
  for (const char *p = features; *p;) {
    const char *end = strchr(p, ',');
    size_t length = end ? (size_t)(end - p) : strlen(p);
    /* Only "+name" asks for a feature; "-name" turns one off. */
    if (length > 1 && p[0] == '+') {
      for (int i = 0; i < NUM_KNOWN; ++i) {
        const feature *f = &known_features[i];
        if (known_length[i] != length - 1 ||
            memcmp(f->name, p + 1, length - 1) != 0)
          continue;
        needs_amx |= f->state == OS_AMX;
        if (!host_has[i] && used < sizeof(missing)) {
          int n = snprintf(missing + used, sizeof(missing) - used, "%s%s",
                           used ? ", " : "", f->name);
          used += n > 0 ? (size_t)n : 0;
        }
      }
    }
    p += length;
    if (*p == ',')
      ++p;
  }
  const char *cpu = kernel->target_cpu ? kernel->target_cpu : "(unnamed)";
  if (used)
    return attn_fail(ATTN_ERROR_UNSUPPORTED_CPU,
                     "kernel '%s' was compiled for CPU '%s' and needs %s, "
                     "which this CPU (or its OS) does not support",
                     kernel->name, cpu, missing);
  if (needs_amx) {
    pthread_once(&amx_once, request_amx);
    if (amx_permission_error)
      return attn_fail(ATTN_ERROR_UNSUPPORTED_CPU,
                       "kernel '%s' needs AMX, which this CPU has but the OS "
                       "refused to enable for this process (arch_prctl "
                       "ARCH_REQ_XCOMP_PERM: %s)",
                       kernel->name, strerror(amx_permission_error));
  }
  remember_passed(features);
  return ATTN_OK;
}

#else /* not x86 */

attn_status attn_kernel_check_cpu(const attn_kernel_desc *kernel) {
  if (!kernel)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  const char *features = kernel->target_features;
  if (!features || !*features)
    return ATTN_OK;
  /* Without a way to test the features, running could crash the process. */
  return attn_fail(ATTN_ERROR_UNSUPPORTED_CPU,
                   "kernel '%s' was compiled for CPU '%s' with features '%s', "
                   "which this runtime cannot check on this architecture",
                   kernel->name,
                   kernel->target_cpu ? kernel->target_cpu : "(unnamed)",
                   features);
}

#endif
