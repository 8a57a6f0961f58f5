//===- attn_ext.cpp - The attn runtime as a Python extension (nanobind) ---===//
//
// `attn._ext`: the C runtime (runtime/include/attn/runtime.h) seen from
// Python. It loads kernel libraries made by attn-compile and runs a kernel on
// any CPU tensor that speaks DLPack or the buffer protocol (NumPy arrays,
// PyTorch tensors), zero-copy and with the caller's strides: a [B, S, H, D]
// buffer viewed as [B, H, S, D] reaches the kernel as it is. A GPU kernel
// takes tensors on GPU 0 (DLPack's CUDA device 0) and is queued on the
// caller's CUDA stream. Every check is the runtime's; its refusals become
// `attn._ext.Error` (a ValueError) with the runtime's message. CPU calls run
// with the GIL released on the process's OpenMP team when an OpenMP runtime
// is loaded (PyTorch's: its CPU operators run there), else on attn's own
// process-wide pool (all cores).
//
// Deciding which kernel a call needs, compiling and caching it is the Python
// package's job (python/attn/_cache.py); this file holds no policy.
//
//===----------------------------------------------------------------------===//

#include "attn/runtime.hpp"

#include <dlfcn.h>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace nb = nanobind;

namespace {

//===----------------------------------------------------------------------===//
// Threads: the process's OpenMP team, else attn's own pool
//===----------------------------------------------------------------------===//
//
// PyTorch runs its CPU operators on an OpenMP team (ATen's parallel backend
// in its Linux wheels), whose threads spin for a while after each operator
// before they sleep. A pool of attn's own would compete with those spinning
// threads for the cores during the next call (a decoding step alternates
// small PyTorch operators and attn calls: the attention ran 1.5x slower than
// alone). So when an OpenMP runtime is loaded in the process, attn's work runs
// on that same team through GOMP_parallel (libgomp's entry point, which
// LLVM's and Intel's runtimes provide too), with as many threads as the
// calling thread's OpenMP setting (torch.set_num_threads sets it), unless
// ATTN_NUM_THREADS says otherwise. ATTN_POOL=attn keeps attn's own pool;
// ATTN_POOL=openmp requires the team.

using GompParallel = void (*)(void (*)(void *), void *, unsigned, unsigned);
using OmpGetMaxThreads = int (*)();

struct OpenMP {
  GompParallel parallel = nullptr;
  OmpGetMaxThreads maxThreads = nullptr;
};

void runOnOpenMP(void *team, int32_t threads, attn_team_fn fn, void *ctx) {
  static_cast<OpenMP *>(team)->parallel(fn, ctx, static_cast<unsigned>(threads),
                                        0);
}

std::mutex poolLock;
attn_thread_pool *ownPool = nullptr;
OpenMP openmp;
/// In a child forked from a process whose OpenMP team had started, GNU
/// OpenMP hangs at its next parallel region (PyTorch's own operators too):
/// a forked child runs on a pool of attn's own, as before the fork.
bool forkedChild = false;
/// Pools on the OpenMP team, by thread count (they own no thread; a few at
/// most over a process's life, never freed: a call in flight may hold one).
std::vector<std::pair<int32_t, attn_thread_pool *>> teamPools;

int32_t parseThreads(const char *name) {
  const char *text = std::getenv(name);
  if (!text || !*text)
    return 0;
  char *end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value <= 0 || value > 4096)
    throw attn::Error(ATTN_ERROR_INVALID_ARGUMENT,
                      std::string(name) + " is '" + text +
                          "' but must be a thread count between 1 and 4096");
  return static_cast<int32_t>(value);
}

enum class PoolChoice { Auto, Attn, OpenMP };

PoolChoice requestedPool() {
  const char *text = std::getenv("ATTN_POOL");
  std::string value = text ? text : "";
  if (value.empty() || value == "auto")
    return PoolChoice::Auto;
  if (value == "attn")
    return PoolChoice::Attn;
  if (value == "openmp")
    return PoolChoice::OpenMP;
  throw attn::Error(ATTN_ERROR_INVALID_ARGUMENT,
                    "ATTN_POOL is '" + value +
                        "' but must be 'auto', 'attn' or 'openmp'");
}

/// Looks for a loaded OpenMP runtime until one is found (PyTorch may be
/// imported after attn's first call). Call with poolLock held.
bool findOpenMP() {
  if (!openmp.parallel) {
    void *parallel = dlsym(RTLD_DEFAULT, "GOMP_parallel");
    void *maxThreads = dlsym(RTLD_DEFAULT, "omp_get_max_threads");
    if (parallel && maxThreads) {
      openmp.maxThreads = reinterpret_cast<OmpGetMaxThreads>(maxThreads);
      openmp.parallel = reinterpret_cast<GompParallel>(parallel);
    }
  }
  return openmp.parallel != nullptr;
}

attn_thread_pool *teamPool(int32_t threads) {
  for (auto &[size, pool] : teamPools)
    if (size == threads)
      return pool;
  attn_thread_pool *pool = nullptr;
  attn::check(
      attn_thread_pool_create_on_team(threads, runOnOpenMP, &openmp, &pool));
  teamPools.emplace_back(threads, pool);
  return pool;
}

