//===- ReferenceTest.cpp - Tests of the float64 attention reference -------===//
//
// The reference is what every kernel is judged by, so its own tests use
// cases small enough to work out by hand (the expected numbers are written
// as the arithmetic that produces them), plus the corner cases of the
// contract: fully masked rows, broadcast masks, GQA, windows, soft-capping,
// NaN propagation and huge logits.
//
//===----------------------------------------------------------------------===//

#include "lib/Reference/Reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace attn;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Dense inputs of one problem, with the views the reference takes.
struct Problem {
  int64_t batch = 1, heads = 1, kvHeads = 1, seqQ = 1, seqK = 1;
  KernelSpec spec;
  std::vector<double> q, k, v, mask;
  int64_t maskShape[4] = {0, 0, 0, 0};

  Problem(int64_t b, int64_t h, int64_t hkv, int64_t sq, int64_t sk, int64_t d,
          int64_t dv)
      : batch(b), heads(h), kvHeads(hkv), seqQ(sq), seqK(sk) {
    spec.headDim = d;
    spec.valueDim = dv;
    spec.scale = 1.0f; // hand-computed cases read the raw dot products
    q.assign(b * h * sq * d, 0.0);
    k.assign(b * hkv * sk * d, 0.0);
    v.assign(b * hkv * sk * dv, 0.0);
  }

  double &Q(int64_t b, int64_t h, int64_t i, int64_t d) {
    return q[((b * heads + h) * seqQ + i) * spec.headDim + d];
  }
  double &K(int64_t b, int64_t h, int64_t j, int64_t d) {
    return k[((b * kvHeads + h) * seqK + j) * spec.headDim + d];
  }
  double &V(int64_t b, int64_t h, int64_t j, int64_t d) {
    return v[((b * kvHeads + h) * seqK + j) * spec.valueDim + d];
  }
  void setMask(MaskKind kind, int64_t bm, int64_t hm, int64_t sqm,
               double fill) {
    spec.mask = kind;
    maskShape[0] = bm;
    maskShape[1] = hm;
    maskShape[2] = sqm;
    maskShape[3] = seqK;
    mask.assign(bm * hm * sqm * seqK, fill);
  }
  double &M(int64_t b, int64_t h, int64_t i, int64_t j) {
    return mask[((b * maskShape[1] + h) * maskShape[2] + i) * maskShape[3] + j];
  }

  ReferenceInputs inputs() const {
    ReferenceInputs in;
    in.query = RefTensor::dense(q.data(), batch, heads, seqQ, spec.headDim);
    in.key = RefTensor::dense(k.data(), batch, kvHeads, seqK, spec.headDim);
    in.value = RefTensor::dense(v.data(), batch, kvHeads, seqK, spec.valueDim);
    if (spec.mask != MaskKind::None)
      in.mask = RefTensor::dense(mask.data(), maskShape[0], maskShape[1],
                                 maskShape[2], maskShape[3]);
    return in;
  }

  ReferenceOutputs run() const {
    ReferenceOutputs out;
    std::string error;
    EXPECT_TRUE(computeReference(spec, inputs(), out, error)) << error;
    return out;
  }

  void randomize(uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> normal;
    for (auto *vec : {&q, &k, &v})
      for (double &x : *vec)
        x = normal(rng);
  }
};

//===----------------------------------------------------------------------===//
// Hand-computed cases
//===----------------------------------------------------------------------===//

