//===- AttnOps.cpp - Operations of the attn dialect -----------------------===//
//
// Verifiers, tiling and canonicalization of attn.attention and
// attn.online_attention. Both ops share one operand layout (query, key,
// value, optional mask and diagonal) and one set of attributes, so their
// verification and their slicing for tiles live in shared helpers here: the
// rules of docs/spec.md are stated once.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttnOps.h"
#include "lib/Support/Limits.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/InterleavedRange.h"

#include <cmath>
#include <string>

using namespace mlir;
using namespace mlir::attn;

//===----------------------------------------------------------------------===//
// Assembly: the result types, and what else may stand where they do
//===----------------------------------------------------------------------===//

/// `-> types` where the outs are tensors, nothing where they are memrefs.
/// On tensors, anything else there is a clause the format did not take
/// (misspelled, or out of order), which is said so, where MLIR's parser
/// would go on to "cannot name an operation with no results".
static ParseResult parseResultTypes(OpAsmParser &parser,
                                    SmallVectorImpl<Type> &types,
                                    TypeRange outs) {
  if (succeeded(parser.parseOptionalArrow()))
    return parser.parseTypeList(types);
  if (llvm::none_of(outs, llvm::IsaPred<TensorType>))
    return success(); // on memrefs: no results
  llvm::SMLoc at = parser.getCurrentLocation();
  StringRef keyword;
  std::string found = succeeded(parser.parseOptionalKeyword(&keyword))
                          ? "'" + keyword.str() + "'"
                          : std::string("something else");
  return parser.emitError(at)
         << "expected '->' and the result types (the outs are tensors), "
            "found "
         << found
         << "; after outs(...) come, each optional and in this order, "
            "causal, align(...), window<...>, scale(...), softcap(...) and "
            "an attribute dictionary";
}
static ParseResult parseResultTypes(OpAsmParser &parser,
                                    SmallVectorImpl<Type> &types, Type acc) {
  return parseResultTypes(parser, types, TypeRange(acc));
}

static void printResultTypes(OpAsmPrinter &printer, Operation *,
                             TypeRange types, TypeRange) {
  if (types.empty())
    return;
  printer << "-> ";
  llvm::interleaveComma(types, printer);
}
static void printResultTypes(OpAsmPrinter &printer, Operation *op,
                             TypeRange types, Type acc) {
  printResultTypes(printer, op, types, TypeRange(acc));
}

/// The modifiers, each after its keyword: `score_mod {...}` then
/// `mask_mod {...}`, both optional (the optional group that the directive
/// anchors is absent when neither is there). Each keyword's region must
/// have its arguments, since they tell the two apart in the op.
static OptionalParseResult
parseModifiers(OpAsmParser &parser,
               SmallVectorImpl<std::unique_ptr<Region>> &regions) {
  for (auto [keyword, arguments] :
       {std::pair<StringRef, unsigned>{"score_mod", 5}, {"mask_mod", 4}}) {
    if (failed(parser.parseOptionalKeyword(keyword)))
      continue;
    llvm::SMLoc at = parser.getCurrentLocation();
    auto region = std::make_unique<Region>();
    if (parser.parseRegion(*region, /*arguments=*/{}))
      return failure();
    if (region->empty() || region->front().getNumArguments() != arguments)
      return parser.emitError(at)
             << keyword << " takes "
             << (arguments == 5 ? "(score: f32, b, h, q_idx, kv_idx: index)"
                                : "(b, h, q_idx, kv_idx: index)")
             << " as its block's arguments";
    regions.push_back(std::move(region));
  }
  if (regions.empty())
    return std::nullopt; // neither: the optional group is absent
  return success();
}

static void printModifiers(OpAsmPrinter &printer, Operation *op,
                           MutableArrayRef<Region> regions) {
  llvm::interleave(
      regions,
      [&](Region &region) {
        printer << (&region == scoreModOf(op) ? "score_mod " : "mask_mod ");
        printer.printRegion(region, /*printEntryBlockArgs=*/true);
      },
      [&] { printer << " "; });
}

#define GET_OP_CLASSES
#include "dialect/AttnOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Verification shared by both ops
//===----------------------------------------------------------------------===//

namespace {

std::string dimToString(int64_t dim) {
  return ShapedType::isDynamic(dim) ? "?" : std::to_string(dim);
}

bool dimsCompatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

bool isAttentionElementType(Type type) {
  return type.isF32() || type.isF16() || type.isBF16();
}

/// Checks that `type` is ranked with `rank` dims; `layout` names them.
LogicalResult verifyRank(Operation *op, StringRef name, Type type, int64_t rank,
                         StringRef layout) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasRank())
    return op->emitOpError() << name << " must be a ranked " << layout
                             << " tensor, found " << type;
  if (shaped.getRank() != rank)
    return op->emitOpError() << name << " must have rank " << rank << " ("
                             << layout << "), found rank " << shaped.getRank();
  return success();
}

/// Checks one dim against the size it must equal.
LogicalResult verifyDim(Operation *op, StringRef name, ShapedType type,
                        unsigned dim, StringRef dimName, int64_t expected,
                        StringRef expectedFrom) {
  int64_t found = type.getDimSize(dim);
  if (dimsCompatible(found, expected))
    return success();
  return op->emitOpError() << name << " dim " << dim << " (" << dimName
                           << ") must equal " << expectedFrom << " = "
                           << dimToString(expected) << ", found "
                           << dimToString(found);
}

/// The attributes and operands that both ops carry.
struct AttentionView {
  Operation *op;
  Value query, key, value, mask, diagonal;
  bool causal;
  std::optional<DiagonalAlignment> alignment;
  WindowAttr window;
  std::optional<float> scale, softcap;
  Value dropoutP, dropoutSeed;
  ValueRange origin;
  MutableArrayRef<Region> modifiers;
  ValueRange captures;
};

/// V of an attention-like op; the weights op reads none.
template <typename OpTy> Value valueOperand(OpTy op) { return op.getValue(); }
Value valueOperand(AttentionWeightsOp) { return {}; }

template <typename OpTy> AttentionView viewOf(OpTy op) {
  std::optional<float> scale, softcap;
  if (auto attr = op.getScaleAttr())
    scale = attr.getValueAsDouble();
  if (auto attr = op.getSoftcapAttr())
    softcap = attr.getValueAsDouble();
  return {op.getOperation(),
          op.getQuery(),
          op.getKey(),
          valueOperand(op),
          op.getMask(),
          op.getDiagonal(),
          op.getCausal(),
          op.getAlignment(),
          op.getWindowAttr(),
          scale,
          softcap,
          op.getDropoutP(),
          op.getDropoutSeed(),
          op.getOrigin(),
          op.getModifiers(),
          op.getCaptures()};
}

/// Checks a modifier region: its block's arguments (the score when
/// `score`, then b, h, i, j), its ops (scalar arith and math, attn.captured)
/// and what it yields (`yields`).
LogicalResult verifyModifier(Operation *op, Region &region, StringRef name,
                             bool score, Type yields) {
  Block &block = region.front();
  MLIRContext *ctx = op->getContext();
  SmallVector<Type> expected;
  if (score)
    expected.push_back(Float32Type::get(ctx));
  expected.append(4, IndexType::get(ctx));
  if (block.getArgumentTypes() != TypeRange(expected)) {
    std::string types;
    llvm::raw_string_ostream os(types);
    llvm::interleaveComma(block.getArgumentTypes(), os);
    return op->emitOpError()
           << name << " takes "
           << (score ? "(score: f32, b, h, q_idx, kv_idx: index)"
                     : "(b, h, q_idx, kv_idx: index)")
           << ", found (" << types << ")";
  }
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield || yield.getValues().size() != 1 ||
      yield.getValues()[0].getType() != yields)
    return op->emitOpError() << name << " must end in attn.yield of one "
                             << yields;
  for (Operation &inner : block.without_terminator()) {
    StringRef dialect = inner.getName().getDialectNamespace();
    if (!isa<CapturedOp>(inner) && dialect != "arith" && dialect != "math")
      return inner.emitOpError()
             << "is not allowed in " << name
             << ": a modifier holds scalar arith and math ops and "
                "attn.captured reads";
    if (inner.getNumRegions() != 0)
      return inner.emitOpError() << "is not allowed in " << name
                                 << ": a modifier holds no regions";
    for (Type type : inner.getResultTypes())
      if (!type.isIntOrIndexOrFloat())
        return inner.emitOpError()
               << "in " << name << " must compute scalars, found " << type;
  }
  return success();
}

/// Checks the modifiers and their captured operands.
LogicalResult verifyModifiers(const AttentionView &view) {
  Operation *op = view.op;
  MLIRContext *ctx = op->getContext();
  // At most a score_mod then a mask_mod, told apart by their arguments.
  if (view.modifiers.size() > 2)
    return op->emitOpError() << "takes at most two modifiers (a score_mod "
                                "and a mask_mod), found "
                             << view.modifiers.size();
  Region *scoreMod = scoreModOf(op), *maskMod = maskModOf(op);
  unsigned known = (scoreMod ? 1 : 0) + (maskMod ? 1 : 0);
  if (known != view.modifiers.size() ||
      (scoreMod && maskMod && scoreMod != &view.modifiers[0]))
    return op->emitOpError(
        "modifiers must be a score_mod (5 block arguments) then a mask_mod "
        "(4), each at most once");
  if ((scoreMod && failed(verifyModifier(op, *scoreMod, "score_mod",
                                         /*score=*/true,
                                         Float32Type::get(ctx)))) ||
      (maskMod && failed(verifyModifier(op, *maskMod, "mask_mod",
                                        /*score=*/false,
                                        IntegerType::get(ctx, 1)))))
    return failure();
  llvm::SmallBitVector read(view.captures.size());
  if (Attribute attr = op->getAttr(kBlockMaskAttrName)) {
    auto table = dyn_cast<DenseI64ArrayAttr>(attr);
    if (!table || table.size() != 3 || table[1] < 1 || table[2] < 1)
      return op->emitOpError()
             << kBlockMaskAttrName
             << " must be array<i64: capture, query_block, key_block> with "
                "block sizes >= 1, found "
             << attr;
    if (table[0] < 0 || table[0] >= static_cast<int64_t>(read.size()))
      return op->emitOpError()
             << kBlockMaskAttrName << " names capture " << table[0]
             << ", but the op has " << read.size() << " captures(...)";
    auto type = cast<ShapedType>(view.captures[table[0]].getType());
    if (type.getRank() != 4 || !type.getElementType().isInteger(32))
      return op->emitOpError()
             << "the block mask's table (capture " << table[0]
             << ") must be a rank-4 i32 tensor [B, Hq, query blocks, key "
                "blocks], found "
             << type;
    read.set(table[0]);
  }
  if (view.captures.empty())
    return success();
  if (view.modifiers.empty() && read.none())
    return op->emitOpError("captures(...) are read by a score_mod or "
                           "mask_mod, and the op has neither");
  for (Region &region : view.modifiers)
    region.walk([&](CapturedOp captured) {
      if (captured.getCapture() >= 0 &&
          static_cast<uint64_t>(captured.getCapture()) < read.size())
        read.set(captured.getCapture());
    });
  for (auto [index, capture] : llvm::enumerate(view.captures)) {
    auto type = cast<ShapedType>(capture.getType());
    Type element = type.getElementType();
    if (type.getRank() < 1 || type.getRank() > 4 ||
        !(element.isF32() || element.isInteger(8) || element.isInteger(32) ||
          element.isInteger(64)))
      return op->emitOpError()
             << "capture " << index
             << " must be a tensor of rank 1 to 4 of f32, i8 (bools, a byte "
                "each), i32 or i64, found "
             << type;
    if (!read.test(index))
      return op->emitOpError()
             << "capture " << index << " is never read (attn.captured "
             << index << " [...]) by the modifiers";
  }
  return success();
}

/// Checks Q, K, V (where the op reads one), the mask and the attributes:
/// every rule of the spec that does not involve the outputs.
/// The rules of the band (causal, window and their diagonal) and of the
/// scale and soft cap, which every op that attends by them shares.
LogicalResult verifyBandAndScale(Operation *op, bool causal,
                                 std::optional<DiagonalAlignment> alignment,
                                 WindowAttr window, bool hasDiagonal,
                                 std::optional<float> scale,
                                 std::optional<float> softcap) {
  if (window) {
    if (!window.getLeft() && !window.getRight())
      return op->emitOpError(
          "window must bound at least one side (left or right)");
    if (window.getLeft() && *window.getLeft() < 0)
      return op->emitOpError()
             << "window left must be >= 0, found " << *window.getLeft();
    if (window.getRight() && *window.getRight() < 0)
      return op->emitOpError()
             << "window right must be >= 0, found " << *window.getRight();
  }
  bool needsDiagonal = causal || window;
  if (needsDiagonal && !alignment && !hasDiagonal)
    return op->emitOpError(
        "causal masking and windows need the diagonal: set align(top_left) "
        "or align(bottom_right), or a diagonal operand");
  if (needsDiagonal && alignment && hasDiagonal)
    return op->emitOpError(
        "takes either align(...) or a diagonal operand, not both");
  if (!needsDiagonal && (alignment || hasDiagonal))
    return op->emitOpError("align(...) and diagonal(...) need causal or a "
                           "window; found neither");

  if (scale && !std::isfinite(*scale))
    return op->emitOpError() << "scale must be finite, found " << *scale;
  if (softcap && !(std::isfinite(*softcap) && *softcap > 0))
    return op->emitOpError()
           << "softcap must be finite and > 0, found " << *softcap;
  return success();
}

