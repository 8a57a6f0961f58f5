//===- Conformance.cpp - The spec's matrix of cases, runnable anywhere ----===//
#include "lib/Harness/Conformance.h"

#include "lib/Harness/Harness.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <sstream>

using namespace attn;

std::vector<ConformanceCase> attn::conformanceCases() {
  std::vector<ConformanceCase> cases = {
      // Sizes that are not multiples of the tiles (64 query rows, 128 keys).
      {"plain", "d=64", 2, 4, 4, 100, 200},
      {"decode_sq1", "d=64,lse", 1, 8, 8, 1, 300},
      {"sq_lt_sk", "d=64,lse", 1, 2, 2, 50, 300},
      {"sq_gt_sk", "d=64,lse", 1, 2, 2, 300, 50},
      {"sk_1", "d=32,lse", 1, 2, 2, 17, 1},
      // Causal, both alignments, both Sq < Sk and Sq > Sk.
      {"causal_tl_square", "d=64,causal,lse", 1, 4, 4, 200, 200},
      {"causal_tl_sq_lt_sk", "d=64,causal,lse", 1, 2, 2, 70, 260},
      {"causal_tl_sq_gt_sk", "d=64,causal,lse", 1, 2, 2, 260, 70},
      {"causal_br_sq_lt_sk", "d=64,causal=bottom_right,lse", 1, 2, 2, 70, 260},
      // Bottom-right with Sq > Sk: the first Sq - Sk rows see nothing
      // (O = 0, LSE = -inf).
      {"causal_br_sq_gt_sk", "d=64,causal=bottom_right,lse", 1, 2, 2, 260, 70},
      {"causal_br_decode", "d=128,causal=bottom_right,lse,gqa=4", 1, 8, 2, 1,
       333},
      // Decoding kernels (static Sq <= 4): a work item takes a whole GQA
      // group, static or dynamic G (row counts that are not a multiple of 4
      // or 2 included: bf16/f16 scores take tiles of 4 rows, P·V pairs);
      // more than 16 heads keep one per item.
      {"decode_group", "d=128,lse,sizes=?:8:2:1:?", 2, 8, 2, 1, 333},
      {"decode_group_dynamic", "d=64,causal=bottom_right,lse,sizes=?:?:?:3:?",
       1, 6, 2, 3, 200},
      {"decode_group_window",
       "dtype=bf16,d=64,causal=bottom_right,window=100:0,lse,sizes=?:?:?:1:?",
       2, 10, 2, 1, 300},
      {"decode_group_mask", "dtype=f16,d=64,mask=bool:h1,lse,sizes=?:?:?:3:?",
       1, 4, 1, 3, 150},
      // Groups of more than 16 heads: tiles of 16 (a dynamic G of 40: 8),
      // or of 12 for a static G of 24.
      {"decode_group_over_16", "d=32,lse,sizes=?:?:?:1:?", 1, 32, 1, 1, 140},
      {"decode_group_40", "dtype=f16,d=64,lse,sizes=?:?:?:1:?", 1, 40, 1, 1,
       140},
      {"decode_group_24",
       "dtype=bf16,d=64,causal=bottom_right,sizes=?:48:2:1:?", 2, 48, 2, 1,
       200},
      {"decode_group_no_heads", "d=32,lse,sizes=?:?:?:1:?", 1, 0, 2, 1, 50},
      // f16 V: P·V by 4 rows (each half of Dv = 128 a pass), then a pair
      // and an odd row (7 rows a group).
      {"decode_f16_group7", "dtype=f16,d=128,lse,sizes=?:?:?:1:?", 1, 14, 2, 1,
       300},
      // bf16 V: P·V pairs keys as it loads V (Dv a multiple of 32), 4 rows
      // a pass, then a pair and an odd row; an odd key count's last key
      // pairs with zeros. Dv = 80 pairs the block into valuePairs first.
      {"decode_bf16_group7", "dtype=bf16,d=128,lse,sizes=?:?:?:1:?", 1, 14, 2,
       1, 301},
      {"decode_bf16_d80", "dtype=bf16,d=80,lse,sizes=?:?:?:1:?", 1, 10, 2, 1,
       263},
      // Rows of 16 chunks (f32 D = 256): the score tiles loop over chunks;
      // 6 rows a group, so that the per-row loop scores the other 2.
      {"decode_group_wide", "d=256,lse,sizes=?:?:?:1:?", 1, 12, 2, 1, 300},
      // A soft cap over a group's scores (3 rows: a pair and an odd row).
      {"decode_softcap",
       "d=64,softcap=5,causal=bottom_right,lse,sizes=?:?:?:1:?", 1, 6, 2, 1,
       200},
      // Split-KV: one key/value head (multi-query) over longer keys, and a
      // bias with -inf, a window and two query rows across the ranges.
      {"decode_split_mqa", "dtype=bf16,d=128,lse,sizes=?:?:?:1:?", 1, 6, 1, 1,
       1100},
      {"decode_split_bias",
       "d=64,mask=bias:b1,causal=bottom_right,window=300:0,lse,sizes=?:?:?:2:?",
       2, 4, 2, 2, 900},
      // Sliding windows.
      {"window_left", "d=64,causal,window=40:0,lse", 1, 2, 2, 300, 300},
      {"window_both", "d=64,window=30:20,lse", 1, 2, 2, 150, 260},
      {"window_right", "d=32,align=bottom_right,window=inf:5", 1, 2, 2, 90,
       140},
      {"window_br", "d=64,causal=bottom_right,window=64:0", 1, 2, 2, 100, 400},
      // Boolean masks in every broadcast form, additive biases with -inf.
      {"mask_full", "d=64,mask=bool,lse", 2, 2, 2, 70, 150},
      {"mask_b1", "d=64,mask=bool:b1", 2, 2, 2, 70, 150},
      {"mask_h1", "d=64,mask=bool:h1", 2, 2, 2, 70, 150},
      {"mask_q1", "d=64,mask=bool:q1", 2, 2, 2, 70, 150},
      {"mask_b1h1", "d=64,mask=bool:b1h1,causal,lse", 2, 2, 2, 70, 150},
      {"mask_b1h1q1", "d=64,mask=bool:b1h1q1", 2, 2, 2, 70, 150},
      {"bias_full", "d=64,mask=bias,lse", 2, 2, 2, 70, 150},
      {"bias_b1h1", "d=64,mask=bias:b1h1,causal=bottom_right", 2, 2, 2, 70,
       150},
      // A padding bias (broadcast over the rows), in a band.
      {"bias_q1", "d=64,mask=bias:q1,causal,lse", 2, 2, 2, 70, 150},
      // Grouped-query and multi-query attention.
      {"gqa4", "d=64,gqa=4,causal,lse", 2, 8, 2, 130, 130},
      {"mqa", "d=64,lse", 1, 8, 1, 130, 200},
      // D != Dv, as in the seed tutorials, and the head dims the spec lists.
      {"d2_dv4", "d=2,dv=4,lse", 1, 2, 2, 9, 13},
      {"d16", "d=16,causal", 1, 2, 2, 150, 150},
      {"d80", "d=80,dv=80,causal,lse", 1, 2, 2, 150, 150},
      {"d128", "d=128,dv=128,lse", 1, 2, 2, 150, 150},
      {"d256", "d=256,dv=256,causal", 1, 2, 2, 100, 100},
      {"dv_tail", "d=48,dv=20,lse", 1, 2, 2, 33, 77},
      // Scale and soft-capping attributes.
      {"scale", "d=64,scale=0.3", 1, 2, 2, 64, 64},
      {"softcap", "d=64,softcap=5,causal,lse", 1, 2, 2, 100, 100},
      // Element types.
      {"bf16", "dtype=bf16,d=64,causal,lse", 1, 4, 2, 100, 170},
      {"f16", "dtype=f16,d=64,mask=bool:b1h1,lse", 1, 4, 2, 100, 170},
      {"bf16_d128_bias", "dtype=bf16,d=128,mask=bias:b1", 2, 2, 2, 65, 129},
      // 64 keys by 4 rows on AVX-512 BF16 (D + Dv > 192): the band branch
      // and a last row block with spare slots.
      {"bf16_d128_causal", "dtype=bf16,d=128,causal=bottom_right,lse", 1, 2, 2,
       131, 200},
      // Unmasked bf16: P·V by the dot product too, V packed as key pairs
      // (an odd Sk ends in a half pair), K as pairs of 40 head dims.
      {"bf16_full_gqa", "dtype=bf16,d=80,lse", 1, 4, 2, 67, 131},
      // Odd bf16 head dims: the dot product's last pair is half a pair (Q·Kᵀ
      // forward and backward, dO·Vᵀ in the backward).
      {"bf16_odd_dims", "dtype=bf16,d=33,dv=17,causal,lse", 1, 4, 2, 70, 90},
      {"f16_window", "dtype=f16,d=80,causal=bottom_right,window=50:0", 1, 2, 2,
       80, 200},
      // Static key counts of at most one key tile (their key loop folds
      // away): on the GPU one tile padded to whole MMA steps.
      {"short_keys_16", "dtype=f16,d=64,sizes=1:2:2:16:16", 1, 2, 2, 16, 16},
      {"short_keys_40",
       "dtype=bf16,d=64,causal=bottom_right,lse,sizes=?:?:?:?:40", 1, 2, 2, 70,
       40},
      {"short_keys_7", "d=32,mask=bool,sizes=?:?:?:?:7", 1, 2, 2, 30, 7},
      // Empty problems: Sk = 0 (every row fully masked), Sq = 0.
      {"sk_0", "d=16,lse", 1, 2, 2, 5, 0},
      {"sq_0", "d=16,lse", 1, 2, 2, 0, 9},
      // Attention sinks (heads in turn: a moderate sink, none (-inf), one
      // that takes nearly all the weight, moderate ones): on the lane-rows
      // and packed kernels, rows that see no key (LSE = the sink), decoding
      // groups and split-KV (the sink joins once, in the merge), D != Dv
      // with GQA in bf16, a keep-mask in f16, and no keys at all.
      {"sinks", "d=64,sinks,lse", 2, 4, 4, 100, 200},
      {"sinks_causal_br_sq_gt_sk", "d=64,causal=bottom_right,sinks,lse", 1, 4,
       2, 150, 70},
      {"sinks_decode_group",
       "d=64,causal=bottom_right,sinks,lse,sizes=?:?:?:3:?", 1, 6, 2, 3, 200},
      {"sinks_decode_split", "dtype=bf16,d=128,sinks,lse,sizes=?:?:?:1:?", 1, 6,
       1, 1, 1100},
      {"sinks_bf16_gqa_dv", "dtype=bf16,d=80,dv=48,gqa=2,sinks,lse", 1, 4, 2,
       67, 131},
      {"sinks_f16_mask", "dtype=f16,d=64,mask=bool:b1h1,window=40:10,sinks", 2,
       4, 4, 70, 150},
      {"sinks_sk_0", "d=16,sinks,lse", 1, 4, 2, 5, 0},
      // Dropout (p = 0.25, Problem's seed): the keep bits at global
      // indices under GQA, a causal band, a window and a keep-mask, a bias
      // (its gradient too), the soft cap and D != Dv, in each element type,
      // lengths off every tile.
      {"dropout_gqa", "d=64,dropout,lse", 2, 4, 2, 100, 150},
      {"dropout_bf16_causal", "dtype=bf16,d=64,causal=bottom_right,dropout,lse",
       1, 2, 2, 70, 130},
      {"dropout_f16_window",
       "dtype=f16,d=48,dv=32,mask=bool:b1h1,window=30:5,dropout", 2, 2, 2, 60,
       90},
      {"dropout_bias_softcap", "d=32,mask=bias:h1,softcap=10,dropout,lse", 1, 2,
       2, 45, 77},
  };
  // Strided [B, S, H, D] buffers.
  cases.push_back({"bshd", "d=64,causal,gqa=2,lse", 2, 4, 2, 90, 90, true});
  cases.push_back(
      {"bshd_bf16", "dtype=bf16,d=64,mask=bool:h1", 1, 4, 4, 70, 70, true});
  // A bias whose gradient the backward writes into a transposed dM.
  cases.push_back({"bshd_bias", "d=32,mask=bias:h1,causal=bottom_right,lse", 2,
                   4, 2, 45, 80, true});
  // Logits of magnitude ~1e4: finite, no NaN.
  for (const char *dtype : {"f32", "bf16", "f16"}) {
    ConformanceCase c{std::string("logits_1e4_") + dtype,
                      std::string("dtype=") + dtype + ",d=64,causal,lse",
                      1,
                      2,
                      2,
                      100,
                      100};
    c.inputScale = 100.0;
    c.finiteOnly = true;
    cases.push_back(c);
  }
  // NaN in Q, K and V (batches 0, 1 and 2) at positions some rows attend
  // to and others do not, on each micro-kernel (rows in lanes, packed
  // blocks with a keep mask or a bias, the bf16 dot product, decoding
  // groups). Bottom-right
  // with Sq > Sk: the first 30 rows see no key, and a NaN query there still
  // gives O = 0 and LSE = -inf; row 80's NaN reaches only row 80; key 60's
  // only rows 90 and later, key 100's (in V) rows 130 and later.
  for (const char *dtype : {"f32", "bf16", "f16"}) {
    std::string t = dtype;
    std::vector<NanInput> prefill = {
        {'q', 0, 3, 5}, {'q', 0, 80, 0}, {'k', 1, 60, 7}, {'v', 2, 100, 1}};
    cases.push_back({"nan_lanes_" + t,
                     "dtype=" + t + ",d=64,causal=bottom_right,lse", 3, 2, 2,
                     150, 120, false, 1.0, false, prefill});
    // A key that a false keep bit or a -inf bias excludes is excluded
    // whatever its K row holds.
    for (auto [label, mask] :
         {std::pair<const char *, const char *>{"nan_keep_", "bool:b1h1"},
          {"nan_bias_", "bias:h1"}})
      cases.push_back(
          {label + t,
           "dtype=" + t + ",d=64,mask=" + mask + ",causal=bottom_right,lse", 3,
           2, 2, 150, 120, false, 1.0, false, prefill});
    // Decoding: row 1's query; key 198 reaches rows 1 and 2, key 199 row 2.
    cases.push_back(
        {"nan_decode_" + t,
         "dtype=" + t + ",d=64,causal=bottom_right,lse,sizes=?:?:?:3:?",
         3,
         4,
         2,
         3,
         200,
         false,
         1.0,
         false,
         {{'q', 0, 1, 9}, {'k', 1, 198, 2}, {'v', 2, 199, 3}}});
  }
  // A NaN in V at key 50 that rows past 90 do not see (a window of 40 on
  // both sides): rows 80-95 see the whole last key block (64-99) and their
  // P·V may read whole steps of it, whose pairs past key 99 must not hold
  // the first block's V (key 50's NaN among them).
  cases.push_back({"nan_window_stale",
                   "dtype=bf16,d=64,window=40:40,lse",
                   1,
                   2,
                   2,
                   100,
                   100,
                   false,
                   1.0,
                   false,
                   {{'v', 0, 50, 3}}});
  for (ConformanceCase &c : cases)
    c.spec = "name=" + c.label + "," + c.spec;
  return cases;
}

