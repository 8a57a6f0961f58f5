//===- VectorEmitter.cpp - Vector builders of the CPU micro-kernels -------===//
#include "lib/Transforms/Cpu/VectorEmitter.h"
#include "lib/Transforms/Modifiers.h"

#include "lib/Transforms/Passes.h"
#include "lib/Transforms/Views.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

VectorEmitter::VectorEmitter(ImplicitLocOpBuilder &b, int64_t lanes)
    : b(b), lanes(lanes), f32(b.getF32Type()),
      vecType(VectorType::get({lanes}, f32)),
      maskVecType(VectorType::get({lanes}, b.getI1Type())),
      idxVecType(VectorType::get({lanes}, b.getI32Type())) {}

Value VectorEmitter::cst(int64_t v) {
  return arith::ConstantIndexOp::create(b, v);
}

Value VectorEmitter::f32Const(float v) {
  return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
}

Value VectorEmitter::splat(Value scalar) {
  return vector::BroadcastOp::create(
      b, VectorType::get({lanes}, scalar.getType()), scalar);
}

Value VectorEmitter::dim(Value memref, int64_t index) {
  return memref::DimOp::create(b, memref, index);
}

Value VectorEmitter::loadF32(Value memref, ValueRange indices) {
  Value v = memref::LoadOp::create(b, memref, indices);
  if (v.getType() != f32)
    v = arith::ExtFOp::create(b, f32, v);
  return v;
}

void VectorEmitter::forLoop(Value lb, Value ub, Value step,
                            function_ref<void(Value)> body) {
  auto loop = scf::ForOp::create(b, lb, ub, step);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  body(loop.getInductionVar());
}

void VectorEmitter::zeroRows(Value buffer, Value from, Value to, int64_t cols) {
  // A vector's width of 32-bit words a store: lanes f32, 2·lanes bf16.
  Type elem = cast<MemRefType>(buffer.getType()).getElementType();
  int64_t step = lanes * 32 / elem.getIntOrFloatBitWidth();
  auto type = VectorType::get({step}, elem);
  Value zero = arith::ConstantOp::create(
      b, DenseElementsAttr::get(type, b.getZeroAttr(elem)));
  forLoop(from, to, cst(1), [&](Value r) {
    for (int64_t c = 0; c < cols; c += step)
      vector::StoreOp::create(b, zero, buffer, ValueRange{r, cst(c)});
  });
}

SmallVector<Value> VectorEmitter::forLoopWith(
    Value lb, Value ub, Value step, ValueRange inits,
    function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  auto loop = scf::ForOp::create(b, lb, ub, step, inits);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    SmallVector<Value> next =
        body(loop.getInductionVar(), loop.getRegionIterArgs());
    scf::YieldOp::create(b, next);
  }
  // The builder's default terminator is replaced by ours.
  return SmallVector<Value>(loop.getResults());
}

Value VectorEmitter::heapBuffer(ArrayRef<int64_t> shape,
                                ValueRange dynamicSizes) {
  return memref::AllocOp::create(b, MemRefType::get(shape, f32), dynamicSizes,
                                 b.getI64IntegerAttr(64));
}

void VectorEmitter::forBlocks(Value lo, Value hi, ArrayRef<int64_t> sizes,
                              function_ref<void(Value, int64_t)> body) {
  for (int64_t size : sizes) {
    Value whole = hi;
    if (size > 1) {
      Value count = arith::SubIOp::create(b, hi, lo);
      whole = arith::AddIOp::create(
          b, lo,
          arith::MulIOp::create(b, arith::DivUIOp::create(b, count, cst(size)),
                                cst(size)));
    }
    forLoop(lo, whole, cst(size), [&](Value first) { body(first, size); });
    lo = whole;
  }
}

Value VectorEmitter::horizontalSum(Value vec) {
  return vector::ReductionOp::create(b, vector::CombiningKind::ADD, vec,
                                     arith::FastMathFlags::reassoc);
}

Value VectorEmitter::clampToI32(Value index, int64_t lo, int64_t hi) {
  Value clamped = arith::MaxSIOp::create(b, index, cst(lo));
  clamped = arith::MinSIOp::create(b, clamped, cst(hi));
  return arith::IndexCastOp::create(b, b.getI32Type(), clamped);
}

