//===- AttentionMath.cpp - The attention maths every lowering builds ------===//
#include "lib/Transforms/AttentionMath.h"

#include "lib/Transforms/Passes.h"

#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace mlir::attn;

//===----------------------------------------------------------------------===//
// AttentionMath
//===----------------------------------------------------------------------===//

double AttentionMath::scoreScale() {
  return convention.base2 ? scale * llvm::numbers::log2e : scale;
}

double AttentionMath::biasScale() {
  return convention.base2 ? llvm::numbers::log2e : 1.0;
}

Value AttentionMath::constantLike(Value like, double v) {
  Value scalar = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(static_cast<float>(v)));
  if (auto type = dyn_cast<VectorType>(like.getType()))
    return vector::BroadcastOp::create(b, loc, type, scalar);
  return scalar;
}

Value AttentionMath::softcap(Value s) {
  if (!cap)
    return s;
  double c = cap.getValueAsDouble() * biasScale();
  Value t = math::TanhOp::create(
      b, loc, arith::MulFOp::create(b, loc, s, constantLike(s, 1.0 / c)));
  return arith::MulFOp::create(b, loc, t, constantLike(t, c));
}

Value AttentionMath::max(Value x, Value y) {
  if (!convention.selectMax)
    return arith::MaximumFOp::create(b, loc, x, y);
  Value greater =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, y);
  return arith::SelectOp::create(b, loc, greater, x, y);
}

Value AttentionMath::exp(Value x) {
  if (!convention.base2)
    return math::ExpOp::create(b, loc, x);
  auto exp2 = math::Exp2Op::create(b, loc, x);
  exp2->setAttr(kNonPositiveAttr, b.getUnitAttr());
  return exp2;
}

AttentionMath::MaxUpdate AttentionMath::updateMax(Value oldMax,
                                                  Value blockMax) {
  MaxUpdate update;
  update.max = max(blockMax, oldMax);
  Value noKeyYet = arith::CmpFOp::create(
      b, loc, arith::CmpFPredicate::OEQ, update.max,
      constantLike(update.max, -std::numeric_limits<float>::infinity()));
  update.reference = arith::SelectOp::create(
      b, loc, noKeyYet, constantLike(update.max, 0), update.max);
  update.alpha = exp(arith::SubFOp::create(b, loc, oldMax, update.reference));
  return update;
}

Value AttentionMath::updateSum(Value oldSum, Value alpha,
                               ValueRange blockSums) {
  Value rescaled = arith::MulFOp::create(b, loc, oldSum, alpha);
  Value blockSum = blockSums.front();
  for (Value partial : blockSums.drop_front())
    blockSum = arith::AddFOp::create(b, loc, blockSum, partial);
  return arith::AddFOp::create(b, loc, rescaled, blockSum);
}

//===----------------------------------------------------------------------===//
// BandArithmetic
//===----------------------------------------------------------------------===//

