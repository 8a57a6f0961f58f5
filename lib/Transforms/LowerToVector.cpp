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
// With `lane-rows`, ops without the bf16 dot product (masks and dropout
// included) take a third path with query rows in vector lanes (see
// "the lane-rows path" below): scores, statistics and P·V all vertical, K and V
// read as broadcasts (f32 in place, 16-bit widened a block at a time), no
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
#include "lib/Transforms/Cpu/MicroKernels.h"
#include "lib/Transforms/Cpu/VectorEmitter.h"
#include "lib/Transforms/Passes.h"

#include "dialect/AttnOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNLOWERTOVECTORPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

bool mlir::attn::cpu::usesBf16Dot(OnlineAttentionOp op) {
  auto elem = [](Value v) {
    return cast<MemRefType>(v.getType()).getElementType();
  };
  return elem(op.getQuery()).isBF16() && elem(op.getKey()).isBF16();
}

bool mlir::attn::cpu::usesBf16Values(OnlineAttentionOp op) {
  return cast<MemRefType>(op.getValue().getType()).getElementType().isBF16();
}

bool mlir::attn::cpu::hasNarrowKeysOrValues(OnlineAttentionOp op) {
  return !cast<MemRefType>(op.getKey().getType()).getElementType().isF32() ||
         !cast<MemRefType>(op.getValue().getType()).getElementType().isF32();
}