TEST(Reference, TwoKeysByHand) {
  // D = 2, Dv = 4 as in the seed tutorials. Scores are q.k0 = 0 and
  // q.k1 = ln 3, so the softmax weights are 1/4 and 3/4.
  Problem p(1, 1, 1, 1, 2, 2, 4);
  p.Q(0, 0, 0, 0) = 1.0;
  p.Q(0, 0, 0, 1) = 2.0;
  p.K(0, 0, 1, 0) = std::log(3.0);
  const double v0[4] = {4, 0, 8, -4}, v1[4] = {0, 4, 0, 4};
  for (int d = 0; d < 4; ++d) {
    p.V(0, 0, 0, d) = v0[d];
    p.V(0, 0, 1, d) = v1[d];
  }
  ReferenceOutputs out = p.run();
  const double expected[4] = {1, 3, 2, 2}; // v0/4 + 3 v1/4
  for (int d = 0; d < 4; ++d)
    EXPECT_NEAR(out.o(0, 0, 0, d), expected[d], 1e-14);
  EXPECT_NEAR(out.l(0, 0, 0), std::log(4.0), 1e-14); // ln(e^0 + e^ln3)
}

TEST(Reference, DefaultScaleIsOneOverSqrtD) {
  // With D = 4 the default scale is 1/2: scores 0 and 2 ln 3 / 2 = ln 3.
  Problem p(1, 1, 1, 1, 2, 4, 1);
  p.spec.scale.reset();
  p.Q(0, 0, 0, 0) = 2.0;
  p.K(0, 0, 1, 0) = std::log(3.0);
  p.V(0, 0, 0, 0) = 4.0;
  ReferenceOutputs out = p.run();
  EXPECT_NEAR(out.o(0, 0, 0, 0), 1.0, 1e-7);
  EXPECT_NEAR(out.l(0, 0, 0), std::log(4.0), 1e-7);
}

TEST(Reference, EqualScoresGiveTheMean) {
  Problem p(1, 1, 1, 2, 5, 3, 2);
  p.randomize(1);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t d = 0; d < 3; ++d)
      p.Q(0, 0, i, d) = 0.0; // every score is 0
  ReferenceOutputs out = p.run();
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t d = 0; d < 2; ++d) {
      double mean = 0;
      for (int64_t j = 0; j < 5; ++j)
        mean += p.V(0, 0, j, d) / 5;
      EXPECT_NEAR(out.o(0, 0, i, d), mean, 1e-14);
    }
    EXPECT_NEAR(out.l(0, 0, i), std::log(5.0), 1e-14);
  }
}

TEST(Reference, CausalTopLeft) {
  Problem p(1, 1, 1, 3, 3, 2, 2);
  p.randomize(2);
  p.spec.causal = true;
  ReferenceOutputs out = p.run();
  // Row 0 sees key 0 only: O is V[0] and LSE is the one score.
  EXPECT_EQ(out.o(0, 0, 0, 0), p.V(0, 0, 0, 0));
  EXPECT_EQ(out.o(0, 0, 0, 1), p.V(0, 0, 0, 1));
  double s00 =
      p.Q(0, 0, 0, 0) * p.K(0, 0, 0, 0) + p.Q(0, 0, 0, 1) * p.K(0, 0, 0, 1);
  EXPECT_NEAR(out.l(0, 0, 0), s00, 1e-14);
  // Row 1 sees keys 0 and 1: a two-way softmax.
  double s[2];
  for (int j = 0; j < 2; ++j)
    s[j] =
        p.Q(0, 0, 1, 0) * p.K(0, 0, j, 0) + p.Q(0, 0, 1, 1) * p.K(0, 0, j, 1);
  double w1 = 1.0 / (1.0 + std::exp(s[0] - s[1]));
  EXPECT_NEAR(out.o(0, 0, 1, 0),
              (1 - w1) * p.V(0, 0, 0, 0) + w1 * p.V(0, 0, 1, 0), 1e-14);
  EXPECT_NEAR(out.l(0, 0, 1), std::log(std::exp(s[0]) + std::exp(s[1])), 1e-13);
}

