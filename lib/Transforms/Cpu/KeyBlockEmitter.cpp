//===- KeyBlockEmitter.cpp - Scores of a key block, recomputed ------------===//
#include "lib/Transforms/Cpu/KeyBlockEmitter.h"
#include "lib/Transforms/Cpu/MicroKernels.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

void KeyBlockEmitter::allocateBlockState(bool keyPairs) {
  keysT = keyPairs ? pairBuffer(headPad) : stackBuffer({headPad, kBlockKeys});
  if (kRows * keyVectors > tileAccumulators(lanes))
    tileScores = stackBuffer({kRows, kBlockKeys});
  if (mask || modifiers.hasMaskMod())
    keep = stackBuffer({rowBlock, kBlockKeys});
  // A float mask's bias (a keep mask has only its keep bits).
  if (mask && !cast<MemRefType>(mask.getType()).getElementType().isInteger(1))
    bias = stackBuffer({rowBlock, kBlockKeys});
  if (dropoutP) {
    dropScale = stackBuffer({rowBlock, kBlockKeys});
    dropThreshold = dropoutThreshold(b, b.getLoc(), dropoutP);
    dropKept = splat(dropoutKeptScale(b, b.getLoc(), dropoutP));
  }
}

Value KeyBlockEmitter::stackBuffer(ArrayRef<int64_t> shape, Type element) {
  return memref::AllocaOp::create(
      b, MemRefType::get(shape, element ? element : f32), ValueRange{},
      b.getI64IntegerAttr(64));
}

Value KeyBlockEmitter::pairBuffer(int64_t pad) {
  return stackBuffer({pad / 2, 2 * kBlockKeys}, b.getBF16Type());
}

Value KeyBlockEmitter::heapRows(Value rows, int64_t cols, Type element) {
  SmallVector<int64_t> shape = {ShapedType::kDynamic};
  if (cols > 0)
    shape.push_back(cols);
  return memref::AllocOp::create(
      b, MemRefType::get(shape, element ? element : f32), ValueRange{rows},
      b.getI64IntegerAttr(64));
}

Value KeyBlockEmitter::kvHeadOf(Value head) {
  Value group = arith::DivUIOp::create(b, dim(query, 1), dim(key, 1));
  return arith::DivUIOp::create(b, head, group);
}

Value KeyBlockEmitter::finiteOrZero(Value x) {
  Value inf = f32Const(kInf), zero = f32Const(0.0f);
  if (isa<VectorType>(x.getType())) {
    inf = splat(inf);
    zero = splat(zero);
  }
  Value finite = arith::CmpFOp::create(b, arith::CmpFPredicate::OLT,
                                       math::AbsFOp::create(b, x), inf);
  return arith::SelectOp::create(b, finite, x, zero);
}

Value KeyBlockEmitter::finiteOrZeroBf16(Value pairs) {
  // |x| below inf's bits (0x7f80): finite.
  auto words = VectorType::get({2 * lanes}, b.getI16Type());
  auto constant = [&](int64_t v) {
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(words, b.getI16IntegerAttr(v)));
  };
  Value bits = vector::BitCastOp::create(b, words, pairs);
  Value finite = arith::CmpIOp::create(
      b, arith::CmpIPredicate::ult,
      arith::AndIOp::create(b, bits, constant(0x7fff)), constant(0x7f80));
  return arith::SelectOp::create(
      b, finite, pairs,
      vector::BitCastOp::create(b, pairs.getType(), constant(0)));
}