void VectorEmitter::ifOdd(Value count, function_ref<void()> body) {
  Value odd =
      arith::CmpIOp::create(b, arith::CmpIPredicate::ne,
                            arith::RemUIOp::create(b, count, cst(2)), cst(0));
  auto op = scf::IfOp::create(b, odd);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(op.thenBlock()->getTerminator());
  body();
}

void VectorEmitter::eachChunk(int64_t width,
                              function_ref<void(Value, int64_t)> body,
                              int64_t chunk) {
  if (chunk == 0)
    chunk = lanes;
  int64_t whole = width / chunk * chunk;
  if (whole > 0)
    forLoop(cst(0), cst(whole), cst(chunk), [&](Value c0) { body(c0, chunk); });
  if (whole < width)
    body(cst(whole), width - whole);
}

void VectorEmitter::ifUnitStride(Value memref, function_ref<void(Value)> fast,
                                 function_ref<void()> slow) {
  Value unit = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                     innerStride(memref), cst(1));
  auto choice = scf::IfOp::create(b, unit, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(choice.thenBlock()->getTerminator());
  fast(unitStrideRows(memref));
  b.setInsertionPoint(choice.elseBlock()->getTerminator());
  slow();
}

void VectorEmitter::prefetchRun(Value memref, ArrayRef<Value> rowIndex,
                                Value first, int64_t elements) {
  auto type = cast<MemRefType>(memref.getType());
  Value last =
      arith::SubIOp::create(b, dim(memref, type.getRank() - 1), cst(1));
  prefetchRunLines(
      b, b.getLoc(), memref, rowIndex, first, elements,
      [&](Value key) -> Value { return arith::MinSIOp::create(b, key, last); });
}

Value VectorEmitter::elementAddress(Value rowsView, ValueRange at) {
  auto meta = memref::ExtractStridedMetadataOp::create(b, rowsView);
  Value offset = meta.getOffset();
  for (auto [index, stride] : llvm::zip(at.drop_back(), meta.getStrides()))
    offset = arith::AddIOp::create(b, offset,
                                   arith::MulIOp::create(b, index, stride));
  offset = arith::AddIOp::create(b, offset, at.back());
  int64_t bytes = std::max<int64_t>(
      1, cast<MemRefType>(rowsView.getType()).getElementTypeBitWidth() / 8);
  if (bytes > 1)
    offset = arith::MulIOp::create(b, offset, cst(bytes));
  return arith::AddIOp::create(
      b, memref::ExtractAlignedPointerAsIndexOp::create(b, rowsView), offset);
}

Value VectorEmitter::loadKeepBits(Value rowsView, ValueRange at, Value live) {
  Value address = elementAddress(rowsView, at);
  Value pointer = LLVM::IntToPtrOp::create(
      b, LLVM::LLVMPointerType::get(b.getContext()),
      arith::IndexCastOp::create(b, b.getI64Type(), address),
      /*dereferenceable=*/nullptr);
  auto byteType = VectorType::get({lanes}, b.getI8Type());
  Value zeroBytes = arith::ConstantOp::create(b, b.getZeroAttr(byteType));
  Value bytes = LLVM::MaskedLoadOp::create(b, byteType, pointer, live,
                                           zeroBytes, b.getI32IntegerAttr(1),
                                           /*nontemporal=*/nullptr);
  return arith::CmpIOp::create(b, arith::CmpIPredicate::ne, bytes, zeroBytes);
}

Value VectorEmitter::innerStride(Value memref) {
  return memref::ExtractStridedMetadataOp::create(b, memref)
      .getStrides()
      .back();
}

Value VectorEmitter::unitStrideRows(Value memref) {
  return unitInnerStrideView(b, b.getLoc(), memref);
}

SmallVector<Value>
VectorEmitter::broadcastProduct(Value lo, Value hi, int64_t rows,
                                function_ref<Value(int64_t, Value)> left,
                                Value right, Value col, ValueRange acc) {
  int64_t n = acc.size() / rows;
  return forLoopWith(lo, hi, cst(1), acc, [&](Value k, ValueRange carried) {
    SmallVector<Value> next(carried.begin(), carried.end());
    SmallVector<Value> columns;
    for (int64_t v = 0; v < n; ++v)
      columns.push_back(vector::LoadOp::create(
          b, vecType, right,
          ValueRange{k, arith::AddIOp::create(b, col, cst(v * lanes))}));
    for (int64_t r = 0; r < rows; ++r) {
      Value scalar = splat(left(r, k));
      for (int64_t v = 0; v < n; ++v)
        next[r * n + v] =
            vector::FMAOp::create(b, scalar, columns[v], next[r * n + v]);
    }
    return next;
  });
}