TEST(Reference, CausalBottomRightWithMoreQueriesThanKeys) {
  // Sq = 4, Sk = 2: off = -2, so rows 0 and 1 have no allowed key.
  Problem p(1, 1, 1, 4, 2, 2, 3);
  p.randomize(3);
  p.spec.causal = true;
  p.spec.alignment = Alignment::BottomRight;
  ReferenceOutputs out = p.run();
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t d = 0; d < 3; ++d)
      EXPECT_EQ(out.o(0, 0, i, d), 0.0);
    EXPECT_EQ(out.l(0, 0, i), -kInf);
  }
  for (int64_t d = 0; d < 3; ++d) // row 2 sees key 0 only
    EXPECT_EQ(out.o(0, 0, 2, d), p.V(0, 0, 0, d));
  EXPECT_TRUE(std::isfinite(out.l(0, 0, 3)));
}

TEST(Reference, CausalBottomRightDecoding) {
  // One query over a KV cache of 4 sees every key; top-left would see one.
  Problem p(1, 1, 1, 1, 4, 2, 1);
  p.randomize(4);
  p.spec.causal = true;
  p.spec.alignment = Alignment::BottomRight;
  ReferenceOutputs bottomRight = p.run();
  p.spec.causal = false;
  ReferenceOutputs none = p.run();
  EXPECT_EQ(bottomRight.output, none.output);
  p.spec.causal = true;
  p.spec.alignment = Alignment::TopLeft;
  EXPECT_EQ(p.run().o(0, 0, 0, 0), p.V(0, 0, 0, 0));
}

TEST(Reference, GroupedQueryHeads) {
  // Hq = 4, Hkv = 2: query heads 0 and 1 read kv head 0, 2 and 3 read 1.
  // With one key the output is that key's value row.
  Problem p(2, 4, 2, 1, 1, 2, 2);
  p.randomize(5);
  ReferenceOutputs out = p.run();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t d = 0; d < 2; ++d)
        EXPECT_EQ(out.o(b, h, 0, d), p.V(b, h / 2, 0, d));
  // Multi-query: every head reads the single kv head.
  Problem mqa(1, 3, 1, 1, 1, 2, 1);
  mqa.randomize(6);
  ReferenceOutputs mqaOut = mqa.run();
  for (int64_t h = 0; h < 3; ++h)
    EXPECT_EQ(mqaOut.o(0, h, 0, 0), mqa.V(0, 0, 0, 0));
}

TEST(Reference, SlidingWindow) {
  // Equal scores: each row is the mean of the values in its window.
  Problem p(1, 1, 1, 5, 5, 2, 1);
  for (int64_t j = 0; j < 5; ++j)
    p.V(0, 0, j, 0) = 10.0 * (j + 1);
  p.spec.windowLeft = 1;
  p.spec.windowRight = 1;
  ReferenceOutputs out = p.run();
  EXPECT_NEAR(out.o(0, 0, 0, 0), (10 + 20) / 2.0, 1e-13);
  EXPECT_NEAR(out.o(0, 0, 2, 0), (20 + 30 + 40) / 3.0, 1e-13);
  EXPECT_NEAR(out.o(0, 0, 4, 0), (40 + 50) / 2.0, 1e-13);
  EXPECT_NEAR(out.l(0, 0, 2), std::log(3.0), 1e-14);

  // Left side only, unbounded right, with causal: keys i-2..i.
  p.spec.windowRight.reset();
  p.spec.windowLeft = 2;
  p.spec.causal = true;
  out = p.run();
  EXPECT_NEAR(out.o(0, 0, 4, 0), (30 + 40 + 50) / 3.0, 1e-13);
  EXPECT_NEAR(out.o(0, 0, 1, 0), (10 + 20) / 2.0, 1e-13);

  // Bottom-right alignment shifts the window by Sk - Sq.
  Problem shifted(1, 1, 1, 2, 5, 2, 1);
  for (int64_t j = 0; j < 5; ++j)
    shifted.V(0, 0, j, 0) = 10.0 * (j + 1);
  shifted.spec.windowLeft = 1;
  shifted.spec.windowRight = 0;
  shifted.spec.alignment = Alignment::BottomRight; // off = 3
  out = shifted.run();
  EXPECT_NEAR(out.o(0, 0, 0, 0), (30 + 40) / 2.0, 1e-13);
  EXPECT_NEAR(out.o(0, 0, 1, 0), (40 + 50) / 2.0, 1e-13);

  // A window wider than the sequence changes nothing.
  Problem wide(1, 2, 1, 3, 4, 2, 2);
  wide.randomize(7);
  ReferenceOutputs plain = wide.run();
  wide.spec.windowLeft = std::numeric_limits<int64_t>::max();
  wide.spec.windowRight = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(wide.run().output, plain.output);
}

