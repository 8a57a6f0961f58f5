//===- KernelSpecTest.cpp - Tests of spec string parsing and printing -----===//
//
// The spec string is a user interface: these tests pin down what it accepts,
// that printing and parsing are inverse to each other over many option
// combinations, and that every kind of bad input is refused with a message
// naming the key and the value at fault.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/KernelSpec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <regex>
#include <set>
#include <sstream>

using namespace attn;

namespace {

void expectEqualSpecs(const KernelSpec &a, const KernelSpec &b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.elementType, b.elementType);
  EXPECT_EQ(a.headDim, b.headDim);
  EXPECT_EQ(a.valueDim, b.valueDim);
  EXPECT_EQ(a.mask, b.mask);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(a.maskBroadcast[i], b.maskBroadcast[i]) << "broadcast dim " << i;
  EXPECT_EQ(a.causal, b.causal);
  EXPECT_EQ(a.alignment, b.alignment);
  EXPECT_EQ(a.windowLeft, b.windowLeft);
  EXPECT_EQ(a.windowRight, b.windowRight);
  EXPECT_EQ(a.scale.has_value(), b.scale.has_value());
  if (a.scale && b.scale) { // compare exactly: the printer must not round
    EXPECT_EQ(*a.scale, *b.scale);
  }
  EXPECT_EQ(a.softcap.has_value(), b.softcap.has_value());
  if (a.softcap && b.softcap) {
    EXPECT_EQ(*a.softcap, *b.softcap);
  }
  EXPECT_EQ(a.lse, b.lse);
  EXPECT_EQ(a.backward, b.backward);
  EXPECT_EQ(a.dropout, b.dropout);
  EXPECT_EQ(a.weights, b.weights);
  EXPECT_EQ(a.sinks, b.sinks);
  EXPECT_EQ(a.gradMask, b.gradMask);
  EXPECT_EQ(a.gradCaptures, b.gradCaptures);
  EXPECT_EQ(a.linear, b.linear);
  EXPECT_EQ(a.eps, b.eps);
  EXPECT_EQ(a.chunk, b.chunk);
  EXPECT_EQ(a.featureMap, b.featureMap);
  EXPECT_EQ(a.linearState, b.linearState);
  EXPECT_EQ(a.unnormalized, b.unnormalized);
  EXPECT_EQ(a.additive, b.additive);
  EXPECT_EQ(a.queryDim, b.queryDim);
  EXPECT_EQ(a.attnDim, b.attnDim);
  EXPECT_EQ(a.additiveWeights, b.additiveWeights);
  EXPECT_EQ(a.additiveBackward, b.additiveBackward);
  EXPECT_EQ(a.linearBackward, b.linearBackward);
  EXPECT_EQ(a.mha, b.mha);
  EXPECT_EQ(a.embedDim, b.embedDim);
  EXPECT_EQ(a.mhaHeads, b.mhaHeads);
  EXPECT_EQ(a.keyEmbedDim, b.keyEmbedDim);
  EXPECT_EQ(a.valueEmbedDim, b.valueEmbedDim);
  EXPECT_EQ(a.mhaBias, b.mhaBias);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(a.staticSizes[i], b.staticSizes[i]) << "static size " << i;
  EXPECT_EQ(a.group, b.group);
}

KernelSpec parseOrDie(const std::string &text) {
  std::string error;
  std::optional<KernelSpec> spec = parseKernelSpec(text, error);
  EXPECT_TRUE(spec.has_value()) << text << ": " << error;
  return spec.value_or(KernelSpec());
}

/// Expects `text` to be refused with a message containing every fragment.
void expectError(const std::string &text,
                 std::initializer_list<const char *> fragments) {
  std::string error;
  std::optional<KernelSpec> spec = parseKernelSpec(text, error);
  EXPECT_FALSE(spec.has_value()) << "accepted: " << text;
  EXPECT_FALSE(error.empty()) << text;
  for (const char *fragment : fragments)
    EXPECT_NE(error.find(fragment), std::string::npos)
        << "input: " << text << "\nmessage: " << error
        << "\nmissing: " << fragment;
}

