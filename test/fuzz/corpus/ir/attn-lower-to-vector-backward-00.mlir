func.func @backward(%q: memref<1x2x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x8xf32>,
                    %o: memref<1x2x?x8xf32>, %lse: memref<1x2x?xf32>, %do: memref<1x2x?x8xf32>,
                    %dq: memref<1x2x?x16xf32>, %dk: memref<1x1x?x16xf32>, %dv: memref<1x1x?x8xf32>,
                    %d: index) {
  attn.attention_backward
      ins(%q, %k, %v : memref<1x2x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x8xf32>)
      diagonal(%d)
      forward(%o, %lse : memref<1x2x?x8xf32>, memref<1x2x?xf32>)
      grads(%do : memref<1x2x?x8xf32>)
      outs(%dq, %dk, %dv : memref<1x2x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x8xf32>)
      causal softcap(20.0)
  return
}