/// The pool a CPU call runs on, decided per call (ATTN_POOL, whether an
/// OpenMP runtime is loaded, the caller's OpenMP thread count, which also
/// sizes attn's own pool when it is made: a DataLoader worker, forked and set
/// to one thread by PyTorch, runs attn on one thread too).
attn_thread_pool *sharedPool() {
  PoolChoice choice = requestedPool();
  int32_t threads = parseThreads("ATTN_NUM_THREADS");
  std::lock_guard<std::mutex> guard(poolLock);
  bool haveOpenMP = findOpenMP();
  if (!threads && haveOpenMP)
    threads = std::max(1, std::min(openmp.maxThreads(), 4096));
  if (haveOpenMP && choice != PoolChoice::Attn && !forkedChild)
    return teamPool(threads);
  if (choice == PoolChoice::OpenMP && !haveOpenMP)
    throw attn::Error(ATTN_ERROR_INVALID_ARGUMENT,
                      "ATTN_POOL is 'openmp' but no OpenMP runtime is loaded "
                      "in this process (import torch first, or unset "
                      "ATTN_POOL)");
  if (!ownPool)
    attn::check(attn_thread_pool_create(threads, &ownPool));
  return ownPool;
}

/// Which pool CPU calls run on now: "openmp" or "attn".
std::string poolKind() {
  attn_thread_pool *pool = sharedPool();
  std::lock_guard<std::mutex> guard(poolLock);
  return pool == ownPool ? "attn" : "openmp";
}

//===----------------------------------------------------------------------===//
// Tensors: DLPack / buffer-protocol arrays to attn_tensor
//===----------------------------------------------------------------------===//

using InputArray = nb::ndarray<nb::ro>;
using OutputArray = nb::ndarray<>;

const char *dtypeText(nb::dlpack::dtype dtype) {
  using Code = nb::dlpack::dtype_code;
  switch (static_cast<Code>(dtype.code)) {
  case Code::Int:
    return "an integer type";
  case Code::UInt:
    return "an unsigned integer type";
  case Code::Float:
    return dtype.bits == 64 ? "float64" : "a float type";
  case Code::Complex:
    return "a complex type";
  default:
    return "an unsupported type";
  }
}

/// Where a DLPack array lives, in PyTorch's words ("cpu", "cuda:1", ...).
template <typename Array> std::string deviceText(const Array &array) {
  if (array.device_type() == nb::device::cpu::value)
    return "the CPU";
  if (array.device_type() == nb::device::cuda::value)
    return "cuda:" + std::to_string(array.device_id());
  return "DLPack device type " + std::to_string(array.device_type());
}

/// `array` as an attn_tensor for `role`; `integers`: int32 and int64 are
/// accepted too (a modifier's captured tensors). `gpu`: the kernel runs on
/// GPU 0, so the tensor must be there (else on the CPU).
template <typename Array>
attn_tensor toTensor(const Array &array, const std::string &role,
                     bool integers = false, bool gpu = false) {
  bool onCpu = array.device_type() == nb::device::cpu::value;
  bool onGpu0 =
      array.device_type() == nb::device::cuda::value && array.device_id() == 0;
  if (gpu ? !onGpu0 : !onCpu)
    throw attn::Error(ATTN_ERROR_INVALID_ARGUMENT,
                      std::string(role) + ": tensor is on " +
                          deviceText(array) + " but the kernel runs on " +
                          (gpu ? "the GPU (cuda:0)" : "the CPU"));
  if (array.ndim() > 4)
    throw attn::Error(ATTN_ERROR_INVALID_ARGUMENT,
                      std::string(role) + ": rank is " +
                          std::to_string(array.ndim()) +
                          " but attn tensors have at most 4 dims");
  attn_tensor tensor{};
  nb::dlpack::dtype dtype = array.dtype();
  using Code = nb::dlpack::dtype_code;
  if (dtype.lanes != 1)
    throw attn::Error(ATTN_ERROR_INVALID_ARGUMENT,
                      std::string(role) + ": vector element types (" +
                          std::to_string(dtype.lanes) +
                          " lanes) are not supported");
  if (dtype.code == static_cast<uint8_t>(Code::Float) && dtype.bits == 32)
    tensor.dtype = ATTN_F32;
  else if (dtype.code == static_cast<uint8_t>(Code::Float) && dtype.bits == 16)
    tensor.dtype = ATTN_F16;
  else if (dtype.code == static_cast<uint8_t>(Code::Bfloat) && dtype.bits == 16)
    tensor.dtype = ATTN_BF16;
  else if (dtype.code == static_cast<uint8_t>(Code::Bool) && dtype.bits == 8)
    tensor.dtype = ATTN_BOOL;
  else if (integers && dtype.code == static_cast<uint8_t>(Code::Int) &&
           (dtype.bits == 32 || dtype.bits == 64))
    tensor.dtype = dtype.bits == 32 ? ATTN_I32 : ATTN_I64;
  else
    throw attn::Error(
        ATTN_ERROR_INVALID_ARGUMENT,
        std::string(role) + ": element type is " + dtypeText(dtype) + " (" +
            std::to_string(dtype.bits) + " bits) but attn takes " +
            (integers ? "float32, bool, int32 or int64 for captured tensors"
                      : "float32, float16, bfloat16 (and bool for masks)"));
  tensor.data = const_cast<void *>(static_cast<const void *>(array.data()));
  tensor.rank = static_cast<int32_t>(array.ndim());
  const int64_t *strides = array.stride_ptr();
  int64_t contiguous = 1;
  for (int d = tensor.rank - 1; d >= 0; --d) {
    tensor.shape[d] = static_cast<int64_t>(array.shape(d));
    // DLPack allows NULL strides for a compact row-major tensor.
    tensor.strides[d] = strides ? strides[d] : contiguous;
    contiguous *= tensor.shape[d] > 1 ? tensor.shape[d] : 1;
  }
  return tensor;
}