void KeyBlockEmitter::storeKeyRow(Value result, Value view, Value rowBuffer,
                                  const KeyBlock &block, ValueRange at,
                                  ArrayRef<Value> vectors, bool streaming) {
  if (view && streaming) {
    // A whole block from a 64-byte aligned address: whole cache lines,
    // written without reading them first (non-temporal stores, each vector
    // aligned to its size).
    Value full = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, block.count,
                                       cst(keyVectors * lanes));
    Value address = elementAddress(view, {at[0], at[1], at[2], block.start});
    Value aligned = arith::CmpIOp::create(
        b, arith::CmpIPredicate::eq, arith::AndIOp::create(b, address, cst(63)),
        cst(0));
    auto choice = scf::IfOp::create(b, arith::AndIOp::create(b, full, aligned),
                                    /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(choice.thenBlock()->getTerminator());
    for (int64_t v = 0; v < keyVectors; ++v)
      vector::StoreOp::create(
          b, vectors[v], view,
          ValueRange{at[0], at[1], at[2],
                     arith::AddIOp::create(b, block.start, cst(v * lanes))},
          /*nontemporal=*/true, llvm::MaybeAlign(lanes * 4));
    b.setInsertionPoint(choice.elseBlock()->getTerminator());
    storeKeyRow(result, view, rowBuffer, block, at, vectors,
                /*streaming=*/false);
    return;
  }
  if (view) {
    // Masked stores: lanes past the block's count are not the row's.
    for (int64_t v = 0; v < keyVectors; ++v) {
      Value live = vector::CreateMaskOp::create(
          b, maskVecType,
          ValueRange{arith::SubIOp::create(b, block.count, cst(v * lanes))});
      Value column = arith::AddIOp::create(b, block.start, cst(v * lanes));
      vector::MaskedStoreOp::create(b, view,
                                    ValueRange{at[0], at[1], at[2], column},
                                    live, vectors[v]);
    }
    return;
  }
  for (int64_t v = 0; v < keyVectors; ++v)
    storeVector(vectors[v], rowBuffer, {cst(v * lanes)});
  forLoop(cst(0), block.count, cst(1), [&](Value k) {
    memref::StoreOp::create(
        b, memref::LoadOp::create(b, rowBuffer, ValueRange{k}), result,
        ValueRange{at[0], at[1], at[2],
                   arith::AddIOp::create(b, block.start, k)});
  });
}

void KeyBlockEmitter::fenceStreamingStores() {
  LLVM::FenceOp::create(b, LLVM::AtomicOrdering::seq_cst);
}

void KeyBlockEmitter::storeAs(Value value, Value memref, ValueRange at) {
  Type elem = cast<MemRefType>(memref.getType()).getElementType();
  if (elem != f32)
    value = arith::TruncFOp::create(b, elem, value);
  memref::StoreOp::create(b, value, memref, at);
}

void KeyBlockEmitter::packRow(Value source, Value batch, Value head,
                              Value row, Value rows, Value r, int64_t width,
                              int64_t pad) {
  Type elem = cast<MemRefType>(rows.getType()).getElementType();
  forLoop(cst(0), cst(width), cst(1), [&](Value c) {
    SmallVector<Value> at = {batch, head, row, c};
    Value x = elem == f32 ? loadF32(source, at)
                          : Value(memref::LoadOp::create(b, source, at));
    memref::StoreOp::create(b, x, rows, ValueRange{r, c});
  });
  Value zero = arith::ConstantOp::create(b, b.getZeroAttr(elem));
  for (int64_t c = width; c < pad; ++c)
    memref::StoreOp::create(b, zero, rows, ValueRange{r, cst(c)});
}

Value KeyBlockEmitter::loadRowF32(Value rows, Value r, Value c) {
  Type elem = cast<MemRefType>(rows.getType()).getElementType();
  return widenToF32(vector::LoadOp::create(b, VectorType::get({lanes}, elem),
                                           rows, ValueRange{r, c}));
}

void KeyBlockEmitter::packBlockT(Value source, Value batch, Value kvHead,
                                 const KeyBlock &block, Value blockT,
                                 int64_t width,
                                 function_ref<void(Value, Value, Value)> each) {
  auto elementwise = [&] {
    zeroBuffer(blockT);
    packBlockTElementwise(source, batch, kvHead, block, blockT, width, each);
  };
  if (!transposesInRegisters() || each)
    return elementwise();
  ifUnitStride(
      source,
      [&](Value rows) {
        transposeBlock(rows, batch, kvHead, block, blockT, width);
      },
      elementwise);
}