void VectorEmitter::storeRowAs(Value memref, ValueRange rowIndex,
                               ArrayRef<Value> vectors, int64_t width,
                               Value rowBuffer) {
  Type elem = cast<MemRefType>(memref.getType()).getElementType();
  auto narrow = [&](Value v) -> Value {
    if (elem == f32)
      return v;
    return arith::TruncFOp::create(b, VectorType::get({lanes}, elem), v);
  };
  SmallVector<Value, 4> at(rowIndex.begin(), rowIndex.end());
  at.push_back(Value());
  ifUnitStride(
      memref,
      [&](Value view) {
        for (auto [i, v] : llvm::enumerate(vectors)) {
          int64_t col = int64_t(i) * lanes;
          int64_t live = std::min<int64_t>(lanes, width - col);
          if (live <= 0)
            break;
          at.back() = cst(col);
          if (live == lanes)
            vector::StoreOp::create(b, narrow(v), view, at);
          else
            vector::MaskedStoreOp::create(b, view, at, liveLanes(live),
                                          narrow(v));
        }
      },
      [&] {
        for (auto [i, v] : llvm::enumerate(vectors))
          vector::StoreOp::create(b, v, rowBuffer,
                                  ValueRange{cst(int64_t(i) * lanes)});
        forLoop(cst(0), cst(width), cst(1), [&](Value c) {
          Value x = memref::LoadOp::create(b, rowBuffer, ValueRange{c});
          if (elem != f32)
            x = arith::TruncFOp::create(b, elem, x);
          at.back() = c;
          memref::StoreOp::create(b, x, memref, at);
        });
      });
}

Value VectorEmitter::liveLanes(int64_t live) {
  return vector::ConstantMaskOp::create(b, maskVecType,
                                        ArrayRef<int64_t>{live});
}

Value VectorEmitter::widenToF32(Value v) {
  return isa<Float32Type>(getElementTypeOrSelf(v))
             ? v
             : Value(arith::ExtFOp::create(b, vecType, v));
}

Value VectorEmitter::loadRawChunk(Value rowsMemref, ValueRange rowIndex,
                                  int64_t col, int64_t limit, int64_t width) {
  return loadRawChunkAt(rowsMemref, rowIndex, cst(col), limit - col, width);
}

/// The elements of a row of `rowsMemref` from column `col` where `mask`
/// (i1 lanes, as many as read) is set, 0 elsewhere.
static Value maskedChunk(ImplicitLocOpBuilder &b, Value rowsMemref,
                         ValueRange rowIndex, Value col, Value mask) {
  Type elem = cast<MemRefType>(rowsMemref.getType()).getElementType();
  auto type =
      VectorType::get(cast<VectorType>(mask.getType()).getShape(), elem);
  SmallVector<Value, 4> at(rowIndex.begin(), rowIndex.end());
  at.push_back(col);
  Value pass = vector::BroadcastOp::create(
      b, type, arith::ConstantOp::create(b, b.getZeroAttr(elem)));
  return vector::MaskedLoadOp::create(b, type, rowsMemref, at, mask, pass);
}

Value VectorEmitter::loadRawChunkAt(Value rowsMemref, ValueRange rowIndex,
                                    Value col, int64_t live, int64_t width) {
  auto maskType = VectorType::get({width}, b.getI1Type());
  if (live < width)
    return maskedChunk(
        b, rowsMemref, rowIndex, col,
        vector::ConstantMaskOp::create(b, maskType, ArrayRef<int64_t>{live}));
  Type elem = cast<MemRefType>(rowsMemref.getType()).getElementType();
  SmallVector<Value, 4> at(rowIndex.begin(), rowIndex.end());
  at.push_back(col);
  return vector::LoadOp::create(b, VectorType::get({width}, elem), rowsMemref,
                                at);
}

Value VectorEmitter::loadRawChunkAt(Value rowsMemref, ValueRange rowIndex,
                                    Value col, Value live, int64_t width) {
  return maskedChunk(
      b, rowsMemref, rowIndex, col,
      vector::CreateMaskOp::create(b, VectorType::get({width}, b.getI1Type()),
                                   ValueRange{live}));
}

Value VectorEmitter::loadRawChunkWhere(Value rowsMemref, ValueRange rowIndex,
                                       Value col, Value mask) {
  return maskedChunk(b, rowsMemref, rowIndex, col, mask);
}