Value BandArithmetic::constant(int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value BandArithmetic::clamp(Value v, Value lo, Value hi) {
  Value atLeast = arith::MaxSIOp::create(b, loc, v, lo);
  return arith::MinSIOp::create(b, loc, atLeast, hi);
}

Value BandArithmetic::relative(Value row, Value origin) {
  Value rel = arith::AddIOp::create(b, loc, row, diagonal);
  return origin ? Value(arith::SubIOp::create(b, loc, rel, origin)) : rel;
}

Value BandArithmetic::upper(Value rel) {
  if (!right)
    return Value();
  return arith::AddIOp::create(b, loc, rel, constant(*right));
}

Value BandArithmetic::lower(Value rel) {
  if (!left)
    return Value();
  return arith::SubIOp::create(b, loc, rel, constant(*left));
}

std::pair<Value, Value>
BandArithmetic::keysSomeRowSees(Value firstRow, Value count, Value keys) {
  Value first = constant(0), last = keys;
  if (!banded())
    return {first, last};
  Value base = firstRow
                   ? Value(arith::AddIOp::create(b, loc, firstRow, diagonal))
                   : diagonal;
  if (right) {
    Value end = arith::AddIOp::create(b, loc, base, count);
    end = arith::AddIOp::create(b, loc, end, constant(*right));
    last = clamp(end, constant(0), keys);
  }
  if (left) {
    Value start = arith::SubIOp::create(b, loc, base, constant(*left));
    first = clamp(start, constant(0), last);
  }
  return {first, last};
}

std::pair<Value, Value> BandArithmetic::keysEveryRowSees(Value firstRow,
                                                         Value count,
                                                         Value first,
                                                         Value last) {
  Value base = firstRow
                   ? Value(arith::AddIOp::create(b, loc, firstRow, diagonal))
                   : diagonal;
  Value from = first, to = last;
  if (left) {
    // The last row's first key.
    Value lastRow = arith::AddIOp::create(b, loc, base, count);
    lastRow = arith::SubIOp::create(b, loc, lastRow, constant(1));
    from = clamp(arith::SubIOp::create(b, loc, lastRow, constant(*left)), first,
                 last);
  }
  if (right) {
    // One past the first row's last key.
    Value end = arith::AddIOp::create(b, loc, base, constant(*right));
    end = arith::AddIOp::create(b, loc, end, constant(1));
    to = clamp(end, from, last);
  }
  return {from, to};
}

Value BandArithmetic::blockInBand(Value firstRow, Value count, Value blockStart,
                                  Value blockKeys) {
  Value base = arith::AddIOp::create(b, loc, firstRow, diagonal);
  Value inside = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
  if (right) {
    // The last key is within the first row's reach.
    Value end = arith::AddIOp::create(b, loc, blockStart, blockKeys);
    Value lastKey = arith::SubIOp::create(b, loc, end, constant(1));
    Value reach = arith::AddIOp::create(b, loc, base, constant(*right));
    inside = arith::AndIOp::create(
        b, loc, inside,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, lastKey,
                              reach));
  }
  if (left) {
    // The first key is within the last row's reach.
    Value end = arith::AddIOp::create(b, loc, base, count);
    Value lastRow = arith::SubIOp::create(b, loc, end, constant(1));
    Value reach = arith::SubIOp::create(b, loc, lastRow, constant(*left));
    inside = arith::AndIOp::create(
        b, loc, inside,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, blockStart,
                              reach));
  }
  return inside;
}

BandArithmetic::SeenKeys BandArithmetic::keysRowsSee(Value firstRow,
                                                     Value lastRow,
                                                     Value blockStart,
                                                     Value blockKeys) {
  auto local = [&](Value row, int64_t offset) {
    Value center = arith::AddIOp::create(b, loc, row, diagonal);
    Value key = arith::AddIOp::create(b, loc, center, constant(offset));
    Value rel = arith::SubIOp::create(b, loc, key, blockStart);
    return clamp(rel, constant(0), blockKeys);
  };
  SeenKeys seen;
  seen.anyFrom = left ? local(firstRow, -*left) : constant(0);
  seen.anyTo = right ? local(lastRow, *right + 1) : blockKeys;
  Value allFrom = left ? local(lastRow, -*left) : constant(0);
  Value allTo = right ? local(firstRow, *right + 1) : blockKeys;
  Value even = constant(-2);
  seen.allFrom = arith::AndIOp::create(
      b, loc, arith::AddIOp::create(b, loc, allFrom, constant(1)), even);
  seen.allTo = arith::MaxSIOp::create(
      b, loc, seen.allFrom, arith::AndIOp::create(b, loc, allTo, even));
  return seen;
}

//===----------------------------------------------------------------------===//
// Diagonal and loops
//===----------------------------------------------------------------------===//

Value mlir::attn::resolveDiagonal(
    OpBuilder &b, Location loc, std::optional<DiagonalAlignment> alignment,
    Value query, Value key, Value diagonal,
    function_ref<Value(Value, int64_t)> size) {
  if (diagonal || !alignment)
    return diagonal;
  if (*alignment == DiagonalAlignment::top_left)
    return arith::ConstantIndexOp::create(b, loc, 0);
  Value keys = size(key, 2);
  Value rows = size(query, 2);
  return arith::SubIOp::create(b, loc, keys, rows);
}

void mlir::attn::buildLoop(OpBuilder &b, Location loc, Value lb, Value ub,
                           Value step, function_ref<void(Value)> body) {
  auto loop = scf::ForOp::create(b, loc, lb, ub, step);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  body(loop.getInductionVar());
}

