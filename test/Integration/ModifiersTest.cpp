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
// split, and the weights and backward kernels of the same modifiers; inputs
// are fresh, outputs NaN-poisoned, and a second run must be bit-identical.
//
//===----------------------------------------------------------------------===//
#include "lib/Compiler/Compiler.h"
#include "lib/Harness/Harness.h"

#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace attn;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

using Mods = std::shared_ptr<const ModifierCase>;

/// Uniform values in [lo, hi) for `count` elements, from `seed`.
std::vector<double> uniform(uint64_t seed, size_t count, double lo,
                            double hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> values(count);
  for (double &v : values)
    v = dist(rng);
  return values;
}

/// ALiBi: s + slope[h] · (j − i), the slopes captured ([Hq] f32).
Mods alibi() {
  auto m = std::make_shared<ModifierCase>();
  m->regions = R"(score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %slope = attn.captured 0 [%h] : f32
      %d = arith.subi %j, %i : index
      %di = arith.index_cast %d : index to i64
      %df = arith.sitofp %di : i64 to f32
      %bias = arith.mulf %slope, %df : f32
      %r2 = arith.addf %s, %bias : f32
      attn.yield %r2 : f32
    })";
  m->captureTypes = {"tensor<?xf32>"};
  m->captures = [](const Problem &p) {
    CaptureValues slopes;
    slopes.type = ATTN_F32;
    slopes.shape = {p.headsQ};
    for (int64_t h = 0; h < p.headsQ; ++h)
      slopes.values.push_back(-std::pow(2.0, -8.0 * (h + 1) / p.headsQ));
    return std::vector<CaptureValues>{slopes};
  };
  m->scoreMod = [](const std::vector<CaptureValues> &c, double s, int64_t,
                   int64_t h, int64_t i, int64_t j) {
    return s + c[0].values[h] * static_cast<double>(j - i);
  };
  return m;
}

/// A relative-position bias table [Hq, 33] indexed by clamp(j − i, −16, 16)
/// + 16 (T5-style, with one bucket per distance up to 16).
Mods relativeBias() {
  auto m = std::make_shared<ModifierCase>();
  m->regions = R"(score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %lo = arith.constant -16 : index
      %hi = arith.constant 16 : index
      %d = arith.subi %j, %i : index
      %c = arith.maxsi %d, %lo : index
      %c2 = arith.minsi %c, %hi : index
      %bucket = arith.addi %c2, %hi : index
      %bias = attn.captured 0 [%h, %bucket] : f32
      %r = arith.addf %s, %bias : f32
      attn.yield %r : f32
    })";
  m->captureTypes = {"tensor<?x33xf32>"};
  m->captures = [](const Problem &p) {
    CaptureValues table;
    table.type = ATTN_F32;
    table.shape = {p.headsQ, 33};
    table.values = uniform(p.seed + 7, p.headsQ * 33, -2.0, 2.0);
    return std::vector<CaptureValues>{table};
  };
  m->scoreMod = [](const std::vector<CaptureValues> &c, double s, int64_t,
                   int64_t h, int64_t i, int64_t j) {
    int64_t d = std::min<int64_t>(std::max<int64_t>(j - i, -16), 16) + 16;
    return s + c[0].values[h * 33 + d];
  };
  return m;
}

