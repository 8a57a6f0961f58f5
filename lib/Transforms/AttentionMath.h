//===- AttentionMath.h - The attention maths every lowering builds -*- C++
//-*-===//
//
// The pieces of attention that the CPU lowering (attn-lower-to-vector's
// micro-kernels), the GPU lowering (attn-lower-to-gpu) and masked-block
// skipping all build, written once:
//
//  - the score function: the scale, the soft cap, an additive bias's factor
//    (the place where dropout and score/mask modifiers will join);
//  - the causal/window band: which keys a row, a tile of rows or a block
//    may see (BandArithmetic);
//  - the online update of a row's running max, the exponentials' reference
//    and rescale factor, and its running sum (AttentionMath).
//
// How a row is reduced (a vector tree, per-lane partial sums, warp
// shuffles) stays with each micro-kernel; what is reduced, and how the
// statistics combine, is here. The targets share one numerical contract
// (docs/spec.md); the two choices in which they differ, each for a
// measured reason, are the SoftmaxConvention.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORMS_ATTENTIONMATH_H
#define ATTN_TRANSFORMS_ATTENTIONMATH_H

#include "dialect/AttnOps.h"
#include "mlir/IR/Builders.h"

#include <optional>

namespace mlir {
namespace attn {

/// The numerical conventions of a lowering's softmax.
struct SoftmaxConvention {
  /// Scores in base 2: log2(e) joins the score scale, the soft cap and an
  /// additive bias, and p = exp2(s - m'). On AVX-512 exp2's polynomial is two
  /// instructions shorter than exp's (f32 prefill 1.01-1.05x, bf16
  /// 1.025-1.03x on Zen 4). Otherwise natural units and exp.
  bool base2 = false;
  /// max(x, y) as x > y ? x : y, x86's vmaxps (one instruction, where
  /// arith.maximumf's NaN propagation costs a compare and a blend more:
  /// 6-7 % of a bf16 kernel's time on Zen 4), rather than arith.maximumf.
  /// A NaN score may then pass over the max; it still reaches its row
  /// through p = exp(NaN - m') into the sum, and the normalization's empty
  /// row (max = -inf and sum = 0) tells such a row from a masked one.
  bool selectMax = false;

  /// attn-lower-to-vector's.
  static SoftmaxConvention cpu() {
    return {/*base2=*/true, /*selectMax=*/true};
  }
  /// attn-lower-to-gpu's: natural units, and the max that propagates NaN.
  static SoftmaxConvention gpu() {
    return {/*base2=*/false, /*selectMax=*/false};
  }
};

/// The score function and the online update of one op at a builder's
/// insertion point. Values are f32 scalars or vectors of f32; the
/// constants made match them.
class AttentionMath {
public:
  /// For an attention-like op (attn.online_attention or
  /// attn.attention_backward): its scale and soft cap.
  template <typename OpTy>
  AttentionMath(OpBuilder &b, Location loc, OpTy op,
                SoftmaxConvention convention)
      : b(b), loc(loc), scale(op.getEffectiveScale()),
        cap(op.getSoftcapAttr()), convention(convention) {}

  //===--- the score function -------------------------------------------===//

  /// The factor from q·k to the scores the softmax takes: the op's scale
  /// (times log2(e) in base 2, rounded once).
  double scoreScale();
  /// The factor of an additive bias in the scores' units: log2(e) in base
  /// 2, else 1.
  double biasScale();
  /// The op's soft cap c·tanh(s / c) of a scaled score s (c·log2(e) in
  /// place of c in base 2); s itself when the op has none.
  Value softcap(Value s);
  /// Whether the op has a soft cap, and its c (in natural units).
  bool hasSoftcap() const { return static_cast<bool>(cap); }
  double softcapValue() const { return cap.getValueAsDouble(); }

  //===--- the online update --------------------------------------------===//

  /// max(x, y) in the convention's flavour.
  Value max(Value x, Value y);
  /// The softmax's exponential of x = s - m' <= 0 (or NaN): exp2 in base 2
  /// (marked for attn-approximate-math, which may then leave out its upper
  /// clamp), else exp.
  Value exp(Value x);

