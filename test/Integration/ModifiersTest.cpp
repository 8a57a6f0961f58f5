//===- ModifiersTest.cpp - Score and mask modifiers against the reference -===//
//
// Kernels whose attn.attention carries a score_mod and/or a mask_mod
// (docs/spec.md, "Score and mask modifiers"), compiled from their MLIR
// regions, against the float64 reference given the same modifiers written
// in C++: ALiBi (a captured slope per head), a relative-position bias table
// (2-d capture), document masking (i32 and i64 ids), prefix-LM, a sliding
// window with global tokens, a soft cap written as a score_mod, a mask_mod
// that empties whole rows and a score_mod that excludes by -inf. Each runs
// over f32/bf16/f16, GQA, Sq != Sk, D != Dv, lengths that are no multiple
// of any tile, with causal masks and masks combined, decoding with a key
// split, and the weights and backward kernels of the same modifiers (a
// mask_mod's forward also without the lane-rows micro-kernel); inputs
// are fresh, outputs NaN-poisoned, and a second run must be bit-identical.
//
//===----------------------------------------------------------------------===//
#include "lib/Compiler/Compiler.h"
#include "lib/Harness/Conformance.h"
#include "lib/Harness/Harness.h"
#include "lib/Harness/ModifierCases.h"
#include "test/Integration/GpuEmulation.h"
#include "test/Integration/Ptxas.h"
#include "test/Integration/SelectedCases.h"

#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace attn;

