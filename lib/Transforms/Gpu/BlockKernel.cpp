//===- BlockKernel.cpp - GPU kernels as loops of a block's threads --------===//
//
// See BlockKernel.h.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Gpu/BlockKernel.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::gpu_kernel;

/// The function argument that `v` is (a slice of): through
/// tensor.extract_slice and the tiling forall's shared outputs.
static BlockArgument rootArgument(Value v) {
  while (true) {
    if (auto slice = v.getDefiningOp<tensor::ExtractSliceOp>()) {
      v = slice.getSource();
      continue;
    }
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg)
      return {};
    auto forall = dyn_cast<scf::ForallOp>(arg.getOwner()->getParentOp());
    if (!forall)
      return arg;
    if (arg.getArgNumber() < forall.getRank())
      return {};
    v = forall.getTiedOpOperand(arg)->get();
  }
}

int BlockKernel::argumentOf(Value v) {
  BlockArgument arg = rootArgument(v);
  if (!arg || !isa<func::FuncOp>(arg.getOwner()->getParentOp()))
    return -1;
  return static_cast<int>(arg.getArgNumber());
}

Value BlockKernel::rebuildScalar(Value v, Operation *user) {
  if (auto dim = v.getDefiningOp<tensor::DimOp>()) {
    std::optional<int64_t> index = dim.getConstantIndex();
    int arg = argumentOf(dim.getSource());
    // A dim of a slice is the argument's only where the slice spans it;
    // the tiling's diagonal reads the arguments themselves.
    if (index && arg >= 0 && isa<BlockArgument>(dim.getSource()))
      return globals[arg].sizes[*index];
  }
  Operation *def = v.getDefiningOp();
  if (def && def->getNumRegions() == 0 && def->getNumResults() == 1 &&
      isa<arith::ArithDialect>(def->getDialect())) {
    IRMapping mapping;
    for (Value operand : def->getOperands()) {
      Value rebuilt = rebuildScalar(operand, user);
      if (!rebuilt)
        return {};
      mapping.map(operand, rebuilt);
    }
    return b().clone(*def, mapping)->getResult(0);
  }
  user->emitOpError("attn-lower-to-gpu: a scalar operand the kernel cannot "
                    "compute from its arguments' sizes");
  return {};
}

LogicalResult BlockKernel::checkArguments(func::FuncOp func, Operation *op) {
  if (func.getNumArguments() != op->getNumOperands())
    return op->emitOpError("attn-lower-to-gpu: the kernel's function takes "
                           "the op's operands as its arguments, found ")
           << func.getNumArguments() << " arguments for "
           << op->getNumOperands() << " operands";
  for (auto [n, operand] : llvm::enumerate(op->getOperands()))
    if (rootArgument(operand) != func.getArgument(n))
      return op->emitOpError("attn-lower-to-gpu: operand ")
             << n << " is not the function's argument " << n
             << ": the kernel's function takes the op's operands as its "
                "arguments, in order";
  for (Type t : func.getArgumentTypes())
    if (!isa<RankedTensorType>(t))
      return op->emitOpError("attn-lower-to-gpu: the kernel's function "
                             "takes tensors, found ")
             << t;
  return success();
}

