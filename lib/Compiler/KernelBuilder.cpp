//===- KernelBuilder.cpp - Kernel functions from specs, specs from ops ----===//
//
// A kernel is a function around one attn.attention with every batch, head
// and sequence size dynamic and the head dims static:
//
//   func.func @<name>_impl(%q: tensor<?x?x?xDxT>, %k, %v, [%mask],
//                          [%captures...], [%sinks: tensor<?xf32>],
//                          %o: tensor<?x?x?xDvxT>, [%lse: tensor<?x?x?xf32>])
//       attributes {attn.kernel}
//
// A backward kernel's function is around attn.attention_backward:
//
//   func.func @<name>_impl(%q, %k, %v, [%mask], %o, %lse, %do, [%dlse],
//                          %dq, %dk, %dv, [%dm], [%dcaptures...])
//       -> (dQ, dK, dV, [dM], [dC...])
//
// A weights kernel's is around attn.attention_weights (no V; LSE read):
//
//   func.func @<name>_impl(%q, %k, [%mask], [%lse], %w: tensor<?x?x?x?xf32>)
//       -> W
//
// A linear attention kernel's is around attn.linear (states f32):
//
//   func.func @<name>_impl(%q, %k, %v, [%s0: tensor<?x?xDxDvxf32>,
//                          %z0: tensor<?x?xDxf32>], %o, [%s1, %z1])
//       -> (O, [S1, z1])
//
// and its backward's around attn.linear_backward (S, z the forward's final
// state; with `state` the final state's gradients in, the initial's out):
//
//   func.func @<name>_impl(%q, %k, %v, %o, %do, %s, %z, [%ds1, %dz1],
//                          %dq, %dk, %dv, [%ds0, %dz0])
//       -> (dQ, dK, dV, [dS0, dz0])
//
// An additive attention kernel's is around attn.additive:
//
//   func.func @<name>_impl(%q: tensor<?x?xDqxT>, %k: tensor<?x?xDkxT>,
//                          %v: tensor<?x?xDvxT>, %wq: tensor<AxDqxT>,
//                          %wk: tensor<AxDkxT>, %va: tensor<AxT>,
//                          [%mask: tensor<?x?x?xi1>], %o, [%w: f32])
//       -> (O, [W])
//
// Every kind takes the tensors that its modifiers capture right after the
// mask, as the spec's CaptureSpecs declare them (the modifiers' regions
// come from the spec's `modifiers` source, see modifiersSource).
//
// The mask is full-shaped ([B, Hq, Sq, Sk]): a broadcast dimension is one
// whose stride the runtime sets to 0, so one kernel serves every broadcast
// form the spec allows. Sizes an .mlir op declares static are recorded in
// the kernel's descriptor and checked by the runtime instead.
//
//===----------------------------------------------------------------------===//
#include "lib/Compiler/Compiler.h"
#include "lib/Compiler/CompilerInternal.h"
#include "lib/Support/Limits.h"
#include "lib/Support/Nesting.h"

#include "dialect/AttnOps.h"
#include "lib/Pipelines/Registration.h"
#include "lib/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include <type_traits>

using namespace mlir;

