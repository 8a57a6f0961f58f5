//===- MmaSyncKernel.cpp - Scores and P·V by mma.sync m16n8k16 ------------===//
//
// 16-bit Q, K and V on tensor cores: operands loaded from the shared tiles
// by ldmatrix.x4 (four 8x8 matrices a load), accumulated in f32 by
// mma.sync.m16n8k16, whose accumulator layout is the fragment layout; P is
// rounded to the inputs' type in registers and is P·V's A operand as is.
//
// An excluded key's weight is exactly 0, and on tensor cores 0 · NaN (or
// ±inf) is NaN: a non-finite value in V would reach rows that do not attend
// to its key. So a tile where keys may be excluded first asks, with one pass
// over the staged V tile and a block-wide OR, whether V holds such a value;
// if it does (rare), that tile's P·V is done by FMA with each row's excluded
// keys dropped, the spec's rule that NaN reaches exactly the rows attending
// to it.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Gpu/WarpTile.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::gpu_kernel;

namespace {

class MmaSyncKernel : public GpuMicroKernel {
public:
  using GpuMicroKernel::GpuMicroKernel;

  void buildPrologue() override {
    Value half = arith::DivUIOp::create(b(), lane, cst(16));
    ldRow = arith::RemUIOp::create(b(), lane, cst(16));
    ldCol = mul(half, cst(kGroup));
    ldKeyRow = add(arith::RemUIOp::create(b(), lane, cst(kGroup)), ldCol);
    ldKeyCol =
        mul(arith::RemUIOp::create(
                b(), arith::DivUIOp::create(b(), lane, cst(kGroup)), cst(2)),
            cst(kGroup));
  }
  SmallVector<Value> scores() override;
  void accumulate(SmallVector<Value> &acc, ArrayRef<Value> probs, Value keys,
                  bool dropExcluded) override;

private:
  // The row and column whose address this lane gives ldmatrix.x4 (four
  // 8x8 matrices, lanes 8m..8m+7 the rows of matrix m): `lane % 16` and
  // `8 (lane / 16)` (matrices m = 0..3 at rows +0, +8, +0, +8 and columns
  // +0, +0, +8, +8), or the key-operand order `lane % 8 + 8 (lane / 16)`
  // and `8 ((lane / 8) % 2)` (rows +0, +0, +8, +8, columns +0, +8, +0, +8).
  Value ldRow, ldCol, ldKeyRow, ldKeyCol;

  void accumulateByMma(SmallVector<Value> &acc, ArrayRef<Value> probs);
  Value valuesHoldNonFinite();
  SmallVector<Value>
  accumulateDroppingExcluded(ValueRange acc, ArrayRef<Value> probs, Value keys);
  Value packPair(Value lo, Value hi);
  Value mmaOperand(Value pair);
  Value mmaStep(ArrayRef<Value> a, ArrayRef<Value> b, ArrayRef<Value> c);
  void mmaBlocks(ArrayRef<SmallVector<Value, 4>> a, ArrayRef<Value> bw,
                 SmallVector<Value> &c, int64_t groups, int64_t first);
  SmallVector<Value, 4> loadMatrices(Value tile, Value row, Value col,
                                     bool transpose);
};

} // namespace

/// An MMA operand from a pair of 16-bit values: vector<2xf16> as is; bf16
/// pairs as a packed i32 (what nvvm.mma.sync accepts for bf16).
Value MmaSyncKernel::mmaOperand(Value pair) {
  if (elementType.isF16())
    return pair;
  Value word = vector::BitCastOp::create(
      b(), VectorType::get({1}, b().getI32Type()), pair);
  return vector::ExtractOp::create(b(), word, ArrayRef<int64_t>{0});
}

Value MmaSyncKernel::packPair(Value lo, Value hi) {
  return mmaOperand(vector::FromElementsOp::create(
      b(), VectorType::get({2}, elementType), ValueRange{lo, hi}));
}