void KeyBlockEmitter::transposeBlock(Value rows, Value batch, Value kvHead,
                                     const KeyBlock &block, Value blockT,
                                     int64_t width) {
  zeroBuffer(blockT);
  transposeRows(rows, {batch, kvHead}, block.start, block.count, width, blockT,
                /*zeroPast=*/true);
}

bool KeyBlockEmitter::transposesInRegisters() const {
  // 16 x 16 register transposes where the rows have unit stride (of 32-bit
  // words: bf16 pairs, or f32): element by element they were 6-7 % of a
  // bf16 backward (attn-bench --compare, D = 128 causal, S = 1024: 1.045x).
  // f32 takes them since they are unpack shuffles (4ab0fbe): Zen 5, S =
  // 2048, 1.00-1.03x, and 1.06x where K and V come from memory (Sq = 16,
  // Sk = 8192; the transposes that vector.transpose became were 0.8x
  // there, LLVM's scatters of the element loop reading the rows in order).
  return lanes == 16;
}

void KeyBlockEmitter::zeroBuffer(Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  zeroRows(buffer, cst(0), cst(type.getDimSize(0)), type.getDimSize(1));
}

void KeyBlockEmitter::packBlockTElementwise(
    Value source, Value batch, Value kvHead, const KeyBlock &block,
    Value blockT, int64_t width, function_ref<void(Value, Value, Value)> each) {
  bool pairs = cast<MemRefType>(blockT.getType()).getElementType().isBF16();
  forLoop(cst(0), block.count, cst(1), [&](Value k) {
    Value at = arith::AddIOp::create(b, block.start, k);
    if (!pairs) {
      forLoop(cst(0), cst(width), cst(1), [&](Value c) {
        Value x = loadF32(source, {batch, kvHead, at, c});
        memref::StoreOp::create(b, x, blockT, ValueRange{c, k});
        if (each)
          each(k, c, x);
      });
      return;
    }
    // Columns 2p and 2p + 1 of key k at [p][2k] and [p][2k + 1]; an odd
    // width's last pair keeps its zero half.
    Value even = arith::MulIOp::create(b, k, cst(2));
    Value odd = arith::AddIOp::create(b, even, cst(1));
    auto copy = [&](Value p, Value c, Value column) {
      Value x =
          memref::LoadOp::create(b, source, ValueRange{batch, kvHead, at, c});
      memref::StoreOp::create(b, x, blockT, ValueRange{p, column});
      if (each)
        each(k, c, x);
    };
    forLoop(cst(0), cst(width / 2), cst(1), [&](Value p) {
      Value c = arith::MulIOp::create(b, p, cst(2));
      copy(p, c, even);
      copy(p, arith::AddIOp::create(b, c, cst(1)), odd);
    });
    if (width % 2)
      copy(cst(width / 2), cst(width - 1), even);
  });
}

void KeyBlockEmitter::packKeys(Value batch, Value kvHead, const KeyBlock &block,
                               Value keyRows) {
  if (!keyRows)
    return packBlockT(key, batch, kvHead, block, keysT, headDim);
  // Rows of finite K as each element is packed: f32 [k][c], or pairs of
  // keys, key k's column c at [k/2][2c + k%2].
  bool pairs = cast<MemRefType>(keyRows.getType()).getElementType().isBF16();
  zeroBuffer(keyRows);
  auto elementwise = [&] {
    packBlockT(key, batch, kvHead, block, keysT, headDim,
               [&](Value k, Value c, Value x) {
                 Value finite = finiteOrZero(
                     pairs ? Value(arith::ExtFOp::create(b, f32, x)) : x);
                 if (!pairs)
                   return storeAs(finite, keyRows, {k, c});
                 Value column = arith::AddIOp::create(
                     b, arith::MulIOp::create(b, c, cst(2)),
                     arith::RemUIOp::create(b, k, cst(2)));
                 storeAs(finite, keyRows,
                         {arith::DivUIOp::create(b, k, cst(2)), column});
               });
  };
  if (!pairs || !transposesInRegisters())
    return elementwise();
  ifUnitStride(
      key,
      [&](Value rows) {
        transposeBlock(rows, batch, kvHead, block, keysT, headDim);
        pairKeyRows(rows, batch, kvHead, block, keyRows);
      },
      elementwise);
}