namespace {

using Mods = ModifierPtr;

Mods named(const char *name) { return modifierCase(name); }

struct ModCase {
  std::string label, spec;
  int64_t batch, headsQ, headsKv, seqQ, seqK;
  Mods mods;
  bool bshd = false;
  /// NaNs placed in Q, K or V: the reference says which rows they reach.
  std::vector<NanInput> nans = {};
};

void PrintTo(const ModCase &c, std::ostream *os) {
  *os << c.label << ": " << c.spec;
}

std::vector<ModCase> modifierCases() {
  return {
      {"alibi_f32", "d=64,lse", 2, 4, 2, 100, 100, named("alibi")},
      {"alibi_bf16_causal_gqa", "dtype=bf16,d=64,causal=bottom_right,lse", 1, 8,
       2, 37, 101, named("alibi")},
      {"alibi_f16_dv", "dtype=f16,d=64,dv=32,lse", 1, 4, 4, 65, 130,
       named("alibi"), true},
      {"alibi_decode_split", "d=128,lse,sizes=?:?:?:1:?", 1, 2, 1, 1, 700,
       named("alibi")},
      {"relative_bias_f32", "d=32,lse", 1, 4, 2, 77, 90,
       named("relative_bias")},
      {"relative_bias_bf16_window", "dtype=bf16,d=64,window=20:5,lse", 2, 4, 1,
       64, 64, named("relative_bias")},
      {"short_tables_f32", "d=64,lse", 1, 4, 2, 90, 100, named("short_tables")},
      {"short_tables_bf16_causal_gqa", "dtype=bf16,d=64,causal,lse", 2, 4, 2,
       70, 130, named("short_tables")},
      {"short_tables_f16_decode", "dtype=f16,d=64,lse,sizes=?:?:?:1:?", 1, 4, 1,
       1, 300, named("short_tables")},
      {"documents_f32", "d=64,lse", 1, 4, 2, 130, 130, named("documents")},
      {"documents_bf16_causal", "dtype=bf16,d=64,causal,lse", 2, 2, 2, 150, 150,
       named("documents")},
      {"documents_f16_sq_ne_sk_mask", "dtype=f16,d=48,dv=80,mask=bool:b1h1,lse",
       1, 4, 2, 33, 190, named("documents")},
      {"documents_decode", "d=64,causal=bottom_right,lse,sizes=?:?:?:3:?", 1, 4,
       1, 3, 300, named("documents")},
      {"documents_blocks_f32", "d=64,lse", 1, 4, 2, 130, 170,
       named("documents_blocks")},
      {"documents_blocks_bf16_causal", "dtype=bf16,d=64,causal,lse", 2, 2, 1,
       150, 150, named("documents_blocks")},
      {"documents_blocks_decode",
       "d=64,causal=bottom_right,lse,sizes=?:?:?:3:?", 1, 4, 1, 3, 300,
       named("documents_blocks")},
      {"head_stripes_blocks_f32", "d=32,lse", 2, 3, 3, 100, 90,
       named("head_stripes_blocks")},
      {"prefix_lm_f32", "d=64,lse", 1, 2, 1, 120, 120, named("prefix_lm")},
      {"prefix_lm_bf16_bias", "dtype=bf16,d=64,mask=bias:h1,lse", 2, 4, 2, 90,
       90, named("prefix_lm")},
      {"window_global_f32", "d=64,lse", 1, 4, 2, 140, 140,
       named("window_global")},
      {"window_global_f16", "dtype=f16,d=64,lse", 1, 2, 2, 70, 70,
       named("window_global")},
      {"positions_f32", "d=64,lse", 2, 4, 2, 45, 150, named("positions")},
      {"positions_f32_causal", "d=64,dv=48,causal=bottom_right,lse", 1, 2, 1,
       70, 133, named("positions")},
      {"positions_bf16", "dtype=bf16,d=64,lse", 1, 4, 2, 66, 90,
       named("positions")},
      {"softcap_mod_f32", "d=64,scale=0.5,lse", 1, 4, 2, 60, 77,
       named("softcap")},
      {"softcap_mod_bf16_causal", "dtype=bf16,d=64,causal,scale=0.5,lse", 1, 4,
       2, 60, 60, named("softcap")},
      {"empty_rows_f32", "d=64,lse", 2, 2, 1, 43, 51, named("empty_rows")},
      {"empty_rows_bf16_causal", "dtype=bf16,d=64,causal=bottom_right,lse", 2,
       2, 2, 40, 55, named("empty_rows")},
      {"minus_inf_f32", "d=64,lse", 2, 4, 2, 50, 66, named("minus_inf")},
      {"minus_inf_softcap", "d=64,softcap=5,lse", 1, 2, 1, 45, 45,
       named("minus_inf")},
      {"alibi_documents_f32", "d=64,causal,lse", 1, 4, 2, 129, 129,
       named("alibi_documents")},
      {"alibi_documents_bf16", "dtype=bf16,d=128,gqa=2,lse", 1, 4, 2, 70, 95,
       named("alibi_documents")},
      {"nonlinear_f32", "d=64,scale=0.5,lse", 2, 4, 2, 70, 90,
       named("nonlinear")},
      {"nonlinear_bf16_causal_bias", "dtype=bf16,d=64,causal,mask=bias,lse", 1,
       4, 2, 50, 66, named("nonlinear")},
      // A NaN at a key (or row) that the modifiers exclude for some rows
      // and keep for others reaches exactly the rows that keep it: an
      // excluded key's V is dropped, not multiplied by its weight of 0.
      {"documents_nan_f32",
       "d=64,lse",
       1,
       4,
       2,
       130,
       130,
       named("documents"),
       false,
       {{'v', 0, 20, 3}, {'k', 0, 70, 5}, {'q', 0, 40, 1}}},
      {"documents_nan_bf16_causal",
       "dtype=bf16,d=64,causal,lse",
       1,
       2,
       2,
       150,
       150,
       named("documents"),
       false,
       {{'v', 0, 20, 3}, {'v', 0, 100, 0}}},
      {"documents_nan_decode",
       "dtype=bf16,d=64,lse,sizes=?:?:?:3:?",
       1,
       4,
       1,
       3,
       300,
       named("documents"),
       false,
       {{'v', 0, 2, 1}, {'v', 0, 150, 2}}},
      {"minus_inf_nan_bf16",
       "dtype=bf16,d=128,lse",
       1,
       4,
       2,
       60,
       70,
       named("minus_inf"),
       false,
       {{'v', 0, 10, 4}}},
      {"minus_inf_nan_f16_gqa",
       "dtype=f16,d=64,lse",
       1,
       4,
       1,
       50,
       66,
       named("minus_inf"),
       false,
       {{'v', 0, 13, 0}}},
  };
}

std::string caseName(const ::testing::TestParamInfo<ModCase> &info) {
  return info.param.label;
}

/// Which kernel of a case: the forward, its weights or its backward; or
/// the forward compiled without the lane-rows micro-kernel (the packed one
/// then takes the mask_mod, as where the target has no lane-rows tile, with
/// dropout or with the bf16 dot product).
enum class Kind { Forward, Weights, Backward, PackedForward };

KernelSpec specOf(const ModCase &c, Kind kind) {
  std::string error, text = "name=" + c.label + "," + c.spec;
  if (kind == Kind::Weights) {
    // A weights kernel reads no V: no dv.
    size_t at = text.find(",dv=");
    if (at != std::string::npos)
      text.erase(at, text.find(',', at + 1) - at);
    text += ",weights";
  }
  if (kind == Kind::Backward)
    text += text.find("mask=bias") != std::string::npos ? ",backward,dbias"
                                                        : ",backward";
  std::optional<KernelSpec> spec = parseKernelSpec(text, error);
  EXPECT_TRUE(spec) << text << ": " << error;
  if (!spec)
    return {};
  EXPECT_TRUE(setModifiers(*spec, c.mods->regions, c.mods->captureTypes, error))
      << c.label << ": " << error;
  return *spec;
}

bool backwardTakes(const ModCase &c) {
  // sizes= decoding kernels have no backward form to check here.
  return c.spec.find("sizes=") == std::string::npos;
}

/// Whether the default forward of a case may take the lane-rows path with a
/// mask_mod (prefill, with or without a mask operand), so that its packed
/// form is checked too.
bool packedFormDiffers(const ModCase &c) {
  return c.mods->maskMod && c.spec.find("sizes=") == std::string::npos;
}

/// One library per kind for the suite.
struct Library {
  std::string directory, path;
  attn_module *module = nullptr;

