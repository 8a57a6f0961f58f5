//===- RuntimeTest.cpp - Tests of the attn runtime ------------------------===//
//
// The runtime's C API end to end, against attn_fake_kernels (a hand-written
// kernel library) and kernels defined in this file: loading and refusing
// libraries, running kernels against a float64 reference of the spec, every
// argument check of attn_prepare with its message, the CPU feature check,
// the thread pool, unloading while a call runs, and the C++ wrapper.
//
//===----------------------------------------------------------------------===//

#include "attn/runtime.h"
#include "attn/runtime.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

const float kNaN = std::numeric_limits<float>::quiet_NaN();

/// The fake kernel library, loaded once for the whole test program.
attn_module *fakeModule() {
  static attn_module *module = [] {
    attn_module *m = nullptr;
    attn_status status = attn_module_load(ATTN_FAKE_KERNELS_PATH, &m);
    EXPECT_EQ(status, ATTN_OK) << attn_last_error();
    return m;
  }();
  return module;
}

const attn_kernel_desc *fakeKernel(const char *name) {
  const attn_kernel_desc *desc = nullptr;
  EXPECT_EQ(attn_module_find(fakeModule(), name, &desc), ATTN_OK)
      << attn_last_error();
  return desc;
}

/// Whether /proc/cpuinfo lists `flag` (Linux's names: "avx512f",
/// "amx_tile"): a second opinion, independent of the runtime's cpuid code.
bool hostHasFlag(const std::string &flag) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0)
      continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string word;
    while (words >> word)
      if (word == flag)
        return true;
    return false;
  }
  return false;
}

/// One call's tensors, contiguous [B, H, S, D], with random contents; the
/// outputs are poisoned with NaN so that an element the kernel fails to
/// write shows.
struct Problem {
  int64_t B, Hq, Hkv, Sq, Sk, D, Dv;
  std::vector<float> q, k, v, o, lse, bias;
  std::vector<uint8_t> keep;
  attn_tensor Q, K, V, O, L, M;

  Problem(const attn_kernel_desc *desc, int64_t B, int64_t Hq, int64_t Hkv,
          int64_t Sq, int64_t Sk, std::vector<int64_t> maskShape = {},
          unsigned seed = 1)
      : B(B), Hq(Hq), Hkv(Hkv), Sq(Sq), Sk(Sk), D(desc->head_dim),
        Dv(desc->value_dim) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
    auto fill = [&](std::vector<float> &buffer, int64_t n) {
      buffer.resize(static_cast<size_t>(n));
      for (float &x : buffer)
        x = uniform(rng);
    };
    fill(q, B * Hq * Sq * D);
    fill(k, B * Hkv * Sk * D);
    fill(v, B * Hkv * Sk * Dv);
    o.assign(static_cast<size_t>(B * Hq * Sq * Dv), kNaN);
    lse.assign(static_cast<size_t>(B * Hq * Sq), kNaN);
    int64_t qShape[4] = {B, Hq, Sq, D}, kShape[4] = {B, Hkv, Sk, D},
            vShape[4] = {B, Hkv, Sk, Dv}, oShape[4] = {B, Hq, Sq, Dv},
            lShape[3] = {B, Hq, Sq};
    Q = attn_tensor_contiguous(q.data(), ATTN_F32, 4, qShape);
    K = attn_tensor_contiguous(k.data(), ATTN_F32, 4, kShape);
    V = attn_tensor_contiguous(v.data(), ATTN_F32, 4, vShape);
    O = attn_tensor_contiguous(o.data(), ATTN_F32, 4, oShape);
    L = attn_tensor_contiguous(lse.data(), ATTN_F32, 3, lShape);
    M = attn_tensor{};
    if (desc->mask_kind != ATTN_MASK_NONE) {
      if (maskShape.empty())
        maskShape = {B, Hq, Sq, Sk};
      int64_t n = maskShape[0] * maskShape[1] * maskShape[2] * maskShape[3];
      if (desc->mask_kind == ATTN_MASK_BOOL) {
        // About a quarter masked out, and one row fully masked if there is
        // room, to reach the "no allowed position" case.
        std::bernoulli_distribution attend(0.75);
        keep.resize(static_cast<size_t>(n));
        for (uint8_t &x : keep)
          x = attend(rng);
        if (maskShape[2] > 1)
          std::fill(keep.begin(), keep.begin() + maskShape[3], 0);
        M = attn_tensor_contiguous(keep.data(), ATTN_BOOL, 4, maskShape.data());
      } else {
        fill(bias, n);
        // Some -inf: positions a bias excludes.
        for (size_t i = 0; i < bias.size(); i += 5)
          bias[i] = -std::numeric_limits<float>::infinity();
        M = attn_tensor_contiguous(bias.data(), ATTN_F32, 4, maskShape.data());
      }
    }
  }

  const attn_tensor *mask(const attn_kernel_desc *desc) const {
    return desc->mask_kind == ATTN_MASK_NONE ? nullptr : &M;
  }
  const attn_tensor *lseTensor(const attn_kernel_desc *desc) const {
    return desc->has_lse ? &L : nullptr;
  }
  attn_status run(const attn_kernel_desc *desc,
                  attn_thread_pool *pool = nullptr) {
    return attn_run(desc, &Q, &K, &V, mask(desc), &O, lseTensor(desc), pool);
  }
  attn_status prepare(const attn_kernel_desc *desc, attn_kernel_args *args) {
    return attn_prepare(desc, &Q, &K, &V, mask(desc), &O, lseTensor(desc),
                        args);
  }
};

/// Element [i0, i1, i2, i3] of a tensor; a dim of size 1 always reads
/// index 0 (how the spec broadcasts a mask).
template <typename T>
T at(const attn_tensor &t, int64_t i0, int64_t i1, int64_t i2, int64_t i3 = 0) {
  int64_t index[4] = {i0, i1, i2, i3}, offset = 0;
  for (int d = 0; d < t.rank; ++d)
    offset += (t.shape[d] == 1 ? 0 : index[d]) * t.strides[d];
  return static_cast<const T *>(t.data)[offset];
}

/// The spec in float64, straight from its formulas; written apart from
/// fake_kernels.c so that the two check each other.
struct Reference {
  std::vector<double> o, lse; // contiguous [B, Hq, Sq, Dv] and [B, Hq, Sq]
};

Reference reference(const attn_kernel_desc &k, const attn_tensor &Q,
                    const attn_tensor &K, const attn_tensor &V,
                    const attn_tensor *M) {
  const int64_t B = Q.shape[0], Hq = Q.shape[1], Sq = Q.shape[2],
                Hkv = K.shape[1], Sk = K.shape[2], D = k.head_dim,
                Dv = k.value_dim, G = Hq / Hkv;
  const int64_t off = k.alignment == ATTN_ALIGN_BOTTOM_RIGHT ? Sk - Sq : 0;
  Reference ref;
  ref.o.assign(static_cast<size_t>(B * Hq * Sq * Dv), 0.0);
  ref.lse.assign(static_cast<size_t>(B * Hq * Sq), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < Sq; ++i) {
        std::vector<double> s(static_cast<size_t>(Sk));
        std::vector<bool> allowed(static_cast<size_t>(Sk), true);
        for (int64_t j = 0; j < Sk; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += double(at<float>(Q, b, h, i, d)) *
                   double(at<float>(K, b, h / G, j, d));
          double x = double(k.scale) * dot;
          if (k.softcap > 0)
            x = k.softcap * std::tanh(x / k.softcap);
          if (k.mask_kind == ATTN_MASK_BIAS)
            x += at<float>(*M, b, h, i, j);
          if (k.mask_kind == ATTN_MASK_BOOL && !at<uint8_t>(*M, b, h, i, j))
            allowed[j] = false;
          if (k.causal && j > i + off)
            allowed[j] = false;
          if (k.window_left != ATTN_UNBOUNDED && j < i + off - k.window_left)
            allowed[j] = false;
          if (k.window_right != ATTN_UNBOUNDED && j > i + off + k.window_right)
            allowed[j] = false;
          if (x == -INFINITY)
            allowed[j] = false;
          s[j] = x;
        }
        double m = -INFINITY;
        for (int64_t j = 0; j < Sk; ++j)
          if (allowed[j])
            m = std::max(m, s[j]);
        size_t row = static_cast<size_t>((b * Hq + h) * Sq + i);
        if (m == -INFINITY) {
          ref.lse[row] = -INFINITY; // O stays 0
          continue;
        }
        double l = 0;
        for (int64_t j = 0; j < Sk; ++j)
          if (allowed[j])
            l += std::exp(s[j] - m);
        for (int64_t e = 0; e < Dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < Sk; ++j)
            if (allowed[j])
              acc += std::exp(s[j] - m) / l * at<float>(V, b, h / G, j, e);
          ref.o[row * Dv + e] = acc;
        }
        ref.lse[row] = m + std::log(l);
      }
  return ref;
}

/// The spec's accuracy measure, max|O - ref| / max|ref| <= 1e-5 for f32, and
/// the LSE to the same relative accuracy (or exactly -inf).
void expectMatchesReference(const attn_kernel_desc *desc, const Problem &p) {
  Reference ref = reference(*desc, p.Q, p.K, p.V, p.mask(desc));
  double maxErr = 0, maxRef = 0;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.Hq; ++h)
      for (int64_t i = 0; i < p.Sq; ++i) {
        size_t row = static_cast<size_t>((b * p.Hq + h) * p.Sq + i);
        for (int64_t e = 0; e < p.Dv; ++e) {
          float got = at<float>(p.O, b, h, i, e);
          ASSERT_FALSE(std::isnan(got)) << "O[" << b << "," << h << "," << i
                                        << "," << e << "] not written";
          maxErr = std::max(maxErr, std::abs(got - ref.o[row * p.Dv + e]));
          maxRef = std::max(maxRef, std::abs(ref.o[row * p.Dv + e]));
        }
        if (desc->has_lse) {
          float got = at<float>(p.L, b, h, i);
          if (ref.lse[row] == -INFINITY)
            EXPECT_EQ(got, -INFINITY) << "row " << row;
          else
            EXPECT_NEAR(got, ref.lse[row],
                        1e-5 * std::max(1.0, std::abs(ref.lse[row])))
                << "row " << row;
        }
      }
  EXPECT_LE(maxErr, 1e-5 * std::max(maxRef, 1e-30))
      << "max|O - ref| = " << maxErr << ", max|ref| = " << maxRef;
}

/// attn_prepare refuses with `status` and a message containing `text`, and
/// so does attn_run, which then writes nothing.
#define EXPECT_REFUSED(problem, desc, status, text)                            \
  do {                                                                         \
    attn_kernel_args args_;                                                    \
    EXPECT_EQ(attn_prepare((desc), &(problem).Q, &(problem).K, &(problem).V,   \
                           (problem).mask(desc), &(problem).O,                 \
                           (problem).lseTensor(desc), &args_),                 \
              (status));                                                       \
    EXPECT_NE(std::string(attn_last_error()).find(text), std::string::npos)    \
        << "message: " << attn_last_error();                                   \
    EXPECT_EQ((problem).run(desc), (status));                                  \
    EXPECT_NE(std::string(attn_last_error()).find(text), std::string::npos)    \
        << "message: " << attn_last_error();                                   \
  } while (0)

std::string tempDir() {
  char pattern[] = "/tmp/attn_runtime_test_XXXXXX";
  const char *dir = mkdtemp(pattern);
  EXPECT_NE(dir, nullptr);
  return dir ? dir : "/tmp";
}

//===----------------------------------------------------------------------===//
// Loading libraries
//===----------------------------------------------------------------------===//

TEST(Module, LoadsLibraryAndListsKernels) {
  attn_module *module = nullptr;
  ASSERT_EQ(attn_module_load(ATTN_FAKE_KERNELS_PATH, &module), ATTN_OK)
      << attn_last_error();
  ASSERT_NE(module, nullptr);
  std::vector<std::string> names;
  for (int32_t i = 0; i < attn_module_num_kernels(module); ++i)
    names.push_back(attn_module_kernel(module, i)->name);
  EXPECT_EQ(names, (std::vector<std::string>{"fake_plain", "fake_causal_mask",
                                             "fake_bias_window", "fake_static",
                                             "fake_avx512", "fake_amx",
                                             "fake_sinks"}));
  EXPECT_EQ(attn_module_kernel(module, -1), nullptr);
  EXPECT_EQ(attn_module_kernel(module, attn_module_num_kernels(module)),
            nullptr);
  const attn_kernel_desc *desc = nullptr;
  ASSERT_EQ(attn_module_find(module, "fake_bias_window", &desc), ATTN_OK);
  EXPECT_EQ(desc, attn_module_kernel(module, 2));
  EXPECT_EQ(desc->value_dim, 3);
  EXPECT_EQ(attn_module_unload(module), ATTN_OK);
}