void KeyBlockEmitter::pairKeyRows(Value rows, Value batch, Value kvHead,
                                  const KeyBlock &block, Value keyRows) {
  // Keys 2m and 2m + 1 interleaved, 16 columns of each a step (an odd
  // count's last pair ends in 0).
  auto chunkType = VectorType::get({lanes}, b.getBF16Type());
  Value zero = arith::ConstantOp::create(
      b, DenseElementsAttr::get(chunkType, b.getZeroAttr(b.getBF16Type())));
  auto chunkOf = [&](Value k, int64_t c) {
    return loadRawChunk(
        rows, {batch, kvHead, arith::AddIOp::create(b, block.start, k)}, c,
        headDim, lanes);
  };
  Value pairCount = arith::DivUIOp::create(
      b, arith::AddIOp::create(b, block.count, cst(1)), cst(2));
  forLoop(cst(0), pairCount, cst(1), [&](Value m) {
    Value even = arith::MulIOp::create(b, m, cst(2));
    Value odd = arith::AddIOp::create(b, even, cst(1));
    Value hasOdd =
        arith::CmpIOp::create(b, arith::CmpIPredicate::slt, odd, block.count);
    Value oddKey = arith::SelectOp::create(b, hasOdd, odd, even);
    for (int64_t c = 0; c < headPad; c += lanes) {
      Value second =
          arith::SelectOp::create(b, hasOdd, chunkOf(oddKey, c), zero);
      Value pair = vector::InterleaveOp::create(b, chunkOf(even, c), second);
      vector::StoreOp::create(b, finiteOrZeroBf16(pair), keyRows,
                              ValueRange{m, cst(2 * c)});
    }
  });
}

void KeyBlockEmitter::forRowBlocks(Value lo, Value hi,
                                   function_ref<void(Value, int64_t)> body) {
  SmallVector<int64_t> sizes = {rowBlock};
  if (rowBlock > kRows)
    sizes.push_back(kRows);
  sizes.push_back(1);
  forBlocks(lo, hi, sizes, body);
}

std::pair<Value, Value> KeyBlockEmitter::rowsSeeing(const KeyBlock &block,
                                                    Value rows) {
  if (!diagonal)
    return {cst(0), rows};
  // Row i sees key j iff j − d − right <= i <= j − d + left.
  Value lo = cst(0), hi = rows;
  Value first = arith::SubIOp::create(b, block.start, diagonal);
  Value last = arith::SubIOp::create(
      b, arith::AddIOp::create(b, first, block.count), cst(1));
  if (right)
    lo = arith::MaxSIOp::create(b, lo,
                                arith::SubIOp::create(b, first, cst(*right)));
  if (left)
    hi = arith::MinSIOp::create(b, hi,
                                arith::AddIOp::create(b, last, cst(*left + 1)));
  hi = arith::MaxSIOp::create(b, hi, lo);
  return {arith::MinSIOp::create(b, lo, rows),
          arith::MinSIOp::create(b, hi, rows)};
}

Value KeyBlockEmitter::maskIndex(int64_t dimIndex, Value index) {
  Value broadcast = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                          dim(mask, dimIndex), cst(1));
  return arith::SelectOp::create(b, broadcast, cst(0), index);
}