TEST(Reference, SoftCapBeforeBias) {
  // Scores 0 and 10, cap 5: 5 tanh(2) for key 1; then a bias of 1 on key 0.
  Problem p(1, 1, 1, 1, 2, 1, 1);
  p.Q(0, 0, 0, 0) = 1.0;
  p.K(0, 0, 1, 0) = 10.0;
  p.V(0, 0, 1, 0) = 1.0;
  p.spec.softcap = 5.0f;
  ReferenceOutputs out = p.run();
  double capped = 5.0 * std::tanh(2.0);
  EXPECT_NEAR(out.o(0, 0, 0, 0), 1.0 / (1.0 + std::exp(-capped)), 1e-14);
  EXPECT_NEAR(out.l(0, 0, 0), std::log(1.0 + std::exp(capped)), 1e-14);

  p.setMask(MaskKind::Bias, 1, 1, 1, 0.0);
  p.M(0, 0, 0, 0) = 1.0; // added after capping, so not capped itself
  out = p.run();
  EXPECT_NEAR(out.l(0, 0, 0), std::log(std::exp(1.0) + std::exp(capped)),
              1e-14);
}

TEST(Reference, BiasOfMinusInfinityExcludes) {
  Problem p(1, 1, 1, 2, 3, 2, 1);
  p.randomize(8);
  p.setMask(MaskKind::Bias, 1, 1, 2, 0.0);
  p.M(0, 0, 0, 0) = -kInf;
  p.M(0, 0, 0, 2) = -kInf; // row 0 keeps key 1 only
  for (int64_t j = 0; j < 3; ++j)
    p.M(0, 0, 1, j) = -kInf; // row 1 keeps nothing
  ReferenceOutputs out = p.run();
  EXPECT_EQ(out.o(0, 0, 0, 0), p.V(0, 0, 1, 0));
  EXPECT_EQ(out.o(0, 0, 1, 0), 0.0);
  EXPECT_EQ(out.l(0, 0, 1), -kInf);
}

TEST(Reference, BoolMaskKeepsTrue) {
  Problem p(1, 1, 1, 1, 3, 2, 1);
  p.randomize(9);
  p.setMask(MaskKind::Bool, 1, 1, 1, 0.0);
  p.M(0, 0, 0, 2) = 1.0;
  EXPECT_EQ(p.run().o(0, 0, 0, 0), p.V(0, 0, 2, 0));
  p.M(0, 0, 0, 2) = 0.0; // all false: fully masked
  ReferenceOutputs out = p.run();
  EXPECT_EQ(out.o(0, 0, 0, 0), 0.0);
  EXPECT_EQ(out.l(0, 0, 0), -kInf);
}

TEST(Reference, BroadcastMasksMatchExpandedMasks) {
  const int64_t B = 2, H = 3, Sq = 4, Sk = 5;
  for (MaskKind kind : {MaskKind::Bool, MaskKind::Bias}) {
    for (int pattern = 0; pattern < 8; ++pattern) {
      int64_t bm = pattern & 1 ? 1 : B, hm = pattern & 2 ? 1 : H,
              sqm = pattern & 4 ? 1 : Sq;
      Problem small(B, H, 1, Sq, Sk, 2, 2);
      small.randomize(10 + pattern);
      small.setMask(kind, bm, hm, sqm, 0.0);
      std::mt19937 rng(pattern);
      for (double &m : small.mask)
        m = kind == MaskKind::Bool ? (rng() % 3 != 0) : (rng() % 7) * 0.5 - 1;
      Problem full = small;
      full.setMask(kind, B, H, Sq, 0.0);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < Sq; ++i)
            for (int64_t j = 0; j < Sk; ++j)
              full.M(b, h, i, j) = small.M(bm == 1 ? 0 : b, hm == 1 ? 0 : h,
                                           sqm == 1 ? 0 : i, j);
      ReferenceOutputs a = small.run(), b = full.run();
      EXPECT_EQ(a.output, b.output) << "pattern " << pattern;
      EXPECT_EQ(a.lse, b.lse) << "pattern " << pattern;
    }
  }
}