SmallVector<Value> mlir::attn::buildLoopWith(
    OpBuilder &b, Location loc, Value lb, Value ub, Value step,
    ValueRange inits,
    function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  auto loop = scf::ForOp::create(b, loc, lb, ub, step, inits);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    SmallVector<Value> next =
        body(loop.getInductionVar(), loop.getRegionIterArgs());
    scf::YieldOp::create(b, loc, next);
  }
  return SmallVector<Value>(loop.getResults());
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

namespace {
/// i32 arithmetic on scalars or vectors of one shape.
struct Words {
  OpBuilder &b;
  Location loc;
  Type type; // i32 or vector of i32

  Value constant(uint32_t v) {
    auto i32 = b.getI32Type();
    Attribute attr = b.getIntegerAttr(i32, static_cast<int32_t>(v));
    if (auto vec = dyn_cast<VectorType>(type))
      return arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(vec, attr));
    return arith::ConstantOp::create(b, loc, cast<TypedAttr>(attr));
  }
  Value like(Value v) {
    if (v.getType() == type)
      return v;
    return vector::BroadcastOp::create(b, loc, type, v);
  }
  Value xorOf(Value x, Value y) { return arith::XOrIOp::create(b, loc, x, y); }
  /// (hi, lo) of the 64-bit product of `x` and the constant `m`.
  std::pair<Value, Value> mulHiLo(Value x, uint32_t m) {
    Type wide = b.getI64Type();
    if (auto vec = dyn_cast<VectorType>(type))
      wide = VectorType::get(vec.getShape(), wide);
    Value x64 = arith::ExtUIOp::create(b, loc, wide, x);
    Value product = arith::MulIOp::create(b, loc, x64, constant64(wide, m));
    Value lo = arith::TruncIOp::create(b, loc, type, product);
    Value hi = arith::TruncIOp::create(
        b, loc, type,
        arith::ShRUIOp::create(b, loc, product, constant64(wide, 32)));
    return {hi, lo};
  }
  Value constant64(Type wide, uint64_t v) {
    Attribute attr = b.getI64IntegerAttr(static_cast<int64_t>(v));
    if (auto vec = dyn_cast<VectorType>(wide))
      return arith::ConstantOp::create(b, loc,
                                       DenseElementsAttr::get(vec, attr));
    return arith::ConstantOp::create(b, loc, cast<TypedAttr>(attr));
  }
};

/// 32-bit words in the low halves of i64 lanes, the high halves don't-care:
/// a word's 32 x 32 -> 64-bit product is one multiply of the masked low
/// halves (x86's vpmuludq, which reads only those), its high word a shift and
/// its low word the product as it is, and a xor keeps the halves apart. So
/// Philox's rounds on these take no shuffle (words packed 16 to a register
/// took two a product to part the even lanes' halves from the odd lanes'; the
/// measurements are in docs/design.md, "The backward", on dropout).
struct LowWords {
  OpBuilder &b;
  Location loc;
  VectorType type; // vector of i64

  Value splat(uint64_t v) {
    return arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(type,
                               b.getI64IntegerAttr(static_cast<int64_t>(v))));
  }
  /// The i32 scalar `v` in every lane.
  Value like(Value v) {
    return vector::BroadcastOp::create(
        b, loc, type, arith::ExtUIOp::create(b, loc, b.getI64Type(), v));
  }
  Value xorOf(Value x, Value y) { return arith::XOrIOp::create(b, loc, x, y); }
  std::pair<Value, Value> mulHiLo(Value x, uint32_t m) {
    Value product = arith::MulIOp::create(
        b, loc, arith::AndIOp::create(b, loc, x, splat(0xFFFFFFFFu)), splat(m));
    return {arith::ShRUIOp::create(b, loc, product, splat(32)), product};
  }
};
} // namespace

/// Philox 4x32-10's rounds on the words `c` of `w` (Words or LowWords),
/// keyed by the i32 scalars `k0` and `k1`.
template <typename W>
static void philoxRounds(W &w, Value k0, Value k1, Value (&c)[4]) {
  OpBuilder &b = w.b;
  Location loc = w.loc;
  // The round's multipliers and the key schedule's Weyl constants.
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  auto bump = [&](Value k, uint32_t by) -> Value {
    return arith::AddIOp::create(
        b, loc, k,
        arith::ConstantOp::create(
            b, loc, b.getI32IntegerAttr(static_cast<int32_t>(by))));
  };
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 = bump(k0, kW0);
      k1 = bump(k1, kW1);
    }
    auto [hi0, lo0] = w.mulHiLo(c[0], kM0);
    auto [hi1, lo1] = w.mulHiLo(c[2], kM1);
    Value next[4] = {w.xorOf(w.xorOf(hi1, c[1]), w.like(k0)), lo1,
                     w.xorOf(w.xorOf(hi0, c[3]), w.like(k1)), lo0};
    std::copy(std::begin(next), std::end(next), std::begin(c));
  }
}

