//===- DirectKernel.cpp - The direct (decoding) CPU micro-kernel
//-----------===//
//
// Tiles of at most `direct-rows` query rows (decoding: Sq = 1) whose K and V
// have unit-stride rows skip the packing, which would cost more than their
// few rows' arithmetic. The rows of all the tile's heads (a GQA group, as
// attn-tile makes for decoding kernels) are buffered, 16 at a time, so that
// each K row is loaded once per key and scored against all of them (a dot
// product, one horizontal sum each; vdpbf16ps on bf16 rows as stored; whole
// groups of 4 rows take register tiles of 4 rows x lanes / 4 keys instead,
// whose sums one transposing tree of shuffles makes one vector of scores). P·V
// takes two rows at a time (16-bit V: four), which share each V vector they
// load: f32 and f16 V rows are read in place (f16 widened as loaded), bf16 V
// rows become key pairs for the dot product as they are loaded (two rows
// unpacked within 128-bit lanes; the accumulators keep the columns in that
// order for the block), or, where Dv is not a multiple of 2 x lanes, once
// per block by interleaving two rows. With `prefetch-bytes`, scoring a key
// prefetches the K and V rows of a key that many bytes of K ahead into L2,
// so that the stream from memory keeps going while the block's softmax and
// P·V run. A key block that a block mask's table leaves out for every row
// of a chunk is skipped.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Cpu/RowAccumulator.h"

#include "lib/Transforms/Passes.h"

#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/SaveAndRestore.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

namespace {

/// Rows of the direct path's score tile: kScoreRows rows x lanes /
/// kScoreRows keys, one vector of scores (4 x 4 on AVX-512, 4 x 2 on AVX2).
constexpr int64_t kScoreRows = 4;
/// Chunks of a row that the direct path's score tiles unroll; longer rows
/// take a loop over their chunks.
constexpr int64_t kUnrolledChunks = 8;

class DirectKernel : public RowAccumulator {
public:
  explicit DirectKernel(const KernelSite &site) : RowAccumulator(site) {
    // P·V reads V in place, each row once per chunk of rows: a pass to
    // find that a block's V is finite would cost what P·V does. Where a
    // row may exclude keys, P·V widens V and drops them (0 · NaN is NaN).
    if (keysMayBeExcluded())
      bf16Values = false;
  }

