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

#endif // ATTN_ATTRS_TD