/// Philox 4x32-10 (Salmon et al., Random123) of the counter `c` (i32
/// scalars or vectors of `w`'s type) keyed by the 64-bit `seed`: the four
/// output words, in place. A vector of an even number of lanes runs as its
/// even lanes and its odd lanes, each in the low halves of i64 lanes
/// (LowWords), merged back by one shuffle a word at the end.
static void philox(Words &w, Value seed, Value (&c)[4]) {
  OpBuilder &b = w.b;
  Location loc = w.loc;
  Value k0 = arith::TruncIOp::create(b, loc, b.getI32Type(), seed);
  Value k1 = arith::TruncIOp::create(
      b, loc, b.getI32Type(),
      arith::ShRUIOp::create(
          b, loc, seed,
          arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(32))));
  auto vec = dyn_cast<VectorType>(w.type);
  if (!vec || vec.getNumElements() % 2 != 0) {
    philoxRounds(w, k0, k1, c);
    return;
  }
  int64_t lanes = vec.getNumElements();
  LowWords low{b, loc, VectorType::get({lanes / 2}, b.getI64Type())};
  Value even[4], odd[4];
  for (int r = 0; r < 4; ++r) {
    even[r] = vector::BitCastOp::create(b, loc, low.type, c[r]);
    odd[r] = arith::ShRUIOp::create(b, loc, even[r], low.splat(32));
  }
  philoxRounds(low, k0, k1, even);
  philoxRounds(low, k0, k1, odd);
  SmallVector<int64_t> interleave;
  for (int64_t l = 0; l < lanes; ++l)
    interleave.push_back(l / 2 * 2 + (l % 2 ? lanes : 0));
  for (int r = 0; r < 4; ++r)
    c[r] = vector::ShuffleOp::create(
        b, loc, vector::BitCastOp::create(b, loc, vec, even[r]),
        vector::BitCastOp::create(b, loc, vec, odd[r]), interleave);
}

/// Output word `index` (0..3, `w`'s type) of Philox's words `c`.
static Value philoxWord(Words &w, Value (&c)[4], Value index) {
  auto is = [&](uint32_t n) {
    return arith::CmpIOp::create(w.b, w.loc, arith::CmpIPredicate::eq, index,
                                 w.constant(n));
  };
  return arith::SelectOp::create(
      w.b, w.loc, is(0), c[0],
      arith::SelectOp::create(
          w.b, w.loc, is(1), c[1],
          arith::SelectOp::create(w.b, w.loc, is(2), c[2], c[3])));
}

/// Keys that share a Philox counter: 16 bits of its four words each
/// (docs/spec.md).
constexpr int64_t kKeysPerCounter = 8;

/// Key j's 16 bits of its counter's word at the top of an i32: shifted left
/// by 16 for even j (its low half), as it is for odd j (the high half; the
/// low half below it cannot change an unsigned comparison with a threshold
/// whose low half is 0). `even` is 16 for even j, 0 for odd j.
static Value keyBits(Words &w, Value word, Value even) {
  return arith::ShLIOp::create(w.b, w.loc, word, even);
}

Value mlir::attn::dropoutKeep(OpBuilder &b, Location loc, Value seed,
                              Value threshold, Value batch, Value head,
                              Value row, Value key) {
  Type type = b.getI32Type();
  for (Value v : {batch, head, row, key})
    if (isa<VectorType>(v.getType()))
      type = v.getType();
  Words w{b, loc, type};
  key = w.like(key);
  Value c[4] = {arith::ShRUIOp::create(b, loc, key, w.constant(3)), w.like(row),
                w.like(head), w.like(batch)};
  philox(w, seed, c);
  // Word ⌊(j mod 8) / 2⌋, its half j mod 2.
  Value u =
      philoxWord(w, c,
                 arith::AndIOp::create(
                     b, loc, arith::ShRUIOp::create(b, loc, key, w.constant(1)),
                     w.constant(3)));
  Value even = arith::ShLIOp::create(
      b, loc,
      arith::XOrIOp::create(b, loc,
                            arith::AndIOp::create(b, loc, key, w.constant(1)),
                            w.constant(1)),
      w.constant(4));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge,
                               keyBits(w, u, even), w.like(threshold));
}

