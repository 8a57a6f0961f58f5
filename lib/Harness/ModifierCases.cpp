//===- ModifierCases.cpp - Score and mask modifiers to run and check -----===//
#include "lib/Harness/ModifierCases.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

using namespace attn;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

/// Uniform values in [lo, hi) for `count` elements, from `seed`.
std::vector<double> uniform(uint64_t seed, size_t count, double lo, double hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> values(count);
  for (double &v : values)
    v = dist(rng);
  return values;
}

/// ALiBi: s − slope[h] · |j − i|, the slopes 2^(−8(h+1)/Hq) captured ([Hq]
/// f32). (The symmetric form: the largest scores stay near the diagonal,
/// where the bias is small, so f32 scores keep their precision there.)
ModifierPtr alibi() {
  auto m = std::make_shared<ModifierCase>();
  m->regions = R"(score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %slope = attn.captured 0 [%h] : f32
      %d = arith.subi %j, %i : index
      %nd = arith.subi %i, %j : index
      %ad = arith.maxsi %d, %nd : index
      %di = arith.index_cast %ad : index to i64
      %df = arith.sitofp %di : i64 to f32
      %bias = arith.mulf %slope, %df : f32
      %r = arith.subf %s, %bias : f32
      attn.yield %r : f32
    })";
  m->captureTypes = {"tensor<?xf32>"};
  m->captures = [](const Problem &p) {
    CaptureValues slopes;
    slopes.type = ATTN_F32;
    slopes.shape = {p.headsQ};
    for (int64_t h = 0; h < p.headsQ; ++h)
      slopes.values.push_back(std::pow(2.0, -8.0 * (h + 1) / p.headsQ));
    return std::vector<CaptureValues>{slopes};
  };
  m->scoreMod = [](const std::vector<CaptureValues> &c, double s, int64_t,
                   int64_t h, int64_t i, int64_t j) {
    return s - c[0].values[h] * static_cast<double>(std::abs(j - i));
  };
  return m;
}

/// The score_mod s + table[h, clamp(j − i, −reach, reach) + reach] (capture
/// 0, [Hq, 2·reach + 1] f32).
std::string relativeBiasRegion(int reach) {
  std::string r = std::to_string(reach);
  return R"(score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %lo = arith.constant -)" +
         r + R"( : index
      %hi = arith.constant )" +
         r + R"( : index
      %d = arith.subi %j, %i : index
      %c = arith.maxsi %d, %lo : index
      %c2 = arith.minsi %c, %hi : index
      %bucket = arith.addi %c2, %hi : index
      %bias = attn.captured 0 [%h, %bucket] : f32
      %r = arith.addf %s, %bias : f32
      attn.yield %r : f32
    })";
}

/// A relative-position bias table [Hq, 33] indexed by clamp(j − i, −16, 16)
/// + 16 (T5-style, with one bucket per distance up to 16).
ModifierPtr relativeBias() {
  auto m = std::make_shared<ModifierCase>();
  m->regions = relativeBiasRegion(16);
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

/// Short tables, which AVX-512 kernels read by a register permute instead of
/// a gather (ModifierEmitter::read): a bias [Hq, 25] f32 at clamp(j − i,
/// −12, 12) + 12 (a row of 17-32 elements: two registers) and a keep table
/// [9] i32 at clamp(j − i, −4, 4) + 4 (at most 16: one register, i32 lanes).
ModifierPtr shortTables() {
  auto m = std::make_shared<ModifierCase>();
  m->regions = relativeBiasRegion(12) + R"( mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %lo = arith.constant -4 : index
      %hi = arith.constant 4 : index
      %zero = arith.constant 0 : i32
      %d = arith.subi %j, %i : index
      %c = arith.maxsi %d, %lo : index
      %c2 = arith.minsi %c, %hi : index
      %bucket = arith.addi %c2, %hi : index
      %kept = attn.captured 1 [%bucket] : i32
      %keep = arith.cmpi ne, %kept, %zero : i32
      attn.yield %keep : i1
    })";
  m->captureTypes = {"tensor<?x25xf32>", "tensor<?xi32>"};
  m->captures = [](const Problem &p) {
    CaptureValues table;
    table.type = ATTN_F32;
    table.shape = {p.headsQ, 25};
    table.values = uniform(p.seed + 7, p.headsQ * 25, -2.0, 2.0);
    CaptureValues keep;
    keep.type = ATTN_I32;
    keep.shape = {9};
    keep.values = {1, 0, 1, 1, 1, 0, 1, 1, 0};
    return std::vector<CaptureValues>{table, keep};
  };
  auto bucket = [](int64_t i, int64_t j, int64_t reach) {
    return std::min<int64_t>(std::max<int64_t>(j - i, -reach), reach) + reach;
  };
  m->scoreMod = [bucket](const std::vector<CaptureValues> &c, double s, int64_t,
                         int64_t h, int64_t i, int64_t j) {
    return s + c[0].values[h * 25 + bucket(i, j, 12)];
  };
  m->maskMod = [bucket](const std::vector<CaptureValues> &c, int64_t, int64_t,
                        int64_t i, int64_t j) {
    return c[1].values[bucket(i, j, 4)] != 0;
  };
  return m;
}

