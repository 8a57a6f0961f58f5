//===- Harness.h - Run a compiled kernel against the reference --*- C++ -*-===//
//
// What attn-run, attn-bench and the conformance tests share: random inputs
// for a problem (in the kernel's element type, in [B,H,S,D] or [B,S,H,D]
// buffers), outputs poisoned with NaN so that an element the kernel forgets
// to write fails the check, a call through the runtime, and the comparison
// with the float64 reference. No MLIR here.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_HARNESS_HARNESS_H
#define ATTN_HARNESS_HARNESS_H

#include "attn/runtime.h"
#include "lib/Reference/Reference.h"
#include "lib/Support/KernelSpec.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

namespace attn {

struct Problem;

/// Storage that starts a cache line (64 bytes), as PyTorch's CPU tensors
/// and most allocators' large blocks do: the kernels then take the paths
/// that callers' buffers take (whole-line streaming stores included), which
/// a std::vector's 16-byte alignment would leave untested.
template <class T> struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlignment{64};
  CacheLineAllocator() = default;
  template <class U> CacheLineAllocator(const CacheLineAllocator<U> &) {}
  T *allocate(size_t n) {
    return static_cast<T *>(::operator new(n * sizeof(T), kAlignment));
  }
  void deallocate(T *p, size_t) { ::operator delete(p, kAlignment); }
  template <class U> bool operator==(const CacheLineAllocator<U> &) const {
    return true;
  }
  template <class U> bool operator!=(const CacheLineAllocator<U> &) const {
    return false;
  }
};
template <class T> using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

/// A tensor that a modifier captures: its element type (ATTN_F32, ATTN_I32
/// or ATTN_I64), shape and values (dense, row-major).
struct CaptureValues {
  attn_dtype type = ATTN_F32;
  std::vector<int64_t> shape;
  std::vector<double> values;
};

/// Score and mask modifiers for a problem (docs/spec.md, "Score and mask
/// modifiers"): the MLIR regions a kernel is compiled with (setModifiers),
/// what they capture, and the same functions written in C++ for the
/// float64 reference, reading the captures' values.
struct ModifierCase {
  std::string regions;
  std::vector<std::string> captureTypes;
  /// The captured tensors for a problem (its sizes and seed).
  std::function<std::vector<CaptureValues>(const Problem &)> captures;
  std::function<double(const std::vector<CaptureValues> &, double s,
                       int64_t b, int64_t h, int64_t i, int64_t j)>
      scoreMod;
  std::function<bool(const std::vector<CaptureValues> &, int64_t b,
                     int64_t h, int64_t i, int64_t j)>
      maskMod;
};

struct Problem {
  KernelSpec spec;
  int64_t batch = 1, headsQ = 8, headsKv = 2, seqQ = 1024, seqK = 1024;
  /// Store Q, K, V and O as [B, S, H, D] (strided views of the logical
  /// [B, H, S, D] tensors) instead of [B, H, S, D].
  bool bshd = false;
  uint64_t seed = 1;
  /// Scale of the random query and key values; 1e4 gives logits of ~1e4.
  double inputScale = 1.0;
  /// Probability that a bool mask entry is false / a bias entry is -inf.
  double maskDropRate = 0.2;
  /// Whether the forward takes attention sinks: a forward kernel's spec
  /// says so; a backward or weights kernel of such a forward reads them
  /// through its LSE, and its problem sets this.
  bool sinks = false;
  /// The modifiers its kernel was compiled with, or null.
  std::shared_ptr<const ModifierCase> modifiers;
  /// Dropout's probability and seed, for a kernel with dropout (a backward
  /// kernel's problem takes its forward's).
  float dropoutP = 0.25f;
  uint64_t dropoutSeed = 0x243F6A8885A308D3u;

  bool hasSinks() const { return sinks || spec.sinks; }

  /// The mask's shape: dims the spec broadcasts are 1.
  void maskShape(int64_t shape[4]) const;
  std::string describe() const;
};

/// One buffer in the kernel's element type plus the exact values it holds
/// as doubles in the logical layout (what the reference reads).
struct HostTensor {
  AlignedVector<uint8_t> bytes;
  std::vector<double> values; // dense logical [d0, d1, d2, d3]
  attn_tensor view{};
};