TEST(KernelSpec, EmptyStringIsTheDefault) {
  expectEqualSpecs(parseOrDie(""), KernelSpec());
}

TEST(KernelSpec, ParsesTheDocumentedExample) {
  KernelSpec spec = parseOrDie(
      "dtype=bf16,d=64,dv=64,causal=bottom_right,window=256:0,mask=bool:b1h1,"
      "lse,gqa=4,scale=0.125,softcap=30,name=my_kernel");
  EXPECT_EQ(spec.elementType, ElementType::BF16);
  EXPECT_EQ(spec.headDim, 64);
  EXPECT_EQ(spec.valueDim, 64);
  EXPECT_TRUE(spec.causal);
  EXPECT_EQ(spec.alignment, Alignment::BottomRight);
  EXPECT_EQ(spec.windowLeft, 256);
  EXPECT_EQ(spec.windowRight, 0);
  EXPECT_EQ(spec.mask, MaskKind::Bool);
  EXPECT_TRUE(spec.maskBroadcast[0]);
  EXPECT_TRUE(spec.maskBroadcast[1]);
  EXPECT_FALSE(spec.maskBroadcast[2]);
  EXPECT_TRUE(spec.lse);
  EXPECT_EQ(spec.group, 4);
  EXPECT_EQ(spec.scale, 0.125f);
  EXPECT_EQ(spec.softcap, 30.0f);
  EXPECT_EQ(spec.name, "my_kernel");
}

TEST(KernelSpec, BareCausalIsTopLeft) {
  KernelSpec spec = parseOrDie("causal");
  EXPECT_TRUE(spec.causal);
  EXPECT_EQ(spec.alignment, Alignment::TopLeft);
}

TEST(KernelSpec, AlignWithoutCausal) {
  KernelSpec spec = parseOrDie("window=4:inf,align=bottom_right");
  EXPECT_FALSE(spec.causal);
  EXPECT_EQ(spec.alignment, Alignment::BottomRight);
  EXPECT_EQ(spec.windowLeft, 4);
  EXPECT_FALSE(spec.windowRight.has_value());
  // Agreeing causal and align are fine.
  EXPECT_TRUE(parseOrDie("causal=bottom_right,align=bottom_right").causal);
}

TEST(KernelSpec, MaskBroadcastSpellings) {
  KernelSpec a = parseOrDie("mask=bias:b1:q1");
  KernelSpec b = parseOrDie("mask=bias:q1b1");
  for (const KernelSpec &spec : {a, b}) {
    EXPECT_EQ(spec.mask, MaskKind::Bias);
    EXPECT_TRUE(spec.maskBroadcast[0]);
    EXPECT_FALSE(spec.maskBroadcast[1]);
    EXPECT_TRUE(spec.maskBroadcast[2]);
  }
  EXPECT_EQ(parseOrDie("mask=none").mask, MaskKind::None);
}

TEST(KernelSpec, WhitespaceAroundItemsIsIgnored) {
  KernelSpec spec = parseOrDie(" d = 32 , dv=16 ,\n lse ");
  EXPECT_EQ(spec.headDim, 32);
  EXPECT_EQ(spec.valueDim, 16);
  EXPECT_TRUE(spec.lse);
}

TEST(KernelSpec, EffectiveScale) {
  KernelSpec spec;
  spec.headDim = 64;
  EXPECT_EQ(spec.effectiveScale(), 0.125f);
  spec.headDim = 2;
  EXPECT_EQ(spec.effectiveScale(), static_cast<float>(1.0 / std::sqrt(2.0)));
  spec.scale = 3.5f;
  EXPECT_EQ(spec.effectiveScale(), 3.5f);
}

TEST(KernelSpec, ElementTypeNames) {
  EXPECT_STREQ(elementTypeName(ElementType::F32), "f32");
  EXPECT_STREQ(elementTypeName(ElementType::F16), "f16");
  EXPECT_STREQ(elementTypeName(ElementType::BF16), "bf16");
}

TEST(KernelSpec, PrintsDefaultCanonically) {
  EXPECT_EQ(printKernelSpec(KernelSpec()), "dtype=f32,d=64,dv=64");
  EXPECT_EQ(printKernelSpec(parseOrDie("lse,causal,d=2,dv=4")),
            "dtype=f32,d=2,dv=4,causal=top_left,lse");
}