void BlockKernel::buildKernel(func::FuncOp func, Block &into, int64_t blockRows,
                              function_ref<std::array<Value, 3>()> gridSizes,
                              function_ref<int64_t()> carve,
                              function_ref<void(Value, Value, Value)> body) {
  MLIRContext *ctx = func.getContext();
  SmallVector<Type> params;
  Type i64 = IntegerType::get(ctx, 64);
  globals.clear();
  for (Type t : func.getArgumentTypes()) {
    auto tensor = dyn_cast<RankedTensorType>(t);
    if (!tensor) { // a scalar (dropout's probability or seed), as is
      params.push_back(t);
      Global g;
      g.elementType = t;
      globals.push_back(std::move(g));
      continue;
    }
    Type elem = tensor.getElementType();
    params.push_back(
        MemRefType::get({ShapedType::kDynamic},
                        elem.isInteger(1) ? IntegerType::get(ctx, 8) : elem));
    params.append(2 * tensor.getRank(), i64);
    Global g;
    g.elementType = elem;
    globals.push_back(std::move(g));
  }
  auto type = FunctionType::get(ctx, params, {});
  auto moduleBuilder = OpBuilder::atBlockEnd(&into);
  ownedBuilder = std::make_unique<ImplicitLocOpBuilder>(func.getLoc(), ctx);
  builder = ownedBuilder.get();
  Block *entry;
  Operation *kernel;
  if (host) {
    auto f = func::FuncOp::create(moduleBuilder, func.getLoc(), func.getName(),
                                  type);
    entry = f.addEntryBlock();
    kernel = f;
  } else {
    auto f = gpu::GPUFuncOp::create(moduleBuilder, func.getLoc(),
                                    func.getName(), type);
    f->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
    f.setKnownBlockSizeAttr(DenseI32ArrayAttr::get(
        ctx, {static_cast<int32_t>(blockThreads), 1, 1}));
    // As the attention kernels: ptxas may use the registers the index
    // arithmetic wants (aiming at more resident blocks it spilled on sm_90).
    f->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
               IntegerAttr::get(IntegerType::get(ctx, 32), 1));
    f->setAttr("attn.block_rows", IntegerAttr::get(i64, blockRows));
    entry = &f.getBody().front();
    kernel = f;
  }
  b().setInsertionPointToStart(entry);
  unsigned next = 0;
  for (auto [g, t] : llvm::zip(globals, func.getArgumentTypes())) {
    auto tensor = dyn_cast<RankedTensorType>(t);
    g.data = entry->getArgument(next++);
    if (!tensor)
      continue;
    int64_t rank = tensor.getRank();
    for (SmallVector<Value, 4> *list : {&g.sizes, &g.strides})
      for (int64_t d = 0; d < rank; ++d)
        list->push_back(arith::IndexCastOp::create(b(), b().getIndexType(),
                                                   entry->getArgument(next++)));
  }
  if (host) {
    tid = cst(0);
    carve();
    std::array<Value, 3> grid = gridSizes();
    forLoop(cst(0), grid[2], cst(1), [&](Value z) {
      forLoop(cst(0), grid[1], cst(1), [&](Value y) {
        forLoop(cst(0), grid[0], cst(1), [&](Value x) { body(x, y, z); });
      });
    });
    func::ReturnOp::create(b());
  } else {
    tid = gpu::ThreadIdOp::create(b(), gpu::Dimension::x);
    Value x = gpu::BlockIdOp::create(b(), gpu::Dimension::x);
    Value y = gpu::BlockIdOp::create(b(), gpu::Dimension::y);
    Value z = gpu::BlockIdOp::create(b(), gpu::Dimension::z);
    kernel->setAttr("attn.shared_memory_bytes", b().getI64IntegerAttr(carve()));
    body(x, y, z);
    gpu::ReturnOp::create(b());
  }
  builder = nullptr;
}

int64_t BlockKernel::carveShared(ArrayRef<SharedTile> tiles) {
  Attribute space;
  if (!host)
    space = gpu::AddressSpaceAttr::get(
        b().getContext(), gpu::GPUDialect::getWorkgroupAddressSpace());
  auto size = [](ArrayRef<int64_t> shape) {
    int64_t n = 4;
    for (int64_t d : shape)
      n *= d;
    return static_cast<int64_t>(llvm::alignTo(n, 16));
  };
  int64_t bytes = 0;
  for (const SharedTile &tile : tiles)
    bytes += size(tile.shape);
  auto rawType =
      MemRefType::get({host ? bytes : ShapedType::kDynamic}, b().getI8Type(),
                      MemRefLayoutAttrInterface(), space);
  Value raw =
      host ? memref::AllocaOp::create(b(), rawType).getResult()
           : gpu::DynamicSharedMemoryOp::create(b(), rawType).getResult();
  int64_t offset = 0;
  for (const SharedTile &tile : tiles) {
    auto type = MemRefType::get(tile.shape, b().getF32Type(),
                                MemRefLayoutAttrInterface(), space);
    *tile.view =
        memref::ViewOp::create(b(), type, raw, cst(offset), ValueRange{});
    offset += size(tile.shape);
  }
  return bytes;
}

Value BlockKernel::loadGlobal(const Global &g, ArrayRef<Value> indices) {
  Value v =
      memref::LoadOp::create(b(), g.data, ValueRange{globalIndex(g, indices)});
  if (g.elementType.isInteger(1))
    return arith::CmpIOp::create(
        b(), arith::CmpIPredicate::ne, v,
        arith::ConstantOp::create(b(), b().getI8IntegerAttr(0)));
  return toF32(v);
}

void BlockKernel::storeGlobal(Value v, const Global &g,
                              ArrayRef<Value> indices) {
  if (g.elementType != v.getType())
    v = arith::TruncFOp::create(b(), g.elementType, v);
  memref::StoreOp::create(b(), v, g.data, ValueRange{globalIndex(g, indices)});
}