TEST(Reference, StridedLayoutsMatchDense) {
  // The same query as a [B, S, H, D] buffer viewed with permuted strides.
  Problem p(2, 3, 3, 4, 5, 3, 2);
  p.randomize(11);
  ReferenceOutputs dense = p.run();
  const int64_t B = 2, H = 3, S = 4, D = 3;
  std::vector<double> bshd(p.q.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S; ++i)
        for (int64_t d = 0; d < D; ++d)
          bshd[((b * S + i) * H + h) * D + d] = p.Q(b, h, i, d);
  ReferenceInputs in = p.inputs();
  in.query.data = bshd.data();
  int64_t strides[4] = {S * H * D, D, H * D, 1};
  std::copy(strides, strides + 4, in.query.strides);
  ReferenceOutputs out;
  std::string error;
  ASSERT_TRUE(computeReference(p.spec, in, out, error)) << error;
  EXPECT_EQ(out.output, dense.output);
  EXPECT_EQ(out.lse, dense.lse);
}

//===----------------------------------------------------------------------===//
// Numerics
//===----------------------------------------------------------------------===//

TEST(Reference, HugeLogitsStayFinite) {
  // Scores 1e4, -1e4 and 1e4 - 1: naive exp would overflow.
  Problem p(1, 1, 1, 1, 3, 1, 1);
  p.Q(0, 0, 0, 0) = 1e4;
  p.K(0, 0, 0, 0) = 1.0;
  p.K(0, 0, 1, 0) = -1.0;
  p.K(0, 0, 2, 0) = 1.0 - 1e-4;
  p.V(0, 0, 0, 0) = 1.0;
  p.V(0, 0, 2, 0) = -1.0;
  ReferenceOutputs out = p.run();
  double e = std::exp(-1.0);
  EXPECT_NEAR(out.o(0, 0, 0, 0), (1.0 - e) / (1.0 + e), 1e-9);
  EXPECT_NEAR(out.l(0, 0, 0), 1e4 + std::log(1.0 + e), 1e-9);

  // Negative huge logits everywhere are just as fine.
  p.Q(0, 0, 0, 0) = -1e6;
  out = p.run();
  EXPECT_TRUE(std::isfinite(out.o(0, 0, 0, 0)));
  EXPECT_TRUE(std::isfinite(out.l(0, 0, 0)));
}

TEST(Reference, NaNPropagatesOnlyFromAllowedPositions) {
  Problem p(1, 1, 1, 3, 3, 2, 2);
  p.randomize(12);
  p.spec.causal = true;
  p.K(0, 0, 1, 0) = kNaN; // key 1 is allowed for rows 1 and 2 only
  ReferenceOutputs out = p.run();
  EXPECT_FALSE(std::isnan(out.o(0, 0, 0, 0)));
  EXPECT_FALSE(std::isnan(out.l(0, 0, 0)));
  for (int64_t i = 1; i < 3; ++i) {
    EXPECT_TRUE(std::isnan(out.o(0, 0, i, 0)));
    EXPECT_TRUE(std::isnan(out.o(0, 0, i, 1)));
    EXPECT_TRUE(std::isnan(out.l(0, 0, i)));
  }

  // A NaN value at an allowed key reaches that output column.
  Problem q(1, 1, 1, 1, 3, 2, 2);
  q.randomize(13);
  q.V(0, 0, 2, 1) = kNaN;
  out = q.run();
  EXPECT_FALSE(std::isnan(out.o(0, 0, 0, 0)));
  EXPECT_TRUE(std::isnan(out.o(0, 0, 0, 1)));
  // ... but not from a masked-out key.
  q.setMask(MaskKind::Bool, 1, 1, 1, 1.0);
  q.M(0, 0, 0, 2) = 0.0;
  out = q.run();
  EXPECT_FALSE(std::isnan(out.o(0, 0, 0, 1)));
}