TEST(Module, LoadRefusesFileThatIsNotALibrary) {
  std::string dir = tempDir(), path = dir + "/not_a_library.so";
  std::ofstream(path) << "this is a text file, not ELF\n";
  attn_module *module = reinterpret_cast<attn_module *>(1);
  EXPECT_EQ(attn_module_load(path.c_str(), &module), ATTN_ERROR_LOAD);
  EXPECT_EQ(module, nullptr);
  std::string message = attn_last_error();
  EXPECT_NE(message.find("cannot load kernel library"), std::string::npos)
      << message;
  EXPECT_NE(message.find(path), std::string::npos) << message;
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

TEST(Module, LoadRefusesMissingFile) {
  attn_module *module = nullptr;
  EXPECT_EQ(attn_module_load("/nonexistent/libkernels.so", &module),
            ATTN_ERROR_LOAD);
  EXPECT_NE(std::string(attn_last_error()).find("/nonexistent/libkernels.so"),
            std::string::npos)
      << attn_last_error();
}

TEST(Module, LoadRefusesForeignLibrary) {
  attn_module *module = nullptr;
  EXPECT_EQ(attn_module_load("libm.so.6", &module), ATTN_ERROR_LOAD);
  EXPECT_EQ(module, nullptr);
  EXPECT_NE(std::string(attn_last_error()).find("not an attn kernel library"),
            std::string::npos)
      << attn_last_error();
  EXPECT_NE(std::string(attn_last_error()).find("attn_library_v1"),
            std::string::npos)
      << attn_last_error();
}

TEST(Module, LoadRefusesTheRuntimeItself) {
  attn_module *module = nullptr;
  EXPECT_EQ(attn_module_load(ATTN_RUNTIME_PATH, &module), ATTN_ERROR_LOAD);
  EXPECT_NE(std::string(attn_last_error()).find("not an attn kernel library"),
            std::string::npos)
      << attn_last_error();
}

TEST(Module, FindUnknownNameIsNotFound) {
  const attn_kernel_desc *desc = fakeKernel("fake_plain");
  EXPECT_EQ(attn_module_find(fakeModule(), "fake_nope", &desc),
            ATTN_ERROR_NOT_FOUND);
  EXPECT_EQ(desc, nullptr);
  std::string message = attn_last_error();
  EXPECT_NE(message.find("no kernel named 'fake_nope'"), std::string::npos)
      << message;
  EXPECT_NE(message.find("'fake_plain'"), std::string::npos) << message;
}

TEST(Module, UnloadNullIsNoOp) {
  EXPECT_EQ(attn_module_unload(nullptr), ATTN_OK);
}

/// A library built in this program, to test attn_module_from_library and the
/// validation of libraries that dlopen cannot produce.
struct LinkedLibrary {
  attn_kernel_desc desc;
  const attn_kernel_desc *kernels[1];
  attn_library library;

  static int64_t oneItem(const attn_kernel_args *) { return 1; }
  static void nothing(const attn_kernel_args *, int64_t, int64_t) {}

  LinkedLibrary() {
    desc = *fakeKernel("fake_plain");
    desc.name = "linked";
    desc.work_items = oneItem;
    desc.run = nothing;
    kernels[0] = &desc;
    library = attn_library{ATTN_LIBRARY_MAGIC, ATTN_KERNEL_ABI_VERSION, 1,
                           kernels, "test"};
  }
  attn_status load(attn_module **module) {
    return attn_module_from_library(&library, module);
  }
};

TEST(Module, FromLibraryRegistersLinkedKernels) {
  LinkedLibrary linked;
  attn_module *module = nullptr;
  ASSERT_EQ(linked.load(&module), ATTN_OK) << attn_last_error();
  const attn_kernel_desc *desc = nullptr;
  ASSERT_EQ(attn_module_find(module, "linked", &desc), ATTN_OK);
  EXPECT_EQ(desc, &linked.desc);
  EXPECT_EQ(attn_module_unload(module), ATTN_OK);
}

TEST(Module, FromLibraryRefusesBadMagic) {
  LinkedLibrary linked;
  linked.library.magic = 0x1234;
  attn_module *module = nullptr;
  EXPECT_EQ(linked.load(&module), ATTN_ERROR_LOAD);
  EXPECT_NE(std::string(attn_last_error()).find("magic"), std::string::npos)
      << attn_last_error();
}

TEST(Module, FromLibraryRefusesOtherAbiVersion) {
  LinkedLibrary linked;
  linked.library.abi_version = ATTN_KERNEL_ABI_VERSION + 1;
  attn_module *module = nullptr;
  EXPECT_EQ(linked.load(&module), ATTN_ERROR_LOAD);
  EXPECT_NE(std::string(attn_last_error()).find("ABI version 2"),
            std::string::npos)
      << attn_last_error();
}

TEST(Module, FromLibraryRefusesKernelOfOtherAbiVersion) {
  LinkedLibrary linked;
  linked.desc.abi_version = 7;
  attn_module *module = nullptr;
  EXPECT_EQ(linked.load(&module), ATTN_ERROR_LOAD);
  EXPECT_NE(std::string(attn_last_error()).find("kernel 0 has ABI version 7"),
            std::string::npos)
      << attn_last_error();
}

TEST(Module, FromLibraryRefusesShortDescriptor) {
  LinkedLibrary linked;
  linked.desc.struct_size = 16;
  attn_module *module = nullptr;
  EXPECT_EQ(linked.load(&module), ATTN_ERROR_LOAD);
  EXPECT_NE(std::string(attn_last_error()).find("16-byte descriptor"),
            std::string::npos)
      << attn_last_error();
}

TEST(Module, FromLibraryRefusesMissingEntryPoints) {
  LinkedLibrary linked;
  linked.desc.run = nullptr;
  attn_module *module = nullptr;
  EXPECT_EQ(linked.load(&module), ATTN_ERROR_LOAD);
  EXPECT_NE(std::string(attn_last_error()).find("NULL run function"),
            std::string::npos)
      << attn_last_error();
  linked.desc.run = LinkedLibrary::nothing;
  linked.desc.name = nullptr;
  EXPECT_EQ(linked.load(&module), ATTN_ERROR_LOAD);
  EXPECT_NE(std::string(attn_last_error()).find("has no name"),
            std::string::npos)
      << attn_last_error();
}

/// A key split's phases that record what the runtime asks of them: the
/// merge must start after every partial item, with the same workspace.
struct SplitRecorder {
  static inline std::atomic<int64_t> partialItems{0}, mergeItems{0};
  static inline std::atomic<bool> mergeBeforePartial{false};
  static inline std::atomic<float *> workspace{nullptr};
  static inline std::atomic<int64_t> splitsSeen{0};
  static int64_t partialCount(const attn_kernel_args *, int64_t splits) {
    return 3 * splits;
  }
  static int64_t mergeCount(const attn_kernel_args *, int64_t) { return 3; }
  static void partial(const attn_kernel_args *args, int64_t splits, float *ws,
                      int64_t begin, int64_t end) {
    workspace = ws;
    splitsSeen = splits;
    // The whole workspace is the caller's: each item touches its own float
    // counted from the end (items run concurrently: no two share one).
    int64_t floats = ATTN_SPLIT_WORKSPACE_FLOATS(args, 4, splits); // Dv = 4
    for (int64_t item = begin; item < end; ++item)
      ws[floats - 1 - item] = 1.0f;
    partialItems += end - begin;
  }
  static void merge(const attn_kernel_args *, int64_t, float *ws, int64_t begin,
                    int64_t end) {
    if (partialItems != 3 * splitsSeen || ws != workspace)
      mergeBeforePartial = true;
    mergeItems += end - begin;
  }
};

TEST(Module, FromLibraryRefusesPartOfAKeySplit) {
  LinkedLibrary linked;
  linked.desc.partial_run = SplitRecorder::partial;
  attn_module *module = nullptr;
  EXPECT_EQ(linked.load(&module), ATTN_ERROR_LOAD);
  EXPECT_NE(std::string(attn_last_error())
                .find("has 1 of the key split's 4 functions"),
            std::string::npos)
      << attn_last_error();
}

TEST(Run, KeySplitRunsPartialThenMergeOnOneWorkspace) {
  const attn_kernel_desc *plain = fakeKernel("fake_plain");
  attn_kernel_desc desc = *plain;
  EXPECT_FALSE(attn_kernel_has_key_split(&desc));
  desc.partial_work_items = SplitRecorder::partialCount;
  desc.partial_run = SplitRecorder::partial;
  desc.merge_work_items = SplitRecorder::mergeCount;
  desc.merge_run = SplitRecorder::merge;
  EXPECT_TRUE(attn_kernel_has_key_split(&desc));
  Problem p{plain, 1, 2, 2, 1, 700};
  attn_thread_pool *pool = nullptr;
  ASSERT_EQ(attn_thread_pool_create(4, &pool), ATTN_OK);
  ASSERT_EQ(
      attn_run_split(&desc, &p.Q, &p.K, &p.V, nullptr, &p.O, &p.L, 5, pool),
      ATTN_OK)
      << attn_last_error();
  EXPECT_EQ(SplitRecorder::splitsSeen, 5);
  EXPECT_EQ(SplitRecorder::partialItems, 15);
  EXPECT_EQ(SplitRecorder::mergeItems, 3);
  EXPECT_FALSE(SplitRecorder::mergeBeforePartial);
  attn_thread_pool_destroy(pool);
}

TEST(Run, KeySplitsAreRefusedWhereTheyCannotRun) {
  const attn_kernel_desc *plain = fakeKernel("fake_plain");
  Problem p{plain, 1, 2, 2, 1, 9};
  auto runSplit = [&](int64_t splits) {
    return attn_run_split(plain, &p.Q, &p.K, &p.V, nullptr, &p.O, &p.L, splits,
                          nullptr);
  };
  for (auto [splits, text] :
       {std::pair<int64_t, const char *>{-1, "key_splits is -1"},
        {2, "has no key split"}}) {
    EXPECT_EQ(runSplit(splits), ATTN_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(attn_last_error()).find(text), std::string::npos)
        << attn_last_error();
  }
  // 0 and 1 run it whole.
  EXPECT_EQ(runSplit(1), ATTN_OK);
  EXPECT_EQ(runSplit(0), ATTN_OK);
}

//===----------------------------------------------------------------------===//
// GPU kernels (what the runtime checks and says without a GPU)
//===----------------------------------------------------------------------===//

/// A CUDA kernel's descriptor. Its image is not real PTX: without a GPU the
/// runtime never gets as far as loading it.
struct LinkedGpuLibrary : LinkedLibrary {
  static constexpr char kImage[] = "// not PTX";
  attn_gpu_kernel gpu{"sm_80",  ATTN_GPU_PTX, kImage, sizeof(kImage),
                      "linked", 128,          64,     1024};
  LinkedGpuLibrary() {
    desc.work_items = nullptr;
    desc.run = nullptr;
    desc.device = ATTN_DEVICE_CUDA;
    desc.gpu = &gpu;
  }
};

static bool gpuPresent() {
  return attn_cuda_device(nullptr, 0, nullptr, nullptr) == ATTN_OK;
}

TEST(Gpu, KernelLoadsAndReportsItsDevice) {
  LinkedGpuLibrary linked;
  attn_module *module = nullptr;
  ASSERT_EQ(linked.load(&module), ATTN_OK) << attn_last_error();
  EXPECT_EQ(attn_kernel_device(&linked.desc), ATTN_DEVICE_CUDA);
  // Nothing about the host CPU stops a GPU kernel.
  EXPECT_EQ(attn_kernel_check_cpu(&linked.desc), ATTN_OK);
  EXPECT_EQ(attn_module_unload(module), ATTN_OK);
  EXPECT_EQ(attn_kernel_device(fakeKernel("fake_plain")), ATTN_DEVICE_CPU);
}

/// The GPU kernels of the other kinds the GPU lowering makes (backward,
/// linear, additive) load without CPU entry points; a kind with CPU
/// kernels only (the weights, say) is refused as a GPU kernel.
TEST(Gpu, KernelsOfEveryGpuKindLoad) {
  for (attn_kernel_kind kind :
       {ATTN_KERNEL_BACKWARD, ATTN_KERNEL_LINEAR, ATTN_KERNEL_ADDITIVE}) {
    LinkedGpuLibrary linked;
    linked.desc.kind = kind;
    linked.desc.query_dim = linked.desc.head_dim;
    linked.desc.additive_dim = 8;
    attn_module *module = nullptr;
    ASSERT_EQ(linked.load(&module), ATTN_OK)
        << "kind " << kind << ": " << attn_last_error();
    EXPECT_EQ(attn_module_unload(module), ATTN_OK);
  }
  LinkedGpuLibrary weights;
  weights.desc.kind = ATTN_KERNEL_WEIGHTS;
  attn_module *module = nullptr;
  EXPECT_EQ(weights.load(&module), ATTN_ERROR_LOAD);
  EXPECT_NE(std::string(attn_last_error()).find("has CPU kernels only"),
            std::string::npos)
      << attn_last_error();
  // An additive GPU kernel still needs its dims.
  LinkedGpuLibrary additive;
  additive.desc.kind = ATTN_KERNEL_ADDITIVE;
  additive.desc.additive_dim = 0;
  EXPECT_EQ(additive.load(&module), ATTN_ERROR_LOAD);
  EXPECT_NE(std::string(attn_last_error()).find("lacks the fields of its kind"),
            std::string::npos)
      << attn_last_error();
}

TEST(Gpu, OlderDescriptorWithoutDeviceFieldIsACpuKernel) {
  LinkedLibrary linked;
  linked.desc.struct_size = offsetof(attn_kernel_desc, device);
  attn_module *module = nullptr;
  ASSERT_EQ(linked.load(&module), ATTN_OK) << attn_last_error();
  EXPECT_EQ(attn_kernel_device(&linked.desc), ATTN_DEVICE_CPU);
  EXPECT_EQ(attn_module_unload(module), ATTN_OK);
}

TEST(Gpu, RefusesBrokenGpuDescriptors) {
  attn_module *module = nullptr;
  {
    LinkedGpuLibrary linked;
    linked.desc.gpu = nullptr;
    EXPECT_EQ(linked.load(&module), ATTN_ERROR_LOAD);
    EXPECT_NE(std::string(attn_last_error()).find("no attn_gpu_kernel"),
              std::string::npos)
        << attn_last_error();
  }
  {
    LinkedGpuLibrary linked;
    linked.gpu.image = nullptr;
    EXPECT_EQ(linked.load(&module), ATTN_ERROR_LOAD);
    EXPECT_NE(std::string(attn_last_error()).find("no image"),
              std::string::npos)
        << attn_last_error();
  }
  {
    LinkedGpuLibrary linked;
    linked.gpu.block_threads = 2048;
    EXPECT_EQ(linked.load(&module), ATTN_ERROR_LOAD);
    EXPECT_NE(std::string(attn_last_error()).find("invalid launch shape"),
              std::string::npos)
        << attn_last_error();
  }
  {
    LinkedGpuLibrary linked;
    linked.desc.device = 9;
    EXPECT_EQ(linked.load(&module), ATTN_ERROR_LOAD);
    EXPECT_NE(std::string(attn_last_error()).find("unknown device 9"),
              std::string::npos)
        << attn_last_error();
  }
}

TEST(Gpu, RefusesPtxWithoutItsNul) {
  LinkedGpuLibrary linked;
  linked.gpu.image_size = sizeof(LinkedGpuLibrary::kImage) - 1;
  attn_module *module = nullptr;
  EXPECT_EQ(linked.load(&module), ATTN_ERROR_LOAD);
  EXPECT_NE(std::string(attn_last_error()).find("does not end in a NUL"),
            std::string::npos)
      << attn_last_error();
}

/// The largest parameter list (a mask and the LSE) fits the arrays
/// ATTN_GPU_MAX_PARAMS sizes.
TEST(Gpu, KernelParamsFitTheirArrays) {
  LinkedGpuLibrary linked;
  linked.desc.mask_kind = ATTN_MASK_BOOL;
  linked.desc.has_lse = 1;
  attn_kernel_args args{};
  args.batch = args.heads_q = args.heads_kv = 1;
  args.seq_q = args.seq_k = 4;
  uint64_t values[ATTN_GPU_MAX_PARAMS + 8];
  void *pointers[ATTN_GPU_MAX_PARAMS + 8];
  EXPECT_EQ(attn_gpu_kernel_params(&linked.desc, &args, values, pointers),
            5 * 13 + 11);
  EXPECT_LE(5 * 13 + 11, ATTN_GPU_MAX_PARAMS);
}

/// A kernel's captured tensors come after the mask and before the output,
/// each as its own rank's descriptor; the most of them fit the arrays.
TEST(Gpu, KernelParamsPlaceTheCapturesAfterTheMask) {
  LinkedGpuLibrary linked;
  linked.desc.mask_kind = ATTN_MASK_BOOL;
  linked.desc.has_lse = 1;
  attn_capture_desc descs[ATTN_MAX_CAPTURES];
  for (attn_capture_desc &d : descs)
    d = {ATTN_F32, 4, {-1, -1, -1, -1}};
  descs[0] = {ATTN_F32, 1, {-1, -1, -1, -1}};
  descs[1] = {ATTN_I32, 2, {-1, -1, -1, -1}};
  linked.desc.captures = descs;
  linked.desc.num_captures = 2;
  attn_kernel_args args{};
  args.batch = args.heads_q = args.heads_kv = 1;
  args.seq_q = args.seq_k = 4;
  float slopes[8];
  int32_t ids[3 * 5];
  args.captures[0] = {slopes, {8}, {1}};
  args.captures[1] = {ids, {3, 5}, {5, 1}};
  float output[64];
  args.output = output;
  uint64_t values[ATTN_GPU_MAX_PARAMS];
  void *pointers[ATTN_GPU_MAX_PARAMS];
  int n = attn_gpu_kernel_params(&linked.desc, &args, values, pointers);
  EXPECT_EQ(n, 4 * 13 + (5 + 2) + (5 + 4) + 13 + 11);
  // Capture 0 at 52: pointer twice, offset 0, span 8, stride 1, size, stride.
  const uint64_t slopesParams[] = {(uint64_t)(uintptr_t)slopes,
                                   (uint64_t)(uintptr_t)slopes, 0, 8, 1, 8, 1};
  for (int i = 0; i < 7; ++i)
    EXPECT_EQ(values[52 + i], slopesParams[i]) << "parameter " << 52 + i;
  // Capture 1 at 59: span (3 - 1) * 5 + (5 - 1) + 1 = 15, sizes, strides.
  const uint64_t idsParams[] = {(uint64_t)(uintptr_t)ids,
                                (uint64_t)(uintptr_t)ids, 0, 15, 1, 3, 5, 5, 1};
  for (int i = 0; i < 9; ++i)
    EXPECT_EQ(values[59 + i], idsParams[i]) << "parameter " << 59 + i;
  // Then the output.
  EXPECT_EQ(values[68], (uint64_t)(uintptr_t)output);
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(pointers[i], &values[i]);

  linked.desc.num_captures = ATTN_MAX_CAPTURES;
  for (int c = 2; c < ATTN_MAX_CAPTURES; ++c)
    args.captures[c] = {slopes, {1, 1, 1, 1}, {0, 0, 0, 0}};
  EXPECT_EQ(attn_gpu_kernel_params(&linked.desc, &args, values, pointers),
            4 * 13 + (5 + 2) + (5 + 4) + (ATTN_MAX_CAPTURES - 2) * 13 + 13 +
                11);
  EXPECT_LE(4 * 13 + ATTN_MAX_CAPTURES * 13 + 13 + 11, ATTN_GPU_MAX_PARAMS);
}

/// A linear attention kernel's parameters: Q, K, V, [S0, z0], O, [S1, z1],
/// in the order of its function (the state with has_state).
TEST(Gpu, LinearKernelParamsFollowItsFunction) {
  LinkedGpuLibrary linked;
  linked.desc.kind = ATTN_KERNEL_LINEAR;
  linked.desc.head_dim = 8;
  linked.desc.value_dim = 4;
  attn_linear_args args{};
  args.batch = 2;
  args.heads_q = 6;
  args.heads_kv = 3;
  args.seq_q = args.seq_k = 5;
  float q, k, v, o, s0, z0, s1, z1;
  args.query = &q;
  args.key = &k;
  args.value = &v;
  args.output = &o;
  const int64_t dense[4] = {6 * 5 * 4, 5 * 4, 4, 1};
  std::copy(dense, dense + 4, args.output_strides);
  uint64_t values[ATTN_GPU_MAX_PARAMS];
  void *pointers[ATTN_GPU_MAX_PARAMS];
  EXPECT_EQ(
      attn_gpu_linear_kernel_params(&linked.desc, &args, values, pointers),
      4 * 13);
  // O at 39: pointer twice, offset 0, span, stride 1, [B, Hq, Sq, Dv].
  const uint64_t outputParams[] = {(uint64_t)(uintptr_t)&o,
                                   (uint64_t)(uintptr_t)&o,
                                   0,
                                   2 * 6 * 5 * 4,
                                   1,
                                   2,
                                   6,
                                   5,
                                   4,
                                   120,
                                   20,
                                   4,
                                   1};
  for (int i = 0; i < 13; ++i)
    EXPECT_EQ(values[39 + i], outputParams[i]) << "parameter " << 39 + i;

  linked.desc.has_state = 1;
  args.initial_state = &s0;
  args.initial_normalizer = &z0;
  args.final_state = &s1;
  args.final_normalizer = &z1;
  int n = attn_gpu_linear_kernel_params(&linked.desc, &args, values, pointers);
  EXPECT_EQ(n, 3 * 13 + (13 + 11) + 13 + (13 + 11));
  // S0 [B, Hkv, D, Dv] at 39, z0 [B, Hkv, D] at 52, O at 63, S1 at 76, z1
  // at 89.
  EXPECT_EQ(values[39], (uint64_t)(uintptr_t)&s0);
  EXPECT_EQ(values[39 + 5], 2u);
  EXPECT_EQ(values[39 + 6], 3u);
  EXPECT_EQ(values[39 + 7], 8u);
  EXPECT_EQ(values[39 + 8], 4u);
  EXPECT_EQ(values[52], (uint64_t)(uintptr_t)&z0);
  EXPECT_EQ(values[52 + 7], 8u);
  EXPECT_EQ(values[63], (uint64_t)(uintptr_t)&o);
  EXPECT_EQ(values[76], (uint64_t)(uintptr_t)&s1);
  EXPECT_EQ(values[89], (uint64_t)(uintptr_t)&z1);
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(pointers[i], &values[i]);
  EXPECT_LE(n, ATTN_GPU_MAX_PARAMS);
}

/// An additive attention kernel's parameters: query, keys, values, W_q,
/// W_k, v, [mask], O, [weights] (ranks 3, 3, 3, 2, 2, 1, 3, 3, 3).
TEST(Gpu, AdditiveKernelParamsFollowItsFunction) {
  LinkedGpuLibrary linked;
  linked.desc.kind = ATTN_KERNEL_ADDITIVE;
  linked.desc.query_dim = 6;
  linked.desc.head_dim = 5;
  linked.desc.value_dim = 4;
  linked.desc.additive_dim = 3;
  attn_additive_args args{};
  args.batch = 2;
  args.seq_q = 7;
  args.seq_k = 9;
  float mask, weights, output;
  args.output = &output;
  uint64_t values[ATTN_GPU_MAX_PARAMS];
  void *pointers[ATTN_GPU_MAX_PARAMS];
  EXPECT_EQ(
      attn_gpu_additive_kernel_params(&linked.desc, &args, values, pointers),
      3 * 11 + 2 * 9 + 7 + 11);
  EXPECT_EQ(values[58], (uint64_t)(uintptr_t)&output);
  linked.desc.mask_kind = ATTN_MASK_BOOL;
  linked.desc.has_weights = 1;
  args.mask = &mask;
  args.weights = &weights;
  const int64_t broadcast[3] = {0, 0, 1}; // [1, 1, Sk] over [B, Sq, Sk]
  std::copy(broadcast, broadcast + 3, args.mask_strides);
  int n =
      attn_gpu_additive_kernel_params(&linked.desc, &args, values, pointers);
  EXPECT_EQ(n, 3 * 11 + 2 * 9 + 7 + 3 * 11);
  // The mask at 58: [B, Sq, Sk] with its strides (span Sk); O at 69,
  // the weights at 80.
  const uint64_t maskParams[] = {(uint64_t)(uintptr_t)&mask,
                                 (uint64_t)(uintptr_t)&mask,
                                 0,
                                 9,
                                 1,
                                 2,
                                 7,
                                 9,
                                 0,
                                 0,
                                 1};
  for (int i = 0; i < 11; ++i)
    EXPECT_EQ(values[58 + i], maskParams[i]) << "parameter " << 58 + i;
  EXPECT_EQ(values[69], (uint64_t)(uintptr_t)&output);
  EXPECT_EQ(values[80], (uint64_t)(uintptr_t)&weights);
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(pointers[i], &values[i]);
}

/// attn_run_linear launches a GPU linear kernel; the normalizer cannot be
/// updated in place when a head's value columns take several blocks.
TEST(Gpu, LinearKernelRunsOnTheGpuOnly) {
  LinkedGpuLibrary linked;
  linked.desc.kind = ATTN_KERNEL_LINEAR;
  linked.desc.dtype = ATTN_F32;
  linked.desc.head_dim = 4;
  linked.desc.value_dim = 64; // two blocks of 32 columns
  linked.desc.has_state = 1;
  linked.gpu.block_threads = 256;
  linked.gpu.block_rows = 32;
  static float q[2 * 3 * 4], v[2 * 3 * 64], o[2 * 3 * 64];
  static float s0[2 * 4 * 64], z0[2 * 4], s1[2 * 4 * 64], z1[2 * 4];
  const int64_t qShape[4] = {1, 2, 3, 4}, vShape[4] = {1, 2, 3, 64};
  const int64_t sShape[4] = {1, 2, 4, 64}, zShape[3] = {1, 2, 4};
  attn_tensor query = attn_tensor_contiguous(q, ATTN_F32, 4, qShape);
  attn_tensor value = attn_tensor_contiguous(v, ATTN_F32, 4, vShape);
  attn_tensor output = attn_tensor_contiguous(o, ATTN_F32, 4, vShape);
  attn_tensor state0 = attn_tensor_contiguous(s0, ATTN_F32, 4, sShape);
  attn_tensor norm0 = attn_tensor_contiguous(z0, ATTN_F32, 3, zShape);
  attn_tensor state1 = attn_tensor_contiguous(s1, ATTN_F32, 4, sShape);
  attn_tensor norm1 = attn_tensor_contiguous(z1, ATTN_F32, 3, zShape);
  EXPECT_EQ(attn_run_linear(&linked.desc, &query, &query, &value, &state0,
                            &norm0, &output, &state1, &norm0, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attn_last_error()).find("in place"), std::string::npos)
      << attn_last_error();
  if (gpuPresent())
    return; // host buffers: not for a real launch
  EXPECT_EQ(attn_run_linear(&linked.desc, &query, &query, &value, &state0,
                            &norm0, &output, &state1, &norm1, nullptr),
            ATTN_ERROR_NO_DEVICE);
  EXPECT_NE(std::string(attn_last_error()).find("no GPU"), std::string::npos)
      << attn_last_error();
}

TEST(Gpu, WithoutAGpuEveryCallSaysSo) {
  if (gpuPresent())
    GTEST_SKIP() << "a GPU is present";
  void *pointer = reinterpret_cast<void *>(0x1);
  EXPECT_EQ(attn_cuda_malloc(64, &pointer), ATTN_ERROR_NO_DEVICE);
  EXPECT_EQ(pointer, nullptr);
  EXPECT_NE(std::string(attn_last_error()).find("no GPU"), std::string::npos)
      << attn_last_error();
  char host[8], device[8];
  EXPECT_EQ(attn_cuda_copy(device, host, 8, ATTN_COPY_TO_DEVICE),
            ATTN_ERROR_NO_DEVICE);

  // A well-formed call of a GPU kernel passes the argument checks and then
  // stops at the missing device.
  LinkedGpuLibrary linked;
  attn_module *module = nullptr;
  ASSERT_EQ(linked.load(&module), ATTN_OK) << attn_last_error();
  Problem p(&linked.desc, 1, 2, 2, 5, 7);
  EXPECT_EQ(p.run(&linked.desc), ATTN_ERROR_NO_DEVICE);
  EXPECT_NE(std::string(attn_last_error()).find("no GPU"), std::string::npos)
      << attn_last_error();
  EXPECT_EQ(attn_module_unload(module), ATTN_OK);
}

//===----------------------------------------------------------------------===//
// Running against the reference
//===----------------------------------------------------------------------===//

TEST(Run, PlainMatchesReference) {
  const attn_kernel_desc *desc = fakeKernel("fake_plain");
  Problem p(desc, /*B=*/2, /*Hq=*/3, /*Hkv=*/3, /*Sq=*/5, /*Sk=*/7);
  ASSERT_EQ(p.run(desc), ATTN_OK) << attn_last_error();
  expectMatchesReference(desc, p);
}

TEST(Run, PlainOnPoolMatchesReference) {
  const attn_kernel_desc *desc = fakeKernel("fake_plain");
  attn_thread_pool *pool = nullptr;
  ASSERT_EQ(attn_thread_pool_create(3, &pool), ATTN_OK);
  Problem p(desc, 3, 4, 2, 33, 17);
  ASSERT_EQ(p.run(desc, pool), ATTN_OK) << attn_last_error();
  expectMatchesReference(desc, p);
  attn_thread_pool_destroy(pool);
}

TEST(Run, CausalBoolMaskBroadcastGqaMatchesReference) {
  const attn_kernel_desc *desc = fakeKernel("fake_causal_mask");
  // The mask broadcasts over B and H; GQA with G = 3.
  Problem p(desc, 2, 6, 2, 9, 9, {1, 1, 9, 9});
  ASSERT_EQ(p.run(desc), ATTN_OK) << attn_last_error();
  expectMatchesReference(desc, p);
  // Row 0 is fully masked by construction: O = 0, never NaN.
  for (int64_t e = 0; e < p.Dv; ++e)
    EXPECT_EQ(at<float>(p.O, 1, 5, 0, e), 0.0f);
}

TEST(Run, BiasWindowSoftcapCrossAttentionMatchesReference) {
  const attn_kernel_desc *desc = fakeKernel("fake_bias_window");
  // Bias broadcast over B; Sq != Sk with bottom-right alignment; D != Dv.
  Problem p(desc, 2, 4, 1, 4, 11, {1, 4, 4, 11});
  ASSERT_EQ(p.run(desc), ATTN_OK) << attn_last_error();
  expectMatchesReference(desc, p);
}

TEST(Run, BshdStridedTensorsGiveSameResult) {
  const attn_kernel_desc *desc = fakeKernel("fake_plain");
  Problem dense(desc, 2, 4, 2, 6, 5);
  ASSERT_EQ(dense.run(desc), ATTN_OK) << attn_last_error();

  // The same tensors stored [B, S, H, D], with the [B, H, S, D] view given
  // by strides alone; the LSE stored [B, S, H] likewise.
  auto toBshd = [](const attn_tensor &t, std::vector<float> &storage) {
    int64_t B = t.shape[0], H = t.shape[1], S = t.shape[2], D = t.shape[3];
    storage.assign(static_cast<size_t>(B * S * H * D), kNaN);
    attn_tensor view = t;
    view.data = storage.data();
    view.strides[0] = S * H * D;
    view.strides[1] = D;
    view.strides[2] = H * D;
    view.strides[3] = 1;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t s = 0; s < S; ++s)
          for (int64_t d = 0; d < D; ++d)
            storage[static_cast<size_t>(
                b * view.strides[0] + h * view.strides[1] +
                s * view.strides[2] + d)] = at<float>(t, b, h, s, d);
    return view;
  };
  std::vector<float> q, k, v, o, lse;
  Problem strided = dense;
  strided.Q = toBshd(dense.Q, q);
  strided.K = toBshd(dense.K, k);
  strided.V = toBshd(dense.V, v);
  strided.O = toBshd(dense.O, o);
  std::fill(o.begin(), o.end(), kNaN);
  lse.assign(dense.lse.size(), kNaN);
  strided.L.data = lse.data();
  strided.L.strides[0] = dense.Sq * dense.Hq;
  strided.L.strides[1] = 1;
  strided.L.strides[2] = dense.Hq;
  ASSERT_EQ(strided.run(desc), ATTN_OK) << attn_last_error();

  for (int64_t b = 0; b < dense.B; ++b)
    for (int64_t h = 0; h < dense.Hq; ++h)
      for (int64_t i = 0; i < dense.Sq; ++i) {
        for (int64_t e = 0; e < dense.Dv; ++e)
          EXPECT_EQ(at<float>(strided.O, b, h, i, e),
                    at<float>(dense.O, b, h, i, e));
        EXPECT_EQ(at<float>(strided.L, b, h, i), at<float>(dense.L, b, h, i));
      }
}