  /// Compiles the kernels of kind `kind` of the cases in `labels`; nothing
  /// when there are none.
  void build(Kind kind, const std::set<std::string> &labels) {
    std::vector<KernelSpec> specs;
    for (const ModCase &c : modifierCases()) {
      if (!labels.count(c.label))
        continue;
      if (kind == Kind::Weights && c.spec.find("sizes=") != std::string::npos)
        continue;
      if (kind == Kind::Backward && !backwardTakes(c))
        continue;
      if (kind == Kind::PackedForward && !packedFormDiffers(c))
        continue;
      specs.push_back(specOf(c, kind));
    }
    if (specs.empty())
      return;
    llvm::SmallString<128> dir;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("attn-modifiers", dir));
    directory = dir.str().str();
    path = directory + "/modifiers.so";
    std::string error;
    CompileOptions options;
    if (kind == Kind::PackedForward)
      options.laneRows = 0;
    ASSERT_TRUE(
        compileKernels(specs, options, OutputKind::SharedLibrary, path, error))
        << error;
    ASSERT_EQ(attn_module_load(path.c_str(), &module), ATTN_OK)
        << attn_last_error();
  }
  void release() {
    attn_module_unload(module);
    if (!path.empty()) {
      llvm::sys::fs::remove(path);
      llvm::sys::fs::remove(directory);
    }
    *this = Library();
  }
  const attn_kernel_desc *find(const std::string &name) {
    const attn_kernel_desc *kernel = nullptr;
    EXPECT_EQ(attn_module_find(module, name.c_str(), &kernel), ATTN_OK)
        << attn_last_error();
    return kernel;
  }
};

class Modifiers : public ::testing::TestWithParam<ModCase> {
public:
  static void SetUpTestSuite() {
    ASSERT_EQ(attn_thread_pool_create(2, &pool), ATTN_OK);
    std::set<std::string> forwardCases =
        selectedCases("ForwardMatchesReference");
    for (const std::string &label : selectedCases("BlockTableFromTheMaskMod"))
      forwardCases.insert(label);
    forward.build(Kind::Forward, forwardCases);
    weights.build(Kind::Weights, selectedCases("WeightsMatchReference"));
    backward.build(Kind::Backward,
                   selectedCases("BackwardMatchesReferenceGradient"));
    packedForward.build(Kind::PackedForward,
                        selectedCases("PackedForwardMatchesReference"));
  }
  static void TearDownTestSuite() {
    forward.release();
    weights.release();
    backward.release();
    packedForward.release();
    attn_thread_pool_destroy(pool);
  }
  static Library forward, weights, backward, packedForward;
  static attn_thread_pool *pool;

  static Problem problemOf(const ModCase &c, Kind kind) {
    Problem p;
    p.spec = specOf(c, kind);
    p.batch = c.batch;
    p.headsQ = c.headsQ;
    p.headsKv = c.headsKv;
    p.seqQ = c.seqQ;
    p.seqK = c.seqK;
    p.bshd = c.bshd;
    p.seed = std::hash<std::string>()(c.label);
    p.modifiers = c.mods;
    return p;
  }
};
Library Modifiers::forward, Modifiers::weights, Modifiers::backward,
    Modifiers::packedForward;
