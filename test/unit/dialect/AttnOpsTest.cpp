//===- AttnOpsTest.cpp - Tests of the attn dialect's C++ API --------------===//
//
// Builds attn.attention through its generated C++ builders, the way passes
// and tools do, and checks what the lit tests cannot see directly: the
// verifier's result and the exact text of its diagnostics, the effective
// scale, the TilingInterface that attn-tile drives, the attn-tile pass run
// from a PassManager, and the printing and parsing of #attn.window.
//
//===----------------------------------------------------------------------===//

#include "dialect/AttnOps.h"
#include "dialect/AttnDialect.h"
#include "lib/Pipelines/Registration.h"
#include "lib/Transforms/Passes.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::attn;

namespace {

//===----------------------------------------------------------------------===//
// Fixture: a context with every attn dialect and a function to build into
//===----------------------------------------------------------------------===//

/// The shapes of one attn.attention; the defaults are a valid grouped-query
/// problem (Hq = 4 query heads over Hkv = 2 key/value heads, D = 16, Dv = 8).
struct Shapes {
  SmallVector<int64_t> query = {1, 4, 8, 16};
  SmallVector<int64_t> key = {1, 2, 32, 16};
  SmallVector<int64_t> value = {1, 2, 32, 8};
  SmallVector<int64_t> output = {1, 4, 8, 8};
  std::optional<SmallVector<int64_t>> mask;
};

/// The optional attributes of one attn.attention.
struct Options {
  std::optional<float> scale;
  bool causal = false;
  std::optional<DiagonalAlignment> alignment;
  std::optional<std::pair<std::optional<int64_t>, std::optional<int64_t>>>
      window;
};

class AttnOpsTest : public ::testing::Test {
protected:
  AttnOpsTest() : builder(&context) {
    DialectRegistry registry;
    registerAttnDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();

    loc = builder.getUnknownLoc();
    module = ModuleOp::create(loc);
    builder.setInsertionPointToEnd(module->getBody());
    auto func = func::FuncOp::create(builder, loc, "f",
                                     builder.getFunctionType({}, {}));
    body = func.addEntryBlock();
    builder.setInsertionPointToEnd(body);
  }

  /// A fresh function argument of `type`: an operand with no defining op.
  Value argument(Type type) { return body->addArgument(type, loc); }

  Value tensorArgument(ArrayRef<int64_t> shape, Type elementType = nullptr) {
    return argument(RankedTensorType::get(
        shape, elementType ? elementType : builder.getF32Type()));
  }

  AttentionOp buildAttention(const Shapes &shapes, const Options &options = {},
                             Value diagonal = nullptr) {
    Value query = tensorArgument(shapes.query);
    Value key = tensorArgument(shapes.key);
    Value value = tensorArgument(shapes.value);
    Value output = tensorArgument(shapes.output);
    Value mask = shapes.mask ? tensorArgument(*shapes.mask, builder.getI1Type())
                             : Value();
    FloatAttr scale =
        options.scale ? builder.getF32FloatAttr(*options.scale) : FloatAttr();
    UnitAttr causal = options.causal ? builder.getUnitAttr() : UnitAttr();
    DiagonalAlignmentAttr alignment =
        options.alignment
            ? DiagonalAlignmentAttr::get(&context, *options.alignment)
            : DiagonalAlignmentAttr();
    WindowAttr window = options.window
                            ? WindowAttr::get(&context, options.window->first,
                                              options.window->second)
                            : WindowAttr();
    AttentionAttributes attributes{scale, causal, alignment, window,
                                   /*softcap=*/FloatAttr()};
    return AttentionOp::create(builder, loc, TypeRange{output.getType()}, query,
                               key, value, mask, diagonal, /*sinks=*/Value(),
                               ValueRange{output}, attributes);
  }

  /// Verifies `op` and returns the error messages it emitted.
  std::vector<std::string> verifyErrors(Operation *op) {
    std::vector<std::string> messages;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
      if (diagnostic.getSeverity() == DiagnosticSeverity::Error)
        messages.push_back(diagnostic.str());
      return success();
    });
    LogicalResult result = verify(op);
    EXPECT_EQ(failed(result), !messages.empty());
    return messages;
  }

  MLIRContext context;
  OpBuilder builder;
  Location loc = UnknownLoc::get(&context);
  OwningOpRef<ModuleOp> module;
  Block *body = nullptr;
};