TEST(Run, NegativeStridesAreAccepted) {
  const attn_kernel_desc *desc = fakeKernel("fake_plain");
  Problem p(desc, 1, 2, 2, 4, 6);
  // The key read backwards along Sk: data points at the last row.
  std::vector<float> reversed(p.k.size());
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t j = 0; j < 6; ++j)
      for (int64_t d = 0; d < 4; ++d)
        reversed[static_cast<size_t>((h * 6 + (5 - j)) * 4 + d)] =
            p.k[static_cast<size_t>((h * 6 + j) * 4 + d)];
  p.k = reversed;
  p.K.data = p.k.data() + 5 * 4;
  p.K.strides[2] = -4;
  ASSERT_EQ(p.run(desc), ATTN_OK) << attn_last_error();
  expectMatchesReference(desc, p);
}

TEST(Run, ZeroSizedSqRunsNothing) {
  const attn_kernel_desc *desc = fakeKernel("fake_plain");
  Problem p(desc, 2, 2, 2, 0, 5);
  p.Q.data = nullptr; // no element: NULL is allowed
  p.O.data = nullptr;
  p.L.data = nullptr;
  EXPECT_EQ(p.run(desc), ATTN_OK) << attn_last_error();
}

TEST(Run, ZeroSizedBatchRunsNothing) {
  const attn_kernel_desc *desc = fakeKernel("fake_plain");
  Problem p(desc, 0, 2, 2, 3, 5);
  EXPECT_EQ(p.run(desc), ATTN_OK) << attn_last_error();
}