/// Document masking of packed sequences: a query attends the keys of its
/// own document (query ids i32 [Sq], key ids i64 [Sk]; runs of 1-40).
Mods documents() {
  auto m = std::make_shared<ModifierCase>();
  m->regions = R"(mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %qd = attn.captured 0 [%i] : i32
      %kd = attn.captured 1 [%j] : i64
      %qd64 = arith.extsi %qd : i32 to i64
      %same = arith.cmpi eq, %qd64, %kd : i64
      attn.yield %same : i1
    })";
  m->captureTypes = {"tensor<?xi32>", "tensor<?xi64>"};
  m->captures = [](const Problem &p) {
    auto ids = [&](int64_t n, attn_dtype type, uint64_t seed) {
      CaptureValues c;
      c.type = type;
      c.shape = {std::max<int64_t>(n, 1)};
      std::mt19937_64 rng(seed);
      std::uniform_int_distribution<int> run(1, 40);
      int64_t doc = 0, left = run(rng);
      for (int64_t k = 0; k < c.shape[0]; ++k) {
        if (left-- == 0) {
          ++doc;
          left = run(rng) - 1;
        }
        c.values.push_back(static_cast<double>(doc));
      }
      return c;
    };
    // The same runs for queries and keys where Sq = Sk; else their own.
    uint64_t seed = p.seed + 11;
    return std::vector<CaptureValues>{
        ids(p.seqQ, ATTN_I32, seed),
        ids(p.seqK, ATTN_I64, p.seqQ == p.seqK ? seed : seed + 1)};
  };
  m->maskMod = [](const std::vector<CaptureValues> &c, int64_t, int64_t,
                  int64_t i, int64_t j) {
    return c[0].values[i] == c[1].values[j];
  };
  return m;
}

/// Prefix-LM: causal, but the first 24 keys are seen by every query.
Mods prefixLm() {
  auto m = std::make_shared<ModifierCase>();
  m->regions = R"(mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %prefix = arith.constant 24 : index
      %causal = arith.cmpi sle, %j, %i : index
      %in = arith.cmpi slt, %j, %prefix : index
      %keep = arith.ori %causal, %in : i1
      attn.yield %keep : i1
    })";
  m->maskMod = [](const std::vector<CaptureValues> &, int64_t, int64_t,
                  int64_t i, int64_t j) { return j <= i || j < 24; };
  return m;
}

/// Longformer-style: a window of ±8 plus 4 global tokens (seen by every
/// query, and seeing every key).
Mods windowGlobal() {
  auto m = std::make_shared<ModifierCase>();
  m->regions = R"(mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %w = arith.constant 8 : index
      %g = arith.constant 4 : index
      %d = arith.subi %i, %j : index
      %nd = arith.subi %j, %i : index
      %ad = arith.maxsi %d, %nd : index
      %near = arith.cmpi sle, %ad, %w : index
      %gj = arith.cmpi slt, %j, %g : index
      %gi = arith.cmpi slt, %i, %g : index
      %k1 = arith.ori %near, %gj : i1
      %keep = arith.ori %k1, %gi : i1
      attn.yield %keep : i1
    })";
  m->maskMod = [](const std::vector<CaptureValues> &, int64_t, int64_t,
                  int64_t i, int64_t j) {
    return std::abs(i - j) <= 8 || j < 4 || i < 4;
  };
  return m;
}

/// Soft-capping written as a score_mod: 20 · tanh(s / 20).
Mods softcapMod() {
  auto m = std::make_shared<ModifierCase>();
  m->regions = R"(score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %c = arith.constant 20.0 : f32
      %x = arith.divf %s, %c : f32
      %t = math.tanh %x : f32
      %r = arith.mulf %t, %c : f32
      attn.yield %r : f32
    })";
  m->scoreMod = [](const std::vector<CaptureValues> &, double s, int64_t,
                   int64_t, int64_t, int64_t) {
    return 20.0 * std::tanh(s / 20.0);
  };
  return m;
}

/// Rows i ≡ 3 (mod 5) and batch 1's head 0 keep nothing (O = 0, LSE =
/// −inf); the others every key but j ≡ 1 (mod 3).
Mods emptyRows() {
  auto m = std::make_shared<ModifierCase>();
  m->regions = R"(mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %c5 = arith.constant 5 : index
      %ri = arith.remsi %i, %c5 : index
      %empty = arith.cmpi eq, %ri, %c3 : index
      %b1 = arith.cmpi eq, %b, %c1 : index
      %h0 = arith.cmpi eq, %h, %c0 : index
      %bh = arith.andi %b1, %h0 : i1
      %none = arith.ori %empty, %bh : i1
      %rj = arith.remsi %j, %c3 : index
      %jout = arith.cmpi eq, %rj, %c1 : index
      %out = arith.ori %none, %jout : i1
      %true = arith.constant true
      %keep = arith.xori %out, %true : i1
      attn.yield %keep : i1
    })";
  m->maskMod = [](const std::vector<CaptureValues> &, int64_t b, int64_t h,
                  int64_t i, int64_t j) {
    return !(i % 5 == 3 || (b == 1 && h == 0) || j % 3 == 1);
  };
  return m;
}