namespace attn {

Type elementTypeOf(MLIRContext *ctx, ElementType type) {
  switch (type) {
  case ElementType::F32:
    return Float32Type::get(ctx);
  case ElementType::F16:
    return Float16Type::get(ctx);
  case ElementType::BF16:
    return BFloat16Type::get(ctx);
  }
  return {};
}

Type captureElementType(MLIRContext *ctx, CaptureType type) {
  switch (type) {
  case CaptureType::F32:
    return Float32Type::get(ctx);
  case CaptureType::Bool:
    return IntegerType::get(ctx, 8);
  case CaptureType::I32:
    return IntegerType::get(ctx, 32);
  case CaptureType::I64:
    return IntegerType::get(ctx, 64);
  }
  return {};
}

/// The empty kernel function `<name>_impl` of `spec` (marked as a kernel,
/// its entry block made) taking `args` and returning `results`.
static func::FuncOp kernelFunction(OpBuilder &b, Location loc,
                                   const KernelSpec &spec, ArrayRef<Type> args,
                                   ArrayRef<Type> results) {
  auto func = func::FuncOp::create(b, loc, spec.name + "_impl",
                                   b.getFunctionType(args, results));
  func->setAttr(mlir::attn::kKernelAttrName, b.getUnitAttr());
  func.addEntryBlock();
  return func;
}

/// The kernel function of a linear attention backward spec (see the file
/// comment), given its tensor types.
static func::FuncOp
buildLinearBackwardKernelFunction(OpBuilder &b, Location loc,
                                  const KernelSpec &spec, Type q, Type k,
                                  Type v, Type o, Type state, Type normalizer) {
  SmallVector<Type> args = {q, k, v, o, o, state, normalizer};
  if (spec.linearState)
    args.append({state, normalizer});
  SmallVector<Type> results = {q, k, v};
  if (spec.linearState)
    results.append({state, normalizer});
  args.append(results.begin(), results.end());
  func::FuncOp func = kernelFunction(b, loc, spec, args, results);
  Block *body = &func.getBody().front();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(body);
  auto arg = [&](unsigned i) { return body->getArgument(i); };
  ValueRange grads = body->getArguments().slice(7, spec.linearState ? 2 : 0);
  ValueRange outputs = body->getArguments().drop_front(7 + grads.size());
  auto op = mlir::attn::LinearBackwardOp::create(
      b, loc, outputs.getTypes(), arg(0), arg(1), arg(2), arg(3), arg(4),
      arg(5), arg(6), grads, outputs,
      spec.causal ? b.getUnitAttr() : UnitAttr(),
      spec.unnormalized ? FloatAttr() : b.getF32FloatAttr(spec.eps),
      mlir::attn::FeatureMapAttr::get(
          b.getContext(), static_cast<mlir::attn::FeatureMap>(spec.featureMap)),
      spec.unnormalized ? b.getUnitAttr() : UnitAttr());
  func::ReturnOp::create(b, loc, op.getResults());
  return func;
}

/// The kernel function of a linear attention spec (see the file comment).
static func::FuncOp buildLinearKernelFunction(OpBuilder &b, Location loc,
                                              const KernelSpec &spec) {
  MLIRContext *ctx = b.getContext();
  Type elem = elementTypeOf(ctx, spec.elementType);
  auto size = [&](int index) {
    return spec.staticSizes[index] < 0 ? ShapedType::kDynamic
                                       : spec.staticSizes[index];
  };
  int64_t batch = size(0), heads = size(1), kvHeads = size(2), rows = size(3),
          keys = size(4);
  auto tensor = [&](ArrayRef<int64_t> shape, Type t) -> Type {
    return RankedTensorType::get(shape, t);
  };
  Type q = tensor({batch, heads, rows, spec.headDim}, elem);
  Type k = tensor({batch, kvHeads, keys, spec.headDim}, elem);
  Type v = tensor({batch, kvHeads, keys, spec.valueDim}, elem);
  Type o = tensor({batch, heads, rows, spec.valueDim}, elem);
  Type state =
      tensor({batch, kvHeads, spec.headDim, spec.valueDim}, b.getF32Type());
  Type normalizer = tensor({batch, kvHeads, spec.headDim}, b.getF32Type());
  if (spec.linearBackward)
    return buildLinearBackwardKernelFunction(b, loc, spec, q, k, v, o, state,
                                             normalizer);
  SmallVector<Type> args = {q, k, v}, results = {o};
  if (spec.linearState) {
    args.append({state, normalizer, o, state, normalizer});
    results.append({state, normalizer});
  } else {
    args.push_back(o);
  }
  func::FuncOp func = kernelFunction(b, loc, spec, args, results);
  Block *body = &func.getBody().front();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(body);
  ValueRange initial = body->getArguments().slice(3, spec.linearState ? 2 : 0);
  ValueRange outputs = body->getArguments().drop_front(3 + initial.size());
  auto op = mlir::attn::LinearOp::create(
      b, loc, outputs.getTypes(), body->getArgument(0), body->getArgument(1),
      body->getArgument(2), initial, outputs,
      spec.causal ? b.getUnitAttr() : UnitAttr(),
      b.getI64IntegerAttr(spec.chunk),
      spec.unnormalized ? FloatAttr() : b.getF32FloatAttr(spec.eps),
      mlir::attn::FeatureMapAttr::get(
          ctx, static_cast<mlir::attn::FeatureMap>(spec.featureMap)),
      spec.unnormalized ? b.getUnitAttr() : UnitAttr());
  func::ReturnOp::create(b, loc, op.getResults());
  return func;
}

/// The kernel function of an additive attention spec.
static func::FuncOp buildAdditiveKernelFunction(OpBuilder &b, Location loc,
                                                const KernelSpec &spec) {
  MLIRContext *ctx = b.getContext();
  Type elem = elementTypeOf(ctx, spec.elementType);
  int64_t dyn = ShapedType::kDynamic;
  auto size = [&](int index) {
    return spec.staticSizes[index] < 0 ? dyn : spec.staticSizes[index];
  };
  int64_t batch = size(0), rows = size(3), keys = size(4);
  auto tensor = [&](ArrayRef<int64_t> shape, Type t) -> Type {
    return RankedTensorType::get(shape, t);
  };
  SmallVector<Type> args = {tensor({batch, rows, spec.queryDim}, elem),
                            tensor({batch, keys, spec.headDim}, elem),
                            tensor({batch, keys, spec.valueDim}, elem),
                            tensor({spec.attnDim, spec.queryDim}, elem),
                            tensor({spec.attnDim, spec.headDim}, elem),
                            tensor({spec.attnDim}, elem)};
  // The backward's dO, before the mask (attn.additive_backward's order).
  if (spec.additiveBackward)
    args.push_back(tensor({batch, rows, spec.valueDim}, elem));
  if (spec.mask != MaskKind::None)
    args.push_back(tensor({dyn, dyn, dyn}, b.getI1Type()));
  Type f32 = b.getF32Type();
  SmallVector<Type> results;
  if (spec.additiveBackward) {
    // grad_qp, then the parts' grad_kp, grad_values and grad_v.
    results = {tensor({batch, rows, spec.attnDim}, f32),
               tensor({batch, dyn, keys, spec.attnDim}, f32),
               tensor({batch, dyn, keys, spec.valueDim}, f32),
               tensor({batch, dyn, spec.attnDim}, f32)};
  } else {
    results = {tensor({batch, rows, spec.valueDim}, elem)};
    if (spec.additiveWeights)
      results.push_back(tensor({batch, rows, keys}, f32));
  }
  args.append(results.begin(), results.end());
  func::FuncOp func = kernelFunction(b, loc, spec, args, results);
  Block *body = &func.getBody().front();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(body);
  unsigned next = 6;
  Value gradOutput =
      spec.additiveBackward ? body->getArgument(next++) : Value();
  Value mask =
      spec.mask != MaskKind::None ? body->getArgument(next++) : Value();
  ValueRange outputs = body->getArguments().drop_front(next);
  Operation *op;
  if (spec.additiveBackward)
    op = mlir::attn::AdditiveBackwardOp::create(
        b, loc, outputs.getTypes(), body->getArgument(0), body->getArgument(1),
        body->getArgument(2), body->getArgument(3), body->getArgument(4),
        body->getArgument(5), gradOutput, mask, outputs);
  else
    op = mlir::attn::AdditiveOp::create(
        b, loc, outputs.getTypes(), body->getArgument(0), body->getArgument(1),
        body->getArgument(2), body->getArgument(3), body->getArgument(4),
        body->getArgument(5), mask, outputs);
  func::ReturnOp::create(b, loc, op->getResults());
  return func;
}

/// The forward attributes of `spec` (scale, causal, alignment, window,
/// soft cap) as the ops take them.
static mlir::attn::AttentionAttributes attributesOf(OpBuilder &b,
                                                    const KernelSpec &spec) {
  MLIRContext *ctx = b.getContext();
  FloatAttr scale = spec.scale ? b.getF32FloatAttr(*spec.scale) : FloatAttr();
  FloatAttr softcap =
      spec.softcap ? b.getF32FloatAttr(*spec.softcap) : FloatAttr();
  mlir::attn::DiagonalAlignmentAttr alignment;
  if (spec.usesDiagonal())
    alignment = mlir::attn::DiagonalAlignmentAttr::get(
        ctx, spec.alignment == Alignment::TopLeft
                 ? mlir::attn::DiagonalAlignment::top_left
                 : mlir::attn::DiagonalAlignment::bottom_right);
  mlir::attn::WindowAttr window;
  if (spec.windowed())
    window =
        mlir::attn::WindowAttr::get(ctx, spec.windowLeft, spec.windowRight);
  return {scale, spec.causal ? b.getUnitAttr() : UnitAttr(), alignment, window,
          softcap};
}

/// The kernel function of a multi-head attention layer's spec.
static func::FuncOp buildMhaKernelFunction(OpBuilder &b, Location loc,
                                           const KernelSpec &spec) {
  Type elem = elementTypeOf(b.getContext(), spec.elementType);
  int64_t dyn = ShapedType::kDynamic;
  auto size = [&](int index) {
    return spec.staticSizes[index] < 0 ? dyn : spec.staticSizes[index];
  };
  int64_t batch = size(0), rows = size(3), keys = size(4);
  int64_t e = spec.embedDim;
  auto tensor = [&](ArrayRef<int64_t> shape, Type t) -> Type {
    return RankedTensorType::get(shape, t);
  };
  SmallVector<Type> args = {tensor({batch, rows, e}, elem),
                            tensor({batch, keys, spec.keyEmbedDim}, elem),
                            tensor({batch, keys, spec.valueEmbedDim}, elem),
                            tensor({e, e}, elem),
                            tensor({e, spec.keyEmbedDim}, elem),
                            tensor({e, spec.valueEmbedDim}, elem)};
  if (spec.mhaBias)
    args.push_back(tensor({3 * e}, elem));
  args.push_back(tensor({e, e}, elem));
  if (spec.mhaBias)
    args.push_back(tensor({e}, elem));
  if (spec.mask != MaskKind::None)
    args.push_back(tensor({dyn, dyn, dyn, dyn},
                          spec.mask == MaskKind::Bool ? b.getI1Type() : elem));
  Type output = tensor({batch, rows, e}, elem);
  args.push_back(output);
  func::FuncOp func = kernelFunction(b, loc, spec, args, {output});
  Block *body = &func.getBody().front();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(body);
  unsigned next = 6;
  Value inBias = spec.mhaBias ? body->getArgument(next++) : Value();
  Value outWeight = body->getArgument(next++);
  Value outBias = spec.mhaBias ? body->getArgument(next++) : Value();
  Value mask =
      spec.mask != MaskKind::None ? body->getArgument(next++) : Value();
  mlir::attn::AttentionAttributes attributes = attributesOf(b, spec);
  auto op = mlir::attn::MhaOp::create(
      b, loc, output, body->getArgument(0), body->getArgument(1),
      body->getArgument(2), body->getArguments().slice(3, 3), inBias, outWeight,
      outBias, mask, body->getArgument(next),
      b.getI64IntegerAttr(spec.mhaHeads), attributes.scale, attributes.causal,
      attributes.alignment, attributes.window, attributes.softcap);
  func::ReturnOp::create(b, loc, op->getResults());
  return func;
}

func::FuncOp buildKernelFunction(OpBuilder &b, Location loc,
                                 const KernelSpec &spec) {
  if (spec.mha)
    return buildMhaKernelFunction(b, loc, spec);
  if (spec.linear)
    return buildLinearKernelFunction(b, loc, spec);
  if (spec.additive)
    return buildAdditiveKernelFunction(b, loc, spec);
  MLIRContext *ctx = b.getContext();
  Type elem = elementTypeOf(ctx, spec.elementType);
  int64_t dyn = ShapedType::kDynamic;
  auto tensor = [&](ArrayRef<int64_t> shape, Type t) {
    return RankedTensorType::get(shape, t);
  };
  // Sizes the spec declares are static in the types (the runtime checks
  // them): a decoding kernel with Sq = 1, say, is specialized for it.
  auto size = [&](int index) {
    return spec.staticSizes[index] < 0 ? dyn : spec.staticSizes[index];
  };
  int64_t batch = size(0), heads = size(1), kvHeads = size(2), rows = size(3),
          keys = size(4);
  // dcaptures names f32 captures of the kernel's modifiers.
  for (size_t number = 0; number < kMaxCaptures; ++number) {
    if (!(spec.gradCaptures & (1u << number)))
      continue;
    if (number >= spec.captures.size() ||
        spec.captures[number].type != CaptureType::F32) {
      mlir::emitError(loc)
          << "kernel '" << spec.name << "': dcaptures names capture " << number
          << ", which "
          << (number >= spec.captures.size()
                  ? "its modifiers do not capture (they capture " +
                        std::to_string(spec.captures.size()) + " tensors)"
                  : std::string("is not f32 (only an f32 tensor has a "
                                "gradient)"));
      return {};
    }
  }
  Type q = tensor({batch, heads, rows, spec.headDim}, elem);
  Type k = tensor({batch, kvHeads, keys, spec.headDim}, elem);
  Type v = tensor({batch, kvHeads, keys, spec.valueDim}, elem);
  Type o = tensor({batch, heads, rows, spec.valueDim}, elem);
  Type lse = tensor({batch, heads, rows}, b.getF32Type());
  Type weights = tensor({batch, heads, rows, keys}, b.getF32Type());
  SmallVector<Type> args = {q, k};
  if (!spec.weights)
    args.push_back(v);
  if (spec.mask != MaskKind::None)
    args.push_back(tensor({dyn, dyn, dyn, dyn},
                          spec.mask == MaskKind::Bool ? b.getI1Type() : elem));
  for (const CaptureSpec &capture : spec.captures) {
    SmallVector<int64_t> shape;
    for (int d = 0; d < capture.rank; ++d)
      shape.push_back(capture.staticSizes[d] < 0 ? dyn
                                                  : capture.staticSizes[d]);
    args.push_back(tensor(shape, captureElementType(ctx, capture.type)));
  }
  if (spec.sinks)
    args.push_back(tensor({heads}, b.getF32Type()));
  args.push_back(spec.weights ? weights : o);
  SmallVector<Type> results = {spec.weights ? weights : o};
  if (spec.weights) {
    // [LSE] read before W.
    if (spec.lse)
      args.insert(args.end() - 1, lse);
  } else if (spec.backward) {
    // O and LSE of the forward, dO, [dLSE]; then dQ, dK, dV.
    args.append({lse, o});
    if (spec.lse)
      args.push_back(lse);
    args.append({q, k, v});
    results = {q, k, v};
    // [dM], the bias's gradient [B, Hq, Sq, Sk] f32.
    if (spec.gradMask) {
      args.push_back(weights);
      results.push_back(weights);
    }
    // The captures' gradients, [B, Hkv, <the capture's shape>] f32 each.
    for (auto [number, capture] : llvm::enumerate(spec.captures)) {
      if (!(spec.gradCaptures & (1u << number)))
        continue;
      SmallVector<int64_t> shape = {batch, kvHeads};
      for (int d = 0; d < capture.rank; ++d)
        shape.push_back(capture.staticSizes[d] < 0 ? dyn
                                                   : capture.staticSizes[d]);
      args.push_back(tensor(shape, b.getF32Type()));
      results.push_back(args.back());
    }
  } else if (spec.lse) {
    args.push_back(lse);
    results.push_back(lse);
  }
  // Dropout's probability and seed, last.
  if (spec.dropout)
    args.append({b.getF32Type(), b.getI64Type()});
  func::FuncOp func = kernelFunction(b, loc, spec, args, results);
  Block *body = &func.getBody().front();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(body);

  unsigned next = spec.weights ? 2 : 3;
  Value mask =
      spec.mask != MaskKind::None ? body->getArgument(next++) : Value();
  ValueRange captures = body->getArguments().slice(next, spec.captures.size());
  next += spec.captures.size();
  Value sinks = spec.sinks ? body->getArgument(next++) : Value();
  Value weightsLse =
      spec.weights && spec.lse ? body->getArgument(next++) : Value();
  SmallVector<Value> outs = {body->getArgument(next++)};
  if (spec.lse && !spec.backward && !spec.weights)
    outs.push_back(body->getArgument(next++));

  mlir::attn::AttentionAttributes attributes = attributesOf(b, spec);
  attributes.captures.assign(captures.begin(), captures.end());
  // The modifiers' regions, cloned by the op's builder from the source's
  // op (which lives until the function is built).
  OwningOpRef<ModuleOp> modifiers;
  if (!spec.modifiers.empty()) {
    modifiers = parseSourceString<ModuleOp>(spec.modifiers, ParserConfig(ctx));
    mlir::attn::AttentionOp source;
    if (modifiers)
      modifiers->walk([&](mlir::attn::AttentionOp op) { source = op; });
    if (!source) {
      mlir::emitError(loc) << "kernel '" << spec.name
                           << "': its modifiers' source does not parse";
      func.erase();
      return {};
    }
    attributes.modifiers = source;
    attributes.blockMask = source->getAttrOfType<DenseI64ArrayAttr>(
        mlir::attn::kBlockMaskAttrName);
    // A gradient reaches a capture through the score_mod alone (checked
    // here, not left to the op's verifier, so that the message names the
    // user's spec rather than an internal error).
    llvm::SmallDenseSet<int64_t> read = mlir::attn::scoreModReads(source);
    for (size_t number = 0; number < spec.captures.size(); ++number)
      if ((spec.gradCaptures & (1u << number)) && !read.contains(number)) {
        mlir::emitError(loc)
            << "kernel '" << spec.name << "': dcaptures names capture "
            << number
            << ", which its score_mod does not read (a gradient reaches a "
               "captured tensor through the score_mod alone)";
        func.erase();
        return {};
      }
  }
  if (spec.dropout) {
    unsigned count = body->getNumArguments();
    attributes.dropoutP = body->getArgument(count - 2);
    attributes.dropoutSeed = body->getArgument(count - 1);
  }
  if (spec.weights) {
    auto op = mlir::attn::AttentionWeightsOp::create(
        b, loc, TypeRange{weights}, body->getArgument(0), body->getArgument(1),
        mask, Value(), weightsLse, outs[0], attributes);
    func::ReturnOp::create(b, loc, op.getResults());
    return func;
  }
  if (spec.backward) {
    Value output = outs[0], forwardLse = body->getArgument(next++);
    Value gradOutput = body->getArgument(next++);
    Value gradLse = spec.lse ? body->getArgument(next++) : Value();
    Value gradQuery = body->getArgument(next++);
    Value gradKey = body->getArgument(next++);
    Value gradValue = body->getArgument(next++);
    Value gradMask = spec.gradMask ? body->getArgument(next++) : Value();
    SmallVector<Value> gradCaptures;
    SmallVector<int64_t> gradCaptureNumbers;
    for (size_t number = 0; number < spec.captures.size(); ++number)
      if (spec.gradCaptures & (1u << number)) {
        gradCaptures.push_back(body->getArgument(next++));
        gradCaptureNumbers.push_back(static_cast<int64_t>(number));
      }
    auto op = mlir::attn::AttentionBackwardOp::create(
        b, loc, results, body->getArgument(0), body->getArgument(1),
        body->getArgument(2), mask, Value(), output, forwardLse, gradOutput,
        gradLse, gradQuery, gradKey, gradValue, gradMask, attributes,
        gradCaptures,
        gradCaptures.empty() ? DenseI64ArrayAttr()
                             : b.getDenseI64ArrayAttr(gradCaptureNumbers));
    func::ReturnOp::create(b, loc, op.getResults());
    return func;
  }
  auto op = mlir::attn::AttentionOp::create(
      b, loc, ValueRange(outs).getTypes(), body->getArgument(0),
      body->getArgument(1), body->getArgument(2), mask, Value(), sinks, outs,
      attributes);
  func::ReturnOp::create(b, loc, op.getResults());
  return func;
}

static DialectRegistry kernelRegistry() {
  DialectRegistry registry;
  mlir::attn::registerAttnDialects(registry);
  return registry;
}

KernelModule::KernelModule(const std::vector<KernelSpec> &specs)
    : context(kernelRegistry()) {
  context.loadAllAvailableDialects();
  handler = std::make_unique<ScopedDiagnosticHandler>(
      &context, [this](Diagnostic &diag) {
        diagnostics += diag.str() + "\n";
        return success();
      });
  OpBuilder b(&context);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> built = ModuleOp::create(b, loc);
  b.setInsertionPointToEnd(built->getBody());
  for (const KernelSpec &spec : specs)
    if (!buildKernelFunction(b, loc, spec)) {
      diagnostics = "cannot build kernel '" + spec.name + "':\n" + diagnostics;
      return;
    }
  if (failed(verify(*built))) {
    diagnostics =
        "internal error: the kernel function does not verify:\n" + diagnostics;
    return;
  }
  module = std::move(built);
}

} // namespace attn