TEST(KernelSpec, RoundTripsManyCombinations) {
  const ElementType types[] = {ElementType::F32, ElementType::F16,
                               ElementType::BF16};
  const MaskKind masks[] = {MaskKind::None, MaskKind::Bool, MaskKind::Bias};
  const std::optional<int64_t> sides[] = {std::nullopt, 0, 1, 127,
                                          std::numeric_limits<int64_t>::max()};
  const std::optional<float> scales[] = {std::nullopt, 0.125f, 1.0f / 3.0f,
                                         -2.5e-7f,     0.0f,   3.4e38f};
  const std::optional<float> caps[] = {std::nullopt, 30.0f, 0.1f,
                                       1.17549435e-38f};
  int checked = 0;
  std::mt19937 rng(1234);
  for (ElementType type : types)
    for (MaskKind mask : masks)
      for (int broadcast = 0; broadcast < 8; ++broadcast)
        for (int diag = 0; diag < 4; ++diag)
          for (const auto &left : sides)
            for (const auto &right : sides) {
              KernelSpec spec;
              spec.elementType = type;
              spec.mask = mask;
              if (mask != MaskKind::None)
                for (int i = 0; i < 3; ++i)
                  spec.maskBroadcast[i] = broadcast >> i & 1;
              spec.causal = diag & 1;
              spec.alignment =
                  diag & 2 ? Alignment::BottomRight : Alignment::TopLeft;
              spec.windowLeft = left;
              spec.windowRight = right;
              spec.headDim = 1 + rng() % 1024;
              spec.valueDim = 1 + rng() % 1024;
              spec.scale = scales[rng() % 6];
              spec.softcap = caps[rng() % 4];
              spec.lse = rng() & 1;
              if (rng() & 1)
                spec.group = 1 + rng() % 16;
              if (rng() & 1) {
                spec.name = "k_" + std::to_string(rng() % 1000);
              }
              if (rng() % 4 == 0) {
                int64_t kv = 1 + rng() % 8, g = spec.group > 0 ? spec.group : 2;
                int64_t sizes[5] = {int64_t(1 + rng() % 4), kv * g, kv, -1,
                                    int64_t(1 + rng() % 4096)};
                for (int i = 0; i < 5; ++i)
                  spec.staticSizes[i] = sizes[i];
              }
              std::string text = printKernelSpec(spec);
              std::string error;
              std::optional<KernelSpec> parsed = parseKernelSpec(text, error);
              ASSERT_TRUE(parsed.has_value()) << text << ": " << error;
              expectEqualSpecs(*parsed, spec);
              EXPECT_EQ(printKernelSpec(*parsed), text);
              ++checked;
            }
  EXPECT_EQ(checked, 3 * 3 * 8 * 4 * 5 * 5);
}

TEST(KernelSpec, RoundTripsStaticSizes) {
  KernelSpec spec = parseOrDie("sizes=2:8:2:?:4096,gqa=4");
  EXPECT_EQ(spec.staticSizes[0], 2);
  EXPECT_EQ(spec.staticSizes[3], -1);
  EXPECT_EQ(spec.staticSizes[4], 4096);
  expectEqualSpecs(parseOrDie(printKernelSpec(spec)), spec);
}