struct ProblemData {
  HostTensor query, key, value, mask, output;
  std::vector<float> lse;
  attn_tensor lseView{};
  bool hasMask = false;
  /// The sink logits [Hq] where the problem has sinks (else empty): per
  /// head in turn a moderate logit, -inf (no sink), 30 (the sink takes
  /// nearly all the weight), moderate ones after.
  std::vector<float> sinks;
  attn_tensor sinksView{};
  /// The modifiers' captured tensors (values, then bytes and views in the
  /// kernel's types), and the modifiers for the reference.
  std::vector<CaptureValues> captureValues;
  std::vector<AlignedVector<uint8_t>> captureBytes;
  std::vector<attn_tensor> captureViews;
  std::shared_ptr<const ModifierCase> modifiers;
  /// Dropout's probability and seed where the kernel has dropout (else 0).
  float dropoutP = 0.0f;
  uint64_t dropoutSeed = 0;
};

/// The host memory that makeProblemData and checkAgainstReference take for
/// `problem` (each tensor's elements, its exact values as doubles, the
/// reference's output); nullopt when it does not fit in 64 bits.
std::optional<uint64_t> hostBytesNeeded(const Problem &problem);

/// Makes random inputs and NaN-poisoned outputs for `problem`.
void makeProblemData(const Problem &problem, ProblemData &data);

/// Writes NaN over the outputs again (before a repeated call).
void poisonOutputs(ProblemData &data);
/// Writes NaN over one tensor.
void poisonTensor(HostTensor &tensor);

/// Replaces the values of `tensor` by `values` (logical layout), rounded to
/// its element type (for tests that craft inputs).
void setValues(HostTensor &tensor, const std::vector<double> &values);

struct CheckReport {
  ErrorStats output, lse;
  double tolerance = 0;
  bool passed = false;
  std::string message;
};

/// Compares the kernel's outputs in `data` with the reference.
CheckReport checkAgainstReference(const Problem &problem,
                                  const ProblemData &data);

/// Runs the kernel once through the runtime. A GPU kernel runs on copies
/// of the buffers in device memory (uploaded, run, outputs downloaded).
/// `keySplits` is attn_run_split's (0: the runtime chooses).
attn_status runProblem(const attn_kernel_desc *kernel, ProblemData &data,
                       attn_thread_pool *pool, int64_t keySplits = 0);

/// The spec a compiled kernel was made from, as its descriptor records it
/// (for running a kernel loaded from a library; the name is the kernel's).
KernelSpec specOfKernel(const attn_kernel_desc *kernel);

/// GPU 0's architecture ("sm_90") and a description ("NVIDIA H100 ...,
/// sm_90"); false with the runtime's message (no driver, no GPU, or one
/// older than the kernels' sm_80) otherwise.
bool cudaTarget(std::string &arch, std::string &description,
                std::string &error);

/// The problem's buffers on the GPU, byte for byte as on the host, for
/// timing GPU kernels without the copies.
/// A host buffer's copy in device memory, freed with it.
struct DeviceBuffer {
  void *device = nullptr;
  size_t bytes = 0;
  /// The host view's tensor, pointing into the device copy.
  attn_tensor view{};
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer();
  /// Allocates `bytes` and copies `host` there; `hostView` is a view into
  /// `host`.
  attn_status upload(const void *host, size_t bytes,
                     const attn_tensor &hostView);
  attn_status upload(const HostTensor &t) {
    return upload(t.bytes.data(), t.bytes.size(), t.view);
  }
  template <class Allocator>
  attn_status upload(const std::vector<float, Allocator> &values,
                     const attn_tensor &hostView) {
    return upload(values.data(), values.size() * sizeof(float), hostView);
  }
  /// Copies the device buffer back to `host` (`bytes` of it).
  attn_status download(void *host) const;
};

class DeviceProblem {
public:
  DeviceProblem() = default;
  DeviceProblem(const DeviceProblem &) = delete;
  DeviceProblem &operator=(const DeviceProblem &) = delete;
  /// Allocates device buffers and copies every input and (poisoned) output.
  attn_status upload(const ProblemData &data);
  /// One synchronous call of `kernel` on the device buffers.
  attn_status run(const attn_kernel_desc *kernel);
  /// Copies the outputs (O, LSE) back into `data`.
  attn_status download(ProblemData &data);

protected:
  DeviceBuffer query, key, value, mask, output, lse, sinks;
  /// The modifiers' captured tensors, and their device views.
  std::vector<DeviceBuffer> captures;
  std::vector<attn_tensor> captureViews;
  bool hasMask = false, hasLse = false, hasSinks = false;
  float dropoutP = 0.0f;
  uint64_t dropoutSeed = 0;
};