//===----------------------------------------------------------------------===//
// Specs from ops
//===----------------------------------------------------------------------===//

namespace attn {
namespace {
/// The spec's element type of an op's f32, f16 or bf16.
ElementType specElementType(Type elem) {
  return elem.isF32()   ? ElementType::F32
         : elem.isF16() ? ElementType::F16
                        : ElementType::BF16;
}

/// A declared size as a spec records it: -1 where dynamic.
int64_t staticOr(int64_t size) {
  return ShapedType::isDynamic(size) ? int64_t(-1) : size;
}

/// KernelSpec::modifiers for `regions` reading `captureTypes`: a function
/// of a 1x1x1x1 Q and the captures around an attn.attention that holds the
/// regions (which the kernel's op clones).
std::string modifiersSource(const std::string &regions,
                            const std::vector<std::string> &captureTypes) {
  const char *t = "tensor<1x1x1x1xf32>";
  // Names the printer never gives a region's values (%c0, %arg0, %cst...):
  // the regions do not shadow names of the function around them.
  std::string args = std::string("%attn_q: ") + t, names, types;
  for (size_t i = 0; i < captureTypes.size(); ++i) {
    std::string name = "%attn_capture" + std::to_string(i);
    args += ", " + name + ": " + captureTypes[i];
    names += (i ? ", " : "") + name;
    types += (i ? ", " : "") + captureTypes[i];
  }
  std::string captures =
      captureTypes.empty() ? "" : " captures(" + names + " : " + types + ")";
  return "func.func @modifiers(" + args + ") {\n  %attn_o = attn.attention " +
         "ins(%attn_q, %attn_q, %attn_q : " + t + ", " + t + ", " + t + ")" +
         captures + " outs(%attn_q : " + t + ")\n  " + regions + " -> " + t +
         "\n  return\n}\n";
}

/// Fills spec.captures from `op`'s captures.
bool captureSpecs(mlir::attn::AttentionOp op, KernelSpec &spec,
                  std::string &error) {
  spec.captures.clear();
  for (Value capture : op.getCaptures()) {
    auto type = cast<ShapedType>(capture.getType());
    CaptureSpec c;
    Type element = type.getElementType();
    c.type = element.isF32()         ? CaptureType::F32
             : element.isInteger(8)  ? CaptureType::Bool
             : element.isInteger(32) ? CaptureType::I32
                                     : CaptureType::I64;
    c.rank = static_cast<int>(type.getRank());
    for (int d = 0; d < c.rank; ++d)
      c.staticSizes[d] =
          type.isDynamicDim(d) ? int64_t(-1) : type.getDimSize(d);
    spec.captures.push_back(c);
  }
  if (spec.captures.size() > kMaxCaptures) {
    error = "attn.attention captures " + std::to_string(spec.captures.size()) +
            " tensors; a kernel takes at most " + std::to_string(kMaxCaptures);
    return false;
  }
  return true;
}

/// The mask kind and broadcast dims, band, scale and soft cap of an op
/// that attends as attn.attention does (attn.attention, attn.mha).
template <typename OpTy>
static void forwardAttributesOf(OpTy op, KernelSpec &spec) {
  if (Value mask = op.getMask()) {
    auto m = cast<ShapedType>(mask.getType());
    spec.mask =
        m.getElementType().isInteger(1) ? MaskKind::Bool : MaskKind::Bias;
    for (int d = 0; d < 3; ++d)
      spec.maskBroadcast[d] = m.getDimSize(d) == 1;
  }
  spec.causal = op.getCausal();
  if (auto alignment = op.getAlignment())
    spec.alignment = *alignment == mlir::attn::DiagonalAlignment::top_left
                         ? Alignment::TopLeft
                         : Alignment::BottomRight;
  if (auto window = op.getWindowAttr()) {
    spec.windowLeft = window.getLeft();
    spec.windowRight = window.getRight();
  }
  if (auto scale = op.getScaleAttr())
    spec.scale = scale.getValueAsDouble();
  if (auto softcap = op.getSoftcapAttr())
    spec.softcap = softcap.getValueAsDouble();
}

/// The regions of `op` and its capture types, as modifiersSource takes them.
void printModifiers(mlir::attn::AttentionOp op, std::string &regions,
                    std::vector<std::string> &captureTypes) {
  // Each block with its arguments, its ops named by one AsmState.
  std::string text;
  llvm::raw_string_ostream os(text);
  AsmState state(op);
  for (Region &region : op.getModifiers()) {
    os << (&region == mlir::attn::scoreModOf(op) ? "score_mod " : "mask_mod ");
    os << "{\n";
    Block &block = region.front();
    os << "^bb0(";
    llvm::interleaveComma(block.getArguments(), os, [&](BlockArgument arg) {
      arg.printAsOperand(os, state);
      os << ": " << arg.getType();
    });
    os << "):\n";
    for (Operation &inner : block) {
      inner.print(os, state);
      os << "\n";
    }
    os << "} ";
  }
  // The block mask's table, in the attribute dictionary after the regions.
  if (auto table = op->getAttrOfType<DenseI64ArrayAttr>(
          mlir::attn::kBlockMaskAttrName))
    os << "{" << mlir::attn::kBlockMaskAttrName << " = " << table << "} ";
  regions = text;
  for (Value capture : op.getCaptures()) {
    std::string type;
    llvm::raw_string_ostream ts(type);
    ts << capture.getType();
    captureTypes.push_back(type);
  }
}
} // namespace

bool setModifiers(KernelSpec &spec, const std::string &regions,
                  const std::vector<std::string> &captureTypes,
                  std::string &error) {
  MLIRContext ctx(kernelRegistry());
  ctx.loadAllAvailableDialects();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    diagnostics += diag.str() + "\n";
    return success();
  });
  std::string source = modifiersSource(regions, captureTypes);
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(source, ParserConfig(&ctx));
  mlir::attn::AttentionOp op;
  if (module)
    module->walk([&](mlir::attn::AttentionOp found) { op = found; });
  if (!op) {
    error = "the modifiers do not parse: " + diagnostics;
    return false;
  }
  if (!captureSpecs(op, spec, error))
    return false;
  spec.modifiers = source;
  spec.scoreMod = mlir::attn::scoreModOf(op) != nullptr;
  if (auto table =
          op->getAttrOfType<DenseI64ArrayAttr>(mlir::attn::kBlockMaskAttrName))
    std::copy(table.asArrayRef().begin(), table.asArrayRef().end(),
              spec.blockTable);
  return true;
}
bool specFromOp(mlir::attn::AttentionOp op, KernelSpec &spec,
                std::string &error) {
  if (op.getDiagonal()) {
    error = "attn.attention with a diagonal operand is a tile of a larger "
            "op; compile the untiled op";
    return false;
  }
  auto q = op.getQuery().getType(), k = op.getKey().getType(),
       v = op.getValue().getType();
  Type elem = q.getElementType();
  spec.elementType = specElementType(elem);
  spec.headDim = q.getDimSize(3);
  spec.valueDim = v.getDimSize(3);
  forwardAttributesOf(op, spec);
  spec.lse = static_cast<bool>(op.getLse());
  spec.sinks = static_cast<bool>(op.getSinks());
  if (mlir::attn::hasModifiers(op)) {
    std::string regions;
    std::vector<std::string> captureTypes;
    printModifiers(op, regions, captureTypes);
    if (!setModifiers(spec, regions, captureTypes, error))
      return false;
  }
  spec.staticSizes[0] = staticOr(q.getDimSize(0));
  spec.staticSizes[1] = staticOr(q.getDimSize(1));
  spec.staticSizes[2] = staticOr(k.getDimSize(1));
  spec.staticSizes[3] = staticOr(q.getDimSize(2));
  spec.staticSizes[4] = staticOr(k.getDimSize(2));
  return true;
}

