//===- LowerToVector.cpp - The online-softmax micro-kernel in vector ops --===//
//
// Lowers a bufferized attn.online_attention to loops and `vector` ops. For
// each (batch, query head) and each block of `key-block` keys:
//
//   1. pack K transposed (KT[d][j], f32) and V row-major (VP[j][e], f32,
//      rows padded to whole vectors) into stack buffers, so that the inner
//      loops stream contiguous vectors whatever the caller's strides and
//      element type;
//   2. for each query row: scores of the block as `key-block / vector-width`
//      vector accumulators, one FMA per (query element, key vector) with the
//      query element broadcast; then scale, soft-cap, bias or keep-mask,
//      causal/window bounds and the block's key count as lane selects;
//   3. the online update: m' = max(m, max_j s), p = exp(s - m'),
//      α = exp(m - m'), sum' = α·sum + Σp, acc' = α·acc + Σ_j p_j·VP[j].
//
// All in base 2: log2(e) joins the score scale (folded into Q where Q is
// scaled, a constant of the scores' multiply elsewhere), a soft cap takes
// c·log2(e) for c and a bias mask is added times log2(e), so that the
// scores are s·log2(e) and p = exp2(s - m') with m' in base-2 units: on
// AVX-512 exp2 is two instructions shorter than exp (attn-approximate-math;
// f32 prefill 1.01-1.05x, bf16 1.025-1.03x on Zen 4). The rows' maxima in
// the op's max operand are converted on entry (times log2 e) and exit
// (times ln 2), so that the op's other readers see natural units.
//
// With `bf16-dot`, bf16 operands take AVX-512 BF16's dot product for Q·Kᵀ
// (vdpbf16ps: two bf16 products per f32 lane): the block's K is packed as
// bf16 pairs KP[d/2][2j + d%2] without widening, and each step of the score
// loop consumes two query elements, broadcast as one 32-bit pair. In ops
// without masking (the interior of causal attention included) P·V takes it
// too: V packed as key pairs VP2[j/2][2e + j%2], the weights rounded to bf16
// two keys at a time (as FlashAttention rounds P), accumulation in f32.
//
// Tiles of at most `direct-rows` query rows (decoding: Sq = 1) whose K and V
// have unit-stride rows skip the packing, which would cost more than their
// few rows' arithmetic. The rows of all the tile's heads (a GQA group, as
// attn-tile makes for decoding kernels) are buffered, 16 at a time, so that
// each K row is loaded once per key and scored against all of them (a dot
// product, one horizontal sum each; vdpbf16ps on bf16 rows as stored;
// 16-bit K takes register tiles of 4 rows x 4 keys instead, whose 16 sums
// one transposing tree of shuffles makes one vector of scores). P·V
// takes two rows at a time (16-bit V: four), which share each V vector
// they load: f32 and f16 V rows are read in place (f16 widened as loaded),
// bf16 V rows become key pairs for the dot product as they are loaded (two
// rows unpacked within 128-bit lanes; the accumulators keep the columns in
// that order for the block), or, where Dv is not a multiple of 2 x lanes,
// once per block by interleaving two rows. With
// `prefetch-bytes`, scoring a key prefetches the K and V rows of a key
// that many bytes of K ahead into L2, so that the stream from memory keeps
// going while the block's softmax and P·V run.
//
// With `lane-rows`, ops without a mask operand or the bf16 dot product take
// a third path with query rows in vector lanes (see "the lane-rows path"
// below): scores, statistics and P·V all vertical, K and V read as
// broadcasts (f32 in place, 16-bit widened a block at a time), no
// horizontal reductions. Measured on AVX-512 (Zen 4): 10-20 % faster than
// the packed path for f32 prefill, 16-25 % for f16.
//
// A row that has seen no allowed key has m' = -inf; the exponents then use 0
// in place of m' so that no -inf - -inf is ever formed, and exp is only ever
// taken of non-positive numbers. The maxima are x86's (x > y ? x : y, one
// vmaxps), which may pass a NaN score over; the NaN still reaches the rows
// that see it, as the spec requires, through exp(NaN - m') into their sums
// and outputs.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"
#include "lib/Transforms/Views.h"

#include "dialect/AttnOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/SaveAndRestore.h"

#include <limits>
#include <numeric>

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNLOWERTOVECTORPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;
using namespace mlir::attn;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

/// Query rows that the direct path scores against each K row load.
constexpr int64_t kDirectRows = 16;
/// P·V accumulator vectors kept in registers at once (of AVX-512's 32; the
/// V vectors and the broadcast weights take most of the rest).
constexpr int64_t kMaxAccumulators = 16;
/// Keys per step in the packed blocks that a band cuts, unless the pass's
/// band-key-step says otherwise (the largest divisor of the key block up to
/// this): 64 halves the keys past a row's reach in 128-key blocks (bf16
/// causal D = 64 on Zen 4: 1.008-1.015x against whole blocks; 32 keys,
/// whose more frequent online updates cost what they save, 0.99-1.0x).
constexpr int64_t kBandKeyStep = 64;
/// The direct path's score tile: kScoreTile rows x kScoreTile keys, one
/// vector of scores (16 lanes).
constexpr int64_t kScoreTile = 4;
/// Chunks of a row that the direct path's score tiles unroll; longer rows
/// take a loop over their chunks.
constexpr int64_t kUnrolledChunks = 8;
/// Rows of one P·V pass of the direct path over f16 V.
constexpr int64_t kQuadRows = 4;

