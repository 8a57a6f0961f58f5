//===- PackedKernel.cpp - The packed CPU micro-kernel ---------------------===//
//
// Per key block, K is packed transposed (KT[d][j], f32; with the bf16 dot
// product, as bf16 pairs KP[d/2][2j + d%2] without widening) and V
// row-major (VP[j][e], f32, rows padded to whole vectors; bf16 V with the
// dot product as key pairs VP2[j/2][2e + j%2]) into stack buffers, so that
// the inner loops stream contiguous vectors whatever the caller's strides
// and element type. Then blocks of `row-block` query rows share each packed
// vector they load: the scores of the block as `key-block / vector-width`
// vector accumulators, one FMA per (query element, key vector), the online
// update of each row, and P·V (RowAccumulator).
//
// A causal or windowed op walks only the keys its rows see and applies the
// band only in the blocks that some row sees in part; there each block of
// rows steps over the keys its rows see, `band-key-step` keys at a time.
// Where a mask or the modifiers may exclude a key for some rows only (its
// weight 0, and 0 · NaN is NaN), each packed V block is checked for an inf
// or NaN once: P·V drops the excluded keys only in blocks that hold one,
// and bf16 V keeps the dot product in the others (bf16 bias masks 1.5-1.9x
// faster than in f32 with the drops everywhere, Zen 5).
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Cpu/PackedKernel.h"

#include "lib/Transforms/Passes.h"

#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/SaveAndRestore.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

void PackedKernel::emitPackedHead(Value batch, Value head, Value kvHead,
                                  Value rows, Value keys) {
  // The rows' sums as vectors of per-lane partial sums (scratch.rowSums)
  // for the whole key loop: a key block then adds its weights lane by
  // lane, and the horizontal sum runs once per row and op, not once per
  // block (bf16 D=64: 1.06x; the sums are rounded in another order).
  std::optional<int64_t> bound = stateRowBound(op);
  bool sums = scratch.rowSums && bound && *bound <= scratch.rowSumRows;
  if (sums)
    forLoop(cst(0), rows, cst(1), [&](Value row) {
      Value sum =
          memref::LoadOp::create(b, op.getSum(), ValueRange{batch, head, row});
      Value partial = vector::InsertOp::create(b, sum, splat(f32Const(0)),
                                               ArrayRef<int64_t>{0});
      vector::StoreOp::create(b, partial, scratch.rowSums,
                              ValueRange{row, cst(0)});
    });
  llvm::SaveAndRestore keepSums(vectorSums, sums);
  // Each key block serves every row of the tile: a modifier's read along
  // a row's keys (bias[h, q_idx, kv_idx]) fetches what the row reads at
  // the next block.
  modifiers.prefetchRunsAhead(keyBlock);
  // The block table is consulted per block of rows too: a tile of 256
  // rows spans two of its 128-row blocks, whose keys differ (diagonal
  // blocks of 128: 2.4·d of the dense time with the tile's check alone).
  llvm::SaveAndRestore byRowBlocks(tableByRowBlocks, true);
  eachBandBlock(
      cst(0), rows, keys,
      [&](Value blockStart, Value blockKeys) {
        packKeys(batch, kvHead, blockStart, blockKeys);
        packValues(batch, kvHead, blockStart, blockKeys);
      },
      [&](Value blockStart, Value blockKeys) {
        emitPackedBlock(batch, head, rows, blockStart, blockKeys);
      },
      batch, head);
  if (sums)
    forLoop(cst(0), rows, cst(1), [&](Value row) {
      Value partial = vector::LoadOp::create(b, vecType, scratch.rowSums,
                                             ValueRange{row, cst(0)});
      memref::StoreOp::create(b, horizontalSum(partial), op.getSum(),
                              ValueRange{batch, head, row});
    });
}