/// The static bound on the query rows of `op`'s state (its sum is a slice
/// of a statically sized buffer, as attn-bufferize makes it), if any.
std::optional<int64_t> mlir::attn::cpu::stateRowBound(OnlineAttentionOp op) {
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

namespace {

/// Keys per step in the packed blocks that a band cuts, unless the pass's
/// band-key-step says otherwise (the largest divisor of the key block up to
/// this): 64 halves the keys past a row's reach in 128-key blocks (bf16
/// causal D = 64 on Zen 4: 1.008-1.015x against whole blocks; 32 keys,
/// whose more frequent online updates cost what they save, 0.99-1.0x).
constexpr int64_t kBandKeyStep = 64;

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

/// The most bytes of one head's K or V rows that the forward copies dense
/// (OpLowering::denseRows).
constexpr int64_t kMaxDenseCopyBytes = 32 << 20;

/// Lowers one op: loops over its batches and key/value heads, and in each
/// the micro-kernel that its rows take.
class OpLowering : public VectorEmitter {
public:
  OpLowering(ImplicitLocOpBuilder &b, OnlineAttentionOp op,
             const Scratch &scratch, const KernelOptions &options, bool bf16Dot,
             bool laneRows, bool amx, bool blockPrefetch)
      : VectorEmitter(b, options.lanes), op(op), scratch(scratch),
        options(options),
        laneRows(laneRows), site{b, op, scratch, options, Value(), bf16Dot} {
    site.amx = amx;
    site.blockPrefetch = blockPrefetch;
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
    site.diagonal = diagonal;
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
      // The group's heads (and a lane-rows head's tiles) each read all of
      // K and V: rows far apart in memory are copied dense once first.
      Value passes = group;
      if (laneRows)
        passes = arith::MulIOp::create(
            b, group,
            arith::CeilDivUIOp::create(b, rows, cst(options.laneRows)));
      Value reread =
          arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, passes, cst(1));
      Value key = op.getKey(), value = op.getValue();
      DenseRows denseKeys = denseRows(key, batch, kvHead, reread);
      DenseRows denseValues = denseRows(value, batch, kvHead, reread);
      op.getKeyMutable().assign(denseKeys.rows);
      op.getValueMutable().assign(denseValues.rows);
      eachHead([&](Value head) {
        if (laneRows)
          emitLaneRowsHead(site, batch, head, kvHead, rows, keys);
        else if (site.amx)
          emitAmxHead(site, batch, head, kvHead, rows, keys);
        else
          emitPackedHead(site, batch, head, kvHead, rows, keys);
      });
      op.getKeyMutable().assign(key);
      op.getValueMutable().assign(value);
      releaseDenseRows(denseKeys);
      releaseDenseRows(denseValues);
    };
    if (options.directRows <= 0)
      return packed();
    // Few rows and unit-stride K and V rows: the direct path. Its key
    // blocks are the outer loop, so that the group's heads (decoding with
    // GQA) read each block from memory once and from cache after.
    Value few = arith::CmpIOp::create(b, arith::CmpIPredicate::sle, rows,
                                      cst(options.directRows));
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
    // The AMX path's few rows widen bf16 for FMAs, as its CPUs' other
    // kernels do (their cores issue vdpbf16ps once in about three cycles).
    KernelSite direct = site;
    if (site.amx) {
      direct.amx = false;
      direct.bf16Dot = false;
    }
    emitDirectGroup(direct, batch, kvHead, firstHead, group, rows, keys,
                    keyRows, valueRows);
    b.setInsertionPoint(choice.elseBlock()->getTerminator());
    packed();
  }

  /// K or V (`rowsMemref`, [B, H, S, W]) where its rows are dense (a row
  /// stride of W, unit inner stride) or `wanted` is false; else (`copied`) a
  /// dense copy of head (batch, head)'s rows on the heap, viewed with the
  /// operand's type (strides 0, 0, W, 1), so that the kernel indexes it as
  /// the operand. Rows of [B, S, H, D] views sit H·D apart: each row a
  /// page of its own for large H·D, and every pass over them a TLB miss a
  /// row (on Emerald Rapids the lane-rows kernel ran 1.2x slower on the
  /// projections' [B, S, 3E] views than on dense rows). A type that cannot
  /// take the view (static strides: dense already) is returned as is.
  struct DenseRows {
    Value rows;   // the dense copy, or the operand itself
    Value copied; // i1: whether `rows` is a copy to free (null: never)
  };
  DenseRows denseRows(Value rowsMemref, Value batch, Value head, Value wanted) {
    auto type = cast<MemRefType>(rowsMemref.getType());
    int64_t width = type.getDimSize(3);
    Type element = type.getElementType();
    auto bufferType = MemRefType::get({ShapedType::kDynamic, width}, element);
    auto viewType = MemRefType::get(
        type.getShape(), element,
        StridedLayoutAttr::get(b.getContext(), 0, {0, 0, width, 1}));
    if (!memref::CastOp::areCastCompatible(viewType, type))
      return {rowsMemref, Value()};
    // Rows of unit inner stride apart from their length (what [B, S, H, D]
    // views are) are copied by vectors, up to kMaxDenseCopyBytes a head
    // (a long cache is read in place rather than doubled per thread); other
    // layouts keep their reads.
    int64_t rowBytes = width * element.getIntOrFloatBitWidth() / 8;
    auto meta = memref::ExtractStridedMetadataOp::create(b, rowsMemref);
    Value copy = wanted;
    Value conditions[] = {
        arith::CmpIOp::create(b, arith::CmpIPredicate::ne, meta.getStrides()[2],
                              cst(width)),
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, meta.getStrides()[3],
                              cst(1)),
        arith::CmpIOp::create(b, arith::CmpIPredicate::ule, dim(rowsMemref, 2),
                              cst(kMaxDenseCopyBytes / rowBytes))};
    for (Value condition : conditions)
      copy = arith::AndIOp::create(b, copy, condition);
    auto branch = scf::IfOp::create(b, TypeRange{type}, copy,
                                    /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(branch.thenBlock());
    Value rows = dim(rowsMemref, 2);
    Value buffer = memref::AllocOp::create(b, bufferType, ValueRange{rows},
                                           b.getI64IntegerAttr(64));
    Value rowsView = unitStrideRows(rowsMemref);
    int64_t chunk = lanes * 32 / element.getIntOrFloatBitWidth();
    forLoop(cst(0), rows, cst(1), [&](Value row) {
      for (int64_t c = 0; c < width; c += chunk) {
        int64_t live = std::min(chunk, width - c);
        Value v =
            loadRawChunkAt(rowsView, {batch, head, row}, cst(c), live, chunk);
        if (live == chunk)
          vector::StoreOp::create(b, v, buffer, ValueRange{row, cst(c)});
        else
          vector::MaskedStoreOp::create(
              b, buffer, ValueRange{row, cst(c)},
              vector::ConstantMaskOp::create(
                  b, VectorType::get({chunk}, b.getI1Type()),
                  ArrayRef<int64_t>{live}),
              v);
      }
    });
    SmallVector<OpFoldResult> sizes;
    for (int64_t d = 0; d < 4; ++d)
      sizes.push_back(type.isDynamicDim(d)
                          ? OpFoldResult(dim(rowsMemref, d))
                          : OpFoldResult(b.getIndexAttr(type.getDimSize(d))));
    SmallVector<OpFoldResult> strides = {b.getIndexAttr(0), b.getIndexAttr(0),
                                         b.getIndexAttr(width),
                                         b.getIndexAttr(1)};
    Value view = memref::ReinterpretCastOp::create(
        b, viewType, buffer, b.getIndexAttr(0), sizes, strides);
    scf::YieldOp::create(b, ValueRange{memref::CastOp::create(b, type, view)});
    b.setInsertionPointToStart(branch.elseBlock());
    scf::YieldOp::create(b, ValueRange{rowsMemref});
    return {branch.getResult(0), copy};
  }

  /// Frees what denseRows allocated (nothing where it returned the operand).
  void releaseDenseRows(const DenseRows &dense) {
    if (!dense.copied)
      return;
    auto ifCopied = scf::IfOp::create(b, dense.copied);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifCopied.thenBlock()->getTerminator());
    memref::DeallocOp::create(b, dense.rows);
  }

