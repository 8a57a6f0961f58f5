//===- Passes.td - The passes of attn's lowering -----------------*- tablegen -*-===//
//
// The stages from attn.attention to a fused kernel, in pipeline order. Each
// pass has a lit test named after it in test/Transforms/.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORMS_PASSES_TD
#define ATTN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def AttnChooseKernelsPass : Pass<"attn-choose-kernels", "func::FuncOp"> {
  let summary = "Choose each attn.attention's micro-kernel and blocking";
  let description = [{
    Records on every `attn.attention` without one the `#attn.kernel` that
    the target takes (lib/Transforms/KernelChoice.h holds the heuristics,
    each with its measurement): on a CPU (`target` an LLVM x86 CPU name,
    `features` on top) the packed or lane-rows micro-kernel, the query
    tile, key block, row block, lane-rows tile and the bf16 dot product
    (AVX-512 BF16, where it outruns widening bf16 to f32: AMD's cores, not
    Intel's; not for prefill with a keep mask); on a GPU (`target` sm_80, sm_90, ...) mma.sync for
    16-bit inputs or FMA, the thread block's rows and the key tile. The
    tiling and lowering passes after it read the choice and make none of
    their own; a choice already on an op (written by hand) stays. The
    other options fix a choice, as attn-compile's flags do (0, or -1 for
    lane-rows: chosen).
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"x86-64-v4\"",
           "An LLVM x86 CPU (znver4, sapphirerapids, x86-64-v3, ...) or a "
           "CUDA architecture (sm_80, sm_90, ...)">,
    Option<"features", "features", "std::string", /*default=*/"\"\"",
           "CPU features on top of the CPU's (+x,-y)">,
    Option<"queryTile", "query-tile", "int64_t",
           /*default=*/"::mlir::attn::CpuKernelOverrides{}.queryTile",
           "CPU: query rows per work item">,
    Option<"bandedQueryTile", "banded-query-tile", "int64_t",
           /*default=*/"::mlir::attn::CpuKernelOverrides{}.bandedQueryTile",
           "CPU: query rows per work item of causal or windowed ops (0: "
           "chosen)">,
    Option<"keyBlock", "key-block", "int64_t", /*default=*/"0",
           "Keys per block of the key loop (0: chosen)">,
    Option<"rowBlock", "row-block", "int64_t", /*default=*/"0",
           "CPU: query rows per packed block (0: chosen)">,
    Option<"laneRows", "lane-rows", "int64_t",
           /*default=*/"::mlir::attn::CpuKernelOverrides{}.laneRows",
           "CPU: rows of a lane-rows tile (-1: chosen, 0: off)">,
    Option<"decodeRows", "decode-rows", "int64_t",
           /*default=*/"::mlir::attn::CpuKernelOverrides{}.decodeRows",
           "CPU: ops of a static Sq up to this are decoding kernels">,
    Option<"warps", "warps", "int64_t",
           /*default=*/"::mlir::attn::GpuKernelOverrides{}.warps",
           "GPU: warps per thread block">,
    Option<"rowsPerWarp", "rows-per-warp", "int64_t",
           /*default=*/"::mlir::attn::GpuKernelOverrides{}.rowsPerWarp",
           "GPU: query rows per warp, 16 or 32 (32 for 16-bit inputs with "
           "Dv <= 128 only; others keep 16)">,
    Option<"mma", "mma", "bool",
           /*default=*/"::mlir::attn::GpuKernelOverrides{}.mma",
           "GPU: tensor-core mma.sync for 16-bit inputs (else FMA)">,
  ];
}

def AttnDecomposeMhaPass : Pass<"attn-decompose-mha", "func::FuncOp"> {
  let summary = "Rewrite attn.mha as linalg matmuls around attn.attention";
  let description = [{
    Rewrites every `attn.mha` (a multi-head attention layer) as an
    `scf.forall` over batches, each iteration one batch: the query, key and
    value projections as `linalg.matmul` (the weight transposed, an f32
    accumulator holding the bias, rounded to the element type), the head
    split as `tensor.expand_shape` and `linalg.transpose` into
    `[1, H, S, E/H]`, `attn.attention` with the op's mask slice and
    attributes, the head merge, and the output projection written in place
    into the output's batch. A batch is the unit of work because the heads
    meet again in the output projection. The intermediates are heap
    buffers (`bufferization.to_tensor` of a `memref.alloc`) that the
    iteration frees at its end: they are O(S·E), too large for the stack.
    The attention is left whole, for `attn-tile` and the passes after it.
  }];
  let dependentDialects = ["scf::SCFDialect", "tensor::TensorDialect",
                           "linalg::LinalgDialect", "memref::MemRefDialect",
                           "bufferization::BufferizationDialect",
                           "arith::ArithDialect"];
}