namespace {
bool hasItem(const std::string &spec, const std::string &item);
std::string respec(const std::string &spec,
                   const std::function<bool(const std::string &)> &drop,
                   const std::string &extra);
} // namespace

std::vector<ConformanceCase> attn::linearGpuConformanceCases() {
  // Odd lengths (chunks cut short), GQA, Dv not a multiple of a block's 32
  // value columns, the state in and out, each feature map, unnormalized, a
  // chunk option, the bshd layout, D = 256 (shared memory past 48 KiB), a
  // NaN in a key that the causal rows before it must not see.
  std::vector<ConformanceCase> cases = {
      {"linear_f32_gqa", "linear,d=64", 2, 4, 2, 100, 77},
      {"linear_f16_causal_state", "linear,dtype=f16,d=64,dv=40,causal,state", 1,
       2, 2, 100, 100},
      {"linear_bf16_causal_relu",
       "linear,dtype=bf16,d=128,causal,feature_map=relu", 1, 8, 2, 300, 300},
      {"linear_f32_identity_unnormalized",
       "linear,d=32,dv=96,state,unnormalized,feature_map=identity", 1, 2, 1, 33,
       130},
      {"linear_f32_causal_chunk64_bshd", "linear,d=64,causal,chunk=64", 1, 4, 2,
       200, 200, /*bshd=*/true},
      {"linear_f16_d256", "linear,dtype=f16,d=256,dv=64", 1, 2, 2, 65, 1000},
      {"linear_f32_causal_one_row", "linear,d=64,causal", 1, 2, 2, 1, 1},
      {"linear_f32_causal_nan",
       "linear,d=64,causal",
       1,
       2,
       2,
       70,
       70,
       false,
       1.0,
       false,
       {{'k', 0, 40, 5}}},
  };
  for (ConformanceCase &c : cases)
    c.spec = "name=" + c.label + "," + c.spec;
  return cases;
}

