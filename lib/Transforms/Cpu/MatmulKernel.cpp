//===- MatmulKernel.cpp - The CPU kernel of a projection's matmul ---------===//
//
// A bufferized linalg.matmul with B transposed, C[M, N] (f32) +=
// A[M, K] · B[N, K]ᵀ, as attn-decompose-mha makes for a layer's
// projections (A the activations, B a weight in PyTorch's [out, in] layout):
//
//   pack:   Bᵀ as f32 panels [strips][K][4 vectors] on the heap (a strip's
//           columns contiguous per k), pad columns 0 (once per call of the
//           matmul: per batch of a layer)
//   per strip of 4 vectors of columns, per block of 6 rows of A:
//           24 accumulators loaded from C (its bias), then per k one scalar
//           of A broadcast per row against the strip's 4 vectors of Bᵀ
//           (VectorEmitter::broadcastProduct), stored back (masked at N)
//
// Columns outside, rows inside: a strip's panel of Bᵀ (K x 64 floats,
// contiguous) stays in cache while the rows stream by. A and B are read element
// by element (any strides, f32/bf16/f16); C needs unit-stride rows for its
// vector loads and stores, else the matmul stays as it is for
// convert-linalg-to-loops.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Cpu/MicroKernels.h"
#include "lib/Transforms/Cpu/VectorEmitter.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

namespace {

/// Rows of A per block, and vectors of columns per strip: 24 accumulators,
/// 4 vectors of Bᵀ and a broadcast in 29 of AVX-512's 32 registers; on
/// AVX2 2 vectors (12 accumulators, 2 of Bᵀ and a broadcast in its 16).
constexpr int64_t kRows = 6;
constexpr int64_t stripVectors(int64_t lanes) { return lanes >= 16 ? 4 : 2; }

class MatmulLowering : public VectorEmitter {
public:
  MatmulLowering(ImplicitLocOpBuilder &b, linalg::MatmulOp op, int64_t lanes)
      : VectorEmitter(b, lanes), op(op) {
    a = op.getDpsInputs()[0];
    weight = op.getDpsInputs()[1];
    c = op.getDpsInits()[0];
    auto cType = cast<MemRefType>(c.getType());
    columns = cType.getDimSize(1);
    depth = cast<MemRefType>(a.getType()).getDimSize(1);
    columnPad = llvm::alignTo(columns, lanes);
    stripWidth = stripVectors(lanes) * lanes;
    strips = llvm::divideCeil(columns, stripWidth);
  }

  void emit();

private:
  Value add(Value x, int64_t v) { return arith::AddIOp::create(b, x, cst(v)); }
  /// Bᵀ as f32 panels [strips][K][stripWidth].
  void packWeight();
  /// Columns [s · stripWidth, s · stripWidth + vectors · lanes) of C's rows
  /// [first, first + count), on C seen with unit-stride rows; `last`: the
  /// strip that ends at N.
  void strip(Value rowsC, Value first, int64_t count, Value s, int64_t vectors,
             bool last);

