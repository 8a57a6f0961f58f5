//===- KeyBlockEmitter.h - Scores of a key block, recomputed -----*- C++
//-*-===//
//
// What the CPU kernels that recompute the softmax's weights block by block
// share (the backward kernel, the attention weights' kernel): blocks of 64
// keys packed as f32 Kᵀ (or, for bf16 rows with AVX-512 BF16's dot product,
// as bf16 key pairs), the rows of a block that see one of its keys, the
// scores of a block of rows against the block as register tiles of kRows
// rows, which lanes a
// row may see (the live keys, the causal/window band, the mask's keep
// bits) and dropout's factors. Unlike the forward's micro-kernels, these
// read every input through f32 copies padded to whole vectors, so that the
// inner loops run on unit-stride f32 whatever the caller's strides and
// element type.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORMS_CPU_KEYBLOCKEMITTER_H
#define ATTN_TRANSFORMS_CPU_KEYBLOCKEMITTER_H

#include "lib/Transforms/AttentionMath.h"
#include "lib/Transforms/Cpu/MicroKernels.h"
#include "lib/Transforms/Cpu/VectorEmitter.h"
#include "lib/Transforms/Modifiers.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlir {
namespace attn {
namespace cpu {

class KeyBlockEmitter : public VectorEmitter {
protected:
  /// Keys per block, and query rows per register tile of scores.
  static constexpr int64_t kBlockKeys = 64;
  static constexpr int64_t kRows = 4;
  /// The accumulators a register tile of scores may hold: half of AVX-512's
  /// 32 registers (a whole row tile, kRows x 4 vectors); 8 of AVX2's 16,
  /// whose whole row tile of kRows x 8 vectors spilled half its loads and
  /// stores (the f32 backward ran at a third of the FMA peak on Zen 3).
  /// 12 (kRows x 3) left one accumulator spilled in the loop: 1.04-1.08x
  /// slower than 8 there.
  static int64_t tileAccumulators(int64_t lanes) {
    return maxAccumulators(lanes);
  }

  /// One block of keys: [start, start + count).
  struct KeyBlock {
    Value start, count;
  };

  /// For a bufferized attention-like op: its mask, band and dropout; the
  /// diagonal is resolved at the builder's insertion point. Rows are taken
  /// `rowBlock` at a time (a multiple of kRows). With `keyPairs`, the key
  /// block is packed as bf16 pairs for the dot product (Q and K bf16).
  template <typename OpTy>
  KeyBlockEmitter(ImplicitLocOpBuilder &b, OpTy op, int64_t lanes,
                  int64_t rowBlock = kRows, bool keyPairs = false)
      : VectorEmitter(b, lanes), rowBlock(rowBlock), attention(op),
        captures(op.getCaptures()), query(op.getQuery()), key(op.getKey()),
        mask(op.getMask()), dropoutP(op.getDropoutP()),
        dropoutSeed(op.getDropoutSeed()), origin(op.getOrigin()),
        math(b, b.getLoc(), op, SoftmaxConvention{}),
        modifiers(b, b.getLoc(), op),
        headDim(cast<ShapedType>(op.getQuery().getType()).getDimSize(3)),
        headPad(llvm::alignTo(headDim, lanes)), keyVectors(kBlockKeys / lanes) {
    diagonal = resolveDiagonal(b, b.getLoc(), op, op.getDiagonal(),
                               [&](Value v, int64_t i) { return dim(v, i); });
    std::tie(left, right) = op.getBandOffsets();
    allocateBlockState(keyPairs);
  }