/// The tensors a kernel's modifiers capture, in the order of its op's
/// captures(...).
struct Captures {
  std::vector<attn_tensor> tensors;

  Captures(const std::vector<InputArray> &arrays, bool gpu = false) {
    for (size_t i = 0; i < arrays.size(); ++i)
      tensors.push_back(toTensor(arrays[i],
                                 "captures[" + std::to_string(i) + "]",
                                 /*integers=*/true, gpu));
  }
  void into(attn_run_options &options) const {
    options.captures = tensors.empty() ? nullptr : tensors.data();
    options.num_captures = static_cast<int32_t>(tensors.size());
  }
};

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// A kernel of a loaded library; it keeps the library loaded.
struct PyKernel {
  std::shared_ptr<attn::Module> module;
  attn::Kernel kernel;

  const attn_kernel_desc &desc() const { return kernel.desc(); }
  bool onGpu() const {
    return attn_kernel_device(kernel.get()) == ATTN_DEVICE_CUDA;
  }

  void run(const InputArray &query, const InputArray &key,
           const InputArray &value, const std::optional<InputArray> &mask,
           const OutputArray &output, const std::optional<OutputArray> &lse,
           float dropoutP, uint64_t dropoutSeed,
           const std::optional<InputArray> &sinks,
           const std::vector<InputArray> &captures, uintptr_t stream) const {
    bool gpu = onGpu();
    attn_tensor q = toTensor(query, "query", false, gpu);
    attn_tensor k = toTensor(key, "key", false, gpu);
    attn_tensor v = toTensor(value, "value", false, gpu);
    attn_tensor o = toTensor(output, "output", false, gpu);
    attn_tensor m{}, l{}, s{};
    if (mask)
      m = toTensor(*mask, "mask", false, gpu);
    if (lse)
      l = toTensor(*lse, "lse", false, gpu);
    if (sinks)
      s = toTensor(*sinks, "sinks", false, gpu);
    attn_run_options options{};
    options.struct_size = sizeof(options);
    options.sinks = sinks ? &s : nullptr;
    Captures captured(captures, gpu);
    captured.into(options);
    options.dropout_p = dropoutP;
    options.dropout_seed = dropoutSeed;
    options.cuda_stream = reinterpret_cast<void *>(stream);
    attn_thread_pool *threads = gpu ? nullptr : sharedPool();
    attn_status status;
    {
      // The arrays stay referenced by the caller's frame; no Python object is
      // touched while the kernel runs.
      nb::gil_scoped_release release;
      status = attn_run_with(kernel.get(), &q, &k, &v, mask ? &m : nullptr, &o,
                             lse ? &l : nullptr, &options, threads);
    }
    attn::check(status);
  }

  /// A backward kernel's call: the forward's tensors (O and LSE read), dO,
  /// dLSE (None unless the kernel takes it), and dQ, dK, dV to write; a GPU
  /// kernel's on cuda:0, queued on `stream`.
  void runBackward(
      const InputArray &query, const InputArray &key, const InputArray &value,
      const std::optional<InputArray> &mask, const InputArray &output,
      const InputArray &lse, const InputArray &gradOutput,
      const std::optional<InputArray> &gradLse, const OutputArray &gradQuery,
      const OutputArray &gradKey, const OutputArray &gradValue, float dropoutP,
      uint64_t dropoutSeed, const std::optional<OutputArray> &gradMask,
      const std::vector<InputArray> &captures,
      const std::vector<OutputArray> &gradCaptures, uintptr_t stream) const {
    bool gpu = onGpu();
    attn_tensor q = toTensor(query, "query", false, gpu);
    attn_tensor k = toTensor(key, "key", false, gpu);
    attn_tensor v = toTensor(value, "value", false, gpu);
    attn_tensor o = toTensor(output, "output", false, gpu);
    attn_tensor l = toTensor(lse, "lse", false, gpu);
    attn_tensor dO = toTensor(gradOutput, "grad_output", false, gpu);
    attn_tensor dQ = toTensor(gradQuery, "grad_query", false, gpu);
    attn_tensor dK = toTensor(gradKey, "grad_key", false, gpu);
    attn_tensor dV = toTensor(gradValue, "grad_value", false, gpu);
    attn_tensor m{}, dL{}, dM{};
    if (mask)
      m = toTensor(*mask, "mask", false, gpu);
    if (gradLse)
      dL = toTensor(*gradLse, "grad_lse", false, gpu);
    if (gradMask)
      dM = toTensor(*gradMask, "grad_mask", false, gpu);
    attn_run_options options{};
    options.struct_size = sizeof(options);
    options.dropout_p = dropoutP;
    options.dropout_seed = dropoutSeed;
    options.grad_mask = gradMask ? &dM : nullptr;
    options.cuda_stream = reinterpret_cast<void *>(stream);
    Captures captured(captures, gpu);
    captured.into(options);
    // The partials, in capture order, at their captures' places.
    uint32_t bits = attn_kernel_grad_captures(kernel.get());
    std::vector<attn_tensor> partials(captures.size());
    size_t next = 0;
    for (size_t n = 0; n < captures.size() && n < 32; ++n) {
      if (!(bits & (1u << n)))
        continue;
      if (next < gradCaptures.size())
        partials[n] = toTensor(gradCaptures[next],
                               "grad_captures[" + std::to_string(next) + "]");
      ++next;
    }
    if (gradCaptures.size() != next)
      throw attn::Error(
          ATTN_ERROR_INVALID_ARGUMENT,
          "grad_captures: kernel '" + std::string(desc().name) + "' writes " +
              std::to_string(next) + " captured tensors' gradients but " +
              std::to_string(gradCaptures.size()) + " were given");
    if (next > 0)
      options.grad_captures = partials.data();
    attn_thread_pool *threads = gpu ? nullptr : sharedPool();
    attn_status status;
    {
      nb::gil_scoped_release release;
      status = attn_run_backward_with(
          kernel.get(), &q, &k, &v, mask ? &m : nullptr, &o, &l, &dO,
          gradLse ? &dL : nullptr, &dQ, &dK, &dV, &options, threads);
    }
    attn::check(status);
  }

