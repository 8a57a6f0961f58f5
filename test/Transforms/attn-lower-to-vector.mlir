// RUN: attn-opt %s -split-input-file -attn-lower-to-vector="key-block=32 row-block=1 direct-rows=0" -canonicalize | FileCheck %s
// RUN: attn-opt %s -split-input-file -attn-lower-to-vector="key-block=32 row-block=2 direct-rows=0" -canonicalize | FileCheck %s --check-prefix=ROWS

// The micro-kernel of one online-softmax step, on memrefs. Per block of 32
// keys: K is packed transposed and V row-major into stack buffers made at
// the function's entry; per query row, the scores are two 16-lane vectors
// accumulated by FMAs with the query element broadcast; scale, soft-cap,
// the keep-mask (as a -inf bias row, whose -inf entries select -inf) and
// the causal band are applied as vector ops; then the running max/sum update and P·V, with the 20-column
// accumulator's tail handled by masked loads and stores. The softmax runs in
// base 2: log2(e) joins the score scale (1/sqrt(32) log2 e = 0.255) and an
// additive mask's bias (an FMA in place of the add), and the soft cap (c = 30 becomes c log2 e = 43.28), the weights are
// exp2(s - m'), and the rows' maxima are in base-2 units while the op runs
// (times log2 e before its first block, times ln 2 after its last).

