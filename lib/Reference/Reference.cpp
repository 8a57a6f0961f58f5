//===- Reference.cpp - The float64 reference of the attention contract ----===//
//
// Each step below is one numbered step of the contract, in its order: scores,
// soft-cap, bias, the allowed set, then an exact two-pass softmax over the
// allowed positions of the row. Keeping the code shaped like the contract
// makes it easy to audit; nothing here tries to be fast.
//
//===----------------------------------------------------------------------===//

#include "lib/Reference/Reference.h"
#include "lib/Support/Limits.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace attn;

RefTensor RefTensor::dense(const double *data, int64_t d0, int64_t d1,
                           int64_t d2, int64_t d3) {
  RefTensor tensor;
  tensor.data = data;
  int64_t dims[4] = {d0, d1, d2, d3};
  int64_t stride = 1;
  for (int i = 3; i >= 0; --i) {
    tensor.shape[i] = dims[i];
    tensor.strides[i] = stride;
    stride *= dims[i];
  }
  return tensor;
}

//===----------------------------------------------------------------------===//
// Causal and window masking
//===----------------------------------------------------------------------===//

int64_t attn::diagonalOffset(const KernelSpec &spec, int64_t seqQ,
                             int64_t seqK) {
  return spec.alignment == Alignment::BottomRight ? seqK - seqQ : 0;
}

bool attn::isAllowedByDiagonal(const KernelSpec &spec, int64_t i, int64_t j,
                               int64_t seqQ, int64_t seqK) {
  if (!spec.usesDiagonal())
    return true;
  // Distance of the key from the (shifted) diagonal; comparing it with the
  // window sides avoids overflow when a side is huge.
  int64_t distance = j - (i + diagonalOffset(spec, seqQ, seqK));
  if (spec.causal && distance > 0)
    return false;
  if (spec.windowRight && distance > *spec.windowRight)
    return false;
  if (spec.windowLeft && -distance > *spec.windowLeft)
    return false;
  return true;
}

int64_t attn::countAllowedPositions(const KernelSpec &spec, int64_t seqQ,
                                    int64_t seqK) {
  if (seqQ <= 0 || seqK <= 0)
    return 0;
  if (!spec.usesDiagonal())
    return seqQ * seqK;
  int64_t off = diagonalOffset(spec, seqQ, seqK);
  // A side beyond Sq + Sk cannot exclude anything; clamping keeps the sums
  // below from overflowing.
  int64_t reach = seqQ + seqK;
  int64_t total = 0;
  for (int64_t i = 0; i < seqQ; ++i) {
    int64_t center = i + off;
    int64_t lo = 0, hi = seqK - 1;
    if (spec.causal)
      hi = std::min(hi, center);
    if (spec.windowRight)
      hi = std::min(hi, center + std::min(*spec.windowRight, reach));
    if (spec.windowLeft)
      lo = std::max(lo, center - std::min(*spec.windowLeft, reach));
    if (hi >= lo)
      total += hi - lo + 1;
  }
  return total;
}

double attn::flopCount(const KernelSpec &spec, int64_t batch, int64_t headsQ,
                       int64_t seqQ, int64_t seqK) {
  if (spec.additive) {
    // The backward (docs/spec.md, "The gradient of additive attention"):
    // the scores twice, dS·(1 − t²) and dS·t, and dP, dV (4A + 2Dv
    // multiply-adds a pair).
    double a = double(spec.attnDim);
    double perPair = spec.additiveBackward ? 4.0 * a + 2.0 * spec.valueDim
                                           : a + double(spec.valueDim);
    return 2.0 * double(batch) *
           (double(seqQ) * double(seqK) * perPair +
            (double(seqQ) * double(spec.queryDim) +
             double(seqK) * double(spec.headDim)) *
                a);
  }
  if (spec.linearBackward) {
    // dQ and dS over the rows, dK and dV over the keys; causal, per row the
    // chunk's A, B, B·φ(K) and backward Aᵀ, Bᵀ, Bᵀφ(Q), Aᵀg.
    double rows = double(batch) * double(headsQ);
    double count = 4.0 * rows * double(seqQ + seqK) * double(spec.headDim) *
                   double(spec.valueDim);
    if (spec.causal)
      count += 2.0 * rows * double(seqQ) * double(kLinearBackwardChunk) *
               double(4 * spec.headDim + 3 * spec.valueDim);
    return count;
  }
  if (spec.linear) {
    double rows = double(batch) * double(headsQ);
    double count = 2.0 * rows * double(seqQ + seqK) * double(spec.headDim) *
                   double(spec.valueDim);
    if (spec.causal)
      count += 2.0 * rows * double(seqQ) * double(spec.chunk) *
               double(spec.headDim + spec.valueDim);
    return count;
  }
  double positions =
      static_cast<double>(countAllowedPositions(spec, seqQ, seqK));
  // Multiply-adds per allowed pair: the forward's two products (D + Dv),
  // a backward kernel's five (S, dP, dV, dK, dQ: 3D + 2Dv), a weights
  // kernel's one (D).
  int64_t perPair = spec.backward  ? 3 * spec.headDim + 2 * spec.valueDim
                    : spec.weights ? spec.headDim
                                   : spec.headDim + spec.valueDim;
  return 2.0 * static_cast<double>(batch) * static_cast<double>(headsQ) *
         positions * static_cast<double>(perPair);
}

double attn::tolerance(ElementType type) {
  return type == ElementType::F32 ? 1e-5 : 1e-2;
}

double attn::gradientTolerance(ElementType type) {
  return type == ElementType::F32 ? 1e-4 : 2e-2;
}

//===----------------------------------------------------------------------===//
// The reference
//===----------------------------------------------------------------------===//

