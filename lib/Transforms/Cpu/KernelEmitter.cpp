//===- KernelEmitter.cpp - What the CPU micro-kernels of one op share -----===//
#include "lib/Transforms/Cpu/KernelEmitter.h"

#include "lib/Transforms/Passes.h"

#include "llvm/Support/MathExtras.h"
#include "llvm/Support/SaveAndRestore.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

KernelEmitter::KernelEmitter(const KernelSite &site)
    : VectorEmitter(site.b, site.options.lanes), op(site.op),
      scratch(site.scratch), keyBlock(site.options.keyBlock),
      bandKeyStep(site.options.bandKeyStep), rowBlock(site.options.rowBlock),
      laneRows(site.options.laneRows), diagonal(site.diagonal),
      maths(b, b.getLoc(), op, SoftmaxConvention::cpu()),
      band(b, b.getLoc(), op, diagonal), modifiers(b, b.getLoc(), op) {
  auto q = cast<MemRefType>(op.getQuery().getType());
  headDim = q.getDimSize(3);
  auto keyType = cast<MemRefType>(op.getKey().getType());
  int64_t keyRowBytes =
      headDim * llvm::divideCeil(keyType.getElementTypeBitWidth(), 8);
  int64_t prefetchDistance = site.options.prefetchDistance;
  prefetchKeys = prefetchDistance > 0
                     ? std::max<int64_t>(1, prefetchDistance / keyRowBytes)
                     : 0;
  bf16Dot = site.bf16Dot;
  blockPrefetch = site.blockPrefetch;
  bf16Values = bf16Dot && scratch.valuePairs && usesBf16Values(op);
  valueDim = cast<MemRefType>(op.getValue().getType()).getDimSize(3);
  valueChunks = llvm::divideCeil(valueDim, lanes);
}

bool KernelEmitter::bandApplies() {
  return (op.getCausal() || op.getWindow()) && !blockInsideBand;
}

Value KernelEmitter::chunkMask(int64_t chunk) {
  int64_t live = std::min(lanes, valueDim - chunk * lanes);
  return vector::ConstantMaskOp::create(b, maskVecType,
                                        ArrayRef<int64_t>{live});
}

void KernelEmitter::eachKey(Value blockStart, Value blockKeys,
                            function_ref<void(Value key, Value j)> body) {
  forLoop(cst(0), blockKeys, cst(1),
          [&](Value j) { body(arith::AddIOp::create(b, blockStart, j), j); });
}

void KernelEmitter::widenRows(Value rowsMemref, Value batch, Value kvHead,
                              Value blockStart, Value count, Value lastKey,
                              int64_t width, Value target) {
  forLoop(cst(0), count, cst(1), [&](Value j) {
    Value key = arith::MinSIOp::create(
        b, arith::AddIOp::create(b, blockStart, j), lastKey);
    ifUnitStride(
        rowsMemref,
        [&](Value rowsView) {
          eachChunk(width, [&](Value c0, int64_t columns) {
            Value chunk =
                loadChunkF32(rowsView, {batch, kvHead, key, c0}, columns);
            if (columns == lanes)
              vector::StoreOp::create(b, chunk, target, ValueRange{j, c0});
            else
              vector::MaskedStoreOp::create(b, target, ValueRange{j, c0},
                                            liveLanes(columns), chunk);
          });
        },
        [&] {
          forLoop(cst(0), cst(width), cst(1), [&](Value c) {
            memref::StoreOp::create(
                b, loadF32(rowsMemref, {batch, kvHead, key, c}), target,
                ValueRange{j, c});
          });
        });
  });
}

