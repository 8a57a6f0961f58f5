//===- RowAccumulator.cpp - P·V of a block of query rows ------------------===//
#include "lib/Transforms/Cpu/RowAccumulator.h"

#include "lib/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

void RowAccumulator::accumulateRows(Value batch, ArrayRef<AccRow> rows,
                                    ArrayRef<Value> alphas,
                                    ArrayRef<KeyRun> runs,
                                    function_ref<Value(Value, int64_t)> value) {
  int64_t numRows = rows.size();
  int64_t groupChunks = std::max<int64_t>(1, maxAccumulators(lanes) / numRows);
  for (int64_t first = 0; first < valueChunks; first += groupChunks)
    accumulateChunks(batch, rows, alphas, runs, value, first,
                     std::min(groupChunks, valueChunks - first));
}

void RowAccumulator::accumulateRows(
    Value batch, ArrayRef<AccRow> rows, ArrayRef<Value> alphas, Value blockKeys,
    bool pairs, function_ref<Value(Value, int64_t)> value,
    const std::function<Value(Value, int64_t)> &rawValues) {
  accumulateRows(batch, rows, alphas,
                 KeyRun{cst(0), blockKeys, pairs,
                        keysMayBeExcluded() || bandApplies(), cst(0),
                        rawValues},
                 value);
}

void RowAccumulator::accumulateChunks(Value batch, ArrayRef<AccRow> rows,
                                      ArrayRef<Value> alphas,
                                      ArrayRef<KeyRun> runs,
                                      function_ref<Value(Value, int64_t)> value,
                                      int64_t first, int64_t chunks) {
  int64_t numRows = rows.size();
  Value zeroVec = splat(f32Const(0));
  auto at = [&](int64_t r, int64_t c) -> SmallVector<Value, 4> {
    return {batch, rows[r].head, rows[r].row, cst(c * lanes)};
  };
  SmallVector<Value> accs;
  for (int64_t r = 0; r < numRows; ++r) {
    Value alphaVec = splat(alphas[r]);
    for (int64_t c = first; c < first + chunks; ++c) {
      Value acc =
          (c + 1) * lanes <= valueDim
              ? Value(vector::LoadOp::create(b, vecType, op.getAcc(), at(r, c)))
              : Value(vector::MaskedLoadOp::create(
                    b, vecType, op.getAcc(), at(r, c), chunkMask(c), zeroVec));
      accs.push_back(arith::MulFOp::create(b, acc, alphaVec));
    }
  }
  // Pairs made as V is loaded keep the columns in their unpacked order.
  bool unpacked = llvm::any_of(
      runs, [](const KeyRun &run) { return run.rawValues != nullptr; });
  assert((!unpacked || (llvm::all_of(runs,
                                     [](const KeyRun &run) {
                                       return run.rawValues != nullptr;
                                     }) &&
                        first % 2 == 0 && chunks % 2 == 0)) &&
         "pairs made as loaded take whole groups of two chunks");
  auto reorder = [&](bool toUnpacked) {
    for (size_t c = 0; c + 1 < accs.size(); c += 2)
      std::tie(accs[c], accs[c + 1]) =
          toUnpacked ? toUnpackedOrder(accs[c], accs[c + 1])
                     : fromUnpackedOrder(accs[c], accs[c + 1]);
  };
  if (unpacked)
    reorder(true);
  for (const KeyRun &run : runs) {
    auto byFma = [&](ArrayRef<Value> inits, bool guarded) {
      return accumulateByFma(run, inits, value, numRows, first, chunks,
                             guarded);
    };
    auto unguarded = [&](ArrayRef<Value> inits) {
      return run.pairs ? accumulateByBf16Dot(numRows, run, inits, first, chunks)
                       : byFma(inits, /*guarded=*/false);
    };
    if (!run.guarded) {
      accs = unguarded(accs);
      continue;
    }
    if (!valuesFinite) {
      accs = byFma(accs, /*guarded=*/true);
      continue;
    }
    // A finite V times an excluded key's weight of 0 adds 0: the guards
    // (and the f32 FMAs they need) only where the block's V holds an inf
    // or a NaN.
    auto finite = scf::IfOp::create(b, ValueRange(accs).getTypes(),
                                    valuesFinite, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(finite.thenBlock());
    scf::YieldOp::create(b, unguarded(accs));
    b.setInsertionPointToStart(finite.elseBlock());
    scf::YieldOp::create(b, byFma(accs, /*guarded=*/true));
    b.setInsertionPointAfter(finite);
    accs = finite.getResults();
  }
  if (unpacked)
    reorder(false);
  for (int64_t r = 0; r < numRows; ++r)
    for (int64_t c = 0; c < chunks; ++c) {
      Value acc = accs[r * chunks + c];
      if ((first + c + 1) * lanes <= valueDim)
        vector::StoreOp::create(b, acc, op.getAcc(), at(r, first + c));
      else
        vector::MaskedStoreOp::create(b, op.getAcc(), at(r, first + c),
                                      chunkMask(first + c), acc);
    }
}

SmallVector<Value>
RowAccumulator::accumulateByFma(const KeyRun &run, ValueRange inits,
                                function_ref<Value(Value, int64_t)> value,
                                int64_t numRows, int64_t first, int64_t chunks,
                                bool guarded) {
  Value zeroVec = splat(f32Const(0));
  return forLoopWith(
      run.from, run.to, cst(1), inits,
      [&](Value j, ValueRange acc) -> SmallVector<Value> {
        SmallVector<Value> values;
        for (int64_t c = first; c < first + chunks; ++c)
          values.push_back(value(j, c));
        SmallVector<Value> next;
        for (int64_t r = 0; r < numRows; ++r) {
          Value pScalar =
              memref::LoadOp::create(b, scratch.probs, ValueRange{cst(r), j});
          Value p = splat(pScalar);
          // Where keys of the block may be excluded, an excluded key's
          // weight is exactly 0 and 0 * NaN would still leak a NaN value
          // into a row that does not attend to it: drop such values.
          Value excluded;
          if (guarded)
            excluded = splat(arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ,
                                                   pScalar, f32Const(0)));
          for (int64_t c = 0; c < chunks; ++c) {
            Value v = values[c];
            if (excluded)
              v = arith::SelectOp::create(b, excluded, zeroVec, v);
            next.push_back(vector::FMAOp::create(b, p, v, acc[r * chunks + c]));
          }
        }
        return next;
      });
}

