//===- LaneRowsKernel.cpp - The lane-rows CPU micro-kernel ---------------===//
//
// Query rows in vector lanes: a tile of `lane-rows` rows keeps Qᵀ (scaled),
// the accumulator transposed (Oᵀ[e][row]) and its running max and sum in
// stack buffers, and per block of keys makes the scores transposed,
// Sᵀ[j][row]. Then every step is vertical: each score is an FMA of a
// broadcast K element with a vector of Qᵀ, max and sum run down the block's
// keys, the rescale multiplies Oᵀ's vectors, and P·V is an FMA of a
// broadcast V element with a vector of weights. No horizontal reduction, no
// K or V packing (f32 K and V elements are read in place, as broadcasts;
// 16-bit K and V are widened once per chunk of keys for all the tiles of a
// head). Ops without the bf16 dot product take
// it: with a mask operand (each block's mask transposed into a [key][row]
// f32 bias buffer; a padding mask, broadcast over the rows, one splat a
// key), with a score_mod and a mask_mod too (evaluated on
// each score vector: its rows in lanes, one key; a block mask's table skips
// key blocks as in the packed path) and with dropout (one Philox per row
// vector and 8 keys: 16 bits of its 4 words a key); measured on AVX-512
// (Zen 4): 10-20 % faster than the packed path for f32 prefill, 16-25 % for
// f16.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Cpu/KernelEmitter.h"

#include "lib/Transforms/Passes.h"

#include <numeric>

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

namespace {

class LaneRowsKernel : public KernelEmitter {
public:
  using KernelEmitter::KernelEmitter;

  /// Whether the lane-rows path widens K and V blocks into f32 buffers.
  bool widensBlocks() { return hasNarrowKeysOrValues(op); }
  /// Whether the P·V loop prefetches the mask's runs at the next key block
  /// (prefetchMaskLine: a row of the tile per key of the block), else
  /// transposeMaskTiles does after its loads.
  bool spreadsMaskPrefetch() {
    Value mask = op.getMask();
    if (!mask)
      return false;
    auto type = cast<MemRefType>(mask.getType());
    return type.getDimSize(2) != 1 && type.getDimSize(3) != 1 &&
           laneRows <= keyBlock;
  }
  /// 16-bit K and V widened for the current chunk of keys, and the row of
  /// the current block's first key in them.
  Value wideKeys, wideValues, wideOffset;
  /// Whether the head's keys are widened by chunks (more than one tile),
  /// else block by block.
  Value chunked;
  /// Keys per step of the statistics loop: 2 (two running sums); with
  /// dropout those of one Philox per row vector (8, 16 bits of its words
  /// each; 4 where the block is not whole eights).
  int64_t statisticsKeys() {
    if (!op.getDropoutP())
      return 2;
    return keyBlock % 8 == 0 ? 8 : 4;
  }
  /// The head's rows, a tile of laneRows at a time. 16-bit K and V are
  /// widened to f32 once per chunk of kWidenedChunkBlocks key blocks, into
  /// heap buffers that every tile of the head then reads: each tile's
  /// state goes back to the op's outs between chunks (as it does at its
  /// end), and a tile that sees no key of a chunk is skipped there.
  /// Widening each block for each 24-row tile had cost the AVX2 kernels
  /// 11-14 % of their time. A head of one tile widens its blocks one at a
  /// time, as it reads them (by chunks: 0.95-0.98x, the tile's state
  /// going out and back per chunk for nothing).
  void emitLaneRowsHead(Value batch, Value head, Value kvHead, Value rows,
                        Value keys) {
    if (!widensBlocks())
      return emitTiles(batch, head, kvHead, rows, keys, Value(), Value());
    int64_t chunkKeys = kWidenedChunkBlocks * keyBlock;
    // Room for K's rows a block past the chunk (see below).
    auto buffer = [&](int64_t width) -> Value {
      return memref::AllocOp::create(
          b,
          MemRefType::get({chunkKeys + keyBlock,
                           static_cast<int64_t>(llvm::alignTo(width, lanes))},
                          f32),
          ValueRange{}, b.getI64IntegerAttr(64));
    };
    wideKeys = buffer(headDim);
    wideValues = buffer(valueDim);
    Value first, last;
    std::tie(first, last) = band.keysSomeRowSees(cst(0), rows, keys);
    Value lastKey = arith::SubIOp::create(b, keys, cst(1));
    chunked = arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, rows,
                                    cst(laneRows));
    // One tile: one chunk of all its keys, its blocks widened in the tiles'
    // prologue.
    Value step = arith::SelectOp::create(
        b, chunked, cst(chunkKeys),
        arith::MaxSIOp::create(b, arith::SubIOp::create(b, last, first),
                               cst(1)));
    forLoop(first, last, step, [&](Value chunkStart) {
      Value chunkEnd = arith::MinSIOp::create(
          b, arith::AddIOp::create(b, chunkStart, step), last);
      Value count = arith::SubIOp::create(b, chunkEnd, chunkStart);
      auto ifChunked = scf::IfOp::create(b, chunked, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(ifChunked.thenBlock()->getTerminator());
      // A block's score loop reads a whole block of keys (those past the
      // last key repeat it): past the chunk where its last block is partial,
      // that is where the chunk ends at the head's last key, or anywhere
      // with a left band (a tile's blocks then start at its own first key).
      Value pad = band.left
                      ? cst(keyBlock)
                      : arith::SelectOp::create(
                            b,
                            arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                                  chunkEnd, last),
                            cst(keyBlock), cst(0));
      widenKeysAndValues(batch, kvHead, chunkStart,
                         arith::AddIOp::create(b, count, pad), count, lastKey);
      b.setInsertionPointAfter(ifChunked);
      emitTiles(batch, head, kvHead, rows, keys, chunkStart, chunkEnd);
    });
    memref::DeallocOp::create(b, wideKeys);
    memref::DeallocOp::create(b, wideValues);
  }