/// True if `text` contains `part`.
::testing::AssertionResult contains(const std::string &text,
                                    const std::string &part) {
  if (text.find(part) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "'" << text << "' does not contain '" << part << "'";
}

//===----------------------------------------------------------------------===//
// Verification
//===----------------------------------------------------------------------===//

TEST_F(AttnOpsTest, ValidGroupedQueryOpVerifies) {
  AttentionOp op = buildAttention(Shapes());
  EXPECT_TRUE(verifyErrors(op).empty());
  EXPECT_EQ(op.getOutputs().size(), 1u);
  EXPECT_FALSE(op.getLse());
  EXPECT_EQ(op.getOutput(), op.getDpsInits()[0]);
}

TEST_F(AttnOpsTest, ValidMaskedCausalOpVerifies) {
  Shapes shapes;
  shapes.mask = SmallVector<int64_t>{1, 1, 8, 32};
  Options options;
  options.causal = true;
  options.alignment = DiagonalAlignment::bottom_right;
  options.window = {{std::optional<int64_t>(4), std::nullopt}};
  AttentionOp op = buildAttention(shapes, options);
  EXPECT_TRUE(verifyErrors(op).empty());
  EXPECT_EQ(op.getAlignment(), DiagonalAlignment::bottom_right);
  EXPECT_EQ(op.getWindowAttr().getLeft(), std::optional<int64_t>(4));
  EXPECT_FALSE(op.getWindowAttr().getRight());
}

TEST_F(AttnOpsTest, HeadsNotAMultipleIsRejected) {
  Shapes shapes;
  shapes.key = {1, 3, 32, 16};
  shapes.value = {1, 3, 32, 8};
  std::vector<std::string> errors =
      verifyErrors(buildAttention(shapes).getOperation());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(contains(errors[0], "query heads (Hq = 4)"));
  EXPECT_TRUE(contains(errors[0], "key/value heads (Hkv = 3)"));
}

TEST_F(AttnOpsTest, KeyHeadDimMismatchIsRejected) {
  Shapes shapes;
  shapes.key = {1, 2, 32, 8};
  std::vector<std::string> errors =
      verifyErrors(buildAttention(shapes).getOperation());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(contains(errors[0], "key dim 3 (D)"));
  EXPECT_TRUE(contains(errors[0], "query's D = 16"));
  EXPECT_TRUE(contains(errors[0], "found 8"));
}

TEST_F(AttnOpsTest, MaskHeadDimMustBroadcastOrMatch) {
  Shapes shapes;
  // The mask's head dim is the query heads' (4) or 1, never Hkv (2).
  shapes.mask = SmallVector<int64_t>{1, 2, 8, 32};
  std::vector<std::string> errors =
      verifyErrors(buildAttention(shapes).getOperation());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(contains(errors[0], "mask dim 1"));
  EXPECT_TRUE(contains(errors[0], "1 (broadcast)"));
  EXPECT_TRUE(contains(errors[0], "Hq = 4"));
  EXPECT_TRUE(contains(errors[0], "found 2"));
}

TEST_F(AttnOpsTest, CausalWithoutDiagonalIsRejected) {
  Options options;
  options.causal = true;
  std::vector<std::string> errors =
      verifyErrors(buildAttention(Shapes(), options).getOperation());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(contains(errors[0], "causal"));
  EXPECT_TRUE(contains(errors[0], "align(top_left)"));
  EXPECT_TRUE(contains(errors[0], "align(bottom_right)"));
  EXPECT_TRUE(contains(errors[0], "diagonal operand"));
}

TEST_F(AttnOpsTest, CausalWithDiagonalOperandVerifies) {
  Options options;
  options.causal = true;
  Value diagonal = argument(builder.getIndexType());
  AttentionOp op = buildAttention(Shapes(), options, diagonal);
  EXPECT_TRUE(verifyErrors(op).empty());
  EXPECT_EQ(op.getDiagonal(), diagonal);
}

TEST_F(AttnOpsTest, DiagnosticsNameTheOp) {
  Shapes shapes;
  shapes.output = {1, 2, 8, 8};
  std::vector<std::string> errors =
      verifyErrors(buildAttention(shapes).getOperation());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(contains(errors[0], "'attn.attention' op output dim 1 (Hq)"));
  EXPECT_TRUE(contains(errors[0], "query's Hq = 4, found 2"));
}

//===----------------------------------------------------------------------===//
// The effective scale
//===----------------------------------------------------------------------===//

TEST_F(AttnOpsTest, EffectiveScaleDefaultsToInverseSqrtOfD) {
  AttentionOp op = buildAttention(Shapes());
  EXPECT_FLOAT_EQ(op.getEffectiveScale(), 0.25f); // 1/sqrt(16)

  Shapes tutorial; // The seed tutorials' d_k = 2, d_v = 4.
  tutorial.query = {1, 1, 3, 2};
  tutorial.key = {1, 1, 5, 2};
  tutorial.value = {1, 1, 5, 4};
  tutorial.output = {1, 1, 3, 4};
  AttentionOp small = buildAttention(tutorial);
  ASSERT_TRUE(verifyErrors(small).empty());
  EXPECT_FLOAT_EQ(small.getEffectiveScale(), 1.0f / std::sqrt(2.0f));
}

TEST_F(AttnOpsTest, EffectiveScaleIsTheAttributeWhenSet) {
  Options options;
  options.scale = 0.125f;
  AttentionOp op = buildAttention(Shapes(), options);
  ASSERT_TRUE(verifyErrors(op).empty());
  EXPECT_FLOAT_EQ(op.getEffectiveScale(), 0.125f);
}

//===----------------------------------------------------------------------===//
// TilingInterface
//===----------------------------------------------------------------------===//

TEST_F(AttnOpsTest, IteratorTypesAreThreeParallelThenReduction) {
  AttentionOp op = buildAttention(Shapes());
  auto tileable = cast<TilingInterface>(op.getOperation());
  SmallVector<utils::IteratorType> iterators = tileable.getLoopIteratorTypes();
  ASSERT_EQ(iterators.size(), 4u);
  EXPECT_EQ(iterators[0], utils::IteratorType::parallel);
  EXPECT_EQ(iterators[1], utils::IteratorType::parallel);
  EXPECT_EQ(iterators[2], utils::IteratorType::parallel);
  EXPECT_EQ(iterators[3], utils::IteratorType::reduction);
}

TEST_F(AttnOpsTest, IterationDomainIsBatchHeadsQueriesKeys) {
  AttentionOp op = buildAttention(Shapes());
  auto tileable = cast<TilingInterface>(op.getOperation());
  builder.setInsertionPoint(op);
  SmallVector<Range> domain = tileable.getIterationDomain(builder);
  ASSERT_EQ(domain.size(), 4u);
  // (B, Hq, Sq) of the query, then Sk of the key.
  const int64_t expected[] = {1, 4, 8, 32};
  for (auto [index, range] : llvm::enumerate(domain)) {
    EXPECT_EQ(getConstantIntValue(range.offset), std::optional<int64_t>(0))
        << "dim " << index;
    EXPECT_EQ(getConstantIntValue(range.stride), std::optional<int64_t>(1))
        << "dim " << index;
    EXPECT_EQ(getConstantIntValue(range.size),
              std::optional<int64_t>(expected[index]))
        << "dim " << index;
  }
}

TEST_F(AttnOpsTest, IterationDomainOfDynamicKeysReadsTheKey) {
  Shapes shapes;
  shapes.key = {1, 2, ShapedType::kDynamic, 16};
  shapes.value = {1, 2, ShapedType::kDynamic, 8};
  AttentionOp op = buildAttention(shapes);
  ASSERT_TRUE(verifyErrors(op).empty());
  builder.setInsertionPoint(op);
  SmallVector<Range> domain =
      cast<TilingInterface>(op.getOperation()).getIterationDomain(builder);
  ASSERT_EQ(domain.size(), 4u);
  auto size = dyn_cast<Value>(domain[3].size);
  ASSERT_TRUE(size);
  auto dim = size.getDefiningOp<tensor::DimOp>();
  ASSERT_TRUE(dim);
  EXPECT_EQ(dim.getSource(), op.getKey());
  EXPECT_EQ(dim.getConstantIndex(), std::optional<int64_t>(2));
}

//===----------------------------------------------------------------------===//
// The attn-tile pass
//===----------------------------------------------------------------------===//

constexpr const char *kCausalGqaModule = R"mlir(
func.func @causal_gqa(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>,
                      %v: tensor<2x2x128x64xf16>, %o: tensor<2x8x128x64xf16>)
    -> tensor<2x8x128x64xf16> {
  %r = attn.attention
      ins(%q, %k, %v : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>)
      outs(%o : tensor<2x8x128x64xf16>) causal align(bottom_right)
      -> tensor<2x8x128x64xf16>
  return %r : tensor<2x8x128x64xf16>
}
)mlir";