TEST(KernelSpec, KindsOfKernel) {
  // A weights kernel has no V: it prints no dv, and its Dv is D.
  KernelSpec weights = parseOrDie("dtype=bf16,d=96,causal,lse,dropout,weights");
  EXPECT_TRUE(weights.weights && weights.lse && weights.dropout);
  EXPECT_EQ(weights.valueDim, 96);
  std::string printed = printKernelSpec(weights);
  EXPECT_EQ(printed.find("dv="), std::string::npos) << printed;
  expectEqualSpecs(parseOrDie(printed), weights);
  KernelSpec backward = parseOrDie("d=64,dv=32,backward,lse");
  expectEqualSpecs(parseOrDie(printKernelSpec(backward)), backward);
  KernelSpec sinks = parseOrDie("dtype=f16,d=64,causal,sinks,lse");
  EXPECT_TRUE(sinks.sinks);
  EXPECT_NE(printKernelSpec(sinks).find(",sinks"), std::string::npos);
  expectEqualSpecs(parseOrDie(printKernelSpec(sinks)), sinks);
  EXPECT_FALSE(parseOrDie("d=64,sinks=false").sinks);
  KernelSpec dbias = parseOrDie("d=64,mask=bias:b1,backward,dbias");
  EXPECT_TRUE(dbias.gradMask);
  expectEqualSpecs(parseOrDie(printKernelSpec(dbias)), dbias);
  KernelSpec dcaptures = parseOrDie("d=64,backward,dcaptures=0:2");
  EXPECT_EQ(dcaptures.gradCaptures, 0b101u);
  EXPECT_NE(printKernelSpec(dcaptures).find(",dcaptures=0:2"),
            std::string::npos);
  expectEqualSpecs(parseOrDie(printKernelSpec(dcaptures)), dcaptures);
}

TEST(KernelSpec, LinearAttention) {
  KernelSpec plain = parseOrDie("linear,dtype=bf16,d=64,dv=32");
  EXPECT_TRUE(plain.linear && !plain.causal && !plain.linearState);
  EXPECT_EQ(plain.eps, 1e-6f);
  EXPECT_EQ(plain.chunk, kDefaultLinearChunk);
  EXPECT_EQ(plain.featureMap, FeatureMap::EluPlusOne);
  EXPECT_EQ(printKernelSpec(plain), "dtype=bf16,d=64,dv=32,linear");
  KernelSpec all = parseOrDie(
      "linear,causal,d=16,eps=0.001,chunk=17,feature_map=relu,state,gqa=4");
  EXPECT_TRUE(all.causal && all.linearState);
  EXPECT_EQ(all.chunk, 17);
  EXPECT_EQ(all.featureMap, FeatureMap::Relu);
  EXPECT_EQ(all.eps, 0.001f);
  expectEqualSpecs(parseOrDie(printKernelSpec(all)), all);
  expectEqualSpecs(parseOrDie(printKernelSpec(plain)), plain);
  EXPECT_FALSE(all.unnormalized || plain.unnormalized);
  KernelSpec raw =
      parseOrDie("linear,causal,d=16,dv=8,feature_map=identity,unnormalized");
  EXPECT_EQ(raw.featureMap, FeatureMap::Identity);
  EXPECT_TRUE(raw.unnormalized);
  EXPECT_EQ(printKernelSpec(raw), "dtype=f32,d=16,dv=8,causal=top_left,linear,"
                                  "feature_map=identity,unnormalized");
  expectEqualSpecs(parseOrDie(printKernelSpec(raw)), raw);
  // 'backward': attn.linear_backward's kernel, not the attention backward.
  KernelSpec grads = parseOrDie(
      "linear,backward,dtype=bf16,d=64,dv=32,state,feature_map=relu");
  EXPECT_TRUE(grads.linear && grads.linearBackward && grads.linearState);
  EXPECT_FALSE(grads.backward);
  EXPECT_EQ(printKernelSpec(grads), "dtype=bf16,d=64,dv=32,linear,"
                                    "feature_map=relu,state,backward");
  expectEqualSpecs(parseOrDie(printKernelSpec(grads)), grads);
  KernelSpec causalGrads = parseOrDie("linear,backward,causal,d=16");
  EXPECT_TRUE(causalGrads.linearBackward && causalGrads.causal);
  expectEqualSpecs(parseOrDie(printKernelSpec(causalGrads)), causalGrads);
}