  /// Key block `block` of key/value head `kvHead` into `keysT` (keys past
  /// the block's count 0); with `keyRows`, also with non-finite elements 0
  /// (finiteOrZero) as f32 rows ([64][DPad]) or, for a bf16 `keyRows`, as
  /// bf16 pairs of keys ([32][2·DPad]: key k's column c at [k/2][2c +
  /// k%2], what vdpbf16ps takes against a row's broadcast pair of weights).
  void packKeys(Value batch, Value kvHead, const KeyBlock &block,
                Value keyRows = {});
  /// Block `block` of `source` ([B, Hkv, Sk, width] at (batch, kvHead))
  /// transposed into `blockT`: f32 [pad][64], or bf16 key pairs
  /// [pad/2][2·64] (lane j of pair p's vector v holds columns 2p and 2p + 1
  /// of key 16v + j, what vdpbf16ps takes against a row's broadcast pair);
  /// keys past the count and columns past `width` 0. `each(k, c, x)` sees
  /// every element x (as loaded: f32, or the bf16 of a pair) of block key k,
  /// column c.
  void packBlockT(Value source, Value batch, Value kvHead,
                  const KeyBlock &block, Value blockT, int64_t width,
                  function_ref<void(Value, Value, Value)> each = {});
  /// packBlockT element by element (any strides, any vector width).
  void packBlockTElementwise(Value source, Value batch, Value kvHead,
                             const KeyBlock &block, Value blockT, int64_t width,
                             function_ref<void(Value, Value, Value)> each);
  /// Whether packBlockT transposes rows with unit stride by registers
  /// (f32, or bf16 pairs, on AVX-512) rather than element by element.
  bool transposesInRegisters() const;
  /// packBlockT by register transposes, from `source` seen with unit-stride
  /// rows (`rows`): `blockT` zeroed, then the block's rows transposed.
  void transposeBlock(Value rows, Value batch, Value kvHead,
                      const KeyBlock &block, Value blockT, int64_t width);
  /// packKeys' bf16 pairs of keys from K with unit-stride rows (`rows`), a
  /// vector of 16 columns of two keys a step.
  void pairKeyRows(Value rows, Value batch, Value kvHead, const KeyBlock &block,
                   Value keyRows);
  /// Zeros a 2-D stack buffer.
  void zeroBuffer(Value buffer);
  /// A [pad / 2][2·64] bf16 buffer of key pairs on the stack.
  Value pairBuffer(int64_t pad);
  /// Row `row` of `source` ([B, H, S, width] at (batch, head)) into row `r`
  /// of `rows` ([R][pad], f32, or bf16 from a bf16 source as stored),
  /// columns past `width` 0.
  void packRow(Value source, Value batch, Value head, Value row, Value rows,
               Value r, int64_t width, int64_t pad);
  /// `lanes` elements of row `r` of `rows` (f32 or 16-bit) from column `c`,
  /// as f32.
  Value loadRowF32(Value rows, Value r, Value c);
  /// `body(firstRow, count)` over rows [lo, hi): whole blocks of rowBlock
  /// rows, then of kRows, then the rest one by one.
  void forRowBlocks(Value lo, Value hi,
                    function_ref<void(Value, int64_t)> body);
  /// The rows (of one head) that see a key of the block: [lo, hi).
  std::pair<Value, Value> rowsSeeing(const KeyBlock &block, Value rows);
  /// Lanes of key vector `v` that row `row` may see: the block's live keys,
  /// the band, the mask's keep bits (loaded by loadMask for row `r`).
  Value allowed(const KeyBlock &block, Value row, int64_t r, int64_t v);
  /// rows[rowAt[r]] · blockᵀ for each row r: `width` columns of the rows
  /// against the packed block transposed (packBlockT's f32 [width][64] for
  /// f32 rows, its key pairs for bf16 rows: a pair of columns a step by
  /// vdpbf16ps), as register tiles of (up to kRows) rows x key vectors
  /// (r-major), each handed to `use(firstRow, tile)` before the next is
  /// computed: a tile kept live through the next one's loop would spill its
  /// accumulators there. Where a tile's accumulators are more than
  /// tileAccumulators (AVX2), it is computed in slices of key vectors, each
  /// stored to tileScores, and `use` gets the whole tile loaded back.
  /// With `seenVectors(first, count)` (the key vectors that tile rows
  /// [first, first + count) see, or null for all of them), a whole tile
  /// computes only those, its other vectors 0.
  void
  rowsTimesBlock(Value rows, Value blockT, int64_t width, ArrayRef<Value> rowAt,
                 function_ref<void(int64_t, ArrayRef<Value>)> use,
                 function_ref<Value(int64_t, int64_t)> seenVectors = nullptr);
  /// How many of the block's key vectors (from its first) rows [firstRow,
  /// firstRow + count) may see: with the band's right edge, up to the last
  /// row's last key (in [1, keyVectors]); null without one (all).
  Value seenKeyVectors(const KeyBlock &block, Value firstRow, int64_t count);
  /// The final scores s of register tile `scores` of row `r` (the scale,
  /// the soft cap, the bias loaded by loadMask): vector `v`'s. With
  /// `capDerivative`, stores 1 − (s/c)² there (the soft cap's derivative);
  /// with `modDerivative`, the score_mod's derivative in its score; with
  /// `modInput`, the score the score_mod takes.
  Value finalScore(Value scores, int64_t r, int64_t v, Value capDerivative = {},
                   Value modDerivative = {}, Value modInput = {});
  /// Fills `keep` (and `bias`) for rows [firstRow, firstRow + rowCount) of
  /// head `head` from the mask and the mask_mod, and sets where the block's
  /// scores are for finalScore's score_mod. Returns whether the mask_mod
  /// keeps any of the block's scores for these rows (i1; null without a
  /// mask_mod).
  Value loadRowBlock(Value batch, const KeyBlock &block, Value head,
                     Value firstRow, int64_t rowCount);
  /// Prefetches into L2 (prefetchRun) what loadRowBlock and finalScore
  /// read from memory for rows [firstRow, firstRow + rowCount) of head
  /// `head` (rows past `rows` clamped to the last) at the block's keys: the
  /// mask's elements and the modifiers' reads along rows of captured
  /// tensors (ModifierEmitter::prefetchReads). A kernel that walks all of a
  /// head's rows for one key block reads each row's run of the block's
  /// keys from another page, which no hardware prefetcher follows; it calls
  /// this for rows further on while it computes the current ones.
  void prefetchRowBlock(Value batch, const KeyBlock &block, Value head,
                        Value firstRow, int64_t rowCount, Value rows);
  /// Dropout's Z of the block's key vectors for each of `rows` of head
  /// `head` (op-local indices): row by row, keyVectors a row (two rows of
  /// a 64-key block share a Philox).
  SmallVector<Value> dropoutFactors(Value batch, Value head,
                                    ArrayRef<Value> rows,
                                    const KeyBlock &block);

