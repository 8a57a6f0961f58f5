//===- AttnDialect.h - The attn dialect -------------------------*- C++ -*-===//
//
// Declares the attn dialect and its attributes. Include AttnOps.h for the
// operations.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_DIALECT_ATTNDIALECT_H
#define ATTN_DIALECT_ATTNDIALECT_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include <optional>

#include "dialect/AttnDialect.h.inc"
#include "dialect/AttnEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/AttnAttrs.h.inc"

namespace mlir {
class DialectRegistry;
namespace attn {
/// Attaches the bufferization interface of attn.online_attention (its memref
/// form is what the vector lowering consumes).
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);
} // namespace attn
} // namespace mlir

#endif // ATTN_DIALECT_ATTNDIALECT_H
