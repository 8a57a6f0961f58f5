//===- Views.h - Memref views shared by attn's CPU passes -------*- C++ -*-===//
#ifndef ATTN_TRANSFORMS_VIEWS_H
#define ATTN_TRANSFORMS_VIEWS_H

#include "mlir/IR/Builders.h"

namespace mlir {
namespace attn {

/// `memref` seen with a static unit innermost stride (its other strides,
/// sizes and offset as they are): valid where its innermost stride is 1 at
/// run time, which the caller checks. Vector loads and stores need it.
Value unitInnerStrideView(OpBuilder &b, Location loc, Value memref);

} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_VIEWS_H
