//===- AttnOps.td - Operations of the attn dialect ---------------*- tablegen -*-===//
#ifndef ATTN_OPS_TD
#define ATTN_OPS_TD

include "AttnDialect.td"
include "AttnAttrs.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/TilingInterface.td"

//===----------------------------------------------------------------------===//
// What attention-like ops share
//===----------------------------------------------------------------------===//

// The ops that compute attention (the forward op, its online step and the
// backward op) share their inputs -- Q, K, V, the optional mask and
// diagonal --, the attributes that say what is attended, and the assembly
// around their states. Each def gives its operand type, its states (the
// `outs`, after any further inputs), how they print (`inputsFormat` before
// `outs`), which state's type says whether the op is on tensors, and
// whether it reads V (`hasValue`: the weights op does not). Builders that
// take an `AttentionAttributes` (AttnOps.h) copy the attributes of another
// op whole.
class Attn_AttentionLikeOp<string mnemonic, Type inputType, dag states,
                           string statesFormat, string tensorState,
                           list<Trait> traits = [], string inputsFormat = "",
                           bit hasValue = 1>
    : Attn_Op<mnemonic, !listconcat(
        [AttrSizedOperandSegments, DestinationStyleOpInterface,
         IsolatedFromAbove], traits)> {
  let arguments = !con(
    (ins inputType:$query,
         inputType:$key),
    !if(hasValue, (ins inputType:$value), (ins)),
    (ins Optional<inputType>:$mask,
         Optional<Index>:$diagonal,
         Optional<F32>:$dropout_p,
         Optional<I64>:$dropout_seed,
         Variadic<Index>:$origin,
         Variadic<inputType>:$captures),
    states,
    (ins OptionalAttr<F32Attr>:$scale,
         UnitAttr:$causal,
         OptionalAttr<Attn_Alignment>:$alignment,
         OptionalAttr<Attn_WindowAttr>:$window,
         OptionalAttr<F32Attr>:$softcap,
         OptionalAttr<Attn_KernelAttr>:$kernel));
  let results = (outs Variadic<AnyRankedTensor>:$results);
  // The score and mask modifiers (docs/spec.md, "Score and mask
  // modifiers"): none, a score_mod, a mask_mod, or both in that order, told
  // apart by their arguments (scoreModOf, maskModOf). A variadic list
  // rather than two optional regions: an op without modifiers has no
  // region at all, which upstream patterns that clone ops expect.
  let regions = (region VariadicRegion<SizedRegion<1>>:$modifiers);

  let assemblyFormat = !strconcat(
    !if(hasValue,
      [{`ins` `(` $query `,` $key `,` $value `:` type($query) `,` type($key) `,` type($value) `)`}],
      [{`ins` `(` $query `,` $key `:` type($query) `,` type($key) `)`}]), [{
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`diagonal` `(` $diagonal^ `)`)?
    (`dropout` `(` $dropout_p^ `,` $dropout_seed `)`)?
    (`origin` `(` $origin^ `)`)?
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    }], inputsFormat, [{
    `outs` `(` }], statesFormat, [{ `)`
    (`causal` $causal^)?
    (`align` `(` $alignment^ `)`)?
    (`window` $window^)?
    (`scale` `(` $scale^ `)`)?
    (`softcap` `(` $softcap^ `)`)?
    (`kernel` $kernel^)?
    (custom<Modifiers>($modifiers)^)?
    attr-dict custom<ResultTypes>(type($results), ref(type(}], tensorState,
    [{)))
  }]);

  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// attn.attention
//===----------------------------------------------------------------------===//

