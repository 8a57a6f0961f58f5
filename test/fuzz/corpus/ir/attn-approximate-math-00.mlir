func.func @softmax_math(%s: vector<16xf32>, %l: f32) -> (vector<16xf32>, vector<16xf32>, f32) {
  %e = math.exp %s : vector<16xf32>
  %t = math.tanh %s : vector<16xf32>
  %g = math.log %l : f32
  return %e, %t, %g : vector<16xf32>, vector<16xf32>, f32
}
func.func @gpu_math(%x: f32) -> (f32, f32, f32) {
  %e = math.exp %x : f32
  %l = math.log %x : f32
  %t = math.tanh %x : f32
  return %e, %l, %t : f32, f32, f32
}
func.func @scalar_exp(%x: f32) -> f32 {
  %e = math.exp %x : f32
  return %e : f32
}
func.func @softmax_exp2(%x: vector<16xf32>, %a: f32) -> (vector<16xf32>, vector<16xf32>, f32) {
  %p = math.exp2 %x {attn.nonpositive} : vector<16xf32>
  %q = math.exp2 %x : vector<16xf32>
  %alpha = math.exp2 %a {attn.nonpositive} : f32
  return %p, %q, %alpha : vector<16xf32>, vector<16xf32>, f32
}