  /// K's rows [start, start + keyRows) and V's [start, start + valueRows)
  /// into wideKeys and wideValues (rows past lastKey repeat it).
  void widenKeysAndValues(Value batch, Value kvHead, Value start, Value keyRows,
                          Value valueRows, Value lastKey) {
    widenRows(op.getKey(), batch, kvHead, start, keyRows, lastKey, headDim,
              wideKeys);
    widenRows(op.getValue(), batch, kvHead, start, valueRows, lastKey, valueDim,
              wideValues);
  }

  /// The tiles of the head's rows over keys [from, to) (all the keys they
  /// see when `from` is null).
  void emitTiles(Value batch, Value head, Value kvHead, Value rows, Value keys,
                 Value from, Value to) {
    Value lastRow = arith::SubIOp::create(b, rows, cst(1));
    forLoop(cst(0), rows, cst(laneRows), [&](Value tileStart) {
      Value count = arith::MinSIOp::create(
          b, arith::SubIOp::create(b, rows, tileStart), cst(laneRows));
      std::optional<OpBuilder::InsertionGuard> inChunk;
      if (from) {
        auto [tileFirst, tileLast] =
            band.keysSomeRowSees(tileStart, count, keys);
        Value sees =
            arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                  arith::MaxSIOp::create(b, tileFirst, from),
                                  arith::MinSIOp::create(b, tileLast, to));
        auto ifSees = scf::IfOp::create(b, sees, /*withElseRegion=*/false);
        inChunk.emplace(b);
        b.setInsertionPoint(ifSees.thenBlock()->getTerminator());
      }
      // Rows past the tile repeat its last row; they are never written back.
      auto rowAt = [&](Value i) -> Value {
        return arith::MinSIOp::create(b, arith::AddIOp::create(b, tileStart, i),
                                      lastRow);
      };
      Value scale = splat(scoreScale());
      // Qᵀ (scaled) and Oᵀ from the rows.
      rowsIntoLanes(op.getQuery(), batch, head, rowAt, headDim,
                    scratch.laneQuery, scale);
      rowsIntoLanes(op.getAcc(), batch, head, rowAt, valueDim, scratch.laneAcc,
                    Value());
      forLoop(cst(0), cst(laneRows), cst(1), [&](Value i) {
        Value row = rowAt(i);
        memref::StoreOp::create(
            b, memref::LoadOp::create(b, op.getMax(), {batch, head, row}),
            scratch.laneStats, ValueRange{cst(0), i});
        memref::StoreOp::create(
            b, memref::LoadOp::create(b, op.getSum(), {batch, head, row}),
            scratch.laneStats, ValueRange{cst(1), i});
      });
      // A causal or windowed tile walks only the keys its rows can see,
      // and masks only the blocks that some row sees in part; a block
      // mask's table skips the blocks it leaves out.
      eachBandBlock(
          tileStart, count, keys,
          [&](Value blockStart, Value blockKeys) {
            if (!from)
              return;
            wideOffset = arith::SelectOp::create(
                b, chunked, arith::SubIOp::create(b, blockStart, from), cst(0));
            // A head of one tile widens each block as the tile reaches it.
            auto ifChunked =
                scf::IfOp::create(b, chunked, /*withElseRegion=*/true);
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPoint(ifChunked.elseBlock()->getTerminator());
            widenKeysAndValues(batch, kvHead, blockStart, cst(keyBlock),
                               blockKeys,
                               arith::SubIOp::create(b, keys, cst(1)));
          },
          [&](Value blockStart, Value blockKeys) {
            emitLaneRowsBlock(batch, head, kvHead, tileStart, keys,
                              blockStart, blockKeys);
          },
          batch, head, from, to);
      ifUnitStride(
          op.getAcc(),
          [&](Value rowsView) {
            transposeOutOfLanes(rowsView, batch, head, tileStart, count);
          },
          [&] {
            forLoop(cst(0), count, cst(1), [&](Value i) {
              Value row = arith::AddIOp::create(b, tileStart, i);
              forLoop(cst(0), cst(valueDim), cst(1), [&](Value e) {
                memref::StoreOp::create(
                    b,
                    memref::LoadOp::create(b, scratch.laneAcc,
                                           ValueRange{e, i}),
                    op.getAcc(), ValueRange{batch, head, row, e});
              });
            });
          });
      forLoop(cst(0), count, cst(1), [&](Value i) {
        Value row = arith::AddIOp::create(b, tileStart, i);
        memref::StoreOp::create(
            b,
            memref::LoadOp::create(b, scratch.laneStats, ValueRange{cst(0), i}),
            op.getMax(), ValueRange{batch, head, row});
        memref::StoreOp::create(
            b,
            memref::LoadOp::create(b, scratch.laneStats, ValueRange{cst(1), i}),
            op.getSum(), ValueRange{batch, head, row});
      });
    });
  }

  /// lanes[c][i] = source[batch, head, row(i), c] (times `scale` when
  /// given) for the tile's laneRows rows and `width` columns: by 16x16
  /// register transposes where the rows have unit stride, element copies
  /// otherwise.
  void rowsIntoLanes(Value source, Value batch, Value head,
                     function_ref<Value(Value)> row, int64_t width, Value lanes,
                     Value scale) {
    ifUnitStride(
        source,
        [&](Value rowsView) {
          transposeIntoLanes(rowsView, batch, head, row, width, lanes, scale);
        },
        [&] {
          forLoop(cst(0), cst(laneRows), cst(1), [&](Value i) {
            forLoop(cst(0), cst(width), cst(1), [&](Value c) {
              Value v = loadF32(source, {batch, head, row(i), c});
              if (scale)
                v = arith::MulFOp::create(
                    b, v,
                    vector::ExtractOp::create(b, scale, ArrayRef<int64_t>{0}));
              memref::StoreOp::create(b, v, lanes, ValueRange{c, i});
            });
          });
        });
  }

  /// target[c][i] = rows[row(i)][c] (times `scale` when given) for the
  /// tile's laneRows rows and `width` columns: per 16 rows and 16 columns,
  /// 16 row loads, one transposeTile, 16 column stores.
  void transposeIntoLanes(Value rowsView, Value batch, Value head,
                          function_ref<Value(Value)> rowAt, int64_t width,
                          Value target, Value scale) {
    forLoop(cst(0), cst(laneRows), cst(lanes), [&](Value first) {
      SmallVector<Value> rows;
      for (int64_t r = 0; r < lanes; ++r)
        rows.push_back(rowAt(arith::AddIOp::create(b, first, cst(r))));
      eachChunk(width, [&](Value c0, int64_t columns) {
        SmallVector<Value> chunks;
        for (int64_t r = 0; r < lanes; ++r) {
          Value chunk =
              loadChunkF32(rowsView, {batch, head, rows[r], c0}, columns);
          if (scale)
            chunk = arith::MulFOp::create(b, chunk, scale);
          chunks.push_back(chunk);
        }
        SmallVector<Value> transposed = transposeTile(chunks);
        for (int64_t c = 0; c < columns; ++c)
          vector::StoreOp::create(
              b, transposed[c], target,
              ValueRange{arith::AddIOp::create(b, c0, cst(c)), first});
      });
    });
  }

  /// acc[tileStart + i][e] = Oᵀ[e][i] for the tile's first `count` rows:
  /// the inverse of transposeIntoLanes, rows past `count` not stored.
  void transposeOutOfLanes(Value rowsView, Value batch, Value head,
                           Value tileStart, Value count) {
    forLoop(cst(0), count, cst(lanes), [&](Value first) {
      Value rowsHere = arith::SubIOp::create(b, count, first);
      eachChunk(valueDim, [&](Value c0, int64_t columns) {
        SmallVector<Value> accColumns;
        for (int64_t c = 0; c < columns; ++c)
          accColumns.push_back(vector::LoadOp::create(
              b, vecType, scratch.laneAcc,
              ValueRange{arith::AddIOp::create(b, c0, cst(c)), first}));
        SmallVector<Value> transposed = transposeTile(accColumns);
        for (int64_t r = 0; r < lanes; ++r) {
          Value here = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                             cst(r), rowsHere);
          auto ifRow = scf::IfOp::create(b, here);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(ifRow.thenBlock()->getTerminator());
          Value row = arith::AddIOp::create(
              b, tileStart, arith::AddIOp::create(b, first, cst(r)));
          Value chunk = transposed[r];
          SmallVector<Value, 4> at = {batch, head, row, c0};
          if (columns == lanes)
            vector::StoreOp::create(b, chunk, rowsView, at);
          else
            vector::MaskedStoreOp::create(b, rowsView, at, liveLanes(columns),
                                          chunk);
        }
      });
    });
  }

  /// One key block of a lane-rows tile: Sᵀ (through the score_mod where
  /// the op has one), the statistics, P·V; the causal/window band where
  /// bandApplies() (a block that some row of the tile sees only in part).
  void emitLaneRowsBlock(Value batch, Value head, Value kvHead, Value tileStart,
                         Value keys, Value blockStart, Value blockKeys) {
    bool banded = bandApplies();
    int64_t rowVectors = laneRows / lanes;
    // Register tiles of keys (or V columns) by the tile's row vectors, as
    // many accumulators as leave room for the row vectors and a broadcast:
    // 16 of AVX-512's 32 registers, 12 of AVX2's 16 (a tile of 3 row
    // vectors by 4 keys; 16 accumulators there spilled and ran at half
    // the speed).
    int64_t accumulators = lanes >= 16 ? kMaxAccumulators : 12;
    int64_t keyStep = laneKeyStep(accumulators, rowVectors);
    Value lastKey = arith::SubIOp::create(b, keys, cst(1));
    Value zeroVec = splat(f32Const(0)), negInfVec = splat(f32Const(-kInf));
    // 16-bit K and V come from their chunk's widened rows (the block's
    // from wideOffset); f32 rows are read in place.
    bool widen = widensBlocks();
    auto keyAt = [&](Value j, Value key, Value d) -> Value {
      return widen
                 ? Value(memref::LoadOp::create(
                       b, wideKeys,
                       ValueRange{arith::AddIOp::create(b, wideOffset, j), d}))
                 : loadF32(op.getKey(), {batch, kvHead, key, d});
    };
    auto valueAt = [&](Value j, Value key, Value e) -> Value {
      return widen
                 ? Value(memref::LoadOp::create(
                       b, wideValues,
                       ValueRange{arith::AddIOp::create(b, wideOffset, j), e}))
                 : loadF32(op.getValue(), {batch, kvHead, key, e});
    };
    auto rowsAt = [&](Value buffer, Value index, int64_t v) -> Value {
      return vector::LoadOp::create(b, vecType, buffer,
                                    ValueRange{index, cst(v * lanes)});
    };
    auto storeRows = [&](Value vec, Value buffer, Value index, int64_t v) {
      vector::StoreOp::create(b, vec, buffer,
                              ValueRange{index, cst(v * lanes)});
    };

    // The causal/window band of each row vector, relative to the block:
    // key j is allowed iff lo <= j <= hi.
    SmallVector<Value> bandLo, bandHi;
    LaneSegments segments;
    if (banded) {
      Value rel = band.relative(tileStart, blockStart);
      Value lane = arith::IndexCastOp::create(
          b, idxVecType,
          vector::StepOp::create(b,
                                 VectorType::get({lanes}, b.getIndexType())));
      // Clamped so that adding a lane offset keeps the answer: below
      // -laneRows no row reaches key 0, above keyBlock every row does.
      auto bound = [&](Value base, int64_t v) {
        Value start = splat(clampToI32(base, -laneRows - 1, keyBlock));
        return arith::AddIOp::create(
            b, start,
            arith::AddIOp::create(b, lane,
                                  splat(arith::ConstantOp::create(
                                      b, b.getI32IntegerAttr(v * lanes)))));
      };
      for (int64_t v = 0; v < rowVectors; ++v) {
        if (band.right)
          bandHi.push_back(bound(band.upper(rel), v));
        if (band.left)
          bandLo.push_back(bound(band.lower(rel), v));
      }
      if (band.right)
        segments = laneSegments(band.upper(rel), rowVectors, accumulators);
    }
    // Keys of segment v, which no row of the row vectors before v sees,
    // take only row vectors [v, rowVectors): the triangle of a diagonal
    // block costs 10/16 of the block with 4 row vectors, not all of it.
    // One segment (all row vectors) elsewhere.
    if (segments.start.empty())
      segments = {{cst(0), cst(keyBlock)}, {keyStep}};
    int64_t numSegments = segments.step.size();
    // The soft cap: on each score in the score loop's registers, or, where
    // there are several score loops, as the softmax reads the scores (once
    // in the code, not once per segment; the block max capped once, the
    // cap being increasing). The first measured 4 % faster where one loop
    // does (the blocks inside the band, full attention). A score_mod comes
    // after the cap, in the score loop.
    bool scoreMod = modifiers.hasScoreMod();
    // The mask_mod, unless the block table declared the block full.
    bool maskMod = modifiers.hasMaskMod() && !maskModOff;
    // (A mask's bias comes after the cap: the cap must be on the score.)
    Value mask = op.getMask();
    bool capAsRead = numSegments > 1 && !scoreMod && !mask;
    bool keepMask = hasKeepMask();
    if (mask)
      transposeMaskBlock(batch, head, tileStart, blockStart, lastKey);
    // The modifiers' global indices: the rows of each row vector (lanes),
    // and per key a scalar.
    bool dropout = static_cast<bool>(op.getDropoutP());
    Value globalBatch, globalHead;
    SmallVector<Value> globalRows;
    if (scoreMod || maskMod || dropout) {
      globalBatch = globalIndexOf(0, batch);
      globalHead = globalIndexOf(1, head);
      Value firstRow = globalIndexOf(2, tileStart);
      for (int64_t v = 0; v < rowVectors; ++v)
        globalRows.push_back(laneIndices(firstRow, v));
    }
    // What the modifiers read by the row alone (a query's document id),
    // once per block for each row vector, not once per key.
    SmallVector<ModifierEmitter::ReadsAhead> rowReads;
    if (scoreMod || maskMod)
      for (Value rows : globalRows)
        rowReads.push_back(modifiers.queryReads(rows));
    // A block of which the mask_mod leaves no key to any row of the tile
    // (most blocks of short documents, inside a block table's partial
    // ones): nothing to score, update or accumulate. The search stops at
    // the first key some row keeps (its first key in a mostly kept block).
    OpBuilder::InsertionGuard skipGuard(b);
    if (maskMod) {
      Value no = arith::ConstantOp::create(b, b.getBoolAttr(false));
      auto search = scf::WhileOp::create(
          b, b.getLoc(), TypeRange{b.getIndexType(), b.getI1Type()},
          ValueRange{cst(0), no},
          [&](OpBuilder &, Location loc, ValueRange state) {
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPointToEnd(state.front().getParentBlock());
            Value more = arith::AndIOp::create(
                b,
                arith::CmpIOp::create(b, arith::CmpIPredicate::slt, state[0],
                                      blockKeys),
                arith::XOrIOp::create(
                    b, state[1],
                    arith::ConstantOp::create(b, b.getBoolAttr(true))));
            scf::ConditionOp::create(b, loc, more, state);
          },
          [&](OpBuilder &, Location loc, ValueRange state) {
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPointToEnd(state.front().getParentBlock());
            Value j = state[0];
            Value globalKey =
                globalIndexOf(3, arith::AddIOp::create(b, blockStart, j));
            Value kept;
            for (int64_t v = 0; v < rowVectors; ++v) {
              Value rows = modifiers.keep(
                  {globalBatch, globalHead, globalRows[v], globalKey}, lanes,
                  Value(), &rowReads[v]);
              kept = kept ? arith::OrIOp::create(b, kept, rows) : rows;
            }
            scf::YieldOp::create(
                b, loc,
                ValueRange{arith::AddIOp::create(b, j, cst(1)),
                           vector::ReductionOp::create(
                               b, vector::CombiningKind::OR, kept)});
          });
      Value any = search.getResult(1);
      auto anyKept = scf::IfOp::create(b, any, /*withElseRegion=*/false);
      b.setInsertionPoint(anyKept.thenBlock()->getTerminator());
    }

    // Sᵀ[j][rows] = Σ_d K[key j][d] · Qᵀ[d][rows] for keys [from, to) and
    // row vectors [vFirst, rowVectors), `step` keys at a time; keys past
    // the block repeat its last key and score -inf. The block's max of
    // each row vector is taken on the way, from the registers.
    auto scoreKeys = [&](Value from, Value to, int64_t vFirst, int64_t step,
                         ValueRange inits) -> SmallVector<Value> {
      int64_t vectors = rowVectors - vFirst;
      return forLoopWith(
          from, to, cst(step), inits,
          [&](Value first, ValueRange maxima) -> SmallVector<Value> {
            SmallVector<Value> keyIndex;
            SmallVector<Value> keyLocal;
            for (int64_t a = 0; a < step; ++a) {
              keyLocal.push_back(arith::AddIOp::create(b, first, cst(a)));
              keyIndex.push_back(arith::MinSIOp::create(
                  b, arith::AddIOp::create(b, blockStart, keyLocal.back()),
                  lastKey));
            }
            SmallVector<Value> scores =
                forLoopWith(cst(0), cst(headDim), cst(1),
                            SmallVector<Value>(step * vectors, zeroVec),
                            [&](Value d, ValueRange acc) -> SmallVector<Value> {
                              SmallVector<Value> q;
                              for (int64_t v = vFirst; v < rowVectors; ++v)
                                q.push_back(rowsAt(scratch.laneQuery, d, v));
                              SmallVector<Value> next;
                              for (int64_t a = 0; a < step; ++a) {
                                Value k =
                                    splat(keyAt(keyLocal[a], keyIndex[a], d));
                                for (int64_t v = 0; v < vectors; ++v)
                                  next.push_back(vector::FMAOp::create(
                                      b, k, q[v], acc[a * vectors + v]));
                              }
                              return next;
                            });
            SmallVector<Value> running(maxima.begin(), maxima.end());
            for (int64_t a = 0; a < step; ++a) {
              Value j = keyLocal[a];
              Value live = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                                 j, blockKeys);
              Value globalKey;
              if (scoreMod || maskMod)
                globalKey = globalIndexOf(
                    3, arith::AddIOp::create(b, blockStart, j));
              Value jVec;
              if (!bandLo.empty() || !bandHi.empty())
                jVec = splat(arith::IndexCastOp::create(b, b.getI32Type(), j));
              for (int64_t v = 0; v < vectors; ++v) {
                Value s = capAsRead ? scores[a * vectors + v]
                                    : softcap(scores[a * vectors + v]);
                // The mask as in the packed path: a float mask's bias added
                // (to base 2), and a -inf bias excluding the key by a select
                // after the modifiers (NaN + -inf is NaN, and no score_mod
                // brings an excluded score back).
                Value maskedOut;
                if (mask) {
                  Value bias = rowsAt(scratch.laneBias, j, vFirst + v);
                  if (!keepMask)
                    s = vector::FMAOp::create(
                        b, bias,
                        splat(f32Const(static_cast<float>(maths.biasScale()))),
                        s);
                  maskedOut = arith::CmpFOp::create(
                      b, arith::CmpFPredicate::OEQ, bias, negInfVec);
                }
                SmallVector<Value, 4> indices;
                if (scoreMod || maskMod)
                  indices = {globalBatch, globalHead, globalRows[vFirst + v],
                             globalKey};
                if (scoreMod)
                  s = scoreModInBase2(s, indices, &rowReads[vFirst + v]);
                // The mask_mod after the score_mod: its false lanes score
                // -inf whatever the score_mod made of them (NaN included).
                if (maskMod)
                  s = arith::SelectOp::create(
                      b,
                      modifiers.keep(indices, lanes, Value(),
                                     &rowReads[vFirst + v]),
                      s, negInfVec);
                if (maskedOut)
                  s = arith::SelectOp::create(b, maskedOut, negInfVec, s);
                if (jVec) {
                  Value allowed;
                  auto both = [&](Value c) {
                    allowed =
                        allowed ? arith::AndIOp::create(b, allowed, c) : c;
                  };
                  if (!bandHi.empty())
                    both(arith::CmpIOp::create(b, arith::CmpIPredicate::sle,
                                               jVec, bandHi[vFirst + v]));
                  if (!bandLo.empty())
                    both(arith::CmpIOp::create(b, arith::CmpIPredicate::sge,
                                               jVec, bandLo[vFirst + v]));
                  s = arith::SelectOp::create(b, allowed, s, negInfVec);
                }
                s = arith::SelectOp::create(b, live, s, negInfVec);
                storeRows(s, scratch.laneScores, j, vFirst + v);
                running[v] = maths.max(s, running[v]);
              }
            }
            return running;
          });
    };
    SmallVector<Value> blockMaxima(rowVectors, negInfVec);
    for (int64_t v = 0; v < numSegments; ++v) {
      SmallVector<Value> seen = scoreKeys(
          segments.start[v], segments.start[v + 1], v, segments.step[v],
          ArrayRef<Value>(blockMaxima).drop_front(v));
      std::copy(seen.begin(), seen.end(), blockMaxima.begin() + v);
    }

    // Per row vector: m' = max(m, max_j s), p = exp(s - m') in place of s,
    // α = exp(m - m'), sum' = α·sum + Σ_j p. A row with no allowed key yet
    // takes 0 for m' in the exponents (no -inf - -inf). Dropout: the sum
    // (and so the LSE) is the undropped softmax's; the weights stored for
    // P·V are kept or 0, and scaled. Its keys go 8 at a time: the rows'
    // counters of 8 keys are one Philox (16 bits of its words a key).
    Value threshold, keptScale;
    if (dropout) {
      threshold = dropoutThreshold(b, b.getLoc(), op.getDropoutP());
      keptScale = splat(dropoutKeptScale(b, b.getLoc(), op.getDropoutP()));
    }
    int64_t statKeys = statisticsKeys();
    SmallVector<Value> alphas;
    for (int64_t v = 0; v < rowVectors; ++v) {
      Value blockMax =
          capAsRead ? softcapScore(blockMaxima[v]) : blockMaxima[v];
      Value oldMax = rowsAt(scratch.laneStats, cst(0), v);
      Value oldSum = rowsAt(scratch.laneStats, cst(1), v);
      AttentionMath::MaxUpdate update = maths.updateMax(oldMax, blockMax);
      Value newMax = update.max, safeMax = update.reference,
            alpha = update.alpha;
      SmallVector<Value> sums = forLoopWith(
          cst(0), segments.start[std::min(v + 1, numSegments)], cst(statKeys),
          SmallVector<Value>(2, zeroVec),
          [&](Value j, ValueRange sum) -> SmallVector<Value> {
            SmallVector<Value> keeps;
            if (dropout)
              keeps = dropoutKeepRows(
                  b, b.getLoc(), op.getDropoutSeed(), threshold, globalBatch,
                  globalHead, globalRows[v],
                  globalIndexOf(3, arith::AddIOp::create(b, blockStart, j)),
                  statKeys);
            SmallVector<Value> next(sum.begin(), sum.end());
            for (int64_t c = 0; c < statKeys; ++c) {
              Value jc = arith::AddIOp::create(b, j, cst(c));
              Value s = rowsAt(scratch.laneScores, jc, v);
              Value p = maths.exp(arith::SubFOp::create(
                  b, capAsRead ? softcapScore(s) : s, safeMax));
              next[c % 2] = arith::AddFOp::create(b, next[c % 2], p);
              if (dropout)
                p = arith::MulFOp::create(
                    b, p,
                    arith::SelectOp::create(b, keeps[c], keptScale, zeroVec));
              storeRows(p, scratch.laneScores, jc, v);
            }
            return next;
          });
      Value newSum = maths.updateSum(oldSum, alpha, sums);
      storeRows(newMax, scratch.laneStats, cst(0), v);
      storeRows(newSum, scratch.laneStats, cst(1), v);
      alphas.push_back(alpha);
    }

    // Oᵀ[e][rows] = α·Oᵀ[e][rows] + Σ_j V[key j][e] · P[j][rows], keyStep
    // columns of V at a time. Where keys may be excluded for some rows (the
    // band, the mask, the modifiers), an excluded key (p exactly 0) leaves the
    // accumulator as it is, so that a NaN in its V row stays out of the rows
    // that do not attend to it.
    bool excludes = banded || keysMayBeExcluded();
    Value aheadStart = prefetchStart(blockStart, keys);
    auto columns = [&](Value first, int64_t width) {
      SmallVector<Value> accs;
      for (int64_t a = 0; a < width; ++a) {
        Value e = arith::AddIOp::create(b, first, cst(a));
        for (int64_t v = 0; v < rowVectors; ++v)
          accs.push_back(arith::MulFOp::create(b, rowsAt(scratch.laneAcc, e, v),
                                               alphas[v]));
      }
      // Keys [from, to) into the accumulators of row vectors [vFirst,
      // rowVectors) (`inits`, column-major as accs).
      auto accumulate = [&](Value from, Value to, int64_t vFirst,
                            ValueRange inits) {
        int64_t vectors = rowVectors - vFirst;
        return forLoopWith(
            from, to, cst(1), inits,
            [&](Value j, ValueRange acc) -> SmallVector<Value> {
              Value key = arith::AddIOp::create(b, blockStart, j);
              if (aheadStart)
                prefetchRows(batch, kvHead,
                             arith::AddIOp::create(b, aheadStart, j), first);
              if (spreadsMaskPrefetch())
                prefetchMaskLines(batch, head, tileStart, blockStart, lastKey,
                                  j, first, keyStep,
                                  llvm::divideCeil(valueDim, keyStep));
              // select(p != 0, fma, acc): one masked FMA on AVX-512.
              SmallVector<Value> p, included;
              for (int64_t v = vFirst; v < rowVectors; ++v) {
                p.push_back(rowsAt(scratch.laneScores, j, v));
                if (excludes)
                  included.push_back(arith::CmpFOp::create(
                      b, arith::CmpFPredicate::UNE, p.back(), zeroVec));
              }
              SmallVector<Value> next;
              for (int64_t a = 0; a < width; ++a) {
                Value e = arith::AddIOp::create(b, first, cst(a));
                Value value = splat(valueAt(j, key, e));
                for (int64_t v = 0; v < vectors; ++v) {
                  Value old = acc[a * vectors + v];
                  Value sum = vector::FMAOp::create(b, value, p[v], old);
                  if (excludes)
                    sum = arith::SelectOp::create(b, included[v], sum, old);
                  next.push_back(sum);
                }
              }
              return next;
            });
      };
      for (int64_t first = 0; first < numSegments; ++first) {
        SmallVector<Value> inits;
        for (int64_t a = 0; a < width; ++a)
          for (int64_t v = first; v < rowVectors; ++v)
            inits.push_back(accs[a * rowVectors + v]);
        SmallVector<Value> sums = accumulate(
            segments.start[first],
            arith::MinSIOp::create(b, segments.start[first + 1], blockKeys),
            first, inits);
        int64_t vectors = rowVectors - first;
        for (int64_t a = 0; a < width; ++a)
          for (int64_t v = first; v < rowVectors; ++v)
            accs[a * rowVectors + v] = sums[a * vectors + v - first];
      }
      for (int64_t a = 0; a < width; ++a)
        for (int64_t v = 0; v < rowVectors; ++v)
          storeRows(accs[a * rowVectors + v], scratch.laneAcc,
                    arith::AddIOp::create(b, first, cst(a)), v);
    };
    eachChunk(valueDim, columns, keyStep);
  }

  /// The first key whose rows P·V prefetches for the block at
  /// `blockStart` (where prefetchKeys and blockPrefetch are on and K/V are
  /// read in place):
  /// the next block's, moved back so that each of this block's keys j has
  /// a key start + j (a last partial block prefetches the end of this
  /// one). Once per block, so that the loop's addresses step by a row.
  Value prefetchStart(Value blockStart, Value keys) {
    if (prefetchKeys <= 0 || !blockPrefetch || widensBlocks())
      return Value();
    return arith::MaxSIOp::create(
        b,
        arith::MinSIOp::create(
            b, arith::AddIOp::create(b, blockStart, cst(keyBlock)),
            arith::SubIOp::create(b, keys, cst(keyBlock))),
        cst(0));
  }

  /// Prefetches into L2 one line of the K and V rows of key `ahead`, at
  /// V's column `column` and K's matching one: one line of each per step
  /// of P·V, so that over the block's column chunks the next block comes
  /// in, spread over the block instead of a burst per key step (which cost
  /// D = 256 4 %: the fill buffers are what its Qᵀ, larger than L1,
  /// streams through). A tile walks all its keys, so from a K/V head
  /// larger than L2 every block came from L3 as it was read.
  void prefetchRows(Value batch, Value kvHead, Value ahead, Value column) {
    Value keyColumn = column;
    if (headDim != valueDim)
      keyColumn = arith::MinSIOp::create(
          b,
          arith::DivUIOp::create(
              b, arith::MulIOp::create(b, column, cst(headDim)), cst(valueDim)),
          cst(headDim - 1));
    for (auto [rows, at] :
         {std::pair(op.getKey(), keyColumn), std::pair(op.getValue(), column)})
      memref::PrefetchOp::create(b, rows, ValueRange{batch, kvHead, ahead, at},
                                 /*isWrite=*/false, /*localityHint=*/2,
                                 /*isDataCache=*/true);
  }

  /// laneBias[j][i] = the mask's bias (maskBiasAt) at row i of the tile
  /// (its last row past the op's rows) and key j of the block (the last
  /// key past the keys).
  void transposeMaskBlock(Value batch, Value head, Value tileStart,
                          Value blockStart, Value lastKey) {
    Value mask = op.getMask();
    auto type = cast<MemRefType>(mask.getType());
    Value lastRow = arith::SubIOp::create(
        b, memref::DimOp::create(b, op.getQuery(), 2), cst(1));
    auto keyAt = [&](Value j) -> Value {
      return arith::MinSIOp::create(b, arith::AddIOp::create(b, blockStart, j),
                                    lastKey);
    };
    auto rowAt = [&](Value i) -> Value {
      return arith::MinSIOp::create(b, arith::AddIOp::create(b, tileStart, i),
                                    lastRow);
    };
    // A mask with one row for all (a padding mask: a static 1 in its type,
    // or as the runtime passes it, a row stride of 0 or one row at run
    // time): one load and splat per key (for a keep mask 1.46x the element
    // loop's kernel, that loop being a third of its time).
    auto perKey = [&] {
      forLoop(cst(0), cst(keyBlock), cst(1), [&](Value j) {
        Value bias = splat(maskBiasAt(batch, head, cst(0), keyAt(j)));
        for (int64_t v = 0; v < laneRows / lanes; ++v)
          vector::StoreOp::create(b, bias, scratch.laneBias,
                                  ValueRange{j, cst(v * lanes)});
      });
    };
    if (type.getDimSize(2) == 1)
      return perKey();
    // Element by element, row by row (the mask read along its rows).
    auto byElement = [&] {
      forLoop(cst(0), cst(laneRows), cst(1), [&](Value i) {
        Value row = rowAt(i);
        forLoop(cst(0), cst(keyBlock), cst(1), [&](Value j) {
          memref::StoreOp::create(b, maskBiasAt(batch, head, row, keyAt(j)),
                                  scratch.laneBias, ValueRange{j, i});
        });
      });
    };
    // Row blocks of 16 rows by 16 keys transposed in registers where the
    // keys have unit stride.
    auto byTransposes = [&] {
      if (type.getDimSize(3) == 1 || keyBlock % lanes != 0)
        return byElement();
      ifUnitStride(
          mask,
          [&](Value rowsView) {
            transposeMaskTiles(rowsView, batch, head, blockStart, lastKey,
                               rowAt);
          },
          byElement);
    };
    Value oneRow = arith::OrIOp::create(
        b,
        arith::CmpIOp::create(
            b, arith::CmpIPredicate::eq,
            memref::ExtractStridedMetadataOp::create(b, mask).getStrides()[2],
            cst(0)),
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                              memref::DimOp::create(b, mask, 2), cst(1)));
    auto choice = scf::IfOp::create(b, oneRow, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(choice.thenBlock()->getTerminator());
    perKey();
    b.setInsertionPoint(choice.elseBlock()->getTerminator());
    byTransposes();
  }

  /// In the P·V loop's step at key `j` of the block and the chunk of V's
  /// columns from `first` (`chunkWidth` a chunk, `chunks` of them):
  /// prefetch into L2 lines of row j of the tile at the next key block
  /// (runLineOffsets' of its run), the chunks taking the row's lines in
  /// turn. The tile's runs of the next block are then fetched a few lines
  /// at a time while this block's products run: after each 16 rows' loads
  /// (transposeMaskTiles) they were a burst that the f32 [B, H, S, S] bias
  /// waited on (S = 2048 D = 64 1.11-1.13x faster this way, Zen 5).
  void prefetchMaskLines(Value batch, Value head, Value tileStart,
                         Value blockStart, Value lastKey, Value j, Value first,
                         int64_t chunkWidth, int64_t chunks) {
    Value mask = op.getMask();
    auto type = cast<MemRefType>(mask.getType());
    // (a keep mask's i1 elements are bytes)
    int64_t bytes = std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
    int64_t lines = runLineOffsets(keyBlock, bytes).size();
    int64_t lineElements = std::max<int64_t>(1, 64 / bytes);
    int64_t perChunk = llvm::divideCeil(lines, chunks);
    Value chunk = arith::DivUIOp::create(b, first, cst(chunkWidth));
    Value lastRow = arith::SubIOp::create(
        b, memref::DimOp::create(b, op.getQuery(), 2), cst(1));
    Value row =
        maskIndex(2, arith::MinSIOp::create(
                         b, arith::AddIOp::create(b, tileStart, j), lastRow));
    Value nextBlock = arith::AddIOp::create(b, blockStart, cst(keyBlock));
    for (int64_t t = 0; t < perChunk; ++t) {
      // Line i = chunk·perChunk + t of the run: element min(i·line, 63).
      Value line = arith::AddIOp::create(
          b, arith::MulIOp::create(b, chunk, cst(perChunk)), cst(t));
      Value wanted = arith::AndIOp::create(
          b,
          arith::CmpIOp::create(b, arith::CmpIPredicate::ult, line, cst(lines)),
          arith::CmpIOp::create(b, arith::CmpIPredicate::ult, j,
                                cst(laneRows)));
      auto onlyIf = scf::IfOp::create(b, wanted, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(onlyIf.thenBlock()->getTerminator());
      Value offset = arith::MinSIOp::create(
          b, arith::MulIOp::create(b, line, cst(lineElements)),
          cst(keyBlock - 1));
      Value key = arith::MinSIOp::create(
          b, arith::AddIOp::create(b, nextBlock, offset), lastKey);
      memref::PrefetchOp::create(
          b, mask,
          ValueRange{maskIndex(0, batch), maskIndex(1, head), row,
                     maskIndex(3, key)},
          /*isWrite=*/false, /*localityHint=*/2, /*isDataCache=*/true);
    }
  }

  /// transposeMaskBlock for a mask whose keys have unit stride
  /// (`rowsView`): per 16 rows and 16 keys, 16 row loads of the keys there
  /// are, one 16x16 transpose, 16 stores of a key's 16 rows. A float mask's
  /// rows are vector loads (in a partial block masked, keys past the last
  /// reading 0: the score loop drops them); a keep mask's are loads of its
  /// bytes through a pointer (a vector of i1 is a bit vector in memory, the
  /// mask a byte an element), a non-zero byte a 0 bias and a zero one -inf.
  /// Against the packed path's kernel, D = 128: float 1.74x (the element
  /// loop 1.65x); a keep mask's byte loads 1.37x its element loop (Zen 4).
  void transposeMaskTiles(Value rowsView, Value batch, Value head,
                          Value blockStart, Value lastKey,
                          function_ref<Value(Value)> rowAt) {
    Value mb = maskIndex(0, batch), mh = maskIndex(1, head);
    Value keys = arith::AddIOp::create(b, lastKey, cst(1));
    auto tiles = [&](bool whole) {
      forLoop(cst(0), cst(laneRows), cst(lanes), [&](Value first) {
        SmallVector<Value> rows;
        for (int64_t r = 0; r < lanes; ++r)
          rows.push_back(rowAt(arith::AddIOp::create(b, first, cst(r))));
        forLoop(cst(0), cst(keyBlock), cst(lanes), [&](Value c0) {
          Value key = arith::AddIOp::create(b, blockStart, c0);
          // (One mask of the keys there are for the 16 rows.)
          Value live =
              whole ? Value()
                    : vector::CreateMaskOp::create(
                          b, maskVecType,
                          ValueRange{arith::SubIOp::create(b, keys, key)});
          SmallVector<Value> chunks;
          for (Value row : rows)
            chunks.push_back(maskBiasChunk(rowsView, {mb, mh, row}, key, live));
          SmallVector<Value> columns = transposeTile(chunks);
          for (int64_t c = 0; c < lanes; ++c)
            vector::StoreOp::create(
                b, columns[c], scratch.laneBias,
                ValueRange{arith::AddIOp::create(b, c0, cst(c)), first});
        });
        // What these rows read at the next key block (a partial block is
        // the last): bf16 [B, H, S, S] 1.17x, keep 1.13x, f32 1.04x (Zen 5,
        // D = 64; all the tile's rows after its last loads: as fast in f32,
        // slower in bf16).
        if (whole && !spreadsMaskPrefetch())
          for (Value row : rows)
            prefetchRun(op.getMask(), {mb, mh, row},
                        arith::AddIOp::create(b, blockStart, cst(keyBlock)),
                        keyBlock);
      });
    };
    // Plain loads where the block is whole: with masked loads (dynamic
    // lanes) in every block, an f32 [B, H, S, S] bias's kernel ran 1.33x
    // slower (Zen 5, D = 64; a keep mask's 1.02x).
    auto whole = scf::IfOp::create(
        b,
        arith::CmpIOp::create(
            b, arith::CmpIPredicate::sle,
            arith::AddIOp::create(b, blockStart, cst(keyBlock)), keys),
        /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(whole.thenBlock()->getTerminator());
    tiles(true);
    b.setInsertionPoint(whole.elseBlock()->getTerminator());
    tiles(false);
  }

  /// Keys per step of a lane-rows score loop over `rowVectors` row
  /// vectors: as many as keep `accumulators` accumulators, and a divisor of
  /// keyBlock, so that Sᵀ's steps stay in the block.
  int64_t laneKeyStep(int64_t accumulators, int64_t rowVectors) {
    int64_t step = std::max<int64_t>(1, accumulators / rowVectors);
    while (keyBlock % step != 0)
      --step;
    return step;
  }

  /// The key segments of a lane-rows block the band cuts: segment v,
  /// keys [start[v], start[v + 1]) (block-local), holds the keys that no
  /// row of the row vectors before v sees (`hi0` being row 0's last
  /// allowed key), scored `step[v]` keys at a time (as many as keep
  /// `accumulators` for its rowVectors - v row vectors). The starts are
  /// whole steps of every segment (and of the statistics loop's steps).
  /// Empty where the tile has one row vector or no such step divides the
  /// block.
  struct LaneSegments {
    SmallVector<Value> start;
    SmallVector<int64_t> step;
  };
  LaneSegments laneSegments(Value hi0, int64_t rowVectors,
                            int64_t accumulators) {
    LaneSegments segments;
    int64_t common = statisticsKeys();
    for (int64_t v = 0; v < rowVectors; ++v) {
      int64_t step = laneKeyStep(accumulators, rowVectors - v);
      segments.step.push_back(step);
      common = std::lcm(common, step);
    }
    if (rowVectors < 2 || keyBlock % common != 0)
      return {};
    segments.start.push_back(cst(0));
    for (int64_t v = 1; v < rowVectors; ++v) {
      Value reach = arith::MaxSIOp::create(
          b, arith::AddIOp::create(b, hi0, cst(v * lanes)), cst(0));
      Value rounded = arith::MulIOp::create(
          b,
          arith::DivUIOp::create(
              b, arith::AddIOp::create(b, reach, cst(common - 1)), cst(common)),
          cst(common));
      segments.start.push_back(
          arith::MinSIOp::create(b, rounded, cst(keyBlock)));
    }
    segments.start.push_back(cst(keyBlock));
    return segments;
  }
};

} // namespace

void mlir::attn::cpu::emitLaneRowsHead(const KernelSite &site, Value batch,
                                       Value head, Value kvHead, Value rows,
                                       Value keys) {
  LaneRowsKernel(site).emitLaneRowsHead(batch, head, kvHead, rows, keys);
}
