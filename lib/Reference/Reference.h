//===- Reference.h - The float64 reference of the attention contract ------===//
//
// An independent, deliberately naive implementation of the attention
// contract (docs/spec.md), against which every kernel is checked.
// It computes the whole score row of each (batch, head, query) in double
// precision, takes its exact maximum and sum, and normalizes: no tiling, no
// online softmax, nothing shared with the compiler but the KernelSpec that
// says which options are on. Simplicity is the point; speed is not.
//
// Inputs are double values already decoded from the kernel's element type
// (decode bf16/f16 with lib/Support/Half.h first), viewed through element
// strides so that any layout a kernel accepts can be checked as is.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_REFERENCE_REFERENCE_H
#define ATTN_REFERENCE_REFERENCE_H

#include "lib/Support/KernelSpec.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace attn {

/// A read-only view of a 4-d tensor of doubles in the logical [B, H, S, D]
/// layout with arbitrary element strides (a stride may be 0 to broadcast).
struct RefTensor {
  const double *data = nullptr;
  int64_t shape[4] = {0, 0, 0, 0};
  int64_t strides[4] = {0, 0, 0, 0};

  double at(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
    return data[i0 * strides[0] + i1 * strides[1] + i2 * strides[2] +
                i3 * strides[3]];
  }

  /// A view of a dense row-major (C order) buffer of the given shape.
  static RefTensor dense(const double *data, int64_t d0, int64_t d1, int64_t d2,
                         int64_t d3);
};

struct ReferenceInputs {
  RefTensor query; // [B, Hq, Sq, D]
  RefTensor key;   // [B, Hkv, Sk, D]
  RefTensor value; // [B, Hkv, Sk, Dv]
  /// [Bm, Hm, Sqm, Sk] with Bm in {1, B}, Hm in {1, Hq}, Sqm in {1, Sq}; a
  /// dim of size 1 broadcasts. Present exactly when spec.mask != None. For a
  /// bool mask 0 excludes the position and any other value keeps it; for a
  /// bias the value is added to the score (-inf excludes).
  std::optional<RefTensor> mask;
  /// The sink logits [Hq] (docs/spec.md, "Attention sinks"); empty for
  /// none. The forward reads them whatever the spec says: a backward or
  /// weights kernel takes them through the forward's LSE.
  std::vector<double> sinks;
  /// The score and mask modifiers (docs/spec.md, "Score and mask
  /// modifiers") as C++ written apart from the kernel's MLIR regions: the
  /// new score of score s (after the scale, soft cap and bias) at global
  /// (b, h, i, j), and whether (b, h, i, j) is kept. Empty: none.
  std::function<double(double, int64_t, int64_t, int64_t, int64_t)> scoreMod;
  std::function<bool(int64_t, int64_t, int64_t, int64_t)> maskMod;
  /// Dropout (docs/spec.md, "Dropout"), read where spec.dropout: the f32
  /// probability the kernel receives and the 64-bit seed.
  float dropoutP = 0.0f;
  uint64_t dropoutSeed = 0;
};

/// Dropout's keep bit of (b, h, i, j) for probability `p` and `seed`
/// (docs/spec.md): Philox 4x32-10, written here apart from the kernels'.
bool dropoutKeeps(float p, uint64_t seed, int64_t b, int64_t h, int64_t i,
                  int64_t j);

struct ReferenceOutputs {
  int64_t batch = 0, headsQ = 0, seqQ = 0, valueDim = 0;
  std::vector<double> output; // dense [B, Hq, Sq, Dv]
  std::vector<double> lse;    // dense [B, Hq, Sq]

  double o(int64_t b, int64_t h, int64_t i, int64_t d) const {
    return output[((b * headsQ + h) * seqQ + i) * valueDim + d];
  }
  double l(int64_t b, int64_t h, int64_t i) const {
    return lse[(b * headsQ + h) * seqQ + i];
  }
};

/// Computes O and LSE as the contract defines them for `spec`. Returns false
/// with a message in `error` when the shapes do not fit each other or the
/// spec (head dims, GQA ratio, static sizes, mask presence and shape).
bool computeReference(const KernelSpec &spec, const ReferenceInputs &inputs,
                      ReferenceOutputs &outputs, std::string &error);

/// The gradients of a loss through the function (docs/spec.md, "The
/// gradient"), dense: dQ [B, Hq, Sq, D], dK [B, Hkv, Sk, D], dV
/// [B, Hkv, Sk, Dv].
struct ReferenceGradients {
  std::vector<double> query, key, value;
  /// With spec.gradMask: dS of every score, dense [B, Hq, Sq, Sk] (the
  /// gradient of an additive bias before its broadcast dims are summed),
  /// 0 at excluded positions.
  std::vector<double> scores;
};