Value RowAccumulator::valuesAllFinite(Value blockKeys) {
  // x · 0 is NaN exactly where x is an inf or a NaN: the block's products
  // with 0, summed, are 0 or NaN. (A test of the exponent bits against a
  // mask took a vector register that LLVM then kept from the row blocks'
  // loop: its constants went to memory, and ALiBi's bf16 kernel ran 1.15x
  // slower.) bf16 pairs are f32 lanes: the odd key's bf16 as the high half
  // (the even key's bits a mantissa, which keeps an inf or NaN one), the
  // even key's shifted up.
  auto wordsType = VectorType::get({lanes}, b.getI32Type());
  Value zero = zeroVector();
  Value rows =
      bf16Values ? arith::CeilDivUIOp::create(b, blockKeys, cst(2)) : blockKeys;
  Value sum =
      forLoopWith(
          cst(0), rows, cst(1), ValueRange{zero},
          [&](Value row, ValueRange acc) -> SmallVector<Value> {
            Value total = acc[0];
            for (int64_t c = 0; c < valueChunks; ++c) {
              // Only the real columns: a pad may hold anything.
              if (!bf16Values) {
                Value x = loadRawChunk(scratch.values, {row}, c * lanes,
                                       valueDim, lanes);
                total = vector::FMAOp::create(b, x, zero, total);
                continue;
              }
              Value words = vector::BitCastOp::create(
                  b, wordsType,
                  loadRawChunk(scratch.valuePairs, {row}, 2 * c * lanes,
                               2 * valueDim, 2 * lanes));
              Value odd = vector::BitCastOp::create(b, vecType, words);
              Value even = vector::BitCastOp::create(
                  b, vecType,
                  arith::ShLIOp::create(
                      b, words,
                      arith::ConstantOp::create(
                          b, DenseElementsAttr::get(wordsType, 16))));
              total = vector::FMAOp::create(b, odd, zero, total);
              total = vector::FMAOp::create(b, even, zero, total);
            }
            return {total};
          })
          .front();
  Value all = vector::ReductionOp::create(b, vector::CombiningKind::ADD, sum);
  return arith::CmpFOp::create(b, arith::CmpFPredicate::ORD, all, all);
}