LogicalResult verifyAttentionInputs(const AttentionView &view) {
  Operation *op = view.op;
  // Without V (the weights op) its checks run on K, which has what they ask.
  Value value = view.value ? view.value : view.key;
  if (failed(
          verifyRank(op, "query", view.query.getType(), 4, "[B, Hq, Sq, D]")) ||
      failed(verifyRank(op, "key", view.key.getType(), 4, "[B, Hkv, Sk, D]")) ||
      failed(verifyRank(op, "value", value.getType(), 4, "[B, Hkv, Sk, Dv]")))
    return failure();
  auto q = cast<ShapedType>(view.query.getType());
  auto k = cast<ShapedType>(view.key.getType());
  auto v = cast<ShapedType>(value.getType());

  Type elementType = q.getElementType();
  if (!isAttentionElementType(elementType))
    return op->emitOpError()
           << "query element type must be f32, f16 or bf16, found "
           << elementType;
  if (k.getElementType() != elementType)
    return op->emitOpError()
           << "key element type must equal the query's (" << elementType
           << "), found " << k.getElementType();
  if (v.getElementType() != elementType)
    return op->emitOpError()
           << "value element type must equal the query's (" << elementType
           << "), found " << v.getElementType();

  // Head dims are static: they fix the kernel's register blocking.
  if (q.isDynamicDim(3))
    return op->emitOpError("query dim 3 (D) must be static, found ?");
  if (k.isDynamicDim(3))
    return op->emitOpError("key dim 3 (D) must be static, found ?");
  if (v.isDynamicDim(3))
    return op->emitOpError("value dim 3 (Dv) must be static, found ?");
  if (q.getDimSize(3) < 1)
    return op->emitOpError()
           << "query dim 3 (D) must be at least 1, found " << q.getDimSize(3);
  if (v.getDimSize(3) < 1)
    return op->emitOpError()
           << "value dim 3 (Dv) must be at least 1, found " << v.getDimSize(3);
  // Past this the lowering would run for minutes and gigabytes.
  if (q.getDimSize(3) > ::attn::kMaxHeadDim)
    return op->emitOpError()
           << "query dim 3 (D) must be at most " << ::attn::kMaxHeadDim
           << ", found " << q.getDimSize(3);
  if (v.getDimSize(3) > ::attn::kMaxHeadDim)
    return op->emitOpError()
           << "value dim 3 (Dv) must be at most " << ::attn::kMaxHeadDim
           << ", found " << v.getDimSize(3);

  if (failed(verifyDim(op, "key", k, 0, "B", q.getDimSize(0), "query's B")) ||
      failed(verifyDim(op, "key", k, 3, "D", q.getDimSize(3), "query's D")) ||
      failed(verifyDim(op, "value", v, 0, "B", q.getDimSize(0), "query's B")) ||
      failed(
          verifyDim(op, "value", v, 1, "Hkv", k.getDimSize(1), "key's Hkv")) ||
      failed(verifyDim(op, "value", v, 2, "Sk", k.getDimSize(2), "key's Sk")))
    return failure();

  int64_t hq = q.getDimSize(1), hkv = k.getDimSize(1);
  if (hkv == 0)
    return op->emitOpError("key dim 1 (Hkv) must be at least 1, found 0");
  if (!ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv) &&
      hq % hkv != 0)
    return op->emitOpError()
           << "query heads (Hq = " << hq
           << ") must be a multiple of key/value heads (Hkv = " << hkv
           << ") for grouped-query attention";

  if (view.mask) {
    if (failed(verifyRank(op, "mask", view.mask.getType(), 4,
                          "[Bm, Hm, Sqm, Sk]")))
      return failure();
    auto m = cast<ShapedType>(view.mask.getType());
    Type maskElement = m.getElementType();
    if (!maskElement.isInteger(1) && maskElement != elementType)
      return op->emitOpError()
             << "mask element type must be i1 (keep-mask) or the query's "
             << elementType << " (additive bias), found " << maskElement;
    static const char *names[] = {"B", "Hq", "Sq"};
    for (unsigned dim = 0; dim < 3; ++dim) {
      int64_t size = m.getDimSize(dim), full = q.getDimSize(dim);
      if (size == 1 || dimsCompatible(size, full))
        continue;
      return op->emitOpError()
             << "mask dim " << dim << " must be 1 (broadcast) or the query's "
             << names[dim] << " = " << dimToString(full) << ", found " << size;
    }
    if (failed(verifyDim(op, "mask", m, 3, "Sk", k.getDimSize(2), "key's Sk")))
      return failure();
  }

  if (failed(verifyBandAndScale(op, view.causal, view.alignment, view.window,
                                static_cast<bool>(view.diagonal), view.scale,
                                view.softcap)))
    return failure();
  if (static_cast<bool>(view.dropoutP) != static_cast<bool>(view.dropoutSeed))
    return op->emitOpError("dropout takes a probability and a seed");
  if (!view.origin.empty() && view.origin.size() != 4)
    return op->emitOpError()
           << "origin takes the global (b, h, i, j) of element (0, 0, 0, 0): "
              "4 indices, found "
           << view.origin.size();
  return verifyModifiers(view);
}

/// Checks that `type` is a rank-`rank` f32 shaped type whose leading dims
/// are [B, Hq, Sq] of the query (and Dv of the value for rank 4).
LogicalResult verifyStateOrOutput(Operation *op, StringRef name, Type type,
                                  Type expectedElement, const AttentionView &v,
                                  bool withValueDim) {
  StringRef layout = withValueDim ? "[B, Hq, Sq, Dv]" : "[B, Hq, Sq]";
  if (failed(verifyRank(op, name, type, withValueDim ? 4 : 3, layout)))
    return failure();
  auto shaped = cast<ShapedType>(type);
  if (shaped.getElementType() != expectedElement)
    return op->emitOpError()
           << name << " element type must be " << expectedElement << ", found "
           << shaped.getElementType();
  auto q = cast<ShapedType>(v.query.getType());
  static const char *names[] = {"B", "Hq", "Sq"};
  for (unsigned dim = 0; dim < 3; ++dim)
    if (failed(verifyDim(op, name, shaped, dim, names[dim], q.getDimSize(dim),
                         (Twine("query's ") + names[dim]).str())))
      return failure();
  if (withValueDim &&
      failed(verifyDim(op, name, shaped, 3, "Dv",
                       cast<ShapedType>(v.value.getType()).getDimSize(3),
                       "value's Dv")))
    return failure();
  return success();
}

float effectiveScale(std::optional<float> scale, Value query) {
  if (scale)
    return *scale;
  int64_t d = cast<ShapedType>(query.getType()).getDimSize(3);
  return 1.0f / std::sqrt(static_cast<float>(d));
}

} // namespace

namespace {
/// (left, right) of a causal or windowed op: see getBandOffsets.
std::pair<std::optional<int64_t>, std::optional<int64_t>>
bandOffsets(const AttentionView &view) {
  std::optional<int64_t> left, right;
  if (WindowAttr window = view.window) {
    left = window.getLeft();
    right = window.getRight();
  }
  if (view.causal)
    right = right ? std::min<int64_t>(*right, 0) : 0;
  return {left, right};
}

/// Memory effects of an op on memrefs: reads every memref operand, writes
/// its outs.
void memrefEffects(
    DestinationStyleOpInterface op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    effects.emplace_back(MemoryEffects::Read::get(), &operand,
                         SideEffects::DefaultResource::get());
    if (op.isDpsInit(&operand))
      effects.emplace_back(MemoryEffects::Write::get(), &operand,
                           SideEffects::DefaultResource::get());
  }
}

/// Checks that an op's operands are all tensors or all memrefs, that it has
/// one result per outs operand on tensors (none on memrefs), each of its
/// outs operand's type.
LogicalResult verifyTensorOrMemRefForm(DestinationStyleOpInterface op) {
  bool tensors = isa<TensorType>(op.getDpsInits().front().getType());
  for (Value operand : op->getOperands()) {
    if (!isa<ShapedType>(operand.getType()))
      continue; // the diagonal, dropout's scalars, the origin
    if (isa<TensorType>(operand.getType()) != tensors)
      return op->emitOpError("operands must be all tensors or all memrefs");
  }
  size_t expectedResults = tensors ? op.getNumDpsInits() : 0;
  if (op->getNumResults() != expectedResults)
    return op->emitOpError()
           << "must have " << expectedResults
           << " results (one per outs tensor), found " << op->getNumResults();
  for (auto [result, init] : llvm::zip(op->getResults(), op.getDpsInits()))
    if (result.getType() != init.getType())
      return op->emitOpError()
             << "result type must equal its outs tensor's " << init.getType()
             << ", found " << result.getType();
  return success();
}
} // namespace

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::verify() {
  AttentionView view = viewOf(*this);
  if (failed(verifyAttentionInputs(view)))
    return failure();
  if (getOutputs().empty() || getOutputs().size() > 2)
    return emitOpError() << "outs must hold the output and optionally the "
                            "log-sum-exp (1 or 2 tensors), found "
                         << getOutputs().size();
  Type elementType = getQuery().getType().getElementType();
  if (failed(verifyStateOrOutput(*this, "output", getOutput().getType(),
                                 elementType, view, /*withValueDim=*/true)))
    return failure();
  if (Value lse = getLse())
    if (failed(verifyStateOrOutput(*this, "lse", lse.getType(),
                                   Float32Type::get(getContext()), view,
                                   /*withValueDim=*/false)))
      return failure();
  if (Value sinks = getSinks()) {
    // One f32 logit per query head (docs/spec.md, "Attention sinks").
    auto type = cast<RankedTensorType>(sinks.getType());
    int64_t heads = getQuery().getType().getDimSize(1);
    if (type.getRank() != 1 || !type.getElementType().isF32() ||
        !dimsCompatible(type.getDimSize(0), heads))
      return emitOpError() << "sinks must be tensor<" << dimToString(heads)
                           << "xf32> (one logit per query head), found "
                           << type;
  }
  if (getResults().size() != getOutputs().size())
    return emitOpError() << "must have one result per outs tensor ("
                         << getOutputs().size() << "), found "
                         << getResults().size();
  for (auto [index, pair] :
       llvm::enumerate(llvm::zip(getResults(), getOutputs())))
    if (std::get<0>(pair).getType() != std::get<1>(pair).getType())
      return emitOpError() << "result " << index << " type must equal its outs "
                           << "tensor's " << std::get<1>(pair).getType()
                           << ", found " << std::get<0>(pair).getType();
  return success();
}

float AttentionOp::getEffectiveScale() {
  return effectiveScale(viewOf(*this).scale, getQuery());
}

//===----------------------------------------------------------------------===//
// OnlineAttentionOp
//===----------------------------------------------------------------------===//

LogicalResult OnlineAttentionOp::verify() {
  AttentionView view = viewOf(*this);
  if (failed(verifyAttentionInputs(view)))
    return failure();
  Type f32 = Float32Type::get(getContext());
  if (failed(verifyStateOrOutput(*this, "acc", getAcc().getType(), f32, view,
                                 /*withValueDim=*/true)) ||
      failed(verifyStateOrOutput(*this, "max", getMax().getType(), f32, view,
                                 /*withValueDim=*/false)) ||
      failed(verifyStateOrOutput(*this, "sum", getSum().getType(), f32, view,
                                 /*withValueDim=*/false)))
    return failure();
  return verifyTensorOrMemRefForm(*this);
}

float OnlineAttentionOp::getEffectiveScale() {
  return effectiveScale(viewOf(*this).scale, getQuery());
}

std::pair<std::optional<int64_t>, std::optional<int64_t>>
OnlineAttentionOp::getBandOffsets() {
  return bandOffsets(viewOf(*this));
}

void OnlineAttentionOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  memrefEffects(*this, effects);
}

//===----------------------------------------------------------------------===//
// AttentionBackwardOp
//===----------------------------------------------------------------------===//

namespace {
/// Checks that `type` (a gradient) has the rank, element type and sizes of
/// `like` (what it is the gradient of).
LogicalResult verifyGradientOf(Operation *op, StringRef name, Type type,
                               StringRef likeName, Type like,
                               StringRef layout) {
  auto likeType = cast<ShapedType>(like);
  if (failed(verifyRank(op, name, type, 4, layout)))
    return failure();
  auto shaped = cast<ShapedType>(type);
  if (shaped.getElementType() != likeType.getElementType())
    return op->emitOpError() << name << " element type must equal the "
                             << likeName << "'s (" << likeType.getElementType()
                             << "), found " << shaped.getElementType();
  for (unsigned dim = 0; dim < 4; ++dim)
    if (!dimsCompatible(shaped.getDimSize(dim), likeType.getDimSize(dim)))
      return op->emitOpError()
             << name << " dim " << dim << " must equal the " << likeName
             << "'s " << dimToString(likeType.getDimSize(dim)) << ", found "
             << dimToString(shaped.getDimSize(dim));
  return success();
}
} // namespace

ScoreDerivative mlir::attn::scoreDerivativeOf(Operation *op) {
  if (llvm::none_of(op->getResultTypes(),
                    [](Type type) { return isa<FloatType>(type); }))
    return ScoreDerivative::Zero;
  static const llvm::StringSet<> generated = {
      "arith.addf",    "arith.subf",    "arith.mulf",     "arith.divf",
      "arith.negf",    "arith.select",  "arith.maximumf", "arith.minimumf",
      "arith.maxnumf", "arith.minnumf", "arith.extf",     "arith.truncf",
      "math.tanh",     "math.exp",      "math.exp2",      "math.expm1",
      "math.log",      "math.log2",     "math.log1p",     "math.sqrt",
      "math.rsqrt",    "math.absf",     "math.powf",      "math.fma",
      "math.sin",      "math.cos",      "math.atan",      "math.erf"};
  static const llvm::StringSet<> zero = {
      "math.floor", "math.ceil",    "math.round",   "math.roundeven",
      "math.trunc", "arith.sitofp", "arith.uitofp", "attn.captured"};
  StringRef name = op->getName().getStringRef();
  if (generated.contains(name))
    return ScoreDerivative::Generated;
  if (zero.contains(name))
    return ScoreDerivative::Zero;
  return ScoreDerivative::Unknown;
}

Operation *mlir::attn::undifferentiableScoreOp(Region &scoreMod) {
  Block &block = scoreMod.front();
  // The float values that vary with the score.
  llvm::DenseSet<Value> varying = {block.getArgument(0)};
  for (Operation &op : block.without_terminator()) {
    if (llvm::none_of(op.getOperands(),
                      [&](Value v) { return varying.contains(v); }))
      continue;
    switch (scoreDerivativeOf(&op)) {
    case ScoreDerivative::Unknown:
      return &op;
    case ScoreDerivative::Zero:
      break;
    case ScoreDerivative::Generated:
      for (Value result : op.getResults())
        if (isa<FloatType>(result.getType()))
          varying.insert(result);
    }
  }
  return nullptr;
}