TEST(Run, EmptyKeysGiveZeroOutputAndMinusInfLse) {
  const attn_kernel_desc *desc = fakeKernel("fake_plain");
  Problem p(desc, 1, 2, 1, 3, 0);
  p.K.data = nullptr;
  p.V.data = nullptr;
  ASSERT_EQ(p.run(desc), ATTN_OK) << attn_last_error();
  for (float x : p.o)
    EXPECT_EQ(x, 0.0f);
  for (float x : p.lse)
    EXPECT_EQ(x, -INFINITY);
}

TEST(Run, KernelOfNoModuleRuns) {
  // A descriptor copied out of its library belongs to no module: allowed,
  // as for kernels linked into a program without attn_module_from_library.
  attn_kernel_desc copy = *fakeKernel("fake_plain");
  Problem p(&copy, 1, 2, 2, 3, 4);
  ASSERT_EQ(p.run(&copy), ATTN_OK) << attn_last_error();
  expectMatchesReference(&copy, p);
}

TEST(Run, ConcurrentCallsShareOnePool) {
  const attn_kernel_desc *desc = fakeKernel("fake_causal_mask");
  attn_thread_pool *pool = nullptr;
  ASSERT_EQ(attn_thread_pool_create(3, &pool), ATTN_OK);
  std::vector<Problem> problems;
  for (unsigned i = 0; i < 4; ++i)
    problems.emplace_back(desc, 2, 2, 1, 13, 13, std::vector<int64_t>{}, i);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (Problem &p : problems)
    threads.emplace_back([&] {
      for (int repeat = 0; repeat < 5; ++repeat)
        if (p.run(desc, pool) != ATTN_OK)
          ++failures;
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(failures, 0);
  for (Problem &p : problems)
    expectMatchesReference(desc, p);
  attn_thread_pool_destroy(pool);
}

TEST(Prepare, FillsKernelArguments) {
  const attn_kernel_desc *desc = fakeKernel("fake_causal_mask");
  Problem p(desc, 2, 4, 2, 3, 5, {1, 4, 1, 5});
  attn_kernel_args args;
  ASSERT_EQ(p.prepare(desc, &args), ATTN_OK) << attn_last_error();
  EXPECT_EQ(args.query, p.q.data());
  EXPECT_EQ(args.output, p.o.data());
  EXPECT_EQ(args.batch, 2);
  EXPECT_EQ(args.heads_q, 4);
  EXPECT_EQ(args.heads_kv, 2);
  EXPECT_EQ(args.seq_q, 3);
  EXPECT_EQ(args.seq_k, 5);
  EXPECT_EQ(args.query_strides[0], 4 * 3 * 4);
  EXPECT_EQ(args.value_strides[2], 4);
  // Broadcast mask dims read with stride 0, as a full [B, Hq, Sq, Sk].
  EXPECT_EQ(args.mask, p.keep.data());
  EXPECT_EQ(args.mask_strides[0], 0);
  EXPECT_EQ(args.mask_strides[1], 5);
  EXPECT_EQ(args.mask_strides[2], 0);
  EXPECT_EQ(args.mask_strides[3], 1);
  // No LSE for this kernel.
  EXPECT_EQ(args.lse, nullptr);
  EXPECT_EQ(args.lse_strides[0], 0);
  EXPECT_EQ(args.lse_strides[2], 0);
}

//===----------------------------------------------------------------------===//
// attn_run_with: the options struct and the sinks
//===----------------------------------------------------------------------===//

/// fake_sinks: fake_plain with a sink logit per query head.
struct SinksKernel {
  attn_kernel_desc desc = *fakeKernel("fake_sinks");
};

attn_run_options optionsWith(const attn_tensor *sinks) {
  attn_run_options options{};
  options.struct_size = sizeof(options);
  options.sinks = sinks;
  return options;
}

TEST(RunWith, HandsTheSinksToTheKernel) {
  SinksKernel kernel;
  Problem p(&kernel.desc, 2, 4, 2, 3, 5);
  std::vector<float> sinks(8, 0.5f);
  // Every other element of a buffer of 8: stride 2.
  attn_tensor s{sinks.data(), ATTN_F32, 1, {4}, {2}};
  attn_run_options options = optionsWith(&s);
  attn_kernel_args args;
  ASSERT_EQ(attn_prepare_with(&kernel.desc, &p.Q, &p.K, &p.V, nullptr, &p.O,
                              &p.L, &options, &args),
            ATTN_OK)
      << attn_last_error();
  EXPECT_EQ(args.sinks, sinks.data());
  EXPECT_EQ(args.sinks_strides[0], 2);
  EXPECT_EQ(attn_run_with(&kernel.desc, &p.Q, &p.K, &p.V, nullptr, &p.O, &p.L,
                          &options, nullptr),
            ATTN_OK)
      << attn_last_error();
  EXPECT_TRUE(attn_kernel_has_sinks(&kernel.desc));
  EXPECT_FALSE(attn_kernel_has_sinks(fakeKernel("fake_plain")));

  // Sinks of -inf are no sinks; a finite one joins each row's LSE.
  std::vector<float> none(4, -std::numeric_limits<float>::infinity());
  attn_tensor n{none.data(), ATTN_F32, 1, {4}, {1}};
  attn_run_options noSinks = optionsWith(&n);
  ASSERT_EQ(attn_run_with(&kernel.desc, &p.Q, &p.K, &p.V, nullptr, &p.O, &p.L,
                          &noSinks, nullptr),
            ATTN_OK)
      << attn_last_error();
  expectMatchesReference(&kernel.desc, p);
  std::vector<float> lse = p.lse;
  ASSERT_EQ(attn_run_with(&kernel.desc, &p.Q, &p.K, &p.V, nullptr, &p.O, &p.L,
                          &options, nullptr),
            ATTN_OK);
  for (size_t row = 0; row < lse.size(); ++row)
    EXPECT_NEAR(p.lse[row], std::log(std::exp(lse[row]) + std::exp(0.5)),
                1e-5)
        << "row " << row;
}

TEST(RunWith, WithoutOptionsIsAttnRun) {
  const attn_kernel_desc *desc = fakeKernel("fake_plain");
  Problem p(desc, 2, 3, 3, 5, 7);
  ASSERT_EQ(attn_run_with(desc, &p.Q, &p.K, &p.V, nullptr, &p.O, &p.L,
                          nullptr, nullptr),
            ATTN_OK)
      << attn_last_error();
  expectMatchesReference(desc, p);
}

TEST(RunWith, RefusesSinksWhereTheKernelTakesNone) {
  const attn_kernel_desc *desc = fakeKernel("fake_plain");
  Problem p(desc, 1, 4, 2, 3, 5);
  std::vector<float> sinks(4);
  attn_tensor s{sinks.data(), ATTN_F32, 1, {4}, {1}};
  attn_run_options options = optionsWith(&s);
  EXPECT_EQ(attn_run_with(desc, &p.Q, &p.K, &p.V, nullptr, &p.O, &p.L,
                          &options, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(attn_last_error(),
               "sinks: kernel 'fake_plain' takes no attention sinks but sinks "
               "were given (compile it with the spec key 'sinks')");
}

TEST(RunWith, RefusesBadSinks) {
  SinksKernel kernel;
  const attn_kernel_desc *desc = &kernel.desc;
  Problem p(desc, 1, 4, 2, 3, 5);
  std::vector<float> sinks(16);
  auto refused = [&](const attn_tensor *s) {
    attn_run_options options = optionsWith(s);
    EXPECT_EQ(attn_run_with(desc, &p.Q, &p.K, &p.V, nullptr, &p.O, &p.L,
                            &options, nullptr),
              ATTN_ERROR_INVALID_ARGUMENT);
    return std::string(attn_last_error());
  };
  EXPECT_EQ(refused(nullptr), "sinks: kernel 'fake_sinks' takes attention "
                              "sinks [Hq] but sinks is NULL");
  attn_tensor s{sinks.data(), ATTN_F32, 1, {3}, {1}};
  EXPECT_NE(refused(&s).find("sinks: dim 0 (Hq) is 3 but query's Hq=4"),
            std::string::npos)
      << attn_last_error();
  s.shape[0] = 4;
  s.dtype = ATTN_BF16;
  EXPECT_EQ(refused(&s), "sinks: element type is bf16 but the sink logits "
                         "are always f32");
  s.dtype = ATTN_F32;
  s.rank = 2;
  EXPECT_NE(refused(&s).find("sinks: rank is 2"), std::string::npos)
      << attn_last_error();
  // The outputs are written: they must not overlap the sinks.
  s.rank = 1;
  s.data = p.o.data();
  EXPECT_NE(refused(&s).find("output overlaps sinks"), std::string::npos)
      << attn_last_error();
  // attn_run and attn_prepare have no sinks to pass.
  EXPECT_EQ(p.run(desc), ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(attn_last_error(),
               "sinks: kernel 'fake_sinks' takes attention sinks [Hq]; pass "
               "them with attn_run_with or attn_prepare_with");
}

TEST(KernelQueries, DropoutBitsSayWhichKeepBitsAKernelDraws) {
  // docs/spec.md's 16 bits a position (has_dropout 2), the 32-bit words of
  // kernels compiled before them (has_dropout 1), none.
  attn_kernel_desc desc = *fakeKernel("fake_plain");
  EXPECT_EQ(attn_kernel_dropout_bits(&desc), 0);
  desc.has_dropout = 2;
  EXPECT_EQ(attn_kernel_dropout_bits(&desc), 16);
  desc.has_dropout = 1;
  EXPECT_EQ(attn_kernel_dropout_bits(&desc), 32);
  EXPECT_NE(attn_kernel_has_dropout(&desc), 0);
  EXPECT_EQ(attn_kernel_dropout_bits(nullptr), 0);
}

TEST(RunWith, RefusesOptionsWithoutTheirSize) {
  const attn_kernel_desc *desc = fakeKernel("fake_plain");
  Problem p(desc, 1, 2, 2, 3, 5);
  attn_run_options options{};
  EXPECT_EQ(attn_run_with(desc, &p.Q, &p.K, &p.V, nullptr, &p.O, &p.L,
                          &options, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(attn_last_error(),
               "options: struct_size is 0; set it to "
               "sizeof(attn_run_options) after zeroing the struct");
  // An older caller's shorter struct: the fields past it count as zero.
  options.struct_size = offsetof(attn_run_options, dropout_p);
  options.dropout_p = 0.5f; // past its size: not read
  EXPECT_EQ(attn_run_with(desc, &p.Q, &p.K, &p.V, nullptr, &p.O, &p.L,
                          &options, nullptr),
            ATTN_OK)
      << attn_last_error();
  options.struct_size = sizeof(options);
  EXPECT_EQ(attn_run_with(desc, &p.Q, &p.K, &p.V, nullptr, &p.O, &p.L,
                          &options, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attn_last_error()).find("has no dropout"),
            std::string::npos)
      << attn_last_error();
}

/// fake_bias_window's descriptor as a backward kernel named `name` (its
/// code is never run: these tests check the runtime's checks and args).
attn_kernel_desc fakeBackward(const char *name) {
  attn_kernel_desc desc = *fakeKernel("fake_bias_window");
  desc.name = name;
  desc.kind = ATTN_KERNEL_BACKWARD;
  desc.has_lse = 1;
  return desc;
}

/// A backward kernel that writes dM.
struct GradMaskKernel {
  attn_kernel_desc desc = fakeBackward("fake_dbias");
  GradMaskKernel() { desc.has_grad_mask = 1; }
};

/// The backward's tensors for a Problem: dO shaped as O, dQ, dK, dV as Q,
/// K, V, and dM [B, Hq, Sq, Sk] f32.
struct BackwardTensors {
  std::vector<float> dout, dq, dk, dv, dm;
  attn_tensor dO, dQ, dK, dV, dM;
  explicit BackwardTensors(const Problem &p) {
    auto make = [](std::vector<float> &data, const attn_tensor &like) {
      int64_t n = 1;
      for (int d = 0; d < like.rank; ++d)
        n *= like.shape[d];
      data.assign(static_cast<size_t>(n), 0.0f);
      return attn_tensor_contiguous(data.data(), ATTN_F32, like.rank,
                                    like.shape);
    };
    dO = make(dout, p.O);
    dQ = make(dq, p.Q);
    dK = make(dk, p.K);
    dV = make(dv, p.V);
    int64_t scores[4] = {p.B, p.Hq, p.Sq, p.Sk};
    dm.assign(static_cast<size_t>(p.B * p.Hq * p.Sq * p.Sk), 0.0f);
    dM = attn_tensor_contiguous(dm.data(), ATTN_F32, 4, scores);
  }
};

/// A backward kernel's GPU parameters: the forward's Q, K, V, [mask], O
/// and LSE, then dO, [dLSE], dQ, dK, dV, [dM], in the order of its
/// function; with every optional tensor and the most captures they fit the
/// arrays.
TEST(Gpu, BackwardKernelParamsFollowItsFunction) {
  LinkedGpuLibrary linked;
  linked.desc.kind = ATTN_KERNEL_BACKWARD;
  linked.desc.head_dim = 8;
  linked.desc.value_dim = 4;
  linked.desc.mask_kind = ATTN_MASK_NONE;
  linked.desc.has_lse = 1; // the forward's, always read
  linked.desc.has_grad_lse = 0;
  attn_backward_args args{};
  attn_kernel_args &f = args.forward;
  f.batch = 2;
  f.heads_q = 4;
  f.heads_kv = 2;
  f.seq_q = 3;
  f.seq_k = 5;
  float mask, output, lse, dout, dlse, dq, dk, dv, dm;
  f.output = &output;
  f.lse = &lse;
  args.grad_output = &dout;
  args.grad_query = &dq;
  args.grad_key = &dk;
  args.grad_value = &dv;
  uint64_t values[ATTN_GPU_MAX_PARAMS];
  void *pointers[ATTN_GPU_MAX_PARAMS];
  EXPECT_EQ(
      attn_gpu_backward_kernel_params(&linked.desc, &args, values, pointers),
      4 * 13 + 11 + 13 + 3 * 13);
  const std::pair<int, const float *> plain[] = {
      {39, &output}, {52, &lse}, {63, &dout}, {76, &dq}, {89, &dk}, {102, &dv}};
  for (auto [at, pointer] : plain)
    EXPECT_EQ(values[at], (uint64_t)(uintptr_t)pointer) << "parameter " << at;

  linked.desc.mask_kind = ATTN_MASK_BIAS;
  linked.desc.has_grad_lse = 1;
  linked.desc.has_grad_mask = 1;
  f.mask = &mask;
  args.grad_lse = &dlse;
  args.grad_mask = &dm;
  const int64_t dlseStrides[3] = {12, 3, 1};
  std::copy(dlseStrides, dlseStrides + 3, args.grad_lse_strides);
  int n =
      attn_gpu_backward_kernel_params(&linked.desc, &args, values, pointers);
  EXPECT_EQ(n, 5 * 13 + 11 + 13 + 11 + 4 * 13);
  const std::pair<int, const float *> all[] = {
      {39, &mask}, {52, &output}, {65, &lse}, {76, &dout}, {89, &dlse},
      {100, &dq},  {113, &dk},    {126, &dv}, {139, &dm}};
  for (auto [at, pointer] : all)
    EXPECT_EQ(values[at], (uint64_t)(uintptr_t)pointer) << "parameter " << at;
  // dLSE [B, Hq, Sq] with its strides.
  const uint64_t dlseParams[] = {2, 4, 3, 12, 3, 1};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(values[89 + 5 + i], dlseParams[i]) << "parameter " << 94 + i;
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(pointers[i], &values[i]);
  EXPECT_LE(n + ATTN_MAX_CAPTURES * 13, ATTN_GPU_MAX_PARAMS);

  // Dropout's probability (an f32 in the low 4 bytes of its slot) and seed
  // come last; with every capture the list still fits.
  linked.desc.has_dropout = 2;
  f.dropout_p = 0.25f;
  f.dropout_seed = 0x0123456789ABCDEFu;
  EXPECT_EQ(
      attn_gpu_backward_kernel_params(&linked.desc, &args, values, pointers),
      n + 2);
  float p;
  std::memcpy(&p, &values[n], sizeof(p));
  EXPECT_EQ(p, 0.25f);
  EXPECT_EQ(values[n] >> 32, 0u);
  EXPECT_EQ(values[n + 1], 0x0123456789ABCDEFu);
  EXPECT_EQ(pointers[n + 1], &values[n + 1]);
  EXPECT_LE(n + 2 + ATTN_MAX_CAPTURES * 13, ATTN_GPU_MAX_PARAMS);
  // The forward's likewise, after its LSE.
  linked.desc.kind = ATTN_KERNEL_FORWARD;
  int forward = attn_gpu_kernel_params(&linked.desc, &f, values, pointers);
  EXPECT_EQ(forward, 5 * 13 + 11 + 2);
  EXPECT_EQ(values[forward - 2], 0x3E800000u); // 0.25f
  EXPECT_EQ(values[forward - 1], 0x0123456789ABCDEFu);
  // A kernel without dropout takes neither.
  linked.desc.has_dropout = 0;
  EXPECT_EQ(attn_gpu_kernel_params(&linked.desc, &f, values, pointers),
            forward - 2);
}

/// attn_run_backward_with launches a GPU backward kernel (a CUDA stream is
/// its to take); without a GPU a well-formed call stops at the device.
TEST(Gpu, BackwardKernelRunsOnTheGpuOnly) {
  if (gpuPresent())
    GTEST_SKIP() << "a GPU is present (host buffers: not for a real launch)";
  LinkedGpuLibrary linked;
  linked.desc.kind = ATTN_KERNEL_BACKWARD;
  attn_module *module = nullptr;
  ASSERT_EQ(linked.load(&module), ATTN_OK) << attn_last_error();
  Problem p(&linked.desc, 1, 2, 2, 5, 7);
  BackwardTensors g(p);
  int notAStream = 0;
  attn_run_options options{};
  options.struct_size = sizeof(options);
  options.cuda_stream = &notAStream;
  EXPECT_EQ(attn_run_backward_with(&linked.desc, &p.Q, &p.K, &p.V, nullptr,
                                   &p.O, &p.L, &g.dO, nullptr, &g.dQ, &g.dK,
                                   &g.dV, &options, nullptr),
            ATTN_ERROR_NO_DEVICE);
  EXPECT_NE(std::string(attn_last_error()).find("no GPU"), std::string::npos)
      << attn_last_error();
  // The checks come first: a dO of the wrong shape is refused as on the CPU.
  attn_tensor wrong = g.dO;
  wrong.shape[2] = 4;
  EXPECT_EQ(attn_run_backward_with(&linked.desc, &p.Q, &p.K, &p.V, nullptr,
                                   &p.O, &p.L, &wrong, nullptr, &g.dQ, &g.dK,
                                   &g.dV, &options, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(attn_module_unload(module), ATTN_OK);
}

TEST(BackwardWith, HandsDMToTheKernelAndRefusesBadOnes) {
  GradMaskKernel kernel;
  const attn_kernel_desc *desc = &kernel.desc;
  Problem p(desc, 2, 4, 2, 3, 5);
  BackwardTensors g(p);
  attn_run_options options{};
  options.struct_size = sizeof(options);
  options.grad_mask = &g.dM;
  attn_backward_args args;
  auto prepare = [&](const attn_run_options *o) {
    return attn_prepare_backward_with(desc, &p.Q, &p.K, &p.V, p.mask(desc),
                                      &p.O, &p.L, &g.dO, nullptr, &g.dQ,
                                      &g.dK, &g.dV, o, &args);
  };
  ASSERT_EQ(prepare(&options), ATTN_OK) << attn_last_error();
  EXPECT_EQ(args.grad_mask, g.dm.data());
  EXPECT_EQ(args.grad_mask_strides[0], 4 * 3 * 5);
  EXPECT_EQ(args.grad_mask_strides[3], 1);
  EXPECT_TRUE(attn_kernel_has_grad_mask(desc));

  auto refused = [&](const attn_run_options *o) {
    EXPECT_EQ(prepare(o), ATTN_ERROR_INVALID_ARGUMENT);
    return std::string(attn_last_error());
  };
  options.grad_mask = nullptr;
  EXPECT_EQ(refused(&options),
            "grad_mask: kernel 'fake_dbias' writes the bias's gradient "
            "[B, Hq, Sq, Sk] but grad_mask is NULL");
  attn_tensor bad = g.dM;
  bad.shape[3] = 4;
  options.grad_mask = &bad;
  EXPECT_NE(refused(&options).find("grad_mask: dim 3 (Sk) is 4 but the "
                                   "scores' Sk=5"),
            std::string::npos)
      << attn_last_error();
  bad = g.dM;
  bad.dtype = ATTN_BF16;
  EXPECT_EQ(refused(&options), "grad_mask: element type is bf16 but the "
                               "bias's gradient is always f32");
  bad = g.dM;
  bad.data = g.dq.data();
  EXPECT_NE(refused(&options).find("overlaps"), std::string::npos)
      << attn_last_error();
  // The forward's options do not apply to a backward call, nor dM to a
  // forward call.
  options.grad_mask = &g.dM;
  options.key_splits = 2;
  EXPECT_EQ(refused(&options), "options: a backward call takes no sinks or "
                               "key splits (the forward's LSE holds the "
                               "sinks)");
  // attn_run_backward and attn_prepare_backward have no dM to pass.
  EXPECT_EQ(attn_run_backward(desc, &p.Q, &p.K, &p.V, p.mask(desc), &p.O,
                              &p.L, &g.dO, nullptr, &g.dQ, &g.dK, &g.dV, 0.0f,
                              0, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(attn_last_error(),
               "grad_mask: kernel 'fake_dbias' writes the bias's gradient "
               "[B, Hq, Sq, Sk]; pass it with attn_run_backward_with or "
               "attn_prepare_backward_with");
  const attn_kernel_desc *forward = fakeKernel("fake_bias_window");
  attn_run_options forwardOptions{};
  forwardOptions.struct_size = sizeof(forwardOptions);
  forwardOptions.grad_mask = &g.dM;
  EXPECT_EQ(attn_run_with(forward, &p.Q, &p.K, &p.V, p.mask(forward), &p.O,
                          p.lseTensor(forward), &forwardOptions, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(attn_last_error(),
               "options: grad_mask is a backward call's "
               "(attn_run_backward_with)");
  // A CUDA stream is a GPU launch's; a CPU kernel refuses it, forward and
  // backward, rather than ignoring it.
  int notAStream = 0;
  attn_run_options streamOptions{};
  streamOptions.struct_size = sizeof(streamOptions);
  streamOptions.cuda_stream = &notAStream;
  EXPECT_EQ(attn_run_with(forward, &p.Q, &p.K, &p.V, p.mask(forward), &p.O,
                          p.lseTensor(forward), &streamOptions, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(attn_last_error(), "options: cuda_stream is given but kernel "
                                  "'fake_bias_window' runs on the CPU");
  streamOptions.grad_mask = &g.dM;
  EXPECT_EQ(refused(&streamOptions), "options: cuda_stream is given but "
                                     "kernel 'fake_dbias' runs on the CPU");
}

/// A backward kernel whose score_mod reads a table [?, ?] f32 and ids [?]
/// i32 and which writes the table's gradient (spec key dcaptures=0).
struct GradCapturesKernel {
  attn_capture_desc captures[2] = {{ATTN_F32, 2, {ATTN_DYNAMIC, ATTN_DYNAMIC}},
                                   {ATTN_I32, 1, {ATTN_DYNAMIC}}};
  attn_kernel_desc desc = fakeBackward("fake_dcaptures");
  GradCapturesKernel() {
    desc.num_captures = 2;
    desc.captures = captures;
    desc.grad_captures = 1;
  }
};

TEST(BackwardWith, HandsCaptureGradientsToTheKernelAndRefusesBadOnes) {
  GradCapturesKernel kernel;
  const attn_kernel_desc *desc = &kernel.desc;
  EXPECT_EQ(attn_kernel_grad_captures(desc), 1u);
  Problem p(desc, 2, 4, 2, 3, 5);
  BackwardTensors g(p);
  std::vector<float> table(2 * 17, 0.5f), partials(4 * 2 * 17 + 8, 0.0f);
  std::vector<int32_t> ids(5, 0);
  int64_t tableShape[2] = {2, 17}, idsShape[1] = {5};
  // One row of 34 elements per work item (B * Hkv = 4).
  int64_t partialShape[2] = {4, 34};
  attn_tensor captures[2] = {
      attn_tensor_contiguous(table.data(), ATTN_F32, 2, tableShape),
      attn_tensor_contiguous(ids.data(), ATTN_I32, 1, idsShape)};
  attn_tensor grads[2] = {
      attn_tensor_contiguous(partials.data(), ATTN_F32, 2, partialShape), {}};
  attn_run_options options{};
  options.struct_size = sizeof(options);
  options.captures = captures;
  options.num_captures = 2;
  options.grad_captures = grads;
  attn_backward_args args;
  auto prepare = [&](const attn_run_options *o) {
    return attn_prepare_backward_with(desc, &p.Q, &p.K, &p.V, p.mask(desc),
                                      &p.O, &p.L, &g.dO, nullptr, &g.dQ, &g.dK,
                                      &g.dV, o, &args);
  };
  ASSERT_EQ(prepare(&options), ATTN_OK) << attn_last_error();
  EXPECT_EQ(args.grad_captures[0], partials.data());
  EXPECT_EQ(args.grad_capture_row_strides[0], 34);
  EXPECT_EQ(args.grad_captures[1], nullptr); // i32 ids: no gradient
  // Rows further apart than their length are fine.
  grads[0].strides[0] = 36;
  ASSERT_EQ(prepare(&options), ATTN_OK) << attn_last_error();
  EXPECT_EQ(args.grad_capture_row_strides[0], 36);

  auto refused = [&](const attn_run_options *o) {
    EXPECT_EQ(prepare(o), ATTN_ERROR_INVALID_ARGUMENT);
    return std::string(attn_last_error());
  };
  grads[0] = attn_tensor_contiguous(partials.data(), ATTN_F32, 2, partialShape);
  options.grad_captures = nullptr;
  EXPECT_EQ(refused(&options),
            "grad_captures: kernel 'fake_dcaptures' writes the gradients of "
            "captured tensors (bits 0x1) but grad_captures is NULL");
  options.grad_captures = grads;
  grads[0].shape[0] = 2;
  EXPECT_EQ(refused(&options),
            "grad_captures[0]: dim 0 (B * Hkv) is 2 but the call's "
            "B * Hkv=4");
  grads[0].shape[0] = 4;
  grads[0].shape[1] = 17;
  EXPECT_EQ(refused(&options),
            "grad_captures[0]: dim 1 (N) is 17 but capture 0's element count "
            "N=34");
  grads[0].shape[1] = 34;
  grads[0].strides[1] = 2;
  grads[0].strides[0] = 68;
  EXPECT_EQ(refused(&options), "grad_captures[0]: stride 1 is 2 but each row "
                               "must be contiguous (stride 1)");
  grads[0].strides[1] = 1;
  grads[0].strides[0] = 17;
  EXPECT_EQ(refused(&options), "grad_captures[0]: stride 0 is 17 but rows of "
                               "34 elements must not overlap (stride >= 34)");
  grads[0] = attn_tensor_contiguous(partials.data(), ATTN_F32, 2, partialShape);
  grads[0].dtype = ATTN_BF16;
  EXPECT_NE(refused(&options).find("always f32"), std::string::npos)
      << attn_last_error();
  // Nothing else of the call may share its memory: dQ, the captures.
  grads[0] = attn_tensor_contiguous(g.dq.data(), ATTN_F32, 2, partialShape);
  EXPECT_NE(refused(&options).find("overlaps"), std::string::npos)
      << attn_last_error();
  grads[0] = attn_tensor_contiguous(table.data(), ATTN_F32, 2, partialShape);
  EXPECT_NE(refused(&options).find("capture 0"), std::string::npos)
      << attn_last_error();
  grads[0] = attn_tensor_contiguous(partials.data(), ATTN_F32, 2, partialShape);
  ASSERT_EQ(prepare(&options), ATTN_OK) << attn_last_error();

  // A kernel without them, and a forward call, refuse them.
  GradCapturesKernel without;
  without.desc.grad_captures = 0;
  EXPECT_EQ(attn_prepare_backward_with(&without.desc, &p.Q, &p.K, &p.V,
                                       p.mask(desc), &p.O, &p.L, &g.dO, nullptr,
                                       &g.dQ, &g.dK, &g.dV, &options, &args),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(attn_last_error(),
               "grad_captures: kernel 'fake_dcaptures' writes no captured "
               "tensor's gradient but grad_captures was given (compile it "
               "with the spec key 'dcaptures')");
  const attn_kernel_desc *forward = fakeKernel("fake_bias_window");
  attn_run_options forwardOptions{};
  forwardOptions.struct_size = sizeof(forwardOptions);
  forwardOptions.grad_captures = grads;
  EXPECT_EQ(attn_run_with(forward, &p.Q, &p.K, &p.V, p.mask(forward), &p.O,
                          p.lseTensor(forward), &forwardOptions, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(attn_last_error(), "options: grad_captures is a backward call's "
                                  "(attn_run_backward_with)");
  // A forward kernel reports none.
  EXPECT_EQ(attn_kernel_grad_captures(forward), 0u);
}

TEST(Module, FromLibraryRefusesBackwardKernelsOlderThanTheSinks) {
  LinkedLibrary linked;
  linked.desc.kind = ATTN_KERNEL_BACKWARD;
  linked.desc.struct_size = offsetof(attn_kernel_desc, has_sinks);
  attn_module *module = nullptr;
  EXPECT_EQ(linked.load(&module), ATTN_ERROR_LOAD);
  EXPECT_NE(std::string(attn_last_error())
                .find("backward kernel 'linked' was compiled by an older "
                      "attn-compile"),
            std::string::npos)
      << attn_last_error();
}

TEST(Module, FromLibraryRefusesBackwardKernelsOlderThanTheCaptures) {
  // Their attn_backward_args embed an attn_kernel_args without captures.
  LinkedLibrary linked;
  linked.desc.kind = ATTN_KERNEL_BACKWARD;
  linked.desc.struct_size = offsetof(attn_kernel_desc, num_captures);
  attn_module *module = nullptr;
  EXPECT_EQ(linked.load(&module), ATTN_ERROR_LOAD);
  EXPECT_NE(std::string(attn_last_error())
                .find("without the captures' fields: compile it again"),
            std::string::npos)
      << attn_last_error();
}

TEST(Module, FromLibraryRefusesBadCaptureCounts) {
  attn_capture_desc capture = {ATTN_F32, 1, {ATTN_DYNAMIC}};
  for (int32_t count : {-1, ATTN_MAX_CAPTURES + 1}) {
    LinkedLibrary linked;
    linked.desc.num_captures = count;
    linked.desc.captures = &capture;
    attn_module *module = nullptr;
    EXPECT_EQ(linked.load(&module), ATTN_ERROR_LOAD) << count;
  }
  LinkedLibrary described;
  described.desc.num_captures = 1; // but no descriptions
  attn_module *module = nullptr;
  EXPECT_EQ(described.load(&module), ATTN_ERROR_LOAD);
  EXPECT_NE(std::string(attn_last_error()).find("has 1 captures"),
            std::string::npos)
      << attn_last_error();
}

TEST(Module, FromLibraryRefusesSinksOnOtherKinds) {
  LinkedLibrary linked;
  linked.desc.kind = ATTN_KERNEL_WEIGHTS;
  linked.desc.has_sinks = 1;
  attn_module *module = nullptr;
  EXPECT_EQ(linked.load(&module), ATTN_ERROR_LOAD);
  EXPECT_NE(std::string(attn_last_error())
                .find("kernel 'linked' takes sinks but is not a forward "
                      "kernel"),
            std::string::npos)
      << attn_last_error();
  // A GPU forward kernel takes them (its parameters place them after the
  // captures, before the output).
  LinkedGpuLibrary gpu;
  gpu.desc.has_sinks = 1;
  gpu.desc.has_lse = 1;
  gpu.desc.mask_kind = ATTN_MASK_NONE;
  ASSERT_EQ(gpu.load(&module), ATTN_OK) << attn_last_error();
  EXPECT_EQ(attn_module_unload(module), ATTN_OK);
  attn_kernel_args args{};
  args.batch = args.heads_q = args.heads_kv = 1;
  args.heads_q = 6;
  args.seq_q = args.seq_k = 4;
  float sinks[6], output;
  args.sinks = sinks;
  args.sinks_strides[0] = 1;
  args.output = &output;
  uint64_t values[ATTN_GPU_MAX_PARAMS];
  void *pointers[ATTN_GPU_MAX_PARAMS];
  EXPECT_EQ(attn_gpu_kernel_params(&gpu.desc, &args, values, pointers),
            3 * 13 + 7 + 13 + 11);
  const uint64_t sinksParams[] = {
      (uint64_t)(uintptr_t)sinks, (uint64_t)(uintptr_t)sinks, 0, 6, 1, 6, 1};
  for (int i = 0; i < 7; ++i)
    EXPECT_EQ(values[39 + i], sinksParams[i]) << "parameter " << 39 + i;
  EXPECT_EQ(values[46], (uint64_t)(uintptr_t)&output);
}

//===----------------------------------------------------------------------===//
// attn_prepare's refusals, one per check
//===----------------------------------------------------------------------===//

class Refuses : public ::testing::Test {
protected:
  const attn_kernel_desc *plain = fakeKernel("fake_plain");
  Problem p{plain, 2, 4, 2, 3, 5};
};

TEST_F(Refuses, NullKernel) {
  attn_kernel_args args;
  EXPECT_EQ(attn_prepare(nullptr, &p.Q, &p.K, &p.V, nullptr, &p.O, &p.L, &args),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(attn_last_error(), "kernel is NULL");
  EXPECT_EQ(attn_run(nullptr, &p.Q, &p.K, &p.V, nullptr, &p.O, &p.L, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
}

TEST_F(Refuses, NullTensor) {
  attn_kernel_args args;
  EXPECT_EQ(
      attn_prepare(plain, &p.Q, nullptr, &p.V, nullptr, &p.O, &p.L, &args),
      ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(attn_last_error(), "key: tensor is NULL");
  EXPECT_EQ(attn_run(plain, &p.Q, &p.K, &p.V, nullptr, nullptr, &p.L, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(attn_last_error(), "output: tensor is NULL");
}

TEST_F(Refuses, NullData) {
  p.V.data = nullptr;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "value: data is NULL but the tensor has 80 elements");
}

TEST_F(Refuses, WrongDtype) {
  p.K.dtype = ATTN_F16;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "key: element type is f16 but kernel 'fake_plain' takes f32");
}

TEST_F(Refuses, WrongLseDtype) {
  p.L.dtype = ATTN_BF16;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "lse: element type is bf16 but the log-sum-exp is always f32");
}

TEST_F(Refuses, WrongRank) {
  p.Q.rank = 3;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "query: rank is 3 but must be 4 [B, Hq, Sq, D]");
}

TEST_F(Refuses, NegativeSize) {
  p.Q.shape[2] = -1;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "query: dim 2 (Sq) is -1 but sizes must be >= 0");
}

TEST_F(Refuses, SizeOverflow) {
  const int64_t huge = int64_t(1) << 40;
  int64_t shape[4] = {huge, huge, huge, huge};
  p.Q = attn_tensor_contiguous(p.q.data(), ATTN_F32, 4, shape);
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "query: shape [1099511627776, 1099511627776, 1099511627776, "
                 "1099511627776] has more elements than fit in 64 bits (the "
                 "element count overflows)");
}

TEST_F(Refuses, IndicesPast2To31) {
  // Keys and values broadcast along 2^31 positions (stride 0: few bytes):
  // the kernels' global indices would pass i32's range.
  for (attn_tensor *t : {&p.K, &p.V}) {
    t->shape[2] = int64_t{1} << 31;
    t->strides[2] = 0;
  }
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "Sk is 2147483648 but attn's kernels index positions below "
                 "2^31 (at most 2147483647)");
}

TEST_F(Refuses, ExtentOverflow) {
  // Few elements, but strides that reach past the address space.
  p.K.strides[0] = std::numeric_limits<int64_t>::max() / 2;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "spans more bytes than the address space holds (the extent "
                 "overflows)");
}

TEST_F(Refuses, HeadDimMismatch) {
  p.Q.shape[3] = 8;
  p.Q.strides[0] = p.Q.strides[1] = p.Q.strides[2] = 0; // stay in the buffer
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "query: dim 3 (D) is 8 but kernel 'fake_plain' was compiled "
                 "for D=4");
}

TEST_F(Refuses, KeyHeadDimMismatch) {
  p.K.shape[3] = 2;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "key: dim 3 (D) is 2 but kernel 'fake_plain' was compiled "
                 "for D=4");
}

TEST_F(Refuses, ValueDimMismatch) {
  p.V.shape[3] = 3;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "value: dim 3 (Dv) is 3 but kernel 'fake_plain' was compiled "
                 "for Dv=4");
}

TEST_F(Refuses, OutputValueDimMismatch) {
  p.O.shape[3] = 3;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "output: dim 3 (Dv) is 3 but kernel 'fake_plain' was "
                 "compiled for Dv=4");
}

TEST_F(Refuses, QueryHeadsNotMultipleOfKeyHeads) {
  p.K.shape[1] = 3;
  p.V.shape[1] = 3;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "key: dim 1 (Hkv) is 3 but query's Hq=4 is not a multiple of "
                 "it");
}

TEST_F(Refuses, NoKeyHeads) {
  p.K.shape[1] = 0;
  p.V.shape[1] = 0;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "key: dim 1 (Hkv) is 0 but at least one key/value head is "
                 "needed");
}

TEST_F(Refuses, ValueHeadsDifferFromKeyHeads) {
  p.V.shape[1] = 1;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "value: dim 1 (Hkv) is 1 but key's Hkv=2");
}

TEST_F(Refuses, KeyValueSeqMismatch) {
  p.V.shape[2] = 4;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "value: dim 2 (Sk) is 4 but key's Sk=5");
}

TEST_F(Refuses, BatchMismatch) {
  p.K.shape[0] = 1;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "key: dim 0 (B) is 1 but query's B=2");
}

TEST_F(Refuses, OutputShapeMismatch) {
  p.O.shape[2] = 2;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "output: dim 2 (Sq) is 2 but query's Sq=3");
}

TEST_F(Refuses, MaskMissing) {
  const attn_kernel_desc *masked = fakeKernel("fake_causal_mask");
  attn_kernel_args args;
  EXPECT_EQ(
      attn_prepare(masked, &p.Q, &p.K, &p.V, nullptr, &p.O, nullptr, &args),
      ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attn_last_error())
                .find("mask: kernel 'fake_causal_mask' needs a bool "
                      "keep-mask [B or 1, Hq or 1, Sq or 1, Sk] but mask is "
                      "NULL"),
            std::string::npos)
      << attn_last_error();
}

TEST_F(Refuses, MaskUnexpected) {
  std::vector<uint8_t> keep(2 * 4 * 3 * 5, 1);
  int64_t shape[4] = {2, 4, 3, 5};
  attn_tensor mask = attn_tensor_contiguous(keep.data(), ATTN_BOOL, 4, shape);
  attn_kernel_args args;
  EXPECT_EQ(attn_prepare(plain, &p.Q, &p.K, &p.V, &mask, &p.O, &p.L, &args),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attn_last_error())
                .find("mask: kernel 'fake_plain' takes no mask but one was "
                      "given"),
            std::string::npos)
      << attn_last_error();
}

TEST_F(Refuses, MaskWrongDtype) {
  const attn_kernel_desc *masked = fakeKernel("fake_causal_mask");
  Problem m(masked, 2, 4, 2, 3, 5);
  m.M.dtype = ATTN_F32;
  EXPECT_REFUSED(m, masked, ATTN_ERROR_INVALID_ARGUMENT,
                 "mask: element type is f32 but kernel 'fake_causal_mask' "
                 "takes a keep-mask of bool");
}

TEST_F(Refuses, MaskBadBroadcastDim) {
  const attn_kernel_desc *masked = fakeKernel("fake_causal_mask");
  Problem m(masked, 2, 4, 2, 3, 5, {3, 1, 1, 5});
  EXPECT_REFUSED(m, masked, ATTN_ERROR_INVALID_ARGUMENT,
                 "mask: dim 0 (B) is 3 but must be query's B=2 or 1");
}

TEST_F(Refuses, MaskBroadcastKernelDoesNotSupport) {
  const attn_kernel_desc *bias = fakeKernel("fake_bias_window");
  Problem m(bias, 2, 4, 2, 3, 5, {1, 1, 3, 5});
  EXPECT_REFUSED(m, bias, ATTN_ERROR_INVALID_ARGUMENT,
                 "mask: dim 1 (H) is 1 but kernel 'fake_bias_window' was not "
                 "compiled to broadcast the mask over H; it must be query's "
                 "Hq=4");
}

TEST_F(Refuses, MaskKeyLengthMismatch) {
  const attn_kernel_desc *masked = fakeKernel("fake_causal_mask");
  Problem m(masked, 2, 4, 2, 3, 5, {1, 1, 1, 4});
  EXPECT_REFUSED(m, masked, ATTN_ERROR_INVALID_ARGUMENT,
                 "mask: dim 3 (Sk) is 4 but key's Sk=5");
}

TEST_F(Refuses, LseMissing) {
  attn_kernel_args args;
  EXPECT_EQ(
      attn_prepare(plain, &p.Q, &p.K, &p.V, nullptr, &p.O, nullptr, &args),
      ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attn_last_error())
                .find("lse: kernel 'fake_plain' writes the log-sum-exp [B, "
                      "Hq, Sq] but lse is NULL"),
            std::string::npos)
      << attn_last_error();
}

TEST_F(Refuses, LseUnexpected) {
  const attn_kernel_desc *masked = fakeKernel("fake_causal_mask");
  Problem m(masked, 2, 4, 2, 3, 5);
  attn_kernel_args args;
  EXPECT_EQ(attn_prepare(masked, &m.Q, &m.K, &m.V, &m.M, &m.O, &m.L, &args),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attn_last_error())
                .find("lse: kernel 'fake_causal_mask' writes no log-sum-exp "
                      "but an lse tensor was given"),
            std::string::npos)
      << attn_last_error();
}

TEST_F(Refuses, LseWrongShape) {
  p.L.shape[1] = 2;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "lse: dim 1 (Hq) is 2 but query's Hq=4");
}

TEST_F(Refuses, LseWrongRank) {
  p.L.rank = 4;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "lse: rank is 4 but must be 3 [B, Hq, Sq]");
}

