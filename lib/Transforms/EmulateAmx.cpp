//===- EmulateAmx.cpp - AMX tile operations as scalar loops ---------------===//
//
// attn-emulate-amx: every AMX tile becomes a stack buffer of its shape and
// every tile operation loops over it, so that an AMX kernel's code (its
// packing, the VNNI layouts it hands the tiles, its block logic) runs and
// is checked on a CPU without AMX. tile_mulf follows tdpbf16ps's
// definition (and tdpfp16ps's, for f16 tiles):
//
//   C[m][n] += Σ_k A[m][2k]·B[k][2n] + A[m][2k+1]·B[k][2n+1]   (f32)
//
// B holds the pairs of its K/2 rows (VNNI), A is row-major. The hardware
// sums in its own order, with denormals flushed; the emulation sums k in
// order: results agree to f32 rounding.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNEMULATEAMXPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;

namespace {

class TileEmulator {
public:
  explicit TileEmulator(ImplicitLocOpBuilder &b) : b(b) {}

  /// A stack buffer with the tile's shape and element type.
  Value buffer(amx::TileType type) {
    return memref::AllocaOp::create(
        b, MemRefType::get(type.getShape(), type.getElementType()));
  }

  /// body(r, c) for every element of a rows x cols tile.
  void forEach(int64_t rows, int64_t cols,
               function_ref<void(Value, Value)> body) {
    forLoop(rows,
            [&](Value r) { forLoop(cols, [&](Value c) { body(r, c); }); });
  }