LogicalResult AttentionBackwardOp::verify() {
  AttentionView view = viewOf(*this);
  if (failed(verifyAttentionInputs(view)))
    return failure();
  if (Region *scoreMod = scoreModOf(*this))
    if (Operation *op = undifferentiableScoreOp(*scoreMod))
      return op->emitOpError()
             << "in the score_mod of attn.attention_backward has no "
                "derivative that the compiler generates (arithmetic, select, "
                "min/max, tanh, exp, log, sqrt, rsqrt, abs, pow, fma, sin, "
                "cos, atan, erf; floor/ceil/round count as constant)";
  Type elementType = cast<ShapedType>(getQuery().getType()).getElementType();
  Type f32 = Float32Type::get(getContext());
  if (failed(verifyStateOrOutput(*this, "output", getOutput().getType(),
                                 elementType, view, /*withValueDim=*/true)) ||
      failed(verifyStateOrOutput(*this, "lse", getLse().getType(), f32, view,
                                 /*withValueDim=*/false)) ||
      failed(verifyStateOrOutput(*this, "grad_output",
                                 getGradOutput().getType(), elementType, view,
                                 /*withValueDim=*/true)))
    return failure();
  if (Value gradLse = getGradLse())
    if (failed(verifyStateOrOutput(*this, "grad_lse", gradLse.getType(), f32,
                                   view, /*withValueDim=*/false)))
      return failure();
  if (failed(verifyGradientOf(*this, "grad_query", getGradQuery().getType(),
                              "query", getQuery().getType(),
                              "[B, Hq, Sq, D]")) ||
      failed(verifyGradientOf(*this, "grad_key", getGradKey().getType(), "key",
                              getKey().getType(), "[B, Hkv, Sk, D]")) ||
      failed(verifyGradientOf(*this, "grad_value", getGradValue().getType(),
                              "value", getValue().getType(),
                              "[B, Hkv, Sk, Dv]")))
    return failure();
  if (Value gradMask = getGradMask()) {
    // dS of every score: [B, Hq, Sq, Sk] f32 whatever the mask broadcasts.
    Value mask = getMask();
    if (!mask || !isa<FloatType>(
                     cast<ShapedType>(mask.getType()).getElementType()))
      return emitOpError("grad_mask is the gradient of an additive float "
                         "mask, and the op has none");
    auto type = cast<ShapedType>(gradMask.getType());
    auto query = cast<ShapedType>(getQuery().getType());
    auto key = cast<ShapedType>(getKey().getType());
    if (type.getRank() != 4 || !type.getElementType().isF32() ||
        !dimsCompatible(type.getDimSize(0), query.getDimSize(0)) ||
        !dimsCompatible(type.getDimSize(1), query.getDimSize(1)) ||
        !dimsCompatible(type.getDimSize(2), query.getDimSize(2)) ||
        !dimsCompatible(type.getDimSize(3), key.getDimSize(2)))
      return emitOpError()
             << "grad_mask must be f32 [B, Hq, Sq, Sk] = ["
             << dimToString(query.getDimSize(0)) << ", "
             << dimToString(query.getDimSize(1)) << ", "
             << dimToString(query.getDimSize(2)) << ", "
             << dimToString(key.getDimSize(2)) << "], found " << type;
  }
  if (failed(verifyGradCaptures()))
    return failure();
  return verifyTensorOrMemRefForm(*this);
}

LogicalResult AttentionBackwardOp::verifyGradCaptures() {
  ValueRange partials = getGradCaptures();
  ArrayRef<int64_t> numbers;
  if (auto attr = getGradCaptureNumbersAttr())
    numbers = attr.asArrayRef();
  if (numbers.size() != partials.size())
    return emitOpError() << "grad_captures lists " << numbers.size()
                         << " capture numbers for " << partials.size()
                         << " tensors";
  if (partials.empty())
    return success();
  if (!scoreModOf(*this))
    return emitOpError("grad_captures are gradients through the score_mod, "
                       "and the op has none");
  llvm::SmallDenseSet<int64_t> read = scoreModReads(*this);
  auto query = cast<ShapedType>(getQuery().getType());
  auto key = cast<ShapedType>(getKey().getType());
  int64_t previous = -1;
  for (auto [number, partial] : llvm::zip(numbers, partials)) {
    if (number <= previous)
      return emitOpError() << "grad_captures numbers must increase, found "
                           << number << " after " << previous;
    previous = number;
    if (number >= static_cast<int64_t>(getCaptures().size()))
      return emitOpError() << "grad_captures names capture " << number
                           << " but the op captures " << getCaptures().size()
                           << " tensors";
    auto capture = cast<ShapedType>(getCaptures()[number].getType());
    if (!capture.getElementType().isF32())
      return emitOpError() << "grad_captures: capture " << number << " is "
                           << capture << ", and only an f32 one has a "
                           << "gradient";
    if (!read.contains(number))
      return emitOpError() << "grad_captures: the score_mod reads no element "
                           << "of capture " << number;
    // [B, Hkv, <the capture's shape>] f32: one partial per work item.
    auto type = cast<ShapedType>(partial.getType());
    bool matches = type.getElementType().isF32() &&
                   type.getRank() == capture.getRank() + 2 &&
                   dimsCompatible(type.getDimSize(0), query.getDimSize(0)) &&
                   dimsCompatible(type.getDimSize(1), key.getDimSize(1));
    for (int64_t d = 0; matches && d < capture.getRank(); ++d)
      matches = dimsCompatible(type.getDimSize(d + 2), capture.getDimSize(d));
    if (!matches) {
      std::string shape = "[" + dimToString(query.getDimSize(0)) + ", " +
                          dimToString(key.getDimSize(1));
      for (int64_t size : capture.getShape())
        shape += ", " + dimToString(size);
      return emitOpError() << "grad_captures: the partial gradient of capture "
                           << number
                           << " must be f32 [B, Hkv, its shape] = " << shape
                           << "], found " << type;
    }
  }
  return success();
}

float AttentionBackwardOp::getEffectiveScale() {
  return effectiveScale(viewOf(*this).scale, getQuery());
}

std::pair<std::optional<int64_t>, std::optional<int64_t>>
AttentionBackwardOp::getBandOffsets() {
  return bandOffsets(viewOf(*this));
}

void AttentionBackwardOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  memrefEffects(*this, effects);
}

//===----------------------------------------------------------------------===//
// AttentionWeightsOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionWeightsOp::verify() {
  AttentionView view = viewOf(*this);
  if (failed(verifyAttentionInputs(view)))
    return failure();
  Type f32 = Float32Type::get(getContext());
  if (Value lse = getLse())
    if (failed(verifyStateOrOutput(*this, "lse", lse.getType(), f32, view,
                                   /*withValueDim=*/false)))
      return failure();
  Type weights = getWeights().getType();
  if (failed(verifyRank(*this, "weights", weights, 4, "[B, Hq, Sq, Sk]")))
    return failure();
  auto shaped = cast<ShapedType>(weights);
  if (shaped.getElementType() != f32)
    return emitOpError() << "weights element type must be f32, found "
                         << shaped.getElementType();
  auto q = cast<ShapedType>(getQuery().getType());
  static const char *names[] = {"B", "Hq", "Sq"};
  for (unsigned dim = 0; dim < 3; ++dim)
    if (failed(verifyDim(*this, "weights", shaped, dim, names[dim],
                         q.getDimSize(dim),
                         (Twine("query's ") + names[dim]).str())))
      return failure();
  if (failed(verifyDim(*this, "weights", shaped, 3, "Sk",
                       cast<ShapedType>(getKey().getType()).getDimSize(2),
                       "key's Sk")))
    return failure();
  return verifyTensorOrMemRefForm(*this);
}

float AttentionWeightsOp::getEffectiveScale() {
  return effectiveScale(viewOf(*this).scale, getQuery());
}

std::pair<std::optional<int64_t>, std::optional<int64_t>>
AttentionWeightsOp::getBandOffsets() {
  return bandOffsets(viewOf(*this));
}

void AttentionWeightsOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  memrefEffects(*this, effects);
}

//===----------------------------------------------------------------------===//
// Tiling
//===----------------------------------------------------------------------===//
//
// Both ops iterate over (B, Hq, Sq, Sk). B, Hq and Sq are parallel; Sk is a
// reduction. attn.attention cannot tile Sk (a softmax is not a sum); the
// online op can, because it accumulates into its outs.

namespace {

/// The operands of a tile: slices of Q, K, V and the mask, and the diagonal
/// offset in the tile's own coordinates.
struct OperandTiles {
  Value query, key, value, mask, diagonal;
  /// The tile's global (b, h, i, j), for an op with dropout or modifiers
  /// (else empty).
  SmallVector<Value, 4> origin;
  SmallVector<Operation *> slices;
};

Value extractSlice(OpBuilder &b, Location loc, Value source,
                   ArrayRef<OpFoldResult> offsets, ArrayRef<OpFoldResult> sizes,
                   OperandTiles &tiles) {
  SmallVector<OpFoldResult> strides(offsets.size(), b.getIndexAttr(1));
  auto slice =
      tensor::ExtractSliceOp::create(b, loc, source, offsets, sizes, strides);
  tiles.slices.push_back(slice);
  return slice.getResult();
}

OpFoldResult dimOf(OpBuilder &b, Location loc, Value tensor, int64_t dim) {
  return tensor::getMixedSize(b, loc, tensor, dim);
}

/// True if `size` is provably the whole of `tensor`'s dim `dim`: the static
/// size, or a tensor.dim of it (tiling drivers build their own).
bool isFullDim(OpFoldResult size, Value tensor, int64_t dim) {
  int64_t staticSize = cast<ShapedType>(tensor.getType()).getDimSize(dim);
  if (std::optional<int64_t> constant = getConstantIntValue(size))
    return !ShapedType::isDynamic(staticSize) && *constant == staticSize;
  auto dimOp = cast<Value>(size).getDefiningOp<tensor::DimOp>();
  if (!dimOp || dimOp.getSource() != tensor)
    return false;
  std::optional<int64_t> index = dimOp.getConstantIndex();
  return index && *index == dim;
}

/// The diagonal offset of the untiled op in its own coordinates: the operand
/// if it has one, else 0 (top_left) or Sk - Sq (bottom_right).
Value baseDiagonal(OpBuilder &b, Location loc, const AttentionView &view) {
  if (view.diagonal)
    return view.diagonal;
  if (*view.alignment == DiagonalAlignment::top_left)
    return arith::ConstantIndexOp::create(b, loc, 0);
  Value sk =
      getValueOrCreateConstantIndexOp(b, loc, dimOf(b, loc, view.key, 2));
  Value sq =
      getValueOrCreateConstantIndexOp(b, loc, dimOf(b, loc, view.query, 2));
  return arith::SubIOp::create(b, loc, sk, sq);
}

/// The key/value heads [offset, offset + size) that the query-head tile
/// (offset, size) reads. Query heads map onto key/value heads h / G. A tile
/// of all heads reads all of them; a tile of one query head reads its kv
/// head; a tile of whole GQA groups at a group boundary (what attn-tile
/// makes for decoding and for the backward op, so that a group's heads
/// share each K/V load) reads those groups' kv heads, and an aligned tile of
/// a divisor of the group (unless `wholeGroups`) its one kv head. A tile
/// size that is not static cannot be checked here: the tiling driver
/// promises 1 or whole groups.
FailureOr<std::pair<OpFoldResult, OpFoldResult>>
kvHeadTile(OpBuilder &b, Location loc, const AttentionView &view,
           OpFoldResult offset, OpFoldResult size, bool wholeGroups) {
  OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
  OpFoldResult hq = dimOf(b, loc, view.query, 1);
  if (isZeroInteger(offset) && isFullDim(size, view.query, 1))
    return std::make_pair(zero, dimOf(b, loc, view.key, 1));
  std::optional<int64_t> staticSize = getConstantIntValue(size);
  int64_t staticHq = cast<ShapedType>(view.query.getType()).getDimSize(1);
  int64_t staticHkv = cast<ShapedType>(view.key.getType()).getDimSize(1);
  bool staticGroup =
      !ShapedType::isDynamic(staticHq) && !ShapedType::isDynamic(staticHkv);
  int64_t staticG =
      staticGroup ? staticHq / std::max<int64_t>(staticHkv, 1) : 0;
  if (staticSize && staticGroup && wholeGroups && staticG >= 1 &&
      *staticSize % staticG != 0)
    return failure();
  // Whole groups, or a divisor of the group (a tile of a group larger
  // than a decoding tile may hold; attn-tile aligns it to the tile).
  if (staticSize && *staticSize != 1 &&
      (!staticGroup || staticG < 1 ||
       (*staticSize % staticG != 0 && staticG % *staticSize != 0)))
    return failure();
  // Folded where static, so that the tile's types are.
  Value hkv =
      getValueOrCreateConstantIndexOp(b, loc, dimOf(b, loc, view.key, 1));
  Value group = b.createOrFold<arith::DivUIOp>(
      loc, getValueOrCreateConstantIndexOp(b, loc, hq), hkv);
  OpFoldResult kvOffset = getAsOpFoldResult(b.createOrFold<arith::DivUIOp>(
      loc, getValueOrCreateConstantIndexOp(b, loc, offset), group));
  OpFoldResult kvSize =
      staticSize && *staticSize == 1
          ? one
          : getAsOpFoldResult(b.createOrFold<arith::CeilDivUIOp>(
                loc, getValueOrCreateConstantIndexOp(b, loc, size), group));
  return std::make_pair(kvOffset, kvSize);
}

/// Slices the inputs of an attention-like op for the iteration-space tile
/// (offsets, sizes) over (B, Hq, Sq, Sk); `wholeGroups`: see kvHeadTile.
FailureOr<OperandTiles> tileInputs(OpBuilder &b, Location loc,
                                   const AttentionView &view,
                                   ArrayRef<OpFoldResult> offsets,
                                   ArrayRef<OpFoldResult> sizes,
                                   bool wholeGroups = false) {
  OperandTiles tiles;
  OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
  auto q = cast<ShapedType>(view.query.getType());
  OpFoldResult d = b.getIndexAttr(q.getDimSize(3));

  FailureOr<std::pair<OpFoldResult, OpFoldResult>> kvHeads =
      kvHeadTile(b, loc, view, offsets[1], sizes[1], wholeGroups);
  if (failed(kvHeads))
    return failure();
  auto [kvOffset, kvSize] = *kvHeads;

  tiles.query = extractSlice(b, loc, view.query,
                             {offsets[0], offsets[1], offsets[2], zero},
                             {sizes[0], sizes[1], sizes[2], d}, tiles);
  tiles.key =
      extractSlice(b, loc, view.key, {offsets[0], kvOffset, offsets[3], zero},
                   {sizes[0], kvSize, sizes[3], d}, tiles);
  if (view.value) {
    OpFoldResult dv =
        b.getIndexAttr(cast<ShapedType>(view.value.getType()).getDimSize(3));
    tiles.value = extractSlice(b, loc, view.value,
                               {offsets[0], kvOffset, offsets[3], zero},
                               {sizes[0], kvSize, sizes[3], dv}, tiles);
  }
  if (view.mask) {
    auto m = cast<ShapedType>(view.mask.getType());
    SmallVector<OpFoldResult> maskOffsets, maskSizes;
    for (unsigned dim = 0; dim < 3; ++dim) {
      bool broadcast = m.getDimSize(dim) == 1;
      maskOffsets.push_back(broadcast ? zero : offsets[dim]);
      maskSizes.push_back(broadcast ? one : sizes[dim]);
    }
    maskOffsets.push_back(offsets[3]);
    maskSizes.push_back(sizes[3]);
    tiles.mask = extractSlice(b, loc, view.mask, maskOffsets, maskSizes, tiles);
  }
  if (view.dropoutP || !view.modifiers.empty() ||
      view.op->hasAttr(kBlockMaskAttrName)) {
    // The tile's global indices (dropout's, the modifiers', the block
    // table's): the op's origin plus the tile's offsets.
    for (unsigned dim = 0; dim < 4; ++dim) {
      Value offset = getValueOrCreateConstantIndexOp(b, loc, offsets[dim]);
      tiles.origin.push_back(
          view.origin.empty()
              ? offset
              : b.createOrFold<arith::AddIOp>(loc, view.origin[dim], offset));
    }
  }
  if (view.causal || view.window) {
    // off_tile = off + q_offset - k_offset: the same (i, j) relation in the
    // tile's local indices.
    Value diagonal = baseDiagonal(b, loc, view);
    Value qOffset = getValueOrCreateConstantIndexOp(b, loc, offsets[2]);
    Value kOffset = getValueOrCreateConstantIndexOp(b, loc, offsets[3]);
    diagonal = arith::AddIOp::create(b, loc, diagonal, qOffset);
    tiles.diagonal = arith::SubIOp::create(b, loc, diagonal, kOffset);
  }
  return tiles;
}

SmallVector<Range> attentionIterationDomain(OpBuilder &b, Location loc,
                                            const AttentionView &view) {
  OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
  return {Range{zero, dimOf(b, loc, view.query, 0), one},
          Range{zero, dimOf(b, loc, view.query, 1), one},
          Range{zero, dimOf(b, loc, view.query, 2), one},
          Range{zero, dimOf(b, loc, view.key, 2), one}};
}

/// Offsets and sizes of an [B, Hq, Sq(, Dv)] result for an iteration tile.
void stateTilePosition(OpBuilder &b, Value init, ArrayRef<OpFoldResult> offsets,
                       ArrayRef<OpFoldResult> sizes,
                       SmallVector<OpFoldResult> &resultOffsets,
                       SmallVector<OpFoldResult> &resultSizes) {
  resultOffsets.assign(offsets.begin(), offsets.begin() + 3);
  resultSizes.assign(sizes.begin(), sizes.begin() + 3);
  auto type = cast<ShapedType>(init.getType());
  if (type.getRank() == 4) {
    resultOffsets.push_back(b.getIndexAttr(0));
    resultSizes.push_back(b.getIndexAttr(type.getDimSize(3)));
  }
}

SmallVector<utils::IteratorType> attentionIteratorTypes() {
  return {utils::IteratorType::parallel, utils::IteratorType::parallel,
          utils::IteratorType::parallel, utils::IteratorType::reduction};
}

} // namespace

