// RUN: attn-opt %s -split-input-file -verify-diagnostics

// One case per rule of the attn ops' verifiers (dialect/AttnOps.cpp) and a
// few malformed inputs that the parser rejects. The reference shapes are
// Q: 1x4x8x16, K: 1x2x32x16, V: 1x2x32x8, O: 1x4x8x8, LSE: 1x4x8 (f32, GQA
// with G = 2); each case breaks exactly one rule.

func.func @query_rank(%q: tensor<4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                      %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{query must have rank 4 ([B, Hq, Sq, D]), found rank 3}}
  %r = attn.attention ins(%q, %k, %v : tensor<4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @key_rank(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16x1xf32>,
                    %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{key must have rank 4 ([B, Hkv, Sk, D]), found rank 5}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16x1xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @value_rank(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                      %v: tensor<32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{value must have rank 4 ([B, Hkv, Sk, Dv]), found rank 2}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @mask_rank(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                     %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>,
                     %m: tensor<8x32xi1>) {
  // expected-error @+1 {{mask must have rank 4 ([Bm, Hm, Sqm, Sk]), found rank 2}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      mask(%m : tensor<8x32xi1>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @output_rank(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                       %v: tensor<1x2x32x8xf32>, %o: tensor<4x8x8xf32>) {
  // expected-error @+1 {{output must have rank 4 ([B, Hq, Sq, Dv]), found rank 3}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  return
}

// -----

func.func @lse_rank(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                    %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>,
                    %l: tensor<1x4x8x1xf32>) {
  // expected-error @+1 {{lse must have rank 3 ([B, Hq, Sq]), found rank 4}}
  %r:2 = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o, %l : tensor<1x4x8x8xf32>, tensor<1x4x8x1xf32>) -> tensor<1x4x8x8xf32>, tensor<1x4x8x1xf32>
  return
}

// -----

func.func @query_element_i32(%q: tensor<1x4x8x16xi32>,
                             %k: tensor<1x2x32x16xi32>,
                             %v: tensor<1x2x32x8xi32>,
                             %o: tensor<1x4x8x8xi32>) {
  // expected-error @+1 {{query element type must be f32, f16 or bf16, found 'i32'}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xi32>, tensor<1x2x32x16xi32>, tensor<1x2x32x8xi32>)
      outs(%o : tensor<1x4x8x8xi32>) -> tensor<1x4x8x8xi32>
  return
}

// -----

func.func @query_element_f64(%q: tensor<1x4x8x16xf64>,
                             %k: tensor<1x2x32x16xf64>,
                             %v: tensor<1x2x32x8xf64>,
                             %o: tensor<1x4x8x8xf64>) {
  // expected-error @+1 {{query element type must be f32, f16 or bf16, found 'f64'}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf64>, tensor<1x2x32x16xf64>, tensor<1x2x32x8xf64>)
      outs(%o : tensor<1x4x8x8xf64>) -> tensor<1x4x8x8xf64>
  return
}

// -----

func.func @key_element(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf16>,
                       %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{key element type must equal the query's ('f32'), found 'f16'}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf16>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @value_element(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                         %v: tensor<1x2x32x8xbf16>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{value element type must equal the query's ('f32'), found 'bf16'}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xbf16>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @mask_element_int(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                            %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>,
                            %m: tensor<1x1x8x32xi8>) {
  // expected-error @+1 {{mask element type must be i1 (keep-mask) or the query's 'f32' (additive bias), found 'i8'}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      mask(%m : tensor<1x1x8x32xi8>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

// An additive bias has the query's float type, not just any float.
func.func @mask_element_other_float(%q: tensor<1x4x8x16xf32>,
                                    %k: tensor<1x2x32x16xf32>,
                                    %v: tensor<1x2x32x8xf32>,
                                    %o: tensor<1x4x8x8xf32>,
                                    %m: tensor<1x1x8x32xf16>) {
  // expected-error @+1 {{mask element type must be i1 (keep-mask) or the query's 'f32' (additive bias), found 'f16'}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      mask(%m : tensor<1x1x8x32xf16>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @output_element(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                          %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf16>) {
  // expected-error @+1 {{output element type must be 'f32', found 'f16'}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf16>) -> tensor<1x4x8x8xf16>
  return
}

// -----

// The log-sum-exp is f32 whatever the input type.
func.func @lse_element(%q: tensor<1x4x8x16xf16>, %k: tensor<1x2x32x16xf16>,
                       %v: tensor<1x2x32x8xf16>, %o: tensor<1x4x8x8xf16>,
                       %l: tensor<1x4x8xf16>) {
  // expected-error @+1 {{lse element type must be 'f32', found 'f16'}}
  %r:2 = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf16>, tensor<1x2x32x16xf16>, tensor<1x2x32x8xf16>)
      outs(%o, %l : tensor<1x4x8x8xf16>, tensor<1x4x8xf16>) -> tensor<1x4x8x8xf16>, tensor<1x4x8xf16>
  return
}

// -----

func.func @query_dynamic_d(%q: tensor<1x4x8x?xf32>, %k: tensor<1x2x32x16xf32>,
                           %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{query dim 3 (D) must be static, found ?}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x?xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @key_dynamic_d(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x?xf32>,
                         %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{key dim 3 (D) must be static, found ?}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x?xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @value_dynamic_dv(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                            %v: tensor<1x2x32x?xf32>, %o: tensor<1x4x8x?xf32>) {
  // expected-error @+1 {{value dim 3 (Dv) must be static, found ?}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x?xf32>)
      outs(%o : tensor<1x4x8x?xf32>) -> tensor<1x4x8x?xf32>
  return
}

// -----

func.func @query_zero_d(%q: tensor<1x4x8x0xf32>, %k: tensor<1x2x32x0xf32>,
                        %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{query dim 3 (D) must be at least 1, found 0}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x0xf32>, tensor<1x2x32x0xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @value_zero_dv(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                         %v: tensor<1x2x32x0xf32>, %o: tensor<1x4x8x0xf32>) {
  // expected-error @+1 {{value dim 3 (Dv) must be at least 1, found 0}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x0xf32>)
      outs(%o : tensor<1x4x8x0xf32>) -> tensor<1x4x8x0xf32>
  return
}

// -----

// Head dims past 1024 would keep the lowering busy for minutes and
// gigabytes (D = 1048576 ran 72 s and grew to 2 GB): refused.
func.func @huge_d(%q: tensor<1x1x8x1048576xf32>, %k: tensor<1x1x32x1048576xf32>,
                  %v: tensor<1x1x32x8xf32>, %o: tensor<1x1x8x8xf32>) {
  // expected-error @+1 {{query dim 3 (D) must be at most 1024, found 1048576}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x8x1048576xf32>, tensor<1x1x32x1048576xf32>, tensor<1x1x32x8xf32>)
      outs(%o : tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32>
  return
}

// -----

func.func @huge_dv(%q: tensor<1x1x8x16xf32>, %k: tensor<1x1x32x16xf32>,
                   %v: tensor<1x1x32x1025xf32>, %o: tensor<1x1x8x1025xf32>) {
  // expected-error @+1 {{value dim 3 (Dv) must be at most 1024, found 1025}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x8x16xf32>, tensor<1x1x32x16xf32>, tensor<1x1x32x1025xf32>)
      outs(%o : tensor<1x1x8x1025xf32>) -> tensor<1x1x8x1025xf32>
  return
}

// -----

func.func @key_batch(%q: tensor<1x4x8x16xf32>, %k: tensor<2x2x32x16xf32>,
                     %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{key dim 0 (B) must equal query's B = 1, found 2}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<2x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @key_head_dim(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x8xf32>,
                        %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{key dim 3 (D) must equal query's D = 16, found 8}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x8xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @value_batch(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                       %v: tensor<3x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{value dim 0 (B) must equal query's B = 1, found 3}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<3x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @value_heads(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                       %v: tensor<1x4x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{value dim 1 (Hkv) must equal key's Hkv = 2, found 4}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x4x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @value_keys(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                      %v: tensor<1x2x31x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{value dim 2 (Sk) must equal key's Sk = 32, found 31}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x31x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @zero_kv_heads(%q: tensor<1x4x8x16xf32>, %k: tensor<1x0x32x16xf32>,
                         %v: tensor<1x0x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{key dim 1 (Hkv) must be at least 1, found 0}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x0x32x16xf32>, tensor<1x0x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @gqa_not_multiple(%q: tensor<1x4x8x16xf32>, %k: tensor<1x3x32x16xf32>,
                            %v: tensor<1x3x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{query heads (Hq = 4) must be a multiple of key/value heads (Hkv = 3) for grouped-query attention}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x3x32x16xf32>, tensor<1x3x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @mask_batch(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x32x16xf32>,
                      %v: tensor<2x2x32x8xf32>, %o: tensor<2x4x8x8xf32>,
                      %m: tensor<3x1x1x32xi1>) {
  // expected-error @+1 {{mask dim 0 must be 1 (broadcast) or the query's B = 2, found 3}}
  %r = attn.attention ins(%q, %k, %v : tensor<2x4x8x16xf32>, tensor<2x2x32x16xf32>, tensor<2x2x32x8xf32>)
      mask(%m : tensor<3x1x1x32xi1>)
      outs(%o : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return
}

// -----

// A mask broadcasts over query heads, never over key/value heads.
func.func @mask_heads(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                      %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>,
                      %m: tensor<1x2x1x32xi1>) {
  // expected-error @+1 {{mask dim 1 must be 1 (broadcast) or the query's Hq = 4, found 2}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      mask(%m : tensor<1x2x1x32xi1>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @mask_query_rows(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                           %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>,
                           %m: tensor<1x1x4x32xi1>) {
  // expected-error @+1 {{mask dim 2 must be 1 (broadcast) or the query's Sq = 8, found 4}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      mask(%m : tensor<1x1x4x32xi1>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

// The key dimension of a mask never broadcasts.
func.func @mask_keys(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                     %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>,
                     %m: tensor<1x1x8x1xi1>) {
  // expected-error @+1 {{mask dim 3 (Sk) must equal key's Sk = 32, found 1}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      mask(%m : tensor<1x1x8x1xi1>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @window_no_side(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                          %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{window must bound at least one side (left or right)}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) align(top_left) window <> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @window_negative_left(%q: tensor<1x4x8x16xf32>,
                                %k: tensor<1x2x32x16xf32>,
                                %v: tensor<1x2x32x8xf32>,
                                %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{window left must be >= 0, found -1}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) align(top_left) window <left = -1> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @window_negative_right(%q: tensor<1x4x8x16xf32>,
                                 %k: tensor<1x2x32x16xf32>,
                                 %v: tensor<1x2x32x8xf32>,
                                 %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{window right must be >= 0, found -3}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) align(top_left) window <left = 2, right = -3> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @causal_without_diagonal(%q: tensor<1x4x8x16xf32>,
                                   %k: tensor<1x2x32x16xf32>,
                                   %v: tensor<1x2x32x8xf32>,
                                   %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{causal masking and windows need the diagonal: set align(top_left) or align(bottom_right), or a diagonal operand}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) causal -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @window_without_diagonal(%q: tensor<1x4x8x16xf32>,
                                   %k: tensor<1x2x32x16xf32>,
                                   %v: tensor<1x2x32x8xf32>,
                                   %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{causal masking and windows need the diagonal}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) window <left = 4> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @align_and_diagonal(%q: tensor<1x4x8x16xf32>,
                              %k: tensor<1x2x32x16xf32>,
                              %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>,
                              %d: index) {
  // expected-error @+1 {{takes either align(...) or a diagonal operand, not both}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      diagonal(%d)
      outs(%o : tensor<1x4x8x8xf32>) causal align(top_left) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @align_without_mask(%q: tensor<1x4x8x16xf32>,
                              %k: tensor<1x2x32x16xf32>,
                              %v: tensor<1x2x32x8xf32>,
                              %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{align(...) and diagonal(...) need causal or a window; found neither}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) align(bottom_right) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @diagonal_without_mask(%q: tensor<1x4x8x16xf32>,
                                 %k: tensor<1x2x32x16xf32>,
                                 %v: tensor<1x2x32x8xf32>,
                                 %o: tensor<1x4x8x8xf32>, %d: index) {
  // expected-error @+1 {{align(...) and diagonal(...) need causal or a window; found neither}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      diagonal(%d)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @scale_inf(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                     %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{scale must be finite, found INF}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) scale(0x7F800000) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @scale_nan(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                     %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{scale must be finite, found nan}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) scale(0x7FC00000) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @softcap_zero(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                        %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{softcap must be finite and > 0, found 0}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) softcap(0.0) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @softcap_negative(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                            %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{softcap must be finite and > 0, found -1.5}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) softcap(-1.5) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @softcap_inf(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                       %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{softcap must be finite and > 0, found INF}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) softcap(0x7F800000) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @output_batch(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                        %v: tensor<1x2x32x8xf32>, %o: tensor<2x4x8x8xf32>) {
  // expected-error @+1 {{output dim 0 (B) must equal query's B = 1, found 2}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return
}

// -----

// The output has the query's heads, not the key/value heads.
func.func @output_heads(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                        %v: tensor<1x2x32x8xf32>, %o: tensor<1x2x8x8xf32>) {
  // expected-error @+1 {{output dim 1 (Hq) must equal query's Hq = 4, found 2}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  return
}

// -----

func.func @output_rows(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                       %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x32x8xf32>) {
  // expected-error @+1 {{output dim 2 (Sq) must equal query's Sq = 8, found 32}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x32x8xf32>) -> tensor<1x4x32x8xf32>
  return
}

// -----

// The output takes the value's head dim Dv, not the query's D.
func.func @output_value_dim(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                            %v: tensor<1x2x32x8xf32>,
                            %o: tensor<1x4x8x16xf32>) {
  // expected-error @+1 {{output dim 3 (Dv) must equal value's Dv = 8, found 16}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return
}

// -----

func.func @lse_rows(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                    %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>,
                    %l: tensor<1x4x4xf32>) {
  // expected-error @+1 {{lse dim 2 (Sq) must equal query's Sq = 8, found 4}}
  %r:2 = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o, %l : tensor<1x4x8x8xf32>, tensor<1x4x4xf32>) -> tensor<1x4x8x8xf32>, tensor<1x4x4xf32>
  return
}

// -----

func.func @too_few_results(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                           %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>,
                           %l: tensor<1x4x8xf32>) {
  // expected-error @+1 {{must have one result per outs tensor (2), found 1}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o, %l : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

// On tensors the result types are not optional: the parser asks for them.
func.func @no_results(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                      %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>)
  // expected-error @+1 {{expected '->' and the result types (the outs are tensors), found 'return'}}
  return
}

// -----

// Results that do not match the outs are the verifier's to refuse.
func.func @too_few_results(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                           %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>,
                           %l: tensor<1x4x8xf32>) {
  // expected-error @+1 {{must have one result per outs tensor (2), found 1}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o, %l : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

// A result has exactly its outs tensor's type, dynamic dims included.
func.func @result_type(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                       %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{result 0 type must equal its outs tensor's 'tensor<1x4x8x8xf32>', found 'tensor<1x4x?x8xf32>'}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x?x8xf32>
  return
}

// -----

// The custom format cannot express an empty outs list; the generic form can.
func.func @outs_empty(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                      %v: tensor<1x2x32x8xf32>) {
  // expected-error @+1 {{outs must hold the output and optionally the log-sum-exp (1 or 2 tensors), found 0}}
  "attn.attention"(%q, %k, %v) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0>}>
      : (tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>) -> ()
  return
}

// -----

func.func @outs_three(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                      %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>,
                      %l: tensor<1x4x8xf32>) {
  // expected-error @+1 {{outs must hold the output and optionally the log-sum-exp (1 or 2 tensors), found 3}}
  %r:3 = "attn.attention"(%q, %k, %v, %o, %l, %l) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 3>}>
      : (tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> (tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  return
}

// -----

// ODS constraints hold before the verifier runs: the scale is an f32 attribute.
func.func @scale_not_f32(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                         %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{attribute 'scale' failed to satisfy constraint: 32-bit float attribute}}
  %r = "attn.attention"(%q, %k, %v, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1>, scale = 1.0 : f64}>
      : (tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @unranked_query(%q: tensor<*xf32>, %k: tensor<1x2x32x16xf32>,
                          %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{invalid kind of type specified: expected builtin.tensor, but found 'tensor<*xf32>'}}
  %r = attn.attention ins(%q, %k, %v : tensor<*xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>) outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

// attn.online_attention checks its inputs with the same rules as attn.attention.
func.func @online_inputs_checked(%q: tensor<1x4x8x16xf32>,
                                 %k: tensor<1x2x32x16xf32>,
                                 %v: tensor<1x2x32x8xf32>,
                                 %acc: tensor<1x4x8x8xf32>,
                                 %max: tensor<1x4x8xf32>,
                                 %sum: tensor<1x4x8xf32>) {
  // expected-error @+1 {{causal masking and windows need the diagonal}}
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%acc, %max, %sum : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) causal
      -> tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  return
}

// -----

func.func @online_unranked_query(%q: tensor<*xf32>, %k: tensor<1x2x32x16xf32>,
                                 %v: tensor<1x2x32x8xf32>,
                                 %acc: tensor<1x4x8x8xf32>,
                                 %max: tensor<1x4x8xf32>,
                                 %sum: tensor<1x4x8xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor or memref, but got 'tensor<*xf32>'}}
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<*xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%acc, %max, %sum : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
      -> tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  return
}

// -----

func.func @online_acc_rank(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                           %v: tensor<1x2x32x8xf32>, %acc: tensor<4x8x8xf32>,
                           %max: tensor<1x4x8xf32>, %sum: tensor<1x4x8xf32>) {
  // expected-error @+1 {{acc must have rank 4 ([B, Hq, Sq, Dv]), found rank 3}}
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%acc, %max, %sum : tensor<4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
      -> tensor<4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  return
}

// -----

func.func @online_max_rank(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                           %v: tensor<1x2x32x8xf32>, %acc: tensor<1x4x8x8xf32>,
                           %max: tensor<1x4x8x1xf32>, %sum: tensor<1x4x8xf32>) {
  // expected-error @+1 {{max must have rank 3 ([B, Hq, Sq]), found rank 4}}
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%acc, %max, %sum : tensor<1x4x8x8xf32>, tensor<1x4x8x1xf32>, tensor<1x4x8xf32>)
      -> tensor<1x4x8x8xf32>, tensor<1x4x8x1xf32>, tensor<1x4x8xf32>
  return
}

// -----

func.func @online_sum_rank(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                           %v: tensor<1x2x32x8xf32>, %acc: tensor<1x4x8x8xf32>,
                           %max: tensor<1x4x8xf32>, %sum: tensor<4x8xf32>) {
  // expected-error @+1 {{sum must have rank 3 ([B, Hq, Sq]), found rank 2}}
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%acc, %max, %sum : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<4x8xf32>)
      -> tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<4x8xf32>
  return
}

// -----

// The running state is f32 whatever the input type.
func.func @online_acc_element(%q: tensor<1x4x8x16xf16>,
                              %k: tensor<1x2x32x16xf16>,
                              %v: tensor<1x2x32x8xf16>,
                              %acc: tensor<1x4x8x8xf16>,
                              %max: tensor<1x4x8xf32>,
                              %sum: tensor<1x4x8xf32>) {
  // expected-error @+1 {{acc element type must be 'f32', found 'f16'}}
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x4x8x16xf16>, tensor<1x2x32x16xf16>, tensor<1x2x32x8xf16>)
      outs(%acc, %max, %sum : tensor<1x4x8x8xf16>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
      -> tensor<1x4x8x8xf16>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  return
}

// -----

func.func @online_max_element(%q: tensor<1x4x8x16xf32>,
                              %k: tensor<1x2x32x16xf32>,
                              %v: tensor<1x2x32x8xf32>,
                              %acc: tensor<1x4x8x8xf32>,
                              %max: tensor<1x4x8xbf16>,
                              %sum: tensor<1x4x8xf32>) {
  // expected-error @+1 {{max element type must be 'f32', found 'bf16'}}
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%acc, %max, %sum : tensor<1x4x8x8xf32>, tensor<1x4x8xbf16>, tensor<1x4x8xf32>)
      -> tensor<1x4x8x8xf32>, tensor<1x4x8xbf16>, tensor<1x4x8xf32>
  return
}

// -----

func.func @online_sum_element(%q: tensor<1x4x8x16xf32>,
                              %k: tensor<1x2x32x16xf32>,
                              %v: tensor<1x2x32x8xf32>,
                              %acc: tensor<1x4x8x8xf32>,
                              %max: tensor<1x4x8xf32>,
                              %sum: tensor<1x4x8xf16>) {
  // expected-error @+1 {{sum element type must be 'f32', found 'f16'}}
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%acc, %max, %sum : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf16>)
      -> tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf16>
  return
}

// -----

func.func @online_acc_value_dim(%q: tensor<1x4x8x16xf32>,
                                %k: tensor<1x2x32x16xf32>,
                                %v: tensor<1x2x32x8xf32>,
                                %acc: tensor<1x4x8x16xf32>,
                                %max: tensor<1x4x8xf32>,
                                %sum: tensor<1x4x8xf32>) {
  // expected-error @+1 {{acc dim 3 (Dv) must equal value's Dv = 8, found 16}}
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%acc, %max, %sum : tensor<1x4x8x16xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
      -> tensor<1x4x8x16xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  return
}

// -----

func.func @online_max_rows(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                           %v: tensor<1x2x32x8xf32>, %acc: tensor<1x4x8x8xf32>,
                           %max: tensor<1x4x16xf32>, %sum: tensor<1x4x8xf32>) {
  // expected-error @+1 {{max dim 2 (Sq) must equal query's Sq = 8, found 16}}
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%acc, %max, %sum : tensor<1x4x8x8xf32>, tensor<1x4x16xf32>, tensor<1x4x8xf32>)
      -> tensor<1x4x8x8xf32>, tensor<1x4x16xf32>, tensor<1x4x8xf32>
  return
}

// -----

func.func @online_sum_heads(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                            %v: tensor<1x2x32x8xf32>, %acc: tensor<1x4x8x8xf32>,
                            %max: tensor<1x4x8xf32>, %sum: tensor<1x2x8xf32>) {
  // expected-error @+1 {{sum dim 1 (Hq) must equal query's Hq = 4, found 2}}
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%acc, %max, %sum : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x2x8xf32>)
      -> tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x2x8xf32>
  return
}

// -----

func.func @online_memref_query(%q: memref<1x4x8x16xf32>,
                               %k: tensor<1x2x32x16xf32>,
                               %v: tensor<1x2x32x8xf32>,
                               %acc: tensor<1x4x8x8xf32>,
                               %max: tensor<1x4x8xf32>,
                               %sum: tensor<1x4x8xf32>) {
  // expected-error @+1 {{operands must be all tensors or all memrefs}}
  %r:3 = attn.online_attention ins(%q, %k, %v : memref<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%acc, %max, %sum : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
      -> tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  return
}

// -----

// The mask takes part in the tensor/memref rule too.
func.func @online_memref_mask(%q: tensor<1x4x8x16xf32>,
                              %k: tensor<1x2x32x16xf32>,
                              %v: tensor<1x2x32x8xf32>,
                              %acc: tensor<1x4x8x8xf32>,
                              %max: tensor<1x4x8xf32>, %sum: tensor<1x4x8xf32>,
                              %m: memref<1x1x8x32xi1>) {
  // expected-error @+1 {{operands must be all tensors or all memrefs}}
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      mask(%m : memref<1x1x8x32xi1>)
      outs(%acc, %max, %sum : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
      -> tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  return
}

// -----

func.func @online_tensor_query_memref_state(%q: tensor<1x4x8x16xf32>,
                                            %k: tensor<1x2x32x16xf32>,
                                            %v: tensor<1x2x32x8xf32>,
                                            %acc: memref<1x4x8x8xf32>,
                                            %max: memref<1x4x8xf32>,
                                            %sum: memref<1x4x8xf32>) {
  // expected-error @+1 {{operands must be all tensors or all memrefs}}
  attn.online_attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%acc, %max, %sum : memref<1x4x8x8xf32>, memref<1x4x8xf32>, memref<1x4x8xf32>)
  return
}

// -----

func.func @online_too_few_results(%q: tensor<1x4x8x16xf32>,
                                  %k: tensor<1x2x32x16xf32>,
                                  %v: tensor<1x2x32x8xf32>,
                                  %acc: tensor<1x4x8x8xf32>,
                                  %max: tensor<1x4x8xf32>,
                                  %sum: tensor<1x4x8xf32>) {
  // expected-error @+1 {{must have 3 results (one per outs tensor), found 2}}
  %r:2 = attn.online_attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%acc, %max, %sum : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
      -> tensor<1x4x8x8xf32>, tensor<1x4x8xf32>
  return
}

// -----

// After bufferization the op updates its buffers in place and has no results.
func.func @online_memref_results(%q: memref<1x4x8x16xf32>,
                                 %k: memref<1x2x32x16xf32>,
                                 %v: memref<1x2x32x8xf32>,
                                 %acc: memref<1x4x8x8xf32>,
                                 %max: memref<1x4x8xf32>,
                                 %sum: memref<1x4x8xf32>) {
  // expected-error @+1 {{must have 0 results (one per outs tensor), found 3}}
  %r:3 = attn.online_attention ins(%q, %k, %v : memref<1x4x8x16xf32>, memref<1x2x32x16xf32>, memref<1x2x32x8xf32>)
      outs(%acc, %max, %sum : memref<1x4x8x8xf32>, memref<1x4x8xf32>, memref<1x4x8xf32>)
      -> tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  return
}

// -----

func.func @online_result_type(%q: tensor<1x4x8x16xf32>,
                              %k: tensor<1x2x32x16xf32>,
                              %v: tensor<1x2x32x8xf32>,
                              %acc: tensor<1x4x8x8xf32>,
                              %max: tensor<1x4x8xf32>,
                              %sum: tensor<1x4x8xf32>) {
  // expected-error @+1 {{result type must equal its outs tensor's 'tensor<1x4x8xf32>', found 'tensor<1x4x?xf32>'}}
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%acc, %max, %sum : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
      -> tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x?xf32>
  return
}

// -----

func.func @missing_outs(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                        %v: tensor<1x2x32x8xf32>) {
  // expected-error @+1 {{expected 'outs'}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @missing_value(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                         %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{expected ','}}
  %r = attn.attention ins(%q, %k : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>) outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @unknown_alignment(%q: tensor<1x4x8x16xf32>,
                             %k: tensor<1x2x32x16xf32>,
                             %v: tensor<1x2x32x8xf32>,
                             %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'alignment' [top_left, bottom_right]}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>) outs(%o : tensor<1x4x8x8xf32>) causal align(middle) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @unknown_window_side(%q: tensor<1x4x8x16xf32>,
                               %k: tensor<1x2x32x16xf32>,
                               %v: tensor<1x2x32x8xf32>,
                               %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{duplicate or unknown struct parameter name: up}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>) outs(%o : tensor<1x4x8x8xf32>) align(top_left) window <up = 3> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @duplicate_window_side(%q: tensor<1x4x8x16xf32>,
                                 %k: tensor<1x2x32x16xf32>,
                                 %v: tensor<1x2x32x8xf32>,
                                 %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{duplicate or unknown struct parameter name: left}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>) outs(%o : tensor<1x4x8x8xf32>) align(top_left) window <left = 2, left = 3> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @integer_scale(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                         %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+2 {{unexpected decimal integer literal for a floating point value}}
  // expected-note @+1 {{add a trailing dot to make the literal a float}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>) outs(%o : tensor<1x4x8x8xf32>) scale(1) -> tensor<1x4x8x8xf32>
  return
}

// -----

// A misspelled clause after outs is named, with the clauses that may stand
// there (it used to end the op, and the parser read it as the next op).
func.func @unknown_keyword(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                           %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{found 'causl'; after outs(...) come, each optional and in this order, causal, align(...), window<...>, scale(...), softcap(...) and an attribute dictionary}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>) outs(%o : tensor<1x4x8x8xf32>) causl -> tensor<1x4x8x8xf32>
  return
}

// -----

// A misspelled attribute's value does not hide the name either.
func.func @unknown_keyword_with_value(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                                      %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{expected '->' and the result types (the outs are tensors), found 'bogus'}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>) outs(%o : tensor<1x4x8x8xf32>) causal bogus(3) -> tensor<1x4x8x8xf32>
  return
}

// -----

// The optional clauses have a fixed order: scale after causal and align.
func.func @clauses_out_of_order(%q: tensor<1x4x8x16xf32>,
                                %k: tensor<1x2x32x16xf32>,
                                %v: tensor<1x2x32x8xf32>,
                                %o: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{found 'causal'; after outs(...) come, each optional and in this order, causal, align(...)}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>) outs(%o : tensor<1x4x8x8xf32>) scale(0.5) causal align(top_left) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @online_vector_operands(%q: vector<1x2x4x8xf32>, %o: memref<1x2x4x8xf32>, %m: memref<1x2x4xf32>) {
  // expected-error @+1 {{must be ranked tensor or memref}}
  attn.online_attention ins(%q, %q, %q : vector<1x2x4x8xf32>, vector<1x2x4x8xf32>, vector<1x2x4x8xf32>)
      outs(%o, %m, %m : memref<1x2x4x8xf32>, memref<1x2x4xf32>, memref<1x2x4xf32>)
  return
}

// -----

func.func @kernel_lane_rows_without_tile(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                                         %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+2 {{#attn.kernel: lane_rows needs a lane_rows tile (lane_rows = N)}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) kernel <lane_rows, query_tile = 64, key_block = 64> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @kernel_packed_without_block_prefetch(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                                               %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+2 {{#attn.kernel: block_prefetch is a choice of the lane_rows micro-kernel, found block_prefetch = false on packed}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) kernel <packed, query_tile = 64, key_block = 64, row_block = 2, block_prefetch = false> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @kernel_gpu_with_cpu_choices(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                                       %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+2 {{#attn.kernel: lane_rows and bf16_dot are CPU choices; a GPU micro-kernel (fma) takes neither}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) kernel <fma, query_tile = 64, key_block = 64, lane_rows = 8> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @kernel_gpu_cpu_row_block(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                                    %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+2 {{#attn.kernel: a GPU micro-kernel's row_block is its query rows a warp, 16 (or 0) or 32, found 2}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) kernel <fma, query_tile = 64, key_block = 64, row_block = 2> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @kernel_gpu_tile_not_whole_warps(%q: tensor<1x4x8x16xf16>, %k: tensor<1x2x32x16xf16>,
                                           %v: tensor<1x2x32x8xf16>, %o: tensor<1x4x8x8xf16>) {
  // expected-error @+2 {{#attn.kernel: a GPU micro-kernel's query_tile must be 1 to 16 warps of 32 rows and its key_block a multiple of 16, found 48 and 64}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf16>, tensor<1x2x32x16xf16>, tensor<1x2x32x8xf16>)
      outs(%o : tensor<1x4x8x8xf16>) kernel <mma_sync, query_tile = 48, key_block = 64, row_block = 32> -> tensor<1x4x8x8xf16>
  return
}

// -----

func.func @kernel_gpu_odd_tile(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                               %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+2 {{#attn.kernel: a GPU micro-kernel's query_tile must be 1 to 16 warps of 16 rows and its key_block a multiple of 16, found 64 and 40}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) kernel <mma_sync, query_tile = 64, key_block = 40> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @kernel_empty_block(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                              %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  // expected-error @+2 {{#attn.kernel: query_tile and key_block must be positive, found 64 and 0}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) kernel <packed, query_tile = 64, key_block = 0> -> tensor<1x4x8x8xf32>
  return
}

// -----

// attn.attention_backward: the forward's rules, and its own operands.

func.func @backward_grad_output_shape(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
    %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>, %lse: tensor<1x4x8xf32>,
    %do: tensor<1x4x9x8xf32>, %dq: tensor<1x4x8x16xf32>, %dk: tensor<1x2x32x16xf32>,
    %dv: tensor<1x2x32x8xf32>) {
  // expected-error @+1 {{grad_output dim 2 (Sq) must equal query's Sq = 8, found 9}}
  %r:3 = attn.attention_backward ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      forward(%o, %lse : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>) grads(%do : tensor<1x4x9x8xf32>)
      outs(%dq, %dk, %dv : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      -> tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>
  return
}

// -----

func.func @backward_lse_type(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
    %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>, %lse: tensor<1x4x8xf16>,
    %do: tensor<1x4x8x8xf32>, %dq: tensor<1x4x8x16xf32>, %dk: tensor<1x2x32x16xf32>,
    %dv: tensor<1x2x32x8xf32>) {
  // expected-error @+1 {{lse element type must be 'f32', found 'f16'}}
  %r:3 = attn.attention_backward ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      forward(%o, %lse : tensor<1x4x8x8xf32>, tensor<1x4x8xf16>) grads(%do : tensor<1x4x8x8xf32>)
      outs(%dq, %dk, %dv : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      -> tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>
  return
}

// -----

func.func @backward_grad_key_shape(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
    %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>, %lse: tensor<1x4x8xf32>,
    %do: tensor<1x4x8x8xf32>, %dq: tensor<1x4x8x16xf32>, %dk: tensor<1x4x32x16xf32>,
    %dv: tensor<1x2x32x8xf32>) {
  // expected-error @+1 {{grad_key dim 1 must equal the key's 2, found 4}}
  %r:3 = attn.attention_backward ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      forward(%o, %lse : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>) grads(%do : tensor<1x4x8x8xf32>)
      outs(%dq, %dk, %dv : tensor<1x4x8x16xf32>, tensor<1x4x32x16xf32>, tensor<1x2x32x8xf32>)
      -> tensor<1x4x8x16xf32>, tensor<1x4x32x16xf32>, tensor<1x2x32x8xf32>
  return
}

// -----

func.func @backward_grad_value_type(%q: tensor<1x4x8x16xbf16>, %k: tensor<1x2x32x16xbf16>,
    %v: tensor<1x2x32x8xbf16>, %o: tensor<1x4x8x8xbf16>, %lse: tensor<1x4x8xf32>,
    %do: tensor<1x4x8x8xbf16>, %dq: tensor<1x4x8x16xbf16>, %dk: tensor<1x2x32x16xbf16>,
    %dv: tensor<1x2x32x8xf32>) {
  // expected-error @+1 {{grad_value element type must equal the value's ('bf16'), found 'f32'}}
  %r:3 = attn.attention_backward ins(%q, %k, %v : tensor<1x4x8x16xbf16>, tensor<1x2x32x16xbf16>, tensor<1x2x32x8xbf16>)
      forward(%o, %lse : tensor<1x4x8x8xbf16>, tensor<1x4x8xf32>) grads(%do : tensor<1x4x8x8xbf16>)
      outs(%dq, %dk, %dv : tensor<1x4x8x16xbf16>, tensor<1x2x32x16xbf16>, tensor<1x2x32x8xf32>)
      -> tensor<1x4x8x16xbf16>, tensor<1x2x32x16xbf16>, tensor<1x2x32x8xf32>
  return
}

// -----

func.func @backward_causal_without_diagonal(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
    %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>, %lse: tensor<1x4x8xf32>,
    %do: tensor<1x4x8x8xf32>, %dq: tensor<1x4x8x16xf32>, %dk: tensor<1x2x32x16xf32>,
    %dv: tensor<1x2x32x8xf32>) {
  // expected-error @+1 {{causal masking and windows need the diagonal}}
  %r:3 = attn.attention_backward ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      forward(%o, %lse : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>) grads(%do : tensor<1x4x8x8xf32>)
      outs(%dq, %dk, %dv : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>) causal
      -> tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>
  return
}

// -----

// Dropout: a probability and a seed, together; an origin of 4 indices.

func.func @dropout_without_seed(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                                %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>, %p: f32) {
  // expected-error @+1 {{dropout takes a probability and a seed}}
  %r = "attn.attention"(%q, %k, %v, %p, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 1>}>
      : (tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>, f32, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @origin_of_three(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                           %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>, %p: f32,
                           %s: i64, %i: index) {
  // expected-error @+1 {{origin takes the global (b, h, i, j) of element (0, 0, 0, 0): 4 indices, found 3}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      dropout(%p, %s) origin(%i, %i, %i)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

// attn.attention_weights: the forward's rules on Q, K and the mask, and its
// own operands.

func.func @weights_not_f32(%q: tensor<1x4x8x16xbf16>, %k: tensor<1x2x32x16xbf16>,
                           %w: tensor<1x4x8x32xbf16>) {
  // expected-error @+1 {{weights element type must be f32, found 'bf16'}}
  %r = attn.attention_weights ins(%q, %k : tensor<1x4x8x16xbf16>, tensor<1x2x32x16xbf16>)
      outs(%w : tensor<1x4x8x32xbf16>) -> tensor<1x4x8x32xbf16>
  return
}

// -----

func.func @weights_wrong_keys(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                              %w: tensor<1x4x8x31xf32>) {
  // expected-error @+1 {{weights dim 3 (Sk) must equal key's Sk = 32, found 31}}
  %r = attn.attention_weights ins(%q, %k : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>)
      outs(%w : tensor<1x4x8x31xf32>) -> tensor<1x4x8x31xf32>
  return
}

// -----

func.func @weights_wrong_lse(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                             %lse: tensor<1x4x9xf32>, %w: tensor<1x4x8x32xf32>) {
  // expected-error @+1 {{lse dim 2 (Sq) must equal query's Sq = 8, found 9}}
  %r = attn.attention_weights ins(%q, %k : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>)
      lse(%lse : tensor<1x4x9xf32>)
      outs(%w : tensor<1x4x8x32xf32>) -> tensor<1x4x8x32xf32>
  return
}

// -----

func.func @weights_key_head_dim(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x8xf32>,
                                %w: tensor<1x4x8x32xf32>) {
  // expected-error @+1 {{key dim 3 (D) must equal query's D = 16, found 8}}
  %r = attn.attention_weights ins(%q, %k : tensor<1x4x8x16xf32>, tensor<1x2x32x8xf32>)
      outs(%w : tensor<1x4x8x32xf32>) -> tensor<1x4x8x32xf32>
  return
}

// -----

func.func @weights_mixed_forms(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                               %w: memref<1x4x8x32xf32>) {
  // expected-error @+1 {{operands must be all tensors or all memrefs}}
  attn.attention_weights ins(%q, %k : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>)
      outs(%w : memref<1x4x8x32xf32>)
  return
}

// -----

func.func @sinks_per_head(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                          %v: tensor<1x2x32x16xf32>, %s: tensor<2xf32>,
                          %o: tensor<1x4x8x16xf32>) {
  // expected-error @+1 {{sinks must be tensor<4xf32> (one logit per query head), found 'tensor<2xf32>'}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x16xf32>)
      sinks(%s : tensor<2xf32>) outs(%o : tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return
}

// -----

func.func @sinks_f32(%q: tensor<1x4x8x16xbf16>, %k: tensor<1x2x32x16xbf16>,
                     %v: tensor<1x2x32x16xbf16>, %s: tensor<4xbf16>,
                     %o: tensor<1x4x8x16xbf16>) {
  // expected-error @+1 {{sinks must be tensor<4xf32> (one logit per query head), found 'tensor<4xbf16>'}}
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xbf16>, tensor<1x2x32x16xbf16>, tensor<1x2x32x16xbf16>)
      sinks(%s : tensor<4xbf16>) outs(%o : tensor<1x4x8x16xbf16>) -> tensor<1x4x8x16xbf16>
  return
}

// -----

func.func @grad_mask_without_bias(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                                  %m: tensor<1x1x8x8xi1>, %o: tensor<1x2x8x16xf32>,
                                  %l: tensor<1x2x8xf32>, %dm: tensor<1x2x8x8xf32>) {
  // expected-error @+1 {{grad_mask is the gradient of an additive float mask, and the op has none}}
  %r:4 = attn.attention_backward ins(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>)
      mask(%m : tensor<1x1x8x8xi1>)
      forward(%o, %l : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) grads(%o : tensor<1x2x8x16xf32>)
      outs(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
           grad_mask(%dm : tensor<1x2x8x8xf32>))
      -> tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x8xf32>
  return
}

// -----

func.func @grad_mask_shape(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x9x16xf32>,
                           %m: tensor<1x1x8x9xf32>, %o: tensor<1x2x8x16xf32>,
                           %l: tensor<1x2x8xf32>, %dm: tensor<1x1x8x9xf32>) {
  // expected-error @+1 {{grad_mask must be f32 [B, Hq, Sq, Sk] = [1, 2, 8, 9], found 'tensor<1x1x8x9xf32>'}}
  %r:4 = attn.attention_backward ins(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x2x9x16xf32>, tensor<1x2x9x16xf32>)
      mask(%m : tensor<1x1x8x9xf32>)
      forward(%o, %l : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) grads(%o : tensor<1x2x8x16xf32>)
      outs(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x2x9x16xf32>, tensor<1x2x9x16xf32>
           grad_mask(%dm : tensor<1x1x8x9xf32>))
      -> tensor<1x2x8x16xf32>, tensor<1x2x9x16xf32>, tensor<1x2x9x16xf32>, tensor<1x1x8x9xf32>
  return
}

// -----

func.func @score_mod_signature(%q: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  // expected-error @+1 {{score_mod takes (score: f32, b, h, q_idx, kv_idx: index), found (f32, index, index, index, i32)}}
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: i32):
        attn.yield %s : f32
      } -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}

// -----

func.func @score_mod_arguments(%q: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>)
      // expected-error @+1 {{score_mod takes (score: f32, b, h, q_idx, kv_idx: index) as its block's arguments}}
      score_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.constant true
        attn.yield %keep : i1
      } -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}

// -----

func.func @mask_mod_yield(%q: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  // expected-error @+1 {{mask_mod must end in attn.yield of one 'i1'}}
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        attn.yield %i : index
      } -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}

// -----

func.func @modifier_ops(%q: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        // expected-error @+1 {{'tensor.empty' op is not allowed in score_mod: a modifier holds scalar arith and math ops and attn.captured reads}}
        %t = tensor.empty() : tensor<4xf32>
        attn.yield %s : f32
      } -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}

// -----

func.func @modifier_vector(%q: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        // expected-error @+1 {{in score_mod must compute scalars, found 'vector<4xf32>'}}
        %c = arith.constant dense<1.0> : vector<4xf32>
        attn.yield %s : f32
      } -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}

// -----

func.func @capture_unread(%q: tensor<1x1x8x16xf32>, %c: tensor<4xf32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  // expected-error @+1 {{capture 0 is never read (attn.captured 0 [...]) by the modifiers}}
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%c : tensor<4xf32>)
      outs(%o : tensor<1x1x8x16xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.constant true
        attn.yield %keep : i1
      } -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}

// -----

func.func @captures_without_modifiers(%q: tensor<1x1x8x16xf32>, %c: tensor<4xf32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  // expected-error @+1 {{captures(...) are read by a score_mod or mask_mod, and the op has neither}}
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%c : tensor<4xf32>)
      outs(%o : tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}

// -----

func.func @capture_type(%q: tensor<1x1x8x16xf32>, %c: tensor<4xf16>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  // expected-error @+1 {{capture 0 must be a tensor of rank 1 to 4 of f32, i8 (bools, a byte each), i32 or i64, found 'tensor<4xf16>'}}
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%c : tensor<4xf16>)
      outs(%o : tensor<1x1x8x16xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.constant true
        attn.yield %keep : i1
      } -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}

// -----

func.func @captured_number(%q: tensor<1x1x8x16xf32>, %c: tensor<4xf32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%c : tensor<4xf32>)
      outs(%o : tensor<1x1x8x16xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %x = attn.captured 0 [%h] : f32
        // expected-error @+1 {{reads capture 1, but the op has 1 captures(...)}}
        %y = attn.captured 1 [%h] : f32
        attn.yield %x : f32
      } -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}

// -----

func.func @captured_indices(%q: tensor<1x1x8x16xf32>, %c: tensor<4x4xf32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%c : tensor<4x4xf32>)
      outs(%o : tensor<1x1x8x16xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        // expected-error @+1 {{capture 0 has rank 2 and takes as many indices, found 1}}
        %x = attn.captured 0 [%h] : f32
        attn.yield %x : f32
      } -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}

// -----

func.func @captured_type(%q: tensor<1x1x8x16xf32>, %c: tensor<4xi32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%c : tensor<4xi32>)
      outs(%o : tensor<1x1x8x16xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        // expected-error @+1 {{result type must be capture 0's element type 'i32', found 'i64'}}
        %x = attn.captured 0 [%h] : i64
        %keep = arith.constant true
        attn.yield %keep : i1
      } -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}

// -----

func.func @captured_outside(%c: tensor<4xf32>, %i: index) -> f32 {
  // expected-error @+1 {{must be in a score_mod or mask_mod region of an attention op}}
  %x = attn.captured 0 [%i] : f32
  return %x : f32
}

// -----

// The backward differentiates a score_mod op by op: math.cbrt has no
// generated derivative (a floor of the score, or a select on a comparison of
// it, would be constant and accepted).
func.func @backward_score_mod_undifferentiable(%q: tensor<1x1x8x16xf32>, %l: tensor<1x1x8xf32>) {
  %r:3 = attn.attention_backward ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      forward(%q, %l : tensor<1x1x8x16xf32>, tensor<1x1x8xf32>)
      grads(%q : tensor<1x1x8x16xf32>)
      outs(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %f = math.floor %s : f32
        %t = arith.addf %s, %f : f32
        // expected-error @+1 {{'math.cbrt' op in the score_mod of attn.attention_backward has no derivative that the compiler generates}}
        %c = math.cbrt %t : f32
        attn.yield %c : f32
      } -> tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
  return
}

// -----

func.func @block_mask_malformed(%q: tensor<1x1x8x16xf32>, %t: tensor<?x?x?x?xi32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  // expected-error @+1 {{attn.block_mask must be array<i64: capture, query_block, key_block> with block sizes >= 1, found array<i64: 0, 0, 128>}}
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%t : tensor<?x?x?x?xi32>) outs(%o : tensor<1x1x8x16xf32>)
      {attn.block_mask = array<i64: 0, 0, 128>} -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}

// -----

func.func @block_mask_no_capture(%q: tensor<1x1x8x16xf32>, %t: tensor<?x?x?x?xi32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  // expected-error @+1 {{attn.block_mask names capture 1, but the op has 1 captures(...)}}
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%t : tensor<?x?x?x?xi32>) outs(%o : tensor<1x1x8x16xf32>)
      {attn.block_mask = array<i64: 1, 128, 128>} -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}

// -----

func.func @block_mask_table_type(%q: tensor<1x1x8x16xf32>, %t: tensor<?x?xi32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  // expected-error @+1 {{the block mask's table (capture 0) must be a rank-4 i32 tensor [B, Hq, query blocks, key blocks], found 'tensor<?x?xi32>'}}
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%t : tensor<?x?xi32>) outs(%o : tensor<1x1x8x16xf32>)
      {attn.block_mask = array<i64: 0, 128, 128>} -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}

// -----

// attn.linear: shapes, element types, the state, the causal lengths and
// the attributes, each with the message that names what is wrong.

func.func @linear_wrong_value_heads(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                                    %v: tensor<1x3x8x16xf32>, %o: tensor<1x4x8x16xf32>) {
  // expected-error @+1 {{value dim 1 (Hkv) must equal key's Hkv = 2, found 3}}
  %r = attn.linear ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x3x8x16xf32>)
      outs(%o : tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return
}

// -----

func.func @linear_group(%q: tensor<1x3x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                        %o: tensor<1x3x8x16xf32>) {
  // expected-error @+1 {{query heads (Hq = 3) must be a multiple of key/value heads (Hkv = 2)}}
  %r = attn.linear ins(%q, %k, %k : tensor<1x3x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>)
      outs(%o : tensor<1x3x8x16xf32>) -> tensor<1x3x8x16xf32>
  return
}

// -----

func.func @linear_unnormalized_eps(%q: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>) {
  // expected-error @+1 {{eps is the denominator's and an unnormalized op has none: drop eps or unnormalized}}
  %r = attn.linear ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>) eps(1.0e-3) unnormalized -> tensor<1x1x8x16xf32>
  return
}