/// A score_mod that excludes (i + j) ≡ 0 (mod 7) by −inf and adds a
/// per-query-head, per-batch offset elsewhere.
Mods minusInf() {
  auto m = std::make_shared<ModifierCase>();
  m->regions = R"(score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %c0 = arith.constant 0 : index
      %c7 = arith.constant 7 : index
      %ninf = arith.constant 0xFF800000 : f32
      %sum = arith.addi %i, %j : index
      %r = arith.remsi %sum, %c7 : index
      %out = arith.cmpi eq, %r, %c0 : index
      %bh = arith.addi %b, %h : index
      %bhi = arith.index_cast %bh : index to i32
      %off = arith.sitofp %bhi : i32 to f32
      %t = arith.mulf %off, %off : f32
      %s2 = arith.addf %s, %t : f32
      %v = arith.select %out, %ninf, %s2 : f32
      attn.yield %v : f32
    })";
  m->scoreMod = [](const std::vector<CaptureValues> &, double s, int64_t b,
                   int64_t h, int64_t i, int64_t j) {
    double off = static_cast<double>(b + h);
    return (i + j) % 7 == 0 ? -kInf : s + off * off;
  };
  return m;
}

/// ALiBi and document masking together (both regions, three captures).
Mods alibiDocuments() {
  Mods a = alibi(), d = documents();
  auto m = std::make_shared<ModifierCase>();
  // Document ids are captures 1 and 2 here.
  std::string mask = d->regions;
  for (auto [from, to] : {std::pair<std::string, std::string>{
                              "attn.captured 1", "attn.captured 2"},
                          {"attn.captured 0", "attn.captured 1"}}) {
    for (size_t at = mask.find(from); at != std::string::npos;
         at = mask.find(from, at + to.size()))
      mask.replace(at, from.size(), to);
  }
  m->regions = a->regions + " " + mask;
  m->captureTypes = {"tensor<?xf32>", "tensor<?xi32>", "tensor<?xi64>"};
  m->captures = [a, d](const Problem &p) {
    std::vector<CaptureValues> all = a->captures(p), docs = d->captures(p);
    all.insert(all.end(), docs.begin(), docs.end());
    return all;
  };
  m->scoreMod = a->scoreMod;
  m->maskMod = [](const std::vector<CaptureValues> &c, int64_t, int64_t,
                  int64_t i, int64_t j) {
    return c[1].values[i] == c[2].values[j];
  };
  return m;
}

struct ModCase {
  std::string label, spec;
  int64_t batch, headsQ, headsKv, seqQ, seqK;
  Mods mods;
  bool bshd = false;
};

void PrintTo(const ModCase &c, std::ostream *os) {
  *os << c.label << ": " << c.spec;
}