namespace {

std::string shapeString(const RefTensor &tensor) {
  std::string out = "[";
  for (int i = 0; i < 4; ++i)
    out += (i ? ", " : "") + std::to_string(tensor.shape[i]);
  return out + "]";
}

bool checkShapes(const KernelSpec &spec, const ReferenceInputs &in,
                 std::string &error) {
  const RefTensor &q = in.query, &k = in.key, &v = in.value;
  for (const RefTensor *tensor : {&q, &k, &v})
    for (int64_t dim : tensor->shape)
      if (dim < 0) {
        error = "negative dimension in shape " + shapeString(*tensor);
        return false;
      }
  auto mismatch = [&](const char *what, int64_t expected, int64_t actual) {
    error = std::string(what) + ": expected " + std::to_string(expected) +
            ", got " + std::to_string(actual) + " (Q " + shapeString(q) +
            ", K " + shapeString(k) + ", V " + shapeString(v) + ")";
    return false;
  };
  int64_t batch = q.shape[0], heads = q.shape[1], seqQ = q.shape[2];
  int64_t kvHeads = k.shape[1], seqK = k.shape[2];
  if (k.shape[0] != batch)
    return mismatch("key batch", batch, k.shape[0]);
  if (!in.sinks.empty() && static_cast<int64_t>(in.sinks.size()) != heads)
    return mismatch("sinks (one per query head)", heads,
                    static_cast<int64_t>(in.sinks.size()));
  if (v.shape[0] != batch)
    return mismatch("value batch", batch, v.shape[0]);
  if (v.shape[1] != kvHeads)
    return mismatch("value heads", kvHeads, v.shape[1]);
  if (v.shape[2] != seqK)
    return mismatch("value sequence length", seqK, v.shape[2]);
  if (q.shape[3] != spec.headDim)
    return mismatch("query head dim D", spec.headDim, q.shape[3]);
  if (k.shape[3] != spec.headDim)
    return mismatch("key head dim D", spec.headDim, k.shape[3]);
  if (v.shape[3] != spec.valueDim)
    return mismatch("value head dim Dv", spec.valueDim, v.shape[3]);
  if (kvHeads == 0 ? heads != 0 : heads % kvHeads != 0) {
    error = "query heads Hq = " + std::to_string(heads) +
            " is not a multiple of key/value heads Hkv = " +
            std::to_string(kvHeads);
    return false;
  }
  // Hq / Hkv rather than gqa * Hkv: a huge gqa must not overflow.
  if (spec.group > 0 && kvHeads > 0 && heads / kvHeads != spec.group)
    return mismatch("query heads per key/value head (gqa)", spec.group,
                    heads / kvHeads);
  int64_t sizes[5] = {batch, heads, kvHeads, seqQ, seqK};
  static const char *const sizeNames[5] = {
      "static B", "static Hq", "static Hkv", "static Sq", "static Sk"};
  for (int i = 0; i < 5; ++i)
    if (spec.staticSizes[i] != -1 && spec.staticSizes[i] != sizes[i])
      return mismatch(sizeNames[i], spec.staticSizes[i], sizes[i]);

  if (spec.mask == MaskKind::None) {
    if (in.mask) {
      error = "a mask was given but the spec has mask=none";
      return false;
    }
    return true;
  }
  if (!in.mask) {
    error = "the spec has a mask but none was given";
    return false;
  }
  const RefTensor &m = *in.mask;
  int64_t full[3] = {batch, heads, seqQ};
  static const char *const maskDims[3] = {"batch", "heads", "query length"};
  for (int i = 0; i < 3; ++i) {
    if (m.shape[i] != 1 && m.shape[i] != full[i]) {
      error = std::string("mask ") + maskDims[i] + " must be 1 or " +
              std::to_string(full[i]) + ", got " + std::to_string(m.shape[i]);
      return false;
    }
  }
  if (m.shape[3] != seqK) {
    error = "mask key length must be Sk = " + std::to_string(seqK) + ", got " +
            std::to_string(m.shape[3]);
    return false;
  }
  return true;
}

} // namespace

namespace {

/// Steps 1-4 of the contract for one row (b, h, i): its scores at the
/// allowed positions, whether each is allowed, for soft-capping the
/// tanh(ŝ/c) that its derivative needs, and with a score_mod its derivative
/// in the score (by central differences of the C++ function: independent of
/// the derivative the compiler generates).
struct ScoredRow {
  std::vector<double> scores, capTanh, modSlope;
  std::vector<char> allowed;
  bool anyAllowed = false, anyNaN = false;
  double max = -std::numeric_limits<double>::infinity();
  /// The row's head's sink logit; -inf without sinks (no sink).
  double sink = -std::numeric_limits<double>::infinity();

