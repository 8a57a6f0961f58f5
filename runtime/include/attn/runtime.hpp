//===- runtime.hpp - C++ wrapper of the attn runtime ------------*- C++ -*-===//
//
// Header-only C++17 over runtime.h: RAII for modules and thread pools, and
// exceptions (attn::Error, carrying the status and the runtime's message)
// instead of status codes. It adds no behaviour: every check is the C
// runtime's.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_HPP
#define ATTN_RUNTIME_HPP

#include "attn/runtime.h"

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace attn {

/// A failed runtime call: its status and attn_last_error()'s message.
class Error : public std::runtime_error {
public:
  Error(attn_status status, const std::string &message)
      : std::runtime_error(std::string(attn_status_name(status)) + ": " +
                           message),
        status_(status), message_(message) {}

  attn_status status() const noexcept { return status_; }
  /// The runtime's message, without the status name.
  const std::string &message() const noexcept { return message_; }

private:
  attn_status status_;
  std::string message_;
};

/// Throws attn::Error for anything but ATTN_OK.
inline void check(attn_status status) {
  if (status != ATTN_OK)
    throw Error(status, attn_last_error());
}

//===----------------------------------------------------------------------===//
// Tensor
//===----------------------------------------------------------------------===//

/// A view of caller memory; a thin attn_tensor. It owns nothing.
class Tensor {
public:
  Tensor() : tensor_{} {}
  explicit Tensor(const attn_tensor &tensor) : tensor_(tensor) {}

  /// Dense row-major: the last dim varies fastest.
  static Tensor contiguous(void *data, attn_dtype dtype,
                           std::initializer_list<int64_t> shape) {
    return contiguous(data, dtype, std::vector<int64_t>(shape));
  }
  static Tensor contiguous(void *data, attn_dtype dtype,
                           const std::vector<int64_t> &shape) {
    if (shape.size() > 4)
      throw Error(ATTN_ERROR_INVALID_ARGUMENT,
                  "attn::Tensor: rank " + std::to_string(shape.size()) +
                      " is more than 4");
    return Tensor(attn_tensor_contiguous(
        data, dtype, static_cast<int32_t>(shape.size()), shape.data()));
  }

  /// Explicit element strides, e.g. a [B, S, H, D] buffer seen as
  /// [B, H, S, D].
  static Tensor strided(void *data, attn_dtype dtype,
                        std::initializer_list<int64_t> shape,
                        std::initializer_list<int64_t> strides) {
    if (shape.size() > 4 || strides.size() != shape.size())
      throw Error(ATTN_ERROR_INVALID_ARGUMENT,
                  "attn::Tensor: " + std::to_string(shape.size()) +
                      " sizes and " + std::to_string(strides.size()) +
                      " strides; need as many of each, at most 4");
    attn_tensor t{};
    t.data = data;
    t.dtype = dtype;
    t.rank = static_cast<int32_t>(shape.size());
    int i = 0;
    for (int64_t size : shape)
      t.shape[i++] = size;
    i = 0;
    for (int64_t stride : strides)
      t.strides[i++] = stride;
    return Tensor(t);
  }

  const attn_tensor &raw() const noexcept { return tensor_; }
  attn_tensor &raw() noexcept { return tensor_; }
  void *data() const noexcept { return tensor_.data; }
  int32_t rank() const noexcept { return tensor_.rank; }
  int64_t size(int dim) const noexcept { return tensor_.shape[dim]; }
  int64_t stride(int dim) const noexcept { return tensor_.strides[dim]; }

private:
  attn_tensor tensor_;
};

//===----------------------------------------------------------------------===//
// ThreadPool
//===----------------------------------------------------------------------===//

class ThreadPool {
public:
  /// numThreads <= 0: one thread per online core (the caller included).
  explicit ThreadPool(int32_t numThreads = 0) {
    check(attn_thread_pool_create(numThreads, &pool_));
  }
  /// A pool over a team someone else owns (attn_thread_pool_create_on_team):
  /// attn's work runs on the team's threads, `numThreads` (>= 1) at most.
  static ThreadPool onTeam(int32_t numThreads, attn_team_run_fn run,
                           void *teamCtx) {
    ThreadPool pool(nullptr);
    check(attn_thread_pool_create_on_team(numThreads, run, teamCtx,
                                          &pool.pool_));
    return pool;
  }
  ~ThreadPool() { attn_thread_pool_destroy(pool_); }
  ThreadPool(ThreadPool &&other) noexcept
      : pool_(std::exchange(other.pool_, nullptr)) {}
  ThreadPool &operator=(ThreadPool &&other) noexcept {
    if (this != &other) {
      attn_thread_pool_destroy(pool_);
      pool_ = std::exchange(other.pool_, nullptr);
    }
    return *this;
  }
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int32_t size() const noexcept { return attn_thread_pool_size(pool_); }
  attn_thread_pool *get() const noexcept { return pool_; }

  /// Calls fn(begin, end) over a partition of [0, n), on all threads. An
  /// exception thrown by fn cannot cross the C runtime: the first one is kept,
  /// the remaining ranges of that call are skipped, and it is rethrown here.
  template <typename Fn> void parallelFor(int64_t n, Fn &&fn) {
    struct Context {
      Fn *fn;
      std::mutex lock;
      std::exception_ptr error;
      bool failed = false;
    } context{&fn, {}, nullptr, false};
    attn_thread_pool_parallel_for(
        pool_, n,
        [](void *raw, int64_t begin, int64_t end) {
          auto *ctx = static_cast<Context *>(raw);
          {
            std::lock_guard<std::mutex> guard(ctx->lock);
            if (ctx->failed)
              return;
          }
          try {
            (*ctx->fn)(begin, end);
          } catch (...) {
            std::lock_guard<std::mutex> guard(ctx->lock);
            if (!ctx->failed) {
              ctx->failed = true;
              ctx->error = std::current_exception();
            }
          }
        },
        &context);
    if (context.error)
      std::rethrow_exception(context.error);
  }

private:
  explicit ThreadPool(std::nullptr_t) {}
  attn_thread_pool *pool_ = nullptr;
};

//===----------------------------------------------------------------------===//
// Kernel and Module
//===----------------------------------------------------------------------===//

/// A kernel of a loaded module. Valid while its Module lives.
class Kernel {
public:
  explicit Kernel(const attn_kernel_desc *desc) : desc_(desc) {}

  const attn_kernel_desc &desc() const noexcept { return *desc_; }
  const attn_kernel_desc *get() const noexcept { return desc_; }
  std::string name() const { return desc_->name; }

  /// Whether this CPU runs the kernel; the message says what it lacks.
  bool supportedOnThisCpu(std::string *why = nullptr) const {
    if (attn_kernel_check_cpu(desc_) == ATTN_OK)
      return true;
    if (why)
      *why = attn_last_error();
    return false;
  }

  /// Checks the arguments and runs; throws attn::Error on any refusal. `mask`
  /// and `lse` are given exactly when the kernel takes them; a null `pool`
  /// runs on the calling thread.
  void run(const Tensor &query, const Tensor &key, const Tensor &value,
           const Tensor &output, const Tensor *mask = nullptr,
           const Tensor *lse = nullptr, ThreadPool *pool = nullptr) const {
    check(attn_run(desc_, &query.raw(), &key.raw(), &value.raw(),
                   mask ? &mask->raw() : nullptr, &output.raw(),
                   lse ? &lse->raw() : nullptr, pool ? pool->get() : nullptr));
  }

  /// run with split-KV: each GQA group's keys in `keySplits` ranges
  /// (attn_run_split: 0 lets the runtime choose, 1 never splits).
  void runSplit(const Tensor &query, const Tensor &key, const Tensor &value,
                const Tensor &output, int64_t keySplits,
                const Tensor *mask = nullptr, const Tensor *lse = nullptr,
                ThreadPool *pool = nullptr) const {
    check(attn_run_split(desc_, &query.raw(), &key.raw(), &value.raw(),
                         mask ? &mask->raw() : nullptr, &output.raw(),
                         lse ? &lse->raw() : nullptr, keySplits,
                         pool ? pool->get() : nullptr));
  }

  /// Whether the kernel has the key split's phases (runSplit above 1).
  bool hasKeySplit() const { return attn_kernel_has_key_split(desc_) != 0; }
  /// Whether the kernel takes attention sinks (runWith's `sinks`).
  bool hasSinks() const { return attn_kernel_has_sinks(desc_) != 0; }

  /// What a forward call takes besides its tensors (attn_run_options).
  struct RunOptions {
    const Tensor *sinks = nullptr; // [Hq] f32, for a kernel with sinks
    float dropoutP = 0.0f;         // for a kernel with dropout
    uint64_t dropoutSeed = 0;
    int64_t keySplits = 0; // 0: the runtime chooses, 1: no split
  };
  /// run with every per-call input (attn_run_with).
  void runWith(const Tensor &query, const Tensor &key, const Tensor &value,
               const Tensor &output, const RunOptions &options,
               const Tensor *mask = nullptr, const Tensor *lse = nullptr,
               ThreadPool *pool = nullptr) const {
    attn_run_options raw{};
    raw.struct_size = sizeof(raw);
    raw.sinks = options.sinks ? &options.sinks->raw() : nullptr;
    raw.dropout_p = options.dropoutP;
    raw.dropout_seed = options.dropoutSeed;
    raw.key_splits = options.keySplits;
    check(attn_run_with(desc_, &query.raw(), &key.raw(), &value.raw(),
                        mask ? &mask->raw() : nullptr, &output.raw(),
                        lse ? &lse->raw() : nullptr, &raw,
                        pool ? pool->get() : nullptr));
  }

  /// The checks alone: the kernel's view of the call.
  attn_kernel_args prepare(const Tensor &query, const Tensor &key,
                           const Tensor &value, const Tensor &output,
                           const Tensor *mask = nullptr,
                           const Tensor *lse = nullptr) const {
    attn_kernel_args args;
    check(attn_prepare(desc_, &query.raw(), &key.raw(), &value.raw(),
                       mask ? &mask->raw() : nullptr, &output.raw(),
                       lse ? &lse->raw() : nullptr, &args));
    return args;
  }

private:
  const attn_kernel_desc *desc_;
};

/// A loaded kernel library; unloaded when destroyed.
class Module {
public:
  static Module load(const std::string &path) {
    attn_module *module = nullptr;
    check(attn_module_load(path.c_str(), &module));
    return Module(module);
  }
  static Module fromLibrary(const attn_library &library) {
    attn_module *module = nullptr;
    check(attn_module_from_library(&library, &module));
    return Module(module);
  }

  /// A destructor cannot report a refusal: destroying a Module while its
  /// kernels run (on other threads) leaks it rather than unmapping code
  /// that is running. Call unload() to see the error.
  ~Module() {
    if (module_)
      (void)attn_module_unload(module_);
  }
  Module(Module &&other) noexcept
      : module_(std::exchange(other.module_, nullptr)) {}
  Module &operator=(Module &&other) noexcept {
    if (this != &other) {
      if (module_)
        (void)attn_module_unload(module_);
      module_ = std::exchange(other.module_, nullptr);
    }
    return *this;
  }
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;

  /// Unloads now; throws (and keeps the module) while its kernels run.
  void unload() {
    check(attn_module_unload(module_));
    module_ = nullptr;
  }

  int32_t size() const noexcept { return attn_module_num_kernels(module_); }
  Kernel kernel(int32_t index) const {
    const attn_kernel_desc *desc = attn_module_kernel(module_, index);
    if (!desc)
      throw Error(ATTN_ERROR_NOT_FOUND,
                  "kernel index " + std::to_string(index) +
                      " is out of range; the module has " +
                      std::to_string(size()));
    return Kernel(desc);
  }
  std::vector<Kernel> kernels() const {
    std::vector<Kernel> all;
    for (int32_t i = 0; i < size(); ++i)
      all.push_back(Kernel(attn_module_kernel(module_, i)));
    return all;
  }
  Kernel find(const std::string &name) const {
    const attn_kernel_desc *desc = nullptr;
    check(attn_module_find(module_, name.c_str(), &desc));
    return Kernel(desc);
  }
  attn_module *get() const noexcept { return module_; }

private:
  explicit Module(attn_module *module) : module_(module) {}
  attn_module *module_ = nullptr;
};

} // namespace attn

#endif // ATTN_RUNTIME_HPP
