// RUN: not attn-opt %s -attn-tile=query-tile-size=-3 2>&1 | FileCheck %s --check-prefix=QUERY
// RUN: not attn-opt %s -attn-tile-keys=key-tile-size=0 2>&1 | FileCheck %s --check-prefix=KEYS
// RUN: not attn-opt %s -attn-lower-to-vector=key-block=24 2>&1 | FileCheck %s --check-prefix=BLOCK

// Bad pass options are diagnosed with their value.
// QUERY: attn-tile: query-tile-size must be >= 1 and banded-query-tile-size >= 0, found -3 and 0
// KEYS: attn-tile-keys: key-tile-size must be >= 1, found 0
// BLOCK: key-block (24) must be a positive multiple of vector-width (16)
func.func @f() {
  return
}