  /// x where finite, else 0 (a scalar or a vector): the factor that a
  /// product's weights multiply. A NaN or inf in a row reaches every
  /// position that row allows through the weight itself (its score is NaN
  /// there); where a position is excluded, its 0 weight must give 0, not
  /// 0·NaN.
  Value finiteOrZero(Value x);
  /// Pairs (a vector of 2·lanes bf16) with their non-finite elements 0.
  Value finiteOrZeroBf16(Value pairs);
  Value fma(Value a, Value x, Value acc) {
    return vector::FMAOp::create(b, a, x, acc);
  }
  /// Row `at` = (batch, head, row) of an f32 [B, H, Sq, Sk] result at the
  /// block's keys, from `vectors` (keyVectors of them): masked vector stores
  /// into `view` (the result seen with unit inner stride, see ifUnitStride)
  /// where given, else element by element from `rowBuffer` ([64] f32) into
  /// `result`. `streaming`: a whole block whose row starts a cache line is
  /// stored by non-temporal stores (a result larger than the caches, which
  /// then is not read for ownership first).
  void storeKeyRow(Value result, Value view, Value rowBuffer,
                   const KeyBlock &block, ValueRange at,
                   ArrayRef<Value> vectors, bool streaming = false);
  /// A full fence: the streaming stores before it (weakly ordered on x86)
  /// are visible before anything the work item stores after it, such as the
  /// runtime's note that the work item is done.
  void fenceStreamingStores();
  /// Rounds an f32 to `memref`'s element type and stores it.
  void storeAs(Value value, Value memref, ValueRange at);
  /// A 64-byte aligned buffer of `element` (f32 by default) on the stack.
  Value stackBuffer(ArrayRef<int64_t> shape, Type element = {});
  /// A [rows][cols] buffer of `element` (f32 by default) on the heap
  /// ([rows] when cols is 0).
  Value heapRows(Value rows, int64_t cols, Type element = {});
  /// The key/value head of query head `head`.
  Value kvHeadOf(Value head);
  /// Whether a memref or tensor has bf16 elements.
  static bool isBf16(Value v) {
    return cast<ShapedType>(v.getType()).getElementType().isBF16();
  }

  /// Query rows per block (the row buffers' first dimension).
  int64_t rowBlock;
  /// The op and its captured tensors (memrefs).
  Operation *attention;
  ValueRange captures;
  Value query, key, mask, dropoutP, dropoutSeed;
  ValueRange origin;
  AttentionMath math;
  ModifierEmitter modifiers;
  int64_t headDim, headPad, keyVectors;
  Value diagonal; // null without a band
  std::optional<int64_t> left, right;
  Value keysT; // the packed key block (packBlockT's layouts)
  Value tileScores; // [kRows][64]: a register tile made in slices
  // One block of rows: the mask's keep bits and bias, dropout's factors.
  Value keep, bias, dropScale; // [rowBlock][64]
  // Dropout: the threshold of the keep bits and the kept weights' factor.
  Value dropThreshold, dropKept;

  /// (b, h, i, j) of register tile (r, v) of the row block (loadRowBlock):
  /// j a vector of the lanes' keys.
  SmallVector<Value> globalIndices(int64_t r, int64_t v);
  /// The same at global (i32) batch, head, row and first key of the block.
  SmallVector<Value> globalIndicesAt(Value batch, Value head, Value row,
                                     Value firstKey, int64_t v);

private:
  void allocateBlockState(bool keyPairs);
  /// The mask's keep bits and bias for the row block (loadRowBlock).
  void loadMask(Value batch, const KeyBlock &block, Value head,
                Value firstRow, int64_t rowCount);
  /// The global (b, h, first row) of the row block, and its key block's
  /// first key: what the modifiers take (loadRowBlock sets them).
  Value globalBatch, globalHead, globalFirstRow, globalFirstKey;
  /// Index `index` of a mask dim, or 0 where the dim broadcasts (size 1).
  Value maskIndex(int64_t dimIndex, Value index);
};

} // namespace cpu
} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_CPU_KEYBLOCKEMITTER_H