TEST(KernelSpec, AdditiveAttention) {
  KernelSpec plain = parseOrDie("additive,d=64");
  EXPECT_TRUE(plain.additive && !plain.additiveWeights);
  EXPECT_EQ(plain.queryDim, 64); // the feature dims default to d
  EXPECT_EQ(plain.attnDim, 64);
  EXPECT_EQ(plain.valueDim, 64);
  KernelSpec all = parseOrDie("additive,dtype=f16,dq=256,d=128,dv=96,"
                              "attn_dim=32,mask=bool:b1q1,with_weights,"
                              "sizes=4:?:?:1:?");
  EXPECT_EQ(all.queryDim, 256);
  EXPECT_EQ(all.attnDim, 32);
  EXPECT_TRUE(all.maskBroadcast[0] && all.maskBroadcast[2]);
  EXPECT_EQ(all.staticSizes[3], 1);
  expectEqualSpecs(parseOrDie(printKernelSpec(all)), all);
  expectEqualSpecs(parseOrDie(printKernelSpec(plain)), plain);
  // 'backward' makes attn.additive_backward's kernel, not the attention
  // backward's.
  KernelSpec grads = parseOrDie("additive,backward,dq=24,d=20,dv=40,"
                                "attn_dim=36,mask=bool:q1");
  EXPECT_TRUE(grads.additive && grads.additiveBackward && !grads.backward);
  EXPECT_EQ(printKernelSpec(grads), "dtype=f32,d=20,dv=40,mask=bool:q1,"
                                    "additive,dq=24,attn_dim=36,backward");
  expectEqualSpecs(parseOrDie(printKernelSpec(grads)), grads);
}

TEST(KernelSpec, MultiHeadAttentionLayer) {
  KernelSpec plain = parseOrDie("mha,embed=512,heads=8");
  EXPECT_TRUE(plain.mha && !plain.mhaBias);
  EXPECT_EQ(plain.keyEmbedDim, 512); // kdim and vdim default to embed
  EXPECT_EQ(plain.valueEmbedDim, 512);
  EXPECT_EQ(plain.headDim, 64); // a head is embed / heads wide
  EXPECT_EQ(plain.valueDim, 64);
  KernelSpec all = parseOrDie("mha,dtype=bf16,embed=96,heads=3,kdim=40,"
                              "vdim=24,bias,causal=bottom_right,"
                              "mask=bias:b1q1,scale=0.25,softcap=30,"
                              "window=16:0,sizes=4:?:?:?:128");
  EXPECT_EQ(all.headDim, 32);
  EXPECT_EQ(all.keyEmbedDim, 40);
  EXPECT_EQ(all.valueEmbedDim, 24);
  EXPECT_TRUE(all.mhaBias && all.causal);
  EXPECT_EQ(all.staticSizes[4], 128);
  expectEqualSpecs(parseOrDie(printKernelSpec(all)), all);
  expectEqualSpecs(parseOrDie(printKernelSpec(plain)), plain);
}

TEST(KernelSpec, RoundTripsFloatsExactly) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(1e-6f, 1e6f);
  for (int n = 0; n < 2000; ++n) {
    KernelSpec spec;
    spec.scale = dist(rng);
    spec.softcap = dist(rng);
    KernelSpec parsed = parseOrDie(printKernelSpec(spec));
    ASSERT_EQ(*parsed.scale, *spec.scale);
    ASSERT_EQ(*parsed.softcap, *spec.softcap);
  }
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(KernelSpecErrors, UnknownAndDuplicateKeys) {
  expectError("d=64,foo=1", {"unknown key", "'foo'"});
  expectError("d=64,d=32", {"duplicate key", "'d'"});
  expectError("causal,causal=top_left", {"duplicate key", "'causal'"});
  expectError("=3", {"missing key"});
  expectError("d=64,,dv=64", {"empty item"});
  expectError("d=64,", {"empty item"});
  expectError("d", {"'d'", "needs a value"});
  expectError("d=", {"empty value", "'d'"});
}

TEST(KernelSpecErrors, KindsOfKernel) {
  expectError("d=64,weights,backward", {"'weights' and 'backward'"});
  expectError("d=64,dv=32,weights", {"reads no V", "'dv'"});
  expectError("d=64,weights=2", {"weights"});
  // The sinks are in the forward's LSE, which these kernels read.
  expectError("d=64,backward,sinks", {"backward kernel takes no 'sinks'"});
  expectError("d=64,lse,weights,sinks", {"weights kernel takes no 'sinks'"});
  expectError("d=64,sinks=2", {"sinks"});
  // d(bias) is the backward's, of an additive bias.
  expectError("d=64,mask=bias,dbias", {"'dbias'", "'backward'"});
  expectError("d=64,mask=bool,backward,dbias", {"'dbias'", "'mask=bias'"});
  // The captures' gradients are the backward's, numbered 0..7 in order.
  expectError("d=64,dcaptures=0", {"'dcaptures'", "'backward'"});
  expectError("d=64,backward,dcaptures=1:0", {"dcaptures", "increasing"});
  expectError("d=64,backward,dcaptures=8", {"dcaptures", "0..7"});
  expectError("d=64,backward,dcaptures=a", {"dcaptures", "'a'"});
  expectError("d=64,backward,dcaptures", {"'dcaptures' needs a value"});
}