void PackedKernel::emitPackedBlock(Value batch, Value head, Value rows,
                                   Value blockStart, Value blockKeys) {
  // Blocks of `rowBlock` rows share each K and V vector load. The last
  // block's slots past the rows repeat the last row (emitRows makes that
  // harmless): one copy of the micro-kernel, not a second one for the
  // rows left over (which doubled the code and the compile time).
  Value lastRow = arith::SubIOp::create(b, rows, cst(1));
  bool table = op->hasAttr(kBlockMaskAttrName);
  // What the modifiers read by key alone, once for the block's rows (LLVM
  // hoists no gather out of the row loop once a row block's table check
  // guards it: packed documents 1.2x slower that way).
  llvm::SaveAndRestore reads(keyReads, readByKey(blockStart, keyBlock / lanes));
  llvm::SaveAndRestore readsStart(keyReadsStart,
                                  keyReads.empty() ? Value() : blockStart);
  forLoop(cst(0), rows, cst(rowBlock), [&](Value first) {
    if (!table)
      return emitRowBlock(batch, head, first, lastRow, blockStart, blockKeys);
    Value count = arith::MinSIOp::create(
        b, arith::SubIOp::create(b, rows, first), cst(rowBlock));
    keptByTable(batch, head, first, count, blockStart, blockKeys,
                /*prologue=*/nullptr, [&] {
                  emitRowBlock(batch, head, first, lastRow, blockStart,
                               blockKeys);
                });
  });
}

void PackedKernel::emitRowBlock(Value batch, Value head, Value first,
                                Value lastRow, Value blockStart,
                                Value blockKeys) {
  SmallVector<AccRow> block = {{head, first}};
  for (int64_t r = 1; r < rowBlock; ++r)
    block.push_back(
        {head, arith::MinSIOp::create(
                   b, arith::AddIOp::create(b, first, cst(r)), lastRow)});
  // Rows to which the mask_mod leaves no key of the block (most blocks of
  // rows in a block table's partial blocks, for short documents): nothing
  // to score, update or accumulate.
  OpBuilder::InsertionGuard guard(b);
  if (modifiers.hasMaskMod() && !maskModOff) {
    auto anyKept = scf::IfOp::create(
        b, anyKeptByMaskMod(batch, block, blockStart, keyBlock / lanes),
        /*withElseRegion=*/false);
    b.setInsertionPoint(anyKept.thenBlock()->getTerminator());
  }
  if (!bandApplies())
    return emitRows(batch, block, blockStart, blockKeys, cst(0),
                    keyBlock / lanes);
  // A block the band cuts. Rows that see all of it (in a tile larger
  // than the key block, those past the diagonal block's last row) take
  // the whole block, without the band's compares; the others only the
  // keys some row of the block sees, in steps of bandKeyStep keys, so
  // that rows near the diagonal skip most of what the band would drop.
  SeenKeys seen =
      band.keysRowsSee(first, block.back().row, blockStart, blockKeys);
  Value whole = arith::AndIOp::create(
      b,
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, seen.allFrom, cst(0)),
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, seen.allTo,
                            blockKeys));
  auto split = scf::IfOp::create(b, whole, /*withElseRegion=*/true);
  b.setInsertionPoint(split.thenBlock()->getTerminator());
  {
    llvm::SaveAndRestore inside(blockInsideBand, true);
    emitRows(batch, block, blockStart, blockKeys, cst(0), keyBlock / lanes);
  }
  b.setInsertionPoint(split.elseBlock()->getTerminator());
  emitBandSteps(batch, block, blockStart, seen);
}