  /// Whether the row's outputs are NaN: a NaN score or a NaN sink.
  bool isNaN() const { return anyNaN || std::isnan(sink); }
  /// Whether the sink takes all the weight (+inf): O = 0, LSE = +inf.
  bool sinkTakesAll() const {
    return sink == std::numeric_limits<double>::infinity();
  }
};

/// d score_mod(x) / dx by central differences (one-sided where the function
/// is not finite on one side: at an exclusion's edge).
double scoreModSlope(const ReferenceInputs &in, double x, double fx, int64_t b,
                     int64_t h, int64_t i, int64_t j) {
  const double step = 1e-6 * std::max(1.0, std::fabs(x));
  double above = in.scoreMod(x + step, b, h, i, j);
  double below = in.scoreMod(x - step, b, h, i, j);
  if (std::isfinite(above) && std::isfinite(below))
    return (above - below) / (2 * step);
  if (std::isfinite(above))
    return (above - fx) / step;
  if (std::isfinite(below))
    return (fx - below) / step;
  return 0.0;
}

void scoreRow(const KernelSpec &spec, const ReferenceInputs &in, int64_t b,
              int64_t h, int64_t i, ScoredRow &row) {
  const RefTensor &q = in.query, &k = in.key;
  const int64_t seqQ = q.shape[2], seqK = k.shape[2];
  const int64_t group = k.shape[1] ? q.shape[1] / k.shape[1] : 1;
  const int64_t kvHead = h / group;
  const double scale = spec.effectiveScale();
  const double inf = std::numeric_limits<double>::infinity();
  row.scores.assign(static_cast<size_t>(seqK), 0.0);
  row.capTanh.assign(static_cast<size_t>(seqK), 0.0);
  row.modSlope.assign(in.scoreMod ? static_cast<size_t>(seqK) : 0, 0.0);
  row.allowed.assign(static_cast<size_t>(seqK), 0);
  row.anyAllowed = row.anyNaN = false;
  row.max = -inf;
  row.sink = in.sinks.empty() ? -inf : in.sinks[static_cast<size_t>(h)];
  for (int64_t j = 0; j < seqK; ++j) {
    if (!isAllowedByDiagonal(spec, i, j, seqQ, seqK))
      continue;
    double maskValue = 0.0;
    if (in.mask) {
      const RefTensor &m = *in.mask;
      maskValue = m.at(m.shape[0] == 1 ? 0 : b, m.shape[1] == 1 ? 0 : h,
                       m.shape[2] == 1 ? 0 : i, j);
      if (spec.mask == MaskKind::Bool && maskValue == 0.0)
        continue;
      // A -inf bias excludes the position whatever the score is (NaN + -inf
      // would be NaN).
      if (spec.mask == MaskKind::Bias && maskValue == -inf)
        continue;
    }
    if (in.maskMod && !in.maskMod(b, h, i, j))
      continue;
    double dot = 0.0;
    for (int64_t d = 0; d < spec.headDim; ++d)
      dot += q.at(b, h, i, d) * k.at(b, kvHead, j, d);
    double s = scale * dot;
    if (spec.softcap) {
      double cap = *spec.softcap;
      row.capTanh[j] = std::tanh(s / cap);
      s = cap * row.capTanh[j];
    }
    if (spec.mask == MaskKind::Bias)
      s += maskValue;
    if (in.scoreMod) {
      double x = s;
      s = in.scoreMod(x, b, h, i, j);
      row.modSlope[j] = scoreModSlope(in, x, s, b, h, i, j);
    }
    // A -inf score (a finite bias added to a score of -inf: only from an
    // infinite input) contributes exp(-inf) = 0.
    if (s == -inf)
      continue;
    row.allowed[j] = 1;
    row.scores[j] = s;
    row.anyAllowed = true;
    if (std::isnan(s))
      row.anyNaN = true;
    else
      row.max = std::max(row.max, s);
  }
}

/// The softmax's shift and denominator of a row that is not NaN and whose
/// sink is not +inf: m = the largest of its allowed scores and its sink,
/// l = Σ_allowed exp(s − m) + exp(sink − m) (the sink's term 0 for -inf).
struct Normalizer {
  double max = 0, sum = 0;
};
Normalizer normalizerOf(const ScoredRow &row) {
  Normalizer n;
  n.max = std::max(row.max, row.sink);
  n.sum = row.sink == -std::numeric_limits<double>::infinity()
              ? 0.0
              : std::exp(row.sink - n.max);
  for (size_t j = 0; j < row.scores.size(); ++j)
    if (row.allowed[j])
      n.sum += std::exp(row.scores[j] - n.max);
  return n;
}

/// P of a scored row with an allowed position into `p` (the row's length):
/// the exact softmax (with the sink's column, not written), 0 where
/// excluded, NaN at every allowed position of a NaN row, 0 everywhere under
/// a sink of +inf.
void rowSoftmax(const ScoredRow &row, double *p) {
  const size_t keys = row.scores.size();
  Normalizer n;
  if (!row.isNaN() && !row.sinkTakesAll())
    n = normalizerOf(row);
  for (size_t j = 0; j < keys; ++j)
    p[j] = !row.allowed[j] || row.sinkTakesAll() ? 0.0
           : row.isNaN() ? std::numeric_limits<double>::quiet_NaN()
                         : std::exp(row.scores[j] - n.max) / n.sum;
}

} // namespace

bool attn::dropoutKeeps(float p, uint64_t seed, int64_t b, int64_t h, int64_t i,
                        int64_t j) {
  // Philox 4x32-10 (Salmon et al., Random123) on the counter
  // (j / 8, i, h, b) under the key (seed mod 2^32, seed >> 32).
  uint32_t ctr[4] = {static_cast<uint32_t>(j / 8), static_cast<uint32_t>(i),
                     static_cast<uint32_t>(h), static_cast<uint32_t>(b)};
  uint32_t k0 = static_cast<uint32_t>(seed),
           k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint64_t p0 = uint64_t{0xD2511F53u} * ctr[0];
    uint64_t p1 = uint64_t{0xCD9E8D57u} * ctr[2];
    uint32_t next[4] = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ k0,
                        static_cast<uint32_t>(p1),
                        static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ k1,
                        static_cast<uint32_t>(p0)};
    std::copy(next, next + 4, ctr);
  }
  // 16 bits of word (j mod 8) / 2, its low half for even j; kept iff they
  // reach floor(p * 2^16) (the product exact in double).
  uint32_t word = ctr[(j % 8) / 2];
  uint32_t bits = j % 2 ? word >> 16 : word & 0xFFFFu;
  return bits >= static_cast<uint32_t>(static_cast<double>(p) * 65536.0);
}