/// A backward call's buffers (problem.spec a backward kernel's): the
/// forward's LSE (its O goes to ProblemData::output), both from the float64
/// reference and rounded to the kernel's types; a random dO, a random dLSE
/// where the kernel takes one, and the NaN-poisoned gradients dQ, dK, dV
/// (laid out as Q, K, V).
struct BackwardData {
  std::vector<float> lse;
  attn_tensor lseView{};
  HostTensor gradOutput, gradQuery, gradKey, gradValue;
  std::vector<float> gradLse;
  attn_tensor gradLseView{};
  bool hasGradLse = false;
  /// dM [B, Hq, Sq, Sk] f32, dense, for a kernel with spec.gradMask.
  AlignedVector<float> gradMask;
  attn_tensor gradMaskView{};
  bool hasGradMask = false;
};

/// A backward call's buffers on the GPU: the forward's (DeviceProblem's;
/// its O the forward's output) and the backward's.
class DeviceBackwardProblem : public DeviceProblem {
public:
  /// Copies every input and (poisoned) gradient to the device.
  attn_status upload(const ProblemData &data, const BackwardData &backward);
  /// One synchronous call of `kernel` on the device buffers.
  attn_status run(const attn_kernel_desc *kernel);
  /// Copies dQ, dK, dV (and dM) back into `backward`.
  attn_status download(BackwardData &backward);

private:
  DeviceBuffer forwardLse, gradOutput, gradLse, gradQuery, gradKey, gradValue,
      gradMask;
  bool hasGradLse = false, hasGradMask = false;
};

/// Fills `data.output` and `backward` for `problem` (after makeProblemData);
/// false with `error` when the reference cannot compute the forward.
bool makeBackwardData(const Problem &problem, ProblemData &data,
                      BackwardData &backward, std::string &error);
/// Writes NaN over the gradients again (before a repeated call).
void poisonGradients(BackwardData &backward);
/// Runs a backward kernel once through the runtime (a GPU kernel on device
/// copies).
attn_status runBackwardProblem(const attn_kernel_desc *kernel,
                               ProblemData &data, BackwardData &backward,
                               attn_thread_pool *pool);
struct BackwardReport {
  ErrorStats query, key, value, mask; // mask: dM, with spec.gradMask
  double tolerance = 0;
  bool passed = false;
  std::string message;
};
/// Compares dQ, dK, dV with the float64 reference gradient.
BackwardReport checkBackwardAgainstReference(const Problem &problem,
                                             const ProblemData &data,
                                             const BackwardData &backward);
/// dQ, dK and dV as doubles in the logical layout, one after the other.
std::vector<double> gradientValues(const BackwardData &backward);

/// A weights call's buffers (problem.spec a weights kernel's): the forward's
/// LSE from the float64 reference (where the kernel reads one) and the
/// NaN-poisoned weights W f32 [B, Hq, Sq, Sk], dense, or for a [B, S, H, D]
/// problem stored transposed as [B, Hq, Sk, Sq] (its rows then have stride
/// Sq: the kernel's element-wise path).
struct WeightsData {
  std::vector<float> lse, weights;
  attn_tensor lseView{}, weightsView{};
  bool hasLse = false;
};

/// Fills `weights` for `problem` (after makeProblemData); false with `error`
/// when the reference cannot compute the forward.
bool makeWeightsData(const Problem &problem, ProblemData &data,
                     WeightsData &weights, std::string &error);
/// Runs a weights kernel once through the runtime (CPU).
attn_status runWeightsProblem(const attn_kernel_desc *kernel,
                              ProblemData &data, WeightsData &weights,
                              attn_thread_pool *pool);
/// W as doubles in the logical layout.
std::vector<double> weightsValues(const WeightsData &weights);
/// Compares W with the reference weights (in CheckReport::output; the
/// tolerance is the forward's).
CheckReport checkWeightsAgainstReference(const Problem &problem,
                                         const ProblemData &data,
                                         const WeightsData &weights);

/// Linear attention's state, for a kernel with spec.linearState: S0
/// [B, Hkv, D, Dv] and z0 [B, Hkv, D] (random, f32) and the final S and z
/// (poisoned), dense.
///
/// For a backward spec (attn.linear_backward): state0 and normalizer0 are
/// the state the op reads (random, z > 0; always present), O is random (the
/// gradient is defined for any O), dO random, dQ, dK, dV poisoned; with
/// spec.linearState the final state's gradients dS1, dz1 (random) and
/// state and normalizer are dS0 and dz0 (poisoned).
struct LinearData {
  std::vector<float> state0, normalizer0, state, normalizer;
  attn_tensor state0View{}, normalizer0View{}, stateView{}, normalizerView{};
  bool hasState = false;
  bool backward = false;
  HostTensor gradOutput, gradQuery, gradKey, gradValue;
  std::vector<float> gradState1, gradNormalizer1;
  attn_tensor gradState1View{}, gradNormalizer1View{};
};