  /// A weights kernel's call: Q, K, the mask and the forward's LSE (None
  /// unless the kernel reads one), and W [B, Hq, Sq, Sk] f32 to write.
  void runWeights(const InputArray &query, const InputArray &key,
                  const std::optional<InputArray> &mask,
                  const std::optional<InputArray> &lse,
                  const OutputArray &weights, float dropoutP,
                  uint64_t dropoutSeed,
                  const std::vector<InputArray> &captures) const {
    attn_tensor q = toTensor(query, "query");
    attn_tensor k = toTensor(key, "key");
    attn_tensor w = toTensor(weights, "weights");
    attn_tensor m{}, l{};
    if (mask)
      m = toTensor(*mask, "mask");
    if (lse)
      l = toTensor(*lse, "lse");
    attn_run_options options{};
    options.struct_size = sizeof(options);
    options.dropout_p = dropoutP;
    options.dropout_seed = dropoutSeed;
    Captures captured(captures);
    captured.into(options);
    attn_thread_pool *threads = sharedPool();
    attn_status status;
    {
      nb::gil_scoped_release release;
      status = attn_run_weights_with(kernel.get(), &q, &k, mask ? &m : nullptr,
                                     lse ? &l : nullptr, &w, &options, threads);
    }
    attn::check(status);
  }

  /// Fills the block table of a call of B, Hq, Sq, Sk from the kernel's own
  /// mask_mod (attn_fill_block_table): `captures` are the others its
  /// modifiers read, `table` is written in its place among them.
  void fillBlockTable(int64_t batch, int64_t headsQ, int64_t seqQ, int64_t seqK,
                      const std::vector<InputArray> &captures,
                      const OutputArray &table) const {
    Captures captured(captures);
    attn_tensor t = toTensor(table, "table", /*integers=*/true);
    if (attn_kernel_has_block_table(kernel.get())) {
      size_t at = static_cast<size_t>(kernel.get()->block_table_capture);
      captured.tensors.insert(captured.tensors.begin() +
                                  static_cast<std::ptrdiff_t>(
                                      std::min(at, captured.tensors.size())),
                              t);
    }
    attn_thread_pool *threads = sharedPool();
    attn_status status;
    {
      nb::gil_scoped_release release;
      status = attn_fill_block_table(
          kernel.get(), batch, headsQ, seqQ, seqK,
          captured.tensors.empty() ? nullptr : captured.tensors.data(),
          static_cast<int32_t>(captured.tensors.size()), threads);
    }
    attn::check(status);
  }

  /// A linear attention kernel's call: Q, K, V, the initial state and
  /// normalizer (None unless the kernel reads them), O and the final state
  /// and normalizer to write (None likewise).
  void runLinear(const InputArray &query, const InputArray &key,
                 const InputArray &value,
                 const std::optional<InputArray> &initialState,
                 const std::optional<InputArray> &initialNormalizer,
                 const OutputArray &output,
                 const std::optional<OutputArray> &finalState,
                 const std::optional<OutputArray> &finalNormalizer) const {
    attn_tensor q = toTensor(query, "query");
    attn_tensor k = toTensor(key, "key");
    attn_tensor v = toTensor(value, "value");
    attn_tensor o = toTensor(output, "output");
    attn_tensor s0{}, z0{}, s1{}, z1{};
    if (initialState)
      s0 = toTensor(*initialState, "initial_state");
    if (initialNormalizer)
      z0 = toTensor(*initialNormalizer, "initial_normalizer");
    if (finalState)
      s1 = toTensor(*finalState, "final_state");
    if (finalNormalizer)
      z1 = toTensor(*finalNormalizer, "final_normalizer");
    attn_thread_pool *threads = sharedPool();
    attn_status status;
    {
      nb::gil_scoped_release release;
      status = attn_run_linear(
          kernel.get(), &q, &k, &v, initialState ? &s0 : nullptr,
          initialNormalizer ? &z0 : nullptr, &o, finalState ? &s1 : nullptr,
          finalNormalizer ? &z1 : nullptr, threads);
    }
    attn::check(status);
  }