void KernelEmitter::eachBandBlock(Value firstRow, Value count, Value keys,
                                  function_ref<void(Value, Value)> prologue,
                                  function_ref<void(Value, Value)> body,
                                  Value batch, Value head, Value from,
                                  Value to) {
  Value first, last;
  std::tie(first, last) = band.keysSomeRowSees(firstRow, count, keys);
  if (from) {
    first = arith::MaxSIOp::create(b, first, from);
    last = arith::MinSIOp::create(b, last, to);
  }
  bool table = batch && op->hasAttr(kBlockMaskAttrName);
  forLoop(first, last, cst(keyBlock), [&](Value blockStart) {
    Value blockKeys = arith::MinSIOp::create(
        b, arith::SubIOp::create(b, last, blockStart), cst(keyBlock));
    auto bandBody = [&] {
      if (!op.getCausal() && !op.getWindow())
        return body(blockStart, blockKeys);
      auto inBand = scf::IfOp::create(
          b, band.blockInBand(firstRow, count, blockStart, blockKeys),
          /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(inBand.thenBlock()->getTerminator());
      blockInsideBand = true;
      body(blockStart, blockKeys);
      blockInsideBand = false;
      b.setInsertionPoint(inBand.elseBlock()->getTerminator());
      body(blockStart, blockKeys);
    };
    if (!table) {
      prologue(blockStart, blockKeys);
      return bandBody();
    }
    keptByTable(
        batch, head, firstRow, count, blockStart, blockKeys,
        [&] { prologue(blockStart, blockKeys); }, bandBody,
        /*splitFull=*/!tableByRowBlocks);
  });
}

void KernelEmitter::keptByTable(Value batch, Value head, Value firstRow,
                                Value count, Value blockStart, Value blockKeys,
                                function_ref<void()> prologue,
                                function_ref<void()> body, bool splitFull) {
  // A key block the block mask leaves out: nothing to pack or compute.
  // One it declares full: no mask_mod to evaluate.
  auto [kept, allFull] =
      blockTableEntries(op, op.getCaptures(), op.getOrigin(), batch, head,
                        firstRow, count, blockStart, blockKeys);
  auto keptIf = scf::IfOp::create(b, kept, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(keptIf.thenBlock()->getTerminator());
  if (prologue)
    prologue();
  if (!splitFull || !modifiers.hasMaskMod())
    return body();
  auto fullIf = scf::IfOp::create(b, allFull, /*withElseRegion=*/true);
  b.setInsertionPoint(fullIf.thenBlock()->getTerminator());
  {
    llvm::SaveAndRestore off(maskModOff, true);
    body();
  }
  b.setInsertionPoint(fullIf.elseBlock()->getTerminator());
  body();
}

Value KernelEmitter::horizontalMax(Value vec) {
  int64_t n = cast<VectorType>(vec.getType()).getNumElements();
  if (!llvm::isPowerOf2_64(n))
    return vector::ReductionOp::create(b, vector::CombiningKind::MAXIMUMF, vec);
  for (; n > 1; n /= 2) {
    Value low = vector::ExtractStridedSliceOp::create(
        b, vec, ArrayRef<int64_t>{0}, ArrayRef<int64_t>{n / 2},
        ArrayRef<int64_t>{1});
    Value high = vector::ExtractStridedSliceOp::create(
        b, vec, ArrayRef<int64_t>{n / 2}, ArrayRef<int64_t>{n / 2},
        ArrayRef<int64_t>{1});
    vec = maths.max(low, high);
  }
  return vector::ExtractOp::create(b, vec, ArrayRef<int64_t>{0});
}

Value KernelEmitter::scoreScale() {
  return f32Const(static_cast<float>(maths.scoreScale()));
}

Value KernelEmitter::scaleAndCap(Value s) {
  return softcap(arith::MulFOp::create(b, s, splat(scoreScale())));
}

Value KernelEmitter::softcapScore(Value s) {
  if (!op.getSoftcapAttr())
    return s;
  Value excluded = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, s,
                                         splat(f32Const(-kInf)));
  return arith::SelectOp::create(b, excluded, s, softcap(s));
}

KernelEmitter::RowStatistics KernelEmitter::loadStatistics(Value batch,
                                                           const AccRow &at) {
  Value max = memref::LoadOp::create(b, op.getMax(),
                                     ValueRange{batch, at.head, at.row});
  if (vectorSums)
    return {max, Value(),
            vector::LoadOp::create(b, vecType, scratch.rowSums,
                                   ValueRange{at.row, cst(0)})};
  return {max,
          memref::LoadOp::create(b, op.getSum(),
                                 ValueRange{batch, at.head, at.row}),
          Value()};
}

bool KernelEmitter::hasKeepMask() {
  Value mask = op.getMask();
  return mask &&
         cast<MemRefType>(mask.getType()).getElementType().isInteger(1);
}

Value KernelEmitter::maskIndex(unsigned dim, Value full) {
  auto type = cast<MemRefType>(op.getMask().getType());
  return type.getDimSize(dim) == 1 ? cst(0) : full;
}

Value KernelEmitter::maskBiasAt(Value batch, Value head, Value row, Value key) {
  Value mask = op.getMask();
  SmallVector<Value, 4> at = {maskIndex(0, batch), maskIndex(1, head),
                              maskIndex(2, row), maskIndex(3, key)};
  if (!hasKeepMask())
    return loadF32(mask, at);
  return arith::SelectOp::create(b, memref::LoadOp::create(b, mask, at),
                                 f32Const(0), f32Const(-kInf));
}

Value KernelEmitter::maskBiasChunk(Value view, ArrayRef<Value> rowIndex,
                                   Value key, Value live) {
  if (!hasKeepMask())
    return widenToF32(live ? loadRawChunkWhere(view, rowIndex, key, live)
                           : loadRawChunkAt(view, rowIndex, key, lanes, lanes));
  if (!live)
    live = vector::ConstantMaskOp::create(b, maskVecType,
                                          ArrayRef<int64_t>{lanes});
  SmallVector<Value, 4> at(rowIndex);
  at.push_back(key);
  return arith::SelectOp::create(b, loadKeepBits(view, at, live), zeroVector(),
                                 splat(f32Const(-kInf)));
}

void KernelEmitter::packMaskRow(Value batch, Value head, Value row,
                                Value blockStart, Value blockKeys) {
  Value mask = op.getMask();
  auto type = cast<MemRefType>(mask.getType());
  auto elements = [&] {
    forLoop(cst(0), blockKeys, cst(1), [&](Value j) {
      Value key = arith::AddIOp::create(b, blockStart, j);
      memref::StoreOp::create(b, maskBiasAt(batch, head, row, key),
                              scratch.rowBias, ValueRange{j});
    });
  };
  if (type.getDimSize(3) == 1 || keyBlock % lanes)
    return elements();
  // Unit-stride rows (as the runtime passes masks): a vector of the
  // block's keys a load, a keep mask's bytes or a bias's elements; keys
  // past the block's count are not read (their lanes are excluded later).
  // Element by element, the row's loads and conversions had cost a bf16
  // bias mask 1.2x (Zen 5, D = 64).
  auto vectors = [&](Value view, bool whole) {
    SmallVector<Value, 4> rowIndex = {maskIndex(0, batch), maskIndex(1, head),
                                      maskIndex(2, row)};
    for (int64_t v = 0; v < keyBlock / lanes; ++v) {
      Value key = arith::AddIOp::create(b, blockStart, cst(v * lanes));
      Value live = whole ? Value()
                         : vector::CreateMaskOp::create(
                               b, maskVecType,
                               ValueRange{arith::SubIOp::create(
                                   b, blockKeys, cst(v * lanes))});
      storeVector(maskBiasChunk(view, rowIndex, key, live), scratch.rowBias,
                  {cst(v * lanes)});
    }
    // What the row reads at the next key block, while the tile's other
    // rows run this one (a partial block is the row's last): f32 1.09x,
    // bf16 1.16x with an [B, H, S, S] bias (Zen 5, D = 64).
    if (whole)
      prefetchRun(op.getMask(), rowIndex,
                  arith::AddIOp::create(b, blockStart, cst(keyBlock)),
                  keyBlock);
  };
  ifUnitStride(
      mask,
      [&](Value view) {
        auto whole =
            scf::IfOp::create(b,
                              arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                                    blockKeys, cst(keyBlock)),
                              /*withElseRegion=*/true);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(whole.thenBlock()->getTerminator());
        vectors(view, true);
        b.setInsertionPoint(whole.elseBlock()->getTerminator());
        vectors(view, false);
      },
      elements);
}