/// Computes dQ, dK and dV for the incoming gradient `gradOutput` (dO, shaped
/// as O) and, when given, `gradLse` (dLSE, dense [B, Hq, Sq]). P is the exact
/// softmax of the inputs' scores; Δ = dO·O − dLSE takes `output`, the
/// forward's O as the kernel received it (rounded to its element type).
/// Rows with nothing allowed contribute nothing; a NaN score makes its row's
/// P NaN. Fails as computeReference does.
bool computeReferenceBackward(const KernelSpec &spec,
                              const ReferenceInputs &inputs,
                              const RefTensor &output,
                              const RefTensor &gradOutput,
                              const std::vector<double> *gradLse,
                              ReferenceGradients &gradients,
                              std::string &error);

/// The attention weights (docs/spec.md, "Attention weights"), dense
/// [B, Hq, Sq, Sk]: the exact softmax of each row's scores, 0 at excluded
/// positions and on rows with nothing allowed, NaN at every allowed position
/// of a row with a NaN score. Fails as computeReference does.
bool computeReferenceWeights(const KernelSpec &spec,
                             const ReferenceInputs &inputs,
                             std::vector<double> &weights, std::string &error);

/// The accuracy bound of the gradient (docs/spec.md): 1e-4 for f32, 2e-2 for
/// f16 and bf16.
double gradientTolerance(ElementType type);

/// The diagonal offset `off` of causal and window masking: 0 for top-left
/// alignment, Sk - Sq for bottom-right.
int64_t diagonalOffset(const KernelSpec &spec, int64_t seqQ, int64_t seqK);

/// Whether causal and window masking allow (i, j); ignores any data mask.
bool isAllowedByDiagonal(const KernelSpec &spec, int64_t i, int64_t j,
                         int64_t seqQ, int64_t seqK);

/// The number of (i, j) pairs of one (batch, head) that causal and window
/// masking allow; a data mask is not taken into account.
int64_t countAllowedPositions(const KernelSpec &spec, int64_t seqQ,
                              int64_t seqK);

/// The FLOP count to report with a throughput figure (spec, "Cost
/// accounting"): 2 * B * Hq * (D + Dv) multiply-adds for each allowed (i, j)
/// position (a backward kernel's spec: 3D + 2Dv; a weights kernel's: D). It
/// counts exactly the positions that causal and window masking allow, rather
/// than whole blocks, so it does not depend on a kernel's tile sizes: Sq * Sk
/// for no mask, Sq * (Sq + 1) / 2 (about half) for causal with Sq = Sk. A data
/// mask (bool or bias) is ignored: it is counted as dense, as FlashAttention's
/// benchmarks do, since its contents are not known up front. For linear
/// attention, docs/spec.md's count: 2 * B * Hq * (Sq + Sk) * D * Dv, plus 2 * B
/// * Hq * Sq * chunk * (D + Dv) for the causal form. For additive attention
/// (headsQ 1): 2 * B * Sq * Sk * (A + Dv) plus the projections' 2 * B * (Sq *
/// Dq + Sk * Dk) * A (the tanh not counted).
double flopCount(const KernelSpec &spec, int64_t batch, int64_t headsQ,
                 int64_t seqQ, int64_t seqK);

/// Linear attention's outputs (docs/spec.md, "Linear attention"): O
/// [B, Hq, Sq, Dv] and the final state S [B, Hkv, D, Dv] and normalizer
/// z [B, Hkv, D], dense.
struct ReferenceLinear {
  std::vector<double> output, state, normalizer;
};

/// Linear attention in float64, token by token (no chunks), from the
/// spec's feature map, eps and causal flag; `state` and `normalizer` are S0
/// and z0 (dense), or empty for zeros. False with `error` on bad shapes.
bool computeReferenceLinear(const KernelSpec &spec, const ReferenceInputs &in,
                            const std::vector<double> &state,
                            const std::vector<double> &normalizer,
                            ReferenceLinear &out, std::string &error);

/// Linear attention's gradients (docs/spec.md, "Gradient of linear
/// attention"), dense: dQ [B, Hq, Sq, D], dK [B, Hkv, Sk, D], dV [B, Hkv,
/// Sk, Dv], dS0 [B, Hkv, D, Dv], dz0 [B, Hkv, D].
struct ReferenceLinearGradients {
  std::vector<double> gradQuery, gradKey, gradValue, gradState, gradNormalizer;
};