TEST_F(AttnOpsTest, TilePassProducesForallOfTiles) {
  OwningOpRef<ModuleOp> parsed =
      parseSourceString<ModuleOp>(kCausalGqaModule, &context);
  ASSERT_TRUE(parsed);

  PassManager pm(&context);
  AttnTilePassOptions options;
  options.queryTileSize = 32;
  pm.addNestedPass<func::FuncOp>(createAttnTilePass(options));
  ASSERT_TRUE(succeeded(pm.run(*parsed)));
  ASSERT_TRUE(succeeded(verify(*parsed)));

  SmallVector<scf::ForallOp> loops;
  parsed->walk([&](scf::ForallOp loop) { loops.push_back(loop); });
  ASSERT_EQ(loops.size(), 1u);
  // One loop over (B, Hq, Sq / 32): 2 x 8 x 4 tiles.
  EXPECT_EQ(loops[0].getRank(), 3u);

  SmallVector<AttentionOp> tiles;
  parsed->walk([&](AttentionOp op) { tiles.push_back(op); });
  ASSERT_EQ(tiles.size(), 1u);
  AttentionOp tile = tiles[0];
  EXPECT_TRUE(tile->getParentOfType<scf::ForallOp>());
  // A tile is one batch, one query head (reading one kv head), 32 query
  // rows and all keys; its diagonal is an operand in its own coordinates.
  EXPECT_EQ(tile.getQuery().getType().getShape(),
            ArrayRef<int64_t>({1, 1, 32, 64}));
  EXPECT_EQ(tile.getKey().getType().getShape(),
            ArrayRef<int64_t>({1, 1, 128, 64}));
  EXPECT_TRUE(tile.getCausal());
  EXPECT_TRUE(tile.getDiagonal());
  EXPECT_FALSE(tile.getAlignment());
}