TEST(KernelSpecErrors, BadNumbers) {
  expectError("d=abc", {"'d'", "'abc'", "integer"});
  expectError("d=64x", {"'d'", "'64x'"});
  expectError("d=+64", {"'d'", "'+64'"});
  expectError("d=6 4", {"'d'", "'6 4'"});
  expectError("dv=99999999999999999999999", {"'dv'", "integer"});
  expectError("gqa=1.5", {"'gqa'", "'1.5'"});
  expectError("scale=0.1.2", {"'scale'", "'0.1.2'"});
  expectError("scale=1e39", {"'scale'", "'1e39'", "range"});
  expectError("softcap=abc", {"'softcap'", "'abc'"});
}

TEST(KernelSpecErrors, OutOfRange) {
  expectError("d=0", {"'d'", "'0'", "[1, 1024]"});
  expectError("d=1025", {"'d'", "'1025'", "[1, 1024]"});
  expectError("dv=-1", {"'dv'", "'-1'", "[1, 1024]"});
  expectError("gqa=0", {"'gqa'", "'0'", ">= 1"});
  expectError("gqa=-4", {"'gqa'", "'-4'"});
  expectError("window=-1:0", {"'window'", "'-1'", "non-negative left"});
  expectError("window=0:-3", {"'window'", "'-3'", "non-negative right"});
  expectError("window=3", {"'window'", "'3'", "L:R"});
  expectError("window=3:4:5", {"'window'"});
  expectError("window=:4", {"'window'"});
  expectError("scale=inf", {"'scale'", "'inf'", "finite"});
  expectError("scale=nan", {"'scale'", "'nan'", "finite"});
  expectError("softcap=0", {"'softcap'", "'0'", "> 0"});
  expectError("softcap=-30", {"'softcap'", "'-30'", "> 0"});
  expectError("softcap=inf", {"'softcap'", "'inf'"});
  expectError("softcap=nan", {"'softcap'", "'nan'"});
  expectError("sizes=1:2:3", {"'sizes'", "five sizes"});
  expectError("sizes=1:2:1:0:4", {"'sizes'", "'0'"});
  expectError("sizes=1:6:4:?:?", {"'sizes'", "not a multiple"});
  expectError("sizes=1:8:2:?:?,gqa=2", {"conflicting gqa=2"});
  // Found by attn-fuzz-spec: G * Hkv overflowed (undefined behaviour).
  expectError("sizes=?:8:8:?:?,gqa=4668547756877568554",
              {"conflicting gqa=4668547756877568554"});
}

TEST(KernelSpecErrors, BadEnumerations) {
  expectError("dtype=f64", {"'dtype'", "'f64'", "f32, f16 or bf16"});
  expectError("causal=yes", {"'causal'", "'yes'", "top_left or bottom_right"});
  expectError("align=middle", {"'align'", "'middle'"});
  expectError("causal=top_left,align=bottom_right", {"conflicting alignments"});
  expectError("lse=maybe", {"'lse'", "'maybe'"});
}

TEST(KernelSpecErrors, Names) {
  expectError("name=9lives", {"'name'", "'9lives'", "C identifier"});
  expectError("name=my-kernel", {"'name'", "'my-kernel'"});
  expectError("name=" + std::string(65, 'a'), {"'name'", "at most 64"});
  EXPECT_EQ(parseOrDie("name=" + std::string(64, 'a')).name,
            std::string(64, 'a'));
  EXPECT_EQ(parseOrDie("name=x_9").name, "x_9");
  expectError("name=_x9", {"'name'", "reserved"});
  expectError("name=for", {"'name'", "keyword"});
  expectError("name=attn_kernel", {"'attn_kernel_desc'", "runtime"});
  // The default name makes a header that compiles.
  EXPECT_EQ(kernelNameProblem(KernelSpec().name), "");
}