std::vector<ModCase> modifierCases() {
  return {
      {"alibi_f32", "d=64,lse", 2, 4, 2, 100, 100, alibi()},
      {"alibi_bf16_causal_gqa", "dtype=bf16,d=64,causal=bottom_right,lse", 1,
       8, 2, 37, 101, alibi()},
      {"alibi_f16_dv", "dtype=f16,d=64,dv=32,lse", 1, 4, 4, 65, 130, alibi(),
       true},
      {"alibi_decode_split", "d=128,lse,sizes=?:?:?:1:?", 1, 2, 1, 1, 700,
       alibi()},
      {"relative_bias_f32", "d=32,lse", 1, 4, 2, 77, 90, relativeBias()},
      {"relative_bias_bf16_window", "dtype=bf16,d=64,window=20:5,lse", 2, 4, 1,
       64, 64, relativeBias()},
      {"documents_f32", "d=64,lse", 1, 4, 2, 130, 130, documents()},
      {"documents_bf16_causal", "dtype=bf16,d=64,causal,lse", 2, 2, 2, 150,
       150, documents()},
      {"documents_f16_sq_ne_sk_mask", "dtype=f16,d=48,dv=80,mask=bool:b1h1,lse",
       1, 4, 2, 33, 190, documents()},
      {"documents_decode", "d=64,causal=bottom_right,lse,sizes=?:?:?:3:?", 1,
       4, 1, 3, 300, documents()},
      {"prefix_lm_f32", "d=64,lse", 1, 2, 1, 120, 120, prefixLm()},
      {"prefix_lm_bf16_bias", "dtype=bf16,d=64,mask=bias:h1,lse", 2, 4, 2, 90,
       90, prefixLm()},
      {"window_global_f32", "d=64,lse", 1, 4, 2, 140, 140, windowGlobal()},
      {"window_global_f16", "dtype=f16,d=64,lse", 1, 2, 2, 70, 70,
       windowGlobal()},
      {"softcap_mod_f32", "d=64,scale=0.5,lse", 1, 4, 2, 60, 77, softcapMod()},
      {"softcap_mod_bf16_causal", "dtype=bf16,d=64,causal,scale=0.5,lse", 1,
       4, 2, 60, 60, softcapMod()},
      {"empty_rows_f32", "d=64,lse", 2, 2, 1, 43, 51, emptyRows()},
      {"empty_rows_bf16_causal", "dtype=bf16,d=64,causal=bottom_right,lse", 2,
       2, 2, 40, 55, emptyRows()},
      {"minus_inf_f32", "d=64,lse", 2, 4, 2, 50, 66, minusInf()},
      {"minus_inf_softcap", "d=64,softcap=5,lse", 1, 2, 1, 45, 45, minusInf()},
      {"alibi_documents_f32", "d=64,causal,lse", 1, 4, 2, 129, 129,
       alibiDocuments()},
      {"alibi_documents_bf16", "dtype=bf16,d=128,gqa=2,lse", 1, 4, 2, 70, 95,
       alibiDocuments()},
  };
}

std::string caseName(const ::testing::TestParamInfo<ModCase> &info) {
  return info.param.label;
}

/// Which kernel of a case: the forward, its weights or its backward.
enum class Kind { Forward, Weights, Backward };

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
    text += ",backward";
  std::optional<KernelSpec> spec = parseKernelSpec(text, error);
  EXPECT_TRUE(spec) << text << ": " << error;
  if (!spec)
    return {};
  EXPECT_TRUE(setModifiers(*spec, c.mods->regions, c.mods->captureTypes,
                           error))
      << c.label << ": " << error;
  return *spec;
}

bool backwardTakes(const ModCase &c) {
  // The backward differentiates no score_mod yet; sizes= decoding kernels
  // have no backward form to check here.
  return !c.mods->scoreMod && c.spec.find("sizes=") == std::string::npos;
}

/// One library per kind for the suite.
struct Library {
  std::string directory, path;
  attn_module *module = nullptr;

  void build(Kind kind) {
    std::vector<KernelSpec> specs;
    for (const ModCase &c : modifierCases()) {
      if (kind == Kind::Weights && c.spec.find("sizes=") != std::string::npos)
        continue;
      if (kind == Kind::Backward && !backwardTakes(c))
        continue;
      specs.push_back(specOf(c, kind));
    }
    llvm::SmallString<128> dir;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("attn-modifiers", dir));
    directory = dir.str().str();
    path = directory + "/modifiers.so";
    std::string error;
    ASSERT_TRUE(compileKernels(specs, CompileOptions(),
                               OutputKind::SharedLibrary, path, error))
        << error;
    ASSERT_EQ(attn_module_load(path.c_str(), &module), ATTN_OK)
        << attn_last_error();
  }
  void release() {
    attn_module_unload(module);
    llvm::sys::fs::remove(path);
    llvm::sys::fs::remove(directory);
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
    forward.build(Kind::Forward);
    weights.build(Kind::Weights);
    backward.build(Kind::Backward);
  }
  static void TearDownTestSuite() {
    forward.release();
    weights.release();
    backward.release();
    attn_thread_pool_destroy(pool);
  }
  static Library forward, weights, backward;
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
Library Modifiers::forward, Modifiers::weights, Modifiers::backward;
attn_thread_pool *Modifiers::pool = nullptr;