namespace {
/// Dropout's factor Z of (b, h, i, j): keep / (1 - p), 1/(1 - p) rounded
/// to f32 as the kernels take it; 1 without dropout.
double dropoutFactor(const KernelSpec &spec, const ReferenceInputs &in,
                     int64_t b, int64_t h, int64_t i, int64_t j) {
  if (!spec.dropout)
    return 1.0;
  if (!dropoutKeeps(in.dropoutP, in.dropoutSeed, b, h, i, j))
    return 0.0;
  return static_cast<double>(1.0f / (1.0f - in.dropoutP));
}
} // namespace

bool attn::computeReference(const KernelSpec &spec, const ReferenceInputs &in,
                            ReferenceOutputs &out, std::string &error) {
  if (!checkShapes(spec, in, error))
    return false;
  const RefTensor &q = in.query, &k = in.key, &v = in.value;
  const int64_t batch = q.shape[0], heads = q.shape[1], seqQ = q.shape[2];
  const int64_t kvHeads = k.shape[1], seqK = k.shape[2];
  const int64_t valueDim = spec.valueDim;
  const int64_t group = kvHeads ? heads / kvHeads : 1;
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();

  out.batch = batch;
  out.headsQ = heads;
  out.seqQ = seqQ;
  out.valueDim = valueDim;
  out.output.assign(static_cast<size_t>(batch * heads * seqQ * valueDim), 0.0);
  out.lse.assign(static_cast<size_t>(batch * heads * seqQ), 0.0);

  ScoredRow row;
  std::vector<double> z(static_cast<size_t>(seqK)); // dropout's factors
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kvHead = h / group;
      for (int64_t i = 0; i < seqQ; ++i) {
        scoreRow(spec, in, b, h, i, row);
        double *o = &out.output[((b * heads + h) * seqQ + i) * valueDim];
        double &lse = out.lse[(b * heads + h) * seqQ + i];
        // A NaN score (or sink) reaches every output of the row through
        // the softmax denominator.
        if (row.isNaN()) {
          std::fill(o, o + valueDim, nan);
          lse = nan;
          continue;
        }
        // Step 6: a row with nothing to attend to (not even a sink), and a
        // sink of +inf, which takes all the weight.
        if ((!row.anyAllowed && row.sink == -inf) || row.sinkTakesAll()) {
          std::fill(o, o + valueDim, 0.0);
          lse = row.sinkTakesAll() ? inf : -inf;
          continue;
        }

        // Step 5: exact softmax over the allowed positions and the sink.
        Normalizer n = normalizerOf(row);
        for (int64_t j = 0; j < seqK; ++j)
          z[j] = dropoutFactor(spec, in, b, h, i, j);
        for (int64_t d = 0; d < valueDim; ++d) {
          double acc = 0.0;
          for (int64_t j = 0; j < seqK; ++j)
            if (row.allowed[j])
              acc += std::exp(row.scores[j] - n.max) * z[j] *
                     v.at(b, kvHead, j, d);
          o[d] = acc / n.sum;
        }
        lse = n.max + std::log(n.sum);
      }
    }
  }
  return true;
}

bool attn::computeReferenceLinear(const KernelSpec &spec,
                                  const ReferenceInputs &in,
                                  const std::vector<double> &state,
                                  const std::vector<double> &normalizer,
                                  ReferenceLinear &out, std::string &error) {
  const int64_t batch = in.query.shape[0], headsQ = in.query.shape[1];
  const int64_t seqQ = in.query.shape[2], d = in.query.shape[3];
  const int64_t headsKv = in.key.shape[1], seqK = in.key.shape[2];
  const int64_t dv = in.value.shape[3];
  if (d != spec.headDim || in.key.shape[3] != d || dv != spec.valueDim ||
      in.key.shape[0] != batch || in.value.shape[0] != batch ||
      in.value.shape[1] != headsKv || in.value.shape[2] != seqK ||
      headsKv <= 0 || headsQ % headsKv != 0 || (spec.causal && seqQ != seqK)) {
    error = "linear attention: query " + shapeString(in.query) + ", key " +
            shapeString(in.key) + " and value " + shapeString(in.value) +
            " do not fit the kernel's D = " + std::to_string(spec.headDim) +
            ", Dv = " + std::to_string(spec.valueDim) +
            (spec.causal ? " (causal: Sq = Sk)" : "");
    return false;
  }
  const size_t stateSize = size_t(batch * headsKv * d * dv);
  const size_t normSize = size_t(batch * headsKv * d);
  if ((!state.empty() && state.size() != stateSize) ||
      (!normalizer.empty() && normalizer.size() != normSize)) {
    error = "linear attention: the initial state has the wrong size";
    return false;
  }
  auto phi = [&](double x) {
    if (spec.featureMap == FeatureMap::Identity)
      return x;
    if (spec.featureMap == FeatureMap::Relu)
      return x > 0 ? x : (std::isnan(x) ? x : 0.0);
    return x > 0 ? x + 1.0 : std::exp(x);
  };
  const int64_t group = headsQ / headsKv;
  out.output.assign(size_t(batch * headsQ * seqQ * dv), 0.0);
  out.state = state.empty() ? std::vector<double>(stateSize, 0.0) : state;
  out.normalizer =
      normalizer.empty() ? std::vector<double>(normSize, 0.0) : normalizer;
  std::vector<double> s, z;
  std::vector<double> fq(static_cast<size_t>(d)), fk(static_cast<size_t>(d));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t g = 0; g < headsKv; ++g) {
      double *finalState = &out.state[size_t((b * headsKv + g) * d * dv)];
      double *finalNorm = &out.normalizer[size_t((b * headsKv + g) * d)];
      // Every key's contribution, for the non-causal rows and the final state.
      std::vector<double> allS(finalState, finalState + d * dv),
          allZ(finalNorm, finalNorm + d);
      for (int64_t j = 0; j < seqK; ++j)
        for (int64_t x = 0; x < d; ++x) {
          double f = phi(in.key.at(b, g, j, x));
          allZ[size_t(x)] += f;
          for (int64_t e = 0; e < dv; ++e)
            allS[size_t(x * dv + e)] += f * in.value.at(b, g, j, e);
        }
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        // Causal rows: the state after keys 0..i, built token by token.
        s.assign(finalState, finalState + d * dv);
        z.assign(finalNorm, finalNorm + d);
        for (int64_t i = 0; i < seqQ; ++i) {
          if (spec.causal) {
            for (int64_t x = 0; x < d; ++x)
              fk[size_t(x)] = phi(in.key.at(b, g, i, x));
            for (int64_t x = 0; x < d; ++x) {
              z[size_t(x)] += fk[size_t(x)];
              for (int64_t e = 0; e < dv; ++e)
                s[size_t(x * dv + e)] += fk[size_t(x)] * in.value.at(b, g, i, e);
            }
          }
          const std::vector<double> &rowS = spec.causal ? s : allS;
          const std::vector<double> &rowZ = spec.causal ? z : allZ;
          double den = spec.eps;
          for (int64_t x = 0; x < d; ++x) {
            fq[size_t(x)] = phi(in.query.at(b, h, i, x));
            den += fq[size_t(x)] * rowZ[size_t(x)];
          }
          for (int64_t e = 0; e < dv; ++e) {
            double num = 0;
            for (int64_t x = 0; x < d; ++x)
              num += fq[size_t(x)] * rowS[size_t(x * dv + e)];
            out.output[size_t(((b * headsQ + h) * seqQ + i) * dv + e)] =
                spec.unnormalized ? num : num / den;
          }
        }
      }
      std::copy(allS.begin(), allS.end(), finalState);
      std::copy(allZ.begin(), allZ.end(), finalNorm);
    }
  return true;
}