SmallVector<Range> AttentionOp::getIterationDomain(OpBuilder &b) {
  return attentionIterationDomain(b, getLoc(), viewOf(*this));
}

SmallVector<utils::IteratorType> AttentionOp::getLoopIteratorTypes() {
  return attentionIteratorTypes();
}

FailureOr<TilingResult>
AttentionOp::getTiledImplementation(OpBuilder &b,
                                    ArrayRef<OpFoldResult> offsets,
                                    ArrayRef<OpFoldResult> sizes) {
  Location loc = getLoc();
  AttentionView view = viewOf(*this);
  if (!isZeroInteger(offsets[3]) || !isFullDim(sizes[3], getKey(), 2)) {
    emitOpError("cannot tile the key dimension: a softmax is not a sum; "
                "convert to attn.online_attention (attn-online-softmax) and "
                "tile that");
    return failure();
  }
  FailureOr<OperandTiles> tiles = tileInputs(b, loc, view, offsets, sizes);
  if (failed(tiles)) {
    emitOpError("can tile the head dimension only by 1, by whole GQA groups, "
                "by a divisor of the group or not at all (a query-head tile "
                "must map onto whole key/value heads or lie within one)");
    return failure();
  }
  SmallVector<Value> outputs;
  for (Value init : getOutputs()) {
    SmallVector<OpFoldResult> outOffsets, outSizes;
    stateTilePosition(b, init, offsets, sizes, outOffsets, outSizes);
    outputs.push_back(extractSlice(b, loc, init, outOffsets, outSizes, *tiles));
  }
  // The sinks of the tile's query heads.
  Value sinks;
  if (getSinks())
    sinks = extractSlice(b, loc, getSinks(), {offsets[1]}, {sizes[1]}, *tiles);
  auto tiled = AttentionOp::create(
      b, loc, ValueRange(outputs).getTypes(), tiles->query, tiles->key,
      tiles->value, tiles->mask, tiles->diagonal, sinks, outputs,
      AttentionAttributes::of(*this).withoutAlignment().withOrigin(
          tiles->origin));
  return TilingResult{
      {tiled}, SmallVector<Value>(tiled->getResults()), tiles->slices};
}

LogicalResult AttentionOp::getResultTilePosition(
    OpBuilder &b, unsigned resultNumber, ArrayRef<OpFoldResult> offsets,
    ArrayRef<OpFoldResult> sizes, SmallVector<OpFoldResult> &resultOffsets,
    SmallVector<OpFoldResult> &resultSizes) {
  stateTilePosition(b, getOutputs()[resultNumber], offsets, sizes,
                    resultOffsets, resultSizes);
  return success();
}

SmallVector<Range> OnlineAttentionOp::getIterationDomain(OpBuilder &b) {
  return attentionIterationDomain(b, getLoc(), viewOf(*this));
}

SmallVector<utils::IteratorType> OnlineAttentionOp::getLoopIteratorTypes() {
  return attentionIteratorTypes();
}

FailureOr<TilingResult>
OnlineAttentionOp::getTiledImplementation(OpBuilder &b,
                                          ArrayRef<OpFoldResult> offsets,
                                          ArrayRef<OpFoldResult> sizes) {
  if (!hasPureTensorSemantics()) {
    emitOpError("tiles only in its tensor form");
    return failure();
  }
  Location loc = getLoc();
  FailureOr<OperandTiles> tiles =
      tileInputs(b, loc, viewOf(*this), offsets, sizes);
  if (failed(tiles)) {
    emitOpError("can tile the head dimension only by 1, by whole GQA groups, "
                "by a divisor of the group or not at all");
    return failure();
  }
  SmallVector<Value> states;
  for (Value init : getDpsInits()) {
    SmallVector<OpFoldResult> stateOffsets, stateSizes;
    stateTilePosition(b, init, offsets, sizes, stateOffsets, stateSizes);
    states.push_back(
        extractSlice(b, loc, init, stateOffsets, stateSizes, *tiles));
  }
  auto tiled = OnlineAttentionOp::create(
      b, loc, ValueRange(states).getTypes(), tiles->query, tiles->key,
      tiles->value, tiles->mask, tiles->diagonal, states[0], states[1],
      states[2],
      AttentionAttributes::of(*this).withoutAlignment().withOrigin(
          tiles->origin));
  return TilingResult{
      {tiled}, SmallVector<Value>(tiled->getResults()), tiles->slices};
}

LogicalResult OnlineAttentionOp::getResultTilePosition(
    OpBuilder &b, unsigned resultNumber, ArrayRef<OpFoldResult> offsets,
    ArrayRef<OpFoldResult> sizes, SmallVector<OpFoldResult> &resultOffsets,
    SmallVector<OpFoldResult> &resultSizes) {
  stateTilePosition(b, getDpsInits()[resultNumber], offsets, sizes,
                    resultOffsets, resultSizes);
  return success();
}

// The backward op iterates over (B, Hq, Sq, Sk) too, but only B and whole
// GQA groups of heads are parallel: dK and dV sum over Sq and over a group's
// query heads, dQ over Sk. A tile owns its dQ rows and its dK/dV heads.

SmallVector<Range> AttentionBackwardOp::getIterationDomain(OpBuilder &b) {
  return attentionIterationDomain(b, getLoc(), viewOf(*this));
}

SmallVector<utils::IteratorType> AttentionBackwardOp::getLoopIteratorTypes() {
  return {utils::IteratorType::parallel, utils::IteratorType::parallel,
          utils::IteratorType::reduction, utils::IteratorType::reduction};
}

namespace {
/// Whether (offsets, sizes) leaves the backward op's rows and keys whole.
bool rowsAndKeysWhole(AttentionBackwardOp op, ArrayRef<OpFoldResult> offsets,
                      ArrayRef<OpFoldResult> sizes) {
  return isZeroInteger(offsets[2]) && isFullDim(sizes[2], op.getQuery(), 2) &&
         isZeroInteger(offsets[3]) && isFullDim(sizes[3], op.getKey(), 2);
}
} // namespace

FailureOr<TilingResult>
AttentionBackwardOp::getTiledImplementation(OpBuilder &b,
                                            ArrayRef<OpFoldResult> offsets,
                                            ArrayRef<OpFoldResult> sizes) {
  if (!hasPureTensorSemantics()) {
    emitOpError("tiles only in its tensor form");
    return failure();
  }
  if (!rowsAndKeysWhole(*this, offsets, sizes)) {
    emitOpError("tiles only batches and whole GQA groups of heads (dK and dV "
                "sum over the query rows, dQ over the keys)");
    return failure();
  }
  Location loc = getLoc();
  AttentionView view = viewOf(*this);
  FailureOr<OperandTiles> tiles =
      tileInputs(b, loc, view, offsets, sizes, /*wholeGroups=*/true);
  if (failed(tiles)) {
    emitOpError("can tile the head dimension only by whole GQA groups (the "
                "heads of a group add to one dK and dV)");
    return failure();
  }
  OpFoldResult zero = b.getIndexAttr(0);
  auto rowSlice = [&](Value source) {
    auto type = cast<ShapedType>(source.getType());
    SmallVector<OpFoldResult> at = {offsets[0], offsets[1], zero};
    SmallVector<OpFoldResult> size = {sizes[0], sizes[1],
                                      dimOf(b, loc, source, 2)};
    if (type.getRank() == 4) {
      at.push_back(zero);
      size.push_back(b.getIndexAttr(type.getDimSize(3)));
    }
    return extractSlice(b, loc, source, at, size, *tiles);
  };
  // dK and dV are sliced as K and V are.
  auto likeSlice = [&](Value source, Value like) {
    auto slice = like.getDefiningOp<tensor::ExtractSliceOp>();
    return extractSlice(b, loc, source, slice.getMixedOffsets(),
                        slice.getMixedSizes(), *tiles);
  };
  Value output = rowSlice(getOutput()), lse = rowSlice(getLse());
  Value gradOutput = rowSlice(getGradOutput());
  Value gradLse = getGradLse() ? rowSlice(getGradLse()) : Value();
  Value gradQuery = likeSlice(getGradQuery(), tiles->query);
  Value gradKey = likeSlice(getGradKey(), tiles->key);
  Value gradValue = likeSlice(getGradValue(), tiles->value);
  // dM: the tile's batches and query heads, every row and key.
  Value gradMask;
  if (getGradMask())
    gradMask = extractSlice(b, loc, getGradMask(),
                            {offsets[0], offsets[1], zero, zero},
                            {sizes[0], sizes[1], sizes[2], sizes[3]}, *tiles);
  SmallVector<Type> types = {gradQuery.getType(), gradKey.getType(),
                             gradValue.getType()};
  if (gradMask)
    types.push_back(gradMask.getType());
  // The captures' partials: the tile's batches and key/value heads (as dK's),
  // each whole capture.
  SmallVector<Value> gradCaptures;
  for (Value partial : getGradCaptures()) {
    auto keySlice = gradKey.getDefiningOp<tensor::ExtractSliceOp>();
    SmallVector<OpFoldResult> at = {keySlice.getMixedOffsets()[0],
                                    keySlice.getMixedOffsets()[1]};
    SmallVector<OpFoldResult> size = {keySlice.getMixedSizes()[0],
                                      keySlice.getMixedSizes()[1]};
    for (int64_t d = 2; d < cast<ShapedType>(partial.getType()).getRank();
         ++d) {
      at.push_back(zero);
      size.push_back(dimOf(b, loc, partial, d));
    }
    gradCaptures.push_back(extractSlice(b, loc, partial, at, size, *tiles));
    types.push_back(gradCaptures.back().getType());
  }
  auto tiled = AttentionBackwardOp::create(
      b, loc, types, tiles->query, tiles->key, tiles->value, tiles->mask,
      tiles->diagonal, output, lse, gradOutput, gradLse, gradQuery, gradKey,
      gradValue, gradMask,
      AttentionAttributes::of(*this).withoutAlignment().withOrigin(
          tiles->origin),
      gradCaptures, getGradCaptureNumbersAttr());
  return TilingResult{
      {tiled}, SmallVector<Value>(tiled->getResults()), tiles->slices};
}