void PackedKernel::emitBandSteps(Value batch, ArrayRef<AccRow> block,
                                 Value blockStart, const SeenKeys &seen) {
  Value stepKeys = cst(bandKeyStep), to = seen.anyTo;
  Value from = arith::MulIOp::create(
      b, arith::DivUIOp::create(b, seen.anyFrom, stepKeys), stepKeys);
  int64_t halfStep = bandKeyStep / 2;
  forLoop(from, to, stepKeys, [&](Value step) {
    Value start = arith::AddIOp::create(b, blockStart, step);
    Value left = arith::SubIOp::create(b, to, step);
    auto wholeStep = [&] {
      emitRows(batch, block, start, arith::MinSIOp::create(b, left, stepKeys),
               step, bandKeyStep / lanes);
    };
    if (halfStep % lanes != 0)
      return wholeStep();
    // A last step of at most half a step: half the score vectors.
    Value short_ = arith::CmpIOp::create(b, arith::CmpIPredicate::sle, left,
                                         cst(halfStep));
    auto choice = scf::IfOp::create(b, short_, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(choice.thenBlock()->getTerminator());
    emitRows(batch, block, start, left, step, halfStep / lanes);
    b.setInsertionPoint(choice.elseBlock()->getTerminator());
    wholeStep();
  });
}

void PackedKernel::emitRows(Value batch, ArrayRef<AccRow> block,
                            Value blockStart, Value blockKeys, Value packed,
                            int64_t scoreVectors) {
  Value head = block.front().head;
  SmallVector<Value> rows;
  for (const AccRow &row : block)
    rows.push_back(row.row);
  int64_t numRows = rows.size();
  Value zeroVec = splat(f32Const(0));
  auto column = [&](int64_t v) {
    return arith::AddIOp::create(b, packed, cst(v * lanes));
  };

  // Scores: s[r][v] += Q[row r][d] * KT[d][packed + v*lanes ...].
  SmallVector<Value> inits(numRows * scoreVectors, zeroVec);
  SmallVector<Value> scores =
      bf16Dot
          ? scoresByBf16Dot(batch, head, rows, packed, inits)
          : forLoopWith(
                cst(0), cst(headDim), cst(1), inits,
                [&](Value d, ValueRange acc) -> SmallVector<Value> {
                  SmallVector<Value> keys;
                  for (int64_t v = 0; v < scoreVectors; ++v)
                    keys.push_back(vector::LoadOp::create(
                        b, vecType, scratch.keysT, ValueRange{d, column(v)}));
                  SmallVector<Value> next;
                  for (int64_t r = 0; r < numRows; ++r) {
                    Value q = splat(
                        loadF32(op.getQuery(), {batch, head, rows[r], d}));
                    for (int64_t v = 0; v < scoreVectors; ++v)
                      next.push_back(vector::FMAOp::create(
                          b, q, keys[v], acc[r * scoreVectors + v]));
                  }
                  return next;
                });

  // Per row: the softmax statistics; p goes to probs[r]. Every slot
  // loads its row's max and sum before any slot stores, as P·V loads
  // every accumulator before it stores: a slot that repeats a row (the
  // last block's) then computes from the same old values as the row's
  // own slot, and the two store the same update.
  SmallVector<RowStatistics> old;
  for (const AccRow &row : block)
    old.push_back(loadStatistics(batch, row));
  // Dropout's keep bits of all the rows at once: two rows share a Philox
  // where one's counters fill half a vector.
  SmallVector<Value> keeps;
  if (op.getDropoutP())
    keeps = dropoutKeeps(batch, block, blockStart, scoreVectors);
  SmallVector<Value> alphas;
  for (int64_t r = 0; r < numRows; ++r)
    alphas.push_back(updateRowStatistics(
        batch, block[r], old[r], r,
        MutableArrayRef<Value>(scores).slice(r * scoreVectors, scoreVectors),
        blockStart, blockKeys, /*storePairs=*/bf16Values,
        /*scaledAndCapped=*/false,
        keeps.empty()
            ? ArrayRef<Value>()
            : ArrayRef<Value>(keeps).slice(r * scoreVectors, scoreVectors)));

  accumulateBlock(batch, block, alphas, blockStart, blockKeys, packed);
}

void PackedKernel::accumulateBlock(Value batch, ArrayRef<AccRow> block,
                                   ArrayRef<Value> alphas, Value blockStart,
                                   Value blockKeys, Value packed) {
  // acc[r] = alpha[r] * acc[r] + sum_j p[r][j] * VP[j]: bf16 V by the
  // dot product on the keys that every row of the block sees, which in a
  // block the band cuts leaves at most rowBlock keys at either end to
  // f32 FMAs that drop the keys a row does not see.
  auto value = [&](Value j, int64_t c) {
    Value key = arith::AddIOp::create(b, packed, j);
    return bf16Values ? pairedValue(key, c) : packedValue(key, c);
  };
  if (!bf16Values || !bandApplies())
    return accumulateRows(batch, block, alphas, blockKeys, bf16Values, value);
  SeenKeys seen = band.keysRowsSee(block.front().row, block.back().row,
                                   blockStart, blockKeys);
  Value pairRow = arith::DivUIOp::create(b, packed, cst(2));
  SmallVector<KeyRun, 3> runs;
  if (band.left)
    runs.push_back({seen.anyFrom,
                    arith::MinSIOp::create(b, seen.allFrom, seen.anyTo), false,
                    true, pairRow});
  runs.push_back(
      {seen.allFrom, seen.allTo, true, keysMayBeExcluded(), pairRow});
  if (band.right)
    runs.push_back({arith::MaxSIOp::create(b, seen.allTo, seen.anyFrom),
                    seen.anyTo, false, true, pairRow});
  accumulateRows(batch, block, alphas, runs, value);
}

SmallVector<Value> PackedKernel::scoresByBf16Dot(Value batch, Value head,
                                                 ArrayRef<Value> rows,
                                                 Value packed,
                                                 ArrayRef<Value> inits) {
  int64_t scoreVectors = inits.size() / rows.size();
  Value packedPairs = arith::MulIOp::create(b, packed, cst(2));
  auto pairVec = VectorType::get({2 * lanes}, b.getBF16Type());
  return forLoopWith(
      cst(0), cst(llvm::divideCeil(headDim, 2)), cst(1), inits,
      [&](Value p, ValueRange acc) -> SmallVector<Value> {
        SmallVector<Value> keys;
        for (int64_t v = 0; v < scoreVectors; ++v)
          keys.push_back(vector::LoadOp::create(
              b, pairVec, scratch.keyPairs,
              ValueRange{p, arith::AddIOp::create(b, packedPairs,
                                                  cst(2 * v * lanes))}));
        Value d0 = arith::MulIOp::create(b, p, cst(2));
        // An odd D's last pair reads Q[D-1] twice; its key half is 0.
        Value d1 = arith::MinSIOp::create(
            b, arith::AddIOp::create(b, d0, cst(1)), cst(headDim - 1));
        SmallVector<Value> next;
        for (auto [r, row] : llvm::enumerate(rows)) {
          Value q = broadcastPair(
              memref::LoadOp::create(b, op.getQuery(),
                                     ValueRange{batch, head, row, d0}),
              memref::LoadOp::create(b, op.getQuery(),
                                     ValueRange{batch, head, row, d1}));
          for (int64_t v = 0; v < scoreVectors; ++v)
            next.push_back(x86vector::DotBF16Op::create(
                b, acc[r * scoreVectors + v], q, keys[v]));
        }
        return next;
      });
}

void PackedKernel::packKeys(Value batch, Value kvHead, Value blockStart,
                            Value blockKeys) {
  bool vectors = lanes == 16;
  // bf16-dot packs K as pairs of head dims; an odd D ends in a half pair.
  auto elementKeys = [&] {
    eachKey(blockStart, blockKeys, [&](Value key, Value j) {
      if (bf16Dot)
        packKeyPairs(batch, kvHead, key, j);
      else
        packKeyColumn(batch, kvHead, key, j);
    });
  };
  if (vectors && (!bf16Dot || headDim % 2 == 0))
    ifUnitStride(
        op.getKey(),
        [&](Value rows) {
          // Keys past the block repeat its last key: their score lanes
          // are excluded later.
          transposeRows(rows, {batch, kvHead}, blockStart, blockKeys, headDim,
                        bf16Dot ? scratch.keyPairs : scratch.keysT,
                        /*zeroPast=*/false);
        },
        elementKeys);
  else
    elementKeys();
}

void PackedKernel::packValues(Value batch, Value kvHead, Value blockStart,
                              Value blockKeys) {
  packValueBlock(batch, kvHead, blockStart, blockKeys);
  valuesFinite = keysMayBeExcluded() ? valuesAllFinite(blockKeys) : Value();
}

void PackedKernel::packValueBlock(Value batch, Value kvHead, Value blockStart,
                                  Value blockKeys) {
  if (!bf16Values) {
    Value lastKey = arith::SubIOp::create(
        b, arith::AddIOp::create(b, blockStart, blockKeys), cst(1));
    widenRows(op.getValue(), batch, kvHead, blockStart, blockKeys, lastKey,
              valueDim, scratch.values);
    return;
  }
  auto elementwise = [&] {
    eachKey(blockStart, blockKeys,
            [&](Value key, Value j) { packValuePairs(batch, kvHead, key, j); });
    // An odd count's last pair: its second key is 0, not a stale value.
    ifOdd(blockKeys, [&] {
      Value row = arith::DivUIOp::create(b, blockKeys, cst(2));
      Value zero = arith::ConstantOp::create(b, b.getZeroAttr(b.getBF16Type()));
      forLoop(cst(0), cst(valueDim), cst(1), [&](Value e) {
        Value column = arith::AddIOp::create(
            b, arith::MulIOp::create(b, e, cst(2)), cst(1));
        memref::StoreOp::create(b, zero, scratch.valuePairs,
                                ValueRange{row, column});
      });
    });
  };
  if (lanes == 16)
    ifUnitStride(
        op.getValue(),
        [&](Value rows) {
          pairValuesDirect(batch, kvHead, blockStart, blockKeys, rows);
        },
        elementwise);
  else
    elementwise();
}

void PackedKernel::packKeyColumn(Value batch, Value kvHead, Value key,
                                 Value j) {
  forLoop(cst(0), cst(headDim), cst(1), [&](Value d) {
    Value k = loadF32(op.getKey(), {batch, kvHead, key, d});
    memref::StoreOp::create(b, k, scratch.keysT, ValueRange{d, j});
  });
}

void PackedKernel::packValuePairs(Value batch, Value kvHead, Value key,
                                  Value j) {
  Value row = arith::DivUIOp::create(b, j, cst(2));
  Value half = arith::RemUIOp::create(b, j, cst(2));
  forLoop(cst(0), cst(valueDim), cst(1), [&](Value e) {
    Value v = memref::LoadOp::create(b, op.getValue(),
                                     ValueRange{batch, kvHead, key, e});
    Value column =
        arith::AddIOp::create(b, arith::MulIOp::create(b, e, cst(2)), half);
    memref::StoreOp::create(b, v, scratch.valuePairs, ValueRange{row, column});
  });
}

void PackedKernel::packKeyPairs(Value batch, Value kvHead, Value key, Value j) {
  Value column = arith::MulIOp::create(b, j, cst(2));
  Value next = arith::AddIOp::create(b, column, cst(1));
  forLoop(cst(0), cst(headDim / 2), cst(1), [&](Value p) {
    Value d = arith::MulIOp::create(b, p, cst(2));
    Value k0 = memref::LoadOp::create(b, op.getKey(),
                                      ValueRange{batch, kvHead, key, d});
    Value k1 = memref::LoadOp::create(
        b, op.getKey(),
        ValueRange{batch, kvHead, key, arith::AddIOp::create(b, d, cst(1))});
    memref::StoreOp::create(b, k0, scratch.keyPairs, ValueRange{p, column});
    memref::StoreOp::create(b, k1, scratch.keyPairs, ValueRange{p, next});
  });
  if (headDim % 2) {
    Value last = cst(headDim / 2);
    Value k0 = memref::LoadOp::create(
        b, op.getKey(), ValueRange{batch, kvHead, key, cst(headDim - 1)});
    Value zero = arith::ConstantOp::create(b, b.getZeroAttr(b.getBF16Type()));
    memref::StoreOp::create(b, k0, scratch.keyPairs, ValueRange{last, column});
    memref::StoreOp::create(b, zero, scratch.keyPairs, ValueRange{last, next});
  }
}

void mlir::attn::cpu::emitPackedHead(const KernelSite &site, Value batch,
                                     Value head, Value kvHead, Value rows,
                                     Value keys) {
  PackedKernel(site).emitPackedHead(batch, head, kvHead, rows, keys);
}