private:
  OnlineAttentionOp op;
  const Scratch &scratch;
  const KernelOptions &options;
  Value diagonal; // set when the op is causal or windowed
  /// Whether the op's rows, where the direct path does not take them,
  /// take the lane-rows micro-kernel rather than the packed one.
  bool laneRows;
  KernelSite site;
};

struct AttnLowerToVectorPass
    : public mlir::attn::impl::AttnLowerToVectorPassBase<
          AttnLowerToVectorPass> {
  using AttnLowerToVectorPassBase::AttnLowerToVectorPassBase;

  /// What one op takes: the bf16 dot product, the lane-rows micro-kernel.
  struct OpChoice {
    bool bf16Dot = false, laneRows = false, amx = false, blockPrefetch = true;
  };
  /// The op's #attn.kernel, else what the pass's options give it: the dot
  /// product for bf16 Q and K with bf16-dot, and lane rows (with a
  /// lane-rows tile) where the op has no mask operand or dot product.
  FailureOr<OpChoice> choose(OnlineAttentionOp op, int64_t laneRowsTile) {
    KernelAttr kernel = op.getKernelAttr();
    if (!kernel) {
      OpChoice choice;
      choice.bf16Dot = bf16Dot && usesBf16Dot(op);
      choice.laneRows =
          laneRowsTile > 0 && laneRowsCandidate(op, choice.bf16Dot);
      return choice;
    }
    MicroKernel microKernel = kernel.getMicroKernel();
    if (microKernel != MicroKernel::packed &&
        microKernel != MicroKernel::lane_rows &&
        microKernel != MicroKernel::amx)
      return op.emitOpError()
             << "attn-lower-to-vector: #attn.kernel<"
             << stringifyMicroKernel(microKernel)
             << "> is a GPU micro-kernel; the CPU takes packed, lane_rows or "
                "amx";
    if (microKernel == MicroKernel::amx) {
      auto type = [&](Value v) { return cast<MemRefType>(v.getType()); };
      int64_t d = type(op.getQuery()).getDimSize(3);
      int64_t dv = type(op.getValue()).getDimSize(3);
      if (!usesBf16Dot(op) || !type(op.getValue()).getElementType().isBF16() ||
          d % 32 != 0 || dv % 16 != 0 || vectorWidth != 16)
        return op.emitOpError()
               << "attn-lower-to-vector: #attn.kernel<amx> takes bf16 query, "
                  "key and value with a head dim that is a multiple of 32 "
                  "and a value dim of 16, and vector-width 16 (AVX-512); "
                  "found head dims "
               << d << " and " << dv << ", vector-width "
               << static_cast<int64_t>(vectorWidth);
    }
    if (kernel.getBf16Dot() && !usesBf16Dot(op))
      return op.emitOpError() << "attn-lower-to-vector: #attn.kernel's "
                                 "bf16_dot needs bf16 query and key";
    OpChoice choice;
    choice.bf16Dot = kernel.getBf16Dot();
    choice.laneRows = microKernel == MicroKernel::lane_rows;
    choice.amx = microKernel == MicroKernel::amx;
    choice.blockPrefetch = kernel.getBlockPrefetch();
    if (choice.laneRows && !laneRowsCandidate(op, choice.bf16Dot))
      return op.emitOpError()
             << "attn-lower-to-vector: #attn.kernel<lane_rows> takes ops "
                "without the bf16 dot product";
    return choice;
  }

  /// Each bufferized op of kind OpTy becomes the micro-kernel that `emit`
  /// writes in its place (its scratch is its own): the backward, weights,
  /// linear and additive attention ops.
  template <typename OpTy>
  void lowerBufferized(func::FuncOp func,
                       function_ref<void(ImplicitLocOpBuilder &, OpTy)> emit) {
    SmallVector<OpTy> ops;
    func.walk([&](OpTy op) {
      if (!op.hasPureTensorSemantics())
        ops.push_back(op);
    });
    for (OpTy op : ops) {
      ImplicitLocOpBuilder b(op.getLoc(), op);
      emit(b, op);
      op.erase();
    }
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    int64_t lanes = vectorWidth;
    bool recomputeDot = bf16Dot && recomputeBf16Dot && lanes == 16;
    lowerBufferized<AttentionBackwardOp>(
        func, [&](ImplicitLocOpBuilder &b, AttentionBackwardOp op) {
          cpu::emitBackward(b, op, lanes, recomputeDot);
        });
    lowerBufferized<AttentionWeightsOp>(
        func, [&](ImplicitLocOpBuilder &b, AttentionWeightsOp op) {
          cpu::emitWeights(b, op, lanes, recomputeDot);
        });
    lowerBufferized<LinearOp>(func, [&](ImplicitLocOpBuilder &b, LinearOp op) {
      cpu::emitLinear(b, op, lanes);
    });
    lowerBufferized<LinearBackwardOp>(
        func, [&](ImplicitLocOpBuilder &b, LinearBackwardOp op) {
          cpu::emitLinearBackward(b, op, lanes);
        });
    lowerBufferized<AdditiveOp>(func,
                                [&](ImplicitLocOpBuilder &b, AdditiveOp op) {
                                  cpu::emitAdditive(b, op, lanes);
                                });
    lowerBufferized<AdditiveBackwardOp>(
        func, [&](ImplicitLocOpBuilder &b, AdditiveBackwardOp op) {
          cpu::emitAdditiveBackward(b, op, lanes);
        });
    // A multi-head layer's projections (attn-decompose-mha).
    SmallVector<linalg::MatmulOp> matmuls;
    func.walk([&](linalg::MatmulOp op) {
      if (cpu::isVectorMatmul(op))
        matmuls.push_back(op);
    });
    for (linalg::MatmulOp op : matmuls) {
      ImplicitLocOpBuilder b(op.getLoc(), op);
      cpu::emitMatmul(b, op, vectorWidth);
      op.erase();
    }
    SmallVector<OnlineAttentionOp> ops;
    bool tensorOps = false;
    func.walk([&](OnlineAttentionOp op) {
      if (op.hasPureTensorSemantics())
        tensorOps = true;
      else
        ops.push_back(op);
    });
    // The blocking: each op's #attn.kernel, else the pass's options. The
    // ops of a function share its scratch buffers: they must agree.
    int64_t keyBlock = this->keyBlock, rowBlock = this->rowBlock,
            laneRows = this->laneRows;
    for (auto [i, op] : llvm::enumerate(ops)) {
      KernelAttr kernel = op.getKernelAttr();
      int64_t opKeyBlock = chosenKeyBlock(op, this->keyBlock);
      int64_t opRowBlock = kernel && kernel.getRowBlock() > 0
                               ? kernel.getRowBlock()
                               : this->rowBlock;
      int64_t opLaneRows = kernel ? kernel.getLaneRows() : this->laneRows;
      if (i > 0 && (opKeyBlock != keyBlock || opRowBlock != rowBlock ||
                    opLaneRows != laneRows)) {
        op.emitOpError() << "attn-lower-to-vector: the ops of one function "
                            "share its scratch buffers and must agree on "
                            "key_block, row_block and lane_rows";
        return signalPassFailure();
      }
      keyBlock = opKeyBlock;
      rowBlock = opRowBlock;
      laneRows = opLaneRows;
    }
    if (laneRows < 0 || laneRows % vectorWidth != 0 ||
        laneRows > kMaxAccumulators * vectorWidth) {
      func.emitError() << "attn-lower-to-vector: lane-rows must be 0 or a "
                          "multiple of vector-width up to "
                       << kMaxAccumulators * vectorWidth << ", found "
                       << static_cast<int64_t>(laneRows);
      return signalPassFailure();
    }
    // The AMX path's blocks are a tile's 16 rows (its #attn.kernel says so).
    bool amxRows = llvm::any_of(ops, [](OnlineAttentionOp op) {
      KernelAttr kernel = op.getKernelAttr();
      return kernel && kernel.getMicroKernel() == MicroKernel::amx;
    });
    if (!amxRows && (rowBlock < 1 || rowBlock > 8)) {
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
    if (tensorOps) {
      func.emitError("attn-lower-to-vector: attn.online_attention must be "
                     "bufferized first (run one-shot-bufferize)");
      return signalPassFailure();
    }
    if (ops.empty())
      return;

    // What each op takes.
    DenseMap<Operation *, OpChoice> choices;
    for (OnlineAttentionOp op : ops) {
      FailureOr<OpChoice> choice = choose(op, laneRows);
      if (failed(choice))
        return signalPassFailure();
      choices[op] = *choice;
    }
    auto anyOp = [&](function_ref<bool(OnlineAttentionOp, OpChoice)> pred) {
      return llvm::any_of(
          ops, [&](OnlineAttentionOp op) { return pred(op, choices[op]); });
    };

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
    if (anyOp([](OnlineAttentionOp, OpChoice c) { return c.bf16Dot; }))
      scratch.keyPairs = memref::AllocaOp::create(
          b,
          MemRefType::get(
              {static_cast<int64_t>(llvm::divideCeil(maxHeadDim, 2)),
               2 * keyBlock},
              b.getBF16Type()),
          b.getI64IntegerAttr(64));
    if (anyOp([](OnlineAttentionOp op, OpChoice c) {
          return c.bf16Dot && usesBf16Values(op);
        })) {
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
      if (anyOp([](OnlineAttentionOp op, OpChoice c) {
            return c.laneRows && op.getMask();
          }))
        scratch.laneBias = stackBuffer({keyBlock, laneRows});
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
    if (anyOp([](OnlineAttentionOp, OpChoice c) { return c.amx; })) {
      scratch.amxQuery = memref::AllocaOp::create(
          b, MemRefType::get({kAmxRows, maxHeadDim}, b.getBF16Type()),
          b.getI64IntegerAttr(64));
      scratch.amxScores = stackBuffer({kAmxRows, keyBlock});
      scratch.amxOutput = stackBuffer({kAmxRows, maxValuePad});
    }
    // Pad columns of the packed V and of the query rows are read by
    // whole-vector loads: zero them once and for all.
    zeroPadColumns(b, scratch.values, vectorWidth, minValueDim);
    if (scratch.queryRows)
      zeroPadColumns(b, scratch.queryRows, vectorWidth, minHeadDim);

    for (OnlineAttentionOp op : ops) {
      b.setLoc(op.getLoc());
      b.setInsertionPoint(op);
      KernelOptions options{vectorWidth, keyBlock,   bandKeyStep,
                            rowBlock,    directRows, prefetchDistance,
                            laneRows};
      OpChoice choice = choices[op];
      OpLowering(b, op, scratch, options, choice.bf16Dot, choice.laneRows,
                 choice.amx, choice.blockPrefetch)
          .emit();
      op.erase();
    }
  }
};

} // namespace