LogicalResult AttentionBackwardOp::getResultTilePosition(
    OpBuilder &b, unsigned resultNumber, ArrayRef<OpFoldResult> offsets,
    ArrayRef<OpFoldResult> sizes, SmallVector<OpFoldResult> &resultOffsets,
    SmallVector<OpFoldResult> &resultSizes) {
  if (!rowsAndKeysWhole(*this, offsets, sizes))
    return failure();
  OpFoldResult zero = b.getIndexAttr(0);
  Value init = getDpsInits()[resultNumber];
  if (getGradMask() && resultNumber == 3) { // dM [B, Hq, Sq, Sk]
    resultOffsets = {offsets[0], offsets[1], zero, zero};
    resultSizes = {sizes[0], sizes[1], sizes[2], sizes[3]};
    return success();
  }
  if (resultNumber == 0) {
    OpFoldResult width =
        b.getIndexAttr(cast<ShapedType>(init.getType()).getDimSize(3));
    resultOffsets = {offsets[0], offsets[1], zero, zero};
    resultSizes = {sizes[0], sizes[1], sizes[2], width};
    return success();
  }
  FailureOr<std::pair<OpFoldResult, OpFoldResult>> kvHeads = kvHeadTile(
      b, getLoc(), viewOf(*this), offsets[1], sizes[1], /*wholeGroups=*/true);
  if (failed(kvHeads))
    return failure();
  resultOffsets = {offsets[0], kvHeads->first};
  resultSizes = {sizes[0], kvHeads->second};
  if (resultNumber >= getFirstGradCaptureResult()) {
    // A capture's partials [B, Hkv, <the capture's shape>].
    for (int64_t d = 2; d < cast<ShapedType>(init.getType()).getRank(); ++d) {
      resultOffsets.push_back(zero);
      resultSizes.push_back(dimOf(b, getLoc(), init, d));
    }
    return success();
  }
  OpFoldResult width =
      b.getIndexAttr(cast<ShapedType>(init.getType()).getDimSize(3));
  resultOffsets.append({zero, zero});
  resultSizes.append({sizes[3], width});
  return success();
}

// The weights op's rows are independent (each is normalized by its own
// LSE): B, Hq and Sq tile; Sk stays whole (a row's own LSE sums over it).

SmallVector<Range> AttentionWeightsOp::getIterationDomain(OpBuilder &b) {
  return attentionIterationDomain(b, getLoc(), viewOf(*this));
}

SmallVector<utils::IteratorType> AttentionWeightsOp::getLoopIteratorTypes() {
  return attentionIteratorTypes();
}

FailureOr<TilingResult>
AttentionWeightsOp::getTiledImplementation(OpBuilder &b,
                                           ArrayRef<OpFoldResult> offsets,
                                           ArrayRef<OpFoldResult> sizes) {
  if (!hasPureTensorSemantics()) {
    emitOpError("tiles only in its tensor form");
    return failure();
  }
  if (!isZeroInteger(offsets[3]) || !isFullDim(sizes[3], getKey(), 2)) {
    emitOpError("cannot tile the key dimension: a row's weights are "
                "normalized over all its keys");
    return failure();
  }
  Location loc = getLoc();
  FailureOr<OperandTiles> tiles =
      tileInputs(b, loc, viewOf(*this), offsets, sizes);
  if (failed(tiles)) {
    emitOpError("can tile the head dimension only by 1, by whole GQA groups, "
                "by a divisor of the group or not at all");
    return failure();
  }
  SmallVector<OpFoldResult> rowOffsets(offsets.take_front(3)),
      rowSizes(sizes.take_front(3));
  Value lse = getLse()
                  ? extractSlice(b, loc, getLse(), rowOffsets, rowSizes, *tiles)
                  : Value();
  rowOffsets.push_back(b.getIndexAttr(0));
  rowSizes.push_back(dimOf(b, loc, getKey(), 2));
  Value weights =
      extractSlice(b, loc, getWeights(), rowOffsets, rowSizes, *tiles);
  auto tiled = AttentionWeightsOp::create(
      b, loc, TypeRange{weights.getType()}, tiles->query, tiles->key,
      tiles->mask, tiles->diagonal, lse, weights,
      AttentionAttributes::of(*this).withoutAlignment().withOrigin(
          tiles->origin));
  return TilingResult{
      {tiled}, SmallVector<Value>(tiled->getResults()), tiles->slices};
}

LogicalResult AttentionWeightsOp::getResultTilePosition(
    OpBuilder &b, unsigned, ArrayRef<OpFoldResult> offsets,
    ArrayRef<OpFoldResult> sizes, SmallVector<OpFoldResult> &resultOffsets,
    SmallVector<OpFoldResult> &resultSizes) {
  resultOffsets = {offsets[0], offsets[1], offsets[2], b.getIndexAttr(0)};
  resultSizes = {sizes[0], sizes[1], sizes[2], dimOf(b, getLoc(), getKey(), 2)};
  return success();
}

//===----------------------------------------------------------------------===//
// LinearOp
//===----------------------------------------------------------------------===//

namespace {
/// A linear attention state S [B, Hkv, D, Dv] (or with `normalizer` z
/// [B, Hkv, D]), f32, against the keys `k` and values `v`.
LogicalResult verifyLinearState(Operation *op, StringRef name, Value state,
                                bool normalizer, ShapedType k, ShapedType v) {
  StringRef layout = normalizer ? "[B, Hkv, D]" : "[B, Hkv, D, Dv]";
  if (failed(verifyRank(op, name, state.getType(), normalizer ? 3 : 4, layout)))
    return failure();
  auto shaped = cast<ShapedType>(state.getType());
  if (!shaped.getElementType().isF32())
    return op->emitOpError() << name << " element type must be f32, found "
                             << shaped.getElementType();
  if (failed(verifyDim(op, name, shaped, 0, "B", k.getDimSize(0), "key's B")) ||
      failed(verifyDim(op, name, shaped, 1, "Hkv", k.getDimSize(1),
                       "key's Hkv")) ||
      failed(verifyDim(op, name, shaped, 2, "D", k.getDimSize(3), "key's D")))
    return failure();
  if (!normalizer && failed(verifyDim(op, name, shaped, 3, "Dv",
                                      v.getDimSize(3), "value's Dv")))
    return failure();
  return success();
}

/// The checks attn.linear and attn.linear_backward share: Q, K and V (ranks,
/// one element type, matching dims, static head dims within the limit, the
/// GQA ratio).
LogicalResult verifyLinearInputs(Operation *op, Value query, Value key,
                                 Value value) {
  if (failed(verifyRank(op, "query", query.getType(), 4, "[B, Hq, Sq, D]")) ||
      failed(verifyRank(op, "key", key.getType(), 4, "[B, Hkv, Sk, D]")) ||
      failed(verifyRank(op, "value", value.getType(), 4, "[B, Hkv, Sk, Dv]")))
    return failure();
  auto q = cast<ShapedType>(query.getType());
  auto k = cast<ShapedType>(key.getType());
  auto v = cast<ShapedType>(value.getType());
  Type elem = q.getElementType();
  if (!isAttentionElementType(elem))
    return op->emitOpError() << "query element type must be f32, f16 or bf16, "
                                "found "
                             << elem;
  if (k.getElementType() != elem || v.getElementType() != elem)
    return op->emitOpError()
           << "key and value must have the query's element type " << elem
           << ", found " << k.getElementType() << " and " << v.getElementType();
  if (failed(verifyDim(op, "key", k, 0, "B", q.getDimSize(0), "query's B")) ||
      failed(verifyDim(op, "key", k, 3, "D", q.getDimSize(3), "query's D")) ||
      failed(verifyDim(op, "value", v, 0, "B", k.getDimSize(0), "key's B")) ||
      failed(
          verifyDim(op, "value", v, 1, "Hkv", k.getDimSize(1), "key's Hkv")) ||
      failed(verifyDim(op, "value", v, 2, "Sk", k.getDimSize(2), "key's Sk")))
    return failure();
  if (q.isDynamicDim(3) || k.isDynamicDim(3) || v.isDynamicDim(3))
    return op->emitOpError() << "head dims (D of query and key, Dv of value) "
                                "must be static, found "
                             << dimToString(q.getDimSize(3)) << ", "
                             << dimToString(k.getDimSize(3)) << " and "
                             << dimToString(v.getDimSize(3));
  for (auto [name, size] :
       {std::pair<StringRef, int64_t>{"query dim 3 (D)", q.getDimSize(3)},
        {"value dim 3 (Dv)", v.getDimSize(3)}})
    if (size > ::attn::kMaxHeadDim)
      return op->emitOpError() << name << " must be at most "
                               << ::attn::kMaxHeadDim << ", found " << size;
  int64_t hq = q.getDimSize(1), hkv = k.getDimSize(1);
  if (!ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv) &&
      (hkv == 0 ? hq != 0 : hq % hkv != 0))
    return op->emitOpError()
           << "query heads (Hq = " << hq
           << ") must be a multiple of key/value heads (Hkv = " << hkv << ")";
  return success();
}

/// eps (finite, >= 0, and absent when unnormalized) of attn.linear or
/// attn.linear_backward.
template <typename OpTy>
LogicalResult verifyLinearEps(OpTy op) {
  float eps = op.getEffectiveEps();
  if (!std::isfinite(eps) || eps < 0.0f)
    return op.emitOpError() << "eps must be finite and >= 0, found " << eps;
  if (op.getUnnormalized() && op.getEps())
    return op.emitOpError() << "eps is the denominator's and an unnormalized "
                               "op has none: drop eps or unnormalized";
  return success();
}

/// A tensor of the query rows' shape [B, Hq, Sq, width] in the query's
/// element type (`width`: the dim of `widthFrom` at 3): O and dO (width
/// Dv), dQ (D).
LogicalResult verifyRowsLike(Operation *op, StringRef name, Value tensor,
                             ShapedType q, ShapedType widthFrom,
                             StringRef widthName) {
  if (failed(verifyRank(op, name, tensor.getType(), 4,
                        ("[B, Hq, Sq, " + widthName + "]").str())))
    return failure();
  auto t = cast<ShapedType>(tensor.getType());
  if (t.getElementType() != q.getElementType())
    return op->emitOpError()
           << name << " element type must be the query's " << q.getElementType()
           << ", found " << t.getElementType();
  if (failed(verifyDim(op, name, t, 0, "B", q.getDimSize(0), "query's B")) ||
      failed(verifyDim(op, name, t, 1, "Hq", q.getDimSize(1), "query's Hq")) ||
      failed(verifyDim(op, name, t, 2, "Sq", q.getDimSize(2), "query's Sq")) ||
      failed(verifyDim(op, name, t, 3, widthName, widthFrom.getDimSize(3),
                       widthFrom == q ? "query's D" : "value's Dv")))
    return failure();
  return success();
}
} // namespace

int64_t LinearOp::getChunkRows() {
  return getChunk() ? *getChunk() : ::attn::kDefaultLinearChunk;
}

LogicalResult LinearOp::verify() {
  Operation *op = *this;
  if (failed(verifyLinearInputs(op, getQuery(), getKey(), getValue())))
    return failure();
  auto q = cast<ShapedType>(getQuery().getType());
  auto k = cast<ShapedType>(getKey().getType());
  auto v = cast<ShapedType>(getValue().getType());
  if (getCausal() &&
      failed(verifyDim(op, "key", k, 2, "Sk", q.getDimSize(2),
                       "query's Sq (causal linear attention: query i sees "
                       "keys 0..i)")))
    return failure();
  if (getInitialState().size() != 0 && getInitialState().size() != 2)
    return emitOpError() << "state(...) takes the initial state and "
                            "normalizer (2 operands), found "
                         << getInitialState().size();
  if (getOutputs().size() != 1 && getOutputs().size() != 3)
    return emitOpError() << "outs(...) takes the output, then optionally the "
                            "final state and normalizer (1 or 3 operands), "
                            "found "
                         << getOutputs().size();
  // O [B, Hq, Sq, Dv] in the inputs' type.
  if (failed(verifyRowsLike(op, "output", getOutput(), q, v, "Dv")))
    return failure();
  // S [B, Hkv, D, Dv] and z [B, Hkv, D], f32, in and out.
  auto verifyState = [&](StringRef name, Value state, bool normalizer) {
    return verifyLinearState(op, name, state, normalizer, k, v);
  };
  if (Value s = getStateIn())
    if (failed(verifyState("initial state", s, false)) ||
        failed(verifyState("initial normalizer", getNormalizerIn(), true)))
      return failure();
  if (Value s = getStateOut())
    if (failed(verifyState("final state", s, false)) ||
        failed(verifyState("final normalizer", getNormalizerOut(), true)))
      return failure();
  if (getChunkRows() < 1 || getChunkRows() > ::attn::kMaxLinearChunk)
    return emitOpError() << "chunk must be in [1, " << ::attn::kMaxLinearChunk
                         << "], found " << getChunkRows();
  if (failed(verifyLinearEps(*this)))
    return failure();
  return verifyTensorOrMemRefForm(*this);
}

void LinearOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  memrefEffects(*this, effects);
}

// A work item of attn.linear owns a state: one batch and one key/value
// head, with its GQA group of query heads. Neither the rows (the state is
// a prefix sum over them) nor D tile.

namespace {
/// The iteration domain of an op over the first two dims of `value`, both
/// parallel (attn.linear's and attn.additive's).
SmallVector<Range> leadingDimsDomain(OpBuilder &b, Location loc, Value value) {
  OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
  return {Range{zero, dimOf(b, loc, value, 0), one},
          Range{zero, dimOf(b, loc, value, 1), one}};
}
} // namespace