def Attn_AttentionOp : Attn_AttentionLikeOp<"attention", AnyRankedTensor,
    (ins Optional<AnyRankedTensor>:$sinks,
         Variadic<AnyRankedTensor>:$outputs),
    [{$outputs `:` type($outputs)}], "$outputs", [
    Pure,
    DeclareOpInterfaceMethods<TilingInterface, [
      "getIterationDomain", "getLoopIteratorTypes",
      "getTiledImplementation", "getResultTilePosition"]>],
    [{(`sinks` `(` $sinks^ `:` type($sinks) `)`)?}]> {
  let summary = "scaled dot-product attention with masks, GQA and log-sum-exp";
  let description = [{
    Computes, for each batch `b`, query head `h`, query row `i`:

    ```
    s[i,j] = scale · Σ_d Q[b,h,i,d] · K[b,h/G,j,d]     (scale defaults to 1/√D)
    s      ← softcap · tanh(s / softcap)               (when `softcap` is set)
    s      ← s + M[b',h',i',j]                         (additive-bias mask)
    O[b,h,i,:] = Σ_{allowed j} softmax_j(s[i,j]) · V[b,h/G,j,:]
    LSE[b,h,i] = m_i + log(Σ_{allowed j} exp(s[i,j] − m_i))
    ```

    with `Q: [B, Hq, Sq, D]`, `K: [B, Hkv, Sk, D]`, `V: [B, Hkv, Sk, Dv]`,
    `O: [B, Hq, Sq, Dv]` and the optional `LSE: [B, Hq, Sq]` (f32), where
    `Hq = G · Hkv` (grouped-query attention; `G = 1` is multi-head,
    `Hkv = 1` multi-query attention). Element types are f32, f16 or bf16;
    scores, softmax statistics and the accumulation are f32 whatever the
    input type.

    A position `(i, j)` is allowed unless the boolean mask is false there,
    the additive bias is `-inf`, `causal` is set and `j > i + off`, or a
    `window` is set and `j` lies outside `[i + off − left, i + off + right]`.
    The diagonal offset `off` is explicit: `align(top_left)` means `off = 0`,
    `align(bottom_right)` means `off = Sk − Sq`; tiled forms carry it as the
    `diagonal` operand instead (in the tile's own coordinates). A row with no
    allowed position yields `O = 0` and `LSE = −inf`, never NaN.

    The contract this op states is `docs/spec.md` in the repository (shapes,
    numerics, accuracy and FLOP count); where this description and it
    disagree, `docs/spec.md` is right.

    The mask is `[Bm, Hm, Sqm, Sk]` where each of `Bm`, `Hm`, `Sqm` is either
    1 (broadcast) or the full size; its element type is `i1` (true attends)
    or the float type of the query (added to the scores). Broadcasting is
    static: a dimension of static size 1 broadcasts, a dynamic one (`?`) is
    the full size. (A compiled kernel takes every broadcast form at run
    time: the runtime gives a broadcast dimension stride 0.)

    The op is in destination-passing style: `outs` holds the output tensor
    and, when the log-sum-exp is wanted, its tensor; the results are their
    new values. `B`, `H`, `Sq` and `Sk` may be dynamic; `D` and `Dv` are
    static.

    Example: causal grouped-query attention with a bottom-right diagonal and
    the log-sum-exp:

    ```mlir
    %o, %lse = attn.attention
        ins(%q, %k, %v : tensor<2x8x?x64xf16>, tensor<2x2x?x64xf16>, tensor<2x2x?x64xf16>)
        outs(%o0, %l0 : tensor<2x8x?x64xf16>, tensor<2x8x?xf32>)
        causal align(bottom_right)
        -> tensor<2x8x?x64xf16>, tensor<2x8x?xf32>
    ```

    Dropout (`dropout(%p, %seed)`, an f32 probability in [0, 1) and an i64
    seed) drops each weight with probability p and scales the kept ones by
    1 / (1 − p); the keep bits are Philox 4x32-10 of the seed and the
    position's global indices (docs/spec.md), the LSE that of the undropped
    softmax. A tile of an op with dropout carries its global indices as
    `origin(%b, %h, %i, %j)`: the batch, query head, row and key of its
    element (0, 0, 0, 0) in the untiled op (all 0 when absent).

    Attention sinks (`sinks(%s : tensor<Hqxf32>)`, docs/spec.md "Attention
    sinks"): a per-query-head logit that each row's softmax gains as one
    more column with no value, `l_i ← l_i + exp(sinks[h] − m_i)` (in the
    stable form). A fully masked row then gives `O = 0` and `LSE = sinks[h]`.
    The sink is applied once, to the final state (attn-online-softmax puts
    it in the normalization), so key tiling and key splits never see it.

    A boolean keep-mask broadcast over batch and heads, a sliding window that
    looks back 256 keys, and soft-capping:

    ```mlir
    %o = attn.attention
        ins(%q, %k, %v : tensor<1x4x128x64xf32>, tensor<1x4x512x64xf32>, tensor<1x4x512x32xf32>)
        mask(%m : tensor<1x1x128x512xi1>)
        outs(%init : tensor<1x4x128x32xf32>)
        align(top_left) window <left = 256, right = 0> scale(0.125) softcap(30.0)
        -> tensor<1x4x128x32xf32>
    ```
  }];

  let builders = [
    // A copy of another op's attributes (AttentionAttributes::of).
    OpBuilder<(ins "::mlir::TypeRange":$resultTypes, "::mlir::Value":$query,
      "::mlir::Value":$key, "::mlir::Value":$value, "::mlir::Value":$mask,
      "::mlir::Value":$diagonal, "::mlir::Value":$sinks,
      "::mlir::ValueRange":$outputs,
      "const ::mlir::attn::AttentionAttributes &":$attributes), [{
      build($_builder, $_state, resultTypes, query, key, value, mask,
            diagonal, attributes.dropoutP, attributes.dropoutSeed,
            attributes.origin, attributes.captures, sinks, outputs,
            attributes.scale, attributes.causal, attributes.alignment,
            attributes.window, attributes.softcap, attributes.kernel, attributes.modifierCount());
      attributes.cloneModifiersInto($_state);
    }]>
  ];

  let hasCanonicalizer = 1;

  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputsMutable();
    }
    /// The output tensor O.
    ::mlir::Value getOutput() { return getOutputs()[0]; }
    /// The log-sum-exp tensor, or null.
    ::mlir::Value getLse() {
      return getOutputs().size() > 1 ? getOutputs()[1] : ::mlir::Value();
    }
    /// The scale the op computes with: the attribute, or 1/sqrt(D).
    float getEffectiveScale();
  }];
}

//===----------------------------------------------------------------------===//
// attn.online_attention
//===----------------------------------------------------------------------===//

// The online op runs before and after bufferization.
def Attn_TensorOrMemRef : AnyTypeOf<[AnyRankedTensor, AnyMemRef],
                                    "ranked tensor or memref">;

def Attn_OnlineAttentionOp : Attn_AttentionLikeOp<"online_attention",
    Attn_TensorOrMemRef,
    (ins Attn_TensorOrMemRef:$acc, Attn_TensorOrMemRef:$max,
         Attn_TensorOrMemRef:$sum),
    [{$acc `,` $max `,` $sum `:` type($acc) `,` type($max) `,` type($sum)}],
    "$acc", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<TilingInterface, [
      "getIterationDomain", "getLoopIteratorTypes",
      "getTiledImplementation", "getResultTilePosition"]>]> {
  let summary = "one step of the online-softmax recurrence over a range of keys";
  let description = [{
    Folds the keys of `K` and `V` into the running state of FlashAttention's
    online softmax: the unnormalized f32 accumulator `acc: [B, Hq, Sq, Dv]`,
    the running row maximum `max: [B, Hq, Sq]` and the running row sum
    `sum: [B, Hq, Sq]`. With `s` the scores of the new keys (scaled,
    soft-capped, biased and masked as `attn.attention` defines them):

    ```
    m'   = max(max, max_j s[:, j])
    α    = exp(max − m')                  (0 when max = −inf)
    acc' = α · acc + Σ_j exp(s[:, j] − m') · V[j, :]
    sum' = α · sum + Σ_j exp(s[:, j] − m')
    ```

    Every exponent is of a non-positive number, and a row with no allowed key
    so far keeps `max = −inf`, `sum = 0`, `acc = 0`. Because the op
    accumulates into its `outs`, tiling the key dimension is a plain
    reduction loop; `attn-online-softmax` creates it from `attn.attention`,
    `attn-tile-keys` tiles it, `attn-lower-to-vector` lowers it after
    bufferization. It takes tensors or memrefs (after bufferization it has no
    results).

    ```mlir
    %acc1, %max1, %sum1 = attn.online_attention
        ins(%q, %k, %v : tensor<1x1x64x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
        diagonal(%d)
        outs(%acc, %max, %sum : tensor<1x1x64x64xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>)
        causal scale(0.125)
        -> tensor<1x1x64x64xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>
    ```
  }];

  let builders = [
    // A copy of another op's attributes (AttentionAttributes::of).
    OpBuilder<(ins "::mlir::TypeRange":$resultTypes, "::mlir::Value":$query,
      "::mlir::Value":$key, "::mlir::Value":$value, "::mlir::Value":$mask,
      "::mlir::Value":$diagonal, "::mlir::Value":$acc, "::mlir::Value":$max,
      "::mlir::Value":$sum,
      "const ::mlir::attn::AttentionAttributes &":$attributes), [{
      build($_builder, $_state, resultTypes, query, key, value, mask,
            diagonal, attributes.dropoutP, attributes.dropoutSeed,
            attributes.origin, attributes.captures, acc, max, sum,
            attributes.scale, attributes.causal, attributes.alignment,
            attributes.window, attributes.softcap, attributes.kernel, attributes.modifierCount());
      attributes.cloneModifiersInto($_state);
    }]>
  ];

  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return ::mlir::MutableOperandRange(getOperation(),
          getAccMutable().getOperandNumber(), 3);
    }
    float getEffectiveScale();
    /// The band of a causal or windowed op, as (left, right): row r sees
    /// the keys k with r + diagonal - left <= k <= r + diagonal + right,
    /// a side without a value unbounded (causal: right at most 0).
    std::pair<std::optional<int64_t>, std::optional<int64_t>>
    getBandOffsets();
  }];
}