SmallVector<Value> RowAccumulator::accumulateByBf16Dot(int64_t numRows,
                                                       const KeyRun &run,
                                                       ArrayRef<Value> inits,
                                                       int64_t first,
                                                       int64_t chunks) {
  auto pairVec = VectorType::get({2 * lanes}, b.getBF16Type());
  auto half = [&](Value v) { return arith::DivUIOp::create(b, v, cst(2)); };
  auto step = [&](Value jp, ValueRange acc,
                  bool lastOdd) -> SmallVector<Value> {
    Value j0 = arith::MulIOp::create(b, jp, cst(2));
    SmallVector<Value> values;
    if (run.rawValues) {
      // Element i: key i % 2's column of the pair in 32-bit lane i / 2.
      SmallVector<int64_t> low, high;
      for (int64_t i = 0; i < 2 * lanes; ++i) {
        int64_t key = i % 2 ? 2 * lanes : 0;
        low.push_back(key + unpackedColumn(i / 2, false));
        high.push_back(key + unpackedColumn(i / 2, true));
      }
      Value zero = vector::BroadcastOp::create(
          b, pairVec,
          arith::ConstantOp::create(b, b.getZeroAttr(b.getBF16Type())));
      for (int64_t c = first; c < first + chunks; c += 2) {
        Value even = run.rawValues(j0, c / 2);
        Value odd =
            lastOdd
                ? zero
                : run.rawValues(arith::AddIOp::create(b, j0, cst(1)), c / 2);
        values.push_back(vector::ShuffleOp::create(b, even, odd, low));
        values.push_back(vector::ShuffleOp::create(b, even, odd, high));
      }
    } else {
      Value row = arith::AddIOp::create(b, run.pairRow, jp);
      for (int64_t c = first; c < first + chunks; ++c)
        values.push_back(
            vector::LoadOp::create(b, pairVec, scratch.valuePairs,
                                   ValueRange{row, cst(2 * c * lanes)}));
    }
    SmallVector<Value> next;
    for (int64_t r = 0; r < numRows; ++r) {
      Value p = broadcastPair(
          vector::LoadOp::create(b, VectorType::get({2}, b.getBF16Type()),
                                 scratch.probPairs, ValueRange{cst(r), j0}));
      for (int64_t c = 0; c < chunks; ++c)
        next.push_back(
            x86vector::DotBF16Op::create(b, acc[r * chunks + c], p, values[c]));
    }
    return next;
  };
  if (!run.rawValues)
    return forLoopWith(
        half(run.from), half(arith::AddIOp::create(b, run.to, cst(1))), cst(1),
        inits, [&](Value jp, ValueRange acc) { return step(jp, acc, false); });
  // V rows as loaded: the whole pairs, then an odd count's last key with
  // zeros (a loop of at most one step), reading no row past the run.
  SmallVector<Value> accs = forLoopWith(
      half(run.from), half(run.to), cst(1), inits,
      [&](Value jp, ValueRange acc) { return step(jp, acc, false); });
  return forLoopWith(
      half(run.to), half(arith::AddIOp::create(b, run.to, cst(1))), cst(1),
      accs, [&](Value jp, ValueRange acc) { return step(jp, acc, true); });
}

Value RowAccumulator::packedValue(Value j, int64_t c) {
  return vector::LoadOp::create(b, vecType, scratch.values,
                                ValueRange{j, cst(c * lanes)});
}

Value RowAccumulator::pairedValue(Value j, int64_t c) {
  auto wordsType = VectorType::get({lanes}, b.getI32Type());
  Value words = vector::BitCastOp::create(
      b, wordsType,
      vector::LoadOp::create(b, VectorType::get({2 * lanes}, b.getBF16Type()),
                             scratch.valuePairs,
                             ValueRange{arith::DivUIOp::create(b, j, cst(2)),
                                        cst(2 * c * lanes)}));
  // bf16 is f32's high half: shift an even key's half up, keep an odd's.
  Value even =
      arith::SubIOp::create(b, cst(1), arith::RemUIOp::create(b, j, cst(2)));
  Value shift = splat(arith::IndexCastOp::create(
      b, b.getI32Type(), arith::MulIOp::create(b, even, cst(16))));
  Value high = splat(arith::ConstantOp::create(
      b, b.getI32IntegerAttr(static_cast<int32_t>(0xFFFF0000u))));
  return vector::BitCastOp::create(
      b, vecType,
      arith::AndIOp::create(b, arith::ShLIOp::create(b, words, shift), high));
}

void RowAccumulator::pairValuesDirect(Value batch, Value kvHead,
                                      Value blockStart, Value blockKeys,
                                      Value valueRows) {
  auto pairs = [&](Value jp, bool lastOdd) {
    Value j0 = arith::MulIOp::create(b, jp, cst(2));
    Value key0 = arith::AddIOp::create(b, blockStart, j0);
    Value key1 = arith::AddIOp::create(b, key0, cst(1));
    for (int64_t c = 0; c < valueChunks; ++c) {
      Value v0 = loadRawChunk(valueRows, {batch, kvHead, key0}, c * lanes,
                              valueDim, lanes);
      Value v1 = lastOdd ? Value(vector::BroadcastOp::create(
                               b, v0.getType(),
                               arith::ConstantOp::create(
                                   b, b.getZeroAttr(b.getBF16Type()))))
                         : loadRawChunk(valueRows, {batch, kvHead, key1},
                                        c * lanes, valueDim, lanes);
      vector::StoreOp::create(b, vector::InterleaveOp::create(b, v0, v1),
                              scratch.valuePairs,
                              ValueRange{jp, cst(2 * c * lanes)});
    }
  };
  Value fullPairs = arith::DivUIOp::create(b, blockKeys, cst(2));
  forLoop(cst(0), fullPairs, cst(1), [&](Value jp) { pairs(jp, false); });
  ifOdd(blockKeys, [&] { pairs(fullPairs, true); });
}