/// Zeroes the pad columns of a 2-D scratch buffer whose rows are whole
/// vectors (of `vectorWidth` 32-bit lanes' bytes), those from `live` on,
/// rounded down to a whole vector: a loop over its rows of vector stores.
/// Pad columns read by whole-vector loads then stay finite. The columns
/// before are written before they are read (the conformance suite passes
/// with them filled with NaN), so a buffer without pad columns is left
/// alone: zeroing them all took 15 % of a short decoding call.
void zeroPadColumns(ImplicitLocOpBuilder &b, Value buffer, int64_t vectorWidth,
                    int64_t live) {
  auto type = cast<MemRefType>(buffer.getType());
  Type elem = type.getElementType();
  int64_t width = vectorWidth * 32 / elem.getIntOrFloatBitWidth();
  int64_t first = live / width * width;
  if (first >= type.getDimSize(1))
    return;
  Value zero = vector::BroadcastOp::create(
      b, VectorType::get({width}, elem),
      arith::ConstantOp::create(b, b.getZeroAttr(elem)));
  auto rows =
      scf::ForOp::create(b, arith::ConstantIndexOp::create(b, 0),
                         arith::ConstantIndexOp::create(b, type.getDimSize(0)),
                         arith::ConstantIndexOp::create(b, 1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(rows.getBody()->getTerminator());
  for (int64_t col = first; col < type.getDimSize(1); col += width)
    vector::StoreOp::create(b, zero, buffer,
                            ValueRange{rows.getInductionVar(),
                                       arith::ConstantIndexOp::create(b, col)});
}

/// Scratch buffers of one function, shared by all its online ops (they run
/// one after another).
struct Scratch {
  Value keysT;      // [D][keyBlock]   K block transposed
  Value keyPairs;   // [D/2][2 keyBlock] bf16 K block as pairs (bf16-dot only)
  Value valuePairs; // [keyBlock/2][2 DvPad] bf16 V block as key pairs
  Value values;     // [keyBlock][DvPad] V block, pad columns zero
  Value rowBias;    // [keyBlock]      the mask row of the block, as f32 bias
  Value probs;      // [rowBlock][keyBlock] p of the current rows
  Value probPairs;  // [rowBlock][keyBlock] the same p in bf16 (with valuePairs)
  // Direct path: up to kDirectRows query rows of a GQA group at a time.
  Value queryRows;   // [kDirectRows][DPad] in f32, pad lanes zero
  Value groupScores; // [kDirectRows][keyBlock] their scores of a block
  Value queryPairs;  // [kDirectRows][DPad2] bf16 rows as stored (bf16-dot)
  // Lane-rows path: a tile of laneRows query rows in vector lanes.
  Value laneQuery;  // [D][laneRows]  scaled Q transposed
  Value laneAcc;    // [Dv][laneRows] the accumulator transposed
  Value laneScores; // [keyBlock][laneRows] scores, then weights, transposed
  Value laneStats;  // [2][laneRows]  running max and sum
  Value laneKeys;   // [keyBlock][D]  16-bit K block widened (else unused)
  Value laneValues; // [keyBlock][Dv] 16-bit V block widened
  // Packed path: each row's running sum as a vector of per-lane partial
  // sums, reduced once per op rather than once per key block.
  Value rowSums; // [rowSumRows][lanes]
  int64_t rowSumRows = 0;
};

/// The static bound on the query rows of `op`'s state (its sum is a slice
/// of a statically sized buffer, as attn-bufferize makes it), if any.
std::optional<int64_t> stateRowBound(OnlineAttentionOp op) {
  Value sum = op.getSum();
  while (true) {
    auto type = cast<MemRefType>(sum.getType());
    if (!type.isDynamicDim(2))
      return type.getDimSize(2);
    auto view = sum.getDefiningOp<memref::SubViewOp>();
    if (!view)
      return std::nullopt;
    sum = view.getSource();
  }
}

class MicroKernelEmitter {
public:
  MicroKernelEmitter(ImplicitLocOpBuilder &b, OnlineAttentionOp op,
                     const Scratch &scratch, int64_t lanes, int64_t keyBlock,
                     int64_t bandKeyStep, int64_t rowBlock, int64_t directRows,
                     int64_t prefetchDistance, int64_t laneRows)
      : b(b), op(op), scratch(scratch), lanes(lanes), keyBlock(keyBlock),
        bandKeyStep(bandKeyStep), rowBlock(rowBlock), directRows(directRows),
        laneRows(laneRows) {
    auto q = cast<MemRefType>(op.getQuery().getType());
    headDim = q.getDimSize(3);
    auto keyType = cast<MemRefType>(op.getKey().getType());
    int64_t keyRowBytes =
        headDim * llvm::divideCeil(keyType.getElementTypeBitWidth(), 8);
    prefetchKeys = prefetchDistance > 0
                       ? std::max<int64_t>(1, prefetchDistance / keyRowBytes)
                       : 0;
    bf16Dot = scratch.keyPairs && usesBf16Dot(op);
    bf16Values = bf16Dot && scratch.valuePairs && usesBf16Values(op);
    valueDim = cast<MemRefType>(op.getValue().getType()).getDimSize(3);
    valueChunks = llvm::divideCeil(valueDim, lanes);
    f32 = b.getF32Type();
    vecType = VectorType::get({lanes}, f32);
    maskVecType = VectorType::get({lanes}, b.getI1Type());
    idxVecType = VectorType::get({lanes}, b.getI32Type());
  }

  void emit() {
    // An op written with align(...) rather than a diagonal operand (one not
    // made by attn-tile) has its diagonal at 0, or at Sk - Sq of its own
    // operands, as the op defines.
    diagonal = op.getDiagonal();
    if (!diagonal && op.getAlignment())
      diagonal = *op.getAlignment() == DiagonalAlignment::top_left
                     ? cst(0)
                     : arith::SubIOp::create(b, dim(op.getKey(), 2),
                                             dim(op.getQuery(), 2));
    Value batches = dim(op.getQuery(), 0), heads = dim(op.getQuery(), 1);
    Value kvHeads = dim(op.getKey(), 1);
    Value group = arith::DivUIOp::create(b, heads, kvHeads);
    forLoop(cst(0), batches, cst(1), [&](Value batch) {
      forLoop(cst(0), kvHeads, cst(1), [&](Value kvHead) {
        Value firstHead = arith::MulIOp::create(b, kvHead, group);
        emitGroup(batch, kvHead, firstHead, group);
      });
    });
  }

  /// Whether the op's Q and K are bf16 (what the dot product takes).
  static bool usesBf16Dot(OnlineAttentionOp op) {
    auto elem = [](Value v) {
      return cast<MemRefType>(v.getType()).getElementType();
    };
    return elem(op.getQuery()).isBF16() && elem(op.getKey()).isBF16();
  }

  /// Whether K or V is 16-bit (the lane-rows path widens their blocks).
  static bool hasNarrowKeysOrValues(OnlineAttentionOp op) {
    return !cast<MemRefType>(op.getKey().getType()).getElementType().isF32() ||
           !cast<MemRefType>(op.getValue().getType()).getElementType().isF32();
  }
  /// Whether `op`, in a function whose scratch has the bf16 dot product's
  /// buffers when `bf16DotBuffers`, would take the lane-rows path with
  /// widened blocks: what the pass allocates laneKeys/laneValues for.
  static bool needsWidenedBlocks(OnlineAttentionOp op, bool bf16DotBuffers) {
    return laneRowsCandidate(op, bf16DotBuffers) && hasNarrowKeysOrValues(op);
  }

  /// Whether P·V can take the dot product too: bf16 V and no mask
  /// operand. Where a causal or window band cuts a block, it takes it only
  /// on the keys that every row it serves sees (the packed path's KeyRuns;
  /// the direct path's pairedValues): an excluded key's 0 weight must drop
  /// a NaN V, which the dot product would not.
  static bool usesBf16Values(OnlineAttentionOp op) {
    return cast<MemRefType>(op.getValue().getType())
               .getElementType()
               .isBF16() &&
           !op.getMask();
  }

private:
  ImplicitLocOpBuilder &b;
  OnlineAttentionOp op;
  const Scratch &scratch;
  int64_t lanes, keyBlock, bandKeyStep, rowBlock, directRows, laneRows,
      prefetchKeys;
  int64_t headDim, valueDim, valueChunks;
  bool bf16Dot, bf16Values;
  /// Set while the packed path emits a key block of a causal or windowed
  /// op that every row of the tile sees whole: no band compares there.
  bool blockInsideBand = false;
  /// Set while the packed path keeps the rows' sums in scratch.rowSums.
  bool vectorSums = false;
  Type f32;
  VectorType vecType, maskVecType, idxVecType;
  Value diagonal; // set when the op is causal or windowed

  /// Whether the block being emitted applies the causal/window band.
  bool bandApplies() {
    return (op.getCausal() || op.getWindow()) && !blockInsideBand;
  }
  /// Whether P·V of the direct path's block takes the bf16 dot product:
  /// bf16 V and no key of the block excluded for some rows only.
  bool pairedValues() { return bf16Values && !bandApplies(); }

  //===--- small builders ---------------------------------------------===//

  Value cst(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value f32Const(float v) {
    return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
  }
  Value splat(Value scalar) {
    return vector::BroadcastOp::create(
        b, VectorType::get({lanes}, scalar.getType()), scalar);
  }
  Value dim(Value memref, int64_t index) {
    return memref::DimOp::create(b, memref, index);
  }
  /// Loads one element and widens it to f32.
  Value loadF32(Value memref, ValueRange indices) {
    Value v = memref::LoadOp::create(b, memref, indices);
    if (v.getType() != f32)
      v = arith::ExtFOp::create(b, f32, v);
    return v;
  }
  void forLoop(Value lb, Value ub, Value step, function_ref<void(Value)> body) {
    auto loop = scf::ForOp::create(b, lb, ub, step);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    body(loop.getInductionVar());
  }
  /// An scf.for carrying vectors; `body` returns the next values.
  SmallVector<Value>
  forLoopWith(Value lb, Value ub, Value step, ValueRange inits,
              function_ref<SmallVector<Value>(Value, ValueRange)> body) {
    auto loop = scf::ForOp::create(b, lb, ub, step, inits);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      SmallVector<Value> next =
          body(loop.getInductionVar(), loop.getRegionIterArgs());
      scf::YieldOp::create(b, next);
    }
    // The builder's default terminator is replaced by ours.
    return SmallVector<Value>(loop.getResults());
  }
  /// The mask of the lanes of value chunk `c` that hold real columns.
  Value chunkMask(int64_t chunk) {
    int64_t live = std::min(lanes, valueDim - chunk * lanes);
    return vector::ConstantMaskOp::create(b, maskVecType,
                                          ArrayRef<int64_t>{live});
  }
  /// The sum of a vector's lanes in any order (reassoc: a log-depth tree,
  /// not the 16 dependent adds of an ordered reduction).
  Value horizontalSum(Value vec) {
    return vector::ReductionOp::create(b, vector::CombiningKind::ADD, vec,
                                       arith::FastMathFlags::reassoc);
  }
  /// max(x, y) as x86's vmaxps takes it, x > y ? x : y: one instruction,
  /// where arith.maximumf's NaN propagation costs a compare and a blend
  /// more (measured 6-7 % of a bf16 kernel's time in the rows' maxima).
  /// Equal to the max wherever neither is NaN; a NaN score still reaches
  /// its row, through p = exp(NaN - m') into the sum and the output.
  Value scoreMax(Value x, Value y) {
    Value greater = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, x, y);
    return arith::SelectOp::create(b, greater, x, y);
  }
  /// The largest lane of a vector by scoreMax: a tree of halves.
  Value horizontalMax(Value vec) {
    int64_t n = cast<VectorType>(vec.getType()).getNumElements();
    if (!llvm::isPowerOf2_64(n))
      return vector::ReductionOp::create(b, vector::CombiningKind::MAXIMUMF,
                                         vec);
    for (; n > 1; n /= 2) {
      Value low = vector::ExtractStridedSliceOp::create(
          b, vec, ArrayRef<int64_t>{0}, ArrayRef<int64_t>{n / 2},
          ArrayRef<int64_t>{1});
      Value high = vector::ExtractStridedSliceOp::create(
          b, vec, ArrayRef<int64_t>{n / 2}, ArrayRef<int64_t>{n / 2},
          ArrayRef<int64_t>{1});
      vec = scoreMax(low, high);
    }
    return vector::ExtractOp::create(b, vec, ArrayRef<int64_t>{0});
  }
  Value clampToI32(Value index, int64_t lo, int64_t hi) {
    Value clamped = arith::MaxSIOp::create(b, index, cst(lo));
    clamped = arith::MinSIOp::create(b, clamped, cst(hi));
    return arith::IndexCastOp::create(b, b.getI32Type(), clamped);
  }

  //===--- the kernel ------------------------------------------------===//

  /// The query heads [firstHead, firstHead + group) of key/value head
  /// `kvHead` (one head when the tile holds one).
  void emitGroup(Value batch, Value kvHead, Value firstHead, Value group) {
    Value rows = dim(op.getQuery(), 2);
    auto eachHead = [&](function_ref<void(Value)> body) {
      forLoop(cst(0), group, cst(1),
              [&](Value g) { body(arith::AddIOp::create(b, firstHead, g)); });
    };
    // The rows' running maxima in base-2 units while the paths run, in
    // natural units for the op's other readers (the LSE, the next op of a
    // causal pair, the key split's merge): one multiply per row each way.
    auto rescaleMaxima = [&](double factor) {
      eachHead([&](Value head) {
        forLoop(cst(0), rows, cst(1), [&](Value row) {
          SmallVector<Value, 3> at = {batch, head, row};
          memref::StoreOp::create(
              b,
              arith::MulFOp::create(b,
                                    memref::LoadOp::create(b, op.getMax(), at),
                                    f32Const(static_cast<float>(factor))),
              op.getMax(), at);
        });
      });
    };
    rescaleMaxima(llvm::numbers::log2e);
    emitGroupPaths(batch, kvHead, firstHead, group, eachHead);
    rescaleMaxima(llvm::numbers::ln2);
  }

  void emitGroupPaths(Value batch, Value kvHead, Value firstHead, Value group,
                      function_ref<void(function_ref<void(Value)>)> eachHead) {
    Value rows = dim(op.getQuery(), 2), keys = dim(op.getKey(), 2);
    auto packed = [&] {
      eachHead([&](Value head) {
        if (takesLaneRows())
          emitLaneRowsHead(batch, head, kvHead, rows, keys);
        else
          emitPackedHead(batch, head, kvHead, rows, keys);
      });
    };
    if (directRows <= 0)
      return packed();
    // Few rows and unit-stride K and V rows: the direct path. Its key
    // blocks are the outer loop, so that the group's heads (decoding with
    // GQA) read each block from memory once and from cache after.
    Value few = arith::CmpIOp::create(b, arith::CmpIPredicate::sle, rows,
                                      cst(directRows));
    Value keyRows = unitStrideRows(op.getKey());
    Value valueRows = unitStrideRows(op.getValue());
    Value contiguous = arith::AndIOp::create(
        b,
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                              innerStride(op.getKey()), cst(1)),
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                              innerStride(op.getValue()), cst(1)));
    auto choice =
        scf::IfOp::create(b, arith::AndIOp::create(b, few, contiguous),
                          /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(choice.thenBlock()->getTerminator());
    emitDirectGroup(batch, kvHead, firstHead, group, rows, keys, keyRows,
                    valueRows);
    b.setInsertionPoint(choice.elseBlock()->getTerminator());
    packed();
  }

  Value innerStride(Value memref) {
    return memref::ExtractStridedMetadataOp::create(b, memref).getStrides()[3];
  }
  /// `memref` seen with a unit innermost stride (valid where it has one).
  Value unitStrideRows(Value memref) {
    return unitInnerStrideView(b, b.getLoc(), memref);
  }
  /// `lanes` elements of a unit-stride row from column `col` (masked past
  /// `limit` columns), widened to f32.
  Value loadRowChunk(Value rowsMemref, ValueRange rowIndex, int64_t col,
                     int64_t limit) {
    return widenToF32(loadRawChunk(rowsMemref, rowIndex, col, limit, lanes));
  }
  /// A vector of `lanes` 16-bit or f32 elements as f32.
  Value widenToF32(Value v) {
    return isa<Float32Type>(getElementTypeOrSelf(v))
               ? v
               : Value(arith::ExtFOp::create(b, vecType, v));
  }
  /// `width` elements of a unit-stride row from column `col`, in the row's
  /// element type; columns past `limit` read as 0.
  Value loadRawChunk(Value rowsMemref, ValueRange rowIndex, int64_t col,
                     int64_t limit, int64_t width) {
    return loadRawChunkAt(rowsMemref, rowIndex, cst(col), limit - col, width);
  }
  /// `width` elements of a unit-stride row from column `col`, of which the
  /// first `live` are read (the others are 0).
  Value loadRawChunkAt(Value rowsMemref, ValueRange rowIndex, Value col,
                       int64_t live, int64_t width) {
    Type elem = cast<MemRefType>(rowsMemref.getType()).getElementType();
    auto type = VectorType::get({width}, elem);
    SmallVector<Value, 4> at(rowIndex.begin(), rowIndex.end());
    at.push_back(col);
    if (live >= width)
      return vector::LoadOp::create(b, type, rowsMemref, at);
    Value pass = vector::BroadcastOp::create(
        b, type, arith::ConstantOp::create(b, b.getZeroAttr(elem)));
    return vector::MaskedLoadOp::create(
        b, type, rowsMemref, at,
        vector::ConstantMaskOp::create(b,
                                       VectorType::get({width}, b.getI1Type()),
                                       ArrayRef<int64_t>{live}),
        pass);
  }

  /// The direct path for the `group` heads' rows of one key/value head:
  /// chunks of up to kDirectRows rows (head-major), each over all key
  /// blocks. A key's K row is loaded (and widened) once for the chunk's
  /// rows; P·V takes pairs of rows (pairRows), reading V in place or, bf16
  /// with more than one row, from key pairs made once per block.
  void emitDirectGroup(Value batch, Value kvHead, Value firstHead, Value group,
                       Value rows, Value keys, Value keyRows, Value valueRows) {
    Value total = arith::MulIOp::create(b, group, rows);
    // In a kernel for any number of query rows (a dynamic Sq: prefill, one
    // head per tile) the direct path is the fallback for calls of at most
    // direct-rows rows, and takes its plain form: rows scored one at a
    // time, one prefetch pattern. Score tiles and the prefetch split pay
    // for GQA groups, which only decoding kernels (a static Sq) tile by;
    // left out here they took half of the fallback's code.
    bool fallback = cast<MemRefType>(op.getQuery().getType()).isDynamicDim(2);
    // Only the keys the op's rows may see (a causal or windowed op that
    // attn-skip-masked-blocks left whole for the lane-rows path comes here
    // when few rows remain).
    Value firstKey, lastKey;
    std::tie(firstKey, lastKey) = bandKeyRange(cst(0), rows, keys);
    forLoop(cst(0), total, cst(kDirectRows), [&](Value chunkStart) {
      Value count = arith::MinSIOp::create(
          b, arith::SubIOp::create(b, total, chunkStart), cst(kDirectRows));
      auto position = [&](Value i) -> std::pair<Value, Value> {
        Value r = arith::AddIOp::create(b, chunkStart, i);
        return {arith::AddIOp::create(b, firstHead,
                                      arith::DivUIOp::create(b, r, rows)),
                arith::RemUIOp::create(b, r, rows)};
      };
      forLoop(cst(0), count, cst(1), [&](Value i) {
        Value head, row;
        std::tie(head, row) = position(i);
        forLoop(cst(0), cst(headDim), cst(1), [&](Value d) {
          if (bf16Dot)
            memref::StoreOp::create(
                b,
                memref::LoadOp::create(b, op.getQuery(),
                                       ValueRange{batch, head, row, d}),
                scratch.queryPairs, ValueRange{i, d});
          else
            memref::StoreOp::create(
                b, loadF32(op.getQuery(), {batch, head, row, d}),
                scratch.queryRows, ValueRange{i, d});
        });
      });
      forLoop(firstKey, lastKey, cst(keyBlock), [&](Value blockStart) {
        Value remaining = arith::SubIOp::create(b, lastKey, blockStart);
        Value blockKeys = arith::MinSIOp::create(b, remaining, cst(keyBlock));
        emitDirectScores(batch, kvHead, count, keys, blockStart, blockKeys,
                         keyRows, valueRows, /*tiles=*/!fallback);
        // A soft cap (and the scale before it) goes over the chunk's scores
        // in place, in one loop, rather than in each row's update below:
        // its tanh is then compiled once, not once per score vector and
        // row of every variant (24 times in a prefill kernel's direct path).
        bool capFirst = static_cast<bool>(op.getSoftcapAttr());
        if (capFirst)
          forLoop(cst(0), count, cst(1), [&](Value i) {
            forLoop(cst(0), cst(keyBlock), cst(lanes), [&](Value c) {
              Value s = vector::LoadOp::create(b, vecType, scratch.groupScores,
                                               ValueRange{i, c});
              vector::StoreOp::create(b, scaleAndCap(s), scratch.groupScores,
                                      ValueRange{i, c});
            });
          });
        // bf16 V takes the dot product in key pairs when more than one row
        // reads it: made as loaded where whole groups of 2 x lanes columns
        // allow (accumulateByBf16Dot), else once per block into valuePairs.
        // A single row reads V's rows in place, as f32 and f16 rows do (f16
        // widened as loaded: measured faster than widening the block once,
        // even for 16 rows).
        Value shared;
        if (pairedValues()) {
          shared = arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, count,
                                         cst(1));
          auto ifShared = scf::IfOp::create(b, shared);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(ifShared.thenBlock()->getTerminator());
          if (!pairsAsLoaded())
            pairValuesDirect(batch, kvHead, blockStart, blockKeys, valueRows);
        }
        // The online update of `n` rows from `first` (their weights in
        // probs' first n slots); then P·V for them, which share each V
        // vector they load.
        struct Rows {
          SmallVector<AccRow> at;
          SmallVector<Value> alphas;
        };
        auto updateStatistics = [&](Value first, int64_t n) {
          Rows rows;
          for (int64_t r = 0; r < n; ++r) {
            Value i = arith::AddIOp::create(b, first, cst(r));
            auto [head, row] = position(i);
            SmallVector<Value> scores;
            for (int64_t v = 0; v < keyBlock / lanes; ++v)
              scores.push_back(
                  vector::LoadOp::create(b, vecType, scratch.groupScores,
                                         ValueRange{i, cst(v * lanes)}));
            rows.at.push_back({head, row});
            rows.alphas.push_back(updateRowStatistics(
                batch, rows.at.back(), loadStatistics(batch, rows.at.back()),
                /*slot=*/r, scores, blockStart, blockKeys,
                /*storePairs=*/pairedValues(), /*scaledAndCapped=*/capFirst));
          }
          return rows;
        };
        bool valueIsF32 =
            cast<MemRefType>(op.getValue().getType()).getElementType().isF32();
        auto accumulateValues = [&](const Rows &rows, bool prefetchK,
                                    bool prefetchV) {
          auto accumulate = [&](bool byPairs) {
            std::function<Value(Value, int64_t)> rawValues;
            if (byPairs && pairsAsLoaded())
              rawValues = [&](Value j, int64_t group) -> Value {
                return vector::LoadOp::create(
                    b, VectorType::get({2 * lanes}, b.getBF16Type()), valueRows,
                    ValueRange{batch, kvHead,
                               arith::AddIOp::create(b, blockStart, j),
                               cst(group * 2 * lanes)});
              };
            accumulateRows(
                batch, rows.at, rows.alphas, blockKeys, byPairs,
                [&](Value j, int64_t c) -> Value {
                  Value key = arith::AddIOp::create(b, blockStart, j);
                  // The memory stream keeps going while P·V reads the
                  // block from cache: the next block's rows, one key per
                  // key of this one (f32 V: +5-8 % decoding; 16-bit rows
                  // measured no gain).
                  if (c == 0 && (prefetchK || prefetchV) && prefetchKeys > 0 &&
                      valueIsF32) {
                    Value next = arith::MinSIOp::create(
                        b, arith::AddIOp::create(b, key, cst(keyBlock)),
                        arith::SubIOp::create(b, keys, cst(1)));
                    if (prefetchK)
                      prefetchRow(keyRows, {batch, kvHead, next}, headDim);
                    if (prefetchV)
                      prefetchRow(valueRows, {batch, kvHead, next}, valueDim);
                  }
                  return loadRowChunk(valueRows, {batch, kvHead, key},
                                      c * lanes, valueDim);
                },
                rawValues);
          };
          if (!shared)
            return accumulate(false);
          // Two rows or more: the chunk has more than one, so V is shared
          // (the other branch would be dead code, a quarter of a bf16
          // D = 256 decoding kernel's compile time).
          if (rows.at.size() > 1)
            return accumulate(true);
          auto choice = scf::IfOp::create(b, shared, /*withElseRegion=*/true);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(choice.thenBlock()->getTerminator());
          accumulate(true);
          b.setInsertionPoint(choice.elseBlock()->getTerminator());
          accumulate(false);
        };
        if (!pairRows())
          return forLoop(cst(0), count, cst(1), [&](Value i) {
            accumulateValues(updateStatistics(i, 1), true, true);
          });
        Value even = arith::SubIOp::create(
            b, count, arith::RemUIOp::create(b, count, cst(2)));
        // f16 V, widened as loaded, and bf16 V, paired as loaded: 4 rows a
        // pass (over half of a 128-wide row's chunks at a time) widen or
        // pair each V element once, where two pairs of rows did it twice.
        // Decoding kernels only: in a prefill kernel's fallback it gained
        // 2-3 % (f16) for 0.1-0.2 s of compile time.
        Value pairsFrom = cst(0);
        if (quadRows() && !fallback) {
          pairsFrom = arith::SubIOp::create(
              b, count, arith::RemUIOp::create(b, count, cst(kQuadRows)));
          forLoop(cst(0), pairsFrom, cst(kQuadRows), [&](Value i) {
            accumulateValues(updateStatistics(i, kQuadRows), true, true);
          });
        }
        // Where P·V prefetches and several pairs of rows read the block, the
        // first pair asks for the next block's K rows and the others for
        // its V rows: each pass issues half the prefetches (decoding from
        // cache 1.08-1.13x, GQA groups of 8 1.07-1.11x; from memory within
        // the spread) and the memory stream keeps going during both. A
        // single pair, or a left-over odd row, asks for both. The choice is
        // made per pair around P·V alone, so that the softmax is compiled
        // once for the pairs (once in each of the 3 variants, it was a
        // third of an f32 D = 256 kernel's code and compile time).
        Value several;
        if (prefetchKeys > 0 && valueIsF32 && !fallback)
          several =
              arith::CmpIOp::create(b, arith::CmpIPredicate::sge, even, cst(4));
        forLoop(pairsFrom, even, cst(2), [&](Value i) {
          Rows rows = updateStatistics(i, 2);
          if (!several)
            return accumulateValues(rows, true, true);
          auto split = scf::IfOp::create(b, several, /*withElseRegion=*/true);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(split.thenBlock()->getTerminator());
          auto first = scf::IfOp::create(
              b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, i, cst(0)),
              /*withElseRegion=*/true);
          b.setInsertionPoint(first.thenBlock()->getTerminator());
          accumulateValues(rows, true, false);
          b.setInsertionPoint(first.elseBlock()->getTerminator());
          accumulateValues(rows, false, true);
          b.setInsertionPoint(split.elseBlock()->getTerminator());
          accumulateValues(rows, true, true);
        });
        ifOdd(count,
              [&] { accumulateValues(updateStatistics(even, 1), true, true); });
      });
    });
  }

  /// Whether the direct path's P·V takes two rows at a time (probs must
  /// hold two rows).
  bool pairRows() const { return rowBlock >= 2; }
  /// Whether the direct path's P·V takes kQuadRows rows at a time: f16 V,
  /// and bf16 V paired as loaded (probs and probPairs then hold kQuadRows
  /// rows). Each V row loaded is widened or unpacked for 4 rows, not 2.
  bool quadRows() {
    return pairRows() && (cast<MemRefType>(op.getValue().getType())
                              .getElementType()
                              .isF16() ||
                          pairsAsLoaded());
  }
  /// Whether the direct path's bf16 P·V makes its key pairs as it loads V
  /// (accumulateByBf16Dot): whole groups of 2 x lanes columns.
  bool pairsAsLoaded() { return pairedValues() && valueDim % (2 * lanes) == 0; }

  /// groupScores[i][j] = q_i · K[blockStart + j] for the chunk's `count`
  /// rows. With 16 lanes and `tiles`, whole groups of 4 rows take tiles of 4
  /// rows x 4 keys (emitScoreTiles); the other rows go one at a time: per
  /// key, K's row chunks stay in registers across the rows, each score two
  /// accumulator chains (their latency overlaps) and one tree sum. bf16 Q
  /// and K take vdpbf16ps on the rows as stored (consecutive head dims are
  /// the pairs it multiplies), 32 dims per step.
  void emitDirectScores(Value batch, Value kvHead, Value count, Value keys,
                        Value blockStart, Value blockKeys, Value keyRows,
                        Value valueRows, bool tiles) {
    int64_t width = bf16Dot ? 2 * lanes : lanes;
    int64_t chunks = llvm::divideCeil(headDim, width);
    Value queries = bf16Dot ? scratch.queryPairs : scratch.queryRows;
    auto queryType =
        VectorType::get({width}, bf16Dot ? b.getBF16Type() : Type(f32));
    // `width` columns of key `key`'s row from column `col`, of which the
    // first `live` are read (f32 widened; bf16 as stored).
    auto keyChunk = [&](Value key, Value col, int64_t live) -> Value {
      Value raw =
          loadRawChunkAt(keyRows, {batch, kvHead, key}, col, live, width);
      return bf16Dot ? raw : widenToF32(raw);
    };
    auto product = [&](Value acc, Value q, Value k) -> Value {
      return bf16Dot ? Value(x86vector::DotBF16Op::create(b, acc, q, k))
                     : Value(vector::FMAOp::create(b, q, k, acc));
    };
    // The K and V rows prefetchKeys ahead of `key`: by every loop over the
    // block's keys (again when several do: under an scf.if per key the
    // prefetches cost decoding 15 %).
    auto prefetchAhead = [&](Value key) {
      if (prefetchKeys <= 0)
        return;
      // (Sequenced: the IR's order must not depend on which argument a
      // compiler evaluates first.)
      Value wanted = arith::AddIOp::create(b, key, cst(prefetchKeys));
      Value lastKey = arith::SubIOp::create(b, keys, cst(1));
      Value ahead = arith::MinSIOp::create(b, wanted, lastKey);
      prefetchRow(keyRows, {batch, kvHead, ahead}, headDim);
      prefetchRow(valueRows, {batch, kvHead, ahead}, valueDim);
    };
    // Tiles for every K type: bf16/f16 decoding measured 4-8 % faster with
    // them; f32, once P·V prefetched the next block, 2-5 % faster from
    // memory and 7-15 % from cache (it had been 8-12 % slower before).
    bool useTiles = tiles && lanes == kScoreTile * kScoreTile;
    Value tiled = cst(0);
    if (useTiles) {
      tiled = arith::SubIOp::create(
          b, count, arith::RemUIOp::create(b, count, cst(kScoreTile)));
      forLoop(cst(0), tiled, cst(kScoreTile), [&](Value firstRow) {
        emitScoreTiles(firstRow, blockStart, blockKeys, chunks, width, queries,
                       queryType, keyChunk, product, prefetchAhead);
      });
    }
    // The rows left over, one at a time.
    auto leftOver = scf::IfOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::slt, tiled, count));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(leftOver.thenBlock()->getTerminator());
    forLoop(cst(0), blockKeys, cst(1), [&](Value j) {
      Value key = arith::AddIOp::create(b, blockStart, j);
      prefetchAhead(key);
      SmallVector<Value> k;
      for (int64_t c = 0; c < chunks; ++c)
        k.push_back(keyChunk(key, cst(c * width), headDim - c * width));
      forLoop(tiled, count, cst(1), [&](Value i) {
        Value acc[2] = {splat(f32Const(0)), splat(f32Const(0))};
        for (int64_t c = 0; c < chunks; ++c) {
          Value q = vector::LoadOp::create(b, queryType, queries,
                                           ValueRange{i, cst(c * width)});
          acc[c % 2] = product(acc[c % 2], q, k[c]);
        }
        Value sum = horizontalSum(arith::AddFOp::create(b, acc[0], acc[1]));
        memref::StoreOp::create(b, sum, scratch.groupScores, ValueRange{i, j});
      });
    });
  }

  /// Scores of rows [firstRow, firstRow + 4) against the block's keys, 4
  /// keys at a time: 16 accumulators (4 rows x 4 keys) take one FMA (or dot
  /// product) per pair of loaded Q and K chunks, and one transposing tree
  /// of shuffles and adds (15 adds for the 16 scores, instead of a
  /// horizontal sum each) leaves the 16 scores in one vector, row-major.
  /// The last group's keys past the block repeat its last key: their
  /// scores land in columns past blockKeys, which the online update
  /// excludes.
  void emitScoreTiles(Value firstRow, Value blockStart, Value blockKeys,
                      int64_t chunks, int64_t width, Value queries,
                      VectorType queryType,
                      function_ref<Value(Value, Value, int64_t)> keyChunk,
                      function_ref<Value(Value, Value, Value)> product,
                      function_ref<void(Value)> prefetchAhead) {
    Value lastKey = arith::SubIOp::create(
        b, arith::AddIOp::create(b, blockStart, blockKeys), cst(1));
    forLoop(cst(0), blockKeys, cst(kScoreTile), [&](Value j) {
      SmallVector<Value> keys, keyIndex;
      for (int64_t t = 0; t < kScoreTile; ++t) {
        keys.push_back(arith::AddIOp::create(
            b, arith::AddIOp::create(b, blockStart, j), cst(t)));
        keyIndex.push_back(arith::MinSIOp::create(b, keys.back(), lastKey));
      }
      // The keys' prefetches, by the first tile of rows only: the others
      // would ask for the same lines again (10 prefetches a key; bf16 MQA
      // decoding, two tiles, 1.01-1.035x on Zen 4).
      {
        auto ifFirst = scf::IfOp::create(
            b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, firstRow,
                                     cst(0)));
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(ifFirst.thenBlock()->getTerminator());
        for (Value key : keys)
          prefetchAhead(key);
      }
      // One chunk of `width` columns from `col` (`live` of them read).
      auto chunkStep = [&](Value col, int64_t live,
                           ValueRange in) -> SmallVector<Value> {
        SmallVector<Value> k, q, acc(in.begin(), in.end());
        for (int64_t t = 0; t < kScoreTile; ++t)
          k.push_back(keyChunk(keyIndex[t], col, live));
        for (int64_t r = 0; r < kScoreTile; ++r)
          q.push_back(vector::LoadOp::create(
              b, queryType, queries,
              ValueRange{arith::AddIOp::create(b, firstRow, cst(r)), col}));
        for (int64_t r = 0; r < kScoreTile; ++r)
          for (int64_t t = 0; t < kScoreTile; ++t)
            acc[r * kScoreTile + t] =
                product(acc[r * kScoreTile + t], q[r], k[t]);
        return acc;
      };
      SmallVector<Value> acc(kScoreTile * kScoreTile, splat(f32Const(0)));
      // Up to kUnrolledChunks chunks unrolled; a longer row (f32 D = 256)
      // in a loop over its whole chunks: 16 FMAs an iteration hide the
      // loop's cost, and the code is a sixteenth as long.
      int64_t whole = chunks > kUnrolledChunks ? headDim / width : 0;
      if (whole > 0)
        acc = forLoopWith(cst(0), cst(whole * width), cst(width), acc,
                          [&](Value col, ValueRange in) {
                            return chunkStep(col, width, in);
                          });
      for (int64_t c = whole; c < chunks; ++c)
        acc = chunkStep(cst(c * width), headDim - c * width, acc);
      Value sums = transposedSum(acc);
      for (int64_t r = 0; r < kScoreTile; ++r)
        vector::StoreOp::create(
            b,
            vector::ExtractStridedSliceOp::create(
                b, sums, ArrayRef<int64_t>{r * kScoreTile},
                ArrayRef<int64_t>{kScoreTile}, ArrayRef<int64_t>{1}),
            scratch.groupScores,
            ValueRange{arith::AddIOp::create(b, firstRow, cst(r)), j});
    });
  }

  /// Lane n of the result = the sum of vectors[n]'s lanes (as many vectors
  /// as lanes): each level adds the two halves of every segment of a pair
  /// of vectors, gathered by two shuffles, halving the segments' length and
  /// the number of vectors.
  Value transposedSum(ArrayRef<Value> vectors) {
    SmallVector<Value> level(vectors.begin(), vectors.end());
    for (int64_t length = lanes; length > 1; length /= 2) {
      int64_t half = length / 2;
      SmallVector<int64_t> firstHalves, secondHalves;
      for (int64_t source = 0; source < 2; ++source)
        for (int64_t segment = 0; segment < lanes / length; ++segment)
          for (int64_t l = 0; l < half; ++l) {
            int64_t lane = source * lanes + segment * length + l;
            firstHalves.push_back(lane);
            secondHalves.push_back(lane + half);
          }
      SmallVector<Value> next;
      for (size_t v = 0; v + 1 < level.size(); v += 2)
        next.push_back(arith::AddFOp::create(
            b,
            vector::ShuffleOp::create(b, level[v], level[v + 1], firstHalves),
            vector::ShuffleOp::create(b, level[v], level[v + 1],
                                      secondHalves)));
      level = next;
    }
    return level.front();
  }

  /// Prefetches the cache lines of a unit-stride row of `size` elements
  /// (one per 64 bytes, and its last element for a row not line-aligned).
  void prefetchRow(Value rowsMemref, ValueRange rowIndex, int64_t size) {
    int64_t bytes = llvm::divideCeil(
        cast<MemRefType>(rowsMemref.getType()).getElementTypeBitWidth(), 8);
    int64_t lineElems = std::max<int64_t>(1, 64 / bytes);
    SmallVector<Value, 4> at(rowIndex.begin(), rowIndex.end());
    at.push_back(Value());
    for (int64_t col = 0; col < size + lineElems - 1; col += lineElems) {
      at.back() = cst(std::min(col, size - 1));
      memref::PrefetchOp::create(b, rowsMemref, at, /*isWrite=*/false,
                                 /*localityHint=*/2, /*isDataCache=*/true);
    }
  }

  /// VP2[j/2][2e + j%2] = V[blockStart + j][e] for the block, by vector
  /// interleaves of two V rows (the layout accumulateByBf16Dot reads); an
  /// odd count's last pair ends in zeros.
  void pairValuesDirect(Value batch, Value kvHead, Value blockStart,
                        Value blockKeys, Value valueRows) {
    auto pairs = [&](Value jp, bool lastOdd) {
      Value j0 = arith::MulIOp::create(b, jp, cst(2));
      Value key0 = arith::AddIOp::create(b, blockStart, j0);
      Value key1 = arith::AddIOp::create(b, key0, cst(1));
      for (int64_t c = 0; c < valueChunks; ++c) {
        Value v0 = loadRawChunk(valueRows, {batch, kvHead, key0}, c * lanes,
                                valueDim, lanes);
        Value v1 = lastOdd ? Value(vector::BroadcastOp::create(
                                 b, v0.getType(),
                                 arith::ConstantOp::create(
                                     b, b.getZeroAttr(b.getBF16Type()))))
                           : loadRawChunk(valueRows, {batch, kvHead, key1},
                                          c * lanes, valueDim, lanes);
        vector::StoreOp::create(b, vector::InterleaveOp::create(b, v0, v1),
                                scratch.valuePairs,
                                ValueRange{jp, cst(2 * c * lanes)});
      }
    };
    Value fullPairs = arith::DivUIOp::create(b, blockKeys, cst(2));
    forLoop(cst(0), fullPairs, cst(1), [&](Value jp) { pairs(jp, false); });
    ifOdd(blockKeys, [&] { pairs(fullPairs, true); });
  }

  /// Runs `body` in an scf.if taken when `count` is odd.
  void ifOdd(Value count, function_ref<void()> body) {
    Value odd =
        arith::CmpIOp::create(b, arith::CmpIPredicate::ne,
                              arith::RemUIOp::create(b, count, cst(2)), cst(0));
    auto op = scf::IfOp::create(b, odd);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(op.thenBlock()->getTerminator());
    body();
  }

  /// A row of the accumulator: (head, row) of op.getAcc() at `batch`.
  struct AccRow {
    Value head, row;
  };
  /// A row's running max and sum (or, with vectorSums, the vector of its
  /// partial sums) as loaded before a block's update.
  struct RowStatistics {
    Value max, sum, partialSums;
  };
  RowStatistics loadStatistics(Value batch, const AccRow &at) {
    Value max = memref::LoadOp::create(b, op.getMax(),
                                       ValueRange{batch, at.head, at.row});
    if (vectorSums)
      return {max, Value(),
              vector::LoadOp::create(b, vecType, scratch.rowSums,
                                     ValueRange{at.row, cst(0)})};
    return {max,
            memref::LoadOp::create(b, op.getSum(),
                                   ValueRange{batch, at.head, at.row}),
            Value()};
  }

  /// Keys [from, to) of a block (block-local, as probs and probPairs
  /// index them) that one loop of P·V takes: by the bf16 dot product on
  /// the key pairs of valuePairs (`pairs`: `from` even, the pairs from row
  /// `pairRow` of valuePairs), or by f32 FMAs, `guarded` where a row may
  /// exclude some of the keys (an excluded key's V then stays out, even a
  /// NaN).
  struct KeyRun {
    Value from, to;
    bool pairs, guarded;
    Value pairRow;
    /// With `pairs`, where set: the pairs are made as V is loaded instead
    /// of read from valuePairs; rawValues(j, g) is columns [2g lanes,
    /// 2(g + 1) lanes) of block-local key j's V row as stored (see
    /// accumulateByBf16Dot).
    std::function<Value(Value, int64_t)> rawValues = nullptr;
  };

  /// acc[r] = alpha[r] * acc[r] + sum_j probs[r][j] * V[j] for the rows,
  /// which share each V vector they load, over the keys of `runs`; in the
  /// f32 runs `value(j, c)` gives chunk c of key j's V row. The
  /// accumulators stay in registers: wide rows (Dv = 256 in pairs of rows)
  /// go over the keys once per group of at most kMaxAccumulators / rows
  /// chunks.
  void accumulateRows(Value batch, ArrayRef<AccRow> rows,
                      ArrayRef<Value> alphas, ArrayRef<KeyRun> runs,
                      function_ref<Value(Value, int64_t)> value) {
    int64_t numRows = rows.size();
    int64_t groupChunks = std::max<int64_t>(1, kMaxAccumulators / numRows);
    for (int64_t first = 0; first < valueChunks; first += groupChunks)
      accumulateChunks(batch, rows, alphas, runs, value, first,
                       std::min(groupChunks, valueChunks - first));
  }
  /// One run over all `blockKeys` keys of the block.
  void accumulateRows(
      Value batch, ArrayRef<AccRow> rows, ArrayRef<Value> alphas,
      Value blockKeys, bool pairs, function_ref<Value(Value, int64_t)> value,
      const std::function<Value(Value, int64_t)> &rawValues = nullptr) {
    accumulateRows(batch, rows, alphas,
                   KeyRun{cst(0), blockKeys, pairs,
                          op.getMask() || bandApplies(), cst(0), rawValues},
                   value);
  }

  /// accumulateRows for chunks [first, first + chunks) of the rows.
  void accumulateChunks(Value batch, ArrayRef<AccRow> rows,
                        ArrayRef<Value> alphas, ArrayRef<KeyRun> runs,
                        function_ref<Value(Value, int64_t)> value,
                        int64_t first, int64_t chunks) {
    int64_t numRows = rows.size();
    Value zeroVec = splat(f32Const(0));
    auto at = [&](int64_t r, int64_t c) -> SmallVector<Value, 4> {
      return {batch, rows[r].head, rows[r].row, cst(c * lanes)};
    };
    SmallVector<Value> accs;
    for (int64_t r = 0; r < numRows; ++r) {
      Value alphaVec = splat(alphas[r]);
      for (int64_t c = first; c < first + chunks; ++c) {
        Value acc = (c + 1) * lanes <= valueDim
                        ? Value(vector::LoadOp::create(b, vecType, op.getAcc(),
                                                       at(r, c)))
                        : Value(vector::MaskedLoadOp::create(
                              b, vecType, op.getAcc(), at(r, c), chunkMask(c),
                              zeroVec));
        accs.push_back(arith::MulFOp::create(b, acc, alphaVec));
      }
    }
    // Pairs made as V is loaded keep the columns in their unpacked order.
    bool unpacked = llvm::any_of(
        runs, [](const KeyRun &run) { return run.rawValues != nullptr; });
    assert((!unpacked || (llvm::all_of(runs,
                                       [](const KeyRun &run) {
                                         return run.rawValues != nullptr;
                                       }) &&
                          first % 2 == 0 && chunks % 2 == 0)) &&
           "pairs made as loaded take whole groups of two chunks");
    auto reorder = [&](bool toUnpacked) {
      for (size_t c = 0; c + 1 < accs.size(); c += 2)
        std::tie(accs[c], accs[c + 1]) =
            toUnpacked ? toUnpackedOrder(accs[c], accs[c + 1])
                       : fromUnpackedOrder(accs[c], accs[c + 1]);
    };
    if (unpacked)
      reorder(true);
    for (const KeyRun &run : runs) {
      if (run.pairs) {
        accs = accumulateByBf16Dot(numRows, run, accs, first, chunks);
        continue;
      }
      accs = forLoopWith(
          run.from, run.to, cst(1), accs,
          [&](Value j, ValueRange acc) -> SmallVector<Value> {
            SmallVector<Value> values;
            for (int64_t c = first; c < first + chunks; ++c)
              values.push_back(value(j, c));
            SmallVector<Value> next;
            for (int64_t r = 0; r < numRows; ++r) {
              Value pScalar = memref::LoadOp::create(b, scratch.probs,
                                                     ValueRange{cst(r), j});
              Value p = splat(pScalar);
              // Where keys of the block may be excluded, an excluded key's
              // weight is exactly 0 and 0 * NaN would still leak a NaN value
              // into a row that does not attend to it: drop such values.
              Value excluded;
              if (run.guarded)
                excluded = splat(arith::CmpFOp::create(
                    b, arith::CmpFPredicate::OEQ, pScalar, f32Const(0)));
              for (int64_t c = 0; c < chunks; ++c) {
                Value v = values[c];
                if (excluded)
                  v = arith::SelectOp::create(b, excluded, zeroVec, v);
                next.push_back(
                    vector::FMAOp::create(b, p, v, acc[r * chunks + c]));
              }
            }
            return next;
          });
    }
    if (unpacked)
      reorder(false);
    for (int64_t r = 0; r < numRows; ++r)
      for (int64_t c = 0; c < chunks; ++c) {
        Value acc = accs[r * chunks + c];
        if ((first + c + 1) * lanes <= valueDim)
          vector::StoreOp::create(b, acc, op.getAcc(), at(r, first + c));
        else
          vector::MaskedStoreOp::create(b, op.getAcc(), at(r, first + c),
                                        chunkMask(first + c), acc);
      }
  }

  /// Chunk c of packed V row j (f32).
  Value packedValue(Value j, int64_t c) {
    return vector::LoadOp::create(b, vecType, scratch.values,
                                  ValueRange{j, cst(c * lanes)});
  }
  /// Chunk c of V row j in f32, from the key pairs of valuePairs: the
  /// 32-bit lanes of its pair row hold keys j & ~1 (low half) and j | 1.
  Value pairedValue(Value j, int64_t c) {
    auto wordsType = VectorType::get({lanes}, b.getI32Type());
    Value words = vector::BitCastOp::create(
        b, wordsType,
        vector::LoadOp::create(b, VectorType::get({2 * lanes}, b.getBF16Type()),
                               scratch.valuePairs,
                               ValueRange{arith::DivUIOp::create(b, j, cst(2)),
                                          cst(2 * c * lanes)}));
    // bf16 is f32's high half: shift an even key's half up, keep an odd's.
    Value even =
        arith::SubIOp::create(b, cst(1), arith::RemUIOp::create(b, j, cst(2)));
    Value shift = splat(arith::IndexCastOp::create(
        b, b.getI32Type(), arith::MulIOp::create(b, even, cst(16))));
    Value high = splat(arith::ConstantOp::create(
        b, b.getI32IntegerAttr(static_cast<int32_t>(0xFFFF0000u))));
    return vector::BitCastOp::create(
        b, vecType,
        arith::AndIOp::create(b, arith::ShLIOp::create(b, words, shift), high));
  }
  //===--- the lane-rows path -----------------------------------------===//
  //
  // Query rows in vector lanes: a tile of `laneRows` rows keeps Qᵀ (scaled),
  // the accumulator transposed (Oᵀ[e][row]) and its running max and sum in
  // stack buffers, and per block of keys makes the scores transposed,
  // Sᵀ[j][row]. Then every step is vertical: each score is an FMA of a
  // broadcast K element with a vector of Qᵀ, max and sum run down the
  // block's keys, the rescale multiplies Oᵀ's vectors, and P·V is an FMA of
  // a broadcast V element with a vector of weights. No horizontal
  // reduction, no K or V packing (K and V elements are read in place, as
  // broadcasts).

  /// Whether the op takes the lane-rows path: not the bf16 dot product
  /// and no mask operand (whose rows would be gathered). 16-bit K and V
  /// are widened a block at a time into f32 buffers first (widening each
  /// broadcast element on its own measured 15-20 % slower than packing).
  bool takesLaneRows() {
    return laneRows > 0 && laneRowsCandidate(op, bf16Dot) &&
           (!widensBlocks() || scratch.laneKeys);
  }
  /// Whether the lane-rows path widens K and V blocks into f32 buffers.
  bool widensBlocks() { return hasNarrowKeysOrValues(op); }
  void emitLaneRowsHead(Value batch, Value head, Value kvHead, Value rows,
                        Value keys) {
    Value lastRow = arith::SubIOp::create(b, rows, cst(1));
    forLoop(cst(0), rows, cst(laneRows), [&](Value tileStart) {
      Value count = arith::MinSIOp::create(
          b, arith::SubIOp::create(b, rows, tileStart), cst(laneRows));
      // Rows past the tile repeat its last row; they are never written back.
      auto rowAt = [&](Value i) -> Value {
        return arith::MinSIOp::create(b, arith::AddIOp::create(b, tileStart, i),
                                      lastRow);
      };
      Value scale = splat(scoreScale());
      // Qᵀ (scaled) and Oᵀ from the rows.
      rowsIntoLanes(op.getQuery(), batch, head, rowAt, headDim,
                    scratch.laneQuery, scale);
      rowsIntoLanes(op.getAcc(), batch, head, rowAt, valueDim, scratch.laneAcc,
                    Value());
      forLoop(cst(0), cst(laneRows), cst(1), [&](Value i) {
        Value row = rowAt(i);
        memref::StoreOp::create(
            b, memref::LoadOp::create(b, op.getMax(), {batch, head, row}),
            scratch.laneStats, ValueRange{cst(0), i});
        memref::StoreOp::create(
            b, memref::LoadOp::create(b, op.getSum(), {batch, head, row}),
            scratch.laneStats, ValueRange{cst(1), i});
      });
      // A causal or windowed tile walks only the keys its rows can see,
      // and masks only the blocks that some row sees in part.
      eachBandBlock(
          tileStart, count, keys,
          [&](Value blockStart, Value blockKeys) {
            widenBlock(batch, kvHead, keys, blockStart, blockKeys);
          },
          [&](Value blockStart, Value blockKeys) {
            emitLaneRowsBlock(batch, kvHead, tileStart, keys, blockStart,
                              blockKeys);
          });
      ifUnitStride(
          op.getAcc(),
          [&](Value rowsView) {
            transposeOutOfLanes(rowsView, batch, head, tileStart, count);
          },
          [&] {
            forLoop(cst(0), count, cst(1), [&](Value i) {
              Value row = arith::AddIOp::create(b, tileStart, i);
              forLoop(cst(0), cst(valueDim), cst(1), [&](Value e) {
                memref::StoreOp::create(
                    b,
                    memref::LoadOp::create(b, scratch.laneAcc,
                                           ValueRange{e, i}),
                    op.getAcc(), ValueRange{batch, head, row, e});
              });
            });
          });
      forLoop(cst(0), count, cst(1), [&](Value i) {
        Value row = arith::AddIOp::create(b, tileStart, i);
        memref::StoreOp::create(
            b,
            memref::LoadOp::create(b, scratch.laneStats, ValueRange{cst(0), i}),
            op.getMax(), ValueRange{batch, head, row});
        memref::StoreOp::create(
            b,
            memref::LoadOp::create(b, scratch.laneStats, ValueRange{cst(1), i}),
            op.getSum(), ValueRange{batch, head, row});
      });
    });
  }

  /// target[j][c] = rows[min(blockStart + j, lastKey)][c] in f32 for j <
  /// count and `width` columns: whole-vector loads widened where the rows
  /// have unit stride, element copies otherwise.
  void widenRows(Value rowsMemref, Value batch, Value kvHead, Value blockStart,
                 Value count, Value lastKey, int64_t width, Value target) {
    forLoop(cst(0), count, cst(1), [&](Value j) {
      Value key = arith::MinSIOp::create(
          b, arith::AddIOp::create(b, blockStart, j), lastKey);
      ifUnitStride(
          rowsMemref,
          [&](Value rowsView) {
            eachChunk(width, [&](Value c0, int64_t columns) {
              Value chunk =
                  loadChunkF32(rowsView, {batch, kvHead, key, c0}, columns);
              if (columns == lanes)
                vector::StoreOp::create(b, chunk, target, ValueRange{j, c0});
              else
                vector::MaskedStoreOp::create(b, target, ValueRange{j, c0},
                                              liveLanes(columns), chunk);
            });
          },
          [&] {
            forLoop(cst(0), cst(width), cst(1), [&](Value c) {
              memref::StoreOp::create(
                  b, loadF32(rowsMemref, {batch, kvHead, key, c}), target,
                  ValueRange{j, c});
            });
          });
    });
  }

  /// lanes[c][i] = source[batch, head, row(i), c] (times `scale` when
  /// given) for the tile's laneRows rows and `width` columns: by 16x16
  /// register transposes where the rows have unit stride, element copies
  /// otherwise.
  void rowsIntoLanes(Value source, Value batch, Value head,
                     function_ref<Value(Value)> row, int64_t width, Value lanes,
                     Value scale) {
    ifUnitStride(
        source,
        [&](Value rowsView) {
          transposeIntoLanes(rowsView, batch, head, row, width, lanes, scale);
        },
        [&] {
          forLoop(cst(0), cst(laneRows), cst(1), [&](Value i) {
            forLoop(cst(0), cst(width), cst(1), [&](Value c) {
              Value v = loadF32(source, {batch, head, row(i), c});
              if (scale)
                v = arith::MulFOp::create(
                    b, v,
                    vector::ExtractOp::create(b, scale, ArrayRef<int64_t>{0}));
              memref::StoreOp::create(b, v, lanes, ValueRange{c, i});
            });
          });
        });
  }

  /// target[c][i] = rows[row(i)][c] (times `scale` when given) for the
  /// tile's laneRows rows and `width` columns: per 16 rows and 16 columns,
  /// 16 row loads, one vector.transpose, 16 column stores.
  void transposeIntoLanes(Value rowsView, Value batch, Value head,
                          function_ref<Value(Value)> rowAt, int64_t width,
                          Value target, Value scale) {
    auto tileType = VectorType::get({lanes, lanes}, f32);
    forLoop(cst(0), cst(laneRows), cst(lanes), [&](Value first) {
      SmallVector<Value> rows;
      for (int64_t r = 0; r < lanes; ++r)
        rows.push_back(rowAt(arith::AddIOp::create(b, first, cst(r))));
      eachChunk(width, [&](Value c0, int64_t columns) {
        Value tile = arith::ConstantOp::create(
            b, DenseElementsAttr::get(tileType, b.getF32FloatAttr(0)));
        for (int64_t r = 0; r < lanes; ++r) {
          Value chunk =
              loadChunkF32(rowsView, {batch, head, rows[r], c0}, columns);
          if (scale)
            chunk = arith::MulFOp::create(b, chunk, scale);
          tile = vector::InsertOp::create(b, chunk, tile, ArrayRef<int64_t>{r});
        }
        Value transposed = vector::TransposeOp::create(b, tile, {1, 0});
        for (int64_t c = 0; c < columns; ++c)
          vector::StoreOp::create(
              b, vector::ExtractOp::create(b, transposed, ArrayRef<int64_t>{c}),
              target, ValueRange{arith::AddIOp::create(b, c0, cst(c)), first});
      });
    });
  }

  /// acc[tileStart + i][e] = Oᵀ[e][i] for the tile's first `count` rows:
  /// the inverse of transposeIntoLanes, rows past `count` not stored.
  void transposeOutOfLanes(Value rowsView, Value batch, Value head,
                           Value tileStart, Value count) {
    auto tileType = VectorType::get({lanes, lanes}, f32);
    forLoop(cst(0), count, cst(lanes), [&](Value first) {
      Value rowsHere = arith::SubIOp::create(b, count, first);
      eachChunk(valueDim, [&](Value c0, int64_t columns) {
        Value tile = arith::ConstantOp::create(
            b, DenseElementsAttr::get(tileType, b.getF32FloatAttr(0)));
        for (int64_t c = 0; c < columns; ++c)
          tile = vector::InsertOp::create(
              b,
              vector::LoadOp::create(
                  b, vecType, scratch.laneAcc,
                  ValueRange{arith::AddIOp::create(b, c0, cst(c)), first}),
              tile, ArrayRef<int64_t>{c});
        Value transposed = vector::TransposeOp::create(b, tile, {1, 0});
        for (int64_t r = 0; r < lanes; ++r) {
          Value here = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                             cst(r), rowsHere);
          auto ifRow = scf::IfOp::create(b, here);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(ifRow.thenBlock()->getTerminator());
          Value row = arith::AddIOp::create(
              b, tileStart, arith::AddIOp::create(b, first, cst(r)));
          Value chunk =
              vector::ExtractOp::create(b, transposed, ArrayRef<int64_t>{r});
          SmallVector<Value, 4> at = {batch, head, row, c0};
          if (columns == lanes)
            vector::StoreOp::create(b, chunk, rowsView, at);
          else
            vector::MaskedStoreOp::create(b, rowsView, at, liveLanes(columns),
                                          chunk);
        }
      });
    });
  }

  /// `body(c0, columns)` for the `chunk`-wide chunks of `width` columns
  /// (`lanes` by default): an scf.for over the whole chunks, then the
  /// partial one (columns < chunk).
  void eachChunk(int64_t width, function_ref<void(Value, int64_t)> body,
                 int64_t chunk = 0) {
    if (chunk == 0)
      chunk = lanes;
    int64_t whole = width / chunk * chunk;
    if (whole > 0)
      forLoop(cst(0), cst(whole), cst(chunk),
              [&](Value c0) { body(c0, chunk); });
    if (whole < width)
      body(cst(whole), width - whole);
  }

  /// `columns` (at most `lanes`) elements of a unit-stride row from `at`
  /// (the last index a column), widened to f32; lanes past them read 0.
  Value loadChunkF32(Value rowsView, ArrayRef<Value> at, int64_t columns) {
    return widenToF32(
        loadRawChunkAt(rowsView, at.drop_back(), at.back(), columns, lanes));
  }

  /// The mask of a vector's first `live` lanes.
  Value liveLanes(int64_t live) {
    return vector::ConstantMaskOp::create(b, maskVecType,
                                          ArrayRef<int64_t>{live});
  }

  /// `prologue(blockStart, blockKeys)`, then `body(blockStart,
  /// blockKeys)`, for each key block that rows [firstRow, firstRow + count)
  /// may see (bandKeyRange). For a causal or windowed op the body is
  /// emitted twice, under an scf.if on whether every row sees the block
  /// whole: with blockInsideBand set (then), so that bandApplies() is false
  /// there, and clear (else). The prologue (what does not depend on the
  /// band: packing or widening K) is emitted once, before the branch.
  void eachBandBlock(Value firstRow, Value count, Value keys,
                     function_ref<void(Value, Value)> prologue,
                     function_ref<void(Value, Value)> body) {
    Value first, last;
    std::tie(first, last) = bandKeyRange(firstRow, count, keys);
    forLoop(first, last, cst(keyBlock), [&](Value blockStart) {
      Value blockKeys = arith::MinSIOp::create(
          b, arith::SubIOp::create(b, last, blockStart), cst(keyBlock));
      prologue(blockStart, blockKeys);
      if (!op.getCausal() && !op.getWindow())
        return body(blockStart, blockKeys);
      auto inBand = scf::IfOp::create(
          b, blockInBand(firstRow, count, blockStart, blockKeys),
          /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(inBand.thenBlock()->getTerminator());
      blockInsideBand = true;
      body(blockStart, blockKeys);
      blockInsideBand = false;
      b.setInsertionPoint(inBand.elseBlock()->getTerminator());
      body(blockStart, blockKeys);
    });
  }

  /// [first, last): the keys that rows [firstRow, firstRow + count) of a
  /// causal or windowed op may see (all keys otherwise).
  std::pair<Value, Value> bandKeyRange(Value firstRow, Value count,
                                       Value keys) {
    Value first = cst(0), last = keys;
    if (!op.getCausal() && !op.getWindow())
      return {first, last};
    auto [left, right] = op.getBandOffsets();
    Value base = arith::AddIOp::create(b, firstRow, diagonal);
    auto clamp = [&](Value v, Value hi) {
      return arith::MinSIOp::create(b, arith::MaxSIOp::create(b, v, cst(0)),
                                    hi);
    };
    if (right)
      last = clamp(arith::AddIOp::create(
                       b, arith::AddIOp::create(b, base, count), cst(*right)),
                   keys);
    if (left)
      first = clamp(arith::SubIOp::create(b, base, cst(*left)), last);
    return {first, last};
  }

  /// Whether every row of [firstRow, firstRow + count) sees every key of
  /// [blockStart, blockStart + blockKeys): the block needs no band mask.
  Value blockInBand(Value firstRow, Value count, Value blockStart,
                    Value blockKeys) {
    auto [left, right] = op.getBandOffsets();
    Value base = arith::AddIOp::create(b, firstRow, diagonal);
    Value inside = arith::ConstantOp::create(b, b.getBoolAttr(true));
    if (right) {
      // The last key is within the first row's reach.
      Value lastKey = arith::SubIOp::create(
          b, arith::AddIOp::create(b, blockStart, blockKeys), cst(1));
      inside = arith::AndIOp::create(
          b, inside,
          arith::CmpIOp::create(b, arith::CmpIPredicate::sle, lastKey,
                                arith::AddIOp::create(b, base, cst(*right))));
    }
    if (left) {
      // The first key is within the last row's reach.
      Value lastRow = arith::SubIOp::create(
          b, arith::AddIOp::create(b, base, count), cst(1));
      inside = arith::AndIOp::create(
          b, inside,
          arith::CmpIOp::create(b, arith::CmpIPredicate::sge, blockStart,
                                arith::SubIOp::create(b, lastRow, cst(*left))));
    }
    return inside;
  }

  /// Which keys of [blockStart, blockStart + blockKeys) the rows from
  /// firstRow to lastRow see, block-local: some row sees only keys of
  /// [anyFrom, anyTo); every row sees [allFrom, allTo), both even (allFrom
  /// rounded up, allTo down) and anyFrom <= allFrom <= allTo.
  struct SeenKeys {
    Value anyFrom, allFrom, allTo, anyTo;
  };
  SeenKeys keysRowsSee(Value firstRow, Value lastRow, Value blockStart,
                       Value blockKeys) {
    auto [left, right] = op.getBandOffsets();
    auto local = [&](Value row, int64_t offset) {
      Value key = arith::AddIOp::create(
          b, arith::AddIOp::create(b, row, diagonal), cst(offset));
      return arith::MinSIOp::create(
          b,
          arith::MaxSIOp::create(b, arith::SubIOp::create(b, key, blockStart),
                                 cst(0)),
          blockKeys);
    };
    SeenKeys seen;
    seen.anyFrom = left ? local(firstRow, -*left) : cst(0);
    seen.anyTo = right ? local(lastRow, *right + 1) : blockKeys;
    Value allFrom = left ? local(lastRow, -*left) : cst(0);
    Value allTo = right ? local(firstRow, *right + 1) : blockKeys;
    Value even = cst(-2);
    seen.allFrom = arith::AndIOp::create(
        b, arith::AddIOp::create(b, allFrom, cst(1)), even);
    seen.allTo = arith::MaxSIOp::create(b, seen.allFrom,
                                        arith::AndIOp::create(b, allTo, even));
    return seen;
  }

  /// 16-bit K and V: the lane-rows block's rows widened once, before its
  /// band branch (K's keys past the block repeat the last key, so that Sᵀ's
  /// steps read whole vectors of real keys).
  void widenBlock(Value batch, Value kvHead, Value keys, Value blockStart,
                  Value blockKeys) {
    if (!widensBlocks())
      return;
    Value lastKey = arith::SubIOp::create(b, keys, cst(1));
    widenRows(op.getKey(), batch, kvHead, blockStart, cst(keyBlock), lastKey,
              headDim, scratch.laneKeys);
    widenRows(op.getValue(), batch, kvHead, blockStart, blockKeys, lastKey,
              valueDim, scratch.laneValues);
  }

  /// One key block of a lane-rows tile: Sᵀ, the statistics, P·V; the
  /// causal/window band where bandApplies() (a block that some row of the
  /// tile sees only in part).
  void emitLaneRowsBlock(Value batch, Value kvHead, Value tileStart, Value keys,
                         Value blockStart, Value blockKeys) {
    bool band = bandApplies();
    int64_t rowVectors = laneRows / lanes;
    // Register tiles of keys (or V columns) by the tile's row vectors, as
    // many accumulators as leave room for the row vectors and a broadcast:
    // 16 of AVX-512's 32 registers, 12 of AVX2's 16 (a tile of 3 row
    // vectors by 4 keys; 16 accumulators there spilled and ran at half
    // the speed).
    int64_t accumulators = lanes >= 16 ? kMaxAccumulators : 12;
    int64_t keyStep = laneKeyStep(accumulators, rowVectors);
    Value lastKey = arith::SubIOp::create(b, keys, cst(1));
    Value zeroVec = splat(f32Const(0)), negInfVec = splat(f32Const(-kInf));
    // 16-bit K and V were widened by widenBlock; f32 rows are read in place.
    bool widen = widensBlocks();
    auto keyAt = [&](Value j, Value key, Value d) -> Value {
      return widen ? Value(memref::LoadOp::create(b, scratch.laneKeys,
                                                  ValueRange{j, d}))
                   : loadF32(op.getKey(), {batch, kvHead, key, d});
    };
    auto valueAt = [&](Value j, Value key, Value e) -> Value {
      return widen ? Value(memref::LoadOp::create(b, scratch.laneValues,
                                                  ValueRange{j, e}))
                   : loadF32(op.getValue(), {batch, kvHead, key, e});
    };
    auto rowsAt = [&](Value buffer, Value index, int64_t v) -> Value {
      return vector::LoadOp::create(b, vecType, buffer,
                                    ValueRange{index, cst(v * lanes)});
    };
    auto storeRows = [&](Value vec, Value buffer, Value index, int64_t v) {
      vector::StoreOp::create(b, vec, buffer,
                              ValueRange{index, cst(v * lanes)});
    };

    // The causal/window band of each row vector, relative to the block:
    // key j is allowed iff lo <= j <= hi.
    SmallVector<Value> bandLo, bandHi;
    LaneSegments segments;
    if (band) {
      auto [left, right] = op.getBandOffsets();
      Value rel = arith::SubIOp::create(
          b, arith::AddIOp::create(b, tileStart, diagonal), blockStart);
      Value lane = arith::IndexCastOp::create(
          b, idxVecType,
          vector::StepOp::create(b,
                                 VectorType::get({lanes}, b.getIndexType())));
      // Clamped so that adding a lane offset keeps the answer: below
      // -laneRows no row reaches key 0, above keyBlock every row does.
      auto bound = [&](Value base, int64_t v) {
        Value start = splat(clampToI32(base, -laneRows - 1, keyBlock));
        return arith::AddIOp::create(
            b, start,
            arith::AddIOp::create(b, lane,
                                  splat(arith::ConstantOp::create(
                                      b, b.getI32IntegerAttr(v * lanes)))));
      };
      for (int64_t v = 0; v < rowVectors; ++v) {
        if (right)
          bandHi.push_back(
              bound(arith::AddIOp::create(b, rel, cst(*right)), v));
        if (left)
          bandLo.push_back(bound(arith::SubIOp::create(b, rel, cst(*left)), v));
      }
      if (right)
        segments = laneSegments(arith::AddIOp::create(b, rel, cst(*right)),
                                rowVectors, accumulators);
    }
    // Keys of segment v, which no row of the row vectors before v sees,
    // take only row vectors [v, rowVectors): the triangle of a diagonal
    // block costs 10/16 of the block with 4 row vectors, not all of it.
    // One segment (all row vectors) elsewhere.
    if (segments.start.empty())
      segments = {{cst(0), cst(keyBlock)}, {keyStep}};
    int64_t numSegments = segments.step.size();
    // The soft cap: on each score in the score loop's registers, or, where
    // there are several score loops, as the softmax reads the scores (once
    // in the code, not once per segment; the block max capped once, the
    // cap being increasing). The first measured 4 % faster where one loop
    // does (the blocks inside the band, full attention).
    bool capAsRead = numSegments > 1;

    // Sᵀ[j][rows] = Σ_d K[key j][d] · Qᵀ[d][rows] for keys [from, to) and
    // row vectors [vFirst, rowVectors), `step` keys at a time; keys past
    // the block repeat its last key and score -inf. The block's max of
    // each row vector is taken on the way, from the registers.
    auto scoreKeys = [&](Value from, Value to, int64_t vFirst, int64_t step,
                         ValueRange inits) -> SmallVector<Value> {
      int64_t vectors = rowVectors - vFirst;
      return forLoopWith(
          from, to, cst(step), inits,
          [&](Value first, ValueRange maxima) -> SmallVector<Value> {
            SmallVector<Value> keyIndex;
            SmallVector<Value> keyLocal;
            for (int64_t a = 0; a < step; ++a) {
              keyLocal.push_back(arith::AddIOp::create(b, first, cst(a)));
              keyIndex.push_back(arith::MinSIOp::create(
                  b, arith::AddIOp::create(b, blockStart, keyLocal.back()),
                  lastKey));
            }
            SmallVector<Value> scores =
                forLoopWith(cst(0), cst(headDim), cst(1),
                            SmallVector<Value>(step * vectors, zeroVec),
                            [&](Value d, ValueRange acc) -> SmallVector<Value> {
                              SmallVector<Value> q;
                              for (int64_t v = vFirst; v < rowVectors; ++v)
                                q.push_back(rowsAt(scratch.laneQuery, d, v));
                              SmallVector<Value> next;
                              for (int64_t a = 0; a < step; ++a) {
                                Value k =
                                    splat(keyAt(keyLocal[a], keyIndex[a], d));
                                for (int64_t v = 0; v < vectors; ++v)
                                  next.push_back(vector::FMAOp::create(
                                      b, k, q[v], acc[a * vectors + v]));
                              }
                              return next;
                            });
            SmallVector<Value> running(maxima.begin(), maxima.end());
            for (int64_t a = 0; a < step; ++a) {
              Value j = keyLocal[a];
              Value live = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                                 j, blockKeys);
              Value jVec;
              if (!bandLo.empty() || !bandHi.empty())
                jVec = splat(arith::IndexCastOp::create(b, b.getI32Type(), j));
              for (int64_t v = 0; v < vectors; ++v) {
                Value s = capAsRead ? scores[a * vectors + v]
                                    : softcap(scores[a * vectors + v]);
                if (jVec) {
                  Value allowed;
                  auto both = [&](Value c) {
                    allowed =
                        allowed ? arith::AndIOp::create(b, allowed, c) : c;
                  };
                  if (!bandHi.empty())
                    both(arith::CmpIOp::create(b, arith::CmpIPredicate::sle,
                                               jVec, bandHi[vFirst + v]));
                  if (!bandLo.empty())
                    both(arith::CmpIOp::create(b, arith::CmpIPredicate::sge,
                                               jVec, bandLo[vFirst + v]));
                  s = arith::SelectOp::create(b, allowed, s, negInfVec);
                }
                s = arith::SelectOp::create(b, live, s, negInfVec);
                storeRows(s, scratch.laneScores, j, vFirst + v);
                running[v] = scoreMax(s, running[v]);
              }
            }
            return running;
          });
    };
    SmallVector<Value> blockMaxima(rowVectors, negInfVec);
    for (int64_t v = 0; v < numSegments; ++v) {
      SmallVector<Value> seen = scoreKeys(
          segments.start[v], segments.start[v + 1], v, segments.step[v],
          ArrayRef<Value>(blockMaxima).drop_front(v));
      std::copy(seen.begin(), seen.end(), blockMaxima.begin() + v);
    }

    // Per row vector: m' = max(m, max_j s), p = exp(s - m') in place of s,
    // α = exp(m - m'), sum' = α·sum + Σ_j p. A row with no allowed key yet
    // takes 0 for m' in the exponents (no -inf - -inf).
    SmallVector<Value> alphas;
    for (int64_t v = 0; v < rowVectors; ++v) {
      Value blockMax =
          capAsRead ? softcapScore(blockMaxima[v]) : blockMaxima[v];
      Value oldMax = rowsAt(scratch.laneStats, cst(0), v);
      Value oldSum = rowsAt(scratch.laneStats, cst(1), v);
      Value newMax = scoreMax(blockMax, oldMax);
      Value noKeyYet = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ,
                                             newMax, negInfVec);
      Value safeMax = arith::SelectOp::create(b, noKeyYet, zeroVec, newMax);
      Value alpha = exp2(arith::SubFOp::create(b, oldMax, safeMax));
      SmallVector<Value> sums =
          forLoopWith(cst(0), segments.start[std::min(v + 1, numSegments)],
                      cst(2), SmallVector<Value>(2, zeroVec),
                      [&](Value j, ValueRange sum) -> SmallVector<Value> {
                        SmallVector<Value> next;
                        for (int64_t c = 0; c < 2; ++c) {
                          Value jc = arith::AddIOp::create(b, j, cst(c));
                          Value s = rowsAt(scratch.laneScores, jc, v);
                          Value p = exp2(arith::SubFOp::create(
                              b, capAsRead ? softcapScore(s) : s, safeMax));
                          storeRows(p, scratch.laneScores, jc, v);
                          next.push_back(arith::AddFOp::create(b, sum[c], p));
                        }
                        return next;
                      });
      Value newSum =
          arith::AddFOp::create(b, arith::MulFOp::create(b, oldSum, alpha),
                                arith::AddFOp::create(b, sums[0], sums[1]));
      storeRows(newMax, scratch.laneStats, cst(0), v);
      storeRows(newSum, scratch.laneStats, cst(1), v);
      alphas.push_back(alpha);
    }

    // Oᵀ[e][rows] = α·Oᵀ[e][rows] + Σ_j V[key j][e] · P[j][rows], keyStep
    // columns of V at a time. Where keys may be excluded for some rows, an
    // excluded key (p exactly 0) leaves the accumulator as it is, so that a
    // NaN in its V row stays out of the rows that do not attend to it.
    auto columns = [&](Value first, int64_t width) {
      SmallVector<Value> accs;
      for (int64_t a = 0; a < width; ++a) {
        Value e = arith::AddIOp::create(b, first, cst(a));
        for (int64_t v = 0; v < rowVectors; ++v)
          accs.push_back(arith::MulFOp::create(b, rowsAt(scratch.laneAcc, e, v),
                                               alphas[v]));
      }
      // Keys [from, to) into the accumulators of row vectors [vFirst,
      // rowVectors) (`inits`, column-major as accs).
      auto accumulate = [&](Value from, Value to, int64_t vFirst,
                            ValueRange inits) {
        int64_t vectors = rowVectors - vFirst;
        return forLoopWith(
            from, to, cst(1), inits,
            [&](Value j, ValueRange acc) -> SmallVector<Value> {
              Value key = arith::AddIOp::create(b, blockStart, j);
              // select(p != 0, fma, acc): one masked FMA on AVX-512.
              SmallVector<Value> p, included;
              for (int64_t v = vFirst; v < rowVectors; ++v) {
                p.push_back(rowsAt(scratch.laneScores, j, v));
                if (band)
                  included.push_back(arith::CmpFOp::create(
                      b, arith::CmpFPredicate::UNE, p.back(), zeroVec));
              }
              SmallVector<Value> next;
              for (int64_t a = 0; a < width; ++a) {
                Value e = arith::AddIOp::create(b, first, cst(a));
                Value value = splat(valueAt(j, key, e));
                for (int64_t v = 0; v < vectors; ++v) {
                  Value old = acc[a * vectors + v];
                  Value sum = vector::FMAOp::create(b, value, p[v], old);
                  if (band)
                    sum = arith::SelectOp::create(b, included[v], sum, old);
                  next.push_back(sum);
                }
              }
              return next;
            });
      };
      for (int64_t first = 0; first < numSegments; ++first) {
        SmallVector<Value> inits;
        for (int64_t a = 0; a < width; ++a)
          for (int64_t v = first; v < rowVectors; ++v)
            inits.push_back(accs[a * rowVectors + v]);
        SmallVector<Value> sums = accumulate(
            segments.start[first],
            arith::MinSIOp::create(b, segments.start[first + 1], blockKeys),
            first, inits);
        int64_t vectors = rowVectors - first;
        for (int64_t a = 0; a < width; ++a)
          for (int64_t v = first; v < rowVectors; ++v)
            accs[a * rowVectors + v] = sums[a * vectors + v - first];
      }
      for (int64_t a = 0; a < width; ++a)
        for (int64_t v = 0; v < rowVectors; ++v)
          storeRows(accs[a * rowVectors + v], scratch.laneAcc,
                    arith::AddIOp::create(b, first, cst(a)), v);
    };
    eachChunk(valueDim, columns, keyStep);
  }

  /// Keys per step of a lane-rows score loop over `rowVectors` row
  /// vectors: as many as keep `accumulators` accumulators, and a divisor of
  /// keyBlock, so that Sᵀ's steps stay in the block.
  int64_t laneKeyStep(int64_t accumulators, int64_t rowVectors) {
    int64_t step = std::max<int64_t>(1, accumulators / rowVectors);
    while (keyBlock % step != 0)
      --step;
    return step;
  }

  /// The key segments of a lane-rows block the band cuts: segment v,
  /// keys [start[v], start[v + 1]) (block-local), holds the keys that no
  /// row of the row vectors before v sees (`hi0` being row 0's last
  /// allowed key), scored `step[v]` keys at a time (as many as keep
  /// `accumulators` for its rowVectors - v row vectors). The starts are
  /// whole steps of every segment (and of the statistics' pairs of keys).
  /// Empty where the tile has one row vector or no such step divides the
  /// block.
  struct LaneSegments {
    SmallVector<Value> start;
    SmallVector<int64_t> step;
  };
  LaneSegments laneSegments(Value hi0, int64_t rowVectors,
                            int64_t accumulators) {
    LaneSegments segments;
    int64_t common = 2;
    for (int64_t v = 0; v < rowVectors; ++v) {
      int64_t step = laneKeyStep(accumulators, rowVectors - v);
      segments.step.push_back(step);
      common = std::lcm(common, step);
    }
    if (rowVectors < 2 || keyBlock % common != 0)
      return {};
    segments.start.push_back(cst(0));
    for (int64_t v = 1; v < rowVectors; ++v) {
      Value reach = arith::MaxSIOp::create(
          b, arith::AddIOp::create(b, hi0, cst(v * lanes)), cst(0));
      Value rounded = arith::MulIOp::create(
          b,
          arith::DivUIOp::create(
              b, arith::AddIOp::create(b, reach, cst(common - 1)), cst(common)),
          cst(common));
      segments.start.push_back(
          arith::MinSIOp::create(b, rounded, cst(keyBlock)));
    }
    segments.start.push_back(cst(keyBlock));
    return segments;
  }

  /// softcap(s) for a score, and -inf for an excluded one (-inf), for the
  /// lane-rows blocks that cap scores as the softmax reads them.
  Value softcapScore(Value s) {
    if (!op.getSoftcapAttr())
      return s;
    Value excluded = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, s,
                                           splat(f32Const(-kInf)));
    return arith::SelectOp::create(b, excluded, s, softcap(s));
  }

  /// The factor from raw scores q·k to the base-2 scores the softmax
  /// takes: the op's scale times log2(e), rounded once.
  Value scoreScale() {
    return f32Const(
        static_cast<float>(op.getEffectiveScale() * llvm::numbers::log2e));
  }

  /// A vector of raw scores scaled (to base 2), then soft-capped.
  Value scaleAndCap(Value s) {
    return softcap(arith::MulFOp::create(b, s, splat(scoreScale())));
  }

  /// The op's soft cap c · tanh(s / c) of a base-2 score s (c · log2(e)
  /// in place of c), else s.
  Value softcap(Value s) {
    auto cap = op.getSoftcapAttr();
    if (!cap)
      return s;
    double c = cap.getValueAsDouble() * llvm::numbers::log2e;
    Value t = math::TanhOp::create(
        b, arith::MulFOp::create(b, s, splat(f32Const(1.0 / c))));
    return arith::MulFOp::create(b, t, splat(f32Const(c)));
  }

  /// 2^x of the softmax's x = s - m' <= 0 (or NaN), which the approximation
  /// may rely on (attn-approximate-math reads kNonPositiveAttr).
  Value exp2(Value x) {
    auto op = math::Exp2Op::create(b, x);
    op->setAttr(kNonPositiveAttr, b.getUnitAttr());
    return op;
  }

  /// The packed path: per key block, pack K and V, then blocks of rows. A
  /// causal or windowed op walks only the keys its rows see and applies
  /// the band only in the blocks that some row sees in part (an op left
  /// whole by attn-skip-masked-blocks, as for the lane-rows path); the
  /// others run without its compares, and bf16 V takes the dot product
  /// there.
  void emitPackedHead(Value batch, Value head, Value kvHead, Value rows,
                      Value keys) {
    // The rows' sums as vectors of per-lane partial sums (scratch.rowSums)
    // for the whole key loop: a key block then adds its weights lane by
    // lane, and the horizontal sum runs once per row and op, not once per
    // block (bf16 D=64: 1.06x; the sums are rounded in another order).
    std::optional<int64_t> bound = stateRowBound(op);
    bool sums = scratch.rowSums && bound && *bound <= scratch.rowSumRows;
    if (sums)
      forLoop(cst(0), rows, cst(1), [&](Value row) {
        Value sum = memref::LoadOp::create(b, op.getSum(),
                                           ValueRange{batch, head, row});
        Value partial = vector::InsertOp::create(b, sum, splat(f32Const(0)),
                                                 ArrayRef<int64_t>{0});
        vector::StoreOp::create(b, partial, scratch.rowSums,
                                ValueRange{row, cst(0)});
      });
    llvm::SaveAndRestore keepSums(vectorSums, sums);
    eachBandBlock(
        cst(0), rows, keys,
        [&](Value blockStart, Value blockKeys) {
          packKeys(batch, kvHead, blockStart, blockKeys);
          packValues(batch, kvHead, blockStart, blockKeys);
        },
        [&](Value blockStart, Value blockKeys) {
          emitPackedBlock(batch, head, rows, blockStart, blockKeys);
        });
    if (sums)
      forLoop(cst(0), rows, cst(1), [&](Value row) {
        Value partial = vector::LoadOp::create(b, vecType, scratch.rowSums,
                                               ValueRange{row, cst(0)});
        memref::StoreOp::create(b, horizontalSum(partial), op.getSum(),
                                ValueRange{batch, head, row});
      });
  }

  /// One key block of the packed path, K and V packed: the rows' updates.
  void emitPackedBlock(Value batch, Value head, Value rows, Value blockStart,
                       Value blockKeys) {
    // Blocks of `rowBlock` rows share each K and V vector load. The last
    // block's slots past the rows repeat the last row (emitRows makes that
    // harmless): one copy of the micro-kernel, not a second one for the
    // rows left over (which doubled the code and the compile time).
    Value lastRow = arith::SubIOp::create(b, rows, cst(1));
    forLoop(cst(0), rows, cst(rowBlock), [&](Value first) {
      SmallVector<AccRow> block = {{head, first}};
      for (int64_t r = 1; r < rowBlock; ++r)
        block.push_back(
            {head, arith::MinSIOp::create(
                       b, arith::AddIOp::create(b, first, cst(r)), lastRow)});
      if (!bandApplies())
        return emitRows(batch, block, blockStart, blockKeys, cst(0),
                        keyBlock / lanes);
      // A block the band cuts. Rows that see all of it (in a tile larger
      // than the key block, those past the diagonal block's last row) take
      // the whole block, without the band's compares; the others only the
      // keys some row of the block sees, in steps of bandKeyStep keys, so
      // that rows near the diagonal skip most of what the band would drop.
      SeenKeys seen =
          keysRowsSee(first, block.back().row, blockStart, blockKeys);
      Value whole = arith::AndIOp::create(
          b,
          arith::CmpIOp::create(b, arith::CmpIPredicate::eq, seen.allFrom,
                                cst(0)),
          arith::CmpIOp::create(b, arith::CmpIPredicate::eq, seen.allTo,
                                blockKeys));
      auto split = scf::IfOp::create(b, whole, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(split.thenBlock()->getTerminator());
      {
        llvm::SaveAndRestore inside(blockInsideBand, true);
        emitRows(batch, block, blockStart, blockKeys, cst(0), keyBlock / lanes);
      }
      b.setInsertionPoint(split.elseBlock()->getTerminator());
      emitBandSteps(batch, block, blockStart, seen);
    });
  }

  /// The rows of `block` over the keys of the block from `blockStart` that
  /// some of them see (`seen`), in steps of bandKeyStep keys; a last step
  /// of at most half a step scores half the vectors.
  void emitBandSteps(Value batch, ArrayRef<AccRow> block, Value blockStart,
                     const SeenKeys &seen) {
    Value stepKeys = cst(bandKeyStep), to = seen.anyTo;
    Value from = arith::MulIOp::create(
        b, arith::DivUIOp::create(b, seen.anyFrom, stepKeys), stepKeys);
    int64_t halfStep = bandKeyStep / 2;
    forLoop(from, to, stepKeys, [&](Value step) {
      Value start = arith::AddIOp::create(b, blockStart, step);
      Value left = arith::SubIOp::create(b, to, step);
      auto wholeStep = [&] {
        emitRows(batch, block, start, arith::MinSIOp::create(b, left, stepKeys),
                 step, bandKeyStep / lanes);
      };
      if (halfStep % lanes != 0)
        return wholeStep();
      // A last step of at most half a step: half the score vectors.
      Value short_ = arith::CmpIOp::create(b, arith::CmpIPredicate::sle, left,
                                           cst(halfStep));
      auto choice = scf::IfOp::create(b, short_, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(choice.thenBlock()->getTerminator());
      emitRows(batch, block, start, left, step, halfStep / lanes);
      b.setInsertionPoint(choice.elseBlock()->getTerminator());
      wholeStep();
    });
  }

  /// KT[d][j] = K[j][d] (or the bf16 pairs KP) for the block's keys.
  /// 16-lane vectors take 16x16 register transposes where the rows have
  /// unit stride (LLVM otherwise makes scatters of the element loops).
  void packKeys(Value batch, Value kvHead, Value blockStart, Value blockKeys) {
    bool vectors = lanes == 16;
    // bf16-dot packs K as pairs of head dims; an odd D ends in a half pair.
    auto elementKeys = [&] {
      eachKey(blockStart, blockKeys, [&](Value key, Value j) {
        if (bf16Dot)
          packKeyPairs(batch, kvHead, key, j);
        else
          packKeyColumn(batch, kvHead, key, j);
      });
    };
    if (vectors && (!bf16Dot || headDim % 2 == 0))
      ifUnitStride(
          op.getKey(),
          [&](Value rows) {
            transposeKeyBlock(rows, batch, kvHead, blockStart, blockKeys,
                              /*pairs=*/bf16Dot);
          },
          elementKeys);
    else
      elementKeys();
  }

  /// VP[j][e] = V[j][e], or for bf16 V the key pairs VP2 that P·V's dot
  /// product reads, whole vectors where the rows have unit stride.
  void packValues(Value batch, Value kvHead, Value blockStart,
                  Value blockKeys) {
    if (!bf16Values) {
      Value lastKey = arith::SubIOp::create(
          b, arith::AddIOp::create(b, blockStart, blockKeys), cst(1));
      widenRows(op.getValue(), batch, kvHead, blockStart, blockKeys, lastKey,
                valueDim, scratch.values);
      return;
    }
    auto elementwise = [&] {
      eachKey(blockStart, blockKeys, [&](Value key, Value j) {
        packValuePairs(batch, kvHead, key, j);
      });
      // An odd count's last pair: its second key is 0, not a stale value.
      ifOdd(blockKeys, [&] {
        Value row = arith::DivUIOp::create(b, blockKeys, cst(2));
        Value zero =
            arith::ConstantOp::create(b, b.getZeroAttr(b.getBF16Type()));
        forLoop(cst(0), cst(valueDim), cst(1), [&](Value e) {
          Value column = arith::AddIOp::create(
              b, arith::MulIOp::create(b, e, cst(2)), cst(1));
          memref::StoreOp::create(b, zero, scratch.valuePairs,
                                  ValueRange{row, column});
        });
      });
    };
    if (lanes == 16)
      ifUnitStride(
          op.getValue(),
          [&](Value rows) {
            pairValuesDirect(batch, kvHead, blockStart, blockKeys, rows);
          },
          elementwise);
    else
      elementwise();
  }

  /// `body(key, j)` for the block's keys: key = blockStart + j.
  void eachKey(Value blockStart, Value blockKeys,
               function_ref<void(Value key, Value j)> body) {
    forLoop(cst(0), blockKeys, cst(1),
            [&](Value j) { body(arith::AddIOp::create(b, blockStart, j), j); });
  }

  /// `fast(rows)` with `memref` seen with a unit innermost stride where it
  /// has one, else `slow()`: an scf.if on the stride.
  void ifUnitStride(Value memref, function_ref<void(Value)> fast,
                    function_ref<void()> slow) {
    Value unit = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                       innerStride(memref), cst(1));
    auto choice = scf::IfOp::create(b, unit, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(choice.thenBlock()->getTerminator());
    fast(unitStrideRows(memref));
    b.setInsertionPoint(choice.elseBlock()->getTerminator());
    slow();
  }

  /// KT[d][j] = K[key][d] for one key, element by element.
  void packKeyColumn(Value batch, Value kvHead, Value key, Value j) {
    forLoop(cst(0), cst(headDim), cst(1), [&](Value d) {
      Value k = loadF32(op.getKey(), {batch, kvHead, key, d});
      memref::StoreOp::create(b, k, scratch.keysT, ValueRange{d, j});
    });
  }

  /// KT = the block's K transposed, 16 keys x 16 head dims at a time: 16
  /// row loads (`keyRows`: K with unit-stride rows), one vector.transpose,
  /// 16 column stores. With `pairs`, KP for the bf16 dot product instead:
  /// a pair (K[j][2p], K[j][2p+1]) is one 32-bit word, so KP is the
  /// transpose of the rows seen as words, 16 keys x 16 pairs at a time.
  /// Keys past the block repeat its last key (their score lanes are
  /// excluded later).
  void transposeKeyBlock(Value keyRows, Value batch, Value kvHead,
                         Value blockStart, Value blockKeys, bool pairs) {
    Value lastKey = arith::SubIOp::create(
        b, arith::AddIOp::create(b, blockStart, blockKeys), cst(1));
    auto tileType = VectorType::get({lanes, lanes}, f32);
    // Per key, `lanes` 32-bit words: head dims, or pairs of them.
    int64_t perWord = pairs ? 2 : 1;
    int64_t words = headDim / perWord;
    Value target = pairs ? scratch.keyPairs : scratch.keysT;
    forLoop(cst(0), blockKeys, cst(lanes), [&](Value first) {
      Value firstKey = arith::AddIOp::create(b, blockStart, first);
      Value column = pairs ? arith::MulIOp::create(b, first, cst(2)) : first;
      // The tile of words [w0, w0 + live): 16 row loads, a register
      // transpose, `live` column stores.
      auto transposeTile = [&](Value w0, int64_t live) {
        Value tile = arith::ConstantOp::create(
            b, DenseElementsAttr::get(tileType, b.getF32FloatAttr(0)));
        Value col = pairs ? arith::MulIOp::create(b, w0, cst(2)) : w0;
        for (int64_t r = 0; r < lanes; ++r) {
          Value key = arith::MinSIOp::create(
              b, arith::AddIOp::create(b, firstKey, cst(r)), lastKey);
          Value row = loadRawChunkAt(keyRows, {batch, kvHead, key}, col,
                                     live * perWord, lanes * perWord);
          row = pairs ? Value(vector::BitCastOp::create(b, vecType, row))
                      : widenToF32(row);
          tile = vector::InsertOp::create(b, row, tile, ArrayRef<int64_t>{r});
        }
        Value columns = vector::TransposeOp::create(b, tile, {1, 0});
        for (int64_t c = 0; c < live; ++c) {
          Value word =
              vector::ExtractOp::create(b, columns, ArrayRef<int64_t>{c});
          if (pairs)
            word = vector::BitCastOp::create(
                b, VectorType::get({2 * lanes}, b.getBF16Type()), word);
          vector::StoreOp::create(
              b, word, target,
              ValueRange{arith::AddIOp::create(b, w0, cst(c)), column});
        }
      };
      // Whole tiles in a loop (unrolled, D = 256 made one 5000-instruction
      // block that took LLVM's instruction selection a quarter second),
      // then the partial tile of a D that is not a multiple of 16.
      int64_t whole = words / lanes * lanes;
      if (whole > lanes)
        forLoop(cst(0), cst(whole), cst(lanes),
                [&](Value w0) { transposeTile(w0, lanes); });
      else if (whole == lanes)
        transposeTile(cst(0), lanes);
      if (words > whole)
        transposeTile(cst(whole), words - whole);
    });
  }

  /// VP2[j/2][2e + j%2] = V[key][e] (bf16, not widened).
  void packValuePairs(Value batch, Value kvHead, Value key, Value j) {
    Value row = arith::DivUIOp::create(b, j, cst(2));
    Value half = arith::RemUIOp::create(b, j, cst(2));
    forLoop(cst(0), cst(valueDim), cst(1), [&](Value e) {
      Value v = memref::LoadOp::create(b, op.getValue(),
                                       ValueRange{batch, kvHead, key, e});
      Value column =
          arith::AddIOp::create(b, arith::MulIOp::create(b, e, cst(2)), half);
      memref::StoreOp::create(b, v, scratch.valuePairs,
                              ValueRange{row, column});
    });
  }

  /// acc[r] += Σ_j p[r][j] V[j] two keys per step by vdpbf16ps over the
  /// keys of `run`, for V's chunks [first, first + chunks).
  ///
  /// With run.rawValues the pairs come from the two V rows as loaded: the
  /// unpacks of their low and high 16-bit halves within 128-bit lanes
  /// (vpunpcklwd/vpunpckhwd) pair 4-column blocks 0, 2, 4, 6 and 1, 3, 5,
  /// 7 of each 2 x lanes columns, and the accumulators hold the columns in
  /// that order (accumulateChunks puts them there and back). No pass over
  /// the block makes valuePairs first: bf16 MQA decoding, whose pairing
  /// pass streamed the block from L2 while no dot product ran, 1.16-1.18x
  /// on Zen 4 (with kQuadRows rows a pass).
  SmallVector<Value> accumulateByBf16Dot(int64_t numRows, const KeyRun &run,
                                         ArrayRef<Value> inits, int64_t first,
                                         int64_t chunks) {
    auto pairVec = VectorType::get({2 * lanes}, b.getBF16Type());
    auto half = [&](Value v) { return arith::DivUIOp::create(b, v, cst(2)); };
    auto step = [&](Value jp, ValueRange acc,
                    bool lastOdd) -> SmallVector<Value> {
      Value j0 = arith::MulIOp::create(b, jp, cst(2));
      SmallVector<Value> values;
      if (run.rawValues) {
        // Element i: key i % 2's column of the pair in 32-bit lane i / 2.
        SmallVector<int64_t> low, high;
        for (int64_t i = 0; i < 2 * lanes; ++i) {
          int64_t key = i % 2 ? 2 * lanes : 0;
          low.push_back(key + unpackedColumn(i / 2, false));
          high.push_back(key + unpackedColumn(i / 2, true));
        }
        Value zero = vector::BroadcastOp::create(
            b, pairVec,
            arith::ConstantOp::create(b, b.getZeroAttr(b.getBF16Type())));
        for (int64_t c = first; c < first + chunks; c += 2) {
          Value even = run.rawValues(j0, c / 2);
          Value odd =
              lastOdd
                  ? zero
                  : run.rawValues(arith::AddIOp::create(b, j0, cst(1)), c / 2);
          values.push_back(vector::ShuffleOp::create(b, even, odd, low));
          values.push_back(vector::ShuffleOp::create(b, even, odd, high));
        }
      } else {
        Value row = arith::AddIOp::create(b, run.pairRow, jp);
        for (int64_t c = first; c < first + chunks; ++c)
          values.push_back(
              vector::LoadOp::create(b, pairVec, scratch.valuePairs,
                                     ValueRange{row, cst(2 * c * lanes)}));
      }
      SmallVector<Value> next;
      for (int64_t r = 0; r < numRows; ++r) {
        Value p = broadcastPair(
            vector::LoadOp::create(b, VectorType::get({2}, b.getBF16Type()),
                                   scratch.probPairs, ValueRange{cst(r), j0}));
        for (int64_t c = 0; c < chunks; ++c)
          next.push_back(x86vector::DotBF16Op::create(b, acc[r * chunks + c], p,
                                                      values[c]));
      }
      return next;
    };
    if (!run.rawValues)
      return forLoopWith(
          half(run.from), half(arith::AddIOp::create(b, run.to, cst(1))),
          cst(1), inits,
          [&](Value jp, ValueRange acc) { return step(jp, acc, false); });
    // V rows as loaded: the whole pairs, then an odd count's last key with
    // zeros (a loop of at most one step), reading no row past the run.
    SmallVector<Value> accs = forLoopWith(
        half(run.from), half(run.to), cst(1), inits,
        [&](Value jp, ValueRange acc) { return step(jp, acc, false); });
    return forLoopWith(
        half(run.to), half(arith::AddIOp::create(b, run.to, cst(1))), cst(1),
        accs, [&](Value jp, ValueRange acc) { return step(jp, acc, true); });
  }

  /// The column, of a group of 2 x lanes, that lane `lane` of the low
  /// (or high) unpack of two V rows pairs: the unpacks take 4 of each 8
  /// columns (one 128-bit lane of bf16), the low ones the first 4.
  static int64_t unpackedColumn(int64_t lane, bool high) {
    return lane / 4 * 8 + (high ? 4 : 0) + lane % 4;
  }
  /// Two chunks' accumulators (columns [0, lanes) and [lanes, 2 lanes) of
  /// a group) in the column order of pairs unpacked as loaded (see
  /// accumulateByBf16Dot), and back.
  std::pair<Value, Value> toUnpackedOrder(Value first, Value second) {
    SmallVector<int64_t> low, high;
    for (int64_t lane = 0; lane < lanes; ++lane) {
      low.push_back(unpackedColumn(lane, false));
      high.push_back(unpackedColumn(lane, true));
    }
    return {vector::ShuffleOp::create(b, first, second, low),
            vector::ShuffleOp::create(b, first, second, high)};
  }
  std::pair<Value, Value> fromUnpackedOrder(Value low, Value high) {
    SmallVector<int64_t> columns(2 * lanes);
    for (int64_t lane = 0; lane < lanes; ++lane) {
      columns[unpackedColumn(lane, false)] = lane;
      columns[unpackedColumn(lane, true)] = lanes + lane;
    }
    ArrayRef<int64_t> all(columns);
    return {vector::ShuffleOp::create(b, low, high, all.take_front(lanes)),
            vector::ShuffleOp::create(b, low, high, all.drop_front(lanes))};
  }

  /// The bf16 pair (lo, hi) in every 32-bit lane of a dot product operand.
  Value broadcastPair(Value lo, Value hi) {
    return broadcastPair(vector::FromElementsOp::create(
        b, VectorType::get({2}, b.getBF16Type()), ValueRange{lo, hi}));
  }
  /// A vector<2xbf16> in every 32-bit lane of a dot product operand.
  Value broadcastPair(Value pair) {
    Value word = vector::ExtractOp::create(
        b,
        vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()),
                                  pair),
        ArrayRef<int64_t>{0});
    return vector::BitCastOp::create(
        b, VectorType::get({2 * lanes}, b.getBF16Type()), splat(word));
  }

  /// KP[p][2j + i] = K[key][2p + i]; an odd D's last pair ends in 0.
  void packKeyPairs(Value batch, Value kvHead, Value key, Value j) {
    Value column = arith::MulIOp::create(b, j, cst(2));
    Value next = arith::AddIOp::create(b, column, cst(1));
    forLoop(cst(0), cst(headDim / 2), cst(1), [&](Value p) {
      Value d = arith::MulIOp::create(b, p, cst(2));
      Value k0 = memref::LoadOp::create(b, op.getKey(),
                                        ValueRange{batch, kvHead, key, d});
      Value k1 = memref::LoadOp::create(
          b, op.getKey(),
          ValueRange{batch, kvHead, key, arith::AddIOp::create(b, d, cst(1))});
      memref::StoreOp::create(b, k0, scratch.keyPairs, ValueRange{p, column});
      memref::StoreOp::create(b, k1, scratch.keyPairs, ValueRange{p, next});
    });
    if (headDim % 2) {
      Value last = cst(headDim / 2);
      Value k0 = memref::LoadOp::create(
          b, op.getKey(), ValueRange{batch, kvHead, key, cst(headDim - 1)});
      Value zero = arith::ConstantOp::create(b, b.getZeroAttr(b.getBF16Type()));
      memref::StoreOp::create(b, k0, scratch.keyPairs,
                              ValueRange{last, column});
      memref::StoreOp::create(b, zero, scratch.keyPairs,
                              ValueRange{last, next});
    }
  }

  /// Scores of the rows by vdpbf16ps: per pair of head dims, the rows'
  /// query pairs broadcast against the block's packed key pairs.
  SmallVector<Value> scoresByBf16Dot(Value batch, Value head,
                                     ArrayRef<Value> rows, Value packed,
                                     ArrayRef<Value> inits) {
    int64_t scoreVectors = inits.size() / rows.size();
    Value packedPairs = arith::MulIOp::create(b, packed, cst(2));
    auto pairVec = VectorType::get({2 * lanes}, b.getBF16Type());
    return forLoopWith(
        cst(0), cst(llvm::divideCeil(headDim, 2)), cst(1), inits,
        [&](Value p, ValueRange acc) -> SmallVector<Value> {
          SmallVector<Value> keys;
          for (int64_t v = 0; v < scoreVectors; ++v)
            keys.push_back(vector::LoadOp::create(
                b, pairVec, scratch.keyPairs,
                ValueRange{p, arith::AddIOp::create(b, packedPairs,
                                                    cst(2 * v * lanes))}));
          Value d0 = arith::MulIOp::create(b, p, cst(2));
          // An odd D's last pair reads Q[D-1] twice; its key half is 0.
          Value d1 = arith::MinSIOp::create(
              b, arith::AddIOp::create(b, d0, cst(1)), cst(headDim - 1));
          SmallVector<Value> next;
          for (auto [r, row] : llvm::enumerate(rows)) {
            Value q = broadcastPair(
                memref::LoadOp::create(b, op.getQuery(),
                                       ValueRange{batch, head, row, d0}),
                memref::LoadOp::create(b, op.getQuery(),
                                       ValueRange{batch, head, row, d1}));
            for (int64_t v = 0; v < scoreVectors; ++v)
              next.push_back(x86vector::DotBF16Op::create(
                  b, acc[r * scoreVectors + v], q, keys[v]));
          }
          return next;
        });
  }

  /// The mask row of the block as an additive f32 bias in scratch.rowBias.
  void packMaskRow(Value batch, Value head, Value row, Value blockStart,
                   Value blockKeys) {
    Value mask = op.getMask();
    auto type = cast<MemRefType>(mask.getType());
    // A static 1 is a broadcast dimension: always read index 0.
    auto index = [&](int64_t d, Value full) {
      return type.getDimSize(d) == 1 ? cst(0) : full;
    };
    Value mb = index(0, batch), mh = index(1, head), mq = index(2, row);
    bool keepMask = type.getElementType().isInteger(1);
    forLoop(cst(0), blockKeys, cst(1), [&](Value j) {
      Value key = arith::AddIOp::create(b, blockStart, j);
      Value bias;
      if (keepMask) {
        Value keep =
            memref::LoadOp::create(b, mask, ValueRange{mb, mh, mq, key});
        bias = arith::SelectOp::create(b, keep, f32Const(0), f32Const(-kInf));
      } else {
        bias = loadF32(mask, {mb, mh, mq, key});
      }
      memref::StoreOp::create(b, bias, scratch.rowBias, ValueRange{j});
    });
  }

  /// Scores, online update and P·V for a block of query rows that share
  /// every packed K and V vector they load.
  ///
  /// The keys are [blockStart, blockStart + blockKeys), at column `packed`
  /// of the packed block, scored `scoreVectors` vectors at a time (a step
  /// of a block the band cuts may take fewer than the block's).
  void emitRows(Value batch, ArrayRef<AccRow> block, Value blockStart,
                Value blockKeys, Value packed, int64_t scoreVectors) {
    Value head = block.front().head;
    SmallVector<Value> rows;
    for (const AccRow &row : block)
      rows.push_back(row.row);
    int64_t numRows = rows.size();
    Value zeroVec = splat(f32Const(0));
    auto column = [&](int64_t v) {
      return arith::AddIOp::create(b, packed, cst(v * lanes));
    };

    // Scores: s[r][v] += Q[row r][d] * KT[d][packed + v*lanes ...].
    SmallVector<Value> inits(numRows * scoreVectors, zeroVec);
    SmallVector<Value> scores =
        bf16Dot
            ? scoresByBf16Dot(batch, head, rows, packed, inits)
            : forLoopWith(
                  cst(0), cst(headDim), cst(1), inits,
                  [&](Value d, ValueRange acc) -> SmallVector<Value> {
                    SmallVector<Value> keys;
                    for (int64_t v = 0; v < scoreVectors; ++v)
                      keys.push_back(vector::LoadOp::create(
                          b, vecType, scratch.keysT, ValueRange{d, column(v)}));
                    SmallVector<Value> next;
                    for (int64_t r = 0; r < numRows; ++r) {
                      Value q = splat(
                          loadF32(op.getQuery(), {batch, head, rows[r], d}));
                      for (int64_t v = 0; v < scoreVectors; ++v)
                        next.push_back(vector::FMAOp::create(
                            b, q, keys[v], acc[r * scoreVectors + v]));
                    }
                    return next;
                  });

    // Per row: the softmax statistics; p goes to probs[r]. Every slot
    // loads its row's max and sum before any slot stores, as P·V loads
    // every accumulator before it stores: a slot that repeats a row (the
    // last block's) then computes from the same old values as the row's
    // own slot, and the two store the same update.
    SmallVector<RowStatistics> old;
    for (const AccRow &row : block)
      old.push_back(loadStatistics(batch, row));
    SmallVector<Value> alphas;
    for (int64_t r = 0; r < numRows; ++r)
      alphas.push_back(updateRowStatistics(
          batch, block[r], old[r], r,
          MutableArrayRef<Value>(scores).slice(r * scoreVectors, scoreVectors),
          blockStart, blockKeys, /*storePairs=*/bf16Values));

    // acc[r] = alpha[r] * acc[r] + sum_j p[r][j] * VP[j]: bf16 V by the
    // dot product on the keys that every row of the block sees, which in a
    // block the band cuts leaves at most rowBlock keys at either end to
    // f32 FMAs that drop the keys a row does not see.
    auto value = [&](Value j, int64_t c) {
      Value key = arith::AddIOp::create(b, packed, j);
      return bf16Values ? pairedValue(key, c) : packedValue(key, c);
    };
    if (!bf16Values || !bandApplies())
      return accumulateRows(batch, block, alphas, blockKeys, bf16Values, value);
    SeenKeys seen =
        keysRowsSee(block.front().row, block.back().row, blockStart, blockKeys);
    Value pairRow = arith::DivUIOp::create(b, packed, cst(2));
    auto [left, right] = op.getBandOffsets();
    SmallVector<KeyRun, 3> runs;
    if (left)
      runs.push_back({seen.anyFrom,
                      arith::MinSIOp::create(b, seen.allFrom, seen.anyTo),
                      false, true, pairRow});
    runs.push_back({seen.allFrom, seen.allTo, true, false, pairRow});
    if (right)
      runs.push_back({arith::MaxSIOp::create(b, seen.allTo, seen.anyFrom),
                      seen.anyTo, false, true, pairRow});
    accumulateRows(batch, block, alphas, runs, value);
  }

  /// Scale, soft-cap, mask and band one row's scores of the block, update
  /// its running max and sum from `old`, store its weights p in
  /// probs[slot] (and as bf16 in probPairs[slot] when `storePairs`) and
  /// return the rescale factor alpha = exp(m_old - m_new).
  Value updateRowStatistics(Value batch, const AccRow &at, RowStatistics old,
                            int64_t slot, MutableArrayRef<Value> scores,
                            Value blockStart, Value blockKeys, bool storePairs,
                            bool scaledAndCapped = false) {
    Value head = at.head, row = at.row;
    int64_t scoreVectors = scores.size();
    Value zeroVec = splat(f32Const(0));
    if (!scaledAndCapped)
      for (Value &s : scores)
        s = scaleAndCap(s);
    if (op.getMask()) {
      // A -inf bias (a false keep bit) excludes the key by a select, not by
      // the addition alone: NaN + -inf is NaN, and a NaN in an excluded
      // key's K row must not reach the row. A keep mask's biases are 0 or
      // -inf, so it takes the select alone.
      packMaskRow(batch, head, row, blockStart, blockKeys);
      bool keepMask = cast<MemRefType>(op.getMask().getType())
                          .getElementType()
                          .isInteger(1);
      Value negInfVec = splat(f32Const(-kInf));
      for (int64_t v = 0; v < scoreVectors; ++v) {
        Value bias = vector::LoadOp::create(b, vecType, scratch.rowBias,
                                            ValueRange{cst(v * lanes)});
        if (!keepMask)
          scores[v] = vector::FMAOp::create(
              b, bias,
              splat(f32Const(static_cast<float>(llvm::numbers::log2e))),
              scores[v]);
        Value excluded = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ,
                                               bias, negInfVec);
        scores[v] = arith::SelectOp::create(b, excluded, negInfVec, scores[v]);
      }
    }

    // Lanes past the block's keys, and outside the causal/window band,
    // are excluded: -inf scores.
    Value lane = arith::IndexCastOp::create(
        b, idxVecType,
        vector::StepOp::create(b, VectorType::get({lanes}, b.getIndexType())));
    Value liveKeys =
        splat(arith::IndexCastOp::create(b, b.getI32Type(), blockKeys));
    Value bandLo, bandHi;
    if (bandApplies()) {
      // Key j (block-local) is allowed iff lo <= j <= hi with
      // hi = row + diag + right - blockStart, lo = row + diag - left -
      // blockStart.
      Value rel = arith::SubIOp::create(
          b, arith::AddIOp::create(b, row, diagonal), blockStart);
      auto [left, right] = op.getBandOffsets();
      if (right)
        bandHi = splat(clampToI32(arith::AddIOp::create(b, rel, cst(*right)),
                                  -1, keyBlock));
      if (left)
        bandLo = splat(clampToI32(arith::SubIOp::create(b, rel, cst(*left)), -1,
                                  keyBlock));
    }
    Value negInfVec = splat(f32Const(-kInf));
    for (int64_t v = 0; v < scoreVectors; ++v) {
      Value j = arith::AddIOp::create(
          b, lane,
          splat(arith::ConstantOp::create(b, b.getI32IntegerAttr(v * lanes))));
      Value allowed =
          arith::CmpIOp::create(b, arith::CmpIPredicate::slt, j, liveKeys);
      if (bandHi)
        allowed = arith::AndIOp::create(
            b, allowed,
            arith::CmpIOp::create(b, arith::CmpIPredicate::sle, j, bandHi));
      if (bandLo)
        allowed = arith::AndIOp::create(
            b, allowed,
            arith::CmpIOp::create(b, arith::CmpIPredicate::sge, j, bandLo));
      scores[v] = arith::SelectOp::create(b, allowed, scores[v], negInfVec);
    }

    // Online update of the row's max and sum.
    Value oldMax = old.max, oldSum = old.sum;
    Value blockMaxVec = scores[0];
    for (int64_t v = 1; v < scoreVectors; ++v)
      blockMaxVec = scoreMax(scores[v], blockMaxVec);
    Value blockMax = horizontalMax(blockMaxVec);
    Value newMax = scoreMax(blockMax, oldMax);
    Value noKeyYet = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, newMax,
                                           f32Const(-kInf));
    Value safeMax = arith::SelectOp::create(b, noKeyYet, f32Const(0), newMax);
    Value alpha = exp2(arith::SubFOp::create(b, oldMax, safeMax));
    Value safeMaxVec = splat(safeMax);
    Value sumVec = zeroVec;
    for (int64_t v = 0; v < scoreVectors; ++v) {
      Value p = exp2(arith::SubFOp::create(b, scores[v], safeMaxVec));
      sumVec = arith::AddFOp::create(b, sumVec, p);
      vector::StoreOp::create(b, p, scratch.probs,
                              ValueRange{cst(slot), cst(v * lanes)});
      if (storePairs)
        vector::StoreOp::create(
            b,
            arith::TruncFOp::create(
                b, VectorType::get({lanes}, b.getBF16Type()), p),
            scratch.probPairs, ValueRange{cst(slot), cst(v * lanes)});
    }
    if (old.partialSums) {
      memref::StoreOp::create(b, newMax, op.getMax(),
                              ValueRange{batch, head, row});
      vector::StoreOp::create(
          b, vector::FMAOp::create(b, splat(alpha), old.partialSums, sumVec),
          scratch.rowSums, ValueRange{row, cst(0)});
      return alpha;
    }
    Value blockSum = horizontalSum(sumVec);
    Value newSum = arith::AddFOp::create(
        b, arith::MulFOp::create(b, oldSum, alpha), blockSum);
    memref::StoreOp::create(b, newMax, op.getMax(),
                            ValueRange{batch, head, row});
    memref::StoreOp::create(b, newSum, op.getSum(),
                            ValueRange{batch, head, row});
    return alpha;
  }
};