  /// A linear attention backward kernel's call: the forward's Q, K, V, O,
  /// dO and final state (S, z), the final state's gradients (None unless
  /// the kernel reads them), dQ, dK, dV and the initial state's gradients
  /// to write (None likewise).
  void runLinearBackward(
      const InputArray &query, const InputArray &key, const InputArray &value,
      const InputArray &output, const InputArray &gradOutput,
      const InputArray &state, const InputArray &normalizer,
      const std::optional<InputArray> &gradFinalState,
      const std::optional<InputArray> &gradFinalNormalizer,
      const OutputArray &gradQuery, const OutputArray &gradKey,
      const OutputArray &gradValue,
      const std::optional<OutputArray> &gradInitialState,
      const std::optional<OutputArray> &gradInitialNormalizer) const {
    attn_tensor q = toTensor(query, "query");
    attn_tensor k = toTensor(key, "key");
    attn_tensor v = toTensor(value, "value");
    attn_tensor o = toTensor(output, "output");
    attn_tensor dO = toTensor(gradOutput, "grad_output");
    attn_tensor s = toTensor(state, "state");
    attn_tensor z = toTensor(normalizer, "normalizer");
    attn_tensor dq = toTensor(gradQuery, "grad_query");
    attn_tensor dk = toTensor(gradKey, "grad_key");
    attn_tensor dv = toTensor(gradValue, "grad_value");
    attn_tensor ds1{}, dz1{}, ds0{}, dz0{};
    if (gradFinalState)
      ds1 = toTensor(*gradFinalState, "grad_final_state");
    if (gradFinalNormalizer)
      dz1 = toTensor(*gradFinalNormalizer, "grad_final_normalizer");
    if (gradInitialState)
      ds0 = toTensor(*gradInitialState, "grad_initial_state");
    if (gradInitialNormalizer)
      dz0 = toTensor(*gradInitialNormalizer, "grad_initial_normalizer");
    attn_thread_pool *threads = sharedPool();
    attn_status status;
    {
      nb::gil_scoped_release release;
      status = attn_run_linear_backward(
          kernel.get(), &q, &k, &v, &o, &dO, &s, &z,
          gradFinalState ? &ds1 : nullptr, gradFinalNormalizer ? &dz1 : nullptr,
          &dq, &dk, &dv, gradInitialState ? &ds0 : nullptr,
          gradInitialNormalizer ? &dz0 : nullptr, threads);
    }
    attn::check(status);
  }

  /// An additive attention kernel's call: the query rows, keys, values,
  /// W_q, W_k, v, the keep-mask (None unless the kernel takes one), O and
  /// the weights to write (None unless the kernel writes them).
  void runAdditive(const InputArray &query, const InputArray &keys,
                   const InputArray &values, const InputArray &queryWeight,
                   const InputArray &keyWeight, const InputArray &scoreVector,
                   const std::optional<InputArray> &mask,
                   const OutputArray &output,
                   const std::optional<OutputArray> &weights) const {
    attn_tensor q = toTensor(query, "query");
    attn_tensor k = toTensor(keys, "keys");
    attn_tensor v = toTensor(values, "values");
    attn_tensor wq = toTensor(queryWeight, "query_weight");
    attn_tensor wk = toTensor(keyWeight, "key_weight");
    attn_tensor va = toTensor(scoreVector, "score_vector");
    attn_tensor o = toTensor(output, "output");
    attn_tensor m{}, w{};
    if (mask)
      m = toTensor(*mask, "mask");
    if (weights)
      w = toTensor(*weights, "weights");
    attn_thread_pool *threads = sharedPool();
    attn_status status;
    {
      nb::gil_scoped_release release;
      status = attn_run_additive(kernel.get(), &q, &k, &v, &wq, &wk, &va,
                                 mask ? &m : nullptr, &o,
                                 weights ? &w : nullptr, threads);
    }
    attn::check(status);
  }

  /// An additive attention backward kernel's call: the forward's inputs
  /// and network, the keep-mask (None unless the kernel takes one), dO, and
  /// the gradients to write (grad_qp and the parts' grad_kp, grad_values,
  /// grad_v).
  void runAdditiveBackward(
      const InputArray &query, const InputArray &keys, const InputArray &values,
      const InputArray &queryWeight, const InputArray &keyWeight,
      const InputArray &scoreVector, const std::optional<InputArray> &mask,
      const InputArray &gradOutput, const OutputArray &gradQp,
      const OutputArray &gradKp, const OutputArray &gradValues,
      const OutputArray &gradV) const {
    attn_tensor q = toTensor(query, "query");
    attn_tensor k = toTensor(keys, "keys");
    attn_tensor v = toTensor(values, "values");
    attn_tensor wq = toTensor(queryWeight, "query_weight");
    attn_tensor wk = toTensor(keyWeight, "key_weight");
    attn_tensor va = toTensor(scoreVector, "score_vector");
    attn_tensor dO = toTensor(gradOutput, "grad_output");
    attn_tensor dqp = toTensor(gradQp, "grad_qp");
    attn_tensor dkp = toTensor(gradKp, "grad_kp");
    attn_tensor dv = toTensor(gradValues, "grad_values");
    attn_tensor dva = toTensor(gradV, "grad_v");
    attn_tensor m{};
    if (mask)
      m = toTensor(*mask, "mask");
    attn_thread_pool *threads = sharedPool();
    attn_status status;
    {
      nb::gil_scoped_release release;
      status = attn_run_additive_backward(kernel.get(), &q, &k, &v, &wq, &wk,
                                          &va, mask ? &m : nullptr, &dO, &dqp,
                                          &dkp, &dv, &dva, threads);
    }
    attn::check(status);
  }