std::vector<double> outputs(const ProblemData &data) {
  std::vector<double> values = data.output.values;
  values.insert(values.end(), data.lse.begin(), data.lse.end());
  return values;
}

TEST_P(Modifiers, ForwardMatchesReference) {
  const ModCase &c = GetParam();
  Problem p = problemOf(c, Kind::Forward);
  const attn_kernel_desc *kernel = forward.find(c.label);
  ASSERT_TRUE(kernel);
  EXPECT_EQ(attn_kernel_num_captures(kernel),
            static_cast<int32_t>(c.mods->captureTypes.size()));
  ProblemData data;
  makeProblemData(p, data);
  ASSERT_EQ(runProblem(kernel, data, pool), ATTN_OK) << attn_last_error();
  CheckReport report = checkAgainstReference(p, data);
  ASSERT_TRUE(report.passed) << p.describe() << ": " << report.message;

  // Bit-identical on one thread (decoding: on the pool, whose size picks
  // the key split).
  std::vector<double> first = outputs(data);
  poisonOutputs(data);
  bool split = attn_kernel_has_key_split(kernel);
  ASSERT_EQ(runProblem(kernel, data, split ? pool : nullptr), ATTN_OK)
      << attn_last_error();
  std::vector<double> second = outputs(data);
  ASSERT_EQ(first.size(), second.size());
  for (size_t e = 0; e < first.size(); ++e)
    ASSERT_TRUE(first[e] == second[e] ||
                (std::isnan(first[e]) && std::isnan(second[e])))
        << "element " << e << " differs between two runs";
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
  WeightsData w;
  std::string error;
  ASSERT_TRUE(makeWeightsData(p, data, w, error)) << error;
  ASSERT_EQ(runWeightsProblem(kernel, data, w, pool), ATTN_OK)
      << attn_last_error();
  CheckReport report = checkWeightsAgainstReference(p, data, w);
  EXPECT_TRUE(report.passed) << p.describe() << ": " << report.message;
}

TEST_P(Modifiers, BackwardMatchesReferenceGradient) {
  const ModCase &c = GetParam();
  if (!backwardTakes(c))
    GTEST_SKIP() << "no backward form: a score_mod (its derivative is not "
                    "generated yet) or a decoding spec";
  Problem p = problemOf(c, Kind::Backward);
  const attn_kernel_desc *kernel = backward.find(c.label);
  ASSERT_TRUE(kernel);
  ProblemData data;
  makeProblemData(p, data);
  BackwardData grads;
  std::string error;
  ASSERT_TRUE(makeBackwardData(p, data, grads, error)) << error;
  ASSERT_EQ(runBackwardProblem(kernel, data, grads, pool), ATTN_OK)
      << attn_last_error();
  BackwardReport report = checkBackwardAgainstReference(p, data, grads);
  EXPECT_TRUE(report.passed) << p.describe() << ": " << report.message;
}

INSTANTIATE_TEST_SUITE_P(Matrix, Modifiers,
                         ::testing::ValuesIn(modifierCases()), caseName);

TEST(ModifiersRuntime, CallsWithoutTheCapturesAreRefused) {
  // A kernel whose modifiers capture a tensor, called without it, with the
  // wrong type, a wrong static size and an output overlapping it.
  ModCase c{"refusals", "d=16", 1, 2, 2, 8, 8, relativeBias()};
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
  EXPECT_EQ(attn_run(kernel, &data.query.view, &data.key.view,
                     &data.value.view, nullptr, &data.output.view, nullptr,
                     nullptr),
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

} // namespace
