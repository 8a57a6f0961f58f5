// RUN: attn-opt %s -split-input-file -verify-diagnostics -attn-tiling="query-tile-size=24 decode-rows=0" -attn-lower-to-gpu

// Warps own 16 rows each: a query tile of 24 rows cannot be split.
func.func @odd_tile(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x?x64xf16>, %v: tensor<?x?x?x64xf16>, %o: tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16> {
  // expected-error @below {{query tile of 24 rows: the GPU kernel needs a multiple of 16 (rows a warp) up to 256}}
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) outs(%o : tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16>
  return %r : tensor<?x?x?x64xf16>
}

// -----

// Tiled without attn-tile's block-mapping, a static Sq of one tile folds
// the forall's query-tile dim away: which dims are left is not known.
func.func @unmapped_folded_forall(%q: tensor<?x?x1x64xf16>, %k: tensor<?x?x?x64xf16>, %v: tensor<?x?x?x64xf16>, %o: tensor<?x?x1x64xf16>) -> tensor<?x?x1x64xf16> {
  // expected-error @below {{a forall of fewer than three dims needs a #gpu.block mapping}}
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x1x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) outs(%o : tensor<?x?x1x64xf16>) -> tensor<?x?x1x64xf16>
  return %r : tensor<?x?x1x64xf16>
}

// -----

// A GPU kernel is one attention op at the top level of its function: one in
// a loop is refused on the op, in those terms.
func.func @in_a_loop(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x?x64xf16>, %v: tensor<?x?x?x64xf16>, %o: tensor<?x?x?x64xf16>, %n: index) -> tensor<?x?x?x64xf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %o) -> tensor<?x?x?x64xf16> {
    // expected-error @below {{this attn.attention is inside 'scf.for'; a GPU kernel computes one attention op at the top level of its function}}
    %a = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) outs(%acc : tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16>
    scf.yield %a : tensor<?x?x?x64xf16>
  }
  return %r : tensor<?x?x?x64xf16>
}

