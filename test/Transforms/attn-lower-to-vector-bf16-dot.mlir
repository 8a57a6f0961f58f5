// RUN: attn-opt %s -split-input-file -attn-lower-to-vector="key-block=32 row-block=2 bf16-dot" -canonicalize | FileCheck %s
// RUN: attn-opt %s -split-input-file -attn-lower-to-vector="key-block=32 bf16-dot" -convert-vector-to-llvm=enable-x86vector | FileCheck %s --check-prefix=LLVM
// RUN: not attn-opt %s -attn-lower-to-vector="vector-width=2 key-block=32 bf16-dot" 2>&1 | FileCheck %s --check-prefix=WIDTH
// RUN: attn-opt %s -split-input-file -attn-lower-to-vector="key-block=32 row-block=2 band-key-step=16 bf16-dot" -canonicalize | FileCheck %s --check-prefix=STEP16
// RUN: not attn-opt %s -split-input-file -attn-lower-to-vector="key-block=32 band-key-step=24 bf16-dot" 2>&1 | FileCheck %s --check-prefix=BADSTEP
// RUN: not attn-opt %s -split-input-file -attn-lower-to-vector="key-block=32 band-key-step=-16 bf16-dot" 2>&1 | FileCheck %s --check-prefix=BADSTEP

// With bf16-dot, bf16 scores come from AVX-512 BF16's dot product: the key
// block is packed as bf16 pairs (no widening), and each step of the score
// loop takes two head dims: the query pair is broadcast as one 32-bit word
// against 32 packed bf16 (16 keys), two rows sharing each key load. An odd
// head dim (15 here) ends in a pair whose key half is 0. Without masking,
// P·V does the same with V packed as key pairs (zero pad columns once, the
// partner of an odd count's last key zeroed per block) and the weights
// rounded to bf16 once, 16 at a time, as the online update stores them:
// each step of P·V then broadcasts a pair of weights as one 32-bit word.

