//===- AttnDialect.td - The attn dialect -------------------------*- tablegen -*-===//
//
// The dialect that states the attention contract of docs/spec.md in IR,
// and the intermediate forms its lowering goes through.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_DIALECT_TD
#define ATTN_DIALECT_TD

include "mlir/IR/OpBase.td"

def Attn_Dialect : Dialect {
  let name = "attn";
  let cppNamespace = "::mlir::attn";
  let summary = "Scaled dot-product attention and its lowering to fused kernels";
  let description = [{
    The `attn` dialect holds one high-level operation, `attn.attention`, whose
    semantics are the project's attention contract: grouped-query attention
    over `[B, H, S, D]` tensors with an optional boolean or additive mask,
    causal masking with an explicit diagonal alignment, a sliding window,
    soft-capping and an optional log-sum-exp result. It also holds
    `attn.online_attention`, the step of FlashAttention's online-softmax
    recurrence that the lowering turns attention into.

    The lowering is a chain of passes, each readable on its own:
    `attn-tile` (parallel tiles of B, H and Sq through `TilingInterface`),
    `attn-online-softmax` (the recurrence's running max, sum and
    accumulator), `attn-skip-masked-blocks` (causal and window key ranges),
    `attn-tile-keys` (key tiles as a reduction loop), then bufferization and
    `attn-lower-to-vector` (a register-blocked vector micro-kernel).
  }];
  let useDefaultAttributePrinterParser = 1;
}

class Attn_Op<string mnemonic, list<Trait> traits = []>
    : Op<Attn_Dialect, mnemonic, traits>;

#endif // ATTN_DIALECT_TD