Value KernelEmitter::updateRowStatistics(Value batch, const AccRow &at,
                                         RowStatistics old, int64_t slot,
                                         MutableArrayRef<Value> scores,
                                         Value blockStart, Value blockKeys,
                                         bool storePairs, bool scaledAndCapped,
                                         ArrayRef<Value> dropKeeps) {
  Value head = at.head, row = at.row;
  int64_t scoreVectors = scores.size();
  Value zeroVec = splat(f32Const(0));
  if (!scaledAndCapped)
    for (Value &s : scores)
      s = scaleAndCap(s);
  // Positions that the mask or the mask_mod exclude, made -inf after the
  // score_mod (which must not bring an excluded score back); without
  // modifiers, at once.
  SmallVector<Value> excluded(scoreVectors);
  Value negInfVec = splat(f32Const(-kInf));
  bool modified = modifiers.hasScoreMod() || modifiers.hasMaskMod();
  if (op.getMask()) {
    // A -inf bias (a false keep bit) excludes the key by a select, not by
    // the addition alone: NaN + -inf is NaN, and a NaN in an excluded
    // key's K row must not reach the row. A keep mask's biases are 0 or
    // -inf, so it takes the select alone.
    packMaskRow(batch, head, row, blockStart, blockKeys);
    bool keepMask = hasKeepMask();
    for (int64_t v = 0; v < scoreVectors; ++v) {
      Value bias = vector::LoadOp::create(b, vecType, scratch.rowBias,
                                          ValueRange{cst(v * lanes)});
      if (!keepMask)
        scores[v] = vector::FMAOp::create(
            b, bias, splat(f32Const(static_cast<float>(maths.biasScale()))),
            scores[v]);
      excluded[v] =
          arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, bias, negInfVec);
      if (!modified) {
        scores[v] =
            arith::SelectOp::create(b, excluded[v], negInfVec, scores[v]);
        excluded[v] = {};
      }
    }
  }
  applyModifiers(batch, head, row, blockStart, scores, excluded);
  for (int64_t v = 0; v < scoreVectors; ++v)
    if (excluded[v])
      scores[v] = arith::SelectOp::create(b, excluded[v], negInfVec, scores[v]);

  // Lanes past the block's keys, and outside the causal/window band,
  // are excluded: -inf scores.
  Value lane = arith::IndexCastOp::create(
      b, idxVecType,
      vector::StepOp::create(b, VectorType::get({lanes}, b.getIndexType())));
  Value liveKeys =
      splat(arith::IndexCastOp::create(b, b.getI32Type(), blockKeys));
  Value bandLo, bandHi;
  if (bandApplies()) {
    // Key j (block-local) is allowed iff lo <= j <= hi with
    // hi = row + diag + right - blockStart, lo = row + diag - left -
    // blockStart.
    Value rel = band.relative(row, blockStart);
    if (band.right)
      bandHi = splat(clampToI32(band.upper(rel), -1, keyBlock));
    if (band.left)
      bandLo = splat(clampToI32(band.lower(rel), -1, keyBlock));
  }
  for (int64_t v = 0; v < scoreVectors; ++v) {
    Value j = arith::AddIOp::create(
        b, lane,
        splat(arith::ConstantOp::create(b, b.getI32IntegerAttr(v * lanes))));
    Value allowed =
        arith::CmpIOp::create(b, arith::CmpIPredicate::slt, j, liveKeys);
    if (bandHi)
      allowed = arith::AndIOp::create(
          b, allowed,
          arith::CmpIOp::create(b, arith::CmpIPredicate::sle, j, bandHi));
    if (bandLo)
      allowed = arith::AndIOp::create(
          b, allowed,
          arith::CmpIOp::create(b, arith::CmpIPredicate::sge, j, bandLo));
    scores[v] = arith::SelectOp::create(b, allowed, scores[v], negInfVec);
  }

  // Online update of the row's max and sum.
  Value oldMax = old.max, oldSum = old.sum;
  Value blockMaxVec = scores[0];
  for (int64_t v = 1; v < scoreVectors; ++v)
    blockMaxVec = maths.max(scores[v], blockMaxVec);
  Value blockMax = horizontalMax(blockMaxVec);
  AttentionMath::MaxUpdate update = maths.updateMax(oldMax, blockMax);
  Value newMax = update.max, safeMax = update.reference, alpha = update.alpha;
  Value safeMaxVec = splat(safeMax);
  Value sumVec = zeroVec;
  SmallVector<Value> ownKeeps;
  Value dropKept;
  if (op.getDropoutP()) {
    if (dropKeeps.empty())
      dropKeeps = ownKeeps = dropoutKeeps(batch, at, blockStart, scoreVectors);
    dropKept = splat(dropoutKeptScale(b, b.getLoc(), op.getDropoutP()));
  }
  for (int64_t v = 0; v < scoreVectors; ++v) {
    Value p = maths.exp(arith::SubFOp::create(b, scores[v], safeMaxVec));
    sumVec = arith::AddFOp::create(b, sumVec, p);
    // Dropout: the sum (and so the LSE) is the undropped softmax's; the
    // weights that reach P·V are kept or 0, and scaled.
    if (!dropKeeps.empty())
      p = arith::SelectOp::create(
          b, dropKeeps[v], arith::MulFOp::create(b, p, dropKept), zeroVec);
    vector::StoreOp::create(b, p, scratch.probs,
                            ValueRange{cst(slot), cst(v * lanes)});
    if (storePairs)
      vector::StoreOp::create(
          b,
          arith::TruncFOp::create(b, VectorType::get({lanes}, b.getBF16Type()),
                                  p),
          scratch.probPairs, ValueRange{cst(slot), cst(v * lanes)});
  }
  if (old.partialSums) {
    memref::StoreOp::create(b, newMax, op.getMax(),
                            ValueRange{batch, head, row});
    vector::StoreOp::create(
        b, vector::FMAOp::create(b, splat(alpha), old.partialSums, sumVec),
        scratch.rowSums, ValueRange{row, cst(0)});
    return alpha;
  }
  Value blockSum = horizontalSum(sumVec);
  Value newSum = maths.updateSum(oldSum, alpha, blockSum);
  memref::StoreOp::create(b, newMax, op.getMax(), ValueRange{batch, head, row});
  memref::StoreOp::create(b, newSum, op.getSum(), ValueRange{batch, head, row});
  return alpha;
}