  /// A row's maximum after a block, and what its exponentials take.
  struct MaxUpdate {
    Value max;       // m' = max(block max, m)
    Value reference; // m' where a key was allowed, else 0
    Value alpha;     // exp(m - reference): the rescale of sum and acc
  };
  /// The update of running max `oldMax` by `blockMax`. A row that has seen
  /// no allowed key keeps m' = -inf; its exponentials then take 0 for m',
  /// so that no -inf - -inf is ever formed.
  MaxUpdate updateMax(Value oldMax, Value blockMax);
  /// sum' = alpha·sum + the block's sum, which is the sum of `blockSums`
  /// (partial sums, added in order).
  Value updateSum(Value oldSum, Value alpha, ValueRange blockSums);

private:
  /// `v` as an f32 constant of `like`'s type (a scalar, or a broadcast).
  Value constantLike(Value like, double v);

  OpBuilder &b;
  Location loc;
  double scale;
  FloatAttr cap; // null without a soft cap
  SoftmaxConvention convention;
};

/// The causal/window band of an attention op in index arithmetic: row i may
/// see key j iff i + d - left <= j <= i + d + right, with d the op's
/// diagonal (the caller's, resolved by resolveDiagonal), right = 0 under
/// causal masking and either side possibly unbounded.
class BandArithmetic {
public:
  /// For an attention-like op (its getBandOffsets).
  template <typename OpTy>
  BandArithmetic(OpBuilder &b, Location loc, OpTy op, Value diagonal)
      : b(b), loc(loc), diagonal(diagonal) {
    std::tie(left, right) = op.getBandOffsets();
  }

  /// Whether the op has a band at all.
  bool banded() const { return left || right; }

  /// Row `row`'s diagonal key relative to key `origin` (null: key 0),
  /// row + d - origin: the row sees keys [lower(rel), upper(rel)] from
  /// `origin`.
  Value relative(Value row, Value origin);
  /// rel + right, the last key the row of `rel` sees (unclamped); null
  /// without a right bound.
  Value upper(Value rel);
  /// rel - left, the first key the row of `rel` sees (unclamped); null
  /// without a left bound.
  Value lower(Value rel);

  /// [first, last): the keys of [0, keys) that rows [firstRow, firstRow +
  /// count) may see (all of them without a band).
  std::pair<Value, Value> keysSomeRowSees(Value firstRow, Value count,
                                          Value keys);
  /// [from, to): of [first, last), the keys that every row of [firstRow,
  /// firstRow + count) sees, clamped so that first <= from <= to <= last.
  std::pair<Value, Value> keysEveryRowSees(Value firstRow, Value count,
                                           Value first, Value last);
  /// Whether every row of [firstRow, firstRow + count) sees every key of
  /// [blockStart, blockStart + blockKeys): the block needs no band mask.
  Value blockInBand(Value firstRow, Value count, Value blockStart,
                    Value blockKeys);

  /// Which keys of [blockStart, blockStart + blockKeys) the rows from
  /// firstRow to lastRow see, block-local: some row sees only keys of
  /// [anyFrom, anyTo); every row sees [allFrom, allTo), both even (allFrom
  /// rounded up, allTo down) and anyFrom <= allFrom <= allTo.
  struct SeenKeys {
    Value anyFrom, allFrom, allTo, anyTo;
  };
  SeenKeys keysRowsSee(Value firstRow, Value lastRow, Value blockStart,
                       Value blockKeys);

  std::optional<int64_t> left, right;

private:
  Value constant(int64_t v);
  Value clamp(Value v, Value lo, Value hi);