attn_thread_pool *Modifiers::pool = nullptr;

std::vector<double> outputs(const ProblemData &data) {
  std::vector<double> values = data.output.values;
  values.insert(values.end(), data.lse.begin(), data.lse.end());
  return values;
}

/// Runs `library`'s forward kernel of `c` against the reference, then again
/// (bit-identical).
void checkForward(const ModCase &c, Library &library) {
  Problem p = Modifiers::problemOf(c, Kind::Forward);
  const attn_kernel_desc *kernel = library.find(c.label);
  ASSERT_TRUE(kernel);
  EXPECT_EQ(attn_kernel_num_captures(kernel),
            static_cast<int32_t>(c.mods->captureTypes.size()));
  ProblemData data;
  makeProblemData(p, data);
  placeNans(data, c.nans);
  ASSERT_EQ(runProblem(kernel, data, Modifiers::pool), ATTN_OK)
      << attn_last_error();
  CheckReport report = checkAgainstReference(p, data);
  ASSERT_TRUE(report.passed) << p.describe() << ": " << report.message;

  // Bit-identical on one thread (decoding: on the pool, whose size picks
  // the key split).
  std::vector<double> first = outputs(data);
  poisonOutputs(data);
  bool split = attn_kernel_has_key_split(kernel);
  ASSERT_EQ(runProblem(kernel, data, split ? Modifiers::pool : nullptr),
            ATTN_OK)
      << attn_last_error();
  std::vector<double> second = outputs(data);
  ASSERT_EQ(first.size(), second.size());
  for (size_t e = 0; e < first.size(); ++e)
    ASSERT_TRUE(first[e] == second[e] ||
                (std::isnan(first[e]) && std::isnan(second[e])))
        << "element " << e << " differs between two runs";
}

TEST_P(Modifiers, ForwardMatchesReference) {
  checkForward(GetParam(), forward);
}

TEST_P(Modifiers, PackedForwardMatchesReference) {
  const ModCase &c = GetParam();
  if (!packedFormDiffers(c))
    GTEST_SKIP() << "its forward takes the packed path already";
  checkForward(c, packedForward);
}

TEST_P(Modifiers, WeightsMatchReference) {
  const ModCase &c = GetParam();
  if (c.spec.find("sizes=") != std::string::npos)
    GTEST_SKIP() << "a decoding spec: its forward is what is checked";
  Problem p = problemOf(c, Kind::Weights);
  const attn_kernel_desc *kernel = weights.find(c.label);
  ASSERT_TRUE(kernel);
  ProblemData data;
  makeProblemData(p, data);
  placeNans(data, c.nans);
  WeightsData w;
  std::string error;
  ASSERT_TRUE(makeWeightsData(p, data, w, error)) << error;
  ASSERT_EQ(runWeightsProblem(kernel, data, w, pool), ATTN_OK)
      << attn_last_error();
  CheckReport report = checkWeightsAgainstReference(p, data, w);
  EXPECT_TRUE(report.passed) << p.describe() << ": " << report.message;
}

/// The backward of `c` run by `run` against the float64 reference gradient.
void checkBackward(
    const ModCase &c,
    const std::function<attn_status(ProblemData &, BackwardData &)> &run) {
  Problem p = Modifiers::problemOf(c, Kind::Backward);
  ProblemData data;
  makeProblemData(p, data);
  placeNans(data, c.nans);
  BackwardData grads;
  std::string error;
  ASSERT_TRUE(makeBackwardData(p, data, grads, error)) << error;
  ASSERT_EQ(run(data, grads), ATTN_OK) << attn_last_error();
  BackwardReport report = checkBackwardAgainstReference(p, data, grads);
  EXPECT_TRUE(report.passed) << p.describe() << ": " << report.message;
}

TEST_P(Modifiers, BackwardMatchesReferenceGradient) {
  const ModCase &c = GetParam();
  if (!backwardTakes(c))
    GTEST_SKIP() << "a decoding spec: its forward is what is checked";
  const attn_kernel_desc *kernel = backward.find(c.label);
  ASSERT_TRUE(kernel);
  checkBackward(c, [&](ProblemData &data, BackwardData &grads) {
    return runBackwardProblem(kernel, data, grads, pool);
  });
}