  void forLoop(int64_t count, function_ref<void(Value)> body) {
    auto loop = scf::ForOp::create(b, cst(0), cst(count), cst(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    body(loop.getInductionVar());
  }

  Value cst(int64_t v) { return arith::ConstantIndexOp::create(b, v); }

  /// The memory position of tile element (r, c) read from `base` at
  /// `indices`: rows along the base's second innermost dim.
  SmallVector<Value> at(ValueRange indices, Value r, Value c) {
    SmallVector<Value> position(indices.begin(), indices.end());
    size_t n = position.size();
    position[n - 2] = arith::AddIOp::create(b, position[n - 2], r);
    position[n - 1] = arith::AddIOp::create(b, position[n - 1], c);
    return position;
  }

  Value zero(amx::TileZeroOp op) {
    amx::TileType type = op.getTileType();
    Value tile = buffer(type);
    Value zero =
        arith::ConstantOp::create(b, b.getZeroAttr(type.getElementType()));
    forEach(type.getDimSize(0), type.getDimSize(1), [&](Value r, Value c) {
      memref::StoreOp::create(b, zero, tile, ValueRange{r, c});
    });
    return tile;
  }

  Value load(amx::TileLoadOp op) {
    auto type = cast<amx::TileType>(op.getRes().getType());
    Value tile = buffer(type);
    copy(type, op.getBase(), op.getIndices(), tile, /*toMemory=*/false);
    return tile;
  }

  void store(amx::TileStoreOp op, Value tile) {
    copy(op.getVal().getType(), op.getBase(), op.getIndices(), tile,
         /*toMemory=*/true);
  }

  /// Every element of a tile between its buffer and memory (`base` at
  /// `indices`), in the direction `toMemory` says.
  void copy(amx::TileType type, Value base, ValueRange indices, Value tile,
            bool toMemory) {
    forEach(type.getDimSize(0), type.getDimSize(1), [&](Value r, Value c) {
      SmallVector<Value> inMemory = at(indices, r, c), inTile = {r, c};
      if (toMemory)
        memref::StoreOp::create(b, memref::LoadOp::create(b, tile, inTile),
                                base, inMemory);
      else
        memref::StoreOp::create(b, memref::LoadOp::create(b, base, inMemory),
                                tile, inTile);
    });
  }

  Value multiply(amx::TileMulFOp op, Value lhs, Value rhs, Value acc) {
    amx::TileType type = op.getAcc().getType();
    int64_t pairs = op.getLhs().getType().getDimSize(1) / 2;
    Value tile = buffer(type);
    Type f32 = b.getF32Type();
    auto element = [&](Value buffer, Value row, Value column) {
      Value stored = memref::LoadOp::create(b, buffer, ValueRange{row, column});
      return arith::ExtFOp::create(b, f32, stored);
    };
    forEach(type.getDimSize(0), type.getDimSize(1), [&](Value m, Value n) {
      Value sum = memref::LoadOp::create(b, acc, ValueRange{m, n});
      Value n2 = arith::MulIOp::create(b, n, cst(2));
      auto loop =
          scf::ForOp::create(b, cst(0), cst(pairs), cst(1), ValueRange{sum});
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(loop.getBody());
        Value k = loop.getInductionVar();
        Value k2 = arith::MulIOp::create(b, k, cst(2));
        Value next = loop.getRegionIterArgs()[0];
        for (int64_t half = 0; half < 2; ++half) {
          Value product = arith::MulFOp::create(
              b, element(lhs, m, arith::AddIOp::create(b, k2, cst(half))),
              element(rhs, k, arith::AddIOp::create(b, n2, cst(half))));
          next = arith::AddFOp::create(b, next, product);
        }
        scf::YieldOp::create(b, next);
      }
      memref::StoreOp::create(b, loop.getResult(0), tile, ValueRange{m, n});
    });
    return tile;
  }

private:
  ImplicitLocOpBuilder &b;
};

struct AttnEmulateAmxPass
    : public mlir::attn::impl::AttnEmulateAmxPassBase<AttnEmulateAmxPass> {
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<amx::TileZeroOp, amx::TileLoadOp, amx::TileMulFOp,
              amx::TileStoreOp>(op))
        ops.push_back(op);
      else if (isa<amx::AMXDialect>(op->getDialect())) {
        op->emitOpError("attn-emulate-amx: no emulation of this operation");
        return signalPassFailure();
      }
    });
    // The walk visits a tile's definition before its uses; a tile that
    // reaches an operation through a block argument (a loop's) is not
    // emulated.
    DenseMap<Value, Value> tiles;
    bool crossed = false;
    auto tileOf = [&](Operation *user, Value tile) {
      Value buffer = tiles.lookup(tile);
      if (!buffer && !crossed) {
        user->emitOpError("attn-emulate-amx: a tile that crosses a block "
                          "(a loop's or a branch's argument) is not "
                          "emulated");
        crossed = true;
      }
      return buffer;
    };
    for (Operation *op : ops) {
      if (crossed)
        return signalPassFailure();
      ImplicitLocOpBuilder b(op->getLoc(), op);
      TileEmulator emulate(b);
      if (auto load = dyn_cast<amx::TileLoadOp>(op)) {
        if (load.getStride()) {
          load.emitOpError("attn-emulate-amx: a load with an explicit "
                           "stride is not emulated");
          return signalPassFailure();
        }
        tiles[load.getRes()] = emulate.load(load);
      } else if (auto store = dyn_cast<amx::TileStoreOp>(op)) {
        if (store.getStride()) {
          store.emitOpError("attn-emulate-amx: a store with an explicit "
                            "stride is not emulated");
          return signalPassFailure();
        }
        if (Value tile = tileOf(op, store.getVal()))
          emulate.store(store, tile);
      } else if (auto zero = dyn_cast<amx::TileZeroOp>(op)) {
        tiles[zero.getRes()] = emulate.zero(zero);
      } else {
        auto mul = cast<amx::TileMulFOp>(op);
        Value lhs = tileOf(op, mul.getLhs()), rhs = tileOf(op, mul.getRhs()),
              acc = tileOf(op, mul.getAcc());
        if (lhs && rhs && acc)
          tiles[mul.getRes()] = emulate.multiply(mul, lhs, rhs, acc);
      }
    }
    if (crossed)
      return signalPassFailure();
    for (Operation *op : llvm::reverse(ops))
      op->erase();
  }
};

} // namespace