//===----------------------------------------------------------------------===//
// attn.attention_backward
//===----------------------------------------------------------------------===//

def Attn_AttentionBackwardOp : Attn_AttentionLikeOp<"attention_backward",
    Attn_TensorOrMemRef,
    (ins Attn_TensorOrMemRef:$output, Attn_TensorOrMemRef:$lse,
         Attn_TensorOrMemRef:$grad_output,
         Optional<Attn_TensorOrMemRef>:$grad_lse,
         Attn_TensorOrMemRef:$grad_query, Attn_TensorOrMemRef:$grad_key,
         Attn_TensorOrMemRef:$grad_value,
         Optional<Attn_TensorOrMemRef>:$grad_mask,
         Variadic<Attn_TensorOrMemRef>:$grad_captures,
         OptionalAttr<DenseI64ArrayAttr>:$grad_capture_numbers),
    [{$grad_query `,` $grad_key `,` $grad_value `:` type($grad_query) `,`
      type($grad_key) `,` type($grad_value)
      (`grad_mask` `(` $grad_mask^ `:` type($grad_mask) `)`)?
      (`grad_captures` $grad_capture_numbers^ `(` $grad_captures `:`
       type($grad_captures) `)`)?}],
    "$grad_query", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<TilingInterface, [
      "getIterationDomain", "getLoopIteratorTypes",
      "getTiledImplementation", "getResultTilePosition"]>],
    [{`forward` `(` $output `,` $lse `:` type($output) `,` type($lse) `)`
      `grads` `(` $grad_output `:` type($grad_output) `)`
      (`grad_lse` `(` $grad_lse^ `:` type($grad_lse) `)`)?}]> {
  let summary = "the gradients of attn.attention: dQ, dK, dV and d(bias)";
  let description = [{
    Given the inputs and attributes of an `attn.attention` (Q, K, V, mask,
    causal band, window, scale, soft-cap), its output `O` and log-sum-exp
    `LSE` (`forward(...)`), the gradient `dO` of a loss with respect to `O`
    (`grads(...)`) and, when the loss also reads the log-sum-exp, its
    gradient `dLSE` (`grad_lse(...)`), computes

    ```
    P[i,j]  = exp(s[i,j] − LSE[i])                   (0 where excluded, or LSE = −inf)
    Δ_i     = Σ_e dO[i,e]·O[i,e] − dLSE[i]
    dS[i,j] = P[i,j] · (Σ_e dO[i,e]·V[j,e] − Δ_i) · (1 − (s/c)²  with softcap(c))
    dV[j]   = Σ_i P[i,j]·dO[i]      dQ[i] = scale·Σ_j dS[i,j]·K[j]
    dK[j]   = scale·Σ_i dS[i,j]·Q[i]
    ```

    with `O`, `dO: [B, Hq, Sq, Dv]` of the query's element type, `LSE`,
    `dLSE: [B, Hq, Sq]` f32, and the results `dQ`, `dK`, `dV` shaped and
    typed as Q, K and V. Under GQA, dK and dV of a key/value head sum the
    contributions of its `G` query heads. P is recomputed from Q, K and the
    saved LSE: nothing of size `Sq · Sk` is stored. A fully masked row (LSE
    = −inf) gets dQ = 0 and contributes nothing. The contract is the
    section "The gradient" of `docs/spec.md`.

    With an additive float mask, `outs(... grad_mask(%dm : ...))` also
    writes `dS` itself, the gradient of each score and so of the bias
    element added to it: `dM: [B, Hq, Sq, Sk]` f32, 0 at excluded positions
    (whatever the mask's broadcast: the caller sums the broadcast dims). It
    is the one O(Sq · Sk) result of the backward, made only when asked for.

    With a `score_mod` reading f32 captured tensors, `outs(...
    grad_captures [n, ...](%g, ... : ...))` also writes the gradient of
    captured tensor `n` (each listed once, in increasing order): for each
    element `c` of it,

    ```
    dC[b, hkv, c] = Σ over the work item's positions (h in the group, i, j)
                    of dS'[b,h,i,j] · ∂score_mod(s, b, h, i, j)/∂c
    ```

    where `dS' = P · (dP − Δ)` is the gradient of the modified score (0 where
    P is 0), the derivative taken through the region's ops as for dS
    (forward mode, seeded at each read of the tensor; a read's indices are
    clamped as the forward's are). `%g: [B, Hkv, <the capture's shape>]`
    f32 holds one partial sum per batch and key/value head, the op's work
    items, which each overwrite their own: the caller sums dims 0 and 1. No
    two work items add to one element, so the sums do not depend on the
    thread count (no atomics).

    `outs` holds dQ, dK and dV, which the op overwrites; on tensors the
    results are their new values, after bufferization it has none. It tiles
    over batches and whole GQA groups of heads (each tile owns its dQ rows
    and its dK/dV heads, so no two tiles write one element: the result does
    not depend on the thread count).

    ```mlir
    %dq, %dk, %dv = attn.attention_backward
        ins(%q, %k, %v : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x64xf32>)
        forward(%o, %lse : tensor<2x8x?x64xf32>, tensor<2x8x?xf32>)
        grads(%do : tensor<2x8x?x64xf32>)
        outs(%dq0, %dk0, %dv0 : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x64xf32>)
        causal align(bottom_right)
        -> tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x64xf32>
    ```
  }];

  let builders = [
    // A copy of another op's attributes (AttentionAttributes::of).
    OpBuilder<(ins "::mlir::TypeRange":$resultTypes, "::mlir::Value":$query,
      "::mlir::Value":$key, "::mlir::Value":$value, "::mlir::Value":$mask,
      "::mlir::Value":$diagonal, "::mlir::Value":$output,
      "::mlir::Value":$lse, "::mlir::Value":$gradOutput,
      "::mlir::Value":$gradLse, "::mlir::Value":$gradQuery,
      "::mlir::Value":$gradKey, "::mlir::Value":$gradValue,
      "::mlir::Value":$gradMask,
      "const ::mlir::attn::AttentionAttributes &":$attributes,
      CArg<"::mlir::ValueRange", "{}">:$gradCaptures,
      CArg<"::mlir::DenseI64ArrayAttr", "{}">:$gradCaptureNumbers), [{
      build($_builder, $_state, resultTypes, query, key, value, mask,
            diagonal, attributes.dropoutP, attributes.dropoutSeed,
            attributes.origin, attributes.captures, output, lse, gradOutput,
            gradLse, gradQuery, gradKey, gradValue, gradMask, gradCaptures,
            gradCaptureNumbers, attributes.scale, attributes.causal, attributes.alignment,
            attributes.window, attributes.softcap, attributes.kernel, attributes.modifierCount());
      attributes.cloneModifiersInto($_state);
    }]>
  ];

  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return ::mlir::MutableOperandRange(getOperation(),
          getGradQueryMutable().getOperandNumber(),
          (getGradMask() ? 4 : 3) + getGradCaptures().size());
    }
    /// The result of the first grad_captures partial (after dQ, dK, dV
    /// and dM).
    unsigned getFirstGradCaptureResult() { return getGradMask() ? 4 : 3; }
    float getEffectiveScale();
    /// The band, as attn.online_attention's getBandOffsets.
    std::pair<std::optional<int64_t>, std::optional<int64_t>>
    getBandOffsets();
    /// The verifier's part for grad_captures.
    ::llvm::LogicalResult verifyGradCaptures();
  }];
}

//===----------------------------------------------------------------------===//
// attn.attention_weights
//===----------------------------------------------------------------------===//

def Attn_AttentionWeightsOp : Attn_AttentionLikeOp<"attention_weights",
    Attn_TensorOrMemRef,
    (ins Optional<Attn_TensorOrMemRef>:$lse, Attn_TensorOrMemRef:$weights),
    [{$weights `:` type($weights)}],
    "$weights", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<TilingInterface, [
      "getIterationDomain", "getLoopIteratorTypes",
      "getTiledImplementation", "getResultTilePosition"]>],
    [{(`lse` `(` $lse^ `:` type($lse) `)`)?}], /*hasValue=*/0> {
  let summary = "the attention weights P of attn.attention, as a matrix";
  let description = [{
    Given the query, the keys, the mask and every attribute of an
    `attn.attention` (causal band, window, scale, soft-cap, GQA, dropout),
    writes the matrix of weights that its softmax gives each key:

    ```
    P[b,h,i,j] = exp(s[b,h,i,j] − LSE[b,h,i]) · Z[b,h,i,j]
    ```

    with `s` the op's scores, `LSE` the row's log-sum-exp and `Z` dropout's
    factor (1 without dropout): the matrix that multiplies V in the forward.
    `P` is 0 at every excluded position and on a fully masked row (LSE =
    −inf). `weights: [B, Hq, Sq, Sk]` is f32 whatever the inputs' type. With
    `lse(...)` (the forward's log-sum-exp, `[B, Hq, Sq]` f32) the op
    normalizes by it; without, it computes each row's own first (a second
    pass over the keys). The contract is the section "Attention weights" of
    `docs/spec.md`.

    It is the only op whose output is O(Sq · Sk): attention itself never
    stores P. It tiles over batches, query heads and query rows (every row
    is its own).

    ```mlir
    %p = attn.attention_weights ins(%q, %k : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>)
        outs(%p0 : tensor<2x8x?x?xf32>) causal align(bottom_right)
        -> tensor<2x8x?x?xf32>
    ```
  }];

  let builders = [
    // A copy of another op's attributes (AttentionAttributes::of).
    OpBuilder<(ins "::mlir::TypeRange":$resultTypes, "::mlir::Value":$query,
      "::mlir::Value":$key, "::mlir::Value":$mask,
      "::mlir::Value":$diagonal, "::mlir::Value":$lse,
      "::mlir::Value":$weights,
      "const ::mlir::attn::AttentionAttributes &":$attributes), [{
      build($_builder, $_state, resultTypes, query, key, mask, diagonal,
            attributes.dropoutP, attributes.dropoutSeed, attributes.origin,
            attributes.captures, lse, weights, attributes.scale,
            attributes.causal, attributes.alignment, attributes.window,
            attributes.softcap, attributes.kernel, attributes.modifierCount());
      attributes.cloneModifiersInto($_state);
    }]>
  ];

  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getWeightsMutable();
    }
    float getEffectiveScale();
    /// The band, as attn.online_attention's getBandOffsets.
    std::pair<std::optional<int64_t>, std::optional<int64_t>>
    getBandOffsets();
  }];
}

//===----------------------------------------------------------------------===//
// attn.linear
//===----------------------------------------------------------------------===//

def Attn_LinearOp : Attn_Op<"linear", [
    AttrSizedOperandSegments, DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<TilingInterface, [
      "getIterationDomain", "getLoopIteratorTypes",
      "getTiledImplementation", "getResultTilePosition"]>]> {
  let summary = "linear attention: a feature map in place of the softmax";
  let description = [{
    Linear attention (Katharopoulos et al., 2020) with the feature map
    `φ` (`elu_plus_one` by default: `elu(x) + 1`; or `relu`), for each
    batch `b`, query head `h` (reading key/value head `h / G`, G = Hq / Hkv)
    and query row `i`:

    ```
    S_i = S₀ + Σ_j φ(K[j])ᵀ · V[j]          [D, Dv]  (the state)
    z_i = z₀ + Σ_j φ(K[j])                   [D]      (the normalizer)
    O[i] = (φ(Q[i]) · S_i) / (φ(Q[i]) · z_i + eps)
    ```

    where `j` runs over every key, or with `causal` over the keys `j <= i`
    (then Sq = Sk). With `unnormalized`, `O[i] = φ(Q[i]) · S_i`: no
    denominator and no `eps` (the normalizer is still carried in the
    state); with `feature_map(identity)` that is the plain causal or full
    sum of products `Σ_j (Q[i] · K[j]) V[j]`. `S₀` and `z₀` are the optional initial state
    (`state(%s0, %z0)`: `[B, Hkv, D, Dv]` and `[B, Hkv, D]` f32, zero when
    absent); the optional second and third outs receive the final state
    `S₀ + Σ_all`, `z₀ + Σ_all` in the same layout, so that a sequence can be
    continued call after call (token by token when decoding). Q, K, V and O
    share an element type (f32, bf16, f16); φ, the products and the state
    are f32, O is rounded once. `eps` defaults to 1e-6.

    The non-causal form is two matrix products over the state; the causal
    form is computed chunkwise (`chunk` rows at a time, 16 by default): per
    chunk, the intra-chunk causal product `(φ(Q_c) φ(K_c)ᵀ ⊙ M) V_c` plus
    `φ(Q_c) S`, then `S += φ(K_c)ᵀ V_c`. The chunk changes only the order of
    f32 sums. The op tiles over batches and key/value heads (a work item
    owns a state and its GQA group of query heads). The contract is the
    section "Linear attention" of `docs/spec.md`.

    ```mlir
    %o, %s, %z = attn.linear ins(%q, %k, %v : tensor<1x8x?x64xf32>,
        tensor<1x8x?x64xf32>, tensor<1x8x?x64xf32>)
        outs(%o0, %s0, %z0 : tensor<1x8x?x64xf32>, tensor<1x8x64x64xf32>,
        tensor<1x8x64xf32>) causal chunk(64)
        -> tensor<1x8x?x64xf32>, tensor<1x8x64x64xf32>, tensor<1x8x64xf32>
    ```
  }];
  let arguments = (ins Attn_TensorOrMemRef:$query,
                       Attn_TensorOrMemRef:$key,
                       Attn_TensorOrMemRef:$value,
                       Variadic<Attn_TensorOrMemRef>:$initial_state,
                       Variadic<Attn_TensorOrMemRef>:$outputs,
                       UnitAttr:$causal,
                       OptionalAttr<I64Attr>:$chunk,
                       OptionalAttr<F32Attr>:$eps,
                       OptionalAttr<Attn_FeatureMap>:$feature_map,
                       UnitAttr:$unnormalized);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `:` type($query) `,` type($key) `,` type($value) `)`
    (`state` `(` $initial_state^ `:` type($initial_state) `)`)?
    `outs` `(` $outputs `:` type($outputs) `)`
    (`causal` $causal^)?
    (`chunk` `(` $chunk^ `)`)?
    (`eps` `(` $eps^ `)`)?
    (`feature_map` `(` $feature_map^ `)`)?
    (`unnormalized` $unnormalized^)?
    attr-dict custom<ResultTypes>(type($results), ref(type($outputs)))
  }];
  let hasVerifier = 1;

  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputsMutable();
    }
    ::mlir::Value getOutput() { return getOutputs().front(); }
    /// The initial state S₀ and normalizer z₀, or null.
    ::mlir::Value getStateIn() {
      return getInitialState().empty() ? nullptr : getInitialState()[0];
    }
    ::mlir::Value getNormalizerIn() {
      return getInitialState().empty() ? nullptr : getInitialState()[1];
    }
    /// The outs that receive the final state and normalizer, or null.
    ::mlir::Value getStateOut() {
      return getOutputs().size() < 3 ? nullptr : getOutputs()[1];
    }
    ::mlir::Value getNormalizerOut() {
      return getOutputs().size() < 3 ? nullptr : getOutputs()[2];
    }
    /// The rows per chunk of the causal form (default 16).
    int64_t getChunkRows();
    float getEffectiveEps() {
      return getEps() ? getEps()->convertToFloat() : 1e-6f;
    }
    ::mlir::attn::FeatureMap getEffectiveFeatureMap() {
      return getFeatureMap() ? *getFeatureMap()
                             : ::mlir::attn::FeatureMap::elu_plus_one;
    }
  }];
}

//===----------------------------------------------------------------------===//
// attn.linear_backward
//===----------------------------------------------------------------------===//

def Attn_LinearBackwardOp : Attn_Op<"linear_backward", [
    AttrSizedOperandSegments, DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<TilingInterface, [
      "getIterationDomain", "getLoopIteratorTypes",
      "getTiledImplementation", "getResultTilePosition"]>]> {
  let summary = "the gradients of attn.linear";
  let description = [{
    The backward of `attn.linear` (the section "Gradient of linear
    attention" of `docs/spec.md`): from the forward's Q, K, V, its output
    O, dO (all of one element type) and a state `S [B, Hkv, D, Dv]` and
    normalizer `z [B, Hkv, D]` (f32), for each key/value head and its group
    of query heads. Non-causal, S and z are what every row saw (the
    forward's final state) and

    ```
    g_i = dO_i / (φ(Q_i)·z + eps),  c_i = −(g_i · O_i)
    dQ_i = (S·g_i + c_i·z) ∘ φ'(Q_i)
    dS = dS_fin + Σ_{h,i} φ(Q_i)ᵀ g_i,   dz = dz_fin + Σ_{h,i} c_i φ(Q_i)
    dK_j = (dS·V_j + dz) ∘ φ'(K_j),      dV_j = dSᵀ·φ(K_j)
    ```

    With `causal` (Sq = Sk), S and z are the forward's initial state S₀,
    z₀ (zeros when it had none): row i saw S_i = S₀ + Σ_{j≤i} φ(K_j)ᵀV_j
    and z_i likewise, and key j's dS_j, dz_j sum the rows i ≥ j; the kernel
    computes it in chunks, forward in time for dQ, backward for dK and dV.
    `unnormalized`: `g = dO` and `c = 0`. The optional `state_grads(%dS_fin,
    %dz_fin)` are the gradients of the forward's final state (zero when
    absent); the optional fourth and fifth outs receive dS and dz, the
    gradients of the forward's initial state. dQ, dK and dV are of the
    inputs' element type (rounded once), dS and dz f32. The op tiles over
    batches and key/value heads, as attn.linear: a work item writes its
    group's dQ and its own dK, dV, dS and dz, so nothing is summed across
    work items (no atomics: the same bits whatever the thread count).

    ```mlir
    %dq, %dk, %dv = attn.linear_backward
        ins(%q, %k, %v, %o, %do : tensor<1x8x?x64xf32>, tensor<1x8x?x64xf32>,
            tensor<1x8x?x64xf32>, tensor<1x8x?x64xf32>, tensor<1x8x?x64xf32>)
        state(%s, %z : tensor<1x8x64x64xf32>, tensor<1x8x64xf32>)
        outs(%dq0, %dk0, %dv0 : tensor<1x8x?x64xf32>, tensor<1x8x?x64xf32>,
             tensor<1x8x?x64xf32>)
        -> tensor<1x8x?x64xf32>, tensor<1x8x?x64xf32>, tensor<1x8x?x64xf32>
    ```
  }];
  let arguments = (ins Attn_TensorOrMemRef:$query,
                       Attn_TensorOrMemRef:$key,
                       Attn_TensorOrMemRef:$value,
                       Attn_TensorOrMemRef:$output,
                       Attn_TensorOrMemRef:$grad_output,
                       Attn_TensorOrMemRef:$state,
                       Attn_TensorOrMemRef:$normalizer,
                       Variadic<Attn_TensorOrMemRef>:$state_grads,
                       Variadic<Attn_TensorOrMemRef>:$outputs,
                       UnitAttr:$causal,
                       OptionalAttr<F32Attr>:$eps,
                       OptionalAttr<Attn_FeatureMap>:$feature_map,
                       UnitAttr:$unnormalized);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `,` $output `,` $grad_output `:`
        type($query) `,` type($key) `,` type($value) `,` type($output) `,`
        type($grad_output) `)`
    `state` `(` $state `,` $normalizer `:` type($state) `,` type($normalizer) `)`
    (`state_grads` `(` $state_grads^ `:` type($state_grads) `)`)?
    `outs` `(` $outputs `:` type($outputs) `)`
    (`causal` $causal^)?
    (`eps` `(` $eps^ `)`)?
    (`feature_map` `(` $feature_map^ `)`)?
    (`unnormalized` $unnormalized^)?
    attr-dict custom<ResultTypes>(type($results), ref(type($outputs)))
  }];
  let hasVerifier = 1;

  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputsMutable();
    }
    ::mlir::Value getGradQuery() { return getOutputs()[0]; }
    ::mlir::Value getGradKey() { return getOutputs()[1]; }
    ::mlir::Value getGradValue() { return getOutputs()[2]; }
    /// The gradients of the final state and normalizer, or null (zero).
    ::mlir::Value getGradFinalState() {
      return getStateGrads().empty() ? nullptr : getStateGrads()[0];
    }
    ::mlir::Value getGradFinalNormalizer() {
      return getStateGrads().empty() ? nullptr : getStateGrads()[1];
    }
    /// The outs of the initial state's gradients, or null.
    ::mlir::Value getGradInitialState() {
      return getOutputs().size() < 5 ? nullptr : getOutputs()[3];
    }
    ::mlir::Value getGradInitialNormalizer() {
      return getOutputs().size() < 5 ? nullptr : getOutputs()[4];
    }
    float getEffectiveEps() {
      return getEps() ? getEps()->convertToFloat() : 1e-6f;
    }
    ::mlir::attn::FeatureMap getEffectiveFeatureMap() {
      return getFeatureMap() ? *getFeatureMap()
                             : ::mlir::attn::FeatureMap::elu_plus_one;
    }
  }];
}

//===----------------------------------------------------------------------===//
// attn.additive
//===----------------------------------------------------------------------===//

def Attn_AdditiveOp : Attn_Op<"additive", [
    AttrSizedOperandSegments, DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<TilingInterface, [
      "getIterationDomain", "getLoopIteratorTypes",
      "getTiledImplementation", "getResultTilePosition"]>]> {
  let summary = "additive (Bahdanau) attention: a small network scores each pair";
  let description = [{
    Additive attention (Bahdanau et al., 2015), for each batch `b`, query
    row `i` and key `j`:

    ```
    s[i,j] = Σ_a v[a] · tanh(qp[i,a] + kp[j,a])
             qp = query · W_qᵀ  [B, Sq, A],  kp = keys · W_kᵀ  [B, Sk, A]
    P[i,:] = softmax over the allowed keys of s[i,:]
    O[i]   = Σ_j P[i,j] · values[j]
    ```

    with `query [B, Sq, Dq]`, `keys [B, Sk, Dk]`, `values [B, Sk, Dv]`,
    `W_q [A, Dq]`, `W_k [A, Dk]`, `v [A]` (one element type: f32, bf16 or
    f16) and an optional keep-mask `[B or 1, Sq or 1, Sk]` (i1, true
    attends). A row with no allowed key gives O = 0 and weights 0 (the
    tutorials' `-1e9` fill gives such a row the uniform average instead).
    The outs are O `[B, Sq, Dv]` (the inputs' type) and, optionally, the
    weights P `[B, Sq, Sk]` (f32). The projections, tanh and the softmax are
    f32; nothing of size Sq·Sk·A exists: the scores are computed a block of
    keys at a time and folded into an online softmax. The op tiles over
    batches and query rows. The contract is the section "Additive
    attention" of `docs/spec.md`.

    ```mlir
    %o = attn.additive ins(%q, %k, %v, %wq, %wk, %va : tensor<4x?x256xf32>,
        tensor<4x?x256xf32>, tensor<4x?x256xf32>, tensor<128x256xf32>,
        tensor<128x256xf32>, tensor<128xf32>)
        outs(%o0 : tensor<4x?x256xf32>) -> tensor<4x?x256xf32>
    ```
  }];
  let arguments = (ins Attn_TensorOrMemRef:$query,
                       Attn_TensorOrMemRef:$keys,
                       Attn_TensorOrMemRef:$values,
                       Attn_TensorOrMemRef:$query_weight,
                       Attn_TensorOrMemRef:$key_weight,
                       Attn_TensorOrMemRef:$score_vector,
                       Optional<Attn_TensorOrMemRef>:$mask,
                       Variadic<Attn_TensorOrMemRef>:$outputs);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    `ins` `(` $query `,` $keys `,` $values `,` $query_weight `,` $key_weight `,` $score_vector `:`
        type($query) `,` type($keys) `,` type($values) `,` type($query_weight) `,`
        type($key_weight) `,` type($score_vector) `)`
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    `outs` `(` $outputs `:` type($outputs) `)`
    attr-dict custom<ResultTypes>(type($results), ref(type($outputs)))
  }];
  let hasVerifier = 1;

  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputsMutable();
    }
    ::mlir::Value getOutput() { return getOutputs().front(); }
    /// The weights out, or null.
    ::mlir::Value getWeights() {
      return getOutputs().size() < 2 ? nullptr : getOutputs()[1];
    }
    /// As the softmax's shared maths (AttentionMath) read them: additive
    /// scores are not scaled or capped.
    float getEffectiveScale() { return 1.0f; }
    ::mlir::FloatAttr getSoftcapAttr() { return {}; }
  }];
}

//===----------------------------------------------------------------------===//
// attn.additive_backward
//===----------------------------------------------------------------------===//

def Attn_AdditiveBackwardOp : Attn_Op<"additive_backward", [
    AttrSizedOperandSegments, DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<TilingInterface, [
      "getIterationDomain", "getLoopIteratorTypes",
      "getTiledImplementation", "getResultTilePosition"]>]> {
  let summary = "the gradients of attn.additive with respect to its projections";
  let description = [{
    The backward of `attn.additive` (the section "The gradient of additive
    attention" of `docs/spec.md`): from the forward's operands and dO
    `[B, Sq, Dv]` (the gradient of O, the inputs' element type), with
    `t = tanh(qp + kp)`, P the forward's weights, `dP = dO·valuesᵀ` and
    `dS = P·(dP − Σ_j P·dP)`:

    ```
    grad_qp[b,i,a]         = v[a] · Σ_j dS[i,j] · (1 − t[i,j,a]²)
    grad_kp[b,p,j,a]       = v[a] · Σ_{i in part p} dS[i,j] · (1 − t[i,j,a]²)
    grad_values[b,p,j,:]   = Σ_{i in part p} P[i,j] · dO[i,:]
    grad_v[b,p,a]          = Σ_{i in part p} Σ_j dS[i,j] · t[i,j,a]
    ```

    All four outs are f32. The sums over query rows are split into `P`
    parts (the outs' dim 1): part `p` holds rows `[p·R, min(Sq, (p+1)·R))`
    with `R = ⌈Sq / P⌉`, so that parts run in parallel without atomics and
    the caller sums them in a fixed order (bit-identical whatever the
    thread count); P = 1 gives the sums themselves. The gradients of the
    query, the keys and the weights are matrix products of these:
    `dquery = grad_qp·W_q`, `dW_q = grad_qpᵀ·query` (and the keys' alike).
    The op tiles over batches and parts.

    ```mlir
    %r:4 = attn.additive_backward ins(%q, %k, %v, %wq, %wk, %va, %do :
        tensor<4x?x256xf32>, tensor<4x?x256xf32>, tensor<4x?x256xf32>,
        tensor<128x256xf32>, tensor<128x256xf32>, tensor<128xf32>,
        tensor<4x?x256xf32>)
        outs(%dqp, %dkp, %dv, %dva : tensor<4x?x128xf32>,
             tensor<4x?x?x128xf32>, tensor<4x?x?x256xf32>, tensor<4x?x128xf32>)
        -> tensor<4x?x128xf32>, tensor<4x?x?x128xf32>, tensor<4x?x?x256xf32>,
           tensor<4x?x128xf32>
    ```
  }];
  let arguments = (ins Attn_TensorOrMemRef:$query,
                       Attn_TensorOrMemRef:$keys,
                       Attn_TensorOrMemRef:$values,
                       Attn_TensorOrMemRef:$query_weight,
                       Attn_TensorOrMemRef:$key_weight,
                       Attn_TensorOrMemRef:$score_vector,
                       Attn_TensorOrMemRef:$grad_output,
                       Optional<Attn_TensorOrMemRef>:$mask,
                       Variadic<Attn_TensorOrMemRef>:$outputs);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    `ins` `(` $query `,` $keys `,` $values `,` $query_weight `,` $key_weight `,` $score_vector `,`
        $grad_output `:` type($query) `,` type($keys) `,` type($values) `,`
        type($query_weight) `,` type($key_weight) `,` type($score_vector) `,`
        type($grad_output) `)`
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    `outs` `(` $outputs `:` type($outputs) `)`
    attr-dict custom<ResultTypes>(type($results), ref(type($outputs)))
  }];
  let hasVerifier = 1;

  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputsMutable();
    }
    ::mlir::Value getGradQueryProjection() { return getOutputs()[0]; }
    ::mlir::Value getGradKeyProjection() { return getOutputs()[1]; }
    ::mlir::Value getGradValues() { return getOutputs()[2]; }
    ::mlir::Value getGradScoreVector() { return getOutputs()[3]; }
    /// As the softmax's shared maths (AttentionMath) read them.
    float getEffectiveScale() { return 1.0f; }
    ::mlir::FloatAttr getSoftcapAttr() { return {}; }
  }];
}

//===----------------------------------------------------------------------===//
// attn.mha
//===----------------------------------------------------------------------===//

def Attn_MhaOp : Attn_Op<"mha", [
    Pure, AttrSizedOperandSegments, DestinationStyleOpInterface]> {
  let summary = "a multi-head attention layer: projections, heads, attention, output projection";
  let description = [{
    The classic multi-head attention layer (`torch.nn.MultiheadAttention`'s
    forward, batch first), for each batch `b`:

    ```
    q = query · W_qᵀ + b_q    k = key · W_kᵀ + b_k    v = value · W_vᵀ + b_v
    q, k, v split into H heads of E/H features: [B, H, S, E/H]
    o = attn.attention(q, k, v) with the mask, causal, window, scale, softcap
    Y = merge_heads(o) · W_oᵀ + b_o                     [B, Sq, E]
    ```

    with `query [B, Sq, E]`, `key [B, Sk, Ek]`, `value [B, Sk, Ev]`. The
    input projections are packed, `in_proj(%w : [3E, E])` (PyTorch's
    `in_proj_weight`, rows q, k, v; then Ek = Ev = E), or separate,
    `in_proj(%wq, %wk, %wv : [E, E], [E, Ek], [E, Ev])`; `in_bias` is
    `[3E]` either way (`in_proj_bias`), `out_proj(%wo : [E, E])` and
    `out_bias [E]` are `out_proj.weight` and `out_proj.bias`. All share one
    element type (f32, bf16 or f16); each projection accumulates in f32 and
    rounds to it, as PyTorch's linear layers do. The mask and the attributes
    are attn.attention's, with `Hq = Hkv = H` (`heads`) and `D = E/H`: a
    keep-mask or additive bias `[B or 1, H or 1, Sq or 1, Sk]`, `causal` and
    `window` with their alignment, `scale` (default `1/√(E/H)`), `softcap`.
    A row with no allowed key attends to nothing (its heads give 0, so its
    output row is `b_o`).

    `attn-decompose-mha` rewrites the op as linalg matrix multiplications
    around `attn.attention`, one batch per work item.

    ```mlir
    %y = attn.mha ins(%x, %x, %x : tensor<?x?x512xf32>, tensor<?x?x512xf32>,
                                  tensor<?x?x512xf32>)
        in_proj(%w : tensor<1536x512xf32>) in_bias(%b : tensor<1536xf32>)
        out_proj(%wo : tensor<512x512xf32>) out_bias(%bo : tensor<512xf32>)
        outs(%y0 : tensor<?x?x512xf32>) heads(8) causal align(top_left)
        -> tensor<?x?x512xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$query,
                       AnyRankedTensor:$key,
                       AnyRankedTensor:$value,
                       Variadic<AnyRankedTensor>:$in_weights,
                       Optional<AnyRankedTensor>:$in_bias,
                       AnyRankedTensor:$out_weight,
                       Optional<AnyRankedTensor>:$out_bias,
                       Optional<AnyRankedTensor>:$mask,
                       AnyRankedTensor:$output,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$num_heads,
                       OptionalAttr<F32Attr>:$scale,
                       UnitAttr:$causal,
                       OptionalAttr<Attn_Alignment>:$alignment,
                       OptionalAttr<Attn_WindowAttr>:$window,
                       OptionalAttr<F32Attr>:$softcap);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `:` type($query) `,` type($key) `,` type($value) `)`
    `in_proj` `(` $in_weights `:` type($in_weights) `)`
    (`in_bias` `(` $in_bias^ `:` type($in_bias) `)`)?
    `out_proj` `(` $out_weight `:` type($out_weight) `)`
    (`out_bias` `(` $out_bias^ `:` type($out_bias) `)`)?
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    `outs` `(` $output `:` type($output) `)`
    `heads` `(` $num_heads `)`
    (`causal` $causal^)?
    (`align` `(` $alignment^ `)`)?
    (`window` $window^)?
    (`scale` `(` $scale^ `)`)?
    (`softcap` `(` $softcap^ `)`)?
    attr-dict `->` type($result)
  }];
  let hasVerifier = 1;

  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputMutable();
    }
    /// Whether the input projections are one packed [3E, E] weight.
    bool isPacked() { return getInWeights().size() == 1; }
    /// E, the embedding (and output) width.
    int64_t getEmbedDim() {
      return ::llvm::cast<::mlir::ShapedType>(getQuery().getType())
          .getDimSize(2);
    }
  }];
}

