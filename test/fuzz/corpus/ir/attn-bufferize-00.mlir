func.func @state_on_the_stack(%q: tensor<1x1x64x32xf32>, %k: tensor<1x1x?x32xf32>,
                              %o: tensor<1x1x64x32xf32>) -> tensor<1x1x64x32xf32> {
  %a0 = bufferization.alloc_tensor() : tensor<1x1x64x32xf32>
  %m0 = bufferization.alloc_tensor() : tensor<1x1x64xf32>
  %s0 = bufferization.alloc_tensor() : tensor<1x1x64xf32>
  %r:3 = attn.online_attention ins(%q, %k, %k : tensor<1x1x64x32xf32>, tensor<1x1x?x32xf32>, tensor<1x1x?x32xf32>)
      outs(%a0, %m0, %s0 : tensor<1x1x64x32xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>)
      -> tensor<1x1x64x32xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>,
                                          affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>,
                                          affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
                         iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%r#0, %r#2 : tensor<1x1x64x32xf32>, tensor<1x1x64xf32>) outs(%o : tensor<1x1x64x32xf32>) {
  ^bb0(%acc: f32, %sum: f32, %unused: f32):
    %n = arith.divf %acc, %sum : f32
    linalg.yield %n : f32
  } -> tensor<1x1x64x32xf32>
  return %out : tensor<1x1x64x32xf32>
}
