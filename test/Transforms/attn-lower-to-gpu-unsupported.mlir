// RUN: attn-opt %s -split-input-file -verify-diagnostics -attn-tiling="query-tile-size=64 decode-rows=0" -attn-lower-to-gpu

// No GPU lowering of dropout, of the backward, of the weights or of sinks
// yet: refused on the op.
func.func @dropout(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x?x64xf16>, %v: tensor<?x?x?x64xf16>, %o: tensor<?x?x?x64xf16>, %p: f32, %s: i64) -> tensor<?x?x?x64xf16> {
  // expected-error @below {{attn-lower-to-gpu: dropout has no GPU lowering yet}}
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) dropout(%p, %s) outs(%o : tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16>
  return %r : tensor<?x?x?x64xf16>
}

// -----

func.func @backward(%q: tensor<1x2x?x64xf16>, %k: tensor<1x2x?x64xf16>, %v: tensor<1x2x?x64xf16>,
                    %o: tensor<1x2x?x64xf16>, %lse: tensor<1x2x?xf32>, %do: tensor<1x2x?x64xf16>,
                    %dq: tensor<1x2x?x64xf16>, %dk: tensor<1x2x?x64xf16>, %dv: tensor<1x2x?x64xf16>)
    -> tensor<1x2x?x64xf16> {
  // expected-error @below {{attn-lower-to-gpu: attn.attention_backward has no GPU lowering yet}}
  %r:3 = attn.attention_backward ins(%q, %k, %v : tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>)
      forward(%o, %lse : tensor<1x2x?x64xf16>, tensor<1x2x?xf32>) grads(%do : tensor<1x2x?x64xf16>)
      outs(%dq, %dk, %dv : tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>)
      -> tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>
  return %r#0 : tensor<1x2x?x64xf16>
}

// -----

func.func @weights(%q: tensor<1x2x?x64xf16>, %k: tensor<1x2x?x64xf16>,
                   %w: tensor<1x2x?x?xf32>) -> tensor<1x2x?x?xf32> {
  // expected-error @below {{attn-lower-to-gpu: attn.attention_weights has no GPU lowering yet}}
  %r = attn.attention_weights ins(%q, %k : tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>)
      outs(%w : tensor<1x2x?x?xf32>) -> tensor<1x2x?x?xf32>
  return %r : tensor<1x2x?x?xf32>
}

// -----

func.func @sinks(%q: tensor<1x2x?x64xf16>, %k: tensor<1x2x?x64xf16>, %v: tensor<1x2x?x64xf16>,
                 %s: tensor<2xf32>, %o: tensor<1x2x?x64xf16>) -> tensor<1x2x?x64xf16> {
  // expected-error @below {{attn-lower-to-gpu: attention sinks have no GPU lowering yet}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>)
      sinks(%s : tensor<2xf32>) outs(%o : tensor<1x2x?x64xf16>) -> tensor<1x2x?x64xf16>
  return %r : tensor<1x2x?x64xf16>
}