bool attn::computeReferenceLinearBackward(
    const KernelSpec &spec, const ReferenceInputs &in,
    const std::vector<double> &output, const std::vector<double> &gradOutput,
    const std::vector<double> &state, const std::vector<double> &normalizer,
    const std::vector<double> &gradState,
    const std::vector<double> &gradNormalizer, ReferenceLinearGradients &out,
    std::string &error) {
  const int64_t batch = in.query.shape[0], headsQ = in.query.shape[1];
  const int64_t seqQ = in.query.shape[2], d = in.query.shape[3];
  const int64_t headsKv = in.key.shape[1], seqK = in.key.shape[2];
  const int64_t dv = in.value.shape[3];
  const size_t rowsSize = size_t(batch * headsQ * seqQ * dv);
  const size_t stateSize = size_t(batch * headsKv * d * dv);
  const size_t normSize = size_t(batch * headsKv * d);
  if (d != spec.headDim || in.key.shape[3] != d || dv != spec.valueDim ||
      headsKv <= 0 || headsQ % headsKv != 0 || (spec.causal && seqQ != seqK) ||
      output.size() != rowsSize || gradOutput.size() != rowsSize ||
      state.size() != stateSize || normalizer.size() != normSize ||
      (!gradState.empty() && gradState.size() != stateSize) ||
      (!gradNormalizer.empty() && gradNormalizer.size() != normSize)) {
    error = "linear attention's gradients: the tensors do not fit the "
            "kernel's D = " +
            std::to_string(spec.headDim) +
            ", Dv = " + std::to_string(spec.valueDim) +
            (spec.causal ? " (causal: Sq = Sk)" : "");
    return false;
  }
  auto phi = [&](double x) {
    if (spec.featureMap == FeatureMap::Identity)
      return x;
    if (spec.featureMap == FeatureMap::Relu)
      return x > 0 ? x : (std::isnan(x) ? x : 0.0);
    return x > 0 ? x + 1.0 : std::exp(x);
  };
  auto slope = [&](double x) {
    if (spec.featureMap == FeatureMap::Identity)
      return 1.0;
    if (spec.featureMap == FeatureMap::Relu)
      return x > 0 || std::isnan(x) ? 1.0 : 0.0;
    return x > 0 ? 1.0 : std::exp(x);
  };
  const int64_t group = headsQ / headsKv;
  out.gradQuery.assign(size_t(batch * headsQ * seqQ * d), 0.0);
  out.gradKey.assign(size_t(batch * headsKv * seqK * d), 0.0);
  out.gradValue.assign(size_t(batch * headsKv * seqK * dv), 0.0);
  out.gradState =
      gradState.empty() ? std::vector<double>(stateSize, 0.0) : gradState;
  out.gradNormalizer = gradNormalizer.empty()
                           ? std::vector<double>(normSize, 0.0)
                           : gradNormalizer;
  std::vector<double> g(size_t(std::max<int64_t>(headsQ * seqQ * dv, 1))),
      c(size_t(std::max<int64_t>(headsQ * seqQ, 1)));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t kv = 0; kv < headsKv; ++kv) {
      const double *s0 = &state[size_t((b * headsKv + kv) * d * dv)];
      const double *z0 = &normalizer[size_t((b * headsKv + kv) * d)];
      // The state row i sees: S (non-causal) or S0 plus keys 0..i.
      std::vector<double> s(s0, s0 + d * dv), z(z0, z0 + d);
      auto addKey = [&](int64_t j) {
        for (int64_t x = 0; x < d; ++x) {
          double f = phi(in.key.at(b, kv, j, x));
          z[size_t(x)] += f;
          for (int64_t e = 0; e < dv; ++e)
            s[size_t(x * dv + e)] += f * in.value.at(b, kv, j, e);
        }
      };
      for (int64_t i = 0; i < seqQ; ++i) {
        if (spec.causal)
          addKey(i);
        for (int64_t h = kv * group; h < (kv + 1) * group; ++h) {
          const size_t row = size_t((b * headsQ + h) * seqQ + i);
          double den = spec.eps;
          for (int64_t x = 0; x < d; ++x)
            den += phi(in.query.at(b, h, i, x)) * z[size_t(x)];
          double ci = 0;
          for (int64_t e = 0; e < dv; ++e) {
            double gi =
                gradOutput[row * dv + e] / (spec.unnormalized ? 1 : den);
            g[size_t((h * seqQ + i) * dv + e)] = gi;
            ci -= gi * output[row * dv + e];
          }
          if (spec.unnormalized)
            ci = 0;
          c[size_t(h * seqQ + i)] = ci;
          for (int64_t x = 0; x < d; ++x) {
            double dphi = ci * z[size_t(x)];
            for (int64_t e = 0; e < dv; ++e)
              dphi +=
                  s[size_t(x * dv + e)] * g[size_t((h * seqQ + i) * dv + e)];
            out.gradQuery[row * d + x] = dphi * slope(in.query.at(b, h, i, x));
          }
        }
      }
      // The keys: dS and dz of the rows that see key j (i >= j causal, all
      // rows otherwise), summed backward in time.
      double *ds = &out.gradState[size_t((b * headsKv + kv) * d * dv)];
      double *dz = &out.gradNormalizer[size_t((b * headsKv + kv) * d)];
      auto addRow = [&](int64_t i) {
        for (int64_t h = kv * group; h < (kv + 1) * group; ++h)
          for (int64_t x = 0; x < d; ++x) {
            double f = phi(in.query.at(b, h, i, x));
            dz[x] += c[size_t(h * seqQ + i)] * f;
            for (int64_t e = 0; e < dv; ++e)
              ds[x * dv + e] += f * g[size_t((h * seqQ + i) * dv + e)];
          }
      };
      if (!spec.causal)
        for (int64_t i = 0; i < seqQ; ++i)
          addRow(i);
      for (int64_t j = seqK - 1; j >= 0; --j) {
        if (spec.causal)
          addRow(j);
        for (int64_t x = 0; x < d; ++x) {
          double dphi = dz[x];
          for (int64_t e = 0; e < dv; ++e)
            dphi += ds[x * dv + e] * in.value.at(b, kv, j, e);
          out.gradKey[size_t(((b * headsKv + kv) * seqK + j) * d + x)] =
              dphi * slope(in.key.at(b, kv, j, x));
        }
        for (int64_t e = 0; e < dv; ++e) {
          double sum = 0;
          for (int64_t x = 0; x < d; ++x)
            sum += ds[x * dv + e] * phi(in.key.at(b, kv, j, x));
          out.gradValue[size_t(((b * headsKv + kv) * seqK + j) * dv + e)] = sum;
        }
      }
    }
  return true;
}