TEST(Reference, RefusesInconsistentShapes) {
  Problem p(1, 4, 2, 2, 3, 2, 2);
  ReferenceOutputs out;
  std::string error;
  ReferenceInputs in = p.inputs();
  KernelSpec spec = p.spec;
  spec.headDim = 3;
  EXPECT_FALSE(computeReference(spec, in, out, error));
  EXPECT_NE(error.find("head dim D"), std::string::npos) << error;
  spec = p.spec;
  spec.group = 4;
  EXPECT_FALSE(computeReference(spec, in, out, error));
  EXPECT_NE(error.find("gqa"), std::string::npos) << error;
  spec = p.spec;
  spec.staticSizes[4] = 7;
  EXPECT_FALSE(computeReference(spec, in, out, error));
  EXPECT_NE(error.find("static Sk"), std::string::npos) << error;

  ReferenceInputs bad = in;
  bad.key.shape[1] = 3; // Hq = 4 is not a multiple of 3
  bad.value.shape[1] = 3;
  EXPECT_FALSE(computeReference(p.spec, bad, out, error));
  EXPECT_NE(error.find("not a multiple"), std::string::npos) << error;

  std::vector<double> maskData(2 * 3, 1.0);
  bad = in;
  bad.mask = RefTensor::dense(maskData.data(), 1, 1, 2, 3);
  EXPECT_FALSE(computeReference(p.spec, bad, out, error));
  EXPECT_NE(error.find("mask=none"), std::string::npos) << error;
  spec = p.spec;
  spec.mask = MaskKind::Bool;
  EXPECT_FALSE(computeReference(spec, in, out, error));
  EXPECT_NE(error.find("none was given"), std::string::npos) << error;
  bad.mask = RefTensor::dense(maskData.data(), 1, 2, 1, 3); // Hm = 2
  EXPECT_FALSE(computeReference(spec, bad, out, error));
  EXPECT_NE(error.find("mask heads"), std::string::npos) << error;
  bad.mask = RefTensor::dense(maskData.data(), 1, 1, 1, 6); // Sk = 6
  EXPECT_FALSE(computeReference(spec, bad, out, error));
  EXPECT_NE(error.find("mask key length"), std::string::npos) << error;
}

//===----------------------------------------------------------------------===//
// Masking rules, FLOPs and comparison
//===----------------------------------------------------------------------===//

TEST(Reference, CountMatchesThePositionRule) {
  std::mt19937 rng(14);
  for (int n = 0; n < 500; ++n) {
    KernelSpec spec;
    spec.causal = rng() & 1;
    spec.alignment = rng() & 1 ? Alignment::BottomRight : Alignment::TopLeft;
    if (rng() & 1)
      spec.windowLeft =
          rng() & 1 ? int64_t(rng() % 6) : std::numeric_limits<int64_t>::max();
    if (rng() & 1)
      spec.windowRight =
          rng() & 1 ? int64_t(rng() % 6) : std::numeric_limits<int64_t>::max();
    int64_t seqQ = rng() % 9, seqK = rng() % 9;
    int64_t brute = 0;
    for (int64_t i = 0; i < seqQ; ++i)
      for (int64_t j = 0; j < seqK; ++j)
        brute += isAllowedByDiagonal(spec, i, j, seqQ, seqK);
    ASSERT_EQ(countAllowedPositions(spec, seqQ, seqK), brute)
        << printKernelSpec(spec) << " Sq=" << seqQ << " Sk=" << seqK;
  }
}