INSTANTIATE_TEST_SUITE_P(Matrix, Modifiers,
                         ::testing::ValuesIn(modifierCases()), caseName);

// attn_fill_block_table: the table a kernel makes from its own mask_mod
// (and its causal band or window) is the table made in C++ from the same
// function (0 / 1 / 2 per block; blocks cut by Sq or Sk never full),
// written over a poisoned buffer on one thread and on the pool alike; and
// the forward with that table matches the reference.
TEST_P(Modifiers, BlockTableFromTheMaskMod) {
  const ModCase &c = GetParam();
  Problem p = problemOf(c, Kind::Forward);
  if (p.spec.blockTable[0] < 0)
    GTEST_SKIP() << "its op names no block table";
  const attn_kernel_desc *kernel = forward.find(c.label);
  ASSERT_TRUE(kernel);
  ASSERT_TRUE(attn_kernel_has_block_table(kernel));
  EXPECT_EQ(kernel->block_table_capture, p.spec.blockTable[0]);
  EXPECT_EQ(kernel->block_table_rows, p.spec.blockTable[1]);
  EXPECT_EQ(kernel->block_table_keys, p.spec.blockTable[2]);
  ProblemData data;
  makeProblemData(p, data);
  size_t table = static_cast<size_t>(kernel->block_table_capture);
  // The mask_mod and the band of the spec's attributes.
  ModifierCase masked = *c.mods;
  const KernelSpec &spec = p.spec;
  int64_t offset =
      spec.alignment == Alignment::BottomRight ? c.seqK - c.seqQ : 0;
  masked.maskMod = [&](const std::vector<CaptureValues> &values, int64_t b,
                       int64_t h, int64_t i, int64_t j) {
    int64_t distance = j - i - offset;
    return c.mods->maskMod(values, b, h, i, j) &&
           (!spec.causal || distance <= 0) &&
           (!spec.windowLeft || distance >= -*spec.windowLeft) &&
           (!spec.windowRight || distance <= *spec.windowRight);
  };
  const std::vector<int64_t> &shape = data.captureValues[table].shape;
  const std::vector<double> expected =
      blockTableOf(masked, data.captureValues, c.batch, c.headsQ, shape[0],
                   shape[1], c.seqQ, c.seqK, kernel->block_table_rows,
                   kernel->block_table_keys)
          .values;
  auto *entries = static_cast<int32_t *>(data.captureViews[table].data);
  for (attn_thread_pool *threads :
       {static_cast<attn_thread_pool *>(nullptr), Modifiers::pool}) {
    std::fill(entries, entries + expected.size(), 0x7eadbeef);
    ASSERT_EQ(attn_fill_block_table(
                  kernel, c.batch, c.headsQ, c.seqQ, c.seqK,
                  data.captureViews.data(),
                  static_cast<int32_t>(data.captureViews.size()), threads),
              ATTN_OK)
        << attn_last_error();
    for (size_t e = 0; e < expected.size(); ++e)
      ASSERT_EQ(entries[e], static_cast<int32_t>(expected[e]))
          << "entry " << e << (threads ? " (pool)" : " (one thread)");
  }
  ASSERT_EQ(runProblem(kernel, data, Modifiers::pool), ATTN_OK)
      << attn_last_error();
  CheckReport report = checkAgainstReference(p, data);
  ASSERT_TRUE(report.passed) << p.describe() << ": " << report.message;
}

