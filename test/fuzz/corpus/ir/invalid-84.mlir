func.func @online_vector_operands(%q: vector<1x2x4x8xf32>, %o: memref<1x2x4x8xf32>, %m: memref<1x2x4xf32>) {
  attn.online_attention ins(%q, %q, %q : vector<1x2x4x8xf32>, vector<1x2x4x8xf32>, vector<1x2x4x8xf32>)
      outs(%o, %m, %m : memref<1x2x4x8xf32>, memref<1x2x4xf32>, memref<1x2x4xf32>)
  return
}
