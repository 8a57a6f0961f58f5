// RUN: attn-opt %s --attn-tiling | FileCheck %s
// RUN: attn-opt %s --attn-tiling="decode-rows=0" | FileCheck %s --check-prefix=OFF

// The CPU pipelines' decode-rows option (default 4) reaches attn-tile's
// group-rows: a decoding op (static Sq = 1, GQA 32/8) is tiled by whole
// groups of 4 query heads, one work item per key/value head; with 0, one
// query head per work item (the unit row loop folds away either way).

// CHECK-LABEL: func @decode
//       CHECK: scf.forall {{.+}} to (%{{.+}}, 32) step (1, 4)
//       CHECK:   attn.online_attention {{.+}} tensor<1x4x1x128xf32>

// OFF-LABEL: func @decode
//       OFF: scf.forall {{.+}} in (%{{.+}}, 32)
//       OFF:   attn.online_attention {{.+}} tensor<1x1x1x128xf32>
func.func @decode(%q: tensor<?x32x1x128xf32>, %k: tensor<?x8x?x128xf32>,
                  %v: tensor<?x8x?x128xf32>, %o: tensor<?x32x1x128xf32>)
    -> tensor<?x32x1x128xf32> {
  %0 = attn.attention ins(%q, %k, %v : tensor<?x32x1x128xf32>, tensor<?x8x?x128xf32>, tensor<?x8x?x128xf32>)
      outs(%o : tensor<?x32x1x128xf32>) -> tensor<?x32x1x128xf32>
  return %0 : tensor<?x32x1x128xf32>
}