SmallVector<Range> LinearOp::getIterationDomain(OpBuilder &b) {
  return leadingDimsDomain(b, getLoc(), getKey());
}

SmallVector<utils::IteratorType> LinearOp::getLoopIteratorTypes() {
  return {utils::IteratorType::parallel, utils::IteratorType::parallel};
}

namespace {
/// Offsets and sizes of a tile of attn.linear's operands: the tile's batches
/// and key/value heads, and its query heads (G per key/value head).
struct LinearTile {
  SmallVector<OpFoldResult> query, key, state, normalizer;
  SmallVector<OpFoldResult> querySizes, keySizes, valueSizes, outputSizes,
      stateSizes, normalizerSizes;
};

LinearTile linearTile(OpBuilder &b, Location loc, Value query, Value key,
                      Value value, ArrayRef<OpFoldResult> offsets,
                      ArrayRef<OpFoldResult> sizes) {
  auto q = cast<ShapedType>(query.getType());
  auto k = cast<ShapedType>(key.getType());
  OpFoldResult group;
  if (!q.isDynamicDim(1) && !k.isDynamicDim(1) && k.getDimSize(1) > 0)
    group = b.getIndexAttr(q.getDimSize(1) / k.getDimSize(1));
  else
    group =
        arith::DivUIOp::create(b, loc, tensor::DimOp::create(b, loc, query, 1),
                               tensor::DimOp::create(b, loc, key, 1))
            .getResult();
  AffineExpr s0, s1;
  bindSymbols(b.getContext(), s0, s1);
  auto times = [&](OpFoldResult x) {
    return affine::makeComposedFoldedAffineApply(b, loc, s0 * s1, {x, group});
  };
  OpFoldResult zero = b.getIndexAttr(0);
  OpFoldResult d = dimOf(b, loc, key, 3);
  OpFoldResult dv = dimOf(b, loc, value, 3);
  LinearTile t;
  t.query = {offsets[0], times(offsets[1]), zero, zero};
  t.key = {offsets[0], offsets[1], zero, zero};
  t.state = t.key;
  t.normalizer = {offsets[0], offsets[1], zero};
  OpFoldResult rows = dimOf(b, loc, query, 2);
  OpFoldResult keys = dimOf(b, loc, key, 2);
  t.querySizes = {sizes[0], times(sizes[1]), rows, d};
  t.keySizes = {sizes[0], sizes[1], keys, d};
  t.valueSizes = {sizes[0], sizes[1], keys, dv};
  t.outputSizes = {sizes[0], times(sizes[1]), rows, dv};
  t.stateSizes = {sizes[0], sizes[1], d, dv};
  t.normalizerSizes = {sizes[0], sizes[1], d};
  return t;
}
} // namespace

FailureOr<TilingResult>
LinearOp::getTiledImplementation(OpBuilder &b, ArrayRef<OpFoldResult> offsets,
                                 ArrayRef<OpFoldResult> sizes) {
  if (!hasPureTensorSemantics()) {
    emitOpError("tiles only in its tensor form");
    return failure();
  }
  Location loc = getLoc();
  LinearTile t =
      linearTile(b, getLoc(), getQuery(), getKey(), getValue(), offsets, sizes);
  OperandTiles tiles;
  auto slice = [&](Value source, ArrayRef<OpFoldResult> at,
                   ArrayRef<OpFoldResult> size) {
    return extractSlice(b, loc, source, at, size, tiles);
  };
  Value query = slice(getQuery(), t.query, t.querySizes);
  Value key = slice(getKey(), t.key, t.keySizes);
  Value value = slice(getValue(), t.key, t.valueSizes);
  SmallVector<Value> initial, outputs;
  if (getStateIn()) {
    initial.push_back(slice(getStateIn(), t.state, t.stateSizes));
    initial.push_back(
        slice(getNormalizerIn(), t.normalizer, t.normalizerSizes));
  }
  outputs.push_back(slice(getOutput(), t.query, t.outputSizes));
  if (getStateOut()) {
    outputs.push_back(slice(getStateOut(), t.state, t.stateSizes));
    outputs.push_back(
        slice(getNormalizerOut(), t.normalizer, t.normalizerSizes));
  }
  auto tiled =
      LinearOp::create(b, loc, ValueRange(outputs).getTypes(), query, key,
                       value, initial, outputs, getCausal(), getChunkAttr(),
                       getEpsAttr(), getFeatureMapAttr(), getUnnormalized());
  return TilingResult{
      {tiled}, SmallVector<Value>(tiled->getResults()), tiles.slices};
}