  /// A multi-head attention layer's call: the inputs, the projections'
  /// weights (W_q, W_k, W_v, W_o), the biases and the mask (None unless
  /// the kernel takes them), and the output to write.
  void runMha(const InputArray &query, const InputArray &key,
              const InputArray &value, const InputArray &queryWeight,
              const InputArray &keyWeight, const InputArray &valueWeight,
              const std::optional<InputArray> &inBias,
              const InputArray &outWeight,
              const std::optional<InputArray> &outBias,
              const std::optional<InputArray> &mask,
              const OutputArray &output) const {
    attn_tensor q = toTensor(query, "query");
    attn_tensor k = toTensor(key, "key");
    attn_tensor v = toTensor(value, "value");
    attn_tensor wq = toTensor(queryWeight, "query_weight");
    attn_tensor wk = toTensor(keyWeight, "key_weight");
    attn_tensor wv = toTensor(valueWeight, "value_weight");
    attn_tensor wo = toTensor(outWeight, "out_weight");
    attn_tensor o = toTensor(output, "output");
    attn_tensor bin{}, bout{}, m{};
    if (inBias)
      bin = toTensor(*inBias, "in_bias");
    if (outBias)
      bout = toTensor(*outBias, "out_bias");
    if (mask)
      m = toTensor(*mask, "mask");
    attn_thread_pool *threads = sharedPool();
    attn_status status;
    {
      nb::gil_scoped_release release;
      status = attn_run_mha(
          kernel.get(), &q, &k, &v, &wq, &wk, &wv, inBias ? &bin : nullptr, &wo,
          outBias ? &bout : nullptr, mask ? &m : nullptr, &o, threads);
    }
    attn::check(status);
  }
};

std::vector<PyKernel> loadLibrary(const std::string &path) {
  auto module = std::make_shared<attn::Module>(attn::Module::load(path));
  std::vector<PyKernel> kernels;
  for (const attn::Kernel &kernel : module->kernels())
    kernels.push_back(PyKernel{module, kernel});
  return kernels;
}

const char *dtypeName(int32_t dtype) {
  switch (dtype) {
  case ATTN_F32:
    return "f32";
  case ATTN_F16:
    return "f16";
  case ATTN_BF16:
    return "bf16";
  default:
    return "bool";
  }
}

} // namespace