void KeyBlockEmitter::loadMask(Value batch, const KeyBlock &block, Value head,
                               Value firstRow, int64_t rowCount) {
  auto type = cast<MemRefType>(mask.getType());
  bool isBias = !type.getElementType().isInteger(1);
  Value mb = maskIndex(0, batch), mh = maskIndex(1, head);
  Value one = splat(f32Const(1.0f)), zero = zeroVector();
  // A bias element is kept unless it is −inf; NaN != −inf: a NaN bias is
  // kept, and makes its score NaN.
  auto keptBias = [&](Value x) -> Value {
    Value notExcluded = arith::CmpFOp::create(b, arith::CmpFPredicate::ONE, x,
                                              isa<VectorType>(x.getType())
                                                  ? splat(f32Const(-kInf))
                                                  : f32Const(-kInf));
    return arith::OrIOp::create(
        b, notExcluded,
        arith::CmpFOp::create(b, arith::CmpFPredicate::UNO, x, x));
  };
  // Unit-stride rows (as the runtime passes masks): a vector of the block's
  // keys a load, a keep mask's bytes or a bias's elements, keys past the
  // block's count not read (0 there: `allowed` drops them).
  auto vectors = [&](Value view) {
    auto chunkType = VectorType::get({lanes}, type.getElementType());
    Value zeroChunk =
        isBias ? arith::ConstantOp::create(b, b.getZeroAttr(chunkType))
               : Value();
    for (int64_t r = 0; r < rowCount; ++r) {
      Value mi = maskIndex(2, arith::AddIOp::create(b, firstRow, cst(r)));
      for (int64_t v = 0; v < keyVectors; ++v) {
        Value key = arith::AddIOp::create(b, block.start, cst(v * lanes));
        Value live = vector::CreateMaskOp::create(
            b, maskVecType,
            ValueRange{arith::SubIOp::create(b, block.count, cst(v * lanes))});
        SmallVector<Value> at = {mb, mh, mi, key};
        Value kept;
        if (isBias) {
          Value x = widenToF32(vector::MaskedLoadOp::create(
              b, chunkType, view, at, live, zeroChunk));
          storeVector(x, bias, {cst(r), cst(v * lanes)});
          kept = keptBias(x);
        } else {
          kept = loadKeepBits(view, at, live);
        }
        storeVector(arith::SelectOp::create(b, kept, one, zero), keep,
                    {cst(r), cst(v * lanes)});
      }
    }
  };
  // Otherwise element by element.
  auto elements = [&] {
    for (int64_t r = 0; r < rowCount; ++r) {
      for (int64_t c = 0; c < kBlockKeys; c += lanes) {
        storeVector(zero, keep, {cst(r), cst(c)});
        if (bias)
          storeVector(zero, bias, {cst(r), cst(c)});
      }
      Value mi = maskIndex(2, arith::AddIOp::create(b, firstRow, cst(r)));
      forLoop(cst(0), block.count, cst(1), [&](Value k) {
        Value at = arith::AddIOp::create(b, block.start, k);
        Value kept;
        if (isBias) {
          Value x = loadF32(mask, {mb, mh, mi, at});
          kept = keptBias(x);
          memref::StoreOp::create(b, x, bias, ValueRange{cst(r), k});
        } else {
          kept = memref::LoadOp::create(b, mask, ValueRange{mb, mh, mi, at});
        }
        memref::StoreOp::create(
            b, arith::SelectOp::create(b, kept, f32Const(1.0f), f32Const(0.0f)),
            keep, ValueRange{cst(r), k});
      });
    }
  };
  ifUnitStride(mask, vectors, elements);
}

Value KeyBlockEmitter::allowed(const KeyBlock &block, Value row, int64_t r,
                               int64_t v) {
  // Lane l stands for key start + v·lanes + l.
  SmallVector<int32_t> iota;
  for (int64_t l = 0; l < lanes; ++l)
    iota.push_back(static_cast<int32_t>(v * lanes + l));
  Value local = arith::ConstantOp::create(
      b, DenseElementsAttr::get(idxVecType, ArrayRef<int32_t>(iota)));
  Value live =
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, local,
                            splat(clampToI32(block.count, 0, kBlockKeys)));
  if (diagonal) {
    // rel = row + d − start: the row's diagonal key in block coordinates.
    Value rel = arith::SubIOp::create(
        b, arith::AddIOp::create(b, row, diagonal), block.start);
    if (left) {
      Value from = arith::SubIOp::create(b, rel, cst(*left));
      live = arith::AndIOp::create(
          b, live,
          arith::CmpIOp::create(b, arith::CmpIPredicate::sge, local,
                                splat(clampToI32(from, -1, kBlockKeys + 1))));
    }
    if (right) {
      Value to = arith::AddIOp::create(b, rel, cst(*right));
      live = arith::AndIOp::create(
          b, live,
          arith::CmpIOp::create(b, arith::CmpIPredicate::sle, local,
                                splat(clampToI32(to, -1, kBlockKeys + 1))));
    }
  }
  if (keep) {
    Value bits = loadVector(keep, {cst(r), cst(v * lanes)});
    live = arith::AndIOp::create(
        b, live,
        arith::CmpFOp::create(b, arith::CmpFPredicate::ONE, bits,
                              zeroVector()));
  }
  return live;
}