/// The identifiers that `header` declares: every attn_* and ATTN_* word.
std::set<std::string> runtimeIdentifiers(const std::string &header) {
  std::ifstream in(std::string(ATTN_SOURCE_DIR) + "/runtime/include/attn/" +
                   header);
  EXPECT_TRUE(in) << header;
  std::stringstream text;
  text << in.rdbuf();
  std::set<std::string> names;
  std::regex word("\\b(attn|ATTN)_[A-Za-z0-9_]+");
  std::string all = text.str();
  for (std::sregex_iterator it(all.begin(), all.end(), word), end; it != end;
       ++it)
    names.insert(it->str());
  return names;
}

TEST(KernelSpecErrors, LinearAttention) {
  // Its options need it, and what softmax attention has it refuses.
  expectError("d=64,chunk=32", {"'chunk'", "needs 'linear'"});
  expectError("d=64,state", {"'state'", "needs 'linear'"});
  for (const char *key : {"mask=bool", "lse", "scale=0.5", "softcap=30",
                          "window=8:0", "dropout", "weights", "sinks"})
    expectError(std::string("linear,d=64,") + key,
                {"linear attention's kernel takes no"});
  expectError("linear,d=64,causal=bottom_right",
              {"only alignment is top_left"});
  // The gradients' kernel makes its own chunks.
  expectError("linear,backward,causal,chunk=32,d=64",
              {"'chunk'", "takes none"});
  expectError("linear,d=64,causal,sizes=1:1:1:8:9", {"Sq = Sk", "Sk = 9"});
  expectError("linear,d=64,chunk=0", {"'chunk'", "[1, 256]"});
  expectError("linear,d=64,chunk=257", {"'chunk'", "[1, 256]"});
  expectError("linear,d=64,eps=-1", {"'eps'", ">= 0"});
  expectError("linear,d=64,eps=inf", {"'eps'"});
  expectError("linear,d=64,feature_map=softmax",
              {"'feature_map'", "elu_plus_one, relu or identity"});
  expectError("d=64,unnormalized", {"'unnormalized'", "needs 'linear'"});
  expectError("linear,d=64,unnormalized,eps=0.1",
              {"'eps' is the denominator's", "'unnormalized'"});
}

TEST(KernelSpecErrors, MultiHeadAttentionLayer) {
  expectError("d=64,embed=64", {"'embed'", "needs 'mha'"});
  expectError("d=64,bias", {"'bias'", "needs 'mha'"});
  expectError("mha,heads=4", {"needs 'embed=E'"});
  expectError("mha,embed=100,heads=8", {"not a multiple of heads=8"});
  expectError("mha,embed=4096,heads=2", {"at most 1024 wide"});
  expectError("mha,embed=64,additive", {"two kinds of kernel"});
  for (const char *key : {"d=16", "dv=16", "lse", "backward", "dropout",
                          "weights", "sinks", "gqa=2"})
    expectError(std::string("mha,embed=64,heads=4,") + key,
                {"multi-head attention layer's kernel takes no"});
  expectError("mha,embed=64,sizes=1:4:4:8:8", {"its sizes are B:?:?:Sq:Sk"});
  expectError("mha,embed=0", {"'embed'"});
  expectError("mha,embed=64,heads=0", {"'heads'"});
  expectError("mha,embed=64,kdim=99999", {"'kdim'"});
}

TEST(KernelSpecErrors, AdditiveAttention) {
  expectError("d=64,attn_dim=32", {"'attn_dim'", "needs 'additive'"});
  expectError("d=64,with_weights", {"'with_weights'", "needs 'additive'"});
  expectError("additive,linear,d=64", {"kind"});
  for (const char *key : {"causal", "lse", "scale=0.5", "softcap=30",
                          "window=8:0", "dropout", "weights", "sinks", "gqa=2"})
    expectError(std::string("additive,d=64,") + key,
                {"additive attention's kernel takes no"});
  expectError("additive,d=64,mask=bias", {"keep-mask", "'mask=bool'"});
  expectError("additive,d=64,mask=bool:h1", {"no head dim"});
  expectError("additive,d=64,sizes=1:2:2:8:8", {"no heads"});
  expectError("additive,d=64,attn_dim=0", {"'attn_dim'"});
  expectError("additive,d=64,dq=2000", {"'dq'"});
  expectError("additive,d=64,backward,with_weights",
              {"backward kernel takes no 'with_weights'"});
}