  /// The direct path for the `group` heads' rows of one key/value head:
  /// chunks of up to kDirectRows rows (head-major), each over all key
  /// blocks. A key's K row is loaded (and widened) once for the chunk's
  /// rows; P·V takes pairs of rows (pairRows), reading V in place or, bf16
  /// with more than one row, from key pairs made once per block.
  void emitDirectGroup(Value batch, Value kvHead, Value firstHead, Value group,
                       Value rows, Value keys, Value keyRows, Value valueRows) {
    Value total = arith::MulIOp::create(b, group, rows);
    // In a kernel for any number of query rows (a dynamic Sq: prefill, one
    // head per tile) the direct path is the fallback for calls of at most
    // direct-rows rows, and takes its plain form: rows scored one at a
    // time, one prefetch pattern. Score tiles and the prefetch split pay
    // for GQA groups, which only decoding kernels (a static Sq) tile by;
    // left out here they took half of the fallback's code.
    bool fallback = cast<MemRefType>(op.getQuery().getType()).isDynamicDim(2);
    // Only the keys the op's rows may see (a causal or windowed op that
    // attn-skip-masked-blocks left whole for the lane-rows path comes here
    // when few rows remain).
    Value firstKey, lastKey;
    std::tie(firstKey, lastKey) = band.keysSomeRowSees(cst(0), rows, keys);
    forLoop(cst(0), total, cst(kDirectRows), [&](Value chunkStart) {
      Value count = arith::MinSIOp::create(
          b, arith::SubIOp::create(b, total, chunkStart), cst(kDirectRows));
      auto position = [&](Value i) -> std::pair<Value, Value> {
        Value r = arith::AddIOp::create(b, chunkStart, i);
        return {arith::AddIOp::create(b, firstHead,
                                      arith::DivUIOp::create(b, r, rows)),
                arith::RemUIOp::create(b, r, rows)};
      };
      forLoop(cst(0), count, cst(1), [&](Value i) {
        Value head, row;
        std::tie(head, row) = position(i);
        forLoop(cst(0), cst(headDim), cst(1), [&](Value d) {
          if (bf16Dot)
            memref::StoreOp::create(
                b,
                memref::LoadOp::create(b, op.getQuery(),
                                       ValueRange{batch, head, row, d}),
                scratch.queryPairs, ValueRange{i, d});
          else
            memref::StoreOp::create(
                b, loadF32(op.getQuery(), {batch, head, row, d}),
                scratch.queryRows, ValueRange{i, d});
        });
      });
      forLoop(firstKey, lastKey, cst(keyBlock), [&](Value blockStart) {
        Value remaining = arith::SubIOp::create(b, lastKey, blockStart);
        Value blockKeys = arith::MinSIOp::create(b, remaining, cst(keyBlock));
        // A key block that the block mask's table leaves out for every row
        // of the chunk (rows of several heads: their entries OR-ed) adds
        // nothing to them: not scored.
        std::optional<OpBuilder::InsertionGuard> inTable;
        if (op->hasAttr(kBlockMaskAttrName)) {
          Value none = arith::ConstantIntOp::create(b, 0, 1);
          Value kept =
              forLoopWith(
                  cst(0), count, cst(1), {none},
                  [&](Value i, ValueRange anyKept) -> SmallVector<Value> {
                    auto [head, row] = position(i);
                    Value entry =
                        blockTableEntries(op, op.getCaptures(), op.getOrigin(),
                                          batch, head, row, cst(1), blockStart,
                                          blockKeys)
                            .first;
                    return {arith::OrIOp::create(b, anyKept[0], entry)};
                  })
                  .front();
          auto ifKept = scf::IfOp::create(b, kept, /*withElseRegion=*/false);
          inTable.emplace(b);
          b.setInsertionPoint(ifKept.thenBlock()->getTerminator());
        }
        emitDirectScores(batch, kvHead, count, keys, blockStart, blockKeys,
                         keyRows, valueRows, /*tiles=*/!fallback);
        // A soft cap (and the scale before it) goes over the chunk's scores
        // in place, in one loop, rather than in each row's update below:
        // its tanh is then compiled once, not once per score vector and
        // row of every variant (24 times in a prefill kernel's direct path).
        bool capFirst = static_cast<bool>(op.getSoftcapAttr());
        if (capFirst)
          forLoop(cst(0), count, cst(1), [&](Value i) {
            forLoop(cst(0), cst(keyBlock), cst(lanes), [&](Value c) {
              Value s = vector::LoadOp::create(b, vecType, scratch.groupScores,
                                               ValueRange{i, c});
              vector::StoreOp::create(b, scaleAndCap(s), scratch.groupScores,
                                      ValueRange{i, c});
            });
          });
        // bf16 V takes the dot product in key pairs when more than one row
        // reads it: made as loaded where whole groups of 2 x lanes columns
        // allow (accumulateByBf16Dot), else once per block into valuePairs.
        // A single row reads V's rows in place, as f32 and f16 rows do (f16
        // widened as loaded: measured faster than widening the block once,
        // even for 16 rows).
        Value shared;
        if (pairedValues()) {
          shared = arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, count,
                                         cst(1));
          auto ifShared = scf::IfOp::create(b, shared);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(ifShared.thenBlock()->getTerminator());
          if (!pairsAsLoaded())
            pairValuesDirect(batch, kvHead, blockStart, blockKeys, valueRows);
        }
        // The online update of `n` rows from `first` (their weights in
        // probs' first n slots); then P·V for them, which share each V
        // vector they load.
        struct Rows {
          SmallVector<AccRow> at;
          SmallVector<Value> alphas;
        };
        auto updateStatistics = [&](Value first, int64_t n) {
          Rows rows;
          for (int64_t r = 0; r < n; ++r) {
            Value i = arith::AddIOp::create(b, first, cst(r));
            auto [head, row] = position(i);
            SmallVector<Value> scores;
            for (int64_t v = 0; v < keyBlock / lanes; ++v)
              scores.push_back(
                  vector::LoadOp::create(b, vecType, scratch.groupScores,
                                         ValueRange{i, cst(v * lanes)}));
            rows.at.push_back({head, row});
            rows.alphas.push_back(updateRowStatistics(
                batch, rows.at.back(), loadStatistics(batch, rows.at.back()),
                /*slot=*/r, scores, blockStart, blockKeys,
                /*storePairs=*/pairedValues(), /*scaledAndCapped=*/capFirst));
          }
          return rows;
        };
        bool valueIsF32 =
            cast<MemRefType>(op.getValue().getType()).getElementType().isF32();
        auto accumulateValues = [&](const Rows &rows, bool prefetchK,
                                    bool prefetchV) {
          auto accumulate = [&](bool byPairs) {
            std::function<Value(Value, int64_t)> rawValues;
            if (byPairs && pairsAsLoaded())
              rawValues = [&](Value j, int64_t group) -> Value {
                return vector::LoadOp::create(
                    b, VectorType::get({2 * lanes}, b.getBF16Type()), valueRows,
                    ValueRange{batch, kvHead,
                               arith::AddIOp::create(b, blockStart, j),
                               cst(group * 2 * lanes)});
              };
            accumulateRows(
                batch, rows.at, rows.alphas, blockKeys, byPairs,
                [&](Value j, int64_t c) -> Value {
                  Value key = arith::AddIOp::create(b, blockStart, j);
                  // The memory stream keeps going while P·V reads the
                  // block from cache: the next block's rows, one key per
                  // key of this one (f32 V: +5-8 % decoding; 16-bit rows
                  // measured no gain).
                  if (c == 0 && (prefetchK || prefetchV) && prefetchKeys > 0 &&
                      valueIsF32) {
                    Value next = arith::MinSIOp::create(
                        b, arith::AddIOp::create(b, key, cst(keyBlock)),
                        arith::SubIOp::create(b, keys, cst(1)));
                    if (prefetchK)
                      prefetchRow(keyRows, {batch, kvHead, next}, headDim);
                    if (prefetchV)
                      prefetchRow(valueRows, {batch, kvHead, next}, valueDim);
                  }
                  return loadRowChunk(valueRows, {batch, kvHead, key},
                                      c * lanes, valueDim);
                },
                rawValues);
          };
          if (!shared)
            return accumulate(false);
          // Two rows or more: the chunk has more than one, so V is shared
          // (the other branch would be dead code, a quarter of a bf16
          // D = 256 decoding kernel's compile time).
          if (rows.at.size() > 1)
            return accumulate(true);
          auto choice = scf::IfOp::create(b, shared, /*withElseRegion=*/true);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(choice.thenBlock()->getTerminator());
          accumulate(true);
          b.setInsertionPoint(choice.elseBlock()->getTerminator());
          accumulate(false);
        };
        if (!pairRows())
          return forLoop(cst(0), count, cst(1), [&](Value i) {
            accumulateValues(updateStatistics(i, 1), true, true);
          });
        Value even = arith::SubIOp::create(
            b, count, arith::RemUIOp::create(b, count, cst(2)));
        // f16 V, widened as loaded, and bf16 V, paired as loaded: 4 rows a
        // pass (over half of a 128-wide row's chunks at a time) widen or
        // pair each V element once, where two pairs of rows did it twice.
        // Decoding kernels only: in a prefill kernel's fallback it gained
        // 2-3 % (f16) for 0.1-0.2 s of compile time.
        Value pairsFrom = cst(0);
        if (quadRows() && !fallback) {
          pairsFrom = arith::SubIOp::create(
              b, count, arith::RemUIOp::create(b, count, cst(kQuadRows)));
          forLoop(cst(0), pairsFrom, cst(kQuadRows), [&](Value i) {
            accumulateValues(updateStatistics(i, kQuadRows), true, true);
          });
        }
        // Where P·V prefetches and several pairs of rows read the block, the
        // first pair asks for the next block's K rows and the others for
        // its V rows: each pass issues half the prefetches (decoding from
        // cache 1.08-1.13x, GQA groups of 8 1.07-1.11x; from memory within
        // the spread) and the memory stream keeps going during both. A
        // single pair, or a left-over odd row, asks for both. The choice is
        // made per pair around P·V alone, so that the softmax is compiled
        // once for the pairs (once in each of the 3 variants, it was a
        // third of an f32 D = 256 kernel's code and compile time).
        Value several;
        if (prefetchKeys > 0 && valueIsF32 && !fallback)
          several =
              arith::CmpIOp::create(b, arith::CmpIPredicate::sge, even, cst(4));
        forLoop(pairsFrom, even, cst(2), [&](Value i) {
          Rows rows = updateStatistics(i, 2);
          if (!several)
            return accumulateValues(rows, true, true);
          auto split = scf::IfOp::create(b, several, /*withElseRegion=*/true);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(split.thenBlock()->getTerminator());
          auto first = scf::IfOp::create(
              b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, i, cst(0)),
              /*withElseRegion=*/true);
          b.setInsertionPoint(first.thenBlock()->getTerminator());
          accumulateValues(rows, true, false);
          b.setInsertionPoint(first.elseBlock()->getTerminator());
          accumulateValues(rows, false, true);
          b.setInsertionPoint(split.elseBlock()->getTerminator());
          accumulateValues(rows, true, true);
        });
        ifOdd(count,
              [&] { accumulateValues(updateStatistics(even, 1), true, true); });
      });
    });
  }

  /// Whether the direct path's P·V takes two rows at a time (probs must
  /// hold two rows).
  bool pairRows() const { return rowBlock >= 2; }
  /// Whether the direct path's P·V takes kQuadRows rows at a time: 16-bit
  /// V widened as loaded (f16, and bf16 where the kernel has no dot
  /// product), and bf16 V paired as loaded (probs and probPairs then hold
  /// kQuadRows rows). Each V row loaded is widened or unpacked for 4 rows,
  /// not 2.
  bool quadRows() {
    Type value = cast<MemRefType>(op.getValue().getType()).getElementType();
    return pairRows() && (value.isF16() || (value.isBF16() && !bf16Values) ||
                          pairsAsLoaded());
  }
  /// Whether the direct path's bf16 P·V makes its key pairs as it loads V
  /// (accumulateByBf16Dot): whole groups of 2 x lanes columns.
  bool pairsAsLoaded() { return pairedValues() && valueDim % (2 * lanes) == 0; }
  /// Whether P·V of the direct path's block takes the bf16 dot product:
  /// bf16 V and no key of the block excluded for some rows only.
  bool pairedValues() { return bf16Values && !bandApplies(); }

  /// groupScores[i][j] = q_i · K[blockStart + j] for the chunk's `count`
  /// rows. With 16 lanes and `tiles`, whole groups of 4 rows take tiles of 4
  /// rows x 4 keys (emitScoreTiles); the other rows go one at a time: per
  /// key, K's row chunks stay in registers across the rows, each score two
  /// accumulator chains (their latency overlaps) and one tree sum. bf16 Q
  /// and K take vdpbf16ps on the rows as stored (consecutive head dims are
  /// the pairs it multiplies), 32 dims per step.
  void emitDirectScores(Value batch, Value kvHead, Value count, Value keys,
                        Value blockStart, Value blockKeys, Value keyRows,
                        Value valueRows, bool tiles) {
    int64_t width = bf16Dot ? 2 * lanes : lanes;
    int64_t chunks = llvm::divideCeil(headDim, width);
    Value queries = bf16Dot ? scratch.queryPairs : scratch.queryRows;
    auto queryType =
        VectorType::get({width}, bf16Dot ? b.getBF16Type() : Type(f32));
    // `width` columns of key `key`'s row from column `col`, of which the
    // first `live` are read (f32 widened; bf16 as stored).
    auto keyChunk = [&](Value key, Value col, int64_t live) -> Value {
      Value raw =
          loadRawChunkAt(keyRows, {batch, kvHead, key}, col, live, width);
      return bf16Dot ? raw : widenToF32(raw);
    };
    auto product = [&](Value acc, Value q, Value k) -> Value {
      return bf16Dot ? Value(x86vector::DotBF16Op::create(b, acc, q, k))
                     : Value(vector::FMAOp::create(b, q, k, acc));
    };
    // The K and V rows prefetchKeys ahead of `key`: by every loop over the
    // block's keys (again when several do: under an scf.if per key the
    // prefetches cost decoding 15 %).
    auto prefetchAhead = [&](Value key) {
      if (prefetchKeys <= 0)
        return;
      // (Sequenced: the IR's order must not depend on which argument a
      // compiler evaluates first.)
      Value wanted = arith::AddIOp::create(b, key, cst(prefetchKeys));
      Value lastKey = arith::SubIOp::create(b, keys, cst(1));
      Value ahead = arith::MinSIOp::create(b, wanted, lastKey);
      prefetchRow(keyRows, {batch, kvHead, ahead}, headDim);
      prefetchRow(valueRows, {batch, kvHead, ahead}, valueDim);
    };
    // Tiles for every K type: bf16/f16 decoding measured 4-8 % faster with
    // them; f32, once P·V prefetched the next block, 2-5 % faster from
    // memory and 7-15 % from cache (it had been 8-12 % slower before). On
    // AVX2 (4 x 2 tiles), where each row's two accumulator chains had left
    // the FMAs waiting on their latency: 1.15x from cache (Zen 3).
    bool useTiles = tiles && lanes % kScoreRows == 0;
    Value tiled = cst(0);
    if (useTiles) {
      tiled = arith::SubIOp::create(
          b, count, arith::RemUIOp::create(b, count, cst(kScoreRows)));
      forLoop(cst(0), tiled, cst(kScoreRows), [&](Value firstRow) {
        emitScoreTiles(firstRow, blockStart, blockKeys, chunks, width, queries,
                       queryType, keyChunk, product, prefetchAhead);
      });
    }
    // The rows left over, one at a time.
    auto leftOver = scf::IfOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::slt, tiled, count));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(leftOver.thenBlock()->getTerminator());
    forLoop(cst(0), blockKeys, cst(1), [&](Value j) {
      Value key = arith::AddIOp::create(b, blockStart, j);
      prefetchAhead(key);
      SmallVector<Value> k;
      for (int64_t c = 0; c < chunks; ++c)
        k.push_back(keyChunk(key, cst(c * width), headDim - c * width));
      forLoop(tiled, count, cst(1), [&](Value i) {
        Value acc[2] = {splat(f32Const(0)), splat(f32Const(0))};
        for (int64_t c = 0; c < chunks; ++c) {
          Value q = vector::LoadOp::create(b, queryType, queries,
                                           ValueRange{i, cst(c * width)});
          acc[c % 2] = product(acc[c % 2], q, k[c]);
        }
        Value sum = horizontalSum(arith::AddFOp::create(b, acc[0], acc[1]));
        memref::StoreOp::create(b, sum, scratch.groupScores, ValueRange{i, j});
      });
    });
  }

  /// Scores of rows [firstRow, firstRow + 4) against the block's keys,
  /// lanes / 4 keys at a time: `lanes` accumulators (4 rows x 4 keys on
  /// AVX-512, 4 x 2 on AVX2) take one FMA (or dot product) per pair of
  /// loaded Q and K chunks, and one transposing tree of shuffles and adds
  /// (15 adds for 16 scores, instead of a horizontal sum each) leaves the
  /// scores in one vector, row-major.
  /// The last group's keys past the block repeat its last key: their
  /// scores land in columns past blockKeys, which the online update
  /// excludes.
  void emitScoreTiles(Value firstRow, Value blockStart, Value blockKeys,
                      int64_t chunks, int64_t width, Value queries,
                      VectorType queryType,
                      function_ref<Value(Value, Value, int64_t)> keyChunk,
                      function_ref<Value(Value, Value, Value)> product,
                      function_ref<void(Value)> prefetchAhead) {
    Value lastKey = arith::SubIOp::create(
        b, arith::AddIOp::create(b, blockStart, blockKeys), cst(1));
    int64_t tileKeys = lanes / kScoreRows;
    forLoop(cst(0), blockKeys, cst(tileKeys), [&](Value j) {
      SmallVector<Value> keys, keyIndex;
      for (int64_t t = 0; t < tileKeys; ++t) {
        keys.push_back(arith::AddIOp::create(
            b, arith::AddIOp::create(b, blockStart, j), cst(t)));
        keyIndex.push_back(arith::MinSIOp::create(b, keys.back(), lastKey));
      }
      // The keys' prefetches, by the first tile of rows only: the others
      // would ask for the same lines again (10 prefetches a key; bf16 MQA
      // decoding, two tiles, 1.01-1.035x on Zen 4).
      {
        auto ifFirst = scf::IfOp::create(
            b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, firstRow,
                                     cst(0)));
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(ifFirst.thenBlock()->getTerminator());
        for (Value key : keys)
          prefetchAhead(key);
      }
      // One chunk of `width` columns from `col` (`live` of them read).
      auto chunkStep = [&](Value col, int64_t live,
                           ValueRange in) -> SmallVector<Value> {
        SmallVector<Value> k, q, acc(in.begin(), in.end());
        for (int64_t t = 0; t < tileKeys; ++t)
          k.push_back(keyChunk(keyIndex[t], col, live));
        for (int64_t r = 0; r < kScoreRows; ++r)
          q.push_back(vector::LoadOp::create(
              b, queryType, queries,
              ValueRange{arith::AddIOp::create(b, firstRow, cst(r)), col}));
        for (int64_t r = 0; r < kScoreRows; ++r)
          for (int64_t t = 0; t < tileKeys; ++t)
            acc[r * tileKeys + t] = product(acc[r * tileKeys + t], q[r], k[t]);
        return acc;
      };
      SmallVector<Value> acc(lanes, splat(f32Const(0)));
      // Up to kUnrolledChunks chunks unrolled; a longer row (f32 D = 256)
      // in a loop over its whole chunks: 16 FMAs an iteration hide the
      // loop's cost, and the code is a sixteenth as long.
      int64_t whole = chunks > kUnrolledChunks ? headDim / width : 0;
      if (whole > 0)
        acc = forLoopWith(cst(0), cst(whole * width), cst(width), acc,
                          [&](Value col, ValueRange in) {
                            return chunkStep(col, width, in);
                          });
      for (int64_t c = whole; c < chunks; ++c)
        acc = chunkStep(cst(c * width), headDim - c * width, acc);
      Value sums = transposedSum(acc);
      for (int64_t r = 0; r < kScoreRows; ++r)
        vector::StoreOp::create(
            b,
            vector::ExtractStridedSliceOp::create(
                b, sums, ArrayRef<int64_t>{r * tileKeys},
                ArrayRef<int64_t>{tileKeys}, ArrayRef<int64_t>{1}),
            scratch.groupScores,
            ValueRange{arith::AddIOp::create(b, firstRow, cst(r)), j});
    });
  }
};

} // namespace

void mlir::attn::cpu::emitDirectGroup(const KernelSite &site, Value batch,
                                      Value kvHead, Value firstHead,
                                      Value group, Value rows, Value keys,
                                      Value keyRows, Value valueRows) {
  DirectKernel(site).emitDirectGroup(batch, kvHead, firstHead, group, rows,
                                     keys, keyRows, valueRows);
}