TEST(Reference, FlopCount) {
  KernelSpec spec;
  spec.headDim = 64;
  spec.valueDim = 32;
  EXPECT_EQ(flopCount(spec, 2, 8, 128, 256), 2.0 * 2 * 8 * 128 * 256 * 96);
  spec.causal = true; // Sq = Sk = 4: 1 + 2 + 3 + 4 positions
  EXPECT_EQ(flopCount(spec, 1, 1, 4, 4), 2.0 * 10 * 96);
  spec.alignment = Alignment::BottomRight; // Sq = 4, Sk = 2: 0 + 0 + 1 + 2
  EXPECT_EQ(flopCount(spec, 1, 1, 4, 2), 2.0 * 3 * 96);
  spec.causal = false;
  spec.mask = MaskKind::Bool; // a data mask counts as dense
  EXPECT_EQ(flopCount(spec, 1, 1, 4, 2), 2.0 * 8 * 96);
  // Causal with Sq = Sk tends to half the dense count.
  spec = KernelSpec();
  spec.causal = true;
  double ratio = flopCount(spec, 1, 1, 4096, 4096) /
                 (2.0 * 4096 * 4096 * (spec.headDim + spec.valueDim));
  EXPECT_NEAR(ratio, 0.5, 1e-3);
  // A backward kernel's five products, a weights kernel's one.
  spec = KernelSpec();
  spec.headDim = 64;
  spec.valueDim = 32;
  spec.backward = true;
  EXPECT_EQ(flopCount(spec, 1, 2, 8, 4), 2.0 * 2 * 32 * (3 * 64 + 2 * 32));
  spec.backward = false;
  spec.weights = true;
  EXPECT_EQ(flopCount(spec, 1, 2, 8, 4), 2.0 * 2 * 32 * 64);
}

TEST(Reference, Tolerances) {
  EXPECT_EQ(tolerance(ElementType::F32), 1e-5);
  EXPECT_EQ(tolerance(ElementType::F16), 1e-2);
  EXPECT_EQ(tolerance(ElementType::BF16), 1e-2);
}

TEST(Reference, RelativeError) {
  ErrorStats stats;
  std::vector<double> ref = {1.0, -4.0, 2.0}, got = {1.0, -3.9, 2.0};
  EXPECT_NEAR(relativeError(got, ref, &stats), 0.1 / 4.0, 1e-15);
  EXPECT_NEAR(stats.maxAbs, 0.1, 1e-15);
  EXPECT_EQ(stats.maxRef, 4.0);
  EXPECT_EQ(stats.compared, 3);
  EXPECT_TRUE(stats.within(0.03));
  EXPECT_FALSE(stats.within(0.02));

  // A NaN where the reference is finite fails whatever the tolerance.
  got[1] = kNaN;
  EXPECT_EQ(relativeError(got, ref, &stats), kInf);
  EXPECT_EQ(stats.nanMismatches, 1);
  EXPECT_EQ(stats.firstMismatch, 1);
  // ... and so does a finite value where the reference is NaN.
  EXPECT_EQ(relativeError(ref, got), kInf);
  // Matching NaNs and matching infinities agree (LSE of a masked row).
  std::vector<double> lseRef = {-kInf, kNaN, 0.5}, lseGot = {-kInf, kNaN, 0.5};
  EXPECT_EQ(relativeError(lseGot, lseRef, &stats), 0.0);
  EXPECT_EQ(stats.compared, 1);
  lseGot[0] = -1e30;
  EXPECT_EQ(relativeError(lseGot, lseRef, &stats), kInf);
  EXPECT_EQ(stats.infMismatches, 1);
  lseGot[0] = kInf;
  EXPECT_EQ(relativeError(lseGot, lseRef, &stats), kInf);
  // An all-zero reference falls back to the absolute error.
  std::vector<double> zeros(3, 0.0), small = {0.0, 1e-7, 0.0};
  EXPECT_EQ(relativeError(small, zeros), 1e-7);
  // Different lengths never pass.
  EXPECT_EQ(relativeError(std::vector<double>(2), zeros, &stats), kInf);
  EXPECT_TRUE(stats.sizeMismatch);
}

} // namespace