// A table dim of 1 covers every batch (head): its entries are those of all
// the batches (heads) it covers, for a mask_mod that reads b and h.
TEST(ModifiersRuntime, BlockTableBroadcastsOverBatchesAndHeads) {
  ModCase c{"stripes", "d=16", 2, 3, 3, 100, 90, named("head_stripes_blocks")};
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("attn-modifiers", dir));
  std::string path = dir.str().str() + "/stripes.so", error;
  ASSERT_TRUE(compileKernels({specOf(c, Kind::Forward)}, CompileOptions(),
                             OutputKind::SharedLibrary, path, error))
      << error;
  attn_module *module = nullptr;
  ASSERT_EQ(attn_module_load(path.c_str(), &module), ATTN_OK);
  const attn_kernel_desc *kernel = nullptr;
  ASSERT_EQ(attn_module_find(module, "stripes", &kernel), ATTN_OK);
  for (auto [tableBatch, tableHeads] :
       {std::pair<int64_t, int64_t>{1, 1}, {1, 3}, {2, 1}, {2, 3}}) {
    SCOPED_TRACE("table [" + std::to_string(tableBatch) + ", " +
                 std::to_string(tableHeads) + ", ...]");
    CaptureValues expected =
        blockTableOf(*c.mods, {}, c.batch, c.headsQ, tableBatch, tableHeads,
                     c.seqQ, c.seqK, 32, 32);
    std::vector<int32_t> entries(expected.values.size(), 0x7eadbeef);
    attn_tensor table = attn_tensor_contiguous(entries.data(), ATTN_I32, 4,
                                               expected.shape.data());
    ASSERT_EQ(attn_fill_block_table(kernel, c.batch, c.headsQ, c.seqQ, c.seqK,
                                    &table, 1, nullptr),
              ATTN_OK)
        << attn_last_error();
    int kinds[3] = {0, 0, 0};
    for (size_t e = 0; e < entries.size(); ++e) {
      ASSERT_EQ(entries[e], static_cast<int32_t>(expected.values[e]))
          << "entry " << e;
      ++kinds[entries[e]];
    }
    // Full and partial blocks in every table; empty ones where the heads
    // are apart (the holes depend on the head).
    EXPECT_TRUE(kinds[1] && kinds[2] && (tableHeads == 1 || kinds[0]))
        << kinds[0] << " " << kinds[1] << " " << kinds[2];
  }
  attn_module_unload(module);
  llvm::sys::fs::remove(path);
  llvm::sys::fs::remove(dir);
}

TEST(ModifiersRuntime, BlockTableCallsAreChecked) {
  // Document masking with a [1, 1, ceil(Sq/32), ceil(Sk/32)] table; and the
  // same mask_mod without a table, which has none to fill.
  ModCase withTable{
      "with_table", "d=16", 1, 2, 2, 70, 40, named("documents_blocks")};
  ModCase without{"without_table", "d=16", 1, 2, 2, 70, 40, named("documents")};
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("attn-modifiers", dir));
  std::string path = dir.str().str() + "/tables.so", error;
  ASSERT_TRUE(compileKernels(
      {specOf(withTable, Kind::Forward), specOf(without, Kind::Forward)},
      CompileOptions(), OutputKind::SharedLibrary, path, error))
      << error;
  attn_module *module = nullptr;
  ASSERT_EQ(attn_module_load(path.c_str(), &module), ATTN_OK);
  const attn_kernel_desc *kernel = nullptr, *plain = nullptr;
  ASSERT_EQ(attn_module_find(module, "with_table", &kernel), ATTN_OK);
  ASSERT_EQ(attn_module_find(module, "without_table", &plain), ATTN_OK);
  Problem p;
  p.spec = specOf(withTable, Kind::Forward);
  p.batch = 1;
  p.headsQ = p.headsKv = 2;
  p.seqQ = 70;
  p.seqK = 40;
  p.modifiers = withTable.mods;
  ProblemData data;
  makeProblemData(p, data);
  std::vector<attn_tensor> captures = data.captureViews;
  auto fill = [&](const attn_kernel_desc *k, int64_t seqQ, int64_t seqK) {
    return attn_fill_block_table(k, 1, 2, seqQ, seqK, captures.data(),
                                 static_cast<int32_t>(captures.size()),
                                 nullptr);
  };
  auto refused = [&](attn_status status, const char *text) {
    EXPECT_EQ(status, ATTN_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(attn_last_error()).find(text), std::string::npos)
        << attn_last_error();
  };
  EXPECT_EQ(fill(kernel, 70, 40), ATTN_OK) << attn_last_error();
  refused(fill(plain, 70, 40), "has no block table to fill");
  // [1, 1, 3, 2] fits Sq = 70, Sk = 40 only.
  refused(fill(kernel, 100, 40),
          "dim 2 is 3 but must be 4 (seq_q = 100 in blocks of 32");
  refused(fill(kernel, 70, 70), "dim 3 is 2 but must be 3 (seq_k = 70");
  refused(fill(kernel, -1, 40), "seq_q is -1");
  attn_tensor &table = captures[2];
  table.shape[1] = 3; // its type says 1
  refused(fill(kernel, 70, 40), "dim 1 is 3 but kernel 'with_table' was "
                                "compiled for 1");
  table = data.captureViews[2];
  table.strides[2] = 0;
  refused(fill(kernel, 70, 40), "has stride 0");
  table = data.captureViews[2];
  table.data = captures[0].data; // over the query ids it reads
  refused(fill(kernel, 70, 40), "overlaps capture 0");
  refused(
      attn_fill_block_table(kernel, 1, 2, 70, 40, captures.data(), 2, nullptr),
      "reads 3 captured tensors but 2 were given");
  attn_module_unload(module);
  llvm::sys::fs::remove(path);
  llvm::sys::fs::remove(dir);
}