Value VectorEmitter::loadRowChunk(Value rowsMemref, ValueRange rowIndex,
                                  int64_t col, int64_t limit) {
  return widenToF32(loadRawChunk(rowsMemref, rowIndex, col, limit, lanes));
}

Value VectorEmitter::loadChunkF32(Value rowsView, ArrayRef<Value> at,
                                  int64_t columns) {
  return widenToF32(
      loadRawChunkAt(rowsView, at.drop_back(), at.back(), columns, lanes));
}

void VectorEmitter::prefetchRow(Value rowsMemref, ValueRange rowIndex,
                                int64_t size) {
  int64_t bytes = llvm::divideCeil(
      cast<MemRefType>(rowsMemref.getType()).getElementTypeBitWidth(), 8);
  int64_t lineElems = std::max<int64_t>(1, 64 / bytes);
  SmallVector<Value, 4> at(rowIndex.begin(), rowIndex.end());
  at.push_back(Value());
  for (int64_t col = 0; col < size + lineElems - 1; col += lineElems) {
    at.back() = cst(std::min(col, size - 1));
    memref::PrefetchOp::create(b, rowsMemref, at, /*isWrite=*/false,
                               /*localityHint=*/2, /*isDataCache=*/true);
  }
}

SmallVector<Value> VectorEmitter::transposeTile(ArrayRef<Value> rows) {
  auto rowType = cast<VectorType>(rows.front().getType());
  Value zero = arith::ConstantOp::create(b, b.getZeroAttr(rowType));
  SmallVector<Value> level(rows.begin(), rows.end());
  level.resize(lanes, zero);
  // Widths that are not whole 128-bit lanes of 4 elements: one
  // vector.transpose (which the canonicalizer turns into element moves).
  if (lanes % 4 != 0) {
    auto tileType = VectorType::get({lanes, lanes}, rowType.getElementType());
    Value tile = arith::ConstantOp::create(b, b.getZeroAttr(tileType));
    for (auto [r, row] : llvm::enumerate(level))
      tile =
          vector::InsertOp::create(b, row, tile, ArrayRef<int64_t>{int64_t(r)});
    Value transposed = vector::TransposeOp::create(b, tile, {1, 0});
    SmallVector<Value> columns;
    for (int64_t c = 0; c < lanes; ++c)
      columns.push_back(
          vector::ExtractOp::create(b, transposed, ArrayRef<int64_t>{c}));
    return columns;
  }
  // Shuffles of two rows each, every one a single x86 instruction:
  // - unpcklps/unpckhps of rows 2k and 2k + 1, then unpcklpd/unpckhpd of
  //   those 2 apart: each 128-bit lane of vector 4g + i holds column
  //   4l + i of rows 4g..4g+3 (4 x 4 transposes inside the lanes);
  // - then the lanes themselves transposed (vshuff32x4 on AVX-512,
  //   vperm2f128 on AVX2): vectors j and j + s (j & s == 0, s = 4, 8, ...)
  //   give their even lanes to j and their odd lanes to j + s.
  // 64 shuffles for 16 x 16. (vector.transpose became 16 x 16 element
  // extracts and inserts, which LLVM rebuilt from vpermt2ps with constant
  // index vectors: a third of a masked lane-rows kernel's time.)
  int64_t n = lanes;
  auto withinLanes = [&](auto pick) {
    SmallVector<int64_t> mask;
    for (int64_t l = 0; l < n / 4; ++l)
      for (int64_t p = 0; p < 4; ++p)
        mask.push_back(pick(4 * l, p));
    return mask;
  };
  // Element p of a lane at `base`: unpack low/high of 32- and 64-bit words.
  SmallVector<int64_t> lo32 = withinLanes(
      [&](int64_t base, int64_t p) { return base + p / 2 + (p % 2) * n; });
  SmallVector<int64_t> hi32 = withinLanes(
      [&](int64_t base, int64_t p) { return base + 2 + p / 2 + (p % 2) * n; });
  SmallVector<int64_t> lo64 = withinLanes(
      [&](int64_t base, int64_t p) { return base + p % 2 + (p / 2) * n; });
  SmallVector<int64_t> hi64 = withinLanes(
      [&](int64_t base, int64_t p) { return base + 2 + p % 2 + (p / 2) * n; });
  auto shuffle = [&](Value x, Value y, ArrayRef<int64_t> mask) -> Value {
    return vector::ShuffleOp::create(b, x, y, mask);
  };
  auto pairs = [&](int64_t s, ArrayRef<int64_t> first,
                   ArrayRef<int64_t> second) {
    SmallVector<Value> next(n);
    for (int64_t j = 0; j < n; ++j)
      if ((j & s) == 0) {
        next[j] = shuffle(level[j], level[j + s], first);
        next[j + s] = shuffle(level[j], level[j + s], second);
      }
    level = next;
  };
  pairs(1, lo32, hi32);
  // unpcklpd/unpckhpd of vectors 4g + {0, 2} and 4g + {1, 3}.
  SmallVector<Value> next(n);
  for (int64_t g = 0; g < n; g += 4)
    for (int64_t i = 0; i < 2; ++i) {
      next[g + 2 * i] = shuffle(level[g + i], level[g + i + 2], lo64);
      next[g + 2 * i + 1] = shuffle(level[g + i], level[g + i + 2], hi64);
    }
  level = next;
  SmallVector<int64_t> evenLanes, oddLanes;
  for (int64_t half = 0; half < 2; ++half)
    for (int64_t l = 0; l < n / 4; l += 2)
      for (int64_t p = 0; p < 4; ++p) {
        evenLanes.push_back(half * n + 4 * l + p);
        oddLanes.push_back(half * n + 4 * (l + 1) + p);
      }
  for (int64_t s = 4; s < n; s *= 2)
    pairs(s, evenLanes, oddLanes);
  return level;
}