Value KernelEmitter::laneIndices(Value first, int64_t v) {
  Value lane = arith::IndexCastOp::create(
      b, idxVecType,
      vector::StepOp::create(b, VectorType::get({lanes}, b.getIndexType())));
  return arith::AddIOp::create(
      b,
      splat(arith::AddIOp::create(
          b, first,
          arith::ConstantOp::create(
              b, b.getI32IntegerAttr(static_cast<int32_t>(v * lanes))))),
      lane);
}

Value KernelEmitter::globalIndexOf(unsigned dim, Value local) {
  return globalIndex(b, b.getLoc(), op.getOrigin(), dim, local);
}

SmallVector<ModifierEmitter::ReadsAhead>
KernelEmitter::readByKey(Value blockStart, int64_t vectors) {
  SmallVector<ModifierEmitter::ReadsAhead> reads;
  if (!modifiers.hasScoreMod() && !modifiers.hasMaskMod())
    return reads;
  Value firstKey = globalIndexOf(3, blockStart);
  for (int64_t v = 0; v < vectors; ++v) {
    reads.push_back(modifiers.keyReads(laneIndices(firstKey, v)));
    if (reads.back().empty())
      return {};
  }
  return reads;
}

const ModifierEmitter::ReadsAhead *KernelEmitter::readsAhead(Value blockStart,
                                                             size_t v) const {
  return blockStart == keyReadsStart && v < keyReads.size() ? &keyReads[v]
                                                            : nullptr;
}