//===----------------------------------------------------------------------===//
// The modifiers' ops: attn.captured and attn.yield
//===----------------------------------------------------------------------===//

def Attn_CapturedOp : Attn_Op<"captured", [Pure]> {
  let summary = "reads an element of a tensor that a modifier captured";
  let description = [{
    In a `score_mod` or `mask_mod` region of an attention-like op, reads
    element `indices` of the op's captured operand number `capture`
    (`captures(...)`): a bias table, per-head slopes, document ids. The
    result type is the capture's element type (f32, i8 for bools, i32 or
    i64) and there is
    one index per dim. An index outside the capture reads the nearest
    element (it is clamped into [0, size − 1]), so that a modifier never
    reads out of bounds (docs/spec.md, "Score and mask modifiers").

    ```mlir
    %slope = attn.captured 0 [%h] : f32
    ```
  }];
  let arguments = (ins I64Attr:$capture, Variadic<Index>:$indices);
  let results = (outs AnyTypeOf<[F32, I8, I32, I64]>:$result);
  let assemblyFormat = [{
    $capture `[` $indices `]` attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Attn_YieldOp : Attn_Op<"yield", [Pure, Terminator,
    ParentOneOf<["AttentionOp", "OnlineAttentionOp", "AttentionBackwardOp",
                 "AttentionWeightsOp"]>]> {
  let summary = "ends a modifier region with its value";
  let description = [{
    The terminator of a `score_mod` region (one f32, the new score) or a
    `mask_mod` region (one i1, whether the position is kept).
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = [{ attr-dict ($values^ `:` type($values))? }];
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, {}); }]>];
}

#endif // ATTN_OPS_TD