Value KeyBlockEmitter::loadRowBlock(Value batch, const KeyBlock &block,
                                    Value head, Value firstRow,
                                    int64_t rowCount) {
  if (mask)
    loadMask(batch, block, head, firstRow, rowCount);
  if (!modifiers.hasScoreMod() && !modifiers.hasMaskMod())
    return Value();
  Location loc = b.getLoc();
  globalBatch = globalIndex(b, loc, origin, 0, batch);
  globalHead = globalIndex(b, loc, origin, 1, head);
  globalFirstRow = globalIndex(b, loc, origin, 2, firstRow);
  globalFirstKey = globalIndex(b, loc, origin, 3, block.start);
  if (!modifiers.hasMaskMod())
    return Value();
  // keep = (the mask's keep bit, 1 without a mask) where the mask_mod keeps.
  Value one = splat(f32Const(1.0f)), zero = zeroVector(), any;
  for (int64_t r = 0; r < rowCount; ++r)
    for (int64_t v = 0; v < keyVectors; ++v) {
      Value kept = modifiers.keep(globalIndices(r, v), lanes);
      Value bits = mask ? loadVector(keep, {cst(r), cst(v * lanes)}) : one;
      storeVector(arith::SelectOp::create(b, kept, bits, zero), keep,
                  {cst(r), cst(v * lanes)});
      any = any ? arith::OrIOp::create(b, any, kept).getResult() : kept;
    }
  return vector::ReductionOp::create(b, vector::CombiningKind::OR, any);
}

void KeyBlockEmitter::prefetchRowBlock(Value batch, const KeyBlock &block,
                                       Value head, Value firstRow,
                                       int64_t rowCount, Value rows) {
  bool modified = modifiers.hasScoreMod() || modifiers.hasMaskMod();
  if (!mask && !modified)
    return;
  Value lastRow = arith::SubIOp::create(b, rows, cst(1));
  auto rowAt = [&](int64_t r) -> Value {
    return arith::MinSIOp::create(b, arith::AddIOp::create(b, firstRow, cst(r)),
                                  lastRow);
  };
  if (mask) {
    Value mb = maskIndex(0, batch), mh = maskIndex(1, head);
    for (int64_t r = 0; r < rowCount; ++r)
      prefetchRun(mask, {mb, mh, maskIndex(2, rowAt(r))}, block.start,
                  kBlockKeys);
  }
  if (!modified)
    return;
  auto global = [&](unsigned dim, Value local) {
    return globalIndex(b, b.getLoc(), origin, dim, local);
  };
  Value gb = global(0, batch), gh = global(1, head);
  Value firstKey = global(3, block.start);
  for (int64_t r = 0; r < rowCount; ++r)
    modifiers.prefetchReads(
        globalIndicesAt(gb, gh, global(2, rowAt(r)), firstKey, 0), lanes,
        kBlockKeys);
}

SmallVector<Value> KeyBlockEmitter::globalIndices(int64_t r, int64_t v) {
  Value row = arith::AddIOp::create(
      b, globalFirstRow,
      arith::ConstantOp::create(b,
                                b.getI32IntegerAttr(static_cast<int32_t>(r))));
  return globalIndicesAt(globalBatch, globalHead, row, globalFirstKey, v);
}