NB_MODULE(_ext, m) {
  m.doc() = "The attn C runtime: load compiled kernel libraries and run them "
            "on DLPack tensors.";

  nb::exception<attn::Error>(m, "Error", PyExc_ValueError);

  nb::class_<PyKernel>(m, "Kernel",
                       "A compiled attention kernel of a loaded library.")
      .def_prop_ro("name", [](const PyKernel &k) { return k.kernel.name(); })
      .def_prop_ro("dtype",
                   [](const PyKernel &k) { return dtypeName(k.desc().dtype); })
      .def_prop_ro("head_dim",
                   [](const PyKernel &k) { return k.desc().head_dim; })
      .def_prop_ro("value_dim",
                   [](const PyKernel &k) { return k.desc().value_dim; })
      .def_prop_ro(
          "mask_kind",
          [](const PyKernel &k) {
            static const char *const kinds[] = {"none", "bool", "bias"};
            int32_t kind = k.desc().mask_kind;
            return kind >= 0 && kind <= 2 ? kinds[kind] : "?";
          })
      .def_prop_ro("causal",
                   [](const PyKernel &k) { return k.desc().causal != 0; })
      .def_prop_ro("has_lse",
                   [](const PyKernel &k) { return k.desc().has_lse != 0; })
      .def_prop_ro("scale", [](const PyKernel &k) { return k.desc().scale; })
      .def_prop_ro("softcap",
                   [](const PyKernel &k) { return k.desc().softcap; })
      .def_prop_ro("window",
                   [](const PyKernel &k) {
                     auto side = [](int64_t v) -> std::optional<int64_t> {
                       if (v == ATTN_UNBOUNDED)
                         return std::nullopt;
                       return v;
                     };
                     return std::make_pair(side(k.desc().window_left),
                                           side(k.desc().window_right));
                   })
      .def_prop_ro("target_cpu",
                   [](const PyKernel &k) {
                     return std::string(
                         k.desc().target_cpu ? k.desc().target_cpu : "");
                   })
      .def_prop_ro("target_features",
                   [](const PyKernel &k) {
                     return std::string(k.desc().target_features
                                            ? k.desc().target_features
                                            : "");
                   })
      .def(
          "supported_on_this_cpu",
          [](const PyKernel &k) { return k.kernel.supportedOnThisCpu(); },
          "Whether this CPU has every feature the kernel was compiled for.")
      .def_prop_ro("dropout",
                   [](const PyKernel &k) {
                     return attn_kernel_has_dropout(k.kernel.get()) != 0;
                   })
      .def_prop_ro("sinks",
                   [](const PyKernel &k) {
                     return attn_kernel_has_sinks(k.kernel.get()) != 0;
                   })
      .def_prop_ro("backward",
                   [](const PyKernel &k) {
                     return attn_kernel_kind_of(k.kernel.get()) ==
                            ATTN_KERNEL_BACKWARD;
                   })
      .def("run_backward", &PyKernel::runBackward, nb::arg("query").noconvert(),
           nb::arg("key").noconvert(), nb::arg("value").noconvert(),
           nb::arg("mask").noconvert().none(), nb::arg("output").noconvert(),
           nb::arg("lse").noconvert(), nb::arg("grad_output").noconvert(),
           nb::arg("grad_lse").noconvert().none(),
           nb::arg("grad_query").noconvert(), nb::arg("grad_key").noconvert(),
           nb::arg("grad_value").noconvert(), nb::arg("dropout_p") = 0.0f,
           nb::arg("dropout_seed") = 0,
           nb::arg("grad_mask").noconvert().none() = nb::none(),
           nb::arg("captures") = std::vector<InputArray>(),
           nb::arg("grad_captures") = std::vector<OutputArray>(),
           nb::arg("cuda_stream") = 0,
           "Runs a backward kernel: writes the gradients dQ, dK, dV of the "
           "forward whose inputs, O and LSE are given, for the incoming dO "
           "(and dLSE where the kernel takes it); with grad_captures (one "
           "[B * Hkv, N] f32 array per capture in the kernel's "
           "grad_captures, in order), each work item's partial gradient of "
           "those captures. A GPU kernel takes tensors on cuda:0 and is "
           "queued on `cuda_stream` (0: the default stream, waited for).")
      .def_prop_ro("grad_captures",
                   [](const PyKernel &k) {
                     std::vector<int> numbers;
                     uint32_t bits = attn_kernel_grad_captures(k.kernel.get());
                     for (int n = 0; n < 32; ++n)
                       if (bits & (1u << n))
                         numbers.push_back(n);
                     return numbers;
                   })
      .def_prop_ro("weights",
                   [](const PyKernel &k) {
                     return attn_kernel_kind_of(k.kernel.get()) ==
                            ATTN_KERNEL_WEIGHTS;
                   })
      .def("run_weights", &PyKernel::runWeights, nb::arg("query").noconvert(),
           nb::arg("key").noconvert(), nb::arg("mask").noconvert().none(),
           nb::arg("lse").noconvert().none(), nb::arg("weights").noconvert(),
           nb::arg("dropout_p") = 0.0f, nb::arg("dropout_seed") = 0,
           nb::arg("captures") = std::vector<InputArray>(),
           "Runs a weights kernel: writes the attention weights W [B, Hq, "
           "Sq, Sk] (f32) of the forward whose Q, K and mask are given, "
           "normalized by the forward's LSE where the kernel reads one.")
      .def("fill_block_table", &PyKernel::fillBlockTable, nb::arg("batch"),
           nb::arg("heads_q"), nb::arg("seq_q"), nb::arg("seq_k"),
           nb::arg("captures"), nb::arg("table").noconvert(),
           "Fills the block table (int32 [B or 1, Hq or 1, ceil(Sq/QB), "
           "ceil(Sk/KB)]) of a call of these sizes from the kernel's own "
           "mask_mod: 0 where a block keeps nothing, 2 where it keeps all, "
           "else 1. `captures`: the other tensors the modifiers read.")
      .def_prop_ro("has_block_table",
                   [](const PyKernel &k) {
                     return attn_kernel_has_block_table(k.kernel.get()) != 0;
                   })
      .def_prop_ro("linear",
                   [](const PyKernel &k) {
                     return attn_kernel_kind_of(k.kernel.get()) ==
                            ATTN_KERNEL_LINEAR;
                   })
      .def("run_linear", &PyKernel::runLinear, nb::arg("query").noconvert(),
           nb::arg("key").noconvert(), nb::arg("value").noconvert(),
           nb::arg("initial_state").noconvert().none(),
           nb::arg("initial_normalizer").noconvert().none(),
           nb::arg("output").noconvert(),
           nb::arg("final_state").noconvert().none(),
           nb::arg("final_normalizer").noconvert().none(),
           "Runs a linear attention kernel: writes O of Q, K, V (and, for a "
           "kernel with a state, the final state and normalizer from the "
           "initial ones).")
      .def("run_linear_backward", &PyKernel::runLinearBackward,
           nb::arg("query").noconvert(), nb::arg("key").noconvert(),
           nb::arg("value").noconvert(), nb::arg("output").noconvert(),
           nb::arg("grad_output").noconvert(), nb::arg("state").noconvert(),
           nb::arg("normalizer").noconvert(),
           nb::arg("grad_final_state").noconvert().none(),
           nb::arg("grad_final_normalizer").noconvert().none(),
           nb::arg("grad_query").noconvert(), nb::arg("grad_key").noconvert(),
           nb::arg("grad_value").noconvert(),
           nb::arg("grad_initial_state").noconvert().none(),
           nb::arg("grad_initial_normalizer").noconvert().none(),
           "Runs a linear attention backward kernel (non-causal): writes dQ, "
           "dK, dV (and, for a kernel with a state, the initial state's "
           "gradients) from the forward's Q, K, V, O, dO and final state.")
      .def_prop_ro("additive",
                   [](const PyKernel &k) {
                     return attn_kernel_kind_of(k.kernel.get()) ==
                            ATTN_KERNEL_ADDITIVE;
                   })
      .def("run_additive_backward", &PyKernel::runAdditiveBackward,
           nb::arg("query").noconvert(), nb::arg("keys").noconvert(),
           nb::arg("values").noconvert(), nb::arg("query_weight").noconvert(),
           nb::arg("key_weight").noconvert(),
           nb::arg("score_vector").noconvert(),
           nb::arg("mask").noconvert().none(),
           nb::arg("grad_output").noconvert(), nb::arg("grad_qp").noconvert(),
           nb::arg("grad_kp").noconvert(), nb::arg("grad_values").noconvert(),
           nb::arg("grad_v").noconvert(),
           "Runs an additive attention backward kernel: writes grad_qp [B, "
           "Sq, A] and, per part of the query rows (grad_kp's dim 1), "
           "grad_kp [B, P, Sk, A], grad_values [B, P, Sk, Dv] and grad_v "
           "[B, P, A] (f32) from the forward's inputs and dO.")
      .def("run_additive", &PyKernel::runAdditive, nb::arg("query").noconvert(),
           nb::arg("keys").noconvert(), nb::arg("values").noconvert(),
           nb::arg("query_weight").noconvert(),
           nb::arg("key_weight").noconvert(),
           nb::arg("score_vector").noconvert(),
           nb::arg("mask").noconvert().none(), nb::arg("output").noconvert(),
           nb::arg("weights").noconvert().none(),
           "Runs an additive attention kernel: writes O (and the weights, "
           "for a kernel that has them) of the query rows, keys, values and "
           "the scoring network W_q, W_k, v.")
      .def_prop_ro("mha",
                   [](const PyKernel &k) {
                     return attn_kernel_kind_of(k.kernel.get()) ==
                            ATTN_KERNEL_MHA;
                   })
      .def("run_mha", &PyKernel::runMha, nb::arg("query").noconvert(),
           nb::arg("key").noconvert(), nb::arg("value").noconvert(),
           nb::arg("query_weight").noconvert(),
           nb::arg("key_weight").noconvert(),
           nb::arg("value_weight").noconvert(),
           nb::arg("in_bias").noconvert().none(),
           nb::arg("out_weight").noconvert(),
           nb::arg("out_bias").noconvert().none(),
           nb::arg("mask").noconvert().none(), nb::arg("output").noconvert(),
           "Runs a multi-head attention layer: writes the output of the "
           "inputs through the projections, the attention and the output "
           "projection.")
      .def("run", &PyKernel::run, nb::arg("query").noconvert(),
           nb::arg("key").noconvert(), nb::arg("value").noconvert(),
           nb::arg("mask").noconvert().none(), nb::arg("output").noconvert(),
           nb::arg("lse").noconvert().none(), nb::arg("dropout_p") = 0.0f,
           nb::arg("dropout_seed") = 0,
           nb::arg("sinks").noconvert().none() = nb::none(),
           nb::arg("captures") = std::vector<InputArray>(),
           nb::arg("cuda_stream") = 0,
           "Checks the tensors against the kernel and runs it on the shared "
           "thread pool. Tensors are [B, H, S, D] with any strides; `mask`, "
           "`lse` and `sinks` ([Hq] f32) are None or tensors, as the kernel "
           "requires; `captures` the tensors its modifiers read. A GPU "
           "kernel takes tensors on cuda:0 and is queued on `cuda_stream` "
           "(a cudaStream_t as an int; 0: the default stream, and the call "
           "waits for the kernel).")
      .def_prop_ro("device",
                   [](const PyKernel &k) {
                     return std::string(k.onGpu() ? "cuda" : "cpu");
                   })
      .def_prop_ro("num_captures", [](const PyKernel &k) {
        return attn_kernel_num_captures(k.kernel.get());
      });

  m.def("load_library", &loadLibrary, nb::arg("path"),
        "Loads a kernel library made by attn-compile; returns its kernels.");
  m.def(
      "num_threads", [] { return attn_thread_pool_size(sharedPool()); },
      "How many threads a CPU call runs on: ATTN_NUM_THREADS, else the "
      "OpenMP team's size (torch.get_num_threads()) when the calls run on "
      "it, else all cores.");
  m.def("pool_kind", &poolKind,
        "Where CPU calls run: 'openmp' (the process's OpenMP team, "
        "PyTorch's) or 'attn' (attn's own pool); ATTN_POOL chooses.");
  m.def(
      "_forget_pool_after_fork",
      [] {
        // A forked child has none of the own pool's threads: leak the
        // parent's pool object rather than wait on threads that do not
        // exist; and it stays off the OpenMP team (see forkedChild).
        ownPool = nullptr;
        forkedChild = true;
      },
      "Used by os.register_at_fork; not public.");
}