// CHECK-LABEL: func @causal_masked
//  CHECK-SAME: (%[[Q:[a-z0-9]+]]: {{.+}}, %[[K:[a-z0-9]+]]: {{.+}}, %[[V:[a-z0-9]+]]: {{.+}}, %[[MASK:[a-z0-9]+]]: {{.+}}, %[[ACC:[a-z0-9]+]]: {{.+}}, %[[MAX:[a-z0-9]+]]: {{.+}}, %[[SUM:[a-z0-9]+]]: {{.+}}, %[[D:[a-z0-9]+]]: index)
//   CHECK-DAG: %[[SCALE:.+]] = arith.constant dense<0.255034864> : vector<16xf32>
//   CHECK-DAG: %[[CAP:.+]] = arith.constant dense<43.2808495> : vector<16xf32>
//   CHECK-DAG: %[[LN2:.+]] = arith.constant 0.693147182 : f32
//   CHECK-DAG: %[[LOG2E:.+]] = arith.constant 1.44269502 : f32
//       CHECK: %[[KT:.+]] = memref.alloca() {alignment = 64 : i64} : memref<32x32xf32>
//       CHECK: %[[VP:.+]] = memref.alloca() {alignment = 64 : i64} : memref<32x32xf32>
//       CHECK: %[[BIAS:.+]] = memref.alloca() {alignment = 64 : i64} : memref<32xf32>
//       CHECK: %[[P:.+]] = memref.alloca() {alignment = 64 : i64} : memref<1x32xf32>
//       CHECK: %[[M:.+]] = memref.load %[[MAX]]
//  CHECK-NEXT: %[[M2:.+]] = arith.mulf %[[M]], %[[LOG2E]] : f32
//  CHECK-NEXT: memref.store %[[M2]], %[[MAX]]
// Key blocks up to the last key that some row sees (rows + d, clamped to
// Sk). Each block packs K transposed (K's rows have unit stride here: a
// loop over 16x16 tiles of head dims, each 16 row loads, a register
// transpose of four levels of two-vector shuffles (unpacks of 32-bit
// and 64-bit elements inside the 128-bit lanes, then the lanes' even and
// odd halves twice) and 16 column stores) and V
// (row vectors, the 20-column tail masked), once, before it branches: a block that every row sees whole (its last
// key <= d, the first row's reach) runs without the band's compares; a
// block across the band applies them.
//       CHECK: %[[LAST:.+]] = arith.minsi %{{.+}}, %{{.+}} : index
//       CHECK: scf.for %[[KB:.+]] = %c0 to %[[LAST]] step %c32
//       CHECK:   %[[NK:.+]] = arith.minsi %{{.+}}, %c32
//       CHECK:   scf.for %[[J0:.+]] = %c0 to %[[NK]] step %c16
//       CHECK:     scf.for %[[W0:.+]] = %c0 to %c32 step %c16
//       CHECK:       vector.load %{{.+}}[%c0, %c0, %{{.+}}, %[[W0]]] {{.+}} vector<16xf32>
//  CHECK-COUNT-8:       vector.shuffle %{{.+}}, %{{.+}} [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xf32>, vector<16xf32>
//  CHECK-COUNT-8:       vector.shuffle %{{.+}}, %{{.+}} [0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29]
// CHECK-COUNT-16:       vector.shuffle %{{.+}}, %{{.+}} [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27]
//       CHECK:       vector.store %{{.+}}, %[[KT]][%[[W0]], %[[J0]]]
//       CHECK:   scf.for %[[J:.+]] = %c0 to %[[NK]]
//   CHECK-NOT:     memref.load %[[K]]
//       CHECK:     %[[VROWS:.+]] = memref.reinterpret_cast %[[V]]
//       CHECK:     vector.load %[[VROWS]]
//       CHECK:     vector.store %{{.+}}, %[[VP]][%[[J]], %c0]
//       CHECK:     vector.maskedload %[[VROWS]]
//       CHECK:     vector.maskedstore %[[VP]][%[[J]], %c16]
//       CHECK:   %[[IN:.+]] = arith.cmpi sle, %{{.+}}, %[[D]]
//       CHECK:   scf.if %[[IN]] {
//   CHECK-NOT:     memref.load %[[V]]
//       CHECK:     vector.step
//       CHECK:     arith.cmpi slt
//   CHECK-NOT:     arith.cmpi sle
//       CHECK:   } else {
//   CHECK-NOT:     memref.load %[[V]]
// Query rows: a row block whose rows all see the whole block (its first
// row's reach, rounded down to a key pair, is the block's key count) runs
// it as a block inside the band: no band compares, only the key count's.
// The others walk the block's keys up to their reach (row + d + 1,
// clamped to the block) in steps of band-key-step keys (here the block's
// 32); Q·Kᵀ as two vector accumulators over D, from the step's columns. A
// step with at most 16 keys left takes one vector (the first branch); the
// checks below follow the whole step's.
//       CHECK:   scf.for %[[ROW:.+]] = %c0 to
//       CHECK:     %[[REACH:.+]] = arith.andi %{{.+}}, %c-2 : index
//       CHECK:     %[[WHOLE:.+]] = arith.cmpi eq, %{{.+}}, %[[NK]] : index
//       CHECK:     scf.if %[[WHOLE]] {
//       CHECK:       scf.for %{{.+}} = %c0 to %c32 step %c1 iter_args
//       CHECK:       vector.step
//       CHECK:       arith.cmpi slt
//   CHECK-NOT:       arith.cmpi sle
//       CHECK:     } else {
//       CHECK:     scf.for %[[STEP:.+]] = %{{.+}} to %{{.+}} step %c32 {
//       CHECK:     %[[SHORT:.+]] = arith.cmpi sle, %{{.+}}, %c16 : index
//       CHECK:     scf.if %[[SHORT]] {
//       CHECK:       scf.for %{{.+}} = %c0 to %c32 step %c1 iter_args(%{{.+}} = %{{.+}}) -> (vector<16xf32>)
//       CHECK:     } else {
//       CHECK:     %[[NK:.+]] = arith.minsi %{{.+}}, %c32 : index
//       CHECK:     %[[S:.+]]:2 = scf.for %{{.+}} = %c0 to %c32 step %c1 iter_args(%[[S0:.+]] = %{{.+}}, %[[S1:.+]] = %{{.+}}) -> (vector<16xf32>, vector<16xf32>)
//       CHECK:       vector.load %[[KT]][%{{.+}}, %[[STEP]]]
//       CHECK:       %[[QB:.+]] = vector.broadcast %{{.+}} : f32 to vector<16xf32>
//       CHECK:       vector.fma %[[QB]], %{{.+}}, %[[S0]] : vector<16xf32>
//       CHECK:       vector.fma %[[QB]], %{{.+}}, %[[S1]] : vector<16xf32>
// The row's running max and sum, loaded before any row of the block
// stores its update.
//       CHECK:     %[[OLDMAX:.+]] = memref.load %[[MAX]]
//       CHECK:     %[[OLDSUM:.+]] = memref.load %[[SUM]]
// Scale, soft-cap (c * tanh(s / c)), then the keep-mask: its row becomes
// 0 / -inf biases, and a -inf one selects -inf for the score (an addition
// would let a NaN score through: NaN + -inf is NaN); a keep mask's biases
// add nothing else. Where the mask's rows have unit stride, a whole
// block's row is read 16 bytes a load (masked only in a partial block:
// AMD's masked loads from memory cost a bf16 bias mask 1.2x); a mask
// whose rows may have another stride is read element by element.
//       CHECK:     arith.mulf %[[S]]#0, %[[SCALE]]
//       CHECK:     %[[T:.+]] = math.tanh
//       CHECK:     arith.mulf %[[T]], %[[CAP]]
//       CHECK:     %[[WHOLE:.+]] = arith.cmpi eq, %{{.+}}, %c32 : index
//       CHECK:     scf.if %[[WHOLE]] {
//       CHECK:       %[[BYTES:.+]] = llvm.intr.masked.load %{{.+}}, %[[ALL:cst(_[0-9]+)?]], %{{.+}} {alignment = 1 : i32} : (!llvm.ptr, vector<16xi1>, vector<16xi8>) -> vector<16xi8>
//       CHECK:       %[[KEPT:.+]] = arith.cmpi ne, %[[BYTES]], %{{.+}} : vector<16xi8>
//       CHECK:       arith.select %[[KEPT]], %{{.+}}, %{{.+}} : vector<16xi1>, vector<16xf32>
//       CHECK:       vector.store %{{.+}}, %[[BIAS]][%c0]
//       CHECK:     } else {
//       CHECK:       vector.create_mask
//       CHECK:       llvm.intr.masked.load
//       CHECK:     %[[B:.+]] = vector.load %[[BIAS]]
//   CHECK-NOT:     vector.fma %[[B]]
//       CHECK:     %[[EXCL:.+]] = arith.cmpf oeq, %[[B]], %{{.+}} : vector<16xf32>
//       CHECK:     arith.select %[[EXCL]], %{{.+}}, %{{.+}} : vector<16xi1>, vector<16xf32>
// The causal band and the block's key count select -inf.
//       CHECK:     vector.step
//       CHECK:     arith.cmpi slt
//       CHECK:     arith.cmpi sle
//       CHECK:     arith.select %{{.+}}, %{{.+}}, %{{.+}} : vector<16xi1>, vector<16xf32>
// Online update: new max, exp of non-positive numbers only, rescale.
// The row's max by halves (16, 8, 4, 2 lanes), each x > y ? x : y.
//       CHECK:     vector.extract_strided_slice %{{.+}} {offsets = [8], sizes = [8], strides = [1]} : vector<16xf32> to vector<8xf32>
//       CHECK:     arith.cmpf ogt, %{{.+}}, %{{.+}} : vector<8xf32>
//       CHECK:     vector.extract_strided_slice %{{.+}} {offsets = [1], sizes = [1], strides = [1]} : vector<2xf32> to vector<1xf32>
//       CHECK:     %[[BMAX:.+]] = vector.extract %{{.+}}[0] : f32 from vector<1xf32>
//       CHECK:     %[[GT:.+]] = arith.cmpf ogt, %[[BMAX]], %[[OLDMAX]] : f32
//       CHECK:     %[[NEWMAX:.+]] = arith.select %[[GT]], %[[BMAX]], %[[OLDMAX]] : f32
//       CHECK:     %[[NONE:.+]] = arith.cmpf oeq, %[[NEWMAX]]
//       CHECK:     %[[SAFE:.+]] = arith.select %[[NONE]], %{{.+}}, %[[NEWMAX]] : f32
//       CHECK:     %[[DELTA:.+]] = arith.subf %[[OLDMAX]], %[[SAFE]]
//       CHECK:     %[[ALPHA:.+]] = math.exp2 %[[DELTA]] {attn.nonpositive} : f32
//       CHECK:     math.exp2 %{{.+}} {attn.nonpositive} : vector<16xf32>
//       CHECK:     vector.store %{{.+}}, %[[P]]
//       CHECK:     vector.reduction <add>
//       CHECK:     arith.mulf %[[OLDSUM]], %[[ALPHA]]
//       CHECK:     memref.store %[[NEWMAX]], %[[MAX]]
//       CHECK:     memref.store %{{.+}}, %[[SUM]]
// P·V into the rescaled accumulator row; the tail chunk is masked. The
// mask may exclude a key for some rows only (weight 0, and 0 · NaN is
// NaN): where the block's packed V is finite (summed times 0 once a
// block), plain FMAs; else FMAs that drop the keys of weight 0.
//       CHECK:     vector.load %[[ACC]]
//       CHECK:     %[[TAIL:.+]] = vector.constant_mask [4] : vector<16xi1>
//       CHECK:     vector.maskedload %[[ACC]][{{.+}}], %[[TAIL]]
//       CHECK:     scf.if %{{.+}} -> (vector<16xf32>, vector<16xf32>) {
//       CHECK:       scf.for %{{.+}} = %c0 to %{{.+}} step %c1 iter_args
//       CHECK:         memref.load %[[P]]
//   CHECK-NOT:         arith.select
//       CHECK:         vector.fma
//       CHECK:         vector.fma
//       CHECK:     } else {
//       CHECK:         arith.cmpf oeq
//       CHECK:         arith.select
//       CHECK:         vector.fma
//       CHECK:     vector.store %{{.+}}, %[[ACC]]
//       CHECK:     vector.maskedstore %[[ACC]]
// The maxima back in natural units, for the op's other readers.
//       CHECK: %[[M:.+]] = memref.load %[[MAX]]
//  CHECK-NEXT: %[[M1:.+]] = arith.mulf %[[M]], %[[LN2]] : f32
//  CHECK-NEXT: memref.store %[[M1]], %[[MAX]]
//  CHECK-NEXT: }
//  CHECK-NEXT: return
// With row-block=2 two query rows share each packed K and V vector load:
// four score accumulators from two K loads. An odd row count's last block
// repeats the last row in its second slot (min(row + 1, rows - 1)); both
// slots load the row's max and sum before either stores, so that the
// repeat computes and stores the same update: no second copy of the
// micro-kernel for the row left over.
// ROWS-LABEL: func @causal_masked
//       ROWS: scf.if
//       ROWS: %[[LASTROW:.+]] = arith.subi %[[ROWS:.+]], %c1
//       ROWS: scf.for %[[R0:.+]] = %c0 to %[[ROWS]] step %c2
//       ROWS:   %[[NEXT:.+]] = arith.addi %[[R0]], %c1
//       ROWS:   %[[R1:.+]] = arith.minsi %[[NEXT]], %[[LASTROW]]
//       ROWS:   scf.for {{.+}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
//       ROWS:     %[[K0:.+]] = vector.load
//       ROWS:     %[[K1:.+]] = vector.load
//       ROWS:     vector.fma %{{.+}}, %[[K0]]
//       ROWS:     vector.fma %{{.+}}, %[[K1]]
//       ROWS:     vector.fma %{{.+}}, %[[K0]]
//       ROWS:     vector.fma %{{.+}}, %[[K1]]
//   ROWS-NOT:   memref.store
//       ROWS:   memref.load %{{.+}}[%c0, %c0, %[[R0]]] : memref<1x1x?xf32>
//       ROWS:   memref.load %{{.+}}[%c0, %c0, %[[R0]]] : memref<1x1x?xf32>
//       ROWS:   memref.load %{{.+}}[%c0, %c0, %[[R1]]] : memref<1x1x?xf32>
//       ROWS:   memref.load %{{.+}}[%c0, %c0, %[[R1]]] : memref<1x1x?xf32>
//       ROWS:   memref.store %{{.+}}[%c0, %c0, %[[R0]]] : memref<1x1x?xf32>
//   ROWS-NOT: to %[[ROWS]] step %c1
//       ROWS: } else {
//   ROWS-NOT: to %[[ROWS]] step %c1
//       ROWS: scf.for %{{.+}} = %c0 to %[[ROWS]] step %c2
//   ROWS-NOT: to %[[ROWS]] step %c1
//       ROWS: return
func.func @causal_masked(%q: memref<1x1x?x32xf32>, %k: memref<1x1x?x32xf32>, %v: memref<1x1x?x20xf32>,
                         %mask: memref<1x1x?x?xi1>,
                         %acc: memref<1x1x?x20xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>, %d: index) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x32xf32>, memref<1x1x?x32xf32>, memref<1x1x?x20xf32>)
      mask(%mask : memref<1x1x?x?xi1>) diagonal(%d)
      outs(%acc, %m, %s : memref<1x1x?x20xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>) causal softcap(30.0)
  return
}

