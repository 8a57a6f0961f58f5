//===- AttnAttrs.td - Attributes and enums of the attn dialect ---*- tablegen -*-===//
#ifndef ATTN_ATTRS_TD
#define ATTN_ATTRS_TD

include "AttnDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

// Where the causal diagonal and the window are anchored: `off = 0` for
// top_left (PyTorch's is_causal), `off = Sk - Sq` for bottom_right
// (FlashAttention's convention, what decoding against a KV cache needs).
def Attn_Alignment : I32EnumAttr<"DiagonalAlignment",
    "where the diagonal of causal masks and windows is anchored", [
      I32EnumAttrCase<"top_left", 0>,
      I32EnumAttrCase<"bottom_right", 1>
    ]> {
  let cppNamespace = "::mlir::attn";
}

def Attn_WindowAttr : AttrDef<Attn_Dialect, "Window"> {
  let mnemonic = "window";
  let summary = "a sliding window of keys around the diagonal";
  let description = [{
    Position `(i, j)` is allowed only if `i + off - left <= j <= i + off + right`.
    An absent side is unbounded: `#attn.window<left = 256>` looks back 256 keys
    and any distance forward.
  }];
  let parameters = (ins
    OptionalParameter<"std::optional<int64_t>">:$left,
    OptionalParameter<"std::optional<int64_t>">:$right);
  let assemblyFormat = "`<` struct(params) `>`";
}

// The feature map of linear attention (attn.linear): what each query and
// key element becomes before the products. elu_plus_one and relu give
// φ(x) >= 0, so that the normalizer is a sum of non-negative terms;
// identity (φ(x) = x) is for the unnormalized form (the sums of products
// that linear attention's gradients are made of).
def Attn_FeatureMap : I32EnumAttr<"FeatureMap",
    "the feature map φ that linear attention applies to queries and keys", [
      I32EnumAttrCase<"elu_plus_one", 0>, // elu(x) + 1: x + 1 if x > 0, else exp(x)
      I32EnumAttrCase<"relu", 1>,         // max(x, 0)
      I32EnumAttrCase<"identity", 2>      // x
    ]> {
  let cppNamespace = "::mlir::attn";
}

// The micro-kernel that lowers an attention op (see KernelAttr).
def Attn_MicroKernel : I32EnumAttr<"MicroKernel",
    "the micro-kernel that computes an attention op's tiles", [
      I32EnumAttrCase<"packed", 0>,
      I32EnumAttrCase<"lane_rows", 1>,
      I32EnumAttrCase<"mma_sync", 2>,
      I32EnumAttrCase<"fma", 3>,
      I32EnumAttrCase<"amx", 4>
    ]> {
  let cppNamespace = "::mlir::attn";
}

def Attn_KernelAttr : AttrDef<Attn_Dialect, "Kernel"> {
  let mnemonic = "kernel";
  let summary = "the micro-kernel and the blocking an attention op takes";
  let description = [{
    How the lowering computes an op, chosen for a target by
    `attn-choose-kernels` (or written by hand): the passes that tile and
    lower the op read it and never choose again.

    - `micro_kernel`: on the CPU `packed` (K and V blocks packed, blocks of
      `row_block` query rows share each load) or `lane_rows` (tiles of
      `lane_rows` query rows in vector lanes; ops without the bf16 dot
      product) or `amx` (bf16 Q, K and V with D a
      multiple of 32 and Dv of 16: the packed path with Q·Kᵀ and P·V on
      AMX tiles, blocks of 16 rows, the softmax in AVX-512 between them);
      on a GPU `mma_sync` (16-bit inputs on tensor cores) or `fma`. CPU ops of at most `attn-lower-to-vector`'s
      `direct-rows` rows take the direct path at run time whatever the
      choice.
    - `query_tile`: query rows per work item (a CPU thread's unit of work;
      a GPU thread block, `row_block` per warp).
    - `key_block`: keys per block of the key loop (the key tile).
    - `row_block` (CPU, packed): query rows sharing each packed K/V load
      (amx: 16, a tile's rows); on a GPU the query rows a warp owns, 16
      (written 0) or 32 (two mma.sync m16 blocks sharing each K/V operand).
    - `lane_rows` (CPU): rows of a lane-rows tile; 0 where the target has
      no lane-rows micro-kernel.
    - `bf16_dot` (CPU): bf16 Q·Kᵀ (and P·V where allowed) by AVX-512 BF16's
      dot product.
    - `block_prefetch` (CPU, lane_rows): whether P·V prefetches the next key
      block's f32 K and V rows into L2 (where `attn-lower-to-vector`'s
      `prefetch-bytes` is not 0); true unless written, false where the
      target's cores run the kernel faster without it (AMD Zen 3).

    ```mlir
    #attn.kernel<lane_rows, query_tile = 256, key_block = 64, row_block = 4, lane_rows = 64>
    #attn.kernel<lane_rows, query_tile = 256, key_block = 128, row_block = 2, lane_rows = 24, block_prefetch = false>
    #attn.kernel<mma_sync, query_tile = 64, key_block = 64>
    #attn.kernel<mma_sync, query_tile = 128, key_block = 64, row_block = 32>
    ```
  }];
  let parameters = (ins
    EnumParameter<Attn_MicroKernel>:$micro_kernel,
    "int64_t":$query_tile,
    "int64_t":$key_block,
    DefaultValuedParameter<"int64_t", "0">:$row_block,
    DefaultValuedParameter<"int64_t", "0">:$lane_rows,
    DefaultValuedParameter<"bool", "false">:$bf16_dot,
    DefaultValuedParameter<"bool", "true">:$block_prefetch);
  let assemblyFormat = [{
    `<` $micro_kernel `,` struct($query_tile, $key_block, $row_block,
                                 $lane_rows, $bf16_dot, $block_prefetch) `>`
  }];
  let genVerifyDecl = 1;
}

#endif // ATTN_ATTRS_TD