bool attn::computeReferenceWeights(const KernelSpec &spec,
                                   const ReferenceInputs &in,
                                   std::vector<double> &weights,
                                   std::string &error) {
  if (!checkShapes(spec, in, error))
    return false;
  const int64_t batch = in.query.shape[0], heads = in.query.shape[1];
  const int64_t seqQ = in.query.shape[2], seqK = in.key.shape[2];
  weights.assign(static_cast<size_t>(batch * heads * seqQ * seqK), 0.0);
  ScoredRow row;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < seqQ; ++i) {
        scoreRow(spec, in, b, h, i, row);
        if (!row.anyAllowed)
          continue;
        // The weights that multiply V: P·Z with dropout.
        double *w =
            &weights[static_cast<size_t>(((b * heads + h) * seqQ + i) * seqK)];
        rowSoftmax(row, w);
        if (spec.dropout)
          for (int64_t j = 0; j < seqK; ++j)
            w[j] *= dropoutFactor(spec, in, b, h, i, j);
      }
  return true;
}

bool attn::computeReferenceBackward(const KernelSpec &spec,
                                    const ReferenceInputs &in,
                                    const RefTensor &output,
                                    const RefTensor &gradOutput,
                                    const std::vector<double> *gradLse,
                                    ReferenceGradients &out,
                                    std::string &error) {
  if (!checkShapes(spec, in, error))
    return false;
  const RefTensor &q = in.query, &k = in.key, &v = in.value;
  const int64_t batch = q.shape[0], heads = q.shape[1], seqQ = q.shape[2];
  const int64_t kvHeads = k.shape[1], seqK = k.shape[2];
  const int64_t headDim = spec.headDim, valueDim = spec.valueDim;
  const int64_t group = kvHeads ? heads / kvHeads : 1;
  const double scale = spec.effectiveScale();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (gradLse && gradLse->size() != static_cast<size_t>(batch * heads * seqQ)) {
    error = "dLSE has " + std::to_string(gradLse->size()) +
            " values, not B * Hq * Sq";
    return false;
  }
  out.query.assign(static_cast<size_t>(batch * heads * seqQ * headDim), 0.0);
  out.key.assign(static_cast<size_t>(batch * kvHeads * seqK * headDim), 0.0);
  out.value.assign(static_cast<size_t>(batch * kvHeads * seqK * valueDim),
                   0.0);
  out.scores.assign(
      spec.gradMask ? static_cast<size_t>(batch * heads * seqQ * seqK) : 0,
      0.0);
  auto at = [](std::vector<double> &t, int64_t i0, int64_t n1, int64_t i1,
               int64_t n2, int64_t i2, int64_t n3) -> double * {
    return &t[((i0 * n1 + i1) * n2 + i2) * n3];
  };

  ScoredRow row;
  std::vector<double> p(static_cast<size_t>(seqK));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kvHead = h / group;
      for (int64_t i = 0; i < seqQ; ++i) {
        scoreRow(spec, in, b, h, i, row);
        // A row with nothing allowed contributes nothing and gets dQ = 0.
        if (!row.anyAllowed)
          continue;
        rowSoftmax(row, p.data());
        // Δ = dO·O − dLSE, with the forward's (rounded) O.
        double delta = 0.0;
        for (int64_t e = 0; e < valueDim; ++e)
          delta += gradOutput.at(b, h, i, e) * output.at(b, h, i, e);
        if (gradLse)
          delta -= (*gradLse)[(b * heads + h) * seqQ + i];
        double *dq = at(out.query, b, heads, h, seqQ, i, headDim);
        for (int64_t j = 0; j < seqK; ++j) {
          if (!row.allowed[j])
            continue;
          double dp = 0.0;
          for (int64_t e = 0; e < valueDim; ++e)
            dp += gradOutput.at(b, h, i, e) * v.at(b, kvHead, j, e);
          // Dropout: dS = P·(Z·dP − Δ), and dV's weights are P·Z.
          double z = dropoutFactor(spec, in, b, h, i, j);
          double ds = p[j] * (z * dp - delta);
          if (in.scoreMod && p[j] != 0.0)
            ds *= row.modSlope[j];
          if (spec.gradMask)
            out.scores[static_cast<size_t>(((b * heads + h) * seqQ + i) * seqK +
                                           j)] = ds;
          if (spec.softcap)
            ds *= 1.0 - row.capTanh[j] * row.capTanh[j];
          double *dk = at(out.key, b, kvHeads, kvHead, seqK, j, headDim);
          double *dv = at(out.value, b, kvHeads, kvHead, seqK, j, valueDim);
          for (int64_t e = 0; e < valueDim; ++e)
            dv[e] += p[j] * z * gradOutput.at(b, h, i, e);
          for (int64_t d = 0; d < headDim; ++d) {
            dq[d] += scale * ds * k.at(b, kvHead, j, d);
            dk[d] += scale * ds * q.at(b, h, i, d);
          }
        }
      }
    }
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Comparison
//===----------------------------------------------------------------------===//