Value KernelEmitter::scoreModInBase2(Value s, ArrayRef<Value> indices,
                                     const ModifierEmitter::ReadsAhead *reads) {
  auto factor = [&](double f) {
    Value c = f32Const(static_cast<float>(f));
    return isa<VectorType>(s.getType()) ? splat(c) : c;
  };
  return arith::MulFOp::create(
      b,
      modifiers.score(arith::MulFOp::create(b, s, factor(M_LN2)), indices,
                      /*derivative=*/nullptr, reads),
      factor(M_LOG2E));
}

void KernelEmitter::applyModifiers(Value batch, Value head, Value row,
                                   Value blockStart,
                                   MutableArrayRef<Value> scores,
                                   MutableArrayRef<Value> excluded) {
  if (!modifiers.hasScoreMod() && !modifiers.hasMaskMod())
    return;
  Value gb = globalIndexOf(0, batch), gh = globalIndexOf(1, head),
        gi = globalIndexOf(2, row), firstKey = globalIndexOf(3, blockStart);
  for (auto [v, score] : llvm::enumerate(scores)) {
    SmallVector<Value> indices = {gb, gh, gi, laneIndices(firstKey, v)};
    const ModifierEmitter::ReadsAhead *reads = readsAhead(blockStart, v);
    if (modifiers.hasScoreMod())
      score = scoreModInBase2(score, indices, reads);
    if (modifiers.hasMaskMod() && !maskModOff) {
      Value dropped = arith::XOrIOp::create(
          b, modifiers.keep(indices, lanes, Value(), reads),
          splat(arith::ConstantOp::create(b, b.getBoolAttr(true))));
      excluded[v] = excluded[v]
                        ? arith::OrIOp::create(b, excluded[v], dropped)
                        : dropped;
    }
  }
}