/// Fills `linear` (and, for a backward spec, O in `data`) for `problem`
/// after makeProblemData.
void makeLinearData(const Problem &problem, ProblemData &data,
                    LinearData &linear);
/// A linear attention forward call's buffers on the GPU (DeviceProblem's
/// counterpart).
class DeviceLinearProblem {
public:
  /// Copies every input and (poisoned) output to the device.
  attn_status upload(const ProblemData &data, const LinearData &linear);
  /// One synchronous call of `kernel` on the device buffers.
  attn_status run(const attn_kernel_desc *kernel);
  /// Copies O (and the final state) back.
  attn_status download(ProblemData &data, LinearData &linear);

private:
  DeviceBuffer query, key, value, output, state0, normalizer0, state,
      normalizer;
  bool hasState = false;
};

/// Runs a linear attention kernel; a GPU kernel's inputs are copied to the
/// device and its outputs back (a forward kernel's only: no GPU lowering of
/// the backward yet).
attn_status runLinearProblem(const attn_kernel_desc *kernel, ProblemData &data,
                             LinearData &linear, attn_thread_pool *pool);
/// O (and the final state) against computeReferenceLinear; for a backward
/// spec the gradients against computeReferenceLinearBackward (the
/// gradients' tolerance: 1e-4 for f32, 2e-2 for f16 and bf16).
CheckReport checkLinearAgainstReference(const Problem &problem,
                                        const ProblemData &data,
                                        const LinearData &linear);

/// Additive attention's tensors (docs/spec.md, "Additive attention") for a
/// problem's B, Sq, Sk (its heads unused): random query [B, Sq, Dq], keys
/// [B, Sk, Dk], values [B, Sk, Dv] and network W_q [A, Dq], W_k [A, Dk],
/// v [A] in the kernel's type; for a spec with a mask, a random keep-mask
/// [B or 1, Sq or 1, Sk] whose first row keeps nothing (if it has others); O
/// [B, Sq, Dv] and, for a spec with weights, P [B, Sq, Sk] (f32), both poisoned
/// with NaN. The tensors are 4-d with leading 1s, as the reference reads them;
/// the runtime gets views of the ranks above.
///
/// For a backward spec (attn.additive_backward) also a random dO [B, Sq, Dv]
/// and the gradients it writes (f32, NaN-poisoned): grad_qp [B, Sq, A] and,
/// for `parts` parts of the rows (3 where Sq allows, so that the parts are
/// uneven), grad_kp [B, P, Sk, A], grad_values [B, P, Sk, Dv], grad_v
/// [B, P, A].
struct AdditiveData {
  HostTensor query, keys, values, queryWeight, keyWeight, scoreVector, mask,
      output, gradOutput;
  std::vector<float> weights, gradQp, gradKp, gradValues, gradV;
  attn_tensor weightsView{}, gradQpView{}, gradKpView{}, gradValuesView{},
      gradVView{};
  int64_t parts = 1;
  bool hasMask = false, hasWeights = false, backward = false;
};

void makeAdditiveData(const Problem &problem, AdditiveData &data);
/// An additive attention forward call's buffers on the GPU (DeviceProblem's
/// counterpart).
class DeviceAdditiveProblem {
public:
  /// Copies every input and (poisoned) output to the device.
  attn_status upload(const AdditiveData &data);
  /// One synchronous call of `kernel` on the device buffers.
  attn_status run(const attn_kernel_desc *kernel);
  /// Copies O (and the weights) back.
  attn_status download(AdditiveData &data);

private:
  DeviceBuffer query, keys, values, queryWeight, keyWeight, scoreVector, mask,
      output, weights;
  bool hasMask = false, hasWeights = false;
};
/// Runs an additive attention kernel; a GPU kernel's inputs are copied to
/// the device and its outputs back (a forward kernel's only).
attn_status runAdditiveProblem(const attn_kernel_desc *kernel,
                               AdditiveData &data, attn_thread_pool *pool);
/// O (and the weights) against computeReferenceAdditive; for a backward
/// spec the gradients (the parts summed) against
/// computeReferenceAdditiveBackward.
CheckReport checkAdditiveAgainstReference(const Problem &problem,
                                          const AdditiveData &data);

/// What `tensor`'s bytes hold, as doubles in the logical layout.
std::vector<double> tensorValues(const HostTensor &tensor);

/// The outputs as doubles in the logical layout.
std::vector<double> outputValues(const ProblemData &data);

} // namespace attn

#endif // ATTN_HARNESS_HARNESS_H
