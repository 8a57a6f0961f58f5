func.func @captured_outside(%c: tensor<4xf32>, %i: index) -> f32 {
  %x = attn.captured 0 [%i] : f32
  return %x : f32
}