TEST_F(Refuses, StaticSizeMismatch) {
  const attn_kernel_desc *fixed = fakeKernel("fake_static");
  Problem ok(fixed, 1, 4, 2, 3, 5);
  EXPECT_EQ(ok.run(fixed), ATTN_OK) << attn_last_error();
  Problem m(fixed, 1, 8, 2, 3, 5);
  EXPECT_REFUSED(m, fixed, ATTN_ERROR_INVALID_ARGUMENT,
                 "query: dim 1 (Hq) is 8 but kernel 'fake_static' was "
                 "compiled for Hq=4 only");
}

TEST_F(Refuses, OutputOverlapsQuery) {
  p.O.data = p.q.data() + 3; // same size as the query here
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "output overlaps query");
}

TEST_F(Refuses, OutputOverlapsValue) {
  std::vector<float> shared(p.o.size() + p.v.size());
  p.V.data = shared.data();
  p.O.data = shared.data() + p.v.size() - 1; // one element in common
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "output overlaps value");
}

TEST_F(Refuses, OutputOverlapsLse) {
  p.L.data = p.o.data() + p.o.size() - 2;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT, "output overlaps lse");
}

TEST_F(Refuses, LseOverlapsKey) {
  p.L.data = p.k.data();
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT, "lse overlaps key");
}