std::pair<Value, Value> mlir::attn::dropoutKeepPair(OpBuilder &b, Location loc,
                                                    Value seed, Value threshold,
                                                    Value batch, Value head,
                                                    Value row, Value groupKey,
                                                    Value pair) {
  Words w{b, loc, b.getI32Type()};
  Value c[4] = {arith::ShRUIOp::create(b, loc, groupKey, w.constant(3)), row,
                head, batch};
  philox(w, seed, c);
  Value u = philoxWord(w, c, pair);
  auto kept = [&](Value bits) -> Value {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, bits,
                                 threshold);
  };
  return {kept(keyBits(w, u, w.constant(16))),
          kept(keyBits(w, u, w.constant(0)))};
}

Value mlir::attn::dropoutThreshold(OpBuilder &b, Location loc,
                                   Value probability) {
  Value p64 = arith::ExtFOp::create(b, loc, b.getF64Type(), probability);
  Value scaled = arith::MulFOp::create(
      b, loc, p64,
      arith::ConstantOp::create(b, loc, b.getF64FloatAttr(65536.0)));
  Value bits = arith::FPToUIOp::create(b, loc, b.getI32Type(), scaled);
  return arith::ShLIOp::create(
      b, loc, bits, arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(16)));
}

Value mlir::attn::dropoutKeptScale(OpBuilder &b, Location loc,
                                   Value probability) {
  Type f32 = b.getF32Type();
  Value one = arith::ConstantOp::create(b, loc, b.getFloatAttr(f32, 1.0));
  return arith::DivFOp::create(b, loc, one,
                               arith::SubFOp::create(b, loc, one, probability));
}

/// `count` keep vectors of `keepType`: `aligned()`'s where the global key
/// `firstKey` (i32) is a multiple of `alignment`, so that keys share
/// Philox counters as the spec groups them, else `perKey()`'s.
static SmallVector<Value>
byKeyAlignment(OpBuilder &b, Location loc, Value firstKey, int64_t alignment,
               VectorType keepType, int64_t count,
               function_ref<SmallVector<Value>()> aligned,
               function_ref<SmallVector<Value>()> perKey) {
  auto constant = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  };
  Value isAligned = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq,
      arith::AndIOp::create(b, loc, firstKey, constant(alignment - 1)),
      constant(0));
  auto branch = scf::IfOp::create(b, loc, SmallVector<Type>(count, keepType),
                                  isAligned, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(branch.thenBlock());
  scf::YieldOp::create(b, loc, aligned());
  b.setInsertionPointToStart(branch.elseBlock());
  scf::YieldOp::create(b, loc, perKey());
  return SmallVector<Value>(branch.getResults());
}

/// An i32 vector of `lanes` elements: first + 0, first + 1, ...
static Value lanesFrom(OpBuilder &b, Location loc, Value first, int64_t lanes) {
  auto type = VectorType::get({lanes}, b.getI32Type());
  SmallVector<int32_t> iota;
  for (int64_t l = 0; l < lanes; ++l)
    iota.push_back(static_cast<int32_t>(l));
  Value step = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, ArrayRef<int32_t>(iota)));
  return arith::AddIOp::create(
      b, loc, vector::BroadcastOp::create(b, loc, type, first), step);
}