//===----------------------------------------------------------------------===//
// Additive attention
//===----------------------------------------------------------------------===//

namespace {
/// One batch, one query, two keys, Dq = Dk = Dv = A = 1: s_j = v·tanh(wq·q
/// + wk·k_j), worked out below by hand.
struct AdditiveByHand {
  double q = 0.5, k[2] = {-1.0, 2.0}, values[2] = {3.0, -5.0};
  double wq = 2.0, wk = 0.25, va = 1.5;
  std::vector<double> mask = {1.0, 1.0};
  KernelSpec spec;
  ReferenceAdditiveInputs in;

  AdditiveByHand(bool masked) {
    spec.additive = true;
    spec.queryDim = spec.headDim = spec.valueDim = spec.attnDim = 1;
    if (masked)
      spec.mask = MaskKind::Bool;
    in.query = RefTensor::dense(&q, 1, 1, 1, 1);
    in.keys = RefTensor::dense(k, 1, 1, 2, 1);
    in.values = RefTensor::dense(values, 1, 1, 2, 1);
    in.queryWeight = RefTensor::dense(&wq, 1, 1, 1, 1);
    in.keyWeight = RefTensor::dense(&wk, 1, 1, 1, 1);
    in.scoreVector = RefTensor::dense(&va, 1, 1, 1, 1);
    if (masked)
      in.mask = RefTensor::dense(mask.data(), 1, 1, 1, 2);
  }
};
} // namespace

TEST(ReferenceAdditive, TwoKeysByHand) {
  AdditiveByHand p(/*masked=*/false);
  ReferenceAdditive out;
  std::string error;
  ASSERT_TRUE(computeReferenceAdditive(p.spec, p.in, out, error)) << error;
  // s0 = 1.5 tanh(1 - 0.25), s1 = 1.5 tanh(1 + 0.5).
  double s0 = 1.5 * std::tanh(0.75), s1 = 1.5 * std::tanh(1.5);
  double p0 = 1.0 / (1.0 + std::exp(s1 - s0)), p1 = 1.0 - p0;
  ASSERT_EQ(out.weights.size(), 2u);
  EXPECT_NEAR(out.weights[0], p0, 1e-15);
  EXPECT_NEAR(out.weights[1], p1, 1e-15);
  EXPECT_NEAR(out.output[0], 3.0 * p0 - 5.0 * p1, 1e-14);
}

TEST(ReferenceAdditive, MaskedKeysAndEmptyRows) {
  AdditiveByHand p(/*masked=*/true);
  p.mask[0] = 0.0; // only key 1 (the view reads p.mask's storage)
  ReferenceAdditive out;
  std::string error;
  ASSERT_TRUE(computeReferenceAdditive(p.spec, p.in, out, error)) << error;
  EXPECT_EQ(out.weights[0], 0.0);
  EXPECT_EQ(out.weights[1], 1.0);
  EXPECT_EQ(out.output[0], -5.0);
  // A NaN value at the masked key stays out.
  p.values[0] = kNaN;
  ASSERT_TRUE(computeReferenceAdditive(p.spec, p.in, out, error)) << error;
  EXPECT_EQ(out.output[0], -5.0);
  // No allowed key: O = 0 and P = 0, not NaN.
  p.mask[1] = 0.0;
  ASSERT_TRUE(computeReferenceAdditive(p.spec, p.in, out, error)) << error;
  EXPECT_EQ(out.output[0], 0.0);
  EXPECT_EQ(out.weights[0], 0.0);
  EXPECT_EQ(out.weights[1], 0.0);
  // Shapes that do not fit the spec are refused.
  p.spec.attnDim = 2;
  EXPECT_FALSE(computeReferenceAdditive(p.spec, p.in, out, error));
  EXPECT_NE(error.find("additive attention"), std::string::npos);
}
