// RUN: attn-opt %s -split-input-file -attn-lower-to-vector -verify-diagnostics

// expected-error @+1 {{attn.online_attention must be bufferized first}}
func.func @tensors(%q: tensor<1x1x4x16xf32>, %acc: tensor<1x1x4x16xf32>, %m: tensor<1x1x4xf32>)
    -> (tensor<1x1x4x16xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>) {
  %r:3 = attn.online_attention ins(%q, %q, %q : tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>)
      outs(%acc, %m, %m : tensor<1x1x4x16xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>)
      -> tensor<1x1x4x16xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>
  return %r#0, %r#1, %r#2 : tensor<1x1x4x16xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>
}

// -----

func.func @amx_head_dim(%q: memref<1x1x?x48xbf16>, %k: memref<1x1x?x48xbf16>, %v: memref<1x1x?x32xbf16>,
                        %acc: memref<1x1x?x32xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  // expected-error @+1 {{#attn.kernel<amx> takes bf16 query, key and value with a head dim that is a multiple of 32 and a value dim of 16, and vector-width 16 (AVX-512); found head dims 48 and 32, vector-width 16}}
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x48xbf16>, memref<1x1x?x48xbf16>, memref<1x1x?x32xbf16>)
      outs(%acc, %m, %s : memref<1x1x?x32xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
      kernel <amx, query_tile = 64, key_block = 64, row_block = 16, bf16_dot = true>
  return
}