/// Tensors read at every position, along the keys of each row: a bias
/// [Hq, Sq, Sk] f32 at [h, i, j] and a keep mask [B, Sq, Sk] of bools (a
/// byte each) at [b, i, j] (a quarter of it false), which f32's kernel
/// choice reads with keys in lanes (readsRowsAlongKeys).
ModifierPtr positions() {
  auto m = std::make_shared<ModifierCase>();
  m->regions = R"(score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %bias = attn.captured 0 [%h, %i, %j] : f32
      %r = arith.addf %s, %bias : f32
      attn.yield %r : f32
    } mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %zero = arith.constant 0 : i8
      %kept = attn.captured 1 [%b, %i, %j] : i8
      %keep = arith.cmpi ne, %kept, %zero : i8
      attn.yield %keep : i1
    })";
  m->captureTypes = {"tensor<?x?x?xf32>", "tensor<?x?x?xi8>"};
  m->captures = [](const Problem &p) {
    int64_t rows = std::max<int64_t>(p.seqQ, 1),
            keys = std::max<int64_t>(p.seqK, 1);
    CaptureValues bias;
    bias.type = ATTN_F32;
    bias.shape = {p.headsQ, rows, keys};
    bias.values = uniform(p.seed + 13, p.headsQ * rows * keys, -2.0, 2.0);
    CaptureValues keep;
    keep.type = ATTN_BOOL;
    keep.shape = {p.batch, rows, keys};
    for (double u : uniform(p.seed + 17, p.batch * rows * keys, 0.0, 1.0))
      keep.values.push_back(u < 0.25 ? 0.0 : 1.0);
    return std::vector<CaptureValues>{bias, keep};
  };
  m->scoreMod = [](const std::vector<CaptureValues> &c, double s, int64_t,
                   int64_t h, int64_t i, int64_t j) {
    const std::vector<int64_t> &shape = c[0].shape;
    return s + c[0].values[(h * shape[1] + i) * shape[2] + j];
  };
  m->maskMod = [](const std::vector<CaptureValues> &c, int64_t b, int64_t,
                  int64_t i, int64_t j) {
    const std::vector<int64_t> &shape = c[1].shape;
    return c[1].values[(b * shape[1] + i) * shape[2] + j] != 0;
  };
  return m;
}

/// Document masking of packed sequences: a query attends the keys of its
/// own document (query ids i32 [Sq], key ids i64 [Sk]; runs of 1-40).
ModifierPtr documents() {
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
                  int64_t i,
                  int64_t j) { return c[0].values[i] == c[1].values[j]; };
  return m;
}

/// Document masking with its block mask's table (docs/spec.md, "Score and
/// mask modifiers" 7): T [1, 1, ⌈Sq/32⌉, ⌈Sk/32⌉] i32 made from the ids,
/// 0 where a block keeps nothing, 2 where it keeps everything, else 1.
ModifierPtr documentsBlocks() {
  constexpr int64_t kBlock = 32;
  ModifierPtr d = documents();
  auto m = std::make_shared<ModifierCase>();
  m->regions = d->regions + " {attn.block_mask = array<i64: 2, " +
               std::to_string(kBlock) + ", " + std::to_string(kBlock) + ">}";
  m->captureTypes = {"tensor<?xi32>", "tensor<?xi64>", "tensor<1x1x?x?xi32>"};
  m->captures = [d](const Problem &p) {
    std::vector<CaptureValues> all = d->captures(p);
    all.push_back(blockTableOf(*d, all, p.batch, p.headsQ, 1, 1, p.seqQ, p.seqK,
                               kBlock, kBlock));
    return all;
  };
  m->maskMod = d->maskMod;
  return m;
}