SmallVector<Value> KeyBlockEmitter::globalIndicesAt(Value batch, Value head,
                                                    Value row, Value firstKey,
                                                    int64_t v) {
  SmallVector<int32_t> iota;
  for (int64_t l = 0; l < lanes; ++l)
    iota.push_back(static_cast<int32_t>(v * lanes + l));
  Value keys = arith::AddIOp::create(
      b, splat(firstKey),
      arith::ConstantOp::create(
          b, DenseElementsAttr::get(idxVecType, ArrayRef<int32_t>(iota))));
  return {batch, head, row, keys};
}

Value KeyBlockEmitter::finalScore(Value score, int64_t r, int64_t v,
                                  Value capDerivative, Value modDerivative,
                                  Value modInput) {
  Value s = arith::MulFOp::create(
      b, score, splat(f32Const(static_cast<float>(math.scoreScale()))));
  if (math.hasSoftcap()) {
    s = math.softcap(s);
    if (capDerivative) {
      Value t = arith::MulFOp::create(
          b, s, splat(f32Const(static_cast<float>(1.0 / math.softcapValue()))));
      Value derivative = arith::SubFOp::create(
          b, splat(f32Const(1.0f)), arith::MulFOp::create(b, t, t));
      storeVector(derivative, capDerivative, {cst(r), cst(v * lanes)});
    }
  }
  if (bias)
    s = arith::AddFOp::create(b, s, loadVector(bias, {cst(r), cst(v * lanes)}));
  if (modifiers.hasScoreMod()) {
    if (modInput)
      storeVector(s, modInput, {cst(r), cst(v * lanes)});
    Value derivative;
    s = modifiers.score(s, globalIndices(r, v),
                        modDerivative ? &derivative : nullptr);
    if (modDerivative)
      storeVector(derivative, modDerivative, {cst(r), cst(v * lanes)});
  }
  return s;
}

SmallVector<Value> KeyBlockEmitter::dropoutFactors(Value batch, Value head,
                                                   ArrayRef<Value> rows,
                                                   const KeyBlock &block) {
  auto global = [&](unsigned dim, Value local) {
    return globalIndex(b, b.getLoc(), origin, dim, local);
  };
  SmallVector<Value> heads(rows.size(), global(1, head)), globalRows;
  for (Value row : rows)
    globalRows.push_back(global(2, row));
  SmallVector<Value> factors;
  for (Value kept : dropoutKeepVectors(
           b, b.getLoc(), dropoutSeed, dropThreshold, global(0, batch), heads,
           globalRows, global(3, block.start), lanes, keyVectors))
    factors.push_back(arith::SelectOp::create(b, kept, dropKept, zeroVector()));
  return factors;
}

Value KeyBlockEmitter::seenKeyVectors(const KeyBlock &block, Value firstRow,
                                      int64_t count) {
  if (!diagonal || !right)
    return Value();
  // The last row's last key in block coordinates: row + d + right − start.
  Value last = arith::SubIOp::create(
      b,
      arith::AddIOp::create(
          b, arith::AddIOp::create(b, firstRow, cst(count - 1 + *right)),
          diagonal),
      block.start);
  Value vectors = arith::AddIOp::create(
      b,
      arith::DivUIOp::create(b, arith::MaxSIOp::create(b, last, cst(0)),
                             cst(lanes)),
      cst(1));
  return arith::MinSIOp::create(b, vectors, cst(keyVectors));
}