// CHECK-LABEL: func @bf16_dot
//       CHECK: %[[KP:.+]] = memref.alloca() {alignment = 64 : i64} : memref<8x64xbf16>
//       CHECK: %[[VP:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16x32xbf16>
//       CHECK: %[[PP:.+]] = memref.alloca() {alignment = 64 : i64} : memref<4x32xbf16>
//       CHECK: scf.for
//       CHECK:   vector.store %{{.+}}, %[[VP]]
// Packing: pairs of K[key][2p], K[key][2p+1] side by side, then the odd tail.
//       CHECK: scf.for %[[P:.+]] = %c0 to %c7 step %c1
//       CHECK:   memref.load %{{.+}} : memref<1x1x?x15xbf16>
//       CHECK:   memref.store %{{.+}}, %[[KP]][%[[P]], %{{.+}}] : memref<8x64xbf16>
//       CHECK:   memref.store %{{.+}}, %[[KP]][%[[P]], %{{.+}}] : memref<8x64xbf16>
//       CHECK: memref.store %{{.+}}, %[[KP]][%c7, %{{.+}}] : memref<8x64xbf16>
//       CHECK: memref.store %cst{{.*}}, %[[KP]][%c7, %{{.+}}] : memref<8x64xbf16>
// Scores: 8 pair steps, two rows x two 16-key vectors.
//       CHECK: scf.for %{{.+}} = %c0 to %c8 step %c1 iter_args({{.+}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
//       CHECK:   %[[K0:.+]] = vector.load %[[KP]][%{{.+}}, %c0] : memref<8x64xbf16>, vector<32xbf16>
//       CHECK:   %[[K1:.+]] = vector.load %[[KP]][%{{.+}}, %c32] : memref<8x64xbf16>, vector<32xbf16>
//       CHECK:   vector.from_elements %{{.+}}, %{{.+}} : vector<2xbf16>
//       CHECK:   vector.bitcast %{{.+}} : vector<2xbf16> to vector<1xi32>
//       CHECK:   %[[Q:.+]] = vector.bitcast %{{.+}} : vector<16xi32> to vector<32xbf16>
//       CHECK:   x86vector.avx512.dot %{{.+}}, %[[Q]], %[[K0]] : vector<32xbf16> -> vector<16xf32>
//       CHECK:   x86vector.avx512.dot %{{.+}}, %[[Q]], %[[K1]] : vector<32xbf16> -> vector<16xf32>
//       CHECK:   x86vector.avx512.dot
//       CHECK:   x86vector.avx512.dot
// The weights, in f32 and in bf16.
//       CHECK: math.exp2 %{{.+}} {attn.nonpositive} : vector<16xf32>
//       CHECK: %[[PB:.+]] = arith.truncf %{{.+}} : vector<16xf32> to vector<16xbf16>
//       CHECK: vector.store %[[PB]], %[[PP]][%c0, %c0] : memref<4x32xbf16>, vector<16xbf16>
// P·V: ceil(keys / 2) pair steps.
//       CHECK: scf.for %[[JP:.+]] = %c0 to %{{.+}} step %c1 iter_args({{.+}}) -> (vector<16xf32>, vector<16xf32>)
//       CHECK:   %[[J0:.+]] = arith.muli %[[JP]], %c2
//       CHECK:   %[[V:.+]] = vector.load %[[VP]][%[[JP]], %c0] : memref<16x32xbf16>, vector<32xbf16>
//       CHECK:   %[[PAIR:.+]] = vector.load %[[PP]][%c0, %[[J0]]] : memref<4x32xbf16>, vector<2xbf16>
//       CHECK:   vector.bitcast %[[PAIR]] : vector<2xbf16> to vector<1xi32>
//   CHECK-NOT:   arith.truncf
//       CHECK:   x86vector.avx512.dot %{{.+}}, %{{.+}}, %[[V]] : vector<32xbf16> -> vector<16xf32>
// LLVM: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// WIDTH: bf16-dot needs a vector width of 4, 8 or 16 f32 lanes, found 2
func.func @bf16_dot(%q: memref<1x1x?x15xbf16>, %k: memref<1x1x?x15xbf16>, %v: memref<1x1x?x16xbf16>,
                    %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x15xbf16>, memref<1x1x?x15xbf16>, memref<1x1x?x16xbf16>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}

// -----

// An even head dim and unit-stride rows (static here, so the stride checks
// fold away): K's pairs are 32-bit words, packed by 16x16 transposes of
// those words (40 dims = 20 words: a whole tile and a masked 4-word one),
// and V's key pairs by interleaving two V rows per store (as the direct
// path does).

// CHECK-LABEL: func @bf16_dot_transposed_pairs
//       CHECK: %[[KP:.+]] = memref.alloca() {alignment = 64 : i64} : memref<20x64xbf16>
//       CHECK: %[[VP:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16x32xbf16>
// The packed path (the direct one, for at most 4 rows, comes first):
//       CHECK: } else {
//       CHECK: scf.for %[[FIRST:.+]] = %c0 to %{{.+}} step %c16
//       CHECK:   %[[COL:.+]] = arith.muli %[[FIRST]], %c2
//       CHECK:   vector.load %{{.+}} : memref<1x1x?x40xbf16, strided<[?, ?, 40, 1]>>, vector<32xbf16>
//       CHECK:   vector.bitcast %{{.+}} : vector<32xbf16> to vector<16xf32>
// (the words transposed by shuffles, as f32 vectors)
//       CHECK:   vector.shuffle %{{.+}}, %{{.+}} [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xf32>, vector<16xf32>
//       CHECK:   %[[W:.+]] = vector.bitcast %{{.+}} : vector<16xf32> to vector<32xbf16>
//       CHECK:   vector.store %[[W]], %[[KP]][%c0, %[[COL]]] : memref<20x64xbf16>, vector<32xbf16>
//       CHECK:   vector.maskedload %{{.+}} : memref<1x1x?x40xbf16, strided<[?, ?, 40, 1]>>, vector<32xi1>, vector<32xbf16> into vector<32xbf16>
//       CHECK:   vector.store %{{.+}}, %[[KP]][%c19, %[[COL]]] : memref<20x64xbf16>, vector<32xbf16>
//   CHECK-NOT:   vector.store %{{.+}}, %[[KP]][%c20
//       CHECK: scf.for
//       CHECK:   vector.interleave %{{.+}}, %{{.+}} : vector<16xbf16> -> vector<32xbf16>
//       CHECK:   vector.store %{{.+}}, %[[VP]]
//       CHECK: x86vector.avx512.dot
func.func @bf16_dot_transposed_pairs(%q: memref<1x1x?x40xbf16>, %k: memref<1x1x?x40xbf16>, %v: memref<1x1x?x16xbf16>,
                    %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x40xbf16>, memref<1x1x?x40xbf16>, memref<1x1x?x16xbf16>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}