void VectorEmitter::transposeRows(Value rowsView, ValueRange prefix,
                                  Value start, Value count, int64_t width,
                                  Value target, bool zeroPast) {
  bool pairs = cast<MemRefType>(target.getType()).getElementType().isBF16();
  int64_t perWord = pairs ? 2 : 1;
  int64_t words = llvm::divideCeil(width, perWord);
  Value lastRow =
      arith::SubIOp::create(b, arith::AddIOp::create(b, start, count), cst(1));
  forLoop(cst(0), count, cst(lanes), [&](Value first) {
    Value firstRow = arith::AddIOp::create(b, start, first);
    Value column = pairs ? arith::MulIOp::create(b, first, cst(2)) : first;
    if (zeroPast) {
      // The next group's rows, while this one's are transposed (the tiles
      // read 16 rows a cache line each, which the hardware prefetcher
      // follows less well than rows read in order).
      for (int64_t r = 0; r < lanes; ++r) {
        SmallVector<Value, 4> index(prefix.begin(), prefix.end());
        index.push_back(arith::MinSIOp::create(
            b, arith::AddIOp::create(b, firstRow, cst(lanes + r)), lastRow));
        prefetchRow(rowsView, index, width);
      }
    }
    // The tile of words [w0, w0 + live), `elements` of each row from w0's
    // (a half pair at an odd end): `lanes` row loads, a register transpose,
    // `live` column stores.
    auto transposeWords = [&](Value w0, int64_t live, int64_t elements) {
      SmallVector<Value> tileRows;
      Value col = pairs ? arith::MulIOp::create(b, w0, cst(2)) : w0;
      for (int64_t r = 0; r < lanes; ++r) {
        Value rowIndex = arith::AddIOp::create(b, firstRow, cst(r));
        Value at = arith::MinSIOp::create(b, rowIndex, lastRow);
        SmallVector<Value, 4> index(prefix.begin(), prefix.end());
        index.push_back(at);
        Value row;
        if (!zeroPast) {
          row = loadRawChunkAt(rowsView, index, col, elements, lanes * perWord);
        } else {
          // A row past the count: no lane read.
          Value alive = arith::CmpIOp::create(b, arith::CmpIPredicate::sle,
                                              rowIndex, lastRow);
          row = loadRawChunkAt(
              rowsView, index, col,
              arith::SelectOp::create(b, alive, cst(elements), cst(0)),
              lanes * perWord);
        }
        row = pairs ? Value(vector::BitCastOp::create(b, vecType, row))
                    : widenToF32(row);
        tileRows.push_back(row);
      }
      SmallVector<Value> columns = transposeTile(tileRows);
      for (int64_t c = 0; c < live; ++c) {
        Value word = columns[c];
        if (pairs)
          word = vector::BitCastOp::create(
              b, VectorType::get({2 * lanes}, b.getBF16Type()), word);
        vector::StoreOp::create(
            b, word, target,
            ValueRange{arith::AddIOp::create(b, w0, cst(c)), column});
      }
    };
    // Whole tiles in a loop (unrolled, D = 256 made one 5000-instruction
    // block that took LLVM's instruction selection a quarter second),
    // then the partial tile of a width that is not a multiple of 16 words.
    int64_t whole = words / lanes * lanes;
    if (whole > lanes)
      forLoop(cst(0), cst(whole), cst(lanes),
              [&](Value w0) { transposeWords(w0, lanes, lanes * perWord); });
    else if (whole == lanes)
      transposeWords(cst(0), lanes, lanes * perWord);
    if (words > whole)
      transposeWords(cst(whole), words - whole, width - whole * perWord);
  });
}