LogicalResult LinearOp::getResultTilePosition(
    OpBuilder &b, unsigned resultNumber, ArrayRef<OpFoldResult> offsets,
    ArrayRef<OpFoldResult> sizes, SmallVector<OpFoldResult> &resultOffsets,
    SmallVector<OpFoldResult> &resultSizes) {
  LinearTile t =
      linearTile(b, getLoc(), getQuery(), getKey(), getValue(), offsets, sizes);
  switch (resultNumber) {
  case 0:
    resultOffsets = t.query;
    resultSizes = t.outputSizes;
    break;
  case 1:
    resultOffsets = t.state;
    resultSizes = t.stateSizes;
    break;
  default:
    resultOffsets = t.normalizer;
    resultSizes = t.normalizerSizes;
    break;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// LinearBackwardOp
//===----------------------------------------------------------------------===//

LogicalResult LinearBackwardOp::verify() {
  Operation *op = *this;
  if (failed(verifyLinearInputs(op, getQuery(), getKey(), getValue())))
    return failure();
  auto q = cast<ShapedType>(getQuery().getType());
  auto k = cast<ShapedType>(getKey().getType());
  auto v = cast<ShapedType>(getValue().getType());
  if (getCausal() &&
      failed(verifyDim(op, "key", k, 2, "Sk", q.getDimSize(2),
                       "query's Sq (causal linear attention: query i sees "
                       "keys 0..i)")))
    return failure();
  if (failed(verifyRowsLike(op, "output", getOutput(), q, v, "Dv")) ||
      failed(verifyRowsLike(op, "grad_output", getGradOutput(), q, v, "Dv")) ||
      failed(verifyLinearState(op, "state", getState(), false, k, v)) ||
      failed(verifyLinearState(op, "normalizer", getNormalizer(), true, k, v)))
    return failure();
  if (getStateGrads().size() != 0 && getStateGrads().size() != 2)
    return emitOpError() << "state_grads(...) takes the gradients of the final "
                            "state and normalizer (2 operands), found "
                         << getStateGrads().size();
  if (Value ds = getGradFinalState())
    if (failed(
            verifyLinearState(op, "final state's gradient", ds, false, k, v)) ||
        failed(verifyLinearState(op, "final normalizer's gradient",
                                 getGradFinalNormalizer(), true, k, v)))
      return failure();
  if (getOutputs().size() != 3 && getOutputs().size() != 5)
    return emitOpError() << "outs(...) takes dQ, dK, dV, then optionally the "
                            "initial state's and normalizer's gradients (3 or "
                            "5 operands), found "
                         << getOutputs().size();
  if (failed(verifyRowsLike(op, "grad_query", getGradQuery(), q, q, "D")))
    return failure();
  // dK and dV: K's and V's shapes and type.
  for (auto [name, grad, like] :
       {std::tuple<StringRef, Value, ShapedType>{"grad_key", getGradKey(), k},
        {"grad_value", getGradValue(), v}}) {
    auto g = dyn_cast<ShapedType>(grad.getType());
    if (!g || failed(verifyCompatibleShape(g, like)) ||
        g.getElementType() != like.getElementType())
      return emitOpError() << name << " must have the shape and element type "
                           << "of " << (like == k ? "key" : "value") << " ("
                           << like << "), found " << grad.getType();
  }
  if (Value ds = getGradInitialState())
    if (failed(verifyLinearState(op, "initial state's gradient", ds, false, k,
                                 v)) ||
        failed(verifyLinearState(op, "initial normalizer's gradient",
                                 getGradInitialNormalizer(), true, k, v)))
      return failure();
  if (failed(verifyLinearEps(*this)))
    return failure();
  return verifyTensorOrMemRefForm(*this);
}

void LinearBackwardOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  memrefEffects(*this, effects);
}

// Tiled as attn.linear: a batch and a key/value head a work item, with its
// group's query heads.

SmallVector<Range> LinearBackwardOp::getIterationDomain(OpBuilder &b) {
  return leadingDimsDomain(b, getLoc(), getKey());
}

SmallVector<utils::IteratorType> LinearBackwardOp::getLoopIteratorTypes() {
  return {utils::IteratorType::parallel, utils::IteratorType::parallel};
}

FailureOr<TilingResult>
LinearBackwardOp::getTiledImplementation(OpBuilder &b,
                                         ArrayRef<OpFoldResult> offsets,
                                         ArrayRef<OpFoldResult> sizes) {
  if (!hasPureTensorSemantics()) {
    emitOpError("tiles only in its tensor form");
    return failure();
  }
  Location loc = getLoc();
  LinearTile t =
      linearTile(b, loc, getQuery(), getKey(), getValue(), offsets, sizes);
  OperandTiles tiles;
  auto slice = [&](Value source, ArrayRef<OpFoldResult> at,
                   ArrayRef<OpFoldResult> size) {
    return extractSlice(b, loc, source, at, size, tiles);
  };
  auto state = [&](Value s) { return slice(s, t.state, t.stateSizes); };
  auto normalizer = [&](Value z) {
    return slice(z, t.normalizer, t.normalizerSizes);
  };
  SmallVector<Value> grads, outputs;
  if (Value ds = getGradFinalState())
    grads = {state(ds), normalizer(getGradFinalNormalizer())};
  outputs = {slice(getGradQuery(), t.query, t.querySizes),
             slice(getGradKey(), t.key, t.keySizes),
             slice(getGradValue(), t.key, t.valueSizes)};
  if (Value ds = getGradInitialState()) {
    outputs.push_back(state(ds));
    outputs.push_back(normalizer(getGradInitialNormalizer()));
  }
  auto tiled = LinearBackwardOp::create(
      b, loc, ValueRange(outputs).getTypes(),
      slice(getQuery(), t.query, t.querySizes),
      slice(getKey(), t.key, t.keySizes),
      slice(getValue(), t.key, t.valueSizes),
      slice(getOutput(), t.query, t.outputSizes),
      slice(getGradOutput(), t.query, t.outputSizes), state(getState()),
      normalizer(getNormalizer()), grads, outputs, getCausal(), getEpsAttr(),
      getFeatureMapAttr(), getUnnormalized());
  return TilingResult{
      {tiled}, SmallVector<Value>(tiled->getResults()), tiles.slices};
}

LogicalResult LinearBackwardOp::getResultTilePosition(
    OpBuilder &b, unsigned resultNumber, ArrayRef<OpFoldResult> offsets,
    ArrayRef<OpFoldResult> sizes, SmallVector<OpFoldResult> &resultOffsets,
    SmallVector<OpFoldResult> &resultSizes) {
  LinearTile t =
      linearTile(b, getLoc(), getQuery(), getKey(), getValue(), offsets, sizes);
  switch (resultNumber) {
  case 0: // dQ
    resultOffsets = t.query;
    resultSizes = t.querySizes;
    break;
  case 1: // dK
    resultOffsets = t.key;
    resultSizes = t.keySizes;
    break;
  case 2: // dV
    resultOffsets = t.key;
    resultSizes = t.valueSizes;
    break;
  case 3: // dS
    resultOffsets = t.state;
    resultSizes = t.stateSizes;
    break;
  default: // dz
    resultOffsets = t.normalizer;
    resultSizes = t.normalizerSizes;
    break;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// AdditiveOp
//===----------------------------------------------------------------------===//

namespace {
/// The checks of attn.additive's and attn.additive_backward's shared
/// operands: the inputs, the network and the keep-mask.
LogicalResult verifyAdditiveInputs(Operation *op, Value query, Value keys,
                                   Value values, Value queryWeight,
                                   Value keyWeight, Value scoreVector,
                                   Value mask) {
  auto emitOpError = [&] { return op->emitOpError(); };
  struct Operand {
    const char *name;
    Value value;
    int64_t rank;
    const char *layout;
  };
  const Operand operands[] = {{"query", query, 3, "[B, Sq, Dq]"},
                              {"keys", keys, 3, "[B, Sk, Dk]"},
                              {"values", values, 3, "[B, Sk, Dv]"},
                              {"query_weight", queryWeight, 2, "[A, Dq]"},
                              {"key_weight", keyWeight, 2, "[A, Dk]"},
                              {"score_vector", scoreVector, 1, "[A]"}};
  for (const Operand &o : operands)
    if (failed(verifyRank(op, o.name, o.value.getType(), o.rank, o.layout)))
      return failure();
  auto shape = [](Value v) { return cast<ShapedType>(v.getType()); };
  ShapedType q = shape(query), k = shape(keys), v = shape(values),
             wq = shape(queryWeight), wk = shape(keyWeight),
             va = shape(scoreVector);
  Type elem = q.getElementType();
  if (!isAttentionElementType(elem))
    return emitOpError() << "query element type must be f32, f16 or bf16, "
                            "found "
                         << elem;
  for (const Operand &o : ArrayRef(operands).drop_front())
    if (shape(o.value).getElementType() != elem)
      return emitOpError() << o.name << " must have the query's element type "
                           << elem << ", found "
                           << shape(o.value).getElementType();
  // The feature dims are static: the kernel's buffers are sized by them.
  for (auto [name, size] :
       {std::pair<StringRef, int64_t>{"query dim 2 (Dq)", q.getDimSize(2)},
        {"keys dim 2 (Dk)", k.getDimSize(2)},
        {"values dim 2 (Dv)", v.getDimSize(2)},
        {"query_weight dim 0 (A)", wq.getDimSize(0)}}) {
    if (ShapedType::isDynamic(size))
      return emitOpError() << name << " must be static, found ?";
    if (size > ::attn::kMaxHeadDim)
      return emitOpError() << name << " must be at most " << ::attn::kMaxHeadDim
                           << ", found " << size;
  }
  if (failed(verifyDim(op, "keys", k, 0, "B", q.getDimSize(0), "query's B")) ||
      failed(
          verifyDim(op, "values", v, 0, "B", q.getDimSize(0), "query's B")) ||
      failed(
          verifyDim(op, "values", v, 1, "Sk", k.getDimSize(1), "keys' Sk")) ||
      failed(verifyDim(op, "query_weight", wq, 1, "Dq", q.getDimSize(2),
                       "query's Dq")) ||
      failed(verifyDim(op, "key_weight", wk, 0, "A", wq.getDimSize(0),
                       "query_weight's A")) ||
      failed(verifyDim(op, "key_weight", wk, 1, "Dk", k.getDimSize(2),
                       "keys' Dk")) ||
      failed(verifyDim(op, "score_vector", va, 0, "A", wq.getDimSize(0),
                       "query_weight's A")))
    return failure();
  if (mask) {
    if (failed(
            verifyRank(op, "mask", mask.getType(), 3, "[B or 1, Sq or 1, Sk]")))
      return failure();
    ShapedType m = shape(mask);
    if (!m.getElementType().isInteger(1))
      return emitOpError() << "mask must be an i1 keep-mask, found "
                           << m.getElementType();
    static const char *names[] = {"B", "Sq"};
    for (unsigned d = 0; d < 2; ++d)
      if (m.getDimSize(d) != 1 &&
          failed(verifyDim(op, "mask", m, d, names[d], q.getDimSize(d),
                           (Twine("query's ") + names[d] + " (or 1)").str())))
        return failure();
    if (failed(verifyDim(op, "mask", m, 2, "Sk", k.getDimSize(1), "keys' Sk")))
      return failure();
  }
  return success();
}
} // namespace

LogicalResult AdditiveOp::verify() {
  Operation *op = *this;
  if (failed(verifyAdditiveInputs(op, getQuery(), getKeys(), getValues(),
                                  getQueryWeight(), getKeyWeight(),
                                  getScoreVector(), getMask())))
    return failure();
  auto shape = [](Value v) { return cast<ShapedType>(v.getType()); };
  ShapedType q = shape(getQuery()), k = shape(getKeys()),
             v = shape(getValues());
  Type elem = q.getElementType();
  if (getOutputs().size() != 1 && getOutputs().size() != 2)
    return emitOpError() << "outs(...) takes the output, then optionally the "
                            "weights (1 or 2 operands), found "
                         << getOutputs().size();
  if (failed(verifyRank(op, "output", getOutput().getType(), 3, "[B, Sq, Dv]")))
    return failure();
  ShapedType o = shape(getOutput());
  if (o.getElementType() != elem)
    return emitOpError() << "output element type must be the query's " << elem
                         << ", found " << o.getElementType();
  if (failed(
          verifyDim(op, "output", o, 0, "B", q.getDimSize(0), "query's B")) ||
      failed(
          verifyDim(op, "output", o, 1, "Sq", q.getDimSize(1), "query's Sq")) ||
      failed(
          verifyDim(op, "output", o, 2, "Dv", v.getDimSize(2), "values' Dv")))
    return failure();
  if (Value weights = getWeights()) {
    if (failed(verifyRank(op, "weights", weights.getType(), 3, "[B, Sq, Sk]")))
      return failure();
    ShapedType w = shape(weights);
    if (!w.getElementType().isF32())
      return emitOpError() << "weights element type must be f32, found "
                           << w.getElementType();
    if (failed(verifyDim(op, "weights", w, 0, "B", q.getDimSize(0),
                         "query's B")) ||
        failed(verifyDim(op, "weights", w, 1, "Sq", q.getDimSize(1),
                         "query's Sq")) ||
        failed(
            verifyDim(op, "weights", w, 2, "Sk", k.getDimSize(1), "keys' Sk")))
      return failure();
  }
  return verifyTensorOrMemRefForm(*this);
}

void AdditiveOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  memrefEffects(*this, effects);
}

// attn.additive's rows are independent (each its own softmax over every
// key): B and Sq tile, the keys stay whole.

SmallVector<Range> AdditiveOp::getIterationDomain(OpBuilder &b) {
  return leadingDimsDomain(b, getLoc(), getQuery());
}

SmallVector<utils::IteratorType> AdditiveOp::getLoopIteratorTypes() {
  return {utils::IteratorType::parallel, utils::IteratorType::parallel};
}

FailureOr<TilingResult>
AdditiveOp::getTiledImplementation(OpBuilder &b, ArrayRef<OpFoldResult> offsets,
                                   ArrayRef<OpFoldResult> sizes) {
  if (!hasPureTensorSemantics()) {
    emitOpError("tiles only in its tensor form");
    return failure();
  }
  Location loc = getLoc();
  OperandTiles tiles;
  OpFoldResult zero = b.getIndexAttr(0);
  auto whole = [&](Value v, int64_t d) { return dimOf(b, loc, v, d); };
  auto slice = [&](Value source, ArrayRef<OpFoldResult> at,
                   ArrayRef<OpFoldResult> size) {
    return extractSlice(b, loc, source, at, size, tiles);
  };
  OpFoldResult keys = whole(getKeys(), 1);
  Value query = slice(getQuery(), {offsets[0], offsets[1], zero},
                      {sizes[0], sizes[1], whole(getQuery(), 2)});
  Value keyRows = slice(getKeys(), {offsets[0], zero, zero},
                        {sizes[0], keys, whole(getKeys(), 2)});
  Value values = slice(getValues(), {offsets[0], zero, zero},
                       {sizes[0], keys, whole(getValues(), 2)});
  Value mask;
  if (Value m = getMask()) {
    // A dim of static size 1 broadcasts: the tile reads its index 0.
    auto type = cast<ShapedType>(m.getType());
    SmallVector<OpFoldResult> at, size;
    for (unsigned d = 0; d < 2; ++d) {
      bool broadcast = type.getDimSize(d) == 1;
      at.push_back(broadcast ? zero : offsets[d]);
      size.push_back(broadcast ? b.getIndexAttr(1) : sizes[d]);
    }
    at.push_back(zero);
    size.push_back(keys);
    mask = slice(m, at, size);
  }
  SmallVector<Value> outputs = {
      slice(getOutput(), {offsets[0], offsets[1], zero},
            {sizes[0], sizes[1], whole(getOutput(), 2)})};
  if (Value w = getWeights())
    outputs.push_back(
        slice(w, {offsets[0], offsets[1], zero}, {sizes[0], sizes[1], keys}));
  auto tiled = AdditiveOp::create(
      b, loc, ValueRange(outputs).getTypes(), query, keyRows, values,
      getQueryWeight(), getKeyWeight(), getScoreVector(), mask, outputs);
  return TilingResult{
      {tiled}, SmallVector<Value>(tiled->getResults()), tiles.slices};
}

LogicalResult AdditiveOp::getResultTilePosition(
    OpBuilder &b, unsigned resultNumber, ArrayRef<OpFoldResult> offsets,
    ArrayRef<OpFoldResult> sizes, SmallVector<OpFoldResult> &resultOffsets,
    SmallVector<OpFoldResult> &resultSizes) {
  Location loc = getLoc();
  resultOffsets = {offsets[0], offsets[1], b.getIndexAttr(0)};
  resultSizes = {sizes[0], sizes[1],
                 resultNumber == 0 ? dimOf(b, loc, getOutput(), 2)
                                   : dimOf(b, loc, getKeys(), 1)};
  return success();
}

//===----------------------------------------------------------------------===//
// AdditiveBackwardOp
//===----------------------------------------------------------------------===//

LogicalResult AdditiveBackwardOp::verify() {
  Operation *op = *this;
  if (failed(verifyAdditiveInputs(op, getQuery(), getKeys(), getValues(),
                                  getQueryWeight(), getKeyWeight(),
                                  getScoreVector(), getMask())))
    return failure();
  auto shape = [](Value v) { return cast<ShapedType>(v.getType()); };
  ShapedType q = shape(getQuery()), k = shape(getKeys()),
             v = shape(getValues()), wq = shape(getQueryWeight());
  if (failed(verifyRank(op, "grad_output", getGradOutput().getType(), 3,
                        "[B, Sq, Dv]")))
    return failure();
  ShapedType dO = shape(getGradOutput());
  if (dO.getElementType() != q.getElementType())
    return emitOpError() << "grad_output must have the query's element type "
                         << q.getElementType() << ", found "
                         << dO.getElementType();
  if (failed(verifyDim(op, "grad_output", dO, 0, "B", q.getDimSize(0),
                       "query's B")) ||
      failed(verifyDim(op, "grad_output", dO, 1, "Sq", q.getDimSize(1),
                       "query's Sq")) ||
      failed(verifyDim(op, "grad_output", dO, 2, "Dv", v.getDimSize(2),
                       "values' Dv")))
    return failure();
  if (getOutputs().size() != 4)
    return emitOpError() << "outs(...) takes grad_qp, grad_kp, grad_values "
                            "and grad_v (4 operands), found "
                         << getOutputs().size();
  struct Out {
    const char *name;
    Value value;
    int64_t rank;
    const char *layout;
  };
  const Out outs[] = {{"grad_qp", getGradQueryProjection(), 3, "[B, Sq, A]"},
                      {"grad_kp", getGradKeyProjection(), 4, "[B, P, Sk, A]"},
                      {"grad_values", getGradValues(), 4, "[B, P, Sk, Dv]"},
                      {"grad_v", getGradScoreVector(), 3, "[B, P, A]"}};
  for (const Out &o : outs) {
    if (failed(verifyRank(op, o.name, o.value.getType(), o.rank, o.layout)))
      return failure();
    if (!shape(o.value).getElementType().isF32())
      return emitOpError() << o.name << " element type must be f32, found "
                           << shape(o.value).getElementType();
    if (failed(verifyDim(op, o.name, shape(o.value), 0, "B", q.getDimSize(0),
                         "query's B")))
      return failure();
  }
  int64_t a = wq.getDimSize(0);
  ShapedType dqp = shape(outs[0].value), dkp = shape(outs[1].value),
             dv = shape(outs[2].value), dva = shape(outs[3].value);
  int64_t parts = dkp.getDimSize(1);
  if (parts == 0)
    return emitOpError() << "grad_kp dim 1 (P, the parts of the query rows) "
                            "must be at least 1, found 0";
  if (failed(verifyDim(op, "grad_qp", dqp, 1, "Sq", q.getDimSize(1),
                       "query's Sq")) ||
      failed(verifyDim(op, "grad_qp", dqp, 2, "A", a, "query_weight's A")) ||
      failed(verifyDim(op, "grad_kp", dkp, 2, "Sk", k.getDimSize(1),
                       "keys' Sk")) ||
      failed(verifyDim(op, "grad_kp", dkp, 3, "A", a, "query_weight's A")) ||
      failed(verifyDim(op, "grad_values", dv, 1, "P", parts, "grad_kp's P")) ||
      failed(verifyDim(op, "grad_values", dv, 2, "Sk", k.getDimSize(1),
                       "keys' Sk")) ||
      failed(verifyDim(op, "grad_values", dv, 3, "Dv", v.getDimSize(2),
                       "values' Dv")) ||
      failed(verifyDim(op, "grad_v", dva, 1, "P", parts, "grad_kp's P")) ||
      failed(verifyDim(op, "grad_v", dva, 2, "A", a, "query_weight's A")))
    return failure();
  return verifyTensorOrMemRefForm(*this);
}

void AdditiveBackwardOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  memrefEffects(*this, effects);
}

// attn.additive_backward tiles over batches and parts of the query rows:
// each part owns its rows' grad_qp and its partial sums over them.

SmallVector<Range> AdditiveBackwardOp::getIterationDomain(OpBuilder &b) {
  Location loc = getLoc();
  OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
  return {Range{zero, dimOf(b, loc, getQuery(), 0), one},
          Range{zero, dimOf(b, loc, getGradKeyProjection(), 1), one}};
}

SmallVector<utils::IteratorType> AdditiveBackwardOp::getLoopIteratorTypes() {
  return {utils::IteratorType::parallel, utils::IteratorType::parallel};
}

namespace {
/// The query rows [offset, offset + size) of the parts tile (offset, size)
/// of `op`: part p holds [min(Sq, p·R), min(Sq, (p + 1)·R)), R = ⌈Sq / P⌉.
/// Null where the tile is neither one part nor all of them.
std::optional<std::pair<OpFoldResult, OpFoldResult>>
additiveRowsOfParts(OpBuilder &b, AdditiveBackwardOp op, OpFoldResult offset,
                    OpFoldResult size) {
  Location loc = op.getLoc();
  Value parts = op.getGradKeyProjection();
  if (isFullDim(size, parts, 1))
    return std::make_pair(OpFoldResult(b.getIndexAttr(0)),
                          dimOf(b, loc, op.getQuery(), 1));
  std::optional<int64_t> constant = getConstantIntValue(size);
  if (!constant || *constant != 1)
    return std::nullopt;
  auto value = [&](OpFoldResult v) {
    return getValueOrCreateConstantIndexOp(b, loc, v);
  };
  Value rows = value(dimOf(b, loc, op.getQuery(), 1));
  Value perPart =
      arith::CeilDivUIOp::create(b, loc, rows, value(dimOf(b, loc, parts, 1)));
  Value start = arith::MinUIOp::create(
      b, loc, arith::MulIOp::create(b, loc, value(offset), perPart), rows);
  Value end = arith::MinUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, start, perPart), rows);
  return std::make_pair(
      OpFoldResult(start),
      OpFoldResult(arith::SubIOp::create(b, loc, end, start).getResult()));
}
} // namespace