double attn::relativeError(const double *actual, const double *reference,
                           size_t count, ErrorStats *stats) {
  ErrorStats result;
  for (size_t n = 0; n < count; ++n) {
    double a = actual[n], r = reference[n];
    bool mismatch = false;
    if (std::isnan(r) || std::isnan(a)) {
      if (std::isnan(r) != std::isnan(a)) {
        ++result.nanMismatches;
        mismatch = true;
      }
    } else if (std::isinf(r) || std::isinf(a)) {
      if (a != r) {
        ++result.infMismatches;
        mismatch = true;
      }
    } else {
      ++result.compared;
      result.maxAbs = std::max(result.maxAbs, std::fabs(a - r));
      result.maxRef = std::max(result.maxRef, std::fabs(r));
    }
    if (mismatch && result.firstMismatch < 0)
      result.firstMismatch = static_cast<int64_t>(n);
  }
  // With an all-zero reference (e.g. every row fully masked) there is no
  // scale to divide by; the absolute error is the meaningful figure.
  result.relative =
      result.maxRef > 0 ? result.maxAbs / result.maxRef : result.maxAbs;
  if (stats)
    *stats = result;
  return result.mismatched() ? std::numeric_limits<double>::infinity()
                             : result.relative;
}

double attn::relativeError(const std::vector<double> &actual,
                           const std::vector<double> &reference,
                           ErrorStats *stats) {
  if (actual.size() != reference.size()) {
    if (stats) {
      *stats = ErrorStats();
      stats->relative = std::numeric_limits<double>::infinity();
      stats->sizeMismatch = true;
    }
    return std::numeric_limits<double>::infinity();
  }
  return relativeError(actual.data(), reference.data(), actual.size(), stats);
}

//===----------------------------------------------------------------------===//
// Additive attention
//===----------------------------------------------------------------------===//

/// A projection of additive attention, qp [rows][A] (or kp) of batch `b`:
/// x [1, B, rows, dims] times w [1, 1, A, dims] transposed.
static std::vector<double> additiveProjection(const RefTensor &x,
                                              const RefTensor &w, int64_t b,
                                              int64_t rows, int64_t dims,
                                              int64_t a) {
  std::vector<double> p(size_t(rows * a), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < a; ++k) {
      double sum = 0.0;
      for (int64_t d = 0; d < dims; ++d)
        sum += x.at(0, b, r, d) * w.at(0, 0, k, d);
      p[size_t(r * a + k)] = sum;
    }
  return p;
}

