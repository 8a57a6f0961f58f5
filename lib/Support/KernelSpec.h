//===- KernelSpec.h - What one compiled attention kernel computes ---------===//
//
// A KernelSpec is the compile-time configuration of one `attn.attention`
// kernel: element type, head dims, masking, scale, soft-cap, LSE and the
// target. `attn-compile` and `attn-run` read it from a short command-line
// string or derive it from an `attn.attention` op; the compiler turns it into
// a function, and the same fields are recorded in the compiled kernel's
// descriptor (runtime/include/attn/kernel_abi.h).
//
// This header has no MLIR dependency so that tools, tests and the reference
// can share it.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_SUPPORT_KERNELSPEC_H
#define ATTN_SUPPORT_KERNELSPEC_H

#include "lib/Support/Limits.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

enum class ElementType { F32, F16, BF16 };
enum class MaskKind { None, Bool, Bias };
enum class Alignment { TopLeft, BottomRight };
/// The element type of a tensor that modifiers capture (attn_dtype's):
/// Bool is a byte an element (i8 in the IR, 0 = false).
enum class CaptureType { F32 = 0, Bool = 3, I32 = 4, I64 = 5 };
/// Linear attention's feature map (attn.linear's, in the same order).
enum class FeatureMap { EluPlusOne = 0, Relu = 1, Identity = 2 };

/// A tensor that a kernel's score_mod or mask_mod reads.
struct CaptureSpec {
  CaptureType type = CaptureType::F32;
  int rank = 1;
  int64_t staticSizes[4] = {-1, -1, -1, -1}; // -1 = dynamic
};

struct KernelSpec {
  std::string name = "attention";
  ElementType elementType = ElementType::F32;
  int64_t headDim = 64;  // D
  int64_t valueDim = 64; // Dv
  MaskKind mask = MaskKind::None;
  // Which mask dims (B, Hq, Sq) may broadcast (be 1). The key dim never does.
  bool maskBroadcast[3] = {false, false, false};
  bool causal = false;
  Alignment alignment = Alignment::TopLeft; // used when causal or windowed
  std::optional<int64_t> windowLeft, windowRight;
  std::optional<float> scale; // absent: 1/sqrt(D)
  std::optional<float> softcap;
  // A forward kernel with `lse` also writes the log-sum-exp; a backward
  // kernel (the gradients dQ, dK, dV of the forward with these attributes;
  // it always reads the forward's LSE) with `lse` also takes dLSE, the
  // gradient of a loss that reads the LSE.
  bool lse = false;
  bool backward = false;
  // A backward kernel that also writes d(bias) (spec key `dbias`): dS of
  // every score, [B, Hq, Sq, Sk] f32, for an additive float mask.
  bool gradMask = false;
  // A backward kernel whose score_mod reads f32 captured tensors may also
  // write their gradients (spec key `dcaptures=0:2`, the capture numbers):
  // bit n for capture n, each [B, Hkv, <its shape>] f32 of partial sums per
  // work item (attn.attention_backward's grad_captures).
  uint32_t gradCaptures = 0;
  // Dropout on the weights (docs/spec.md): the kernel takes the probability
  // and the seed at run time (attn_kernel_args).
  bool dropout = false;
  // The attention weights' kernel: W [B, Hq, Sq, Sk] f32 of the forward
  // with these attributes (docs/spec.md, "Attention weights"); with `lse`
  // it reads the forward's LSE, else computes each row's own. It reads no
  // V (its Dv is D and unused).
  bool weights = false;
  // Attention sinks (docs/spec.md): the forward kernel takes one f32 logit
  // per query head, [Hq], at run time (attn_kernel_args::sinks).
  bool sinks = false;
  // Linear attention's kernel (attn.linear; docs/spec.md, "Linear
  // attention"): O of Q, K, V through the feature map, over all keys or
  // (`causal`) the keys up to each row, in chunks of `chunk` rows. It takes
  // no mask, LSE, window, scale or soft-cap. With `linearState` it reads
  // the initial state S₀ [B, Hkv, D, Dv] and normalizer z₀ [B, Hkv, D]
  // (f32) and writes the final ones (spec key `state`). With `unnormalized`
  // O is the numerator alone (no denominator, no eps).
  bool linear = false;
  float eps = 1e-6f;
  int64_t chunk = kDefaultLinearChunk;
  FeatureMap featureMap = FeatureMap::EluPlusOne;
  bool linearState = false;
  bool unnormalized = false;
  // The gradients' kernel of linear attention (attn.linear_backward; spec
  // keys `linear,backward`): dQ, dK, dV from the forward's Q, K, V, O, dO
  // and a state (S, z): the final one non-causal, the initial one with
  // `causal`; with `linearState` it also reads the final state's gradients
  // and writes the initial state's.
  bool linearBackward = false;
  // Additive attention's kernel (attn.additive; docs/spec.md, "Additive
  // attention"): query [B, Sq, Dq], keys [B, Sk, Dk = headDim], values
  // [B, Sk, Dv = valueDim], W_q [A, Dq], W_k [A, Dk], v [A]; an optional
  // keep-mask [B or 1, Sq or 1, Sk] (mask=bool with b1/q1; maskBroadcast[0]
  // and [2]); with `additiveWeights` it also writes the weights [B, Sq, Sk]
  // f32 (spec key `with_weights`). Static sizes B, Sq, Sk are staticSizes
  // 0, 3 and 4.
  bool additive = false;
  int64_t queryDim = 64; // Dq (default: d)
  int64_t attnDim = 64;  // A (default: d)
  bool additiveWeights = false;
  // The gradients' kernel of additive attention (attn.additive_backward;
  // spec keys `additive,backward`): from the forward's inputs and dO, the
  // projections' gradients and the partial sums over parts of the rows.
  bool additiveBackward = false;
  // A multi-head attention layer's kernel (attn.mha; docs/spec.md,
  // "Multi-head attention layer"): query [B, Sq, E], key [B, Sk, Ek],
  // value [B, Sk, Ev], the projections W_q [E, E], W_k [E, Ek], W_v [E, Ev],
  // W_o [E, E], with `mhaBias` the biases in_bias [3E] and out_bias [E];
  // `mhaHeads` heads of headDim = valueDim = E / heads. The mask and the
  // attributes are the forward's (mask [B or 1, H or 1, Sq or 1, Sk]).
  // Static sizes B, Sq, Sk are staticSizes 0, 3 and 4. Spec keys `mha`,
  // `embed`, `heads`, `kdim`, `vdim` (default E) and `bias`.
  bool mha = false;
  int64_t embedDim = 64;      // E
  int64_t mhaHeads = 1;       // H
  int64_t keyEmbedDim = 64;   // Ek
  int64_t valueEmbedDim = 64; // Ev
  bool mhaBias = false;
  // Score and mask modifiers (docs/spec.md): the MLIR of a function whose
  // one attn.attention holds the kernel's score_mod and mask_mod regions
  // and whose arguments after Q (tensor<1x1x1x1xf32>) are its captures
  // (lib/Compiler: setModifiers). Only an .mlir file (or setModifiers)
  // gives them, not a spec string, and printKernelSpec leaves them out.
  // Empty: none.
  std::string modifiers;
  std::vector<CaptureSpec> captures;
  bool scoreMod = false; // whether `modifiers` has a score_mod
  // The block mask's table (attn.block_mask): which capture, and its query
  // and key block sizes QB and KB; capture -1 for none.
  int64_t blockTable[3] = {-1, 0, 0};
  // Sizes declared in the IR (B, Hq, Hkv, Sq, Sk); -1 = dynamic. A spec
  // string may set the GQA ratio instead (group = Hq / Hkv), -1 = any.
  int64_t staticSizes[5] = {-1, -1, -1, -1, -1};
  int64_t group = -1;