TEST(ModifiersRuntime, CallsWithoutTheCapturesAreRefused) {
  // A kernel whose modifiers capture a tensor, called without it, with the
  // wrong type, a wrong static size and an output overlapping it.
  ModCase c{"refusals", "d=16", 1, 2, 2, 8, 8, named("relative_bias")};
  KernelSpec spec = specOf(c, Kind::Forward);
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("attn-modifiers", dir));
  std::string path = dir.str().str() + "/refusals.so", error;
  ASSERT_TRUE(compileKernels({spec}, CompileOptions(),
                             OutputKind::SharedLibrary, path, error))
      << error;
  attn_module *module = nullptr;
  ASSERT_EQ(attn_module_load(path.c_str(), &module), ATTN_OK);
  const attn_kernel_desc *kernel = nullptr;
  ASSERT_EQ(attn_module_find(module, "refusals", &kernel), ATTN_OK);
  Problem p;
  p.spec = spec;
  p.batch = 1;
  p.headsQ = p.headsKv = 2;
  p.seqQ = p.seqK = 8;
  p.modifiers = c.mods;
  ProblemData data;
  makeProblemData(p, data);
  auto call = [&](const attn_tensor *captures, int32_t count) {
    attn_run_options options{};
    options.struct_size = sizeof(options);
    options.captures = captures;
    options.num_captures = count;
    return attn_run_with(kernel, &data.query.view, &data.key.view,
                         &data.value.view, nullptr, &data.output.view, nullptr,
                         &options, nullptr);
  };
  EXPECT_EQ(attn_run(kernel, &data.query.view, &data.key.view, &data.value.view,
                     nullptr, &data.output.view, nullptr, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attn_last_error()).find("captured tensors"),
            std::string::npos)
      << attn_last_error();
  EXPECT_EQ(call(nullptr, 0), ATTN_ERROR_INVALID_ARGUMENT);
  attn_tensor table = data.captureViews[0];
  EXPECT_EQ(call(&table, 1), ATTN_OK) << attn_last_error();
  attn_tensor wrongType = table;
  wrongType.dtype = ATTN_I32;
  EXPECT_EQ(call(&wrongType, 1), ATTN_ERROR_INVALID_ARGUMENT);
  attn_tensor wrongSize = table;
  wrongSize.shape[1] = 32; // compiled for tensor<?x33xf32>
  EXPECT_EQ(call(&wrongSize, 1), ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attn_last_error()).find("compiled for 33"),
            std::string::npos)
      << attn_last_error();
  attn_tensor empty = table;
  empty.shape[0] = 0;
  EXPECT_EQ(call(&empty, 1), ATTN_ERROR_INVALID_ARGUMENT);
  attn_tensor overlapping = table;
  overlapping.data = data.output.view.data;
  EXPECT_EQ(call(&overlapping, 1), ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attn_last_error()).find("overlaps"), std::string::npos)
      << attn_last_error();
  attn_module_unload(module);
  llvm::sys::fs::remove(path);
  llvm::sys::fs::remove(dir);
}

//===----------------------------------------------------------------------===//
// GPU
//===----------------------------------------------------------------------===//

/// The cases whose kernels the GPU lowering takes: every one (those with a
/// block mask's table skip the tiles it keeps nothing of).
std::vector<ModCase> gpuModifierCases() { return modifierCases(); }

/// The backward kernel of a case for the GPU ("backward_" and its label,
/// beside its forward in one library).
KernelSpec gpuBackwardSpec(const ModCase &c) {
  KernelSpec spec = specOf(c, Kind::Backward);
  spec.name = "backward_" + c.label;
  return spec;
}

