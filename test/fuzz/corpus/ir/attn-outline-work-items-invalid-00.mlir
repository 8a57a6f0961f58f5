func.func @no_forall(%o: memref<8xf32>) attributes {attn.kernel} {
  return
}