  linalg::MatmulOp op;
  Value a, weight, c, packed;
  int64_t columns, depth, columnPad;
  int64_t stripWidth, strips;
};

void MatmulLowering::packWeight() {
  // Columns past N read 0.
  if (columns % stripWidth != 0)
    forLoop(cst(0), cst(depth), cst(1), [&](Value k) {
      for (int64_t col = 0; col < stripWidth; col += lanes)
        storeVector(zeroVector(), packed, {cst(strips - 1), k, cst(col)});
    });
  forLoop(cst(0), cst(columns), cst(1), [&](Value n) {
    Value panel = arith::DivUIOp::create(b, n, cst(stripWidth));
    Value col = arith::RemUIOp::create(b, n, cst(stripWidth));
    forLoop(cst(0), cst(depth), cst(1), [&](Value k) {
      memref::StoreOp::create(b, loadF32(weight, {n, k}), packed,
                              ValueRange{panel, k, col});
    });
  });
}

void MatmulLowering::strip(Value rowsC, Value first, int64_t count, Value s,
                           int64_t vectors, bool last) {
  // The last strip's last vector is partial where N is not whole vectors.
  int64_t lastLive = lanes;
  if (last && columns % lanes != 0)
    lastLive = columns % lanes;
  Value col = arith::MulIOp::create(b, s, cst(stripWidth));
  // The strip's panel of Bᵀ, [K][stripWidth].
  auto panelType = MemRefType::get({depth, stripWidth}, f32,
                                   StridedLayoutAttr::get(b.getContext(),
                                                          ShapedType::kDynamic,
                                                          {stripWidth, 1}));
  Value panel = memref::SubViewOp::create(
      b, panelType, packed,
      ArrayRef<OpFoldResult>{s, b.getIndexAttr(0), b.getIndexAttr(0)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(depth),
                             b.getIndexAttr(stripWidth)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                             b.getIndexAttr(1)});
  auto at = [&](int64_t r, int64_t v) -> SmallVector<Value> {
    return {add(first, r), add(col, v * lanes)};
  };
  auto live = [&](int64_t v) { return v + 1 == vectors ? lastLive : lanes; };
  SmallVector<Value> acc;
  for (int64_t r = 0; r < count; ++r)
    for (int64_t v = 0; v < vectors; ++v)
      acc.push_back(loadChunkF32(rowsC, at(r, v), live(v)));
  acc = broadcastProduct(
      cst(0), cst(depth), count,
      [&](int64_t r, Value k) {
        return loadF32(a, {add(first, r), k});
      },
      panel, cst(0), acc);
  for (int64_t r = 0; r < count; ++r)
    for (int64_t v = 0; v < vectors; ++v) {
      Value value = acc[r * vectors + v];
      if (live(v) == lanes)
        storeVector(value, rowsC, at(r, v));
      else
        vector::MaskedStoreOp::create(b, rowsC, at(r, v), liveLanes(live(v)),
                                      value);
    }
}

void MatmulLowering::emit() {
  ifUnitStride(
      c,
      [&](Value rowsC) {
        packed = heapBuffer({strips, depth, stripWidth});
        packWeight();
        Value rows = dim(c, 0);
        auto rowsOf = [&](Value s, int64_t vectors, bool last) {
          forBlocks(cst(0), rows, kRows, [&](Value first, int64_t count) {
            strip(rowsC, first, count, s, vectors, last);
          });
        };
        // Whole strips in a loop, then the last, narrower one.
        int64_t wholeStrips = columns / stripWidth;
        if (wholeStrips > 0)
          forLoop(cst(0), cst(wholeStrips), cst(1), [&](Value s) {
            rowsOf(s, stripVectors(lanes), columns == wholeStrips * stripWidth);
          });
        if (wholeStrips < strips)
          rowsOf(cst(wholeStrips),
                 (columnPad - wholeStrips * stripWidth) / lanes, true);
        memref::DeallocOp::create(b, packed);
      },
      [&] { b.clone(*op.getOperation()); });
}

} // namespace

bool mlir::attn::cpu::isVectorMatmul(linalg::MatmulOp op) {
  if (op.hasPureTensorSemantics() ||
      !isa<linalg::MatmulTransposeBOp>(op.getOperation()))
    return false;
  auto type = [](Value v) { return dyn_cast<MemRefType>(v.getType()); };
  MemRefType a = type(op.getDpsInputs()[0]), w = type(op.getDpsInputs()[1]),
             c = type(op.getDpsInits()[0]);
  if (!a || !w || !c || !c.getElementType().isF32())
    return false;
  auto floating = [](Type t) { return t.isF32() || t.isBF16() || t.isF16(); };
  return floating(a.getElementType()) && floating(w.getElementType()) &&
         !a.isDynamicDim(1) && !c.isDynamicDim(1);
}

void mlir::attn::cpu::emitMatmul(ImplicitLocOpBuilder &b, linalg::MatmulOp op,
                                 int64_t lanes) {
  MatmulLowering(b, op, lanes).emit();
}