TEST(KernelSpecErrors, NoNameClashesWithTheRuntimesIdentifiers) {
  // A kernel named like any identifier of the runtime's headers (which a
  // caller includes beside the kernel's), or deriving one, is refused:
  // this fails when a header gains an identifier the list does not have.
  for (const char *header : {"runtime.h", "kernel_abi.h"}) {
    std::set<std::string> names = runtimeIdentifiers(header);
    EXPECT_GT(names.size(), 10u) << header;
    for (const std::string &name : names)
      EXPECT_NE(kernelNameProblem(name), "") << name << " in " << header;
  }
}

TEST(KernelSpecErrors, Masks) {
  expectError("mask=always", {"'mask'", "'always'", "none, bool or bias"});
  expectError("mask=none:b1", {"'mask'", "'none:b1'", "mask=none"});
  expectError("mask=bool:x1", {"'mask'", "'x1'"});
  expectError("mask=bool:b1b1", {"'mask'", "'b1' twice"});
  expectError("mask=bool:b1:b1", {"'mask'", "'b1' twice"});
  expectError("mask=bool:", {"'mask'", "broadcast dims"});
  expectError("mask=bool:b1:", {"'mask'", "broadcast dims"});
  expectError("mask=bool:b", {"'mask'", "'b'"});
}

TEST(KernelSpecErrors, MessagesEscapeControlBytes) {
  std::string error;
  std::string text = "dtype=\x01\xff";
  EXPECT_FALSE(parseKernelSpec(text, error));
  EXPECT_NE(error.find("\\x01\\xff"), std::string::npos) << error;
  // Long values are cut short.
  EXPECT_FALSE(parseKernelSpec("dtype=" + std::string(10000, 'z'), error));
  EXPECT_LT(error.size(), 200u);
}

TEST(KernelSpecErrors, ArbitraryBytesNeverCrash) {
  // A cheap in-test fuzzer: random byte strings and mutations of a valid
  // spec. The real fuzzer runs longer; this keeps the property under test.
  std::mt19937 rng(99);
  const std::string seed =
      "dtype=bf16,d=64,dv=64,causal=bottom_right,window=256:0,mask=bool:b1h1,"
      "lse,gqa=4,scale=0.125,softcap=30,name=my_kernel,sizes=1:4:1:?:?";
  const char alphabet[] = "=,:;?0123456789-+.eEinfabd_ \x00\xff";
  for (int n = 0; n < 20000; ++n) {
    std::string text;
    if (n % 2) {
      size_t length = rng() % 64;
      for (size_t i = 0; i < length; ++i)
        text += static_cast<char>(rng() % 256);
    } else {
      text = seed;
      for (int m = 0, e = 1 + rng() % 4; m < e; ++m) {
        size_t pos = rng() % (text.size() + 1);
        switch (rng() % 3) {
        case 0:
          text.insert(pos, 1, alphabet[rng() % (sizeof(alphabet) - 1)]);
          break;
        case 1:
          if (pos < text.size())
            text.erase(pos, 1);
          break;
        default:
          if (pos < text.size())
            text[pos] = alphabet[rng() % (sizeof(alphabet) - 1)];
        }
      }
    }
    std::string error;
    std::optional<KernelSpec> spec = parseKernelSpec(text, error);
    if (spec) {
      // Whatever parses must print to a string that parses to the same spec.
      std::optional<KernelSpec> again =
          parseKernelSpec(printKernelSpec(*spec), error);
      ASSERT_TRUE(again.has_value()) << error;
      expectEqualSpecs(*again, *spec);
    } else {
      EXPECT_FALSE(error.empty());
    }
  }
}

} // namespace