// -----

// A masked op may exclude a key for some rows only: its weight is then 0,
// and 0 · NaN is NaN. The direct path (a call of few rows) takes P·V in f32,
// dropping each row's excluded keys. The packed path packs V as key pairs
// and asks once per key block whether they hold an inf or a NaN: the sum of
// each f32 lane times 0 (the odd key's bf16 as the high half, the even
// key's shifted up) is NaN exactly then. A finite block takes the dot
// product; only one with an inf or NaN drops the excluded keys in f32.

// CHECK-LABEL: func @bf16_dot_masked
//       CHECK: %[[VP:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16x32xbf16>
//       CHECK: arith.cmpf oeq
//       CHECK: vector.fma
//       CHECK: vector.interleave
//       CHECK: %[[PRODUCTS:.+]] = scf.for {{.+}} -> (vector<16xf32>) {
//       CHECK:   %[[PAIR:.+]] = vector.load %[[VP]][%{{.+}}, %c0] : memref<16x32xbf16>, vector<32xbf16>
//       CHECK:   %[[WORDS:.+]] = vector.bitcast %[[PAIR]] : vector<32xbf16> to vector<16xi32>
//       CHECK:   %[[ODD:.+]] = vector.bitcast %[[PAIR]] : vector<32xbf16> to vector<16xf32>
//       CHECK:   %[[UP:.+]] = arith.shli %[[WORDS]], %{{.+}} : vector<16xi32>
//       CHECK:   %[[EVEN:.+]] = vector.bitcast %[[UP]] : vector<16xi32> to vector<16xf32>
//       CHECK:   %[[S1:.+]] = vector.fma %[[ODD]], %[[ZERO:.+]], %{{.+}} : vector<16xf32>
//       CHECK:   vector.fma %[[EVEN]], %[[ZERO]], %[[S1]] : vector<16xf32>
//       CHECK: %[[SUM:.+]] = vector.reduction <add>, %[[PRODUCTS]] : vector<16xf32> into f32
//       CHECK: %[[FINITE:.+]] = arith.cmpf ord, %[[SUM]], %[[SUM]] : f32
//       CHECK: scf.if %[[FINITE]] -> (vector<16xf32>, vector<16xf32>) {
//       CHECK:   x86vector.avx512.dot
//       CHECK: } else {
//       CHECK:   arith.cmpf oeq
//       CHECK:   vector.fma
func.func @bf16_dot_masked(%q: memref<1x1x?x15xbf16>, %k: memref<1x1x?x15xbf16>, %v: memref<1x1x?x16xbf16>,
                           %mask: memref<1x1x?x?xi1>,
                           %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x15xbf16>, memref<1x1x?x15xbf16>, memref<1x1x?x16xbf16>)
      mask(%mask : memref<1x1x?x?xi1>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}

// -----

// f32 operands keep the FMA path under the option.

// CHECK-LABEL: func @f32_unchanged
//   CHECK-NOT: x86vector.avx512.dot
//       CHECK: vector.fma
func.func @f32_unchanged(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                         %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}