Value VectorEmitter::transposedSum(ArrayRef<Value> vectors) {
  SmallVector<Value> level(vectors.begin(), vectors.end());
  for (int64_t length = lanes; length > 1; length /= 2) {
    int64_t half = length / 2;
    SmallVector<int64_t> firstHalves, secondHalves;
    for (int64_t source = 0; source < 2; ++source)
      for (int64_t segment = 0; segment < lanes / length; ++segment)
        for (int64_t l = 0; l < half; ++l) {
          int64_t lane = source * lanes + segment * length + l;
          firstHalves.push_back(lane);
          secondHalves.push_back(lane + half);
        }
    SmallVector<Value> next;
    for (size_t v = 0; v + 1 < level.size(); v += 2)
      next.push_back(arith::AddFOp::create(
          b, vector::ShuffleOp::create(b, level[v], level[v + 1], firstHalves),
          vector::ShuffleOp::create(b, level[v], level[v + 1], secondHalves)));
    level = next;
  }
  return level.front();
}

int64_t VectorEmitter::unpackedColumn(int64_t lane, bool high) {
  return lane / 4 * 8 + (high ? 4 : 0) + lane % 4;
}

std::pair<Value, Value> VectorEmitter::toUnpackedOrder(Value first,
                                                       Value second) {
  SmallVector<int64_t> low, high;
  for (int64_t lane = 0; lane < lanes; ++lane) {
    low.push_back(unpackedColumn(lane, false));
    high.push_back(unpackedColumn(lane, true));
  }
  return {vector::ShuffleOp::create(b, first, second, low),
          vector::ShuffleOp::create(b, first, second, high)};
}

std::pair<Value, Value> VectorEmitter::fromUnpackedOrder(Value low,
                                                         Value high) {
  SmallVector<int64_t> columns(2 * lanes);
  for (int64_t lane = 0; lane < lanes; ++lane) {
    columns[unpackedColumn(lane, false)] = lane;
    columns[unpackedColumn(lane, true)] = lanes + lane;
  }
  ArrayRef<int64_t> all(columns);
  return {vector::ShuffleOp::create(b, low, high, all.take_front(lanes)),
          vector::ShuffleOp::create(b, low, high, all.drop_front(lanes))};
}

Value VectorEmitter::broadcastPair(Value lo, Value hi) {
  return broadcastPair(vector::FromElementsOp::create(
      b, VectorType::get({2}, b.getBF16Type()), ValueRange{lo, hi}));
}

Value VectorEmitter::broadcastPairAt(Value memref, ValueRange at) {
  return broadcastPair(vector::LoadOp::create(
      b, VectorType::get({2}, b.getBF16Type()), memref, at));
}

Value VectorEmitter::loadPairs(Value memref, ValueRange at) {
  return vector::LoadOp::create(
      b, VectorType::get({2 * lanes}, b.getBF16Type()), memref, at);
}

Value VectorEmitter::broadcastPair(Value pair) {
  Value word = vector::ExtractOp::create(
      b,
      vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()), pair),
      ArrayRef<int64_t>{0});
  return vector::BitCastOp::create(
      b, VectorType::get({2 * lanes}, b.getBF16Type()), splat(word));
}

std::pair<Value, Value>
VectorEmitter::blockTableEntries(Operation *op, ValueRange captures,
                                 ValueRange origin, Value batch, Value head,
                                 Value firstRow, Value count, Value blockStart,
                                 Value blockKeys) {
  return mlir::attn::blockTableEntries(b, b.getLoc(), op, captures, origin,
                                       batch, head, firstRow, count, blockStart,
                                       blockKeys);
}