/// attn.linear_backward in float64, row by row: from the inputs, O and dO
/// ([B, Hq, Sq, Dv], dense), the state the op reads (dense: the forward's
/// final one non-causal, its initial one causal) and the final state's
/// gradients (dense, or empty for zeros). False with `error` on bad shapes.
bool computeReferenceLinearBackward(
    const KernelSpec &spec, const ReferenceInputs &in,
    const std::vector<double> &output, const std::vector<double> &gradOutput,
    const std::vector<double> &state, const std::vector<double> &normalizer,
    const std::vector<double> &gradState,
    const std::vector<double> &gradNormalizer, ReferenceLinearGradients &out,
    std::string &error);

/// Additive attention's inputs (docs/spec.md, "Additive attention") as 4-d
/// views with leading 1s: query [1, B, Sq, Dq], keys [1, B, Sk, Dk],
/// values [1, B, Sk, Dv], W_q [1, 1, A, Dq], W_k [1, 1, A, Dk],
/// v [1, 1, 1, A], and the keep-mask [1, B or 1, Sq or 1, Sk] (0 masks) when
/// the spec has one.
struct ReferenceAdditiveInputs {
  RefTensor query, keys, values, queryWeight, keyWeight, scoreVector;
  std::optional<RefTensor> mask;
};

/// Additive attention's outputs: O [B, Sq, Dv] and the weights P
/// [B, Sq, Sk], dense (0 at masked keys and on rows with no allowed key).
struct ReferenceAdditive {
  std::vector<double> output, weights;
};

/// Additive attention in float64 (no blocks, no online softmax). False with
/// `error` when the shapes do not fit the spec.
bool computeReferenceAdditive(const KernelSpec &spec,
                              const ReferenceAdditiveInputs &in,
                              ReferenceAdditive &out, std::string &error);

/// The gradients of additive attention (docs/spec.md, "The gradient of
/// additive attention") with respect to the projections, dense: dqp [B, Sq,
/// A], dkp [B, Sk, A] and dvalues [B, Sk, Dv] (summed over every row), dv
/// [A] (over every batch, row and key).
struct ReferenceAdditiveGradients {
  std::vector<double> gradQp, gradKp, gradValues, gradV;
};

/// Additive attention's gradients in float64 from the inputs and dO
/// (`gradOutput`, [1, B, Sq, Dv]). False with `error` when the shapes do
/// not fit the spec.
bool computeReferenceAdditiveBackward(const KernelSpec &spec,
                                      const ReferenceAdditiveInputs &in,
                                      const RefTensor &gradOutput,
                                      ReferenceAdditiveGradients &out,
                                      std::string &error);

/// The accuracy bound of the contract for an element type:
/// 1e-5 for f32, 1e-2 for f16 and bf16.
double tolerance(ElementType type);

/// What a comparison against the reference found.
struct ErrorStats {
  /// max|actual - ref| / max|ref| over positions where both are finite
  /// (max|actual - ref| when every reference value is 0).
  double relative = 0;
  double maxAbs = 0; // max|actual - ref| over those positions
  double maxRef = 0; // max|ref| over those positions
  int64_t compared = 0;
  /// NaN where the reference is not NaN, or the reverse.
  int64_t nanMismatches = 0;
  /// An infinity where the reference is finite, a finite value where it is
  /// infinite, or an infinity of the other sign.
  int64_t infMismatches = 0;
  /// The index of the first NaN or inf mismatch, or -1.
  int64_t firstMismatch = -1;
  /// The two arrays had different lengths (nothing else was compared).
  bool sizeMismatch = false;

  bool mismatched() const {
    return sizeMismatch || nanMismatches || infMismatches;
  }
  bool within(double tol) const { return !mismatched() && relative <= tol; }
};

/// Compares `count` values with the reference and returns the relative error,
/// or +inf when any value is NaN or infinite where the reference is not (or
/// the reverse), so that `relativeError(...) <= tol` is the pass criterion.
/// Matching NaNs and equal infinities (e.g. LSE = -inf of a fully masked row)
/// count as agreement. Details go to `stats` when given.
double relativeError(const double *actual, const double *reference,
                     size_t count, ErrorStats *stats = nullptr);

/// As above for whole vectors; +inf (and a mismatch) when sizes differ.
double relativeError(const std::vector<double> &actual,
                     const std::vector<double> &reference,
                     ErrorStats *stats = nullptr);

} // namespace attn

#endif // ATTN_REFERENCE_REFERENCE_H
