// RUN: attn-opt %s -split-input-file -attn-outline-work-items -canonicalize | FileCheck %s

// A kernel's parallel tiles become work items for a host thread pool:
// @kernel_work_items counts them from the argument sizes, @kernel_run runs
// items [begin, end), delinearizing each back to the forall's indices, last
// tile first (item i is linear index N - 1 - i: a causal kernel's costliest
// tiles start first and its cheapest end the call). The per-tile stack
// buffer moves to the entry (one per call, i.e. per thread).

// CHECK-LABEL: func @kernel_work_items
//  CHECK-SAME: (%[[O:.+]]: memref<2x?x32xf32, {{.+}}>) -> index
//       CHECK: %[[SQ:.+]] = memref.dim %[[O]], %c1
//       CHECK: %[[TILES:.+]] = arith.ceildivsi %[[SQ]], %c16
//       CHECK: %[[N:.+]] = arith.muli %[[TILES]], %c2
//       CHECK: %[[NN:.+]] = arith.maxsi %[[N]], %c0
//       CHECK: return %[[NN]]

// CHECK-LABEL: func @kernel_run
//  CHECK-SAME: (%[[O:.+]]: memref<2x?x32xf32, {{.+}}>, %[[BEGIN:.+]]: index, %[[END:.+]]: index)
//       CHECK: %[[BUF:.+]] = memref.alloca() : memref<16xf32>
//       CHECK: %[[TILES:.+]] = arith.ceildivsi
//       CHECK: %[[ALL:.+]] = arith.muli %[[TILES]], %c2
//       CHECK: scf.for %[[IT:.+]] = %[[BEGIN]] to %[[END]] step %c1
//       CHECK:   %[[LEFT:.+]] = arith.subi %[[ALL]], %[[IT]]
//       CHECK:   %[[LIN:.+]] = arith.subi %[[LEFT]], %c1
//       CHECK:   %[[T:.+]] = arith.remui %[[LIN]], %[[TILES]]
//       CHECK:   %[[B:.+]] = arith.divui %[[LIN]], %[[TILES]]
//       CHECK:   %[[I:.+]] = arith.muli %[[T]], %c16
//       CHECK:   memref.store %{{.+}}, %[[BUF]]
//       CHECK:   memref.store %{{.+}}, %[[O]][%[[B]], %[[I]], %c1]
//   CHECK-NOT: func.func @kernel(
func.func @kernel(%o: memref<2x?x32xf32, strided<[?, ?, ?], offset: ?>>) attributes {attn.kernel} {
  %c1 = arith.constant 1 : index
  %sq = memref.dim %o, %c1 : memref<2x?x32xf32, strided<[?, ?, ?], offset: ?>>
  %cst = arith.constant 1.0 : f32
  scf.forall (%b, %i) = (0, 0) to (2, %sq) step (1, 16) {
    %buf = memref.alloca() : memref<16xf32>
    memref.store %cst, %buf[%c1] : memref<16xf32>
    %v = memref.load %buf[%c1] : memref<16xf32>
    memref.store %v, %o[%b, %i, %c1] : memref<2x?x32xf32, strided<[?, ?, ?], offset: ?>>
  }
  return
}

// -----

// A function that is not a kernel runs its forall serially.

// CHECK-LABEL: func @not_a_kernel
//   CHECK-NOT: scf.forall
//       CHECK: scf.for %{{.+}} = %c0 to %c8 step %c1
func.func @not_a_kernel(%o: memref<8xf32>) {
  %cst = arith.constant 1.0 : f32
  scf.forall (%i) in (8) {
    memref.store %cst, %o[%i] : memref<8xf32>
  }
  return
}

// -----

// A kernel whose static sizes make one tile has had its forall folded away
// by canonicalization: its whole body is one work item.

// CHECK-LABEL: func @one_tile_work_items
//       CHECK: return %c1
// CHECK-LABEL: func @one_tile_run
//  CHECK-SAME: (%[[O:.+]]: memref<8xf32>, %[[BEGIN:.+]]: index, %[[END:.+]]: index)
//       CHECK: scf.for %{{.+}} = %[[BEGIN]] to %[[END]] step %c1
//       CHECK:   memref.store %{{.+}}, %[[O]][%c3]
func.func @one_tile(%o: memref<8xf32>) attributes {attn.kernel} {
  %cst = arith.constant 1.0 : f32
  %c3 = arith.constant 3 : index
  memref.store %cst, %o[%c3] : memref<8xf32>
  return
}