Value KernelEmitter::anyKeptByMaskMod(Value batch, ArrayRef<AccRow> rows,
                                      Value blockStart, int64_t vectors) {
  Value gb = globalIndexOf(0, batch), firstKey = globalIndexOf(3, blockStart);
  Value any;
  for (const AccRow &at : rows) {
    Value gh = globalIndexOf(1, at.head), gi = globalIndexOf(2, at.row);
    for (int64_t v = 0; v < vectors; ++v) {
      Value kept = modifiers.keep({gb, gh, gi, laneIndices(firstKey, v)}, lanes,
                                  Value(), readsAhead(blockStart, v));
      any = any ? arith::OrIOp::create(b, any, kept).getResult() : kept;
    }
  }
  return vector::ReductionOp::create(b, vector::CombiningKind::OR, any);
}

SmallVector<Value> KernelEmitter::dropoutKeeps(Value batch,
                                               ArrayRef<AccRow> rows,
                                               Value blockStart,
                                               int64_t vectors) {
  Location loc = b.getLoc();
  Value threshold = dropoutThreshold(b, loc, op.getDropoutP());
  Value gb = globalIndexOf(0, batch), firstKey = globalIndexOf(3, blockStart);
  SmallVector<Value> heads, globalRows;
  for (const AccRow &at : rows) {
    heads.push_back(globalIndexOf(1, at.head));
    globalRows.push_back(globalIndexOf(2, at.row));
  }
  if (vectors % 4 == 0)
    return dropoutKeepVectors(b, loc, op.getDropoutSeed(), threshold, gb, heads,
                              globalRows, firstKey, lanes, vectors);
  SmallVector<Value> keeps;
  for (auto [gh, gi] : llvm::zip(heads, globalRows))
    for (int64_t v = 0; v < vectors; ++v)
      keeps.push_back(dropoutKeep(b, loc, op.getDropoutSeed(), threshold, gb,
                                  gh, gi, laneIndices(firstKey, v)));
  return keeps;
}
