//===- DecomposeMha.cpp - attn.mha as matmuls around attn.attention -------===//
//
// A multi-head attention layer, per batch b (one scf.forall iteration, one
// work item of the kernel):
//
//   q = x_q[b] · W_qᵀ (+ b_q)      linalg.matmul (B transposed), f32
//   k, v likewise                   accumulator, rounded to the input type
//   q, k, v: [S, E] -> [1, H, S, E/H]   expand_shape + linalg.transpose
//   o = attn.attention(q, k, v)         the op's mask slice and attributes
//   o: [1, H, Sq, E/H] -> [Sq, E]       linalg.transpose + collapse_shape
//   Y[b] = o · W_oᵀ (+ b_o)             written in place into the output
//
// A batch is the unit of work: the heads meet again in the output
// projection, so finer tiles would need a barrier between the phases. The
// intermediates are heap buffers (bufferization.to_tensor of a memref.alloc
// that the iteration frees at its end): they are O(S·E), too large for the
// stack that bufferization gives the kernels' own temporaries. The
// attention is tiled by attn-tile as any other (its forall, nested here,
// becomes a loop of the work item).
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNDECOMPOSEMHAPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;
using namespace mlir::attn;

namespace {

class MhaDecomposer {
public:
  MhaDecomposer(ImplicitLocOpBuilder &b, MhaOp op)
      : b(b), op(op), f32(b.getF32Type()),
        elem(cast<ShapedType>(op.getQuery().getType()).getElementType()),
        embed(op.getEmbedDim()), heads(op.getNumHeads()),
        headDim(embed / heads) {}

  /// The layer's result: the output tensor with every batch written.
  Value emit();

private:
  /// A tensor of `shape` (dynamic dims `dynamicSizes`) on a heap buffer
  /// that the iteration frees at its end.
  Value heapTensor(ArrayRef<int64_t> shape, ValueRange dynamicSizes,
                   Type type) {
    auto memrefType = MemRefType::get(shape, type);
    Value buffer = memref::AllocOp::create(b, memrefType, dynamicSizes,
                                           b.getI64IntegerAttr(64));
    buffers.push_back(buffer);
    return bufferization::ToTensorOp::create(
        b, RankedTensorType::get(shape, type), buffer, /*restrict=*/true,
        /*writable=*/true);
  }

  OpFoldResult size(Value tensor, int64_t d) {
    auto type = cast<ShapedType>(tensor.getType());
    if (!type.isDynamicDim(d))
      return b.getIndexAttr(type.getDimSize(d));
    return tensor::DimOp::create(b, tensor, d).getResult();
  }

  /// Rows [offset, offset + rows) of a 2-D tensor (all its columns), or
  /// the 1-D slice [offset, offset + rows) of a vector.
  Value rowsOf(Value tensor, int64_t offset, int64_t rows) {
    auto type = cast<RankedTensorType>(tensor.getType());
    SmallVector<OpFoldResult> offsets = {b.getIndexAttr(offset)},
                              sizes = {b.getIndexAttr(rows)};
    if (type.getRank() == 2) {
      offsets.push_back(b.getIndexAttr(0));
      sizes.push_back(b.getIndexAttr(type.getDimSize(1)));
    }
    SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
    return tensor::ExtractSliceOp::create(b, tensor, offsets, sizes, strides);
  }