TEST_F(Refuses, OutputWithZeroStride) {
  p.O.strides[2] = 0;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "output: dim 2 (Sq) has stride 0 but size 3, so distinct "
                 "output elements would share memory");
}

TEST_F(Refuses, OutputWithSelfOverlappingStrides) {
  p.O.strides[2] = 2; // rows of 4 elements, 2 apart
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "output: strides [48, 12, 2, 1] make distinct elements share "
                 "memory: dim 2 (Sq) has stride 2 but the dims with smaller "
                 "strides already span 4 elements");
}

TEST_F(Refuses, LseWithSelfOverlappingStrides) {
  p.L.strides[0] = 1;
  p.L.strides[1] = 1;
  p.L.strides[2] = 1;
  EXPECT_REFUSED(p, plain, ATTN_ERROR_INVALID_ARGUMENT,
                 "lse: strides [1, 1, 1] make distinct elements share memory");
}

TEST_F(Refuses, InputsMayOverlapEachOtherAndBroadcast) {
  // Inputs are only read: sharing memory (here K = V, and a query whose
  // rows all alias) is fine.
  Problem shared(plain, 2, 4, 2, 3, 5);
  shared.V.data = shared.K.data;
  shared.Q.strides[2] = 0;
  EXPECT_EQ(shared.run(plain), ATTN_OK) << attn_last_error();
  expectMatchesReference(plain, shared);
}