  bool windowed() const { return windowLeft || windowRight; }
  bool usesDiagonal() const { return causal || windowed(); }
  float effectiveScale() const;
};

/// Parses a spec string: comma-separated `key=value` items, e.g.
///   "dtype=bf16,d=64,dv=64,causal=bottom_right,window=256:0,mask=bool:b1h1,
///    lse,gqa=4,scale=0.125,softcap=30,name=my_kernel"
/// Keys: name, dtype (f32|f16|bf16), d, dv (default: d), causal
/// (top_left|bottom_right, or bare `causal` = top_left), align
/// (top_left|bottom_right, for windows without causal), window=L:R (either side
/// `inf`), mask=none|bool|bias with an optional `:` list of broadcast dims
/// among b1,h1,q1, lse, backward (the gradients' kernel), dropout, weights (the
/// attention weights' kernel), sinks (a per-head sink logit), dbias (a
/// backward kernel that also writes the bias's gradient), gqa=G, scale,
/// softcap, sizes=B:Hq:Hkv:Sq:Sk (each a
/// number or `?`); for linear attention's kernel `linear` with `eps`,
/// `chunk`, `feature_map=elu_plus_one|relu|identity`, `state` and
/// `unnormalized` (and d, dv, dtype,
/// causal, gqa, sizes); for additive attention's `additive` with `dq`,
/// `attn_dim`, `with_weights` (and d, dv, dtype, mask=bool, sizes); for a
/// multi-head attention layer's `mha` with `embed`, `heads`, `kdim`, `vdim`
/// and `bias` (and dtype, causal, align, window, mask, scale, softcap,
/// sizes=B:?:?:Sq:Sk). Returns a
/// message in `error` and std::nullopt on bad input.
std::optional<KernelSpec> parseKernelSpec(const std::string &text,
                                          std::string &error);

/// Why `name` cannot name a kernel: not a C identifier, reserved in C or
/// C++, a keyword, or it or an identifier that the kernel's C header
/// derives from it (`<name>_desc`, `<name>_run`, ...) would clash with the
/// C library, `main` or the attn runtime's own identifiers. Empty when it
/// can.
std::string kernelNameProblem(std::string_view name);

/// The canonical spec string (parses back to an equal spec).
std::string printKernelSpec(const KernelSpec &spec);

const char *elementTypeName(ElementType type);

} // namespace attn

#endif // ATTN_SUPPORT_KERNELSPEC_H