  /// Batch `batch` of a [B, S, W] tensor as [S, W].
  Value batchOf(Value tensor, Value batch) {
    auto type = cast<RankedTensorType>(tensor.getType());
    auto sliceType = RankedTensorType::get(
        {type.getDimSize(1), type.getDimSize(2)}, type.getElementType());
    return tensor::ExtractSliceOp::create(
        b, sliceType, tensor,
        ArrayRef<OpFoldResult>{batch, b.getIndexAttr(0), b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), size(tensor, 1),
                               b.getIndexAttr(type.getDimSize(2))},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                               b.getIndexAttr(1)});
  }

  /// x [S, Din] · wᵀ (w [N, Din]) + bias [N]: an f32 accumulator (the bias
  /// broadcast, or 0) that linalg.matmul adds to, rounded to the element
  /// type into `into` ([S, N], or a heap tensor when null).
  Value project(Value x, Value weight, Value bias, Value into = {}) {
    auto xType = cast<RankedTensorType>(x.getType());
    int64_t rows = xType.getDimSize(0);
    int64_t columns = cast<ShapedType>(weight.getType()).getDimSize(0);
    SmallVector<Value> dynamicRows;
    if (ShapedType::isDynamic(rows))
      dynamicRows.push_back(tensor::DimOp::create(b, x, 0));
    Value acc = elem == f32 && into
                    ? into
                    : heapTensor({rows, columns}, dynamicRows, f32);
    auto accType = cast<RankedTensorType>(acc.getType());
    MLIRContext *ctx = b.getContext();
    AffineMap identity = AffineMap::getMultiDimIdentityMap(2, ctx);
    SmallVector<utils::IteratorType> parallel(2, utils::IteratorType::parallel);
    if (bias) {
      AffineMap column = AffineMap::get(2, 0, b.getAffineDimExpr(1), ctx);
      acc = linalg::GenericOp::create(
                b, TypeRange{accType}, ValueRange{bias}, ValueRange{acc},
                ArrayRef<AffineMap>{column, identity}, parallel,
                [&](OpBuilder &nested, Location loc, ValueRange args) {
                  Value value = args[0];
                  if (value.getType() != f32)
                    value = arith::ExtFOp::create(nested, loc, f32, value);
                  linalg::YieldOp::create(nested, loc, value);
                })
                .getResult(0);
    } else {
      Value zero = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0f));
      acc = linalg::FillOp::create(b, ValueRange{zero}, ValueRange{acc})
                .getResult(0);
    }
    acc = linalg::MatmulTransposeBOp::create(b, b.getLoc(), TypeRange{accType},
                                             ValueRange{x, weight},
                                             ValueRange{acc})
              .getResult(0);
    if (elem == f32)
      return acc;
    Value out = into ? into : heapTensor({rows, columns}, dynamicRows, elem);
    return linalg::GenericOp::create(
               b, TypeRange{out.getType()}, ValueRange{acc}, ValueRange{out},
               ArrayRef<AffineMap>{identity, identity}, parallel,
               [&](OpBuilder &nested, Location loc, ValueRange args) {
                 linalg::YieldOp::create(
                     nested, loc,
                     arith::TruncFOp::create(nested, loc, elem, args[0])
                         .getResult());
               })
        .getResult(0);
  }

  /// [S, E] as the attention's [1, H, S, E/H].
  Value splitHeads(Value x) {
    int64_t rows = cast<ShapedType>(x.getType()).getDimSize(0);
    SmallVector<Value> dynamicRows;
    SmallVector<OpFoldResult> rowSize = {size(x, 0)};
    if (ShapedType::isDynamic(rows))
      dynamicRows.push_back(tensor::DimOp::create(b, x, 0));
    auto split = tensor::ExpandShapeOp::create(
        b, RankedTensorType::get({rows, heads, headDim}, elem), x,
        ArrayRef<ReassociationIndices>{{0}, {1, 2}},
        ArrayRef<OpFoldResult>{rowSize[0], b.getIndexAttr(heads),
                               b.getIndexAttr(headDim)});
    Value byHead = heapTensor({heads, rows, headDim}, dynamicRows, elem);
    byHead = linalg::TransposeOp::create(b, split.getResult(), byHead,
                                         ArrayRef<int64_t>{1, 0, 2})
                 .getResult()[0];
    return tensor::ExpandShapeOp::create(
        b, RankedTensorType::get({1, heads, rows, headDim}, elem), byHead,
        ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(heads),
                               rowSize[0], b.getIndexAttr(headDim)});
  }

  /// The attention's [1, H, Sq, E/H] as [Sq, E].
  Value mergeHeads(Value o) {
    int64_t rows = cast<ShapedType>(o.getType()).getDimSize(2);
    SmallVector<Value> dynamicRows;
    if (ShapedType::isDynamic(rows))
      dynamicRows.push_back(tensor::DimOp::create(b, o, 2));
    Value byHead = tensor::CollapseShapeOp::create(
        b, o, ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}});
    Value byRow = heapTensor({rows, heads, headDim}, dynamicRows, elem);
    byRow = linalg::TransposeOp::create(b, byHead, byRow,
                                        ArrayRef<int64_t>{1, 0, 2})
                .getResult()[0];
    return tensor::CollapseShapeOp::create(
        b, byRow, ArrayRef<ReassociationIndices>{{0}, {1, 2}});
  }

  /// Batch `batch` of the mask [Bm, Hm, Sqm, Sk] (its own batch 0 where Bm
  /// is a static 1).
  Value maskOf(Value mask, Value batch) {
    auto type = cast<RankedTensorType>(mask.getType());
    bool broadcast = type.getDimSize(0) == 1;
    SmallVector<OpFoldResult> offsets = {
        broadcast ? OpFoldResult(b.getIndexAttr(0)) : OpFoldResult(batch),
        b.getIndexAttr(0), b.getIndexAttr(0), b.getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), size(mask, 1),
                                       size(mask, 2), size(mask, 3)};
    SmallVector<OpFoldResult> strides(4, b.getIndexAttr(1));
    return tensor::ExtractSliceOp::create(b, mask, offsets, sizes, strides);
  }

  /// The iteration of batch `batch`, writing into `output` (the forall's
  /// shared output); returns the written slice.
  Value emitBatch(Value batch, Value output);

  ImplicitLocOpBuilder &b;
  MhaOp op;
  Type f32, elem;
  int64_t embed, heads, headDim;
  SmallVector<Value> buffers;
};