/// B, Hq, Hkv, Sq, Sk of a linear op's query and key.
static void copyStaticSizes(ShapedType q, ShapedType k, KernelSpec &spec) {
  spec.staticSizes[0] = staticOr(q.getDimSize(0));
  spec.staticSizes[1] = staticOr(q.getDimSize(1));
  spec.staticSizes[2] = staticOr(k.getDimSize(1));
  spec.staticSizes[3] = staticOr(q.getDimSize(2));
  spec.staticSizes[4] = staticOr(k.getDimSize(2));
}

/// The spec of an attn.linear op.
static void specFromLinearOp(mlir::attn::LinearOp op, KernelSpec &spec) {
  auto q = cast<ShapedType>(op.getQuery().getType());
  auto k = cast<ShapedType>(op.getKey().getType());
  Type elem = q.getElementType();
  spec.elementType = specElementType(elem);
  spec.linear = true;
  spec.headDim = q.getDimSize(3);
  spec.valueDim = cast<ShapedType>(op.getValue().getType()).getDimSize(3);
  spec.causal = op.getCausal();
  spec.chunk = op.getChunkRows();
  spec.eps = op.getEffectiveEps();
  spec.featureMap = static_cast<FeatureMap>(op.getEffectiveFeatureMap());
  spec.unnormalized = op.getUnnormalized();
  // The kernel reads a state and writes one, or neither.
  spec.linearState = op.getStateIn() || op.getStateOut();
  copyStaticSizes(q, k, spec);
}