TEST_F(AttnOpsTest, TilePassDefaultOptionsRun) {
  OwningOpRef<ModuleOp> parsed =
      parseSourceString<ModuleOp>(kCausalGqaModule, &context);
  ASSERT_TRUE(parsed);
  PassManager pm(&context);
  pm.addNestedPass<func::FuncOp>(createAttnTilePass());
  ASSERT_TRUE(succeeded(pm.run(*parsed)));
  bool sawForall = false;
  parsed->walk([&](scf::ForallOp) { sawForall = true; });
  EXPECT_TRUE(sawForall);
}

//===----------------------------------------------------------------------===//
// #attn.window
//===----------------------------------------------------------------------===//

std::string print(Attribute attr) {
  std::string text;
  llvm::raw_string_ostream os(text);
  attr.print(os);
  return text;
}

TEST_F(AttnOpsTest, WindowAttrRoundTrips) {
  struct Case {
    std::optional<int64_t> left, right;
    const char *text;
  } cases[] = {
      {256, std::nullopt, "#attn.window<left = 256>"},
      {std::nullopt, 0, "#attn.window<right = 0>"},
      {16, 4, "#attn.window<left = 16, right = 4>"},
  };
  for (const Case &c : cases) {
    WindowAttr window = WindowAttr::get(&context, c.left, c.right);
    std::string text = print(window);
    EXPECT_EQ(text, c.text);
    Attribute parsed = parseAttribute(text, &context);
    ASSERT_TRUE(parsed) << text;
    EXPECT_EQ(parsed, window) << text;
    auto parsedWindow = dyn_cast<WindowAttr>(parsed);
    ASSERT_TRUE(parsedWindow);
    EXPECT_EQ(parsedWindow.getLeft(), c.left);
    EXPECT_EQ(parsedWindow.getRight(), c.right);
  }
}

} // namespace