// -----

// Decoding, a GQA group of 4 heads (static unit strides: the direct path
// only): the group's query rows are kept as stored, bf16; 4 keys at a time,
// their K rows loaded as 32-element vectors are scored by vdpbf16ps against
// the 4 rows (consecutive head dims are its pairs) into 16 accumulators,
// summed by one transposing tree into one vector of 16 scores. P·V makes
// V's key pairs as it loads two rows: the unpacks of their 32-element
// chunks within 128-bit lanes pair 4-column blocks 0, 2, 4, 6 and 1, 3, 5,
// 7, and the 4 rows (one pass) share each. Their accumulators hold the
// columns in that order: shuffled there before the key loop and back after
// it. No pass over the block writes valuePairs first; an odd count's last
// key is paired with zeros in a loop of at most one step.

// CHECK-LABEL: func @bf16_dot_decode_group
//       CHECK: %[[QP:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16x64xbf16>
//       CHECK: scf.for %{{.+}} = %c0 to %c4 step %c1 {
//       CHECK:   memref.store %{{.+}}, %[[QP]]
//       CHECK: scf.for %{{.+}} step %c32 {
//       CHECK:   scf.for %[[J:.+]] = %c0 to %{{.+}} step %c4 {
//       CHECK:     %[[K0:.+]] = vector.load %{{.+}} : memref<1x1x?x64xbf16, {{.+}}>, vector<32xbf16>
//       CHECK:     %[[K1:.+]] = vector.load %{{.+}} : memref<1x1x?x64xbf16, {{.+}}>, vector<32xbf16>
//       CHECK:     %[[K2:.+]] = vector.load %{{.+}} : memref<1x1x?x64xbf16, {{.+}}>, vector<32xbf16>
//       CHECK:     %[[K3:.+]] = vector.load %{{.+}} : memref<1x1x?x64xbf16, {{.+}}>, vector<32xbf16>
//       CHECK:     %[[Q0:.+]] = vector.load %[[QP]][%c0, %c0] : memref<16x64xbf16>, vector<32xbf16>
//       CHECK:     %[[Q1:.+]] = vector.load %[[QP]][%c1, %c0] : memref<16x64xbf16>, vector<32xbf16>
//       CHECK:     x86vector.avx512.dot %{{.+}}, %[[Q0]], %[[K0]]
//       CHECK:     x86vector.avx512.dot %{{.+}}, %[[Q0]], %[[K1]]
//       CHECK:     x86vector.avx512.dot %{{.+}}, %[[Q0]], %[[K2]]
//       CHECK:     x86vector.avx512.dot %{{.+}}, %[[Q0]], %[[K3]]
//       CHECK:     x86vector.avx512.dot %{{.+}}, %[[Q1]], %[[K0]]
// 16 accumulators to one vector of scores: 15 shuffle pairs and adds.
//       CHECK-COUNT-30: vector.shuffle
//   CHECK-NOT: vector.shuffle
//       CHECK:     %[[ROW0:.+]] = vector.extract_strided_slice %[[SUMS:.+]] {offsets = [0], sizes = [4], strides = [1]}
//       CHECK:     vector.store %[[ROW0]], %{{.+}}[%c0, %[[J]]] : memref<16x32xf32>, vector<4xf32>
//       CHECK:     vector.extract_strided_slice %[[SUMS]] {offsets = [12], sizes = [4], strides = [1]}
//       CHECK:     vector.store %{{.+}}, %{{.+}}[%c3, %[[J]]] : memref<16x32xf32>, vector<4xf32>
//   CHECK-NOT:   vector.reduction
//   CHECK-NOT:   vector.interleave
//       CHECK:   math.exp2
//       CHECK:   %[[A0:.+]] = vector.load %arg3[%c0, %c0, %c0, %c0] : memref<1x4x1x64xf32>, vector<16xf32>
//       CHECK:   %[[S0:.+]] = arith.mulf %[[A0]]
//       CHECK:   %[[S1:.+]] = arith.mulf
//       CHECK:   vector.shuffle %[[S0]], %[[S1]] [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27]
//       CHECK:   vector.shuffle %[[S0]], %[[S1]] [4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31]
//       CHECK:   scf.for {{.+}} iter_args({{.+}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
//       CHECK:     %[[E0:.+]] = vector.load %{{.+}}[%c0, %c0, %{{.+}}, %c0] : memref<1x1x?x64xbf16, strided<[?, ?, 64, 1]>>, vector<32xbf16>
//       CHECK:     %[[O0:.+]] = vector.load %{{.+}}[%c0, %c0, %{{.+}}, %c0] : memref<1x1x?x64xbf16, strided<[?, ?, 64, 1]>>, vector<32xbf16>
//       CHECK:     %[[LO:.+]] = vector.shuffle %[[E0]], %[[O0]] [0, 32, 1, 33, 2, 34, 3, 35, 8, 40, 9, 41, 10, 42, 11, 43, 16, 48, 17, 49, 18, 50, 19, 51, 24, 56, 25, 57, 26, 58, 27, 59]
//       CHECK:     %[[HI:.+]] = vector.shuffle %[[E0]], %[[O0]] [4, 36, 5, 37, 6, 38, 7, 39, 12, 44, 13, 45, 14, 46, 15, 47, 20, 52, 21, 53, 22, 54, 23, 55, 28, 60, 29, 61, 30, 62, 31, 63]
//       CHECK:     vector.load %[[PP:.+]][%c0, %{{.+}}] : memref<4x32xbf16>, vector<2xbf16>
//       CHECK:     x86vector.avx512.dot %{{.+}}, %{{.+}}, %[[LO]]
//       CHECK:     x86vector.avx512.dot %{{.+}}, %{{.+}}, %[[HI]]
//       CHECK:     vector.load %[[PP]][%c3, %{{.+}}] : memref<4x32xbf16>, vector<2xbf16>
//       CHECK:   scf.for {{.+}} iter_args
//       CHECK:     %[[LAST:.+]] = vector.load %{{.+}} : memref<1x1x?x64xbf16, strided<[?, ?, 64, 1]>>, vector<32xbf16>
//       CHECK:     vector.shuffle %[[LAST]], %cst{{.*}} [0, 32, 1, 33,
//       CHECK:   %[[B0:.+]] = vector.shuffle %{{.+}}#0, %{{.+}}#1 [0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23]
//       CHECK:   %[[B1:.+]] = vector.shuffle %{{.+}}#0, %{{.+}}#1 [8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31]
//       CHECK:   vector.store %[[B0]], %arg3[%c0, %c0, %c0, %c0]
//       CHECK:   vector.store %[[B1]], %arg3[%c0, %c0, %c0, %c16]
func.func @bf16_dot_decode_group(%q: memref<1x4x1x64xbf16>, %k: memref<1x1x?x64xbf16>, %v: memref<1x1x?x64xbf16>,
                                 %acc: memref<1x4x1x64xf32>, %m: memref<1x4x1xf32>, %s: memref<1x4x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x4x1x64xbf16>, memref<1x1x?x64xbf16>, memref<1x1x?x64xbf16>)
      outs(%acc, %m, %s : memref<1x4x1x64xf32>, memref<1x4x1xf32>, memref<1x4x1xf32>)
  return
}