/// The spec of an attn.linear_backward op.
static void specFromLinearBackwardOp(mlir::attn::LinearBackwardOp op,
                                     KernelSpec &spec) {
  auto q = cast<ShapedType>(op.getQuery().getType());
  auto k = cast<ShapedType>(op.getKey().getType());
  spec.elementType = specElementType(q.getElementType());
  spec.linear = true;
  spec.linearBackward = true;
  spec.causal = op.getCausal();
  spec.headDim = q.getDimSize(3);
  spec.valueDim = cast<ShapedType>(op.getValue().getType()).getDimSize(3);
  spec.eps = op.getEffectiveEps();
  spec.featureMap = static_cast<FeatureMap>(op.getEffectiveFeatureMap());
  spec.unnormalized = op.getUnnormalized();
  // The kernel reads the final state's gradients and writes the initial
  // state's, or neither.
  spec.linearState = op.getGradFinalState() || op.getGradInitialState();
  copyStaticSizes(q, k, spec);
}

/// The spec of an attn.additive or attn.additive_backward op.
template <typename OpTy>
static void specFromAdditiveOp(OpTy op, KernelSpec &spec) {
  auto q = cast<ShapedType>(op.getQuery().getType());
  auto k = cast<ShapedType>(op.getKeys().getType());
  Type elem = q.getElementType();
  spec.elementType = specElementType(elem);
  spec.additive = true;
  spec.queryDim = q.getDimSize(2);
  spec.headDim = k.getDimSize(2);
  spec.valueDim = cast<ShapedType>(op.getValues().getType()).getDimSize(2);
  spec.attnDim = cast<ShapedType>(op.getQueryWeight().getType()).getDimSize(0);
  if constexpr (std::is_same_v<OpTy, mlir::attn::AdditiveOp>)
    spec.additiveWeights = static_cast<bool>(op.getWeights());
  else
    spec.additiveBackward = true;
  if (Value mask = op.getMask()) {
    auto m = cast<ShapedType>(mask.getType());
    spec.mask = MaskKind::Bool;
    spec.maskBroadcast[0] = m.getDimSize(0) == 1;
    spec.maskBroadcast[2] = m.getDimSize(1) == 1;
  }
  spec.staticSizes[0] = staticOr(q.getDimSize(0));
  spec.staticSizes[3] = staticOr(q.getDimSize(1));
  spec.staticSizes[4] = staticOr(k.getDimSize(1));
}