std::vector<ConformanceCase> attn::additiveGpuConformanceCases() {
  // Sq and Sk not multiples of the 32-row and 32-key tiles, a keep-mask of
  // each broadcast form (its first row keeps nothing: O and the weights 0),
  // the weights, each element type, the tutorial's dims, NaNs.
  std::vector<ConformanceCase> cases = {
      {"additive_f32", "additive,d=20,dq=24,dv=40,attn_dim=36", 2, 1, 1, 45,
       70},
      {"additive_f16_mask_weights",
       "additive,dtype=f16,d=64,dq=32,dv=48,attn_dim=40,mask=bool,"
       "with_weights",
       2, 1, 1, 33, 100},
      {"additive_bf16_mask_b1q1",
       "additive,dtype=bf16,d=64,dq=64,dv=64,attn_dim=64,mask=bool:b1q1", 3, 1,
       1, 64, 65},
      {"additive_f32_tutorial",
       "additive,d=256,dq=256,dv=256,attn_dim=128,mask=bool:q1,with_weights", 1,
       1, 1, 70, 90},
      {"additive_f32_one_key", "additive,d=16,dq=16,dv=16,attn_dim=8", 1, 1, 1,
       5, 1},
      // A NaN query row (its weights NaN at its allowed keys, 0 at the
      // masked ones) and a NaN value (the rows that allow its key).
      {"additive_nan_weights",
       "additive,d=16,dq=16,dv=24,attn_dim=12,mask=bool,with_weights",
       2,
       1,
       1,
       40,
       50,
       false,
       1.0,
       false,
       {{'q', 0, 3, 2}, {'v', 1, 45, 7}}},
  };
  for (ConformanceCase &c : cases)
    c.spec = "name=" + c.label + "," + c.spec;
  return cases;
}