// -----

// A causal op: V's key pairs are packed once per block, before the band
// branch. The key blocks that every row of the tile sees whole take P·V by
// the dot product with no band compares. In the blocks across the band
// each pair of rows steps only over the keys its rows may see (steps of
// the block's 32 keys here), and takes the dot product on the keys that
// both rows see (an even count, from key 0 up: no left edge); the last
// keys, which its first row may not see, go to f32 FMAs of V widened from
// its pairs (bf16 << 16 for an even key, the high half for an odd), which
// drop an excluded key's V per row. A step with at most half a step of keys
// left (16 here) takes half the score vectors: one a row, not two.

// CHECK-LABEL: func @bf16_dot_causal
//       CHECK: vector.interleave
//       CHECK: %[[IN:.+]] = arith.cmpi sle, %{{.+}}, %arg6 : index
//       CHECK: scf.if %[[IN]] {
//   CHECK-NOT:   arith.cmpi sle
//       CHECK:   x86vector.avx512.dot
//   CHECK-NOT:   arith.cmpi sle
//   CHECK-NOT:   vector.fma
//       CHECK: } else {
//   CHECK-NOT:   vector.interleave
//       CHECK:   scf.for %[[STEP:.+]] = %{{.+}} to %{{.+}} step %c32 {
//       CHECK:     %[[SHORT:.+]] = arith.cmpi sle, %{{.+}}, %c16 : index
//       CHECK:     scf.if %[[SHORT]] {
//       CHECK:       scf.for %{{.+}} = %c0 to %c16 step %c1 iter_args(%{{.+}} = %cst{{.*}}, %{{.+}} = %cst{{.*}}) -> (vector<16xf32>, vector<16xf32>) {
//       CHECK:     } else {
//       CHECK:       scf.for %{{.+}} = %c0 to %c16 step %c1 iter_args({{.+}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
//       CHECK:     x86vector.avx512.dot
//       CHECK:     arith.cmpi sle
//       CHECK:     arith.andi %{{.+}}, %c-2 : index
//       CHECK:     scf.for
//   CHECK-NOT:       vector.fma
//       CHECK:       x86vector.avx512.dot
//       CHECK:     scf.for
//       CHECK:       arith.shli
//       CHECK:       arith.andi
//       CHECK:       arith.cmpf oeq
//       CHECK:       vector.fma
// With band-key-step=16 a pair of rows takes the 32-key block in steps of
// 16 keys, up to the last key its second row sees (rows + d + 1, clamped
// to the block), from step 0 (no left edge): one score vector a row, read
// from the step's packed columns (two bf16 per key), and P·V's pairs from
// the step's pair rows.
// STEP16-LABEL: func @bf16_dot_causal
//       STEP16: arith.cmpi sle, %{{.+}}, %arg6 : index
//       STEP16: } else {
//       STEP16:   scf.for %[[STEP:.+]] = %c0 to %{{.+}} step %c16 {
//       STEP16:     %[[COLS:.+]] = arith.muli %[[STEP]], %c2 : index
//       STEP16:     scf.for {{.+}} -> (vector<16xf32>, vector<16xf32>) {
//       STEP16:       vector.load %{{.+}}[%{{.+}}, %[[COLS]]] : memref<16x64xbf16>, vector<32xbf16>
//   STEP16-NOT:       vector.load %{{.+}} : memref<16x64xbf16>, vector<32xbf16>
//       STEP16:       x86vector.avx512.dot
//       STEP16:       x86vector.avx512.dot
//       STEP16:     scf.yield
//       STEP16:     %[[PAIRS:.+]] = arith.divui %[[STEP]], %c2 : index
//       STEP16:     scf.for %[[JP:.+]] = %c0 to
//       STEP16:       %[[PROW:.+]] = arith.addi %[[PAIRS]], %[[JP]] : index
//       STEP16:       vector.load %{{.+}}[%[[PROW]], %c0] : memref<16x32xbf16>, vector<32xbf16>
//       STEP16:       x86vector.avx512.dot
// BADSTEP: band-key-step ({{-?[0-9]+}}) must be a multiple of vector-width (16) that divides key-block (32)
func.func @bf16_dot_causal(%q: memref<1x1x?x32xbf16>, %k: memref<1x1x?x32xbf16>, %v: memref<1x1x?x16xbf16>,
                           %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>, %d: index) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x32xbf16>, memref<1x1x?x32xbf16>, memref<1x1x?x16xbf16>)
      diagonal(%d) outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>) causal
  return
}