/// c += a · b for one m16n8k16 tile; a: 4 operands, b: 2, c: 4 f32.
Value MmaSyncKernel::mmaStep(ArrayRef<Value> a, ArrayRef<Value> bw,
                             ArrayRef<Value> c) {
  Type f32Type = b().getF32Type();
  auto resultType = LLVM::LLVMStructType::getLiteral(
      b().getContext(), {f32Type, f32Type, f32Type, f32Type});
  NVVM::MMATypes type =
      elementType.isF16() ? NVVM::MMATypes::f16 : NVVM::MMATypes::bf16;
  return NVVM::MmaOp::create(
      b(), resultType, a, bw, c, ArrayRef<int64_t>{16, 8, 16},
      /*b1Op=*/std::nullopt, /*intOverflow=*/std::nullopt,
      std::array<NVVM::MMATypes, 2>{type, type},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
}

/// c += a[m] · B for each of the warp's row blocks m and the two groups of 8
/// columns whose B operands one ldmatrix.x4 gave (`bw`: 2 each), groups
/// `first` and `first + 1` of a fragment `c` of `groups` groups a block.
void MmaSyncKernel::mmaBlocks(ArrayRef<SmallVector<Value, 4>> a,
                              ArrayRef<Value> bw, SmallVector<Value> &c,
                              int64_t groups, int64_t first) {
  for (int64_t m = 0; m < rowBlocks; ++m)
    for (int64_t g = 0; g < 2; ++g) {
      int64_t at = (m * groups + first + g) * 4;
      Value d = mmaStep(a[m], bw.slice(2 * g, 2), ArrayRef(c).slice(at, 4));
      for (int64_t i = 0; i < 4; ++i)
        c[at + i] = LLVM::ExtractValueOp::create(b(), d, i);
    }
}

/// Four 8x8 matrices of a 16-bit shared-memory tile as MMA operands, by
/// one ldmatrix.x4 (`.trans`: each matrix transposed); this lane gives the
/// address of (row, col). Lane l then holds, of matrix m, row l / 4 and
/// columns 2 (l % 4) and the next (transposed: that column and rows).
SmallVector<Value, 4> MmaSyncKernel::loadMatrices(Value tile, Value row,
                                                  Value col, bool transpose) {
  auto type = VectorType::get({4, 2}, elementType);
  Value all = nvgpu::LdMatrixOp::create(b(), type, tile, ValueRange{row, col},
                                        transpose, /*numTiles=*/4);
  SmallVector<Value, 4> operands;
  for (int64_t m = 0; m < 4; ++m)
    operands.push_back(
        mmaOperand(vector::ExtractOp::create(b(), all, ArrayRef<int64_t>{m})));
  return operands;
}

/// Scores of the thread's fragment, S = Q·Kᵀ, on tensor cores. Per 16
/// columns of D: each of the warp's 16 x 16 blocks of Q is one ldmatrix.x4
/// (the A operand as is); each ldmatrix.x4 of K gives the B operands of two
/// groups of 8 keys (K's rows are Kᵀ's columns, the "col" layout B needs),
/// which every row block of the warp multiplies.
SmallVector<Value> MmaSyncKernel::scores() {
  int64_t groups = keyTile / kGroup;
  SmallVector<Value> scores(fragmentSize(keyTile), f32(0));
  Value qRow = add(mul(warp, cst(kMmaRows * rowBlocks)), ldRow);
  for (int64_t k = 0; k < paddedHeadDim; k += kMmaK) {
    SmallVector<SmallVector<Value, 4>, kMaxRowBlocks> a;
    for (int64_t m = 0; m < rowBlocks; ++m)
      a.push_back(loadMatrices(shared.query,
                               m == 0 ? qRow : add(qRow, cst(m * kMmaRows)),
                               add(ldCol, cst(k)), false));
    for (int64_t j = 0; j < groups; j += 2) {
      SmallVector<Value, 4> bw =
          loadMatrices(shared.keys, add(ldKeyRow, cst(j * kGroup)),
                       add(ldKeyCol, cst(k)), false);
      mmaBlocks(a, bw, scores, groups, j);
    }
  }
  return scores;
}

void MmaSyncKernel::accumulate(SmallVector<Value> &acc, ArrayRef<Value> probs,
                               Value keys, bool dropExcluded) {
  if (!dropExcluded) {
    accumulateByMma(acc, probs);
    return;
  }
  auto choice =
      scf::IfOp::create(b(), ValueRange(acc).getTypes(), valuesHoldNonFinite(),
                        /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b());
  b().setInsertionPointToStart(choice.thenBlock());
  scf::YieldOp::create(b(), accumulateDroppingExcluded(acc, probs, keys));
  b().setInsertionPointToStart(choice.elseBlock());
  SmallVector<Value> byMma = acc;
  accumulateByMma(byMma, probs);
  scf::YieldOp::create(b(), byMma);
  acc = SmallVector<Value>(choice.getResults());
}

/// acc += P·V on tensor cores: the weights' fragments are already in the
/// A-operand layout (two 8-column groups make one 16-key step); each of V's
/// B operands serves every row block of the warp.
void MmaSyncKernel::accumulateByMma(SmallVector<Value> &acc,
                                    ArrayRef<Value> probs) {
  auto round = [&](Value v) {
    return arith::TruncFOp::create(b(), elementType, v).getResult();
  };
  int64_t keyGroups = keyTile / kGroup, valueGroups = paddedValueDim / kGroup;
  for (int64_t k = 0; k < keyTile / kMmaK; ++k) {
    SmallVector<SmallVector<Value, 4>, kMaxRowBlocks> a;
    for (int64_t m = 0; m < rowBlocks; ++m) {
      ArrayRef<Value> lo = probs.slice((m * keyGroups + 2 * k) * 4, 4),
                      hi = probs.slice((m * keyGroups + 2 * k + 1) * 4, 4);
      a.push_back({packPair(round(lo[0]), round(lo[1])),
                   packPair(round(lo[2]), round(lo[3])),
                   packPair(round(hi[0]), round(hi[1])),
                   packPair(round(hi[2]), round(hi[3]))});
    }
    // V's B operands pair two keys of one column: ldmatrix.x4.trans of
    // 16 keys x 16 columns gives those of two groups of 8 columns.
    Value keyRow = add(ldRow, cst(k * kMmaK));
    for (int64_t e = 0; e < valueGroups; e += 2) {
      SmallVector<Value, 4> bw = loadMatrices(
          shared.values, keyRow, add(ldCol, cst(e * kGroup)), true);
      mmaBlocks(a, bw, acc, valueGroups, e);
    }
  }
}

/// Whether the staged V tile holds a NaN or an infinity, the same answer
/// in every thread: each tests the exponent bits of 16-byte pieces of the
/// tile (the padding rows and columns are zeros), and a barrier ORs the
/// threads' findings.
Value MmaSyncKernel::valuesHoldNonFinite() {
  int64_t chunk = 128 / elementType.getIntOrFloatBitWidth();
  int64_t chunksPerRow = paddedValueDim / chunk;
  auto chunkType = VectorType::get({chunk}, elementType);
  auto bitsType = VectorType::get({chunk}, b().getI16Type());
  // All exponent bits set: NaN or ±inf (f16: 0x7c00, bf16: 0x7f80).
  int64_t exponent = elementType.isF16() ? 0x7c00 : 0x7f80;
  Value exponentBits = arith::ConstantOp::create(
      b(), DenseElementsAttr::get(bitsType,
                                  b().getI16IntegerAttr(exponent).getValue()));
  Value found = forLoopWith(
      tid, cst(keyTile * chunksPerRow), cst(warps * gpu_kernel::kWarpSize),
      ValueRange{arith::ConstantOp::create(b(), b().getBoolAttr(false))},
      [&](Value i, ValueRange state) -> SmallVector<Value> {
        Value row = arith::DivUIOp::create(b(), i, cst(chunksPerRow));
        Value col =
            mul(arith::RemUIOp::create(b(), i, cst(chunksPerRow)), cst(chunk));
        Value v = vector::LoadOp::create(b(), chunkType, shared.values,
                                         ValueRange{row, col});
        Value bits = vector::BitCastOp::create(b(), bitsType, v);
        Value bad = arith::CmpIOp::create(
            b(), arith::CmpIPredicate::eq,
            arith::AndIOp::create(b(), bits, exponentBits), exponentBits);
        Value any =
            vector::ReductionOp::create(b(), vector::CombiningKind::OR, bad);
        return {arith::OrIOp::create(b(), state[0], any)};
      })[0];
  Value predicate =
      arith::ExtUIOp::create(b(), b().getI32Type(), found).getResult();
  Value anywhere = NVVM::BarrierOp::create(
                       b(), TypeRange{b().getI32Type()}, /*barrierId=*/Value(),
                       /*numberOfThreads=*/Value(),
                       NVVM::BarrierReductionAttr::get(
                           b().getContext(), NVVM::BarrierReduction::OR),
                       predicate)
                       .getRes();
  return arith::CmpIOp::create(b(), arith::CmpIPredicate::ne, anywhere,
                               arith::ConstantIntOp::create(b(), 0, 32));
}

/// acc + P·V by FMA, a key of weight 0 bringing none of its V in (as the
/// FMA micro-kernel does). Lane l holds, of each group of 8 keys, the
/// weights of keys 2(l % 4) and the next; the four lanes of a row pass
/// each key's weight around by shuffles.
SmallVector<Value>
MmaSyncKernel::accumulateDroppingExcluded(ValueRange acc, ArrayRef<Value> probs,
                                          Value keys) {
  Value quadLead = mul(arith::DivUIOp::create(b(), lane, cst(4)), cst(4));
  Value zero = f32(0);
  return forLoopWith(
      cst(0), keys, cst(1), acc,
      [&](Value key, ValueRange state) -> SmallVector<Value> {
        Value group = arith::DivUIOp::create(b(), key, cst(kGroup));
        Value inGroup = arith::RemUIOp::create(b(), key, cst(kGroup));
        Value odd = arith::CmpIOp::create(
            b(), arith::CmpIPredicate::ne,
            arith::RemUIOp::create(b(), inGroup, cst(2)), cst(0));
        // This lane's weight at the key's place among its columns, then
        // the weight of the lane that holds the key.
        Value source = arith::IndexCastOp::create(
            b(), b().getI32Type(),
            add(quadLead, arith::DivUIOp::create(b(), inGroup, cst(2))));
        Value width =
            arith::ConstantIntOp::create(b(), gpu_kernel::kWarpSize, 32);
        int64_t groups = keyTile / kGroup;
        SmallVector<Value, 2 * kMaxRowBlocks> p;
        for (int64_t row = 0; row < 2 * rowBlocks; ++row) {
          int64_t m = row / 2, r = row % 2;
          Value own = zero;
          for (int64_t j = 0; j < groups; ++j) {
            int64_t at = (m * groups + j) * 4 + 2 * r;
            own = select(arith::CmpIOp::create(b(), arith::CmpIPredicate::eq,
                                               group, cst(j)),
                         select(odd, probs[at + 1], probs[at]), own);
          }
          p.push_back(gpu::ShuffleOp::create(b(), b().getLoc(), own, source,
                                             width, gpu::ShuffleMode::IDX)
                          .getShuffleResult());
        }
        return accumulateKey(state, key, p, /*dropExcluded=*/true);
      });
}

std::unique_ptr<GpuMicroKernel>
mlir::attn::gpu_kernel::createMmaSyncKernel(const WarpTile &tile,
                                            const SharedTiles &shared) {
  return std::make_unique<MmaSyncKernel>(tile, shared);
}