/// Stripes of 16 keys that depend on the batch and the head (in query
/// blocks of 32 rows other than every third), with holes of whole 32 x 32
/// blocks (odd query blocks, key blocks of the head's parity),
/// and its block table T [B, Hq, Sq/32, Sk/32] i32, per batch and head: a
/// table whose every kind of entry (0, 1, 2) depends on b and h.
ModifierPtr headStripesBlocks() {
  constexpr int64_t kBlock = 32;
  auto m = std::make_shared<ModifierCase>();
  m->regions = R"(mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c16 = arith.constant 16 : index
      %c32 = arith.constant 32 : index
      %true = arith.constant true
      %stripe = arith.divui %j, %c16 : index
      %sh = arith.addi %stripe, %h : index
      %shb = arith.addi %sh, %b : index
      %third = arith.remui %shb, %c3 : index
      %striped = arith.cmpi ne, %third, %c0 : index
      %row = arith.divui %i, %c32 : index
      %rowThird = arith.remui %row, %c3 : index
      %whole = arith.cmpi eq, %rowThird, %c0 : index
      %kept = arith.ori %whole, %striped : i1
      %rowParity = arith.remui %row, %c2 : index
      %oddRow = arith.cmpi eq, %rowParity, %c1 : index
      %col = arith.divui %j, %c32 : index
      %colHead = arith.addi %col, %h : index
      %colParity = arith.remui %colHead, %c2 : index
      %oddCol = arith.cmpi eq, %colParity, %c1 : index
      %hole = arith.andi %oddRow, %oddCol : i1
      %open = arith.xori %hole, %true : i1
      %keep = arith.andi %kept, %open : i1
      attn.yield %keep : i1
    } {attn.block_mask = array<i64: 0, 32, 32>})";
  m->captureTypes = {"tensor<?x?x?x?xi32>"};
  m->maskMod = [](const std::vector<CaptureValues> &, int64_t b, int64_t h,
                  int64_t i, int64_t j) {
    bool hole = (i / 32) % 2 == 1 && (j / 32 + h) % 2 == 1;
    return ((i / 32) % 3 == 0 || (j / 16 + h + b) % 3 != 0) && !hole;
  };
  m->captures = [](const Problem &p) {
    return std::vector<CaptureValues>{
        blockTableOf(*headStripesBlocks(), {}, p.batch, p.headsQ, p.batch,
                     p.headsQ, p.seqQ, p.seqK, kBlock, kBlock)};
  };
  return m;
}

/// Prefix-LM: causal, but the first 24 keys are seen by every query.
ModifierPtr prefixLm() {
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
ModifierPtr windowGlobal() {
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
                  int64_t i,
                  int64_t j) { return std::abs(i - j) <= 8 || j < 4 || i < 4; };
  return m;
}

/// Soft-capping written as a score_mod: 20 · tanh(s / 20).
ModifierPtr softcapMod() {
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
                   int64_t, int64_t,
                   int64_t) { return 20.0 * std::tanh(s / 20.0); };
  return m;
}

/// Rows i ≡ 3 (mod 5) and batch 1's head 0 keep nothing (O = 0, LSE =
/// −inf); the others every key but j ≡ 1 (mod 3).
ModifierPtr emptyRows() {
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
ModifierPtr minusInf() {
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

/// A smooth score_mod whose derivative takes most of the backward's rules
/// (products and a quotient of the score with itself, abs, exp, max, a
/// select on a comparison of it): max(s² / (1 + |s|), s / 2) + exp(−|s|),
/// and s − 2 above 2.
ModifierPtr nonlinear() {
  auto m = std::make_shared<ModifierCase>();
  m->regions = R"(score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %one = arith.constant 1.0 : f32
      %half = arith.constant 0.5 : f32
      %two = arith.constant 2.0 : f32
      %a = math.absf %s : f32
      %sq = arith.mulf %s, %s : f32
      %den = arith.addf %one, %a : f32
      %q = arith.divf %sq, %den : f32
      %lin = arith.mulf %s, %half : f32
      %m = arith.maximumf %q, %lin : f32
      %na = arith.negf %a : f32
      %e = math.exp %na : f32
      %r = arith.addf %m, %e : f32
      %big = arith.cmpf ogt, %s, %two : f32
      %shift = arith.subf %s, %two : f32
      %v = arith.select %big, %shift, %r : f32
      attn.yield %v : f32
    })";
  m->scoreMod = [](const std::vector<CaptureValues> &, double s, int64_t,
                   int64_t, int64_t, int64_t) {
    if (s > 2.0)
      return s - 2.0;
    double a = std::fabs(s);
    return std::max(s * s / (1.0 + a), 0.5 * s) + std::exp(-a);
  };
  return m;
}

/// ALiBi and document masking together (both regions, three captures).
ModifierPtr alibiDocuments() {
  ModifierPtr a = alibi(), d = documents();
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
                  int64_t i,
                  int64_t j) { return c[1].values[i] == c[2].values[j]; };
  return m;
}