//===----------------------------------------------------------------------===//
// CPU features
//===----------------------------------------------------------------------===//

TEST(CpuCheck, Avx512KernelMatchesHost) {
#if !defined(__x86_64__) && !defined(__i386__)
  GTEST_SKIP() << "x86 only";
#else
  const attn_kernel_desc *desc = fakeKernel("fake_avx512");
  // The compiler's own cpuid reading (which, unlike /proc/cpuinfo, agrees
  // with an emulated CPU such as valgrind's).
  bool host = __builtin_cpu_supports("avx512f") &&
              __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
  EXPECT_EQ(attn_kernel_check_cpu(desc),
            host ? ATTN_OK : ATTN_ERROR_UNSUPPORTED_CPU)
      << attn_last_error();
#endif
}

TEST(CpuCheck, AmxKernelRefusedWithoutAmx) {
  if (hostHasFlag("amx_tile") && hostHasFlag("amx_bf16"))
    GTEST_SKIP() << "this CPU has AMX";
  const attn_kernel_desc *desc = fakeKernel("fake_amx");
  EXPECT_EQ(attn_kernel_check_cpu(desc), ATTN_ERROR_UNSUPPORTED_CPU);
  std::string message = attn_last_error();
  EXPECT_NE(message.find("kernel 'fake_amx' was compiled for CPU "
                         "'sapphirerapids' and needs "),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("amx-tile"), std::string::npos) << message;

  // attn_run refuses too, before running anything.
  Problem p(desc, 1, 2, 2, 3, 4);
  EXPECT_EQ(p.run(desc), ATTN_ERROR_UNSUPPORTED_CPU);
  for (float x : p.o)
    EXPECT_TRUE(std::isnan(x));
}

TEST(CpuCheck, UnknownAndDisabledFeaturesAreIgnored) {
  attn_kernel_desc desc = *fakeKernel("fake_plain");
  desc.target_features = "-amx-tile,+made-up-feature,+sse2,,-avx512f";
  EXPECT_EQ(attn_kernel_check_cpu(&desc), ATTN_OK) << attn_last_error();
}

TEST(CpuCheck, RemembersPassedFeaturesByContent) {
  // The runtime remembers the feature strings that passed, so that a call
  // does not parse its kernel's again; a string rewritten in place (a
  // library loaded where another was) must be checked anew.
  if (hostHasFlag("amx_tile"))
    GTEST_SKIP() << "this CPU has AMX";
  attn_kernel_desc desc = *fakeKernel("fake_plain");
  char features[64] = "+sse2,+made-up-feature";
  desc.target_features = features;
  for (int call = 0; call < 3; ++call)
    EXPECT_EQ(attn_kernel_check_cpu(&desc), ATTN_OK) << attn_last_error();
  std::snprintf(features, sizeof(features), "+sse2,+amx-tile");
  EXPECT_EQ(attn_kernel_check_cpu(&desc), ATTN_ERROR_UNSUPPORTED_CPU);
  EXPECT_NE(std::string(attn_last_error()).find("amx-tile"), std::string::npos)
      << attn_last_error();
  // More distinct passing strings than the runtime remembers still pass,
  // and a refused one stays refused after them.
  for (int i = 0; i < 40; ++i) {
    std::snprintf(features, sizeof(features), "+sse2,+made-up-%d", i);
    EXPECT_EQ(attn_kernel_check_cpu(&desc), ATTN_OK) << attn_last_error();
  }
  std::snprintf(features, sizeof(features), "+amx-tile");
  EXPECT_EQ(attn_kernel_check_cpu(&desc), ATTN_ERROR_UNSUPPORTED_CPU);
}

//===----------------------------------------------------------------------===//
// Thread pool
//===----------------------------------------------------------------------===//

struct Coverage {
  std::vector<std::atomic<int>> hits;
  explicit Coverage(int64_t n) : hits(static_cast<size_t>(n)) {}
  static void task(void *ctx, int64_t begin, int64_t end) {
    auto *self = static_cast<Coverage *>(ctx);
    EXPECT_LE(0, begin);
    EXPECT_LT(begin, end);
    EXPECT_LE(end, static_cast<int64_t>(self->hits.size()));
    for (int64_t i = begin; i < end; ++i)
      ++self->hits[static_cast<size_t>(i)];
  }
  void expectEachOnce() const {
    for (size_t i = 0; i < hits.size(); ++i)
      ASSERT_EQ(hits[i].load(), 1) << "index " << i;
  }
};

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int32_t threads : {1, 2, 3, 8}) {
    attn_thread_pool *pool = nullptr;
    ASSERT_EQ(attn_thread_pool_create(threads, &pool), ATTN_OK);
    EXPECT_EQ(attn_thread_pool_size(pool), threads);
    for (int64_t n : {0, 1, 7, 1000}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + ", n " +
                   std::to_string(n));
      Coverage coverage(n);
      attn_thread_pool_parallel_for(pool, n, Coverage::task, &coverage);
      coverage.expectEachOnce();
    }
    attn_thread_pool_destroy(pool);
  }
}

// Guided chunks: each takes 1/(2 x threads) of the items left, at least
// one, so that a causal kernel's costly last query tiles are handed out one
// at a time and the threads finish together.
TEST(ThreadPool, ChunksShrinkToSingleItems) {
  struct Chunks {
    std::mutex lock;
    std::vector<std::pair<int64_t, int64_t>> taken;
    static void task(void *ctx, int64_t begin, int64_t end) {
      auto *self = static_cast<Chunks *>(ctx);
      std::lock_guard<std::mutex> guard(self->lock);
      self->taken.emplace_back(begin, end);
    }
  };
  for (int32_t threads : {2, 3}) {
    attn_thread_pool *pool = nullptr;
    ASSERT_EQ(attn_thread_pool_create(threads, &pool), ATTN_OK);
    const int64_t n = 256;
    Chunks chunks;
    attn_thread_pool_parallel_for(pool, n, Chunks::task, &chunks);
    std::sort(chunks.taken.begin(), chunks.taken.end());
    int64_t next = 0;
    for (auto [begin, end] : chunks.taken) {
      ASSERT_EQ(begin, next);
      EXPECT_EQ(end - begin, std::max<int64_t>(1, (n - begin) / (2 * threads)))
          << "threads " << threads << ", chunk at " << begin;
      next = end;
    }
    EXPECT_EQ(next, n);
    EXPECT_EQ(chunks.taken.front().second, n / (2 * threads));
    EXPECT_EQ(chunks.taken.back().second - chunks.taken.back().first, 1);
    attn_thread_pool_destroy(pool);
  }
}

