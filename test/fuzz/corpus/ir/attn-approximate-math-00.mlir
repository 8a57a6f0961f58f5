func.func @softmax_math(%s: vector<16xf32>, %l: f32) -> (vector<16xf32>, vector<16xf32>, f32) {
  %e = math.exp %s : vector<16xf32>
  %t = math.tanh %s : vector<16xf32>
  %g = math.log %l : f32
  return %e, %t, %g : vector<16xf32>, vector<16xf32>, f32
}