std::vector<ConformanceCase> attn::gpuConformanceCases() {
  std::vector<ConformanceCase> cases = conformanceCases();
  for (ConformanceCase &c : linearGpuConformanceCases())
    cases.push_back(std::move(c));
  for (ConformanceCase &c : additiveGpuConformanceCases())
    cases.push_back(std::move(c));
  for (ConformanceCase &c : backwardGpuConformanceCases())
    cases.push_back(std::move(c));
  return cases;
}

std::vector<ConformanceCase> attn::backwardGpuConformanceCases() {
  // Of the forward's matrix: Sq against Sk, both causal alignments, windows
  // (one unbounded side), keep-masks and biases broadcast (the bias's
  // gradient dM), GQA and MQA, odd and unequal head dims up to 256, the
  // soft cap, each element type, the [B, S, H, D] layout, empty sequences
  // and heads, huge logits and NaNs; with `lse` in the spec the kernel
  // takes dLSE. Lengths are not multiples of the kernels' tiles.
  static const std::set<std::string> labels = {"plain",
                                               "sq_lt_sk",
                                               "causal_tl_sq_lt_sk",
                                               "causal_br_sq_gt_sk",
                                               "causal_br_decode",
                                               "decode_group_no_heads",
                                               "window_both",
                                               "window_right",
                                               "mask_b1",
                                               "mask_q1",
                                               "bias_b1h1",
                                               "bias_q1",
                                               "gqa4",
                                               "mqa",
                                               "d2_dv4",
                                               "d256",
                                               "dv_tail",
                                               "softcap",
                                               "bf16",
                                               "f16",
                                               "bf16_odd_dims",
                                               "f16_window",
                                               "sk_0",
                                               "sq_0",
                                               "bshd_bias",
                                               "logits_1e4_bf16",
                                               "nan_keep_f32",
                                               "nan_bias_bf16",
                                               "nan_window_stale",
                                               "dropout_gqa",
                                               "dropout_bf16_causal",
                                               "dropout_f16_window",
                                               "dropout_bias_softcap"};
  std::vector<ConformanceCase> cases;
  for (ConformanceCase &c : conformanceCases()) {
    if (!labels.count(c.label))
      continue;
    std::string body = respec(
        backwardSpec(c),
        [](const std::string &item) { return item.rfind("name=", 0) == 0; },
        "");
    c.label = "backward_" + c.label;
    c.spec = "name=" + c.label + "," + body.substr(0, body.size() - 1);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<ConformanceCase> attn::amxConformanceCases() {
  std::vector<ConformanceCase> cases;
  std::set<std::string> seen;
  for (ConformanceCase &c : conformanceCases()) {
    std::string error;
    std::optional<KernelSpec> spec = parseKernelSpec(c.spec, error);
    // A decoding kernel (a static Sq of at most 4 rows, attn-compile's
    // kCpuDecodeRows) takes no AMX tiles.
    bool decoding =
        spec && spec->staticSizes[3] >= 1 && spec->staticSizes[3] <= 4;
    if (!spec || decoding || spec->headDim % 32 != 0 ||
        spec->valueDim % 16 != 0)
      continue;
    // The same kernel and problem in bf16, named amx_<label>.
    std::string body = respec(
        c.spec,
        [](const std::string &item) {
          return item.rfind("name=", 0) == 0 || item.rfind("dtype=", 0) == 0;
        },
        "dtype=bf16");
    std::ostringstream problem;
    problem << body << ' ' << c.batch << ' ' << c.headsQ << ' ' << c.headsKv
            << ' ' << c.seqQ << ' ' << c.seqK << ' ' << c.bshd << ' '
            << c.inputScale << ' ' << c.finiteOnly;
    for (const NanInput &nan : c.nans)
      problem << ' ' << nan.tensor << nan.batch << ':' << nan.row << ':'
              << nan.column;
    if (!seen.insert(problem.str()).second)
      continue;
    c.label = "amx_" + c.label;
    c.spec = "name=" + c.label + "," + body;
    cases.push_back(std::move(c));
  }
  return cases;
}

namespace {
/// Whether the spec string `spec` holds the item `item` (a bare key).
bool hasItem(const std::string &spec, const std::string &item) {
  std::stringstream items(spec);
  for (std::string each; std::getline(items, each, ',');)
    if (each == item)
      return true;
  return false;
}

/// `spec` without the items for which `drop` holds, then `extra`.
std::string respec(const std::string &spec,
                   const std::function<bool(const std::string &)> &drop,
                   const std::string &extra) {
  std::string result;
  std::stringstream items(spec);
  for (std::string item; std::getline(items, item, ',');)
    if (!drop(item))
      result += item + ",";
  return result + extra;
}

/// The problem of case `c` for `spec`, with its NaN inputs placed.
Problem problemOf(const ConformanceCase &c, const KernelSpec &spec,
                  ProblemData &data) {
  Problem problem;
  problem.spec = spec;
  problem.batch = c.batch;
  problem.headsQ = c.headsQ;
  problem.headsKv = c.headsKv;
  problem.seqQ = c.seqQ;
  problem.seqK = c.seqK;
  problem.bshd = c.bshd;
  problem.inputScale = c.inputScale;
  problem.seed = std::hash<std::string>()(c.label);
  problem.sinks = hasItem(c.spec, "sinks");
  makeProblemData(problem, data);
  placeNans(data, c.nans);
  return problem;
}

/// The index of the first element where `a` and `b` differ bitwise, or -1.
int64_t firstDifference(const std::vector<double> &a,
                        const std::vector<double> &b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0)
      return static_cast<int64_t>(i);
  return a.size() == b.size() ? -1 : static_cast<int64_t>(a.size());
}
} // namespace

// A backward or weights kernel of a forward with sinks takes them through
// the forward's LSE (the weights kernel then needs it: `lse`).

std::string attn::backwardSpec(const ConformanceCase &c) {
  if (hasItem(c.spec, "backward"))
    return c.spec;
  // An additive bias gets its gradient checked too.
  bool bias = false;
  std::stringstream items(c.spec);
  for (std::string item; std::getline(items, item, ',');)
    bias |= item.rfind("mask=bias", 0) == 0;
  return respec(
      c.spec, [](const std::string &item) { return item == "sinks"; },
      bias ? "backward,dbias" : "backward");
}

CaseOutcome attn::runBackwardConformanceCase(const ConformanceCase &c,
                                             const attn_kernel_desc *kernel,
                                             attn_thread_pool *pool) {
  return runBackwardConformanceCase(c, [&](ProblemData &data,
                                           BackwardData &backward, bool first) {
    return runBackwardProblem(kernel, data, backward, first ? pool : nullptr);
  });
}

CaseOutcome attn::runBackwardConformanceCase(
    const ConformanceCase &c,
    const std::function<attn_status(ProblemData &, BackwardData &, bool first)>
        &run) {
  CaseOutcome outcome;
  std::string error;
  std::optional<KernelSpec> spec = parseKernelSpec(backwardSpec(c), error);
  if (!spec) {
    outcome.message = c.spec + ": " + error;
    return outcome;
  }
  ProblemData data;
  Problem problem = problemOf(c, *spec, data);
  BackwardData backward;
  if (!makeBackwardData(problem, data, backward, error)) {
    outcome.message = problem.describe() + ": reference failed: " + error;
    return outcome;
  }
  if (run(data, backward, /*first=*/true) != ATTN_OK) {
    outcome.message = problem.describe() + ": " + attn_last_error();
    return outcome;
  }
  BackwardReport report = checkBackwardAgainstReference(problem, data, backward);
  outcome.message = problem.describe() + ": " + report.message;
  std::vector<double> first = gradientValues(backward);
  if (c.finiteOnly) {
    for (double value : first)
      if (!std::isfinite(value)) {
        outcome.message += "; a non-finite gradient";
        return outcome;
      }
    for (const ErrorStats *stats : {&report.query, &report.key, &report.value})
      if (stats->mismatched() || stats->relative > 5e-2)
        return outcome;
  } else if (!report.passed) {
    return outcome;
  }
  // Once more (on this thread alone, for a CPU kernel): the same bits.
  poisonGradients(backward);
  if (run(data, backward, /*first=*/false) != ATTN_OK) {
    outcome.message += "; second run: " + std::string(attn_last_error());
    return outcome;
  }
  int64_t differs = firstDifference(first, gradientValues(backward));
  if (differs >= 0) {
    outcome.message += "; gradient element " + std::to_string(differs) +
                       " differs between the first run and the second";
    return outcome;
  }
  outcome.passed = true;
  return outcome;
}

std::string attn::weightsSpec(const ConformanceCase &c) {
  bool sinks = hasItem(c.spec, "sinks");
  return respec(
      c.spec,
      [&](const std::string &item) {
        return item.rfind("dv=", 0) == 0 || item == "sinks" ||
               (sinks && item == "lse");
      },
      sinks ? "lse,weights" : "weights");
}

CaseOutcome attn::runWeightsConformanceCase(const ConformanceCase &c,
                                            const attn_kernel_desc *kernel,
                                            attn_thread_pool *pool) {
  CaseOutcome outcome;
  std::string error;
  std::optional<KernelSpec> spec = parseKernelSpec(weightsSpec(c), error);
  if (!spec) {
    outcome.message = c.spec + ": " + error;
    return outcome;
  }
  ProblemData data;
  Problem problem = problemOf(c, *spec, data);
  WeightsData weights;
  if (!makeWeightsData(problem, data, weights, error)) {
    outcome.message = problem.describe() + ": reference failed: " + error;
    return outcome;
  }
  if (runWeightsProblem(kernel, data, weights, pool) != ATTN_OK) {
    outcome.message = problem.describe() + ": " + attn_last_error();
    return outcome;
  }
  CheckReport report = checkWeightsAgainstReference(problem, data, weights);
  outcome.message = problem.describe() + ": " + report.message;
  if (c.finiteOnly) {
    // Extreme logits: finite weights that still sum to one per row.
    for (double value : weightsValues(weights))
      if (!std::isfinite(value)) {
        outcome.message += "; a non-finite weight";
        return outcome;
      }
    if (report.output.mismatched() || report.output.relative > 5e-2)
      return outcome;
  } else if (!report.passed) {
    return outcome;
  }
  outcome.passed = true;
  return outcome;
}

namespace {
/// A case's two calls: the first (`run(true)`) checked by `check`, then,
/// after `poisonAgain`, a second (`run(false)`) whose `results` must equal
/// the first's bit for bit. `problem` names the case in the message.
CaseOutcome checkTwice(const std::string &problem,
                       const std::function<attn_status(bool)> &run,
                       const std::function<CheckReport()> &check,
                       const std::function<std::vector<double>()> &results,
                       const std::function<void()> &poisonAgain) {
  CaseOutcome outcome;
  if (run(/*first=*/true) != ATTN_OK) {
    outcome.message = problem + ": " + attn_last_error();
    return outcome;
  }
  CheckReport report = check();
  outcome.message = problem + ": " + report.message;
  if (!report.passed)
    return outcome;
  std::vector<double> first = results();
  poisonAgain();
  if (run(/*first=*/false) != ATTN_OK) {
    outcome.message += "; second run: " + std::string(attn_last_error());
    return outcome;
  }
  int64_t differs = firstDifference(first, results());
  if (differs >= 0) {
    outcome.message +=
        "; element " + std::to_string(differs) + " differs between two runs";
    return outcome;
  }
  outcome.passed = true;
  return outcome;
}
} // namespace

CaseOutcome attn::runLinearConformanceCase(
    const ConformanceCase &c,
    const std::function<attn_status(ProblemData &, LinearData &, bool)> &run) {
  std::string error;
  std::optional<KernelSpec> spec = parseKernelSpec(c.spec, error);
  if (!spec)
    return {false, c.spec + ": " + error};
  ProblemData data;
  Problem problem = problemOf(c, *spec, data);
  LinearData linear;
  makeLinearData(problem, data, linear);
  return checkTwice(
      problem.describe(), [&](bool first) { return run(data, linear, first); },
      [&] { return checkLinearAgainstReference(problem, data, linear); },
      [&] {
        std::vector<double> values = outputValues(data);
        values.insert(values.end(), linear.state.begin(), linear.state.end());
        values.insert(values.end(), linear.normalizer.begin(),
                      linear.normalizer.end());
        return values;
      },
      [&] {
        poisonOutputs(data);
        std::fill(linear.state.begin(), linear.state.end(), NAN);
        std::fill(linear.normalizer.begin(), linear.normalizer.end(), NAN);
      });
}

CaseOutcome attn::runAdditiveConformanceCase(
    const ConformanceCase &c,
    const std::function<attn_status(AdditiveData &, bool)> &run) {
  std::string error;
  std::optional<KernelSpec> spec = parseKernelSpec(c.spec, error);
  if (!spec)
    return {false, c.spec + ": " + error};
  Problem problem;
  problem.spec = *spec;
  problem.batch = c.batch;
  problem.headsQ = problem.headsKv = 1;
  problem.seqQ = c.seqQ;
  problem.seqK = c.seqK;
  problem.inputScale = c.inputScale;
  problem.seed = std::hash<std::string>()(c.label);
  AdditiveData data;
  makeAdditiveData(problem, data);
  // NaNs as problemOf places them: the tensors are [1, B, S, D].
  for (const NanInput &nan : c.nans) {
    HostTensor &tensor = nan.tensor == 'q'   ? data.query
                         : nan.tensor == 'k' ? data.keys
                                             : data.values;
    const int64_t *shape = tensor.view.shape;
    std::vector<double> values = tensor.values;
    values[(nan.batch * shape[2] + nan.row) * shape[3] + nan.column] =
        std::numeric_limits<double>::quiet_NaN();
    setValues(tensor, values);
  }
  return checkTwice(
      problem.describe(), [&](bool first) { return run(data, first); },
      [&] { return checkAdditiveAgainstReference(problem, data); },
      [&] {
        std::vector<double> values = tensorValues(data.output);
        values.insert(values.end(), data.weights.begin(), data.weights.end());
        return values;
      },
      [&] {
        poisonTensor(data.output);
        std::fill(data.weights.begin(), data.weights.end(), NAN);
      });
}

void attn::placeNans(ProblemData &data, const std::vector<NanInput> &nans) {
  for (const NanInput &nan : nans) {
    HostTensor &tensor = nan.tensor == 'q'   ? data.query
                         : nan.tensor == 'k' ? data.key
                                             : data.value;
    const int64_t *shape = tensor.view.shape;
    std::vector<double> values = tensor.values;
    for (int64_t h = 0; h < shape[1]; ++h)
      values[((nan.batch * shape[1] + h) * shape[2] + nan.row) * shape[3] +
             nan.column] = std::numeric_limits<double>::quiet_NaN();
    setValues(tensor, values);
  }
}

CaseOutcome attn::runConformanceCase(const ConformanceCase &c,
                                     const attn_kernel_desc *kernel,
                                     attn_thread_pool *pool,
                                     int64_t keySplits) {
  CaseOutcome outcome;
  std::string error;
  std::optional<KernelSpec> spec = parseKernelSpec(c.spec, error);
  if (!spec) {
    outcome.message = c.spec + ": " + error;
    return outcome;
  }
  if (spec->additive)
    return runAdditiveConformanceCase(c, [&](AdditiveData &data, bool first) {
      return runAdditiveProblem(kernel, data, first ? pool : nullptr);
    });
  if (spec->backward)
    return runBackwardConformanceCase(c, kernel, pool);
  if (spec->linear)
    return runLinearConformanceCase(
        c, [&](ProblemData &data, LinearData &linear, bool first) {
          return runLinearProblem(kernel, data, linear, first ? pool : nullptr);
        });
  ProblemData data;
  Problem problem = problemOf(c, *spec, data);
  if (runProblem(kernel, data, pool, keySplits) != ATTN_OK) {
    outcome.message = problem.describe() + ": " + attn_last_error();
    return outcome;
  }
  CheckReport report = checkAgainstReference(problem, data);
  outcome.message = problem.describe() + ": " + report.message;
  if (c.finiteOnly) {
    for (double value : outputValues(data))
      if (!std::isfinite(value)) {
        outcome.message += "; a non-finite output";
        return outcome;
      }
    outcome.passed =
        !report.output.mismatched() && report.output.relative <= 5e-2;
    return outcome;
  }
  if (!report.passed)
    return outcome;

  // Once more (one thread on the CPU): bit-identical results. Where the
  // runtime chooses a key split, it does so by the pool's size, and the
  // ranges' sums round differently: then on the same pool.
  std::vector<double> first = outputValues(data);
  poisonOutputs(data);
  bool samePool = keySplits == 0 && attn_kernel_has_key_split(kernel);
  if (runProblem(kernel, data, samePool ? pool : nullptr, keySplits) !=
      ATTN_OK) {
    outcome.message += "; second run: " + std::string(attn_last_error());
    return outcome;
  }
  int64_t differs = firstDifference(first, outputValues(data));
  if (differs >= 0) {
    outcome.message += "; element " + std::to_string(differs) +
                       (samePool ? " differs between two runs on the same pool"
                                 : " differs between two runs (2 threads, "
                                   "then 1 on the CPU)");
    return outcome;
  }
  outcome.passed = true;
  return outcome;
}