/// The forward kernels of gpuModifierCases and the backward kernels of
/// those that have one.
std::vector<KernelSpec> gpuModifierSpecs() {
  std::vector<KernelSpec> specs;
  for (const ModCase &c : gpuModifierCases()) {
    specs.push_back(specOf(c, Kind::Forward));
    if (backwardTakes(c))
      specs.push_back(gpuBackwardSpec(c));
  }
  return specs;
}

/// Every such kernel, as PTX for sm_80, assembles with ptxas for sm_80 and
/// sm_90, without spilling to local memory.
TEST(ModifiersGpuCompile, EveryCaseAssemblesForSm80AndSm90WithoutSpills) {
  CompileOptions options;
  options.gpuArch = "sm_80";
  expectAssembles(
      gpuModifierSpecs(), options, [](const std::string &) { return true; },
      "modifiers");
}

/// The backward kernels' host emulations (GpuEmulation.h): the score_mod's
/// derivative and the captured tensors read at global indices, checked
/// against the reference gradient on a machine without a GPU.
TEST(ModifiersGpuEmulation, BackwardMatchesReferenceGradient) {
  std::vector<ModCase> cases;
  std::vector<KernelSpec> specs;
  for (const ModCase &c : gpuModifierCases())
    if (backwardTakes(c)) {
      cases.push_back(c);
      specs.push_back(gpuBackwardSpec(c));
    }
  emulation::Emulation kernels(specs);
  ASSERT_TRUE(kernels.ok());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].label);
    const std::string &name = specs[i].name;
    std::vector<attn_capture_desc> captures;
    attn_kernel_desc desc = emulation::backwardDesc(specs[i], captures);
    checkBackward(cases[i], [&](ProblemData &data, BackwardData &grads) {
      attn_backward_args args = emulation::backwardArgs(data, grads);
      uint64_t values[ATTN_GPU_MAX_PARAMS];
      void *pointers[ATTN_GPU_MAX_PARAMS];
      int n = attn_gpu_backward_kernel_params(&desc, &args, values, pointers);
      return kernels.invoke(name, pointers, n);
    });
  }
}

/// The same kernels compiled for GPU 0 and checked on it like the CPU's
/// (the reference, a bit-identical second run); every case is skipped (not
/// passed) without a GPU.
class GpuModifiers : public ::testing::TestWithParam<ModCase> {
public:
  static void SetUpTestSuite() {
    std::string arch, description;
    if (!cudaTarget(arch, description, skipReason))
      return;
    std::vector<KernelSpec> specs = gpuModifierSpecs();
    llvm::SmallString<128> dir;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("attn-gpu-mods", dir));
    library.directory = dir.str().str();
    library.path = library.directory + "/modifiers_gpu.so";
    CompileOptions options;
    options.gpuArch = arch;
    std::string error;
    ASSERT_TRUE(compileKernels(specs, options, OutputKind::SharedLibrary,
                               library.path, error))
        << error;
    ASSERT_EQ(attn_module_load(library.path.c_str(), &library.module), ATTN_OK)
        << attn_last_error();
    std::cout << "GPU modifiers on " << description << "\n";
  }
  static void TearDownTestSuite() { library.release(); }
  static std::string skipReason;
  static Library library;
};
std::string GpuModifiers::skipReason;
Library GpuModifiers::library;

TEST_P(GpuModifiers, ForwardMatchesReference) {
  if (!skipReason.empty())
    GTEST_SKIP() << skipReason;
  const attn_kernel_desc *kernel = library.find(GetParam().label);
  ASSERT_TRUE(kernel);
  ASSERT_EQ(attn_kernel_device(kernel), ATTN_DEVICE_CUDA);
  checkForward(GetParam(), library);
}

TEST_P(GpuModifiers, BackwardMatchesReferenceGradient) {
  if (!skipReason.empty())
    GTEST_SKIP() << skipReason;
  const ModCase &c = GetParam();
  if (!backwardTakes(c))
    GTEST_SKIP() << "a decoding spec: its forward is what is checked";
  const attn_kernel_desc *kernel = library.find("backward_" + c.label);
  ASSERT_TRUE(kernel);
  ASSERT_EQ(attn_kernel_device(kernel), ATTN_DEVICE_CUDA);
  checkBackward(c, [&](ProblemData &data, BackwardData &grads) {
    return runBackwardProblem(kernel, data, grads, nullptr);
  });
}

INSTANTIATE_TEST_SUITE_P(Matrix, GpuModifiers,
                         ::testing::ValuesIn(gpuModifierCases()), caseName);

} // namespace