FailureOr<TilingResult>
AdditiveBackwardOp::getTiledImplementation(OpBuilder &b,
                                           ArrayRef<OpFoldResult> offsets,
                                           ArrayRef<OpFoldResult> sizes) {
  if (!hasPureTensorSemantics()) {
    emitOpError("tiles only in its tensor form");
    return failure();
  }
  auto rowRange = additiveRowsOfParts(b, *this, offsets[1], sizes[1]);
  if (!rowRange) {
    emitOpError("tiles its parts one at a time (or all at once)");
    return failure();
  }
  auto [rowOffset, rowSize] = *rowRange;
  Location loc = getLoc();
  OperandTiles tiles;
  OpFoldResult zero = b.getIndexAttr(0);
  auto whole = [&](Value v, int64_t d) { return dimOf(b, loc, v, d); };
  auto slice = [&](Value source, ArrayRef<OpFoldResult> at,
                   ArrayRef<OpFoldResult> size) {
    return extractSlice(b, loc, source, at, size, tiles);
  };
  auto rowsOf = [&](Value v) {
    return slice(v, {offsets[0], rowOffset, zero},
                 {sizes[0], rowSize, whole(v, 2)});
  };
  auto batchOf = [&](Value v) {
    return slice(v, {offsets[0], zero, zero},
                 {sizes[0], whole(v, 1), whole(v, 2)});
  };
  Value mask;
  if (Value m = getMask()) {
    auto type = cast<ShapedType>(m.getType());
    bool batchBroadcast = type.getDimSize(0) == 1,
         rowBroadcast = type.getDimSize(1) == 1;
    mask = slice(m,
                 {batchBroadcast ? zero : offsets[0],
                  rowBroadcast ? zero : rowOffset, zero},
                 {batchBroadcast ? b.getIndexAttr(1) : sizes[0],
                  rowBroadcast ? b.getIndexAttr(1) : rowSize, whole(m, 2)});
  }
  auto partOf = [&](Value v) {
    auto rank = cast<ShapedType>(v.getType()).getRank();
    SmallVector<OpFoldResult> at = {offsets[0], offsets[1]},
                              size = {sizes[0], sizes[1]};
    for (int64_t d = 2; d < rank; ++d) {
      at.push_back(zero);
      size.push_back(whole(v, d));
    }
    return slice(v, at, size);
  };
  SmallVector<Value> outputs = {
      rowsOf(getGradQueryProjection()), partOf(getGradKeyProjection()),
      partOf(getGradValues()), partOf(getGradScoreVector())};
  auto tiled = AdditiveBackwardOp::create(
      b, loc, ValueRange(outputs).getTypes(), rowsOf(getQuery()),
      batchOf(getKeys()), batchOf(getValues()), getQueryWeight(),
      getKeyWeight(), getScoreVector(), rowsOf(getGradOutput()), mask, outputs);
  return TilingResult{
      {tiled}, SmallVector<Value>(tiled->getResults()), tiles.slices};
}

LogicalResult AdditiveBackwardOp::getResultTilePosition(
    OpBuilder &b, unsigned resultNumber, ArrayRef<OpFoldResult> offsets,
    ArrayRef<OpFoldResult> sizes, SmallVector<OpFoldResult> &resultOffsets,
    SmallVector<OpFoldResult> &resultSizes) {
  Location loc = getLoc();
  Value out = getOutputs()[resultNumber];
  OpFoldResult zero = b.getIndexAttr(0);
  if (resultNumber == 0) {
    auto rowRange = additiveRowsOfParts(b, *this, offsets[1], sizes[1]);
    if (!rowRange)
      return failure();
    resultOffsets = {offsets[0], rowRange->first, zero};
    resultSizes = {sizes[0], rowRange->second, dimOf(b, loc, out, 2)};
    return success();
  }
  resultOffsets = {offsets[0], offsets[1]};
  resultSizes = {sizes[0], sizes[1]};
  for (int64_t d = 2, rank = cast<ShapedType>(out.getType()).getRank();
       d < rank; ++d) {
    resultOffsets.push_back(zero);
    resultSizes.push_back(dimOf(b, loc, out, d));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Canonicalization
//===----------------------------------------------------------------------===//

namespace {

/// An unused log-sum-exp result need not be computed: drop it from outs.
struct DropUnusedLse : public OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getLse())
      return rewriter.notifyMatchFailure(op, "has no log-sum-exp");
    if (!op.getResult(1).use_empty())
      return rewriter.notifyMatchFailure(op, "its log-sum-exp is used");
    auto replacement = AttentionOp::create(
        rewriter, op.getLoc(), TypeRange{op.getResult(0).getType()},
        op.getQuery(), op.getKey(), op.getValue(), op.getMask(),
        op.getDiagonal(), op.getSinks(), ValueRange{op.getOutput()},
        AttentionAttributes::of(op));
    rewriter.replaceOp(op, {replacement.getResult(0), op.getLse()});
    return success();
  }
};

/// Under causal masking a window's right side (>= 0) bounds nothing more:
/// drop it, and the window with it when it had no left side.
struct DropRightWindowUnderCausal : public OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    WindowAttr window = op.getWindowAttr();
    if (!op.getCausal() || !window || !window.getRight())
      return rewriter.notifyMatchFailure(op, "no right window under causal");
    rewriter.modifyOpInPlace(op, [&] {
      if (window.getLeft())
        op.setWindowAttr(
            WindowAttr::get(op.getContext(), window.getLeft(), std::nullopt));
      else
        op.removeWindowAttr();
    });
    return success();
  }
};

} // namespace

void AttentionOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<DropUnusedLse, DropRightWindowUnderCausal>(context);
}

//===----------------------------------------------------------------------===//
// The modifiers: attn.captured, and their regions in ops made from others
//===----------------------------------------------------------------------===//

Region *mlir::attn::scoreModOf(Operation *op) {
  for (Region &region : op->getRegions())
    if (!region.empty() && region.front().getNumArguments() == 5)
      return &region;
  return nullptr;
}

Region *mlir::attn::maskModOf(Operation *op) {
  for (Region &region : op->getRegions())
    if (!region.empty() && region.front().getNumArguments() == 4)
      return &region;
  return nullptr;
}

llvm::SmallDenseSet<int64_t> mlir::attn::scoreModReads(Operation *op) {
  llvm::SmallDenseSet<int64_t> read;
  if (Region *scoreMod = scoreModOf(op))
    scoreMod->walk(
        [&](CapturedOp captured) { read.insert(captured.getCapture()); });
  return read;
}

void AttentionAttributes::cloneModifiersInto(OperationState &state) const {
  if (blockMask)
    state.addAttribute(kBlockMaskAttrName, blockMask);
  if (!modifiers)
    return;
  for (unsigned i = 0; i < modifierCount(); ++i) {
    IRMapping mapping;
    modifiers->getRegion(i).cloneInto(state.regions[i].get(), mapping);
  }
}

LogicalResult CapturedOp::verify() {
  Operation *owner = (*this)->getParentOp();
  std::optional<ValueRange> captures =
      llvm::TypeSwitch<Operation *, std::optional<ValueRange>>(owner)
          .Case<AttentionOp, OnlineAttentionOp, AttentionBackwardOp,
                AttentionWeightsOp>(
              [](auto op) { return ValueRange(op.getCaptures()); })
          .Default([](Operation *) { return std::nullopt; });
  if (!captures)
    return emitOpError("must be in a score_mod or mask_mod region of an "
                       "attention op");
  int64_t number = getCapture();
  if (number < 0 || number >= static_cast<int64_t>(captures->size()))
    return emitOpError() << "reads capture " << number << ", but the op has "
                         << captures->size() << " captures(...)";
  auto type = cast<ShapedType>((*captures)[number].getType());
  if (static_cast<int64_t>(getIndices().size()) != type.getRank())
    return emitOpError() << "capture " << number << " has rank "
                         << type.getRank() << " and takes as many indices, found "
                         << getIndices().size();
  if (getType() != type.getElementType())
    return emitOpError() << "result type must be capture " << number
                         << "'s element type " << type.getElementType()
                         << ", found " << getType();
  return success();
}

//===----------------------------------------------------------------------===//
// attn.mha
//===----------------------------------------------------------------------===//

LogicalResult MhaOp::verify() {
  Operation *op = *this;
  if (failed(verifyRank(op, "query", getQuery().getType(), 3, "[B, Sq, E]")) ||
      failed(verifyRank(op, "key", getKey().getType(), 3, "[B, Sk, Ek]")) ||
      failed(verifyRank(op, "value", getValue().getType(), 3, "[B, Sk, Ev]")) ||
      failed(verifyRank(op, "output", getOutput().getType(), 3, "[B, Sq, E]")))
    return failure();
  auto shape = [](Value v) { return cast<ShapedType>(v.getType()); };
  ShapedType q = shape(getQuery()), k = shape(getKey()), v = shape(getValue()),
             o = shape(getOutput());
  Type elem = q.getElementType();
  if (!isAttentionElementType(elem))
    return emitOpError() << "query element type must be f32, f16 or bf16, "
                            "found "
                         << elem;
  // The widths are static: they size the projections' register tiles.
  for (auto [name, size] :
       {std::pair<StringRef, int64_t>{"query dim 2 (E)", q.getDimSize(2)},
        {"key dim 2 (Ek)", k.getDimSize(2)},
        {"value dim 2 (Ev)", v.getDimSize(2)}}) {
    if (ShapedType::isDynamic(size))
      return emitOpError() << name << " must be static, found ?";
    if (size < 1 || size > ::attn::kMaxEmbedDim)
      return emitOpError() << name << " must be in [1, " << ::attn::kMaxEmbedDim
                           << "], found " << size;
  }
  int64_t embed = q.getDimSize(2), heads = getNumHeads();
  if (embed % heads != 0)
    return emitOpError() << "the embedding width E = " << embed
                         << " must be a multiple of heads = " << heads;
  if (embed / heads > ::attn::kMaxHeadDim)
    return emitOpError() << "a head's width E / heads = " << embed / heads
                         << " must be at most " << ::attn::kMaxHeadDim;
  if (failed(verifyDim(op, "key", k, 0, "B", q.getDimSize(0), "query's B")) ||
      failed(verifyDim(op, "value", v, 0, "B", q.getDimSize(0), "query's B")) ||
      failed(verifyDim(op, "value", v, 1, "Sk", k.getDimSize(1), "key's Sk")) ||
      failed(
          verifyDim(op, "output", o, 0, "B", q.getDimSize(0), "query's B")) ||
      failed(
          verifyDim(op, "output", o, 1, "Sq", q.getDimSize(1), "query's Sq")) ||
      failed(verifyDim(op, "output", o, 2, "E", embed, "query's E")))
    return failure();

  // The parameters: shapes, and one element type for everything.
  struct Parameter {
    std::string name;
    Value value;
    SmallVector<int64_t> shape;
    const char *layout;
  };
  SmallVector<Parameter> parameters;
  ValueRange weights = getInWeights();
  if (weights.size() == 1) {
    if (k.getDimSize(2) != embed || v.getDimSize(2) != embed)
      return emitOpError() << "a packed in_proj [3E, E] needs Ek = Ev = E = "
                           << embed << ", found Ek = " << k.getDimSize(2)
                           << ", Ev = " << v.getDimSize(2)
                           << " (give three weights instead)";
    parameters.push_back(
        {"in_proj weight", weights[0], {3 * embed, embed}, "[3E, E]"});
  } else if (weights.size() == 3) {
    parameters.push_back(
        {"in_proj query weight", weights[0], {embed, embed}, "[E, E]"});
    parameters.push_back({"in_proj key weight",
                          weights[1],
                          {embed, k.getDimSize(2)},
                          "[E, Ek]"});
    parameters.push_back({"in_proj value weight",
                          weights[2],
                          {embed, v.getDimSize(2)},
                          "[E, Ev]"});
  } else {
    return emitOpError() << "in_proj(...) takes one packed [3E, E] weight or "
                            "three ([E, E], [E, Ek], [E, Ev]), found "
                         << weights.size();
  }
  if (Value bias = getInBias())
    parameters.push_back({"in_bias", bias, {3 * embed}, "[3E]"});
  parameters.push_back(
      {"out_proj weight", getOutWeight(), {embed, embed}, "[E, E]"});
  if (Value bias = getOutBias())
    parameters.push_back({"out_bias", bias, {embed}, "[E]"});
  for (const Parameter &p : parameters) {
    if (failed(verifyRank(op, p.name, p.value.getType(), p.shape.size(),
                          p.layout)))
      return failure();
    ShapedType t = shape(p.value);
    for (auto [d, size] : llvm::enumerate(p.shape))
      if (t.getDimSize(d) != size)
        return emitOpError() << p.name << " must be " << p.layout << " = ["
                             << llvm::interleaved(p.shape) << "], found " << t;
  }
  for (auto [name, value] : {std::pair<std::string, Value>{"key", getKey()},
                             {"value", getValue()},
                             {"output", getOutput()}})
    if (shape(value).getElementType() != elem)
      return emitOpError() << name << " must have the query's element type "
                           << elem << ", found "
                           << shape(value).getElementType();
  for (const Parameter &p : parameters)
    if (shape(p.value).getElementType() != elem)
      return emitOpError() << p.name << " must have the query's element type "
                           << elem << ", found "
                           << shape(p.value).getElementType();

  if (Value mask = getMask()) {
    if (failed(verifyRank(op, "mask", mask.getType(), 4,
                          "[B or 1, H or 1, Sq or 1, Sk]")))
      return failure();
    ShapedType m = shape(mask);
    if (!m.getElementType().isInteger(1) && m.getElementType() != elem)
      return emitOpError() << "mask element type must be i1 (keep-mask) or "
                              "the query's "
                           << elem << " (additive bias), found "
                           << m.getElementType();
    int64_t full[] = {q.getDimSize(0), heads, q.getDimSize(1)};
    static const char *names[] = {"B", "heads", "Sq"};
    for (unsigned d = 0; d < 3; ++d)
      if (m.getDimSize(d) != 1 &&
          failed(verifyDim(op, "mask", m, d, names[d], full[d],
                           (Twine(names[d]) + " (or 1)").str())))
        return failure();
    if (failed(verifyDim(op, "mask", m, 3, "Sk", k.getDimSize(1), "key's Sk")))
      return failure();
  }
  std::optional<float> scale, softcap;
  if (FloatAttr attr = getScaleAttr())
    scale = attr.getValueAsDouble();
  if (FloatAttr attr = getSoftcapAttr())
    softcap = attr.getValueAsDouble();
  return verifyBandAndScale(op, getCausal(), getAlignment(), getWindowAttr(),
                            /*hasDiagonal=*/false, scale, softcap);
}