/// The spec of an attn.mha op (its forward attributes as the op has them);
/// false with `error` for an op that a kernel's arguments cannot state.
static bool specFromMhaOp(mlir::attn::MhaOp op, KernelSpec &spec,
                          std::string &error) {
  if (static_cast<bool>(op.getInBias()) != static_cast<bool>(op.getOutBias())) {
    error = "attn-compile takes an attn.mha with both biases (in_bias and "
            "out_bias) or neither, as torch.nn.MultiheadAttention has them; "
            "pass zeros for the one the layer lacks";
    return false;
  }
  auto q = cast<ShapedType>(op.getQuery().getType());
  auto k = cast<ShapedType>(op.getKey().getType());
  spec.elementType = specElementType(q.getElementType());
  spec.mha = true;
  spec.embedDim = q.getDimSize(2);
  spec.keyEmbedDim = k.getDimSize(2);
  spec.valueEmbedDim = cast<ShapedType>(op.getValue().getType()).getDimSize(2);
  spec.mhaHeads = op.getNumHeads();
  spec.headDim = spec.valueDim = spec.embedDim / spec.mhaHeads;
  spec.mhaBias = op.getInBias() || op.getOutBias();
  forwardAttributesOf(op, spec);
  spec.staticSizes[0] = staticOr(q.getDimSize(0));
  spec.staticSizes[3] = staticOr(q.getDimSize(1));
  spec.staticSizes[4] = staticOr(k.getDimSize(1));
  return true;
}

