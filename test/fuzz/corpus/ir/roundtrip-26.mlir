func.func @linear_memrefs(%q: memref<1x1x4x8xf16>, %o: memref<1x1x4x8xf16>) {
  attn.linear ins(%q, %q, %q : memref<1x1x4x8xf16>, memref<1x1x4x8xf16>, memref<1x1x4x8xf16>)
      outs(%o : memref<1x1x4x8xf16>)
  return
}