def AttnTilePass : Pass<"attn-tile", "func::FuncOp"> {
  let summary = "Tile attn.attention over its parallel dims (B, Hq, Sq)";
  let description = [{
    Tiles every `attn.attention` through its `TilingInterface` into an
    `scf.forall` over batches, query heads and query tiles; each iteration
    computes one tile with an `attn.attention` on slices. The tiled op reads
    its key/value head `h / G` and carries the causal diagonal as an operand
    in its own coordinates, so masks stay exact. With `group-rows` = N, an
    op whose static Sq is at most N (a decoding kernel) is tiled by whole
    GQA groups instead of single heads: one work item per key/value head,
    whose G query heads then read each K/V block once from memory. A group
    of more than 16 heads (the tile's state is G x Sq rows on the stack) is
    tiled by its largest divisor up to 16 (a power of two where G is
    dynamic): G = 32 reads each K/V block twice, not 32 times. The key
    dimension is left whole: it is a reduction that only the online form
    can tile. The other ops tile the same way over their own parallel dims:
    `attn.attention_backward` and `attn.linear` by batch and key/value head
    (a work item owns the key/value head's gradients, or its state, and the
    query heads of its group), `attn.attention_weights` by batch, query head
    and query tile, `attn.additive` by batch and query tile,
    `attn.additive_backward` by batch and part of the query rows (each
    part's partial sums its own).

    For the GPU (`block-mapping`), the forall carries `#gpu.block<z>`,
    `#gpu.block<y>`, `#gpu.block<x>` for batch, head and query tile: the
    launch grid always has those three dimensions, so none may be folded
    away when a static size leaves it one iteration.

    An op's `#attn.kernel` (attn-choose-kernels) gives its row tile
    (`query_tile`); without one, ops with a causal or window band may take
    a smaller row tile (`banded-query-tile-size`) than the others: on the CPU a larger tile repacks each K/V block for more
    rows, while near the diagonal it computes more scores that the band
    then drops.
  }];
  let options = [
    Option<"queryTileSize", "query-tile-size", "int64_t",
           /*default=*/"::mlir::attn::defaults::kQueryTileRows",
           "Query rows per tile (one work item of the kernel)">,
    Option<"bandedQueryTileSize", "banded-query-tile-size", "int64_t",
           /*default=*/"0",
           "Query rows per tile of causal or windowed ops (0: "
           "query-tile-size): a tile across the diagonal computes scores "
           "that the band then drops, about half a tile's square">,
    Option<"groupRows", "group-rows", "int64_t", /*default=*/"0",
           "Tile query heads by whole GQA groups when Sq is at most this "
           "(decoding), so that a group's heads share each K/V load, and "
           "make a smaller static Sq the row tile; 0: one query head per "
           "tile">,
    Option<"blockMapping", "block-mapping", "bool", /*default=*/"false",
           "Map the forall to GPU thread blocks (z = batch, y = query "
           "head, x = query tile): attn-lower-to-gpu reads each index's "
           "block id from it, and canonicalization keeps its dims of one "
           "iteration (a static Sq of one tile, B = 1), which the grid "
           "still has">,
  ];
  let dependentDialects = ["scf::SCFDialect", "tensor::TensorDialect",
                           "arith::ArithDialect", "affine::AffineDialect",
                           "gpu::GPUDialect"];
}

def AttnOnlineSoftmaxPass : Pass<"attn-online-softmax", "func::FuncOp"> {
  let summary = "Rewrite attn.attention as FlashAttention's online softmax";
  let description = [{
    Replaces each `attn.attention` by the online-softmax recurrence: a
    running row maximum (initialised to -inf), a running row sum (0) and an
    f32 accumulator (0), updated by `attn.online_attention` over the keys,
    then one normalization: `O = acc / sum` (0 for rows with no allowed key),
    `LSE = max + log(sum)` (-inf for those rows), rounded once to the output
    type. Tiling the keys (`attn-tile-keys`) then turns the update into the
    key loop with the rescale by `exp(m_old - m_new)`.
  }];
  let dependentDialects = ["linalg::LinalgDialect", "tensor::TensorDialect",
                           "arith::ArithDialect", "math::MathDialect",
                           "bufferization::BufferizationDialect"];
}

def AttnSplitKeysPass : Pass<"attn-split-keys", "ModuleOp"> {
  let summary = "Split a decoding kernel's keys into ranges and merge them";
  let description = [{
    For each function marked `attn.split_keys` (a tiled kernel after
    `attn-online-softmax`: one `scf.forall` holding one
    `attn.online_attention`), splits each work item's keys into `%splits`
    ranges, so that a decoding call with fewer GQA groups than threads still
    fills every core (FlashDecoding). Two phases:

    - the kernel `<f>(args..., %acc_ws, %max_ws, %sum_ws, %splits)` is the
      partial phase: its forall gets one more dimension, the key range,
      whose online op reads that range of K, V and the mask (its diagonal
      moved by the range's first key); after its own epilogue (O, LSE) it
      copies the range's unnormalized state to the f32 workspace
      (`[B, Hq, Sq, splits, Dv]` for `acc`, `[B, Hq, Sq, splits]` for `max`
      and `sum`);
    - `<f>_merge(args..., %acc_ws, %max_ws, %sum_ws, %splits)`: the
      kernel's forall with its online op replaced by the combination of the
      ranges' states (`m = max m_s`, `w_s = exp(m_s - m)`, 0 for an empty
      range; `sum = Σ w_s sum_s`, `acc = Σ w_s acc_s`), then the kernel's
      own normalization into O and LSE.

    With one range the partial phase computes what the kernel did, so the
    micro-kernel is compiled once: a caller that does not split points the
    workspace at a scratch row (strides 0), one that splits points O and
    LSE at one. A range is `ceil(Sk / splits)` keys rounded up to
    `key-multiple` (the ops' chosen `key_block` replaces it), so that
    masked-block skipping aligns a range's key tiles as it would the whole
    sequence's; trailing ranges may be empty.
  }];
  let options = [
    Option<"keyMultiple", "key-multiple", "int64_t", /*default=*/"1",
           "Round each range's key count up to a multiple of this (the key "
           "tile)">,
  ];
  let dependentDialects = ["scf::SCFDialect", "tensor::TensorDialect",
                           "linalg::LinalgDialect", "arith::ArithDialect",
                           "math::MathDialect", "func::FuncDialect"];
}

def AttnBlockTablePass : Pass<"attn-block-table", "ModuleOp"> {
  let summary = "Give a kernel with a block table a function that fills it";
  let description = [{
    For each function marked `attn.kernel` whose `attn.attention` has a
    `mask_mod` and a block table (`attn.block_mask = array<i64: capture,
    QB, KB>`, docs/spec.md "Score and mask modifiers" 7), adds
    `@<f>_block_table(%q, %k, %captures...)`, a kernel on memrefs (any
    strides) that writes the table from the `mask_mod`: one work item per
    table row `(tb, th, qb)`, and per key block the entry 0 (the `mask_mod`
    keeps no position of the block within `Sq` and `Sk`), 2 (it keeps all
    `QB × KB`) or 1, evaluated 16 keys at a time. A table dim of 1 where
    the call's `B` or `Hq` is larger covers every batch or head (each is
    evaluated, unless the `mask_mod` does not read that index). The op's
    causal band and window are evaluated with the `mask_mod` (a band that
    `attn-band-from-mask-mod` moved out of it, or the whole of a
    `mask_mod` it removed). Runs before tiling; Q, K and the captures must
    be the function's arguments. The runtime's `attn_fill_block_table`
    calls it.
  }];
  let dependentDialects = ["scf::SCFDialect", "vector::VectorDialect",
                           "memref::MemRefDialect", "arith::ArithDialect",
                           "math::MathDialect", "func::FuncDialect"];
}

def AttnBandFromMaskModPass : Pass<"attn-band-from-mask-mod"> {
  let summary = "Move the causal band or window a mask_mod states to attributes";
  let description = [{
    A `mask_mod` that keeps `(i, j)` only where `j − i` lies in
    `[−left, right]` (for example `arith.cmpi sge, %i, %j`, causal, or
    `|i − j| <= 256` written with `arith.maxsi`), alone or as conjuncts
    (`arith.andi`) of a larger mask, states what the `causal` and `window`
    attributes state: the indices are global, so it is their top-left
    diagonal. Such conjuncts become the attributes (causal for
    `right = 0` with no left bound, else `#attn.window`), leave the region,
    and a mask_mod with nothing left leaves the op. `attn-skip-masked-blocks`
    and the micro-kernels then skip the keys outside the band instead of
    evaluating the mask score by score: a causal mask_mod runs as fast as
    the causal attribute. Ops with a causal or window attribute already, and
    bands with a negative side (`j < i`), stay as they are.
  }];
  let dependentDialects = ["arith::ArithDialect"];
}

def AttnSkipMaskedBlocksPass : Pass<"attn-skip-masked-blocks", "func::FuncOp"> {
  let summary = "Visit only the keys that causal masks and windows allow";
  let description = [{
    Splits each causal or windowed `attn.online_attention` by key ranges
    computed from its diagonal and query count: keys that no query row may
    see are dropped, keys that every row may see go to an op without the
    causal and window attributes (no mask arithmetic), and only the narrow
    boundary ranges keep them. After tiling, a query tile's key loop starts
    and ends where its allowed keys do: causal attention costs about half
    of full attention, and a sliding window is linear in the sequence length.

    With `key-alignment` = the key tile size, the unmasked range is
    shrunk to multiples of it (its ends go to the masked ranges), so that
    its key tiles are all whole: otherwise a causal query tile at row r0
    sees keys [0, r0 + 1) unmasked, and its last key tile holds one key
    but costs as much as a full one. An op's chosen key block
    (`#attn.kernel`'s `key_block`) replaces a nonzero `key-alignment`.

    With `whole-ops` (the CPU pipeline with lane rows on, whose key loops
    are not tiled), ops stay whole: attn-lower-to-vector's micro-kernels
    clamp each query tile's key loop to the band themselves and apply it
    only in the key blocks that cross it, so splitting would only emit each
    micro-kernel once per part (compile time: a windowed kernel's code
    is then about half as large) and, on the lane-rows path, transpose
    each tile's Q and O in and out once per part.
  }];
  let options = [
    Option<"keyAlignment", "key-alignment", "int64_t", /*default=*/"0",
           "Round the unmasked key range inward to multiples of this "
           "(the key tile size; 0: exact ranges)">,
    Option<"wholeOps", "whole-ops", "bool", /*default=*/"false",
           "Leave causal and windowed ops whole: attn-lower-to-vector walks "
           "only the keys each query tile sees and applies the band only "
           "in the key blocks across it">,
  ];
  let dependentDialects = ["tensor::TensorDialect", "arith::ArithDialect"];
}

def AttnTileKeysPass : Pass<"attn-tile-keys", "func::FuncOp"> {
  let summary = "Tile attn.online_attention's keys as a reduction loop";
  let description = [{
    Tiles the key dimension of every `attn.online_attention` through its
    `TilingInterface` into an `scf.for` whose iteration arguments are the
    running accumulator, maximum and sum: FlashAttention's key loop. No score
    buffer larger than one query tile by one key tile exists after this.
    An op's `#attn.kernel` (attn-choose-kernels) gives its key tile
    (`key_block`) in place of the option (chosen per kernel, e.g. smaller
    for large f32 head dims on the GPU).
  }];
  let options = [
    Option<"keyTileSize", "key-tile-size", "int64_t",
           /*default=*/"::mlir::attn::defaults::kKeyBlock",
           "Keys per tile of the reduction loop">,
  ];
  let dependentDialects = ["scf::SCFDialect", "tensor::TensorDialect",
                           "arith::ArithDialect", "affine::AffineDialect"];
}

def AttnBufferizePass : Pass<"attn-bufferize", "ModuleOp"> {
  let summary = "One-shot bufferization with the kernels' conventions";
  let description = [{
    Runs One-Shot Module Bufferize with the conventions attn's kernels need:
    function arguments get fully dynamic strided layouts (a kernel accepts
    any caller strides, e.g. [B, S, H, D] buffers), results equivalent to
    arguments are dropped (outputs are written in place), and temporary
    buffers — the per-tile softmax state — are stack allocations, which
    `attn-outline-work-items` scopes to their tile.
  }];
  let dependentDialects = ["memref::MemRefDialect",
                           "bufferization::BufferizationDialect"];
}

def AttnLowerToVectorPass : Pass<"attn-lower-to-vector", "func::FuncOp"> {
  let summary = "Lower bufferized attn.online_attention to a vector micro-kernel";
  let description = [{
    Lowers each `attn.online_attention` on memrefs to loops over its query
    rows and key blocks in the `vector` dialect: K packed transposed and V
    packed row-major (in f32) into stack buffers the micro-kernel streams
    through, scores of one row as `vector-width`-lane FMAs broadcasting each
    query element, soft-capping, masks and the causal/window bounds as lane
    selects, one `math.exp` per score, the running max/sum update and the
    rescaled P·V accumulation into the accumulator rows. Scratch buffers are
    static and placed at the function's entry. With `bf16-dot`, bf16 Q·Kᵀ
    uses `x86vector.avx512.dot` (vdpbf16ps) on K packed as bf16 pairs, two
    head dims per step; lower with `convert-vector-to-llvm=enable-x86vector`;
    bf16 V is packed as key pairs and P·V takes the dot product too. In a
    key block that a causal or window band cuts, each block of rows walks
    only the keys its rows see, in steps of `band-key-step` keys, and P·V
    takes the dot product on the keys that all its rows see; the few at
    either edge that some of its rows exclude take f32 FMAs that drop an
    excluded key's V (a NaN stays out). Where a mask operand or the
    modifiers may exclude keys, each packed V block is checked once for an
    inf or NaN (its elements times 0, summed): a finite block takes P·V as
    an unmasked op does, one with an inf or NaN drops each row's excluded
    keys in f32; a block's mask row is read by vector loads where the mask's
    rows have unit stride. Tiles of at most `direct-rows` rows
    (decoding) read K's and V's rows in place when their innermost stride
    is 1 (checked at run time), no
    packing: the rows of all the tile's heads (a GQA group) share each K row
    load (a dot product per score; vdpbf16ps for bf16; with 16-bit K,
    tiles of 4 rows x 4 keys whose 16 sums one transposing tree of shuffles
    makes one vector), and pairs of rows (four over 16-bit V) share
    each V load (bf16 V as key pairs for the dot product, made as two rows
    are loaded by unpacks within 128-bit lanes, the accumulators keeping
    the columns in that order for the block, or, where Dv is not a
    multiple of 2 x `vector-width`, once per block; f32 and f16 V read in
    place). With
    `prefetch-bytes`, the direct path prefetches, while it scores a key,
    the K and V rows of the key that many bytes of K ahead into L2 (the
    hardware prefetcher alone left decoding at 60-70 % of the memory
    bandwidth), and the lane-rows path, reading f32 K and V in place,
    prefetches the next key block's rows as P·V steps over its keys. An
    op's `#attn.kernel` (attn-choose-kernels) gives its micro-kernel
    (`packed`, `lane_rows` or `amx`), `key_block`, `row_block`,
    `lane_rows` and `bf16_dot` in place of the options; the ops of one
    function share its scratch buffers and must agree on the blocking.
    The micro-kernels are lib/Transforms/Cpu/*Kernel.cpp; the backward,
    weights, linear and additive attention ops (`attn.linear`: chunkwise
    products over an f32 state, LinearKernel.cpp; `attn.additive`: tanh
    scores with the keys in vector lanes, and `attn.additive_backward`:
    the projections' gradients in three passes, AdditiveKernel.cpp) have their
    own; with `recompute-bf16-dot` (and `bf16-dot`), the two that recompute
    the scores take vdpbf16ps for bf16 operands: the weights' S = Q·Kᵀ and
    all five of the backward's products (P and dS rounded to bf16 where
    they are operands), on bf16 rows and blocks packed as pairs.

    With `lane-rows` (a multiple of `vector-width`), ops without the bf16
    dot product take the lane-rows micro-kernel (a mask operand, score and
    mask modifiers and dropout included; each key block's mask transposed
    into a [key][row] bias buffer): a
    tile of that many query rows lives in vector lanes (Qᵀ scaled and the
    accumulator Oᵀ transposed into stack buffers once per tile), the scores
    of a key block are made transposed, Sᵀ[key][rows], as FMAs of broadcast
    K elements read in place (16-bit K and V widened a block at a time into
    f32 buffers first), the max, exp and sum run vertically down the
    keys (no horizontal reductions), and P·V is FMAs of broadcast V elements
    against vectors of weights. Causal and window bands are lane compares;
    an excluded key leaves the accumulator untouched (NaN V rows stay out).

    An op whose `#attn.kernel` is `amx` (bf16 Q, K and V; D a multiple of
    32, Dv of 16; AVX-512) takes the packed path with blocks of 16 rows
    whose two products are `amx` dialect tile operations: the block's Q
    rows copied into a bf16 buffer (the left tiles), the K pairs and V key
    pairs as packed for the dot product (the right tiles' VNNI layout),
    Q·Kᵀ as 16 x 16 f32 tiles summed over D 32 at a time and stored for the
    softmax's AVX-512 update, p stored as bf16, and P·V as 16 x 16 f32
    tiles summed over the block's keys 32 at a time, which each row adds
    to its rescaled accumulator. At most 6 tiles are live, none across a
    loop. A block that a band cuts takes the packed path's P·V (the bf16
    dot product where every row sees the keys). Lower with
    `convert-vector-to-llvm="enable-amx enable-x86vector"` and a target
    with `amx-tile`, `amx-bf16` and `avx512bf16`, or run
    `attn-emulate-amx` first.
  }];
  let options = [
    Option<"vectorWidth", "vector-width", "int64_t",
           /*default=*/"::mlir::attn::defaults::kVectorWidth",
           "f32 lanes per vector (16 for AVX-512, 8 for AVX2)">,
    Option<"keyBlock", "key-block", "int64_t",
           /*default=*/"::mlir::attn::defaults::kKeyBlock",
           "Keys packed and scored per block (a multiple of vector-width)">,
    Option<"bandKeyStep", "band-key-step", "int64_t", /*default=*/"0",
           "Keys per step in the packed blocks that a causal or window band "
           "cuts: each block of rows steps only over the keys it sees (a "
           "multiple of vector-width dividing key-block; 0: the largest such "
           "up to 64)">,
    Option<"rowBlock", "row-block", "int64_t",
           /*default=*/"::mlir::attn::defaults::kRowBlock",
           "Query rows that share each packed K and V vector load">,
    Option<"directRows", "direct-rows", "int64_t",
           /*default=*/"::mlir::attn::defaults::kDecodeRows",
           "Tiles of at most this many query rows (decoding) whose K and V "
           "rows have unit stride read K and V in place instead of packing "
           "them (0: always pack)">,
    Option<"prefetchDistance", "prefetch-bytes", "int64_t",
           /*default=*/"::mlir::attn::defaults::kPrefetchBytes",
           "Bytes of K ahead of the row being scored whose K and V rows the "
           "direct path prefetches into L2; unless 0, the lane-rows path "
           "prefetches the next key block's f32 K and V rows (0: none)">,
    Option<"laneRows", "lane-rows", "int64_t", /*default=*/"0",
           "Query rows per tile of the lane-rows path (rows in vector "
           "lanes; a multiple of vector-width; 0: off)">,
    Option<"bf16Dot", "bf16-dot", "bool", /*default=*/"false",
           "Q·Kᵀ of bf16 inputs by AVX-512 BF16's dot product (vdpbf16ps; "
           "x86vector.avx512.dot)">,
    Option<"recomputeBf16Dot", "recompute-bf16-dot", "bool", /*default=*/"false",
           "With bf16-dot and vector-width 16, the products of bf16 "
           "operands in attn.attention_backward (all five) and "
           "attn.attention_weights (S = Q·Kᵀ) by the dot product">,
  ];
  let dependentDialects = ["vector::VectorDialect", "x86vector::X86VectorDialect",
                           "amx::AMXDialect", "scf::SCFDialect",
                           "memref::MemRefDialect", "arith::ArithDialect",
                           "math::MathDialect", "LLVM::LLVMDialect"];
}

def AttnEmulateAmxPass : Pass<"attn-emulate-amx", "func::FuncOp"> {
  let summary = "Run AMX tile operations as scalar loops (for tests)";
  let description = [{
    Replaces each `amx.tile_zero`, `amx.tile_load`, `amx.tile_mulf` (bf16)
    and `amx.tile_store` by loops over a stack buffer that holds the tile:
    a load copies the tile's rows, a store writes them back, and a
    multiply computes, as `tdpbf16ps` defines it, C[m][n] += Σ_k
    A[m][2k]·B[k][2n] + A[m][2k+1]·B[k][2n+1] in f32 (B's VNNI pairs). An
    AMX kernel's packing, layouts and block logic then run, slowly, on any
    x86-64 CPU: the conformance suite checks the AMX path's code with it
    where the CPU has no AMX. Only the sums' rounding differs from the
    hardware's (f32 sums in another order).
  }];
  let dependentDialects = ["scf::SCFDialect", "memref::MemRefDialect",
                           "arith::ArithDialect"];
}

def AttnVectorizeRowsPass : Pass<"attn-vectorize-rows", "func::FuncOp"> {
  let summary = "Vectorize elementwise epilogues along their static rows";
  let description = [{
    Rewrites each elementwise `linalg.generic` on buffers whose innermost
    dim is static (the kernels' epilogue: O = acc / sum, 0 for a row that
    saw no key, converted to the output type) as loops over its outer dims
    and, along the innermost dim, chunks of `vector-width` lanes (the last
    one masked): full operands are loaded as vectors, operands indexed
    without the innermost dim (a row's max and sum) and scalars from above
    are broadcast, and the body's arith and math ops apply to vectors. A
    full operand whose innermost stride is not statically 1 (the caller's
    output) is checked at run time; where it is not 1, the op runs as it
    was. Other generics are left to convert-linalg-to-loops (LLVM's
    vectorizer took 4 lanes for a bf16 output, 16 for f32).
  }];
  let options = [
    Option<"vectorWidth", "vector-width", "int64_t",
           /*default=*/"::mlir::attn::defaults::kVectorWidth",
           "Lanes per vector chunk (16 for AVX-512, 8 for AVX2)">,
  ];
  let dependentDialects = ["vector::VectorDialect", "scf::SCFDialect",
                           "memref::MemRefDialect", "arith::ArithDialect"];
}

def AttnOutlineWorkItemsPass : Pass<"attn-outline-work-items", "ModuleOp"> {
  let summary = "Expose a kernel's parallel tiles as work items";
  let description = [{
    For each function marked `attn.kernel`, turns its top-level `scf.forall`
    into two functions a host thread pool can drive: `<name>_work_items`
    (the number of iterations, from the argument sizes) and `<name>_run`
    (iterations `[begin, end)`, each delinearized back to the forall's
    indices). Other functions get their `scf.forall` as a serial `scf.for`.
    Each iteration's stack allocations are scoped to it.
  }];
  let dependentDialects = ["scf::SCFDialect", "memref::MemRefDialect",
                           "arith::ArithDialect", "affine::AffineDialect",
                           "func::FuncDialect"];
}

def AttnApproximateMathPass : Pass<"attn-approximate-math"> {
  let summary = "Inline polynomial approximations of exp, tanh and log";
  let description = [{
    Replaces `math.exp`, `math.tanh` and `math.log` (scalar and vector, f32)
    by upstream MLIR's polynomial approximations, so that the kernel calls no
    libm function and the softmax's exponentials vectorize. The
    approximations keep exp(-inf) = 0, which fully masked scores rely on.
    It runs on any op (a `func.func` on the CPU, a `gpu.module` on the GPU).
    With `nvvm`, scalar f32 exp and log become NVIDIA's approximate `ex2`
    and `lg2` instructions (LLVM intrinsics, no libdevice) and tanh is
    expressed through that exp. With `avx512`, exp of `vector<16xf32>`
    takes AVX-512's `vscalefps` for the power of two and a degree-6
    polynomial (about 12 instructions instead of 20; relative error 7.9e-8
    measured on [-87, 88]), still exact at the ends: exp(-inf) = 0,
    exp(+inf) = +inf, NaN stays NaN. `math.exp2` of `vector<16xf32>`, which
    the CPU softmax takes, needs no range-reduction multiply or FMAs there
    (n = round(x), r = x - n exactly; 10 instructions, relative error 7.9e-8
    on [-126, 0]), and where the op carries `attn.nonpositive` (an operand
    never above 0, as the softmax's s - m') no upper clamp. Other f32 exp2
    become exp(x ln 2).

    With `bf16-by-integers`, conversions between f32 and bf16 (scalar and
    vector) become integer operations: f32 to bf16 rounds to nearest even
    (NaN to a quiet NaN), bf16 to f32 is a shift. For CPUs without a bf16
    conversion instruction (AVX-512 BF16, AVX-NE-CONVERT), where LLVM
    rounds each element by a call to `__truncsfbf2`.
  }];
  let options = [
    Option<"nvvm", "nvvm", "bool", /*default=*/"false",
           "Use NVIDIA's ex2/lg2 approximate instructions for scalar f32">,
    Option<"avx512", "avx512", "bool", /*default=*/"false",
           "exp of vector<16xf32> by AVX-512's vscalefps (CPUs with "
           "AVX-512F)">,
    Option<"bf16ByIntegers", "bf16-by-integers", "bool", /*default=*/"false",
           "f32 <-> bf16 conversions by integer operations (CPUs without "
           "AVX-512 BF16 or AVX-NE-CONVERT)">,
  ];
  let dependentDialects = ["arith::ArithDialect", "math::MathDialect",
                           "vector::VectorDialect", "LLVM::LLVMDialect"];
}

def AttnLowerToGpuPass : Pass<"attn-lower-to-gpu", "ModuleOp"> {
  let summary = "Map tiled attention to a GPU kernel: blocks, warps, MMA";
  let description = [{
    Turns each function tiled by `attn-tiling` (an `scf.forall` over batch,
    query head and query tile whose body runs the online-softmax key loops)
    into a `gpu.func` kernel in a `gpu.module`, FlashAttention-2 style:

    - one thread block per (query tile, query head, batch): grid
      `(ceil(Sq / tile), Hq, B)`, the forall's indices become block ids;
    - `tile / R` warps, each owning R = 16 or 32 query rows (the kernel's
      `row_block`, 0 meaning 16; else `rows-per-warp`); every thread holds
      its rows' scores, running max and sum and its part of the f32
      accumulator in registers, in the fragment layout of the m16n8k16
      matrix multiply for each block of 16 rows (rows `lane / 4` and `+8`,
      columns `2 (lane % 4)`); with 32 rows each K and V operand feeds two
      MMAs;
    - the query tile is staged in shared memory once per key loop, each
      key/value tile once per iteration (dynamic shared memory, rows padded
      against bank conflicts, zero-filled past the sequence and head dims),
      on the tensor-core path by 16-byte `cp.async` copies where the
      tensor's innermost stride is 1 and its other strides and pointer are
      16-byte aligned (decided once per launch), element by element
      otherwise;
    - f16 and bf16: `Q·Kᵀ` and `P·V` on tensor cores (`nvvm.mma.sync`
      m16n8k16, f32 accumulate, `P` rounded to the input type); f32 (or
      `mma=false`): FMA on the same fragments, `P` through shared memory;
    - row max and sum across the 4 lanes of a row by `gpu.shuffle xor`;
    - masks, causal/window bands, soft-capping, scale and GQA exactly as
      the online op states them; the key loops' bounds come from
      `attn-skip-masked-blocks` unchanged, so skipped blocks stay skipped;
    - the normalization's `linalg.generic` bodies are cloned per element
      of the thread's fragment and stored to global memory.

    A function computing `attn.linear` or `attn.additive` (tiled or not;
    its arguments the op's operands) becomes a kernel of its own, 256
    threads striding over shared-memory tiles between barriers, f32 FMAs:
    linear attention one block per (32 value columns, key/value head,
    batch), the state `S [D][32]` and `z [D]` in shared memory, the
    sequence walked in chunks of the op's `chunk` rows (its
    `attn.block_rows` are value columns); additive attention one block per
    (32 query rows, batch), the projections, the tanh scores of 32-key
    tiles and the online softmax in shared memory. A function computing
    `attn.attention_backward` (tiled or not; every tensor it reads or
    writes an argument) likewise: blocks of T keys accumulate dK and dV over
    the row tiles of their GQA group that see them, blocks of T rows of one
    query head accumulate dQ over the key tiles they see, both recomputing
    P and dS from the saved LSE (deterministic, no atomics; dM written by
    the key blocks). `host-emulation` builds those three as host functions
    instead. Dropout (forward and backward) multiplies each weight by
    Z = keep / (1 - p) after the online update has summed it undropped, the
    keep bits Philox's at the weight's global indices (one Philox for a
    lane's two keys where the key tile starts at a multiple of 8). Other
    ops without a GPU lowering (the linear and additive backward, the
    weights, the captured tensors' gradients) are refused on the op.

    Each tensor argument of the function becomes a pointer (a
    `memref<?xT>`, i8 for boolean masks) followed by its sizes and element
    strides (i64), in argument order; a scalar argument (dropout's f32
    probability and i64 seed) is a parameter as itself. The kernel carries
    `attn.block_rows` and `attn.shared_memory_bytes` for the launcher.
  }];
  let options = [
    Option<"useMma", "mma", "bool", /*default=*/"true",
           "Use tensor-core mma.sync for f16/bf16 (sm_80+); FMA otherwise">,
    Option<"useAsyncCopy", "async-copy", "bool", /*default=*/"true",
           "Stage f16/bf16 tiles with cp.async (nvgpu.device_async_copy, "
           "sm_80+) where a tensor's layout allows 16-byte chunks">,
    Option<"rowsPerWarp", "rows-per-warp", "int64_t", /*default=*/"16",
           "Query rows per warp, 16 or 32 (two m16 blocks sharing each K/V "
           "operand), for ops without an #attn.kernel (its row_block "
           "otherwise)">,
    Option<"hostEmulation", "host-emulation", "bool", /*default=*/"false",
           "Build each linear, additive or backward attention kernel as a host "
           "func.func of the same parameters that runs the grid's blocks one "
           "after the other on one thread (no barriers, shared memory on the "
           "stack): how the tests check its arithmetic on a machine without "
           "a GPU">,
  ];
  let dependentDialects = ["gpu::GPUDialect", "NVVM::NVVMDialect",
                           "nvgpu::NVGPUDialect",
                           "LLVM::LLVMDialect", "memref::MemRefDialect",
                           "vector::VectorDialect", "scf::SCFDialect",
                           "arith::ArithDialect", "math::MathDialect",
                           "affine::AffineDialect"];
}

#endif // ATTN_TRANSFORMS_PASSES_TD
