// RUN: attn-opt %s -split-input-file -verify-diagnostics -attn-tiling="query-tile-size=64 decode-rows=0" -attn-lower-to-gpu

// No GPU lowering of the weights yet: refused on the op.
func.func @weights(%q: tensor<1x2x?x64xf16>, %k: tensor<1x2x?x64xf16>,
                   %w: tensor<1x2x?x?xf32>) -> tensor<1x2x?x?xf32> {
  // expected-error @below {{attn-lower-to-gpu: attn.attention_weights has no GPU lowering yet}}
  %r = attn.attention_weights ins(%q, %k : tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>)
      outs(%w : tensor<1x2x?x?xf32>) -> tensor<1x2x?x?xf32>
  return %r : tensor<1x2x?x?xf32>
}

// -----

// A modifier's math function that would need libdevice on the GPU.
func.func @modifier_sin(%q: tensor<?x4x?x32xf16>, %k: tensor<?x4x?x32xf16>, %v: tensor<?x4x?x32xf16>, %o: tensor<?x4x?x32xf16>) -> tensor<?x4x?x32xf16> {
  // expected-error @below {{attn-lower-to-gpu: the modifiers' 'math.sin' has no GPU lowering yet (the CPU lowering has it)}}
  %r = attn.attention ins(%q, %k, %v : tensor<?x4x?x32xf16>, tensor<?x4x?x32xf16>, tensor<?x4x?x32xf16>) outs(%o : tensor<?x4x?x32xf16>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %r = math.sin %s : f32
        attn.yield %r : f32
      } -> tensor<?x4x?x32xf16>
  return %r : tensor<?x4x?x32xf16>
}

// -----

// A linear attention kernel's function takes the op's operands, in order.
func.func @linear_reordered(%k: tensor<1x2x?x16xf32>, %q: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x16xf32>,
                            %o: tensor<1x2x?x16xf32>) -> tensor<1x2x?x16xf32> {
  // expected-error @below {{attn-lower-to-gpu: operand 0 is not the function's argument 0}}
  %r = attn.linear ins(%q, %k, %v : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      outs(%o : tensor<1x2x?x16xf32>) -> tensor<1x2x?x16xf32>
  return %r : tensor<1x2x?x16xf32>
}