SmallVector<Value>
mlir::attn::dropoutKeepVectors(OpBuilder &b, Location loc, Value seed,
                               Value threshold, Value batch,
                               ArrayRef<Value> heads, ArrayRef<Value> rows,
                               Value firstKey, int64_t lanes, int64_t count) {
  assert(heads.size() == rows.size() && !rows.empty());
  auto i32 = b.getI32Type();
  auto keepType = VectorType::get({lanes}, b.getI1Type());
  auto constant = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  };
  Value limit = arith::TruncIOp::create(
      b, loc, b.getI16Type(),
      arith::ShRUIOp::create(b, loc, threshold, constant(16)));
  // Aligned: one Philox per vector of counters (8 keys each). A group of 8
  // key vectors (4 where fewer are left) of each row is one Philox on
  // `width` = max(4, rows · vectors · lanes / 8) counters, for one row or
  // for two where one row's counters fill half a vector (64-key blocks of
  // 16 lanes), the counters of the rows' keys taken one after the other.
  // A 4x4 transpose of its four word vectors within each 128-bit lane (two
  // rounds of unpack shuffles: 8 shuffles for 4 · width words) gives 4
  // vectors with each counter's words in order: seen as i16 (little-endian,
  // the low half first) they are the 16 bits of consecutive keys in key
  // order, and one unsigned i16 comparison decides 2 · width keys (one or
  // two key vectors). The transpose takes output r's 128-bit lane L from
  // Philox lane 4L + r, so that lane holds counter r · width / 4 + L.
  auto philoxGroup = [&](ArrayRef<Value> groupHeads, ArrayRef<Value> groupRows,
                         Value firstCounter, int64_t vectors) {
    int64_t together = groupRows.size();
    int64_t rowCounters = vectors * lanes / kKeysPerCounter;
    int64_t width = std::max<int64_t>(4, together * rowCounters);
    auto wordsType = VectorType::get({width}, i32);
    Words w{b, loc, wordsType};
    SmallVector<int32_t> counter;
    SmallVector<bool> second;
    for (int64_t lane = 0; lane < width; ++lane) {
      int64_t m = lane % 4 * (width / 4) + lane / 4;
      counter.push_back(static_cast<int32_t>(m % rowCounters));
      second.push_back(m >= rowCounters);
    }
    auto perRow = [&](ArrayRef<Value> values) -> Value {
      if (values.size() == 1 || values[0] == values[1])
        return w.like(values[0]);
      auto mask = VectorType::get({width}, b.getI1Type());
      return arith::SelectOp::create(
          b, loc,
          arith::ConstantOp::create(
              b, loc, DenseElementsAttr::get(mask, ArrayRef<bool>(second))),
          w.like(values[1]), w.like(values[0]));
    };
    Value c[4] = {
        arith::AddIOp::create(
            b, loc, w.like(firstCounter),
            arith::ConstantOp::create(
                b, loc,
                DenseElementsAttr::get(wordsType, ArrayRef<int32_t>(counter)))),
        perRow(groupRows), perRow(groupHeads), w.like(batch)};
    philox(w, seed, c);
    // x86's unpack{l,h}{dq,qdq} in each 128-bit lane: runs of `size` words
    // taken in turn from x and y, from the lane's low or high half.
    auto unpack = [&](Value x, Value y, bool high, int64_t size) -> Value {
      SmallVector<int64_t> mask;
      for (int64_t base = 0; base < width; base += 4)
        for (int64_t k = 0; k < 4; ++k)
          mask.push_back((k / size % 2 ? width : 0) + base + (high ? 2 : 0) +
                         k / (2 * size) * size + k % size);
      return vector::ShuffleOp::create(b, loc, x, y, mask);
    };
    Value t0 = unpack(c[0], c[1], false, 1), t1 = unpack(c[0], c[1], true, 1);
    Value t2 = unpack(c[2], c[3], false, 1), t3 = unpack(c[2], c[3], true, 1);
    Value outputs[4] = {unpack(t0, t2, false, 2), unpack(t0, t2, true, 2),
                        unpack(t1, t3, false, 2), unpack(t1, t3, true, 2)};
    auto halves = VectorType::get({2 * width}, b.getI16Type());
    Value limits = vector::BroadcastOp::create(b, loc, halves, limit);
    Value kept[4] = {};
    // Key vector v of row r: keys from r · vectors · lanes + v · lanes in
    // the rows' keys one after the other.
    SmallVector<Value> keeps;
    for (int64_t key = 0; key < together * vectors * lanes; key += lanes) {
      int64_t output = key / (2 * width);
      if (!kept[output])
        kept[output] = arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::uge,
            vector::BitCastOp::create(b, loc, halves, outputs[output]), limits);
      keeps.push_back(lanes == 2 * width
                          ? kept[output]
                          : vector::ExtractStridedSliceOp::create(
                                b, loc, kept[output],
                                ArrayRef<int64_t>{key % (2 * width)},
                                ArrayRef<int64_t>{lanes}, ArrayRef<int64_t>{1})
                                .getResult());
    }
    return keeps;
  };
  auto aligned = [&] {
    SmallVector<SmallVector<Value>> perRow(rows.size());
    Value firstCounter = arith::ShRUIOp::create(b, loc, firstKey, constant(3));
    for (int64_t group = 0; group < count;) {
      int64_t vectors = count - group >= 8 ? 8 : 4;
      Value groupCounter = arith::AddIOp::create(
          b, loc, firstCounter, constant(group * lanes / kKeysPerCounter));
      int64_t together =
          2 * vectors * lanes / kKeysPerCounter <= std::max<int64_t>(4, lanes)
              ? 2
              : 1;
      for (size_t first = 0; first < rows.size(); first += together) {
        size_t n = std::min<size_t>(together, rows.size() - first);
        SmallVector<Value> keeps = philoxGroup(
            heads.slice(first, n), rows.slice(first, n), groupCounter, vectors);
        for (size_t r = 0; r < n; ++r)
          llvm::append_range(perRow[first + r], ArrayRef<Value>(keeps).slice(
                                                    r * vectors, vectors));
      }
      group += vectors;
    }
    SmallVector<Value> keeps;
    for (ArrayRef<Value> row : perRow)
      llvm::append_range(keeps, row);
    return keeps;
  };
  // Otherwise each lane its own Philox.
  auto perKey = [&] {
    SmallVector<Value> keeps;
    for (auto [head, row] : llvm::zip(heads, rows))
      for (int64_t v = 0; v < count; ++v)
        keeps.push_back(
            dropoutKeep(b, loc, seed, threshold, batch, head, row,
                        lanesFrom(b, loc,
                                  arith::AddIOp::create(b, loc, firstKey,
                                                        constant(v * lanes)),
                                  lanes)));
    return keeps;
  };
  // The transpose wants whole 128-bit lanes of counters.
  if (lanes < 2 || !llvm::isPowerOf2_64(lanes))
    return perKey();
  return byKeyAlignment(b, loc, firstKey, kKeysPerCounter, keepType,
                        rows.size() * count, aligned, perKey);
}