bool attn::computeReferenceAdditive(const KernelSpec &spec,
                                    const ReferenceAdditiveInputs &in,
                                    ReferenceAdditive &out,
                                    std::string &error) {
  const int64_t batch = in.query.shape[1], seqQ = in.query.shape[2];
  const int64_t seqK = in.keys.shape[2], dq = in.query.shape[3];
  const int64_t dk = in.keys.shape[3], dv = in.values.shape[3];
  const int64_t a = in.queryWeight.shape[2];
  bool maskFits =
      !in.mask || (in.mask->shape[3] == seqK &&
                   (in.mask->shape[1] == 1 || in.mask->shape[1] == batch) &&
                   (in.mask->shape[2] == 1 || in.mask->shape[2] == seqQ));
  if (dq != spec.queryDim || dk != spec.headDim || dv != spec.valueDim ||
      a != spec.attnDim || in.keys.shape[1] != batch ||
      in.values.shape[1] != batch || in.values.shape[2] != seqK ||
      in.queryWeight.shape[3] != dq || in.keyWeight.shape[2] != a ||
      in.keyWeight.shape[3] != dk || in.scoreVector.shape[3] != a ||
      in.mask.has_value() != (spec.mask != MaskKind::None) || !maskFits) {
    error = "additive attention: query " + shapeString(in.query) + ", keys " +
            shapeString(in.keys) + ", values " + shapeString(in.values) +
            " and the network's W_q " + shapeString(in.queryWeight) + ", W_k " +
            shapeString(in.keyWeight) +
            " do not fit the kernel's Dq, Dk, Dv, A = " +
            std::to_string(spec.queryDim) + ", " +
            std::to_string(spec.headDim) + ", " +
            std::to_string(spec.valueDim) + ", " + std::to_string(spec.attnDim);
    return false;
  }
  auto project = [&](const RefTensor &x, const RefTensor &w, int64_t b,
                     int64_t rows, int64_t dims) {
    return additiveProjection(x, w, b, rows, dims, a);
  };
  out.output.assign(size_t(batch * seqQ * dv), 0.0);
  out.weights.assign(size_t(batch * seqQ * seqK), 0.0);
  std::vector<double> scores(static_cast<size_t>(seqK));
  std::vector<bool> allowed(static_cast<size_t>(seqK));
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<double> qp = project(in.query, in.queryWeight, b, seqQ, dq);
    std::vector<double> kp = project(in.keys, in.keyWeight, b, seqK, dk);
    for (int64_t i = 0; i < seqQ; ++i) {
      // The row's maximum over its allowed keys (NaN once any score is).
      double max = -std::numeric_limits<double>::infinity();
      bool any = false;
      const RefTensor *m = in.mask ? &*in.mask : nullptr;
      for (int64_t j = 0; j < seqK; ++j) {
        allowed[size_t(j)] = !m || m->at(0, m->shape[1] == 1 ? 0 : b,
                                         m->shape[2] == 1 ? 0 : i, j) != 0.0;
        if (!allowed[size_t(j)])
          continue;
        double s = 0.0;
        for (int64_t k = 0; k < a; ++k)
          s += in.scoreVector.at(0, 0, 0, k) *
               std::tanh(qp[size_t(i * a + k)] + kp[size_t(j * a + k)]);
        scores[size_t(j)] = s;
        max = std::isnan(s) || std::isnan(max)
                  ? std::numeric_limits<double>::quiet_NaN()
                  : std::max(max, s);
        any = true;
      }
      if (!any)
        continue; // O = 0, P = 0
      // scores become the exponentials, then the weights.
      double sum = 0.0;
      for (int64_t j = 0; j < seqK; ++j)
        if (allowed[size_t(j)])
          sum += scores[size_t(j)] = std::exp(scores[size_t(j)] - max);
      double *weights = &out.weights[size_t((b * seqQ + i) * seqK)];
      double *o = &out.output[size_t((b * seqQ + i) * dv)];
      for (int64_t j = 0; j < seqK; ++j) {
        if (!allowed[size_t(j)])
          continue;
        weights[j] = scores[size_t(j)] / sum;
        for (int64_t e = 0; e < dv; ++e)
          o[e] += weights[j] * in.values.at(0, b, j, e);
      }
    }
  }
  return true;
}

bool attn::computeReferenceAdditiveBackward(const KernelSpec &spec,
                                            const ReferenceAdditiveInputs &in,
                                            const RefTensor &gradOutput,
                                            ReferenceAdditiveGradients &out,
                                            std::string &error) {
  ReferenceAdditive forward;
  if (!computeReferenceAdditive(spec, in, forward, error))
    return false;
  const int64_t batch = in.query.shape[1], seqQ = in.query.shape[2];
  const int64_t seqK = in.keys.shape[2], dv = in.values.shape[3];
  const int64_t a = in.queryWeight.shape[2];
  if (gradOutput.shape[1] != batch || gradOutput.shape[2] != seqQ ||
      gradOutput.shape[3] != dv) {
    error = "additive attention's gradient: dO " + shapeString(gradOutput) +
            " does not fit O [" + std::to_string(batch) + ", " +
            std::to_string(seqQ) + ", " + std::to_string(dv) + "]";
    return false;
  }
  out.gradQp.assign(size_t(batch * seqQ * a), 0.0);
  out.gradKp.assign(size_t(batch * seqK * a), 0.0);
  out.gradValues.assign(size_t(batch * seqK * dv), 0.0);
  out.gradV.assign(size_t(a), 0.0);
  std::vector<double> gradScores(static_cast<size_t>(seqK));
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<double> qp = additiveProjection(in.query, in.queryWeight, b,
                                                seqQ, in.query.shape[3], a);
    std::vector<double> kp =
        additiveProjection(in.keys, in.keyWeight, b, seqK, in.keys.shape[3], a);
    for (int64_t i = 0; i < seqQ; ++i) {
      const double *p = &forward.weights[size_t((b * seqQ + i) * seqK)];
      // dS = P·(dP − Δ), 0 where P is 0 (docs/spec.md).
      double delta = 0.0;
      for (int64_t j = 0; j < seqK; ++j) {
        double dp = 0.0;
        if (p[j] != 0.0)
          for (int64_t e = 0; e < dv; ++e)
            dp += gradOutput.at(0, b, i, e) * in.values.at(0, b, j, e);
        gradScores[size_t(j)] = dp;
        delta += p[j] * dp;
      }
      for (int64_t j = 0; j < seqK; ++j) {
        if (p[j] == 0.0)
          continue;
        double ds = p[j] * (gradScores[size_t(j)] - delta);
        for (int64_t e = 0; e < dv; ++e)
          out.gradValues[size_t((b * seqK + j) * dv + e)] +=
              p[j] * gradOutput.at(0, b, i, e);
        for (int64_t k = 0; k < a; ++k) {
          double t = std::tanh(qp[size_t(i * a + k)] + kp[size_t(j * a + k)]);
          double g = ds * (1.0 - t * t) * in.scoreVector.at(0, 0, 0, k);
          out.gradQp[size_t((b * seqQ + i) * a + k)] += g;
          out.gradKp[size_t((b * seqK + j) * a + k)] += g;
          out.gradV[size_t(k)] += ds * t;
        }
      }
    }
  }
  return true;
}
