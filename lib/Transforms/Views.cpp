//===- Views.cpp - Memref views shared by attn's CPU passes ---------------===//
#include "lib/Transforms/Views.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

Value mlir::attn::unitInnerStrideView(OpBuilder &b, Location loc,
                                      Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  int64_t rank = type.getRank();
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  SmallVector<int64_t> strides(rank - 1, ShapedType::kDynamic);
  strides.push_back(1);
  auto layout =
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, strides);
  SmallVector<OpFoldResult> sizes, unitStrides;
  for (int64_t d = 0; d < rank; ++d) {
    sizes.push_back(
        type.isDynamicDim(d)
            ? OpFoldResult(memref::DimOp::create(b, loc, memref, d).getResult())
            : OpFoldResult(b.getIndexAttr(type.getDimSize(d))));
    unitStrides.push_back(d < rank - 1 ? OpFoldResult(meta.getStrides()[d])
                                       : OpFoldResult(b.getIndexAttr(1)));
  }
  return memref::ReinterpretCastOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType(), layout),
      memref, OpFoldResult(meta.getOffset()), sizes, unitStrides);
}