bool specsFromMLIRFile(const std::string &path, std::vector<KernelSpec> &specs,
                       std::string &error) {
  DialectRegistry registry;
  mlir::attn::registerAttnDialects(registry);
  MLIRContext ctx(registry);
  std::string diagnostics;
  llvm::raw_string_ostream diagStream(diagnostics);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &ctx, diagStream);
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFileOrSTDIN(path);
  if (!file) {
    error = "cannot read " + path + ": " + file.getError().message();
    return false;
  }
  std::string problem = nestingProblem((*file)->getBuffer());
  if (!problem.empty()) {
    error = path + ": " + problem;
    return false;
  }
  sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&ctx));
  if (!module) {
    error = diagnostics.empty() ? "cannot parse " + path : diagnostics;
    return false;
  }
  bool ok = true;
  module->walk([&](Operation *op) {
    if (!ok || !isa<mlir::attn::AttentionOp, mlir::attn::LinearOp,
                    mlir::attn::LinearBackwardOp, mlir::attn::AdditiveOp,
                    mlir::attn::AdditiveBackwardOp, mlir::attn::MhaOp>(op))
      return;
    KernelSpec spec;
    if (auto linear = dyn_cast<mlir::attn::LinearOp>(op)) {
      specFromLinearOp(linear, spec);
    } else if (auto grads = dyn_cast<mlir::attn::LinearBackwardOp>(op)) {
      specFromLinearBackwardOp(grads, spec);
    } else if (auto additive = dyn_cast<mlir::attn::AdditiveOp>(op)) {
      specFromAdditiveOp(additive, spec);
    } else if (auto grads = dyn_cast<mlir::attn::AdditiveBackwardOp>(op)) {
      specFromAdditiveOp(grads, spec);
    } else if (auto mha = dyn_cast<mlir::attn::MhaOp>(op)) {
      if (!specFromMhaOp(mha, spec, error)) {
        ok = false;
        return;
      }
    } else if (!specFromOp(cast<mlir::attn::AttentionOp>(op), spec, error)) {
      ok = false;
      return;
    }
    auto func = op->getParentOfType<func::FuncOp>();
    std::string base = func ? func.getName().str() : "attention";
    std::string name = base;
    for (int n = 1; llvm::any_of(
             specs, [&](const KernelSpec &s) { return s.name == name; });
         ++n)
      name = base + "_" + std::to_string(n);
    std::string problem = kernelNameProblem(name);
    if (!problem.empty()) {
      error = path + ": the " + op->getName().getStringRef().str() + " in @" +
              base + " would make a kernel named '" + name + "': " + problem +
              "; rename the function (its name names the kernel)";
      ok = false;
      return;
    }
    spec.name = name;
    specs.push_back(spec);
  });
  if (ok && specs.empty()) {
    error = path + " holds no attn.attention, attn.linear, attn.additive or "
                   "attn.mha op "
                   "(backward and weights "
                   "kernels are made from --spec, with the keys 'backward' "
                   "and 'weights')";
    ok = false;
  }
  return ok;
}
} // namespace attn