/// Causal masking written as a mask_mod (top-left: j <= i), to compare with
/// the `causal` attribute, whose key ranges the compiler skips.
ModifierPtr causalMod() {
  auto m = std::make_shared<ModifierCase>();
  m->regions = R"(mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %keep = arith.cmpi sle, %j, %i : index
      attn.yield %keep : i1
    })";
  m->maskMod = [](const std::vector<CaptureValues> &, int64_t, int64_t,
                  int64_t i, int64_t j) { return j <= i; };
  return m;
}

} // namespace

const std::vector<NamedModifier> &attn::namedModifiers() {
  static const std::vector<NamedModifier> all = {
      {"alibi", "ALiBi: s - slope[h] * |j - i|, slopes [Hq] f32", alibi},
      {"relative_bias",
       "a relative-position bias table [Hq, 33] f32 at clamp(j - i, -16, 16)",
       relativeBias},
      {"short_tables",
       "a bias table [Hq, 25] f32 and a keep table [9] i32 at buckets of "
       "j - i",
       shortTables},
      {"positions",
       "a bias [Hq, Sq, Sk] f32 at [h, i, j] and a keep mask [B, Sq, Sk] of "
       "bools at [b, i, j]",
       positions},
      {"documents",
       "document masking: query ids [Sq] i32 equal to key ids [Sk] i64",
       documents},
      {"documents_blocks",
       "document masking with its block table [1, 1, Sq/32, Sk/32] i32",
       documentsBlocks},
      {"head_stripes_blocks",
       "stripes of 16 keys by (j/16 + h + b) mod 3 outside every third block "
       "of "
       "32 rows, holes of 32 x 32 blocks, "
       "its block table [B, Hq, Sq/32, Sk/32] i32",
       headStripesBlocks},
      {"prefix_lm", "causal plus the first 24 keys for every query", prefixLm},
      {"window_global", "|i - j| <= 8, or i or j among the first 4 tokens",
       windowGlobal},
      {"softcap", "20 * tanh(s / 20) as a score_mod", softcapMod},
      {"causal", "j <= i as a mask_mod", causalMod},
      {"empty_rows", "rows i = 3 mod 5 (and b = 1, h = 0) keep nothing",
       emptyRows},
      {"minus_inf", "-inf where (i + j) = 0 mod 7, else s + (b + h)^2",
       minusInf},
      {"alibi_documents", "ALiBi and document masking together",
       alibiDocuments},
      {"nonlinear", "max(s^2 / (1 + |s|), s / 2) + exp(-|s|), or s - 2 above 2",
       nonlinear},
  };
  return all;
}

CaptureValues attn::blockTableOf(const ModifierCase &mask,
                                 const std::vector<CaptureValues> &captures,
                                 int64_t batch, int64_t heads,
                                 int64_t tableBatch, int64_t tableHeads,
                                 int64_t seqQ, int64_t seqK, int64_t rows,
                                 int64_t keys) {
  CaptureValues table;
  table.type = ATTN_I32;
  int64_t rowBlocks = std::max<int64_t>((seqQ + rows - 1) / rows, 1);
  int64_t keyBlocks = std::max<int64_t>((seqK + keys - 1) / keys, 1);
  table.shape = {tableBatch, tableHeads, rowBlocks, keyBlocks};
  for (int64_t tb = 0; tb < tableBatch; ++tb)
    for (int64_t th = 0; th < tableHeads; ++th)
      for (int64_t qb = 0; qb < rowBlocks; ++qb)
        for (int64_t kb = 0; kb < keyBlocks; ++kb) {
          bool any = false;
          bool every = (qb + 1) * rows <= seqQ && (kb + 1) * keys <= seqK;
          for (int64_t b = 0; b < batch; ++b)
            for (int64_t h = 0; h < heads; ++h) {
              if ((tableBatch > 1 && b != tb) || (tableHeads > 1 && h != th))
                continue;
              for (int64_t i = qb * rows; i < std::min(seqQ, (qb + 1) * rows);
                   ++i)
                for (int64_t j = kb * keys; j < std::min(seqK, (kb + 1) * keys);
                     ++j) {
                  bool kept = mask.maskMod(captures, b, h, i, j);
                  any = any || kept;
                  every = every && kept;
                }
            }
          table.values.push_back(!any ? 0.0 : every ? 2.0 : 1.0);
        }
  return table;
}

ModifierPtr attn::modifierCase(const std::string &name) {
  for (const NamedModifier &m : namedModifiers())
    if (name == m.name)
      return m.make();
  return nullptr;
}