  OpBuilder &b;
  Location loc;
  Value diagonal;
};

/// Dropout's keep bits (docs/spec.md, "The gradient"): Philox 4x32-10
/// keyed by the 64-bit `seed` (i64) on the counter (⌊j/8⌋, i, h, b), 16
/// bits of output word ⌊(j mod 8)/2⌋ (the low half for even j), kept iff
/// they are >= ⌊p·2¹⁶⌋, which `threshold` (i32, dropoutThreshold) holds in
/// its high half. `b`, `h`, `i`, `j` are i32 global indices, scalars or
/// vectors of one shape (a scalar index is broadcast to the others' shape);
/// returns i1 of that shape.
Value dropoutKeep(OpBuilder &b, Location loc, Value seed, Value threshold,
                  Value batch, Value head, Value row, Value key);

/// The keep bits of `count` vectors of `lanes` keys from `firstKey` (i32
/// scalar, global) of each row (heads[r], rows[r]) (i32 scalars, global):
/// rows.size() · count i1 vectors, row by row. Where firstKey is a multiple
/// of 8 (always, in the CPU kernels' blocks), one Philox per counter (8x
/// less work than a Philox per lane), on whole vectors of counters where
/// two rows fill one, and a transpose of its words; else dropoutKeep per
/// lane (also where `lanes` is not a power of 2). `count` a multiple of 4.
SmallVector<Value> dropoutKeepVectors(OpBuilder &b, Location loc, Value seed,
                                      Value threshold, Value batch,
                                      ArrayRef<Value> heads,
                                      ArrayRef<Value> rows, Value firstKey,
                                      int64_t lanes, int64_t count);

/// The keep bits of keys firstKey .. firstKey + count - 1 (count 4 or 8,
/// firstKey an i32 scalar, global) for a vector of rows `rows` (i32,
/// global; `batch` and `head` scalars): `count` i1 vectors. Where firstKey
/// is a multiple of `count` the keys share each row's counter: one Philox
/// gives them all (its words in key order, two keys a word); else
/// dropoutKeep per key.
SmallVector<Value> dropoutKeepRows(OpBuilder &b, Location loc, Value seed,
                                   Value threshold, Value batch, Value head,
                                   Value rows, Value firstKey, int64_t count);

/// The keep bits of keys j and j + 1 of one row, j = 8·⌊key/8⌋ + 2·`pair`
/// (`groupKey` an i32 multiple of 8, `pair` i32 in 0..3, `batch`, `head`,
/// `row` i32; all scalars): one Philox for both, its word `pair`'s low and
/// high halves. The GPU's fragments hold such pairs.
std::pair<Value, Value> dropoutKeepPair(OpBuilder &b, Location loc, Value seed,
                                        Value threshold, Value batch,
                                        Value head, Value row, Value groupKey,
                                        Value pair);

/// The global index (i32) of an op's local index `local` along dim `dim`
/// of (b, h, i, j): plus the op's `origin` where it has one.
Value globalIndex(OpBuilder &b, Location loc, ValueRange origin, unsigned dim,
                  Value local);

/// The i32 threshold ⌊p·2¹⁶⌋·2¹⁶ of an f32 dropout probability p in
/// [0, 1) (the product taken in f64, exactly): 16 random bits at the top of
/// an i32 are kept iff they are at least this.
Value dropoutThreshold(OpBuilder &b, Location loc, Value probability);

/// The f32 factor 1/(1 − p) of a kept weight, p the f32 dropout
/// probability (docs/spec.md: rounded to f32).
Value dropoutKeptScale(OpBuilder &b, Location loc, Value probability);

/// The op's causal diagonal: its diagonal operand (`diagonal`, as the
/// caller sees it), or for an op written with align(...) 0 (top_left) or
/// Sk - Sq of its own operands (bottom_right), `size(operand, dim)` giving
/// their sizes; null for an op with neither.
Value resolveDiagonal(OpBuilder &b, Location loc,
                      std::optional<DiagonalAlignment> alignment, Value query,
                      Value key, Value diagonal,
                      function_ref<Value(Value, int64_t)> size);
template <typename OpTy>
Value resolveDiagonal(OpBuilder &b, Location loc, OpTy op, Value diagonal,
                      function_ref<Value(Value, int64_t)> size) {
  return resolveDiagonal(b, loc, op.getAlignment(), op.getQuery(), op.getKey(),
                         diagonal, size);
}

/// An scf.for from `lb` to `ub` by `step` whose body `body` builds.
void buildLoop(OpBuilder &b, Location loc, Value lb, Value ub, Value step,
               function_ref<void(Value)> body);
/// An scf.for carrying `inits`; `body(iv, iterArgs)` returns the values
/// it yields. Returns the loop's results.
SmallVector<Value>
buildLoopWith(OpBuilder &b, Location loc, Value lb, Value ub, Value step,
              ValueRange inits,
              function_ref<SmallVector<Value>(Value, ValueRange)> body);

} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_ATTENTIONMATH_H