Value MhaDecomposer::emitBatch(Value batch, Value output) {
  ValueRange weights = op.getInWeights();
  Value weightQ, weightK, weightV;
  if (op.isPacked()) {
    weightQ = rowsOf(weights[0], 0, embed);
    weightK = rowsOf(weights[0], embed, embed);
    weightV = rowsOf(weights[0], 2 * embed, embed);
  } else {
    weightQ = weights[0];
    weightK = weights[1];
    weightV = weights[2];
  }
  Value biasQ, biasK, biasV;
  if (Value bias = op.getInBias()) {
    biasQ = rowsOf(bias, 0, embed);
    biasK = rowsOf(bias, embed, embed);
    biasV = rowsOf(bias, 2 * embed, embed);
  }
  Value q = splitHeads(project(batchOf(op.getQuery(), batch), weightQ, biasQ));
  Value k = splitHeads(project(batchOf(op.getKey(), batch), weightK, biasK));
  Value v = splitHeads(project(batchOf(op.getValue(), batch), weightV, biasV));
  Value mask = op.getMask() ? maskOf(op.getMask(), batch) : Value();

  auto qType = cast<RankedTensorType>(q.getType());
  SmallVector<Value> dynamicRows;
  if (qType.isDynamicDim(2))
    dynamicRows.push_back(tensor::DimOp::create(b, q, 2));
  Value init = heapTensor(qType.getShape(), dynamicRows, elem);
  AttentionAttributes attributes;
  attributes.scale = op.getScaleAttr();
  attributes.causal = op.getCausalAttr();
  attributes.alignment = op.getAlignmentAttr();
  attributes.window = op.getWindowAttr();
  attributes.softcap = op.getSoftcapAttr();
  auto attention =
      AttentionOp::create(b, b.getLoc(), TypeRange{qType}, q, k, v, mask,
                          Value(), Value(), ValueRange{init}, attributes);

  Value rows = batchOf(output, batch);
  Value y = project(mergeHeads(attention.getResult(0)), op.getOutWeight(),
                    op.getOutBias(), rows);
  for (Value buffer : buffers)
    memref::DeallocOp::create(b, buffer);
  buffers.clear();
  return y;
}

Value MhaDecomposer::emit() {
  Value output = op.getOutput();
  auto forall =
      scf::ForallOp::create(b, ArrayRef<OpFoldResult>{b.getIndexAttr(0)},
                            ArrayRef<OpFoldResult>{size(op.getQuery(), 0)},
                            ArrayRef<OpFoldResult>{b.getIndexAttr(1)},
                            ValueRange{output}, std::nullopt);
  forall->setAttr(kLayerBatchesAttrName, b.getUnitAttr());
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(forall.getTerminator());
  Value shared = forall.getRegionIterArgs()[0];
  Value y = emitBatch(forall.getInductionVars()[0], shared);
  OpFoldResult rows = size(shared, 1);
  b.setInsertionPointToStart(forall.getTerminator().getBody());
  auto type = cast<ShapedType>(output.getType());
  tensor::ParallelInsertSliceOp::create(
      b, y, shared,
      ArrayRef<OpFoldResult>{forall.getInductionVars()[0], b.getIndexAttr(0),
                             b.getIndexAttr(0)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1), rows,
                             b.getIndexAttr(type.getDimSize(2))},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                             b.getIndexAttr(1)});
  return forall.getResult(0);
}

struct AttnDecomposeMhaPass
    : public mlir::attn::impl::AttnDecomposeMhaPassBase<AttnDecomposeMhaPass> {
  void runOnOperation() override {
    SmallVector<MhaOp> ops;
    getOperation().walk([&](MhaOp op) { ops.push_back(op); });
    for (MhaOp op : ops) {
      ImplicitLocOpBuilder b(op.getLoc(), op);
      Value result = MhaDecomposer(b, op).emit();
      op.getResult().replaceAllUsesWith(result);
      op.erase();
    }
  }
};

} // namespace