// -----

func.func @linear_causal_lengths(%q: tensor<1x1x8x16xf32>, %k: tensor<1x1x9x16xf32>,
                                 %o: tensor<1x1x8x16xf32>) {
  // expected-error @+1 {{key dim 2 (Sk) must equal query's Sq (causal linear attention: query i sees keys 0..i) = 8, found 9}}
  %r = attn.linear ins(%q, %k, %k : tensor<1x1x8x16xf32>, tensor<1x1x9x16xf32>, tensor<1x1x9x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>) causal -> tensor<1x1x8x16xf32>
  return
}

// -----

func.func @linear_dynamic_head_dim(%q: tensor<1x1x8x?xf32>, %o: tensor<1x1x8x?xf32>) {
  // expected-error @+1 {{head dims (D of query and key, Dv of value) must be static, found ?, ? and ?}}
  %r = attn.linear ins(%q, %q, %q : tensor<1x1x8x?xf32>, tensor<1x1x8x?xf32>, tensor<1x1x8x?xf32>)
      outs(%o : tensor<1x1x8x?xf32>) -> tensor<1x1x8x?xf32>
  return
}

// -----

func.func @linear_output_type(%q: tensor<1x1x8x16xbf16>, %o: tensor<1x1x8x16xf32>) {
  // expected-error @+1 {{output element type must be the query's 'bf16', found 'f32'}}
  %r = attn.linear ins(%q, %q, %q : tensor<1x1x8x16xbf16>, tensor<1x1x8x16xbf16>, tensor<1x1x8x16xbf16>)
      outs(%o : tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>
  return
}

// -----

func.func @linear_one_state(%q: tensor<1x1x8x16xf32>, %s: tensor<1x1x16x16xf32>,
                            %o: tensor<1x1x8x16xf32>) {
  // expected-error @+1 {{state(...) takes the initial state and normalizer (2 operands), found 1}}
  %r = attn.linear ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      state(%s : tensor<1x1x16x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>
  return
}

// -----

func.func @linear_state_type(%q: tensor<1x1x8x16xf32>, %s: tensor<1x1x16x16xbf16>,
                             %z: tensor<1x1x16xf32>, %o: tensor<1x1x8x16xf32>) {
  // expected-error @+1 {{initial state element type must be f32, found 'bf16'}}
  %r = attn.linear ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      state(%s, %z : tensor<1x1x16x16xbf16>, tensor<1x1x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>
  return
}

// -----

func.func @linear_final_normalizer(%q: tensor<1x1x8x16xf32>, %s: tensor<1x1x16x16xf32>,
                                   %z: tensor<1x1x15xf32>, %o: tensor<1x1x8x16xf32>) {
  // expected-error @+1 {{final normalizer dim 2 (D) must equal key's D = 16, found 15}}
  %r:3 = attn.linear ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      outs(%o, %s, %z : tensor<1x1x8x16xf32>, tensor<1x1x16x16xf32>, tensor<1x1x15xf32>)
      -> tensor<1x1x8x16xf32>, tensor<1x1x16x16xf32>, tensor<1x1x15xf32>
  return
}

// -----

func.func @linear_chunk(%q: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>) {
  // expected-error @+1 {{chunk must be in [1, 256], found 0}}
  %r = attn.linear ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>) causal chunk(0) -> tensor<1x1x8x16xf32>
  return
}

// -----

func.func @linear_eps(%q: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>) {
  // expected-error @+1 {{eps must be finite and >= 0, found -1}}
  %r = attn.linear ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>) eps(-1.0) -> tensor<1x1x8x16xf32>
  return
}

// -----

func.func @linear_outs_count(%q: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>) {
  // expected-error @+1 {{outs(...) takes the output, then optionally the final state and normalizer (1 or 3 operands), found 2}}
  %r:2 = attn.linear ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      outs(%o, %o : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
  return
}

// -----

// attn.additive: the network's shapes, the mask and the outs.

func.func @additive_key_weight(%q: tensor<1x4x8xf32>, %k: tensor<1x6x10xf32>,
                               %wq: tensor<16x8xf32>, %wk: tensor<16x8xf32>,
                               %va: tensor<16xf32>, %o: tensor<1x4x10xf32>) {
  // expected-error @+1 {{key_weight dim 1 (Dk) must equal keys' Dk = 10, found 8}}
  %r = attn.additive ins(%q, %k, %k, %wq, %wk, %va : tensor<1x4x8xf32>, tensor<1x6x10xf32>, tensor<1x6x10xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
      outs(%o : tensor<1x4x10xf32>) -> tensor<1x4x10xf32>
  return
}

// -----

func.func @additive_score_vector(%q: tensor<1x4x8xf32>, %w: tensor<16x8xf32>,
                                 %va: tensor<15xf32>, %o: tensor<1x4x8xf32>) {
  // expected-error @+1 {{score_vector dim 0 (A) must equal query_weight's A = 16, found 15}}
  %r = attn.additive ins(%q, %q, %q, %w, %w, %va : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<15xf32>)
      outs(%o : tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return
}

// -----

func.func @additive_element_types(%q: tensor<1x4x8xf32>, %w: tensor<16x8xbf16>,
                                  %va: tensor<16xf32>, %o: tensor<1x4x8xf32>) {
  // expected-error @+1 {{query_weight must have the query's element type 'f32', found 'bf16'}}
  %r = attn.additive ins(%q, %q, %q, %w, %w, %va : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16xf32>)
      outs(%o : tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return
}

// -----

func.func @additive_bias_mask(%q: tensor<1x4x8xf32>, %w: tensor<16x8xf32>, %va: tensor<16xf32>,
                              %m: tensor<1x4x4xf32>, %o: tensor<1x4x8xf32>) {
  // expected-error @+1 {{mask must be an i1 keep-mask, found 'f32'}}
  %r = attn.additive ins(%q, %q, %q, %w, %w, %va : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
      mask(%m : tensor<1x4x4xf32>)
      outs(%o : tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return
}

// -----

func.func @additive_mask_rows(%q: tensor<1x4x8xf32>, %w: tensor<16x8xf32>, %va: tensor<16xf32>,
                              %m: tensor<1x3x4xi1>, %o: tensor<1x4x8xf32>) {
  // expected-error @+1 {{mask dim 1 (Sq) must equal query's Sq (or 1) = 4, found 3}}
  %r = attn.additive ins(%q, %q, %q, %w, %w, %va : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
      mask(%m : tensor<1x3x4xi1>)
      outs(%o : tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return
}

// -----

func.func @additive_weights_type(%q: tensor<1x4x8xf32>, %w: tensor<16x8xf32>, %va: tensor<16xf32>,
                                 %o: tensor<1x4x8xf32>, %p: tensor<1x4x4xbf16>) {
  // expected-error @+1 {{weights element type must be f32, found 'bf16'}}
  %r:2 = attn.additive ins(%q, %q, %q, %w, %w, %va : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
      outs(%o, %p : tensor<1x4x8xf32>, tensor<1x4x4xbf16>) -> tensor<1x4x8xf32>, tensor<1x4x4xbf16>
  return
}

// -----

func.func @additive_dynamic_attn_dim(%q: tensor<1x4x8xf32>, %w: tensor<?x8xf32>, %va: tensor<?xf32>,
                                     %o: tensor<1x4x8xf32>) {
  // expected-error @+1 {{query_weight dim 0 (A) must be static, found ?}}
  %r = attn.additive ins(%q, %q, %q, %w, %w, %va : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?xf32>)
      outs(%o : tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return
}

// -----

func.func @mha_heads(%x: tensor<1x4x30xf32>, %w: tensor<90x30xf32>, %wo: tensor<30x30xf32>, %y: tensor<1x4x30xf32>) {
  // expected-error @+1 {{the embedding width E = 30 must be a multiple of heads = 4}}
  %r = attn.mha ins(%x, %x, %x : tensor<1x4x30xf32>, tensor<1x4x30xf32>, tensor<1x4x30xf32>)
      in_proj(%w : tensor<90x30xf32>) out_proj(%wo : tensor<30x30xf32>)
      outs(%y : tensor<1x4x30xf32>) heads(4) -> tensor<1x4x30xf32>
  return
}

// -----

func.func @mha_packed_widths(%x: tensor<1x4x32xf32>, %k: tensor<1x4x16xf32>, %w: tensor<96x32xf32>, %wo: tensor<32x32xf32>, %y: tensor<1x4x32xf32>) {
  // expected-error @+1 {{a packed in_proj [3E, E] needs Ek = Ev = E = 32, found Ek = 16, Ev = 16 (give three weights instead)}}
  %r = attn.mha ins(%x, %k, %k : tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
      in_proj(%w : tensor<96x32xf32>) out_proj(%wo : tensor<32x32xf32>)
      outs(%y : tensor<1x4x32xf32>) heads(4) -> tensor<1x4x32xf32>
  return
}

// -----

func.func @mha_weight_shape(%x: tensor<1x4x32xf32>, %w: tensor<32x32xf32>, %wk: tensor<32x16xf32>, %wo: tensor<32x32xf32>, %y: tensor<1x4x32xf32>) {
  // expected-error @+1 {{in_proj key weight must be [E, Ek] = [32, 32], found 'tensor<32x16xf32>'}}
  %r = attn.mha ins(%x, %x, %x : tensor<1x4x32xf32>, tensor<1x4x32xf32>, tensor<1x4x32xf32>)
      in_proj(%w, %wk, %w : tensor<32x32xf32>, tensor<32x16xf32>, tensor<32x32xf32>) out_proj(%wo : tensor<32x32xf32>)
      outs(%y : tensor<1x4x32xf32>) heads(4) -> tensor<1x4x32xf32>
  return
}

// -----

func.func @mha_two_weights(%x: tensor<1x4x32xf32>, %w: tensor<32x32xf32>, %y: tensor<1x4x32xf32>) {
  // expected-error @+1 {{in_proj(...) takes one packed [3E, E] weight or three ([E, E], [E, Ek], [E, Ev]), found 2}}
  %r = attn.mha ins(%x, %x, %x : tensor<1x4x32xf32>, tensor<1x4x32xf32>, tensor<1x4x32xf32>)
      in_proj(%w, %w : tensor<32x32xf32>, tensor<32x32xf32>) out_proj(%w : tensor<32x32xf32>)
      outs(%y : tensor<1x4x32xf32>) heads(4) -> tensor<1x4x32xf32>
  return
}

// -----

func.func @mha_bias_type(%x: tensor<1x4x32xf32>, %w: tensor<96x32xf32>, %b: tensor<96xbf16>, %wo: tensor<32x32xf32>, %y: tensor<1x4x32xf32>) {
  // expected-error @+1 {{in_bias must have the query's element type 'f32', found 'bf16'}}
  %r = attn.mha ins(%x, %x, %x : tensor<1x4x32xf32>, tensor<1x4x32xf32>, tensor<1x4x32xf32>)
      in_proj(%w : tensor<96x32xf32>) in_bias(%b : tensor<96xbf16>) out_proj(%wo : tensor<32x32xf32>)
      outs(%y : tensor<1x4x32xf32>) heads(4) -> tensor<1x4x32xf32>
  return
}

// -----

func.func @mha_mask_heads(%x: tensor<1x4x32xf32>, %w: tensor<96x32xf32>, %wo: tensor<32x32xf32>, %m: tensor<1x3x4x4xi1>, %y: tensor<1x4x32xf32>) {
  // expected-error @+1 {{mask dim 1 (heads) must equal heads (or 1) = 4, found 3}}
  %r = attn.mha ins(%x, %x, %x : tensor<1x4x32xf32>, tensor<1x4x32xf32>, tensor<1x4x32xf32>)
      in_proj(%w : tensor<96x32xf32>) out_proj(%wo : tensor<32x32xf32>) mask(%m : tensor<1x3x4x4xi1>)
      outs(%y : tensor<1x4x32xf32>) heads(4) -> tensor<1x4x32xf32>
  return
}

// -----

func.func @mha_causal_alignment(%x: tensor<1x4x32xf32>, %w: tensor<96x32xf32>, %wo: tensor<32x32xf32>, %y: tensor<1x4x32xf32>) {
  // expected-error @+1 {{causal masking and windows need the diagonal}}
  %r = attn.mha ins(%x, %x, %x : tensor<1x4x32xf32>, tensor<1x4x32xf32>, tensor<1x4x32xf32>)
      in_proj(%w : tensor<96x32xf32>) out_proj(%wo : tensor<32x32xf32>)
      outs(%y : tensor<1x4x32xf32>) heads(4) causal -> tensor<1x4x32xf32>
  return
}

// -----

func.func @mha_dynamic_embed(%x: tensor<1x4x?xf32>, %w: tensor<96x32xf32>, %wo: tensor<32x32xf32>, %y: tensor<1x4x?xf32>) {
  // expected-error @+1 {{query dim 2 (E) must be static, found ?}}
  %r = attn.mha ins(%x, %x, %x : tensor<1x4x?xf32>, tensor<1x4x?xf32>, tensor<1x4x?xf32>)
      in_proj(%w : tensor<96x32xf32>) out_proj(%wo : tensor<32x32xf32>)
      outs(%y : tensor<1x4x?xf32>) heads(4) -> tensor<1x4x?xf32>
  return
}

// -----

func.func @grad_captures_without_score_mod(%q: tensor<1x2x8x16xf32>, %k: tensor<1x1x8x16xf32>, %o: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>, %c: tensor<2xf32>, %dc: tensor<1x1x2xf32>) {
  // expected-error @+1 {{grad_captures are gradients through the score_mod, and the op has none}}
  %r:4 = attn.attention_backward ins(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%c : tensor<2xf32>)
      forward(%o, %l : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) grads(%o : tensor<1x2x8x16xf32>)
      outs(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
           grad_captures [0](%dc : tensor<1x1x2xf32>))
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %t = attn.captured 0 [%h] : f32
        %z = arith.constant 0.0 : f32
        %keep = arith.cmpf oge, %t, %z : f32
        attn.yield %keep : i1
      }
      -> tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x2xf32>
  return
}

// -----

func.func @grad_captures_not_f32(%q: tensor<1x2x8x16xf32>, %k: tensor<1x1x8x16xf32>, %o: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>, %c: tensor<8xi32>, %dc: tensor<1x1x8xf32>) {
  // expected-error @+1 {{grad_captures: capture 0 is 'tensor<8xi32>', and only an f32 one has a gradient}}
  %r:4 = attn.attention_backward ins(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%c : tensor<8xi32>)
      forward(%o, %l : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) grads(%o : tensor<1x2x8x16xf32>)
      outs(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
           grad_captures [0](%dc : tensor<1x1x8xf32>))
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %t = attn.captured 0 [%j] : i32
        %f = arith.sitofp %t : i32 to f32
        %r = arith.addf %s, %f : f32
        attn.yield %r : f32
      }
      -> tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8xf32>
  return
}

// -----

func.func @grad_captures_number(%q: tensor<1x2x8x16xf32>, %k: tensor<1x1x8x16xf32>, %o: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>, %c: tensor<2xf32>, %dc: tensor<1x1x2xf32>) {
  // expected-error @+1 {{grad_captures names capture 1 but the op captures 1 tensors}}
  %r:4 = attn.attention_backward ins(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%c : tensor<2xf32>)
      forward(%o, %l : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) grads(%o : tensor<1x2x8x16xf32>)
      outs(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
           grad_captures [1](%dc : tensor<1x1x2xf32>))
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %t = attn.captured 0 [%h] : f32
        %r = arith.addf %s, %t : f32
        attn.yield %r : f32
      }
      -> tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x2xf32>
  return
}

// -----

func.func @grad_captures_shape(%q: tensor<1x2x8x16xf32>, %k: tensor<1x1x8x16xf32>, %o: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>, %c: tensor<2xf32>, %dc: tensor<1x2x2xf32>) {
  // expected-error @+1 {{grad_captures: the partial gradient of capture 0 must be f32 [B, Hkv, its shape] = [1, 1, 2], found 'tensor<1x2x2xf32>'}}
  %r:4 = attn.attention_backward ins(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%c : tensor<2xf32>)
      forward(%o, %l : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) grads(%o : tensor<1x2x8x16xf32>)
      outs(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
           grad_captures [0](%dc : tensor<1x2x2xf32>))
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %t = attn.captured 0 [%h] : f32
        %r = arith.addf %s, %t : f32
        attn.yield %r : f32
      }
      -> tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x2x2xf32>
  return
}

// -----

func.func @grad_captures_unread(%q: tensor<1x2x8x16xf32>, %k: tensor<1x1x8x16xf32>, %o: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>, %c: tensor<2xf32>, %d: tensor<2xf32>, %dc: tensor<1x1x2xf32>) {
  // expected-error @+1 {{grad_captures: the score_mod reads no element of capture 1}}
  %r:4 = attn.attention_backward ins(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%c, %d : tensor<2xf32>, tensor<2xf32>)
      forward(%o, %l : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) grads(%o : tensor<1x2x8x16xf32>)
      outs(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
           grad_captures [1](%dc : tensor<1x1x2xf32>))
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %t = attn.captured 0 [%h] : f32
        %r = arith.addf %s, %t : f32
        attn.yield %r : f32
      }
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %t = attn.captured 1 [%h] : f32
        %z = arith.constant 0.0 : f32
        %keep = arith.cmpf oge, %t, %z : f32
        attn.yield %keep : i1
      }
      -> tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x2xf32>
  return
}

// -----

func.func @grad_captures_order(%q: tensor<1x2x8x16xf32>, %k: tensor<1x1x8x16xf32>, %o: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>, %c: tensor<2xf32>, %d: tensor<2xf32>, %dc: tensor<1x1x2xf32>, %dd: tensor<1x1x2xf32>) {
  // expected-error @+1 {{grad_captures numbers must increase, found 0 after 1}}
  %r:5 = attn.attention_backward ins(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%c, %d : tensor<2xf32>, tensor<2xf32>)
      forward(%o, %l : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) grads(%o : tensor<1x2x8x16xf32>)
      outs(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
           grad_captures [1, 0](%dc, %dd : tensor<1x1x2xf32>, tensor<1x1x2xf32>))
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %t = attn.captured 0 [%h] : f32
        %u = attn.captured 1 [%h] : f32
        %r0 = arith.addf %s, %t : f32
        %r = arith.addf %r0, %u : f32
        attn.yield %r : f32
      }
      -> tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x2xf32>, tensor<1x1x2xf32>
  return
}

// -----

// attn.additive_backward: the forward's checks (shared), dO, the outs.

func.func @additive_backward_network(%q: tensor<1x4x8xf32>, %wq: tensor<16x8xf32>,
                                     %wk: tensor<16x8xf32>, %va: tensor<15xf32>,
                                     %dqp: tensor<1x4x16xf32>, %dkp: tensor<1x1x4x16xf32>,
                                     %dv: tensor<1x1x4x8xf32>, %dva: tensor<1x1x16xf32>) {
  // expected-error @+1 {{score_vector dim 0 (A) must equal query_weight's A = 16, found 15}}
  %r:4 = attn.additive_backward ins(%q, %q, %q, %wq, %wk, %va, %q : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<15xf32>, tensor<1x4x8xf32>)
      outs(%dqp, %dkp, %dv, %dva : tensor<1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x8xf32>, tensor<1x1x16xf32>)
      -> tensor<1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x8xf32>, tensor<1x1x16xf32>
  return
}

// -----

func.func @additive_backward_grad_output(%q: tensor<1x4x8xf32>, %w: tensor<16x8xf32>,
                                         %va: tensor<16xf32>, %do: tensor<1x3x8xf32>,
                                         %dqp: tensor<1x4x16xf32>, %dkp: tensor<1x1x4x16xf32>,
                                         %dv: tensor<1x1x4x8xf32>, %dva: tensor<1x1x16xf32>) {
  // expected-error @+1 {{grad_output dim 1 (Sq) must equal query's Sq = 4, found 3}}
  %r:4 = attn.additive_backward ins(%q, %q, %q, %w, %w, %va, %do : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16xf32>, tensor<1x3x8xf32>)
      outs(%dqp, %dkp, %dv, %dva : tensor<1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x8xf32>, tensor<1x1x16xf32>)
      -> tensor<1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x8xf32>, tensor<1x1x16xf32>
  return
}

// -----

func.func @additive_backward_f32_outs(%q: tensor<1x4x8xbf16>, %w: tensor<16x8xbf16>,
                                      %va: tensor<16xbf16>,
                                      %dqp: tensor<1x4x16xbf16>, %dkp: tensor<1x1x4x16xf32>,
                                      %dv: tensor<1x1x4x8xf32>, %dva: tensor<1x1x16xf32>) {
  // expected-error @+1 {{grad_qp element type must be f32, found 'bf16'}}
  %r:4 = attn.additive_backward ins(%q, %q, %q, %w, %w, %va, %q : tensor<1x4x8xbf16>, tensor<1x4x8xbf16>, tensor<1x4x8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16xbf16>, tensor<1x4x8xbf16>)
      outs(%dqp, %dkp, %dv, %dva : tensor<1x4x16xbf16>, tensor<1x1x4x16xf32>, tensor<1x1x4x8xf32>, tensor<1x1x16xf32>)
      -> tensor<1x4x16xbf16>, tensor<1x1x4x16xf32>, tensor<1x1x4x8xf32>, tensor<1x1x16xf32>
  return
}

// -----

func.func @additive_backward_parts(%q: tensor<1x4x8xf32>, %w: tensor<16x8xf32>,
                                   %va: tensor<16xf32>,
                                   %dqp: tensor<1x4x16xf32>, %dkp: tensor<1x2x4x16xf32>,
                                   %dv: tensor<1x3x4x8xf32>, %dva: tensor<1x2x16xf32>) {
  // expected-error @+1 {{grad_values dim 1 (P) must equal grad_kp's P = 2, found 3}}
  %r:4 = attn.additive_backward ins(%q, %q, %q, %w, %w, %va, %q : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16xf32>, tensor<1x4x8xf32>)
      outs(%dqp, %dkp, %dv, %dva : tensor<1x4x16xf32>, tensor<1x2x4x16xf32>, tensor<1x3x4x8xf32>, tensor<1x2x16xf32>)
      -> tensor<1x4x16xf32>, tensor<1x2x4x16xf32>, tensor<1x3x4x8xf32>, tensor<1x2x16xf32>
  return
}

// -----

func.func @additive_backward_no_parts(%q: tensor<1x4x8xf32>, %w: tensor<16x8xf32>,
                                      %va: tensor<16xf32>,
                                      %dqp: tensor<1x4x16xf32>, %dkp: tensor<1x0x4x16xf32>,
                                      %dv: tensor<1x0x4x8xf32>, %dva: tensor<1x0x16xf32>) {
  // expected-error @+1 {{grad_kp dim 1 (P, the parts of the query rows) must be at least 1, found 0}}
  %r:4 = attn.additive_backward ins(%q, %q, %q, %w, %w, %va, %q : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16xf32>, tensor<1x4x8xf32>)
      outs(%dqp, %dkp, %dv, %dva : tensor<1x4x16xf32>, tensor<1x0x4x16xf32>, tensor<1x0x4x8xf32>, tensor<1x0x16xf32>)
      -> tensor<1x4x16xf32>, tensor<1x0x4x16xf32>, tensor<1x0x4x8xf32>, tensor<1x0x16xf32>
  return
}

// -----

func.func @additive_backward_outs(%q: tensor<1x4x8xf32>, %w: tensor<16x8xf32>,
                                  %va: tensor<16xf32>, %dqp: tensor<1x4x16xf32>) {
  // expected-error @+1 {{outs(...) takes grad_qp, grad_kp, grad_values and grad_v (4 operands), found 1}}
  %r = attn.additive_backward ins(%q, %q, %q, %w, %w, %va, %q : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16xf32>, tensor<1x4x8xf32>)
      outs(%dqp : tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  return
}

// -----

// attn.linear_backward: its own operands (O, dO, the state, the state's
// gradients, dQ, dK, dV) each with the message that names what is wrong.

func.func @linear_backward_grad_output(%q: tensor<1x2x8x16xf32>, %k: tensor<1x1x9x16xf32>,
                                       %o: tensor<1x2x8x16xf32>, %do: tensor<1x2x7x16xf32>,
                                       %s: tensor<1x1x16x16xf32>, %z: tensor<1x1x16xf32>) {
  // expected-error @+1 {{grad_output dim 2 (Sq) must equal query's Sq = 8, found 7}}
  %r:3 = attn.linear_backward ins(%q, %k, %k, %o, %do : tensor<1x2x8x16xf32>, tensor<1x1x9x16xf32>, tensor<1x1x9x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x7x16xf32>)
      state(%s, %z : tensor<1x1x16x16xf32>, tensor<1x1x16xf32>)
      outs(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x1x9x16xf32>, tensor<1x1x9x16xf32>)
      -> tensor<1x2x8x16xf32>, tensor<1x1x9x16xf32>, tensor<1x1x9x16xf32>
  return
}

// -----

func.func @linear_backward_state_type(%q: tensor<1x1x8x16xbf16>, %s: tensor<1x1x16x16xbf16>,
                                      %z: tensor<1x1x16xf32>) {
  // expected-error @+1 {{state element type must be f32, found 'bf16'}}
  %r:3 = attn.linear_backward ins(%q, %q, %q, %q, %q : tensor<1x1x8x16xbf16>, tensor<1x1x8x16xbf16>, tensor<1x1x8x16xbf16>, tensor<1x1x8x16xbf16>, tensor<1x1x8x16xbf16>)
      state(%s, %z : tensor<1x1x16x16xbf16>, tensor<1x1x16xf32>)
      outs(%q, %q, %q : tensor<1x1x8x16xbf16>, tensor<1x1x8x16xbf16>, tensor<1x1x8x16xbf16>)
      -> tensor<1x1x8x16xbf16>, tensor<1x1x8x16xbf16>, tensor<1x1x8x16xbf16>
  return
}

// -----

func.func @linear_backward_grad_key(%q: tensor<1x1x8x16xf32>, %k: tensor<1x1x9x16xf32>,
                                    %s: tensor<1x1x16x16xf32>, %z: tensor<1x1x16xf32>) {
  // expected-error @+1 {{grad_key must have the shape and element type of key ('tensor<1x1x9x16xf32>'), found 'tensor<1x1x8x16xf32>'}}
  %r:3 = attn.linear_backward ins(%q, %k, %k, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x9x16xf32>, tensor<1x1x9x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      state(%s, %z : tensor<1x1x16x16xf32>, tensor<1x1x16xf32>)
      outs(%q, %q, %k : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x9x16xf32>)
      -> tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x9x16xf32>
  return
}

// -----

func.func @linear_backward_outs(%q: tensor<1x1x8x16xf32>, %s: tensor<1x1x16x16xf32>,
                                %z: tensor<1x1x16xf32>) {
  // expected-error @+1 {{outs(...) takes dQ, dK, dV, then optionally the initial state's and normalizer's gradients (3 or 5 operands), found 4}}
  %r:4 = attn.linear_backward ins(%q, %q, %q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      state(%s, %z : tensor<1x1x16x16xf32>, tensor<1x1x16xf32>)
      outs(%q, %q, %q, %s : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x16x16xf32>)
      -> tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x16x16xf32>
  return
}

// -----

func.func @linear_backward_state_grads(%q: tensor<1x1x8x16xf32>, %s: tensor<1x1x16x16xf32>,
                                       %z: tensor<1x1x16xf32>) {
  // expected-error @+1 {{state_grads(...) takes the gradients of the final state and normalizer (2 operands), found 1}}
  %r:3 = attn.linear_backward ins(%q, %q, %q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      state(%s, %z : tensor<1x1x16x16xf32>, tensor<1x1x16xf32>)
      state_grads(%s : tensor<1x1x16x16xf32>)
      outs(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      -> tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
  return
}

// -----

func.func @linear_backward_unnormalized_eps(%q: tensor<1x1x8x16xf32>, %s: tensor<1x1x16x16xf32>,
                                            %z: tensor<1x1x16xf32>) {
  // expected-error @+1 {{eps is the denominator's and an unnormalized op has none: drop eps or unnormalized}}
  %r:3 = attn.linear_backward ins(%q, %q, %q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      state(%s, %z : tensor<1x1x16x16xf32>, tensor<1x1x16xf32>)
      outs(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      eps(1.0e-3) unnormalized
      -> tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
  return
}

// -----

func.func @linear_backward_causal_lengths(%q: tensor<1x1x8x16xf32>, %k: tensor<1x1x9x16xf32>,
                                          %s: tensor<1x1x16x16xf32>, %z: tensor<1x1x16xf32>) {
  // expected-error @+1 {{key dim 2 (Sk) must equal query's Sq (causal linear attention: query i sees keys 0..i) = 8, found 9}}
  %r:3 = attn.linear_backward ins(%q, %k, %k, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x9x16xf32>, tensor<1x1x9x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      state(%s, %z : tensor<1x1x16x16xf32>, tensor<1x1x16xf32>)
      outs(%q, %k, %k : tensor<1x1x8x16xf32>, tensor<1x1x9x16xf32>, tensor<1x1x9x16xf32>) causal
      -> tensor<1x1x8x16xf32>, tensor<1x1x9x16xf32>, tensor<1x1x9x16xf32>
  return
}