TEST(ThreadPool, DefaultSizeIsOnlineCores) {
  attn_thread_pool *pool = nullptr;
  ASSERT_EQ(attn_thread_pool_create(0, &pool), ATTN_OK);
  EXPECT_EQ(attn_thread_pool_size(pool), sysconf(_SC_NPROCESSORS_ONLN));
  attn_thread_pool_destroy(pool);
}

TEST(ThreadPool, NullPoolRunsInline) {
  Coverage coverage(7);
  int calls = 0;
  struct Context {
    Coverage *coverage;
    int *calls;
  } context{&coverage, &calls};
  attn_thread_pool_parallel_for(
      nullptr, 7,
      [](void *raw, int64_t begin, int64_t end) {
        auto *c = static_cast<Context *>(raw);
        ++*c->calls;
        Coverage::task(c->coverage, begin, end);
      },
      &context);
  EXPECT_EQ(calls, 1);
  coverage.expectEachOnce();
}

TEST(ThreadPool, ConcurrentCallersFromEightThreads) {
  attn_thread_pool *pool = nullptr;
  ASSERT_EQ(attn_thread_pool_create(4, &pool), ATTN_OK);
  std::vector<std::thread> callers;
  for (int t = 0; t < 8; ++t)
    callers.emplace_back([pool, t] {
      for (int repeat = 0; repeat < 20; ++repeat) {
        Coverage coverage(100 + t * 37 + repeat);
        attn_thread_pool_parallel_for(pool, coverage.hits.size(),
                                      Coverage::task, &coverage);
        coverage.expectEachOnce();
      }
    });
  for (std::thread &t : callers)
    t.join();
  attn_thread_pool_destroy(pool);
}

TEST(ThreadPool, NestedParallelForDoesNotDeadlock) {
  attn_thread_pool *pool = nullptr;
  ASSERT_EQ(attn_thread_pool_create(2, &pool), ATTN_OK);
  struct Outer {
    attn_thread_pool *pool;
    std::atomic<int64_t> inner{0};
  } outer{pool};
  attn_thread_pool_parallel_for(
      pool, 16,
      [](void *raw, int64_t begin, int64_t end) {
        auto *o = static_cast<Outer *>(raw);
        for (int64_t i = begin; i < end; ++i) {
          Coverage coverage(50);
          attn_thread_pool_parallel_for(o->pool, 50, Coverage::task, &coverage);
          coverage.expectEachOnce();
          o->inner += 50;
        }
      },
      &outer);
  EXPECT_EQ(outer.inner.load(), 16 * 50);
  attn_thread_pool_destroy(pool);
}

// A pool on a team someone else owns: a fork-join over std::threads, which
// records how many threads each call asked for and may run fewer (a team
// inside a nested parallel region has one thread, the caller).
struct Team {
  int32_t largest = 0; // at most this many threads per call
  std::atomic<int> calls{0};
  std::atomic<int32_t> asked{0};
  static void run(void *ctx, int32_t threads, attn_team_fn fn, void *fnCtx) {
    auto *self = static_cast<Team *>(ctx);
    ++self->calls;
    self->asked = threads;
    int32_t team = std::min(threads, self->largest);
    std::vector<std::thread> others;
    for (int32_t t = 1; t < team; ++t)
      others.emplace_back([fn, fnCtx] { fn(fnCtx); });
    fn(fnCtx);
    for (std::thread &t : others)
      t.join();
  }
};

TEST(ThreadPool, OnATeamCoversEveryIndexOnce) {
  for (int32_t largest : {1, 3, 8}) {
    Team team;
    team.largest = largest;
    attn_thread_pool *pool = nullptr;
    ASSERT_EQ(attn_thread_pool_create_on_team(4, Team::run, &team, &pool),
              ATTN_OK);
    EXPECT_EQ(attn_thread_pool_size(pool), 4);
    for (int64_t n : {0, 1, 3, 1000}) {
      SCOPED_TRACE("team of at most " + std::to_string(largest) + ", n " +
                   std::to_string(n));
      int callsBefore = team.calls;
      Coverage coverage(n);
      attn_thread_pool_parallel_for(pool, n, Coverage::task, &coverage);
      coverage.expectEachOnce();
      // One item or none runs inline; more ask for no more threads than
      // there are items.
      EXPECT_EQ(team.calls - callsBefore, n > 1 ? 1 : 0);
      if (n > 1)
        EXPECT_EQ(team.asked.load(), std::min<int64_t>(n, 4));
    }
    attn_thread_pool_destroy(pool);
  }
}

TEST(ThreadPool, CppPoolOnATeam) {
  Team team;
  team.largest = 3;
  attn::ThreadPool pool = attn::ThreadPool::onTeam(3, Team::run, &team);
  EXPECT_EQ(pool.size(), 3);
  std::atomic<int64_t> sum{0};
  pool.parallelFor(100, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      sum += i;
  });
  EXPECT_EQ(sum.load(), 99 * 100 / 2);
  EXPECT_EQ(team.calls.load(), 1);
  EXPECT_THROW(attn::ThreadPool::onTeam(0, Team::run, &team), attn::Error);
}

TEST(ThreadPool, OnATeamOfOneRunsInline) {
  Team team;
  team.largest = 8;
  attn_thread_pool *pool = nullptr;
  ASSERT_EQ(attn_thread_pool_create_on_team(1, Team::run, &team, &pool),
            ATTN_OK);
  Coverage coverage(100);
  attn_thread_pool_parallel_for(pool, 100, Coverage::task, &coverage);
  coverage.expectEachOnce();
  EXPECT_EQ(team.calls.load(), 0);
  attn_thread_pool_destroy(pool);
}

TEST(ThreadPool, OnATeamRefusesBadArguments) {
  Team team;
  attn_thread_pool *pool = reinterpret_cast<attn_thread_pool *>(&team);
  EXPECT_EQ(attn_thread_pool_create_on_team(0, Team::run, &team, &pool),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(pool, nullptr);
  EXPECT_NE(std::string(attn_last_error()).find("num_threads is 0"),
            std::string::npos)
      << attn_last_error();
  EXPECT_EQ(attn_thread_pool_create_on_team(2, nullptr, &team, &pool),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(attn_thread_pool_create_on_team(2, Team::run, &team, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
}

//===----------------------------------------------------------------------===//
// Unloading while a call runs
//===----------------------------------------------------------------------===//

std::atomic<bool> blockingStarted{false};
std::atomic<bool> blockingRelease{false};

int64_t blockingWorkItems(const attn_kernel_args *) { return 1; }
void blockingRun(const attn_kernel_args *, int64_t, int64_t) {
  blockingStarted = true;
  while (!blockingRelease)
    std::this_thread::yield();
}

TEST(Module, UnloadRefusedWhileCallIsActive) {
  blockingStarted = false;
  blockingRelease = false;
  LinkedLibrary linked;
  linked.desc.name = "blocking";
  linked.desc.work_items = blockingWorkItems;
  linked.desc.run = blockingRun;
  attn_module *module = nullptr;
  ASSERT_EQ(linked.load(&module), ATTN_OK) << attn_last_error();
  const attn_kernel_desc *desc = attn_module_kernel(module, 0);

  Problem p(desc, 1, 1, 1, 1, 1);
  attn_status status = ATTN_ERROR_INTERNAL;
  std::thread caller([&] { status = p.run(desc); });
  while (!blockingStarted)
    std::this_thread::yield();

  EXPECT_EQ(attn_module_unload(module), ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attn_last_error())
                .find("cannot unload while 1 call(s) on its kernels are "
                      "running"),
            std::string::npos)
      << attn_last_error();

  blockingRelease = true;
  caller.join();
  EXPECT_EQ(status, ATTN_OK);
  EXPECT_EQ(attn_module_unload(module), ATTN_OK) << attn_last_error();
}

TEST(Module, UnloadTwiceIsRefused) {
  LinkedLibrary linked;
  attn_module *module = nullptr;
  ASSERT_EQ(linked.load(&module), ATTN_OK) << attn_last_error();
  // Another live module, so that the registry is not empty.
  attn_module *other = nullptr;
  ASSERT_EQ(linked.load(&other), ATTN_OK) << attn_last_error();
  ASSERT_EQ(attn_module_unload(module), ATTN_OK);
  EXPECT_EQ(attn_module_unload(module), ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attn_last_error()).find("not a loaded module"),
            std::string::npos)
      << attn_last_error();
  EXPECT_EQ(attn_module_unload(other), ATTN_OK);
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(Errors, LastErrorIsPerThread) {
  attn_module *module = nullptr;
  ASSERT_EQ(attn_module_load("/nonexistent.so", &module), ATTN_ERROR_LOAD);
  std::string other = "unset";
  std::thread([&] { other = attn_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(attn_last_error()), "");
}

TEST(Errors, StatusNames) {
  EXPECT_STREQ(attn_status_name(ATTN_OK), "ATTN_OK");
  EXPECT_STREQ(attn_status_name(ATTN_ERROR_UNSUPPORTED_CPU),
               "ATTN_ERROR_UNSUPPORTED_CPU");
  EXPECT_STREQ(attn_status_name(static_cast<attn_status>(99)),
               "ATTN_ERROR_UNKNOWN");
}

//===----------------------------------------------------------------------===//
// C++ wrapper
//===----------------------------------------------------------------------===//

TEST(Cpp, LoadFindRunAndErrors) {
  attn::Module module = attn::Module::load(ATTN_FAKE_KERNELS_PATH);
  EXPECT_EQ(module.size(), 7);
  EXPECT_EQ(module.kernels().size(), 7u);
  attn::Kernel kernel = module.find("fake_plain");
  EXPECT_EQ(kernel.name(), "fake_plain");
  EXPECT_TRUE(kernel.supportedOnThisCpu());

  const int64_t B = 1, H = 2, Sq = 3, Sk = 4, D = 4;
  std::vector<float> q(B * H * Sq * D, 0.25f), k(B * H * Sk * D, 0.5f),
      v(B * H * Sk * D, 1.5f), o(B * H * Sq * D, kNaN), lse(B * H * Sq, kNaN);
  attn::Tensor Q = attn::Tensor::contiguous(q.data(), ATTN_F32, {B, H, Sq, D});
  attn::Tensor K = attn::Tensor::contiguous(k.data(), ATTN_F32, {B, H, Sk, D});
  attn::Tensor V = attn::Tensor::contiguous(v.data(), ATTN_F32, {B, H, Sk, D});
  attn::Tensor O = attn::Tensor::contiguous(o.data(), ATTN_F32, {B, H, Sq, D});
  attn::Tensor L =
      attn::Tensor::strided(lse.data(), ATTN_F32, {B, H, Sq}, {H * Sq, Sq, 1});
  attn::ThreadPool pool(2);
  kernel.run(Q, K, V, O, nullptr, &L, &pool);
  // Equal keys: uniform attention, O = mean(V) = 1.5, LSE = s + log(Sk).
  for (float x : o)
    EXPECT_FLOAT_EQ(x, 1.5f);
  for (float x : lse)
    EXPECT_NEAR(x, 0.5f * 4 * 0.25f * 0.5f + std::log(4.0f), 1e-6);

  // A prefill kernel has no key split: 1 runs it whole, 2 is refused.
  EXPECT_FALSE(kernel.hasKeySplit());
  kernel.runSplit(Q, K, V, O, 1, nullptr, &L, &pool);
  EXPECT_FLOAT_EQ(o[0], 1.5f);
  EXPECT_THROW(kernel.runSplit(Q, K, V, O, 2, nullptr, &L, &pool), attn::Error);

  // Sinks through runWith: -inf ones change nothing; without them the
  // sinks kernel refuses the call.
  attn::Kernel sinks = module.find("fake_sinks");
  EXPECT_TRUE(sinks.hasSinks());
  EXPECT_FALSE(kernel.hasSinks());
  std::vector<float> none(H, -std::numeric_limits<float>::infinity());
  attn::Tensor S = attn::Tensor::contiguous(none.data(), ATTN_F32, {H});
  attn::Kernel::RunOptions options;
  options.sinks = &S;
  std::fill(o.begin(), o.end(), kNaN);
  sinks.runWith(Q, K, V, O, options, nullptr, &L, &pool);
  EXPECT_FLOAT_EQ(o[0], 1.5f);
  EXPECT_THROW(sinks.run(Q, K, V, O, nullptr, &L), attn::Error);
  EXPECT_THROW(kernel.runWith(Q, K, V, O, options, nullptr, &L), attn::Error);

  try {
    kernel.run(Q, K, V, O); // no LSE
    FAIL() << "expected attn::Error";
  } catch (const attn::Error &e) {
    EXPECT_EQ(e.status(), ATTN_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(e.message().find("lse is NULL"), std::string::npos)
        << e.message();
    EXPECT_NE(std::string(e.what()).find("ATTN_ERROR_INVALID_ARGUMENT"),
              std::string::npos);
  }
  try {
    module.find("missing");
    FAIL() << "expected attn::Error";
  } catch (const attn::Error &e) {
    EXPECT_EQ(e.status(), ATTN_ERROR_NOT_FOUND);
  }
  EXPECT_THROW(attn::Module::load("/nonexistent.so"), attn::Error);
  EXPECT_THROW(module.kernel(99), attn::Error);
  module.unload();
}

TEST(Cpp, ParallelForRethrowsTaskException) {
  attn::ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(500);
  pool.parallelFor(500, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      ++hits[static_cast<size_t>(i)];
  });
  for (auto &h : hits)
    EXPECT_EQ(h.load(), 1);
  EXPECT_THROW(pool.parallelFor(100,
                                [](int64_t begin, int64_t) {
                                  if (begin == 0)
                                    throw std::runtime_error("boom");
                                }),
               std::runtime_error);
  attn::ThreadPool moved = std::move(pool);
  EXPECT_EQ(moved.size(), 3);
}

} // namespace