struct AttnLowerToVectorPass
    : public mlir::attn::impl::AttnLowerToVectorPassBase<
          AttnLowerToVectorPass> {
  using AttnLowerToVectorPassBase::AttnLowerToVectorPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // A function may choose its own blocking (a compiler picking per
    // kernel); its key block is then also its key tile (attn-tile-keys).
    int64_t keyBlock =
        functionChoice(func, kKeyTileSizeAttrName, this->keyBlock);
    int64_t rowBlock = functionChoice(func, kRowBlockAttrName, this->rowBlock);
    if (laneRows < 0 || laneRows % vectorWidth != 0 ||
        laneRows > kMaxAccumulators * vectorWidth) {
      func.emitError() << "attn-lower-to-vector: lane-rows must be 0 or a "
                          "multiple of vector-width up to "
                       << kMaxAccumulators * vectorWidth << ", found "
                       << static_cast<int64_t>(laneRows);
      return signalPassFailure();
    }
    if (rowBlock < 1 || rowBlock > 8) {
      func.emitError() << "attn-lower-to-vector: row-block must be in [1, 8], "
                          "found "
                       << rowBlock;
      return signalPassFailure();
    }
    if (bf16Dot && vectorWidth != 4 && vectorWidth != 8 && vectorWidth != 16) {
      func.emitError() << "attn-lower-to-vector: bf16-dot needs a vector "
                          "width of 4, 8 or 16 f32 lanes, found "
                       << static_cast<int64_t>(vectorWidth);
      return signalPassFailure();
    }
    if (vectorWidth < 1 || keyBlock < vectorWidth ||
        keyBlock % vectorWidth != 0) {
      func.emitError() << "attn-lower-to-vector: key-block (" << keyBlock
                       << ") must be a positive multiple of vector-width ("
                       << static_cast<int64_t>(vectorWidth) << ")";
      return signalPassFailure();
    }
    int64_t bandKeyStep = this->bandKeyStep;
    if (bandKeyStep == 0) {
      // The largest multiple of the vector width up to kBandKeyStep that
      // divides the key block.
      bandKeyStep =
          std::min<int64_t>(keyBlock, kBandKeyStep) / vectorWidth * vectorWidth;
      while (keyBlock % bandKeyStep != 0)
        bandKeyStep -= vectorWidth;
    }
    if (bandKeyStep <= 0 || bandKeyStep % vectorWidth != 0 ||
        keyBlock % bandKeyStep != 0) {
      func.emitError() << "attn-lower-to-vector: band-key-step (" << bandKeyStep
                       << ") must be a multiple of vector-width ("
                       << static_cast<int64_t>(vectorWidth)
                       << ") that divides key-block (" << keyBlock << ")";
      return signalPassFailure();
    }
    SmallVector<OnlineAttentionOp> ops;
    bool tensorOps = false;
    func.walk([&](OnlineAttentionOp op) {
      if (op.hasPureTensorSemantics())
        tensorOps = true;
      else
        ops.push_back(op);
    });
    if (tensorOps) {
      func.emitError("attn-lower-to-vector: attn.online_attention must be "
                     "bufferized first (run one-shot-bufferize)");
      return signalPassFailure();
    }
    if (ops.empty())
      return;

    // One set of scratch buffers per function, sized for its largest op, at
    // the entry: each call (each thread) gets its own.
    int64_t maxHeadDim = 1, maxValuePad = vectorWidth;
    int64_t minHeadDim = std::numeric_limits<int64_t>::max();
    int64_t minValueDim = minHeadDim;
    for (OnlineAttentionOp op : ops) {
      int64_t d = cast<MemRefType>(op.getQuery().getType()).getDimSize(3);
      maxHeadDim = std::max(maxHeadDim, d);
      minHeadDim = std::min(minHeadDim, d);
      int64_t dv = cast<MemRefType>(op.getValue().getType()).getDimSize(3);
      minValueDim = std::min(minValueDim, dv);
      maxValuePad = std::max<int64_t>(
          maxValuePad, llvm::divideCeil(dv, vectorWidth) * vectorWidth);
    }
    ImplicitLocOpBuilder b(func.getLoc(), &getContext());
    b.setInsertionPointToStart(&func.getBody().front());
    Type f32 = b.getF32Type();
    auto stackBuffer = [&](ArrayRef<int64_t> shape) -> Value {
      return memref::AllocaOp::create(b, MemRefType::get(shape, f32),
                                      b.getI64IntegerAttr(64));
    };
    Scratch scratch;
    scratch.keysT = stackBuffer({maxHeadDim, keyBlock});
    if (bf16Dot && llvm::any_of(ops, MicroKernelEmitter::usesBf16Dot))
      scratch.keyPairs = memref::AllocaOp::create(
          b,
          MemRefType::get(
              {static_cast<int64_t>(llvm::divideCeil(maxHeadDim, 2)),
               2 * keyBlock},
              b.getBF16Type()),
          b.getI64IntegerAttr(64));
    if (scratch.keyPairs &&
        llvm::any_of(ops, MicroKernelEmitter::usesBf16Values)) {
      // Pad columns (Dv..DvPad) are read by whole-vector loads: zero once.
      auto type = MemRefType::get({(keyBlock + 1) / 2, 2 * maxValuePad},
                                  b.getBF16Type());
      scratch.valuePairs =
          memref::AllocaOp::create(b, type, b.getI64IntegerAttr(64));
      zeroPadColumns(b, scratch.valuePairs, vectorWidth, 2 * minValueDim);
    }
    scratch.values = stackBuffer({keyBlock, maxValuePad});
    scratch.rowBias = stackBuffer({keyBlock});
    scratch.probs = stackBuffer(
        {directRows > 0 ? std::max(rowBlock, kQuadRows) : rowBlock, keyBlock});
    // P·V by the dot product reads each row's weights as bf16 pairs, one
    // 32-bit broadcast a pair of keys.
    if (scratch.valuePairs)
      scratch.probPairs = memref::AllocaOp::create(
          b,
          MemRefType::get(
              {directRows > 0 ? std::max(rowBlock, kQuadRows) : rowBlock,
               keyBlock},
              b.getBF16Type()),
          b.getI64IntegerAttr(64));
    int64_t headPad = llvm::divideCeil(maxHeadDim, vectorWidth) * vectorWidth;
    if (directRows > 0) {
      scratch.queryRows = stackBuffer({kDirectRows, headPad});
      scratch.groupScores = stackBuffer({kDirectRows, keyBlock});
      if (scratch.keyPairs) {
        // Whole 32-element loads of bf16 query rows; pad columns zero.
        int64_t pairPad =
            llvm::divideCeil(maxHeadDim, 2 * vectorWidth) * 2 * vectorWidth;
        scratch.queryPairs = memref::AllocaOp::create(
            b, MemRefType::get({kDirectRows, pairPad}, b.getBF16Type()),
            b.getI64IntegerAttr(64));
        zeroPadColumns(b, scratch.queryPairs, vectorWidth, minHeadDim);
      }
    }
    if (laneRows > 0) {
      scratch.laneQuery = stackBuffer({maxHeadDim, laneRows});
      scratch.laneAcc = stackBuffer({maxValuePad, laneRows});
      scratch.laneScores = stackBuffer({keyBlock, laneRows});
      scratch.laneStats = stackBuffer({2, laneRows});
      if (llvm::any_of(ops, [&](OnlineAttentionOp op) {
            return MicroKernelEmitter::needsWidenedBlocks(
                op, static_cast<bool>(scratch.keyPairs));
          })) {
        scratch.laneKeys = stackBuffer({keyBlock, maxHeadDim});
        scratch.laneValues = stackBuffer({keyBlock, maxValuePad});
      }
    }
    // The packed path's vector sums, for ops whose state has a static row
    // bound (up to 1024 rows: 64 KiB); unused (and dropped) where every op
    // takes another path.
    constexpr int64_t kMaxRowSums = 1024;
    for (OnlineAttentionOp op : ops)
      if (std::optional<int64_t> bound = stateRowBound(op);
          bound && *bound <= kMaxRowSums)
        scratch.rowSumRows = std::max(scratch.rowSumRows, *bound);
    if (scratch.rowSumRows > 0)
      scratch.rowSums = stackBuffer({scratch.rowSumRows, vectorWidth});
    // Pad columns of the packed V and of the query rows are read by
    // whole-vector loads: zero them once and for all.
    zeroPadColumns(b, scratch.values, vectorWidth, minValueDim);
    if (scratch.queryRows)
      zeroPadColumns(b, scratch.queryRows, vectorWidth, minHeadDim);

    for (OnlineAttentionOp op : ops) {
      b.setLoc(op.getLoc());
      b.setInsertionPoint(op);
      MicroKernelEmitter(b, op, scratch, vectorWidth, keyBlock, bandKeyStep,
                         rowBlock, directRows, prefetchDistance, laneRows)
          .emit();
      op.erase();
    }
  }
};

} // namespace