void KeyBlockEmitter::rowsTimesBlock(
    Value rows, Value blockT, int64_t width, ArrayRef<Value> rowAt,
    function_ref<void(int64_t, ArrayRef<Value>)> use,
    function_ref<Value(int64_t, int64_t)> seenVectors) {
  // kRows x keyVectors accumulators fill half of AVX-512's registers: more
  // rows take more passes over the block. On AVX2 a row tile takes passes
  // of `slice` key vectors (4 rows x 2 vectors: tileAccumulators).
  bool pairs = cast<MemRefType>(blockT.getType()).getElementType().isBF16();
  int64_t slice = tileScores ? tileAccumulators(lanes) / kRows : keyVectors;
  for (size_t first = 0; first < rowAt.size(); first += kRows) {
    ArrayRef<Value> tileRows =
        rowAt.slice(first, std::min<size_t>(kRows, rowAt.size() - first));
    // The first key of key vector v0 + v.
    auto keyOf = [&](Value v0, int64_t v) -> Value {
      return arith::MulIOp::create(b, arith::AddIOp::create(b, v0, cst(v)),
                                   cst(lanes));
    };
    // Key vectors [v0, v0 + count) of the tile's rows (r-major).
    auto sliceOfTile = [&](Value v0, int64_t count) {
      SmallVector<Value> zeros(tileRows.size() * count, zeroVector());
      return forLoopWith(
          cst(0), cst(pairs ? llvm::divideCeil(width, 2) : width), cst(1),
          zeros, [&](Value c, ValueRange acc) -> SmallVector<Value> {
            SmallVector<Value> columns, next;
            for (int64_t v = 0; v < count; ++v) {
              Value key = keyOf(v0, v);
              columns.push_back(
                  pairs ? loadPairs(blockT,
                                    {c, arith::MulIOp::create(b, key, cst(2))})
                        : loadVector(blockT, {c, key}));
            }
            Value pairColumn = arith::MulIOp::create(b, c, cst(2));
            for (auto [r, at] : llvm::enumerate(tileRows)) {
              Value x = pairs ? broadcastPairAt(rows, {at, pairColumn})
                              : splat(memref::LoadOp::create(
                                    b, rows, ValueRange{at, c}));
              for (int64_t v = 0; v < count; ++v) {
                Value sum = acc[r * count + v];
                next.push_back(pairs ? Value(x86vector::DotBF16Op::create(
                                           b, sum, x, columns[v]))
                                     : fma(x, columns[v], sum));
              }
            }
            return next;
          });
    };
    Value seen = seenVectors ? seenVectors(first, tileRows.size()) : Value();
    if (slice >= keyVectors && !seen) {
      use(first, sliceOfTile(cst(0), keyVectors));
      continue;
    }
    if (slice >= keyVectors) {
      // On a band's edge, the vectors the rows see (a case each count),
      // the others 0: their lanes are excluded for every row of the tile.
      SmallVector<Type> types(tileRows.size() * keyVectors, vecType);
      SmallVector<int64_t> counts;
      for (int64_t n = 1; n < keyVectors; ++n)
        counts.push_back(n);
      auto seenSwitch =
          scf::IndexSwitchOp::create(b, types, seen, counts, counts.size());
      auto emitCase = [&](Region &region, int64_t count) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(&region.emplaceBlock());
        SmallVector<Value> part = sliceOfTile(cst(0), count), tile;
        for (size_t r = 0; r < tileRows.size(); ++r)
          for (int64_t v = 0; v < keyVectors; ++v)
            tile.push_back(v < count ? part[r * count + v] : zeroVector());
        scf::YieldOp::create(b, tile);
      };
      for (auto [i, count] : llvm::enumerate(counts))
        emitCase(seenSwitch.getCaseRegions()[i], count);
      emitCase(seenSwitch.getDefaultRegion(), keyVectors);
      SmallVector<Value> tile(seenSwitch.getResults());
      use(first, tile);
      continue;
    }
    // A loop over the slices, not one copy each: from stores at constant
    // places LLVM forwarded the slices' sums to the loads below, which kept
    // them live through the later slices' loops (spilled there).
    assert(keyVectors % slice == 0 && "slices of a row tile are whole");
    forLoop(cst(0), cst(keyVectors), cst(slice), [&](Value v0) {
      SmallVector<Value> part = sliceOfTile(v0, slice);
      for (int64_t r = 0; r < static_cast<int64_t>(tileRows.size()); ++r)
        for (int64_t v = 0; v < slice; ++v)
          storeVector(part[r * slice + v], tileScores, {cst(r), keyOf(v0, v)});
    });
    SmallVector<Value> tile;
    for (int64_t r = 0; r < static_cast<int64_t>(tileRows.size()); ++r)
      for (int64_t v = 0; v < keyVectors; ++v)
        tile.push_back(loadVector(tileScores, {cst(r), cst(v * lanes)}));
    use(first, tile);
  }
}