SmallVector<Value> mlir::attn::dropoutKeepRows(OpBuilder &b, Location loc,
                                               Value seed, Value threshold,
                                               Value batch, Value head,
                                               Value rows, Value firstKey,
                                               int64_t count) {
  assert((count == 4 || count == 8) && "dropoutKeepRows: 4 or 8 keys");
  auto rowsType = cast<VectorType>(rows.getType());
  auto constant = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  };
  Words w{b, loc, rowsType};
  Value sixteen = w.constant(16), none = w.constant(0);
  // Aligned: the keys share each row's counter, one Philox; its words in
  // key order, two keys a word (the low half first). Four keys from the
  // middle of a counter's eight take its last two words.
  auto aligned = [&] {
    Value c[4] = {w.like(arith::ShRUIOp::create(b, loc, firstKey, constant(3))),
                  rows, w.like(head), w.like(batch)};
    philox(w, seed, c);
    SmallVector<Value> words(std::begin(c), std::end(c));
    if (count == 4) {
      Value second = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::ne,
          arith::AndIOp::create(b, loc, firstKey, constant(4)), constant(0));
      words = {arith::SelectOp::create(b, loc, second, c[2], c[0]),
               arith::SelectOp::create(b, loc, second, c[3], c[1])};
    }
    Value limit = w.like(threshold);
    SmallVector<Value> keeps;
    for (Value word : words)
      for (Value half : {sixteen, none})
        keeps.push_back(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge,
                                              keyBits(w, word, half), limit));
    return keeps;
  };
  auto perKey = [&] {
    SmallVector<Value> keeps;
    for (int64_t k = 0; k < count; ++k)
      keeps.push_back(
          dropoutKeep(b, loc, seed, threshold, batch, head, rows,
                      arith::AddIOp::create(b, loc, firstKey, constant(k))));
    return keeps;
  };
  return byKeyAlignment(b, loc, firstKey, count,
                        VectorType::get(rowsType.getShape(), b.getI1Type()),
                        count, aligned, perKey);
}

Value mlir::attn::globalIndex(OpBuilder &b, Location loc, ValueRange origin,
                              unsigned dim, Value local) {
  Value index = origin.empty()
                    ? local
                    : arith::AddIOp::create(b, loc, origin[dim], local)
                          .getResult();
  return arith::IndexCastOp::create(b, loc, b.getI32Type(), index);
}