// -----

// An additive mask: the bias joins the score by an FMA with log2 e (the
// softmax runs in base 2), and a -inf bias still excludes the key by a
// select, so that a NaN score there does not reach the row. A whole block's
// row of the mask is read by plain loads, then what the row reads at the
// next block is prefetched into L2 (a line of 16 f32 keys a step and the
// block's last key, clamped to the mask's last).

// CHECK-LABEL: func @bias_mask
//   CHECK-DAG: %[[LOG2EV:.+]] = arith.constant dense<1.44269502> : vector<16xf32>
//   CHECK-DAG: %[[NEGINF:.+]] = arith.constant dense<0xFF800000> : vector<16xf32>
//       CHECK: scf.for %[[START:.+]] = %c0 to %{{.+}} step %c32 {
//       CHECK:   scf.for %[[ROW:.+]] = %c0 to %{{.+}} step %c1 {
//       CHECK:     scf.if
//  CHECK-NEXT:       vector.load %{{.+}}[%c0, %c0, %[[ROW]], %[[START]]]
//       CHECK:       vector.load
//       CHECK:       %[[NEXT:.+]] = arith.addi %[[START]], %c32 : index
//       CHECK:       %[[K0:.+]] = arith.minsi %[[NEXT]], %{{.+}} : index
//       CHECK:       memref.prefetch %arg3[%c0, %c0, %[[ROW]], %[[K0]]], read, locality<2>, data
//       CHECK:       arith.addi %[[START]], %c48 : index
//       CHECK:       memref.prefetch %arg3[%c0, %c0, %[[ROW]], %{{.+}}], read, locality<2>, data
//       CHECK:       arith.addi %[[START]], %c63 : index
//       CHECK:       memref.prefetch %arg3[%c0, %c0, %[[ROW]], %{{.+}}], read, locality<2>, data
//       CHECK:     } else {
//   CHECK-NOT:       memref.prefetch
//       CHECK:     }
//       CHECK: %[[B:.+]] = vector.load %{{.+}} : memref<32xf32>, vector<16xf32>
//       CHECK: %[[BIASED:.+]] = vector.fma %[[B]], %[[LOG2EV]], %{{.+}} : vector<16xf32>
//       CHECK: %[[EXCL:.+]] = arith.cmpf oeq, %[[B]], %[[NEGINF]] : vector<16xf32>
//       CHECK: arith.select %[[EXCL]], %[[NEGINF]], %[[BIASED]] : vector<16xi1>, vector<16xf32>
func.func @bias_mask(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                     %mask: memref<1x1x?x?xf32>,
                     %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      mask(%mask : memref<1x1x?x?xf32>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}

// -----

// bf16 inputs are widened to f32 as they are packed and loaded.

// CHECK-LABEL: func @bf16
//       CHECK: memref.load %{{.+}} : memref<1x1x?x16xbf16>
//  CHECK-NEXT: arith.extf %{{.+}} : bf16 to f32
//   CHECK-NOT: math.tanh
func.func @bf16(%q: memref<1x1x?x16xbf16>, %k: memref<1x1x?x16xbf16>, %v: memref<1x1x?x16xbf16>,
                %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xbf16>, memref<1x1x?x16xbf16>, memref<1x1x?x16xbf16>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}

// -----

// An op written with align(...) instead of a diagonal operand (found by
// attn-fuzz-ir: the diagonal was taken to be the missing operand). Its
// diagonal is Sk - Sq of its own operands for bottom_right...
// CHECK-LABEL: func @align_bottom_right
// CHECK-DAG: %[[SK:.+]] = memref.dim %{{.+}}, %c2 : memref<1x2x?x8xf32>
// CHECK: arith.subi %[[SK]], %c16
// CHECK-NOT: attn.online_attention
func.func @align_bottom_right(%q: memref<1x2x16x8xf32>, %k: memref<1x2x?x8xf32>,
                              %v: memref<1x2x?x8xf32>, %acc: memref<1x2x16x8xf32>,
                              %max: memref<1x2x16xf32>, %sum: memref<1x2x16xf32>) {
  attn.online_attention
      ins(%q, %k, %v : memref<1x2x16x8xf32>, memref<1x2x?x8xf32>, memref<1x2x?x8xf32>)
      outs(%acc, %max, %sum : memref<1x2x16x8xf32>, memref<1x2x16xf32>, memref<1x2x16xf32>)
      causal align(bottom_right)
  return
}

// -----

// ... and 0 for top_left.
// CHECK-LABEL: func @align_top_left
// CHECK-NOT: attn.online_attention
// CHECK: return
func.func @align_top_left(%q: memref<1x2x16x8xf32>, %k: memref<1x2x?x8xf32>,
                          %v: memref<1x2x?x8xf32>, %acc: memref<1x2x16x8xf32>,
                          %max: memref<1x2x16xf32>, %sum: memref<1x2x16xf32>) {
  attn.online_attention
      ins(%q, %k, %v : memref<1x2x16x8xf32>, memref<1x2x?x8xf32>, memref<1x2x?x8xf32>)
      outs(%acc, %max, %sum : memref<1x2x16x8xf32>, memref<1x2x16xf32>, memref<1x2x16xf32>)
      align(top_left) window <left = 8>
  return
}

// -----

// An op's #attn.kernel (attn-choose-kernels' choice, here written by hand)
// overrides key-block and row-block: 64-key blocks (four score vectors per
// row) by 3 rows here, against the options' 32 by 1/2.

// CHECK-LABEL: func @own_blocking
//       CHECK: memref.alloca() {alignment = 64 : i64} : memref<16x64xf32>
//       CHECK: memref.alloca() {alignment = 64 : i64} : memref<3x64xf32>
//       CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c64
//       CHECK:   scf.for %{{.+}} = %c0 to %{{.+}} step %c3
//       CHECK:     scf.for {{.+}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
func.func @own_blocking(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                        %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>)
    {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
      kernel <packed, query_tile = 64, key_block = 64, row_block = 3>
  return
}

// -----

// A state whose rows have a static bound (a slice of a 64-row buffer, as
// attn-bufferize makes it) keeps each row's sum on the packed path as a
// vector of per-lane partial sums in a [64][16] stack buffer: set from the
// sum before the key loop, updated with one FMA per block (alpha * partial
// + p), reduced into the sum once after it. No horizontal sum per block.

// CHECK-LABEL: func @vector_sums
//  CHECK-SAME: %[[SUM:[a-z0-9]+]]: memref<1x1x64xf32>
//       CHECK: %[[PARTIAL:.+]] = memref.alloca() {alignment = 64 : i64} : memref<64x16xf32>
//       CHECK: %[[S:.+]] = memref.subview %[[SUM]]
//       CHECK: scf.for %[[R0:.+]] = %c0 to %{{.+}} step %c1 {
//       CHECK:   %[[OLD:.+]] = memref.load %[[S]][%c0, %c0, %[[R0]]]
//       CHECK:   %[[FIRST:.+]] = vector.insert %[[OLD]], %{{.+}} [0] : f32 into vector<16xf32>
//       CHECK:   vector.store %[[FIRST]], %[[PARTIAL]][%[[R0]], %c0]
//       CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c32 {
//   CHECK-NOT:   vector.reduction <add>
//       CHECK:   %[[SUMS:.+]] = vector.load %[[PARTIAL]][%[[ROW:.+]], %c0]
//   CHECK-NOT:   vector.reduction <add>
//       CHECK:   %[[NEW:.+]] = vector.fma %{{.+}}, %[[SUMS]], %{{.+}} : vector<16xf32>
//       CHECK:   vector.store %[[NEW]], %[[PARTIAL]][%[[ROW]], %c0]
//   CHECK-NOT:   vector.reduction <add>
//       CHECK: scf.for %[[R1:.+]] = %c0 to %{{.+}} step %c1 {
//       CHECK:   %[[LAST:.+]] = vector.load %[[PARTIAL]][%[[R1]], %c0]
//       CHECK:   %[[TOTAL:.+]] = vector.reduction <add>, %[[LAST]]
//       CHECK:   memref.store %[[TOTAL]], %[[S]][%c0, %c0, %[[R1]]]
func.func @vector_sums(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                       %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %sum: memref<1x1x64xf32>,
                       %rows: index) {
  %s = memref.subview %sum[0, 0, 0] [1, 1, %rows] [1, 1, 1] : memref<1x1x64xf32> to memref<1x1x?xf32, strided<[64, 64, 1]>>
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32, strided<[64, 64, 1]>>)
  return
}
