//===- KernelSpec.cpp - Parsing and printing kernel spec strings ----------===//
//
// The spec string is what a user types on the command line of `attn-compile`
// and `attn-run`, so the parser is strict: every key at most once, every
// number fully consumed and in range, and every failure names the key and the
// offending value. It is also fed arbitrary bytes by the fuzzer, so it only
// ever scans the input linearly and quotes bad values in escaped, truncated
// form.
//
// Besides the keys documented in KernelSpec.h the parser accepts
// `sizes=B:Hq:Hkv:Sq:Sk` (each a number or `?` for dynamic), so that a spec
// derived from an op with static sizes prints to a string that parses back
// to an equal spec.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/KernelSpec.h"
#include "lib/Support/Limits.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>
#include <system_error>
#include <vector>

using namespace attn;

float KernelSpec::effectiveScale() const {
  if (scale)
    return *scale;
  // Computed in double and rounded once so that every tool agrees bit for bit.
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(headDim)));
}

const char *attn::elementTypeName(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return "f32";
  case ElementType::F16:
    return "f16";
  case ElementType::BF16:
    return "bf16";
  }
  return "unknown";
}

//===----------------------------------------------------------------------===//
// Lexical helpers
//===----------------------------------------------------------------------===//

namespace {

constexpr int64_t kMinHeadDim = 1;
constexpr size_t kMaxNameLength = 64;
constexpr size_t kMaxQuotedLength = 40;

/// Quotes user input for a diagnostic: non-printable bytes are escaped so a
/// message never carries control characters, and long values are cut short.
std::string quote(std::string_view text) {
  static const char hex[] = "0123456789abcdef";
  std::string out = "'";
  size_t shown = 0;
  for (char c : text) {
    if (shown == kMaxQuotedLength) {
      out += "...";
      break;
    }
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && u != '\'' && u != '\\') {
      out += c;
    } else {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    }
    ++shown;
  }
  out += "'";
  return out;
}

bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && isSpace(text.front()))
    text.remove_prefix(1);
  while (!text.empty() && isSpace(text.back()))
    text.remove_suffix(1);
  return text;
}

/// Parses a whole decimal integer (optional leading '-'); false on empty
/// input, trailing characters or overflow.
bool parseInt(std::string_view text, int64_t &value) {
  if (text.empty())
    return false;
  const char *begin = text.data();
  const char *end = begin + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, value, 10);
  return ec == std::errc() && ptr == end;
}

/// Parses a whole float; false on trailing characters or a value outside the
/// float range. `inf`/`nan` spellings parse, the callers reject them.
bool parseFloat(std::string_view text, float &value) {
  if (text.empty())
    return false;
  // from_chars does not take a leading '+'; accept it as strtof would.
  if (text.front() == '+') {
    text.remove_prefix(1);
    if (text.empty() || text.front() == '-' || text.front() == '+')
      return false;
  }
  const char *begin = text.data();
  const char *end = begin + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  return ec == std::errc() && ptr == end;
}

bool isIdentifier(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength)
    return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    bool digit = c >= '0' && c <= '9';
    if (!letter && !(digit && i > 0))
      return false;
  }
  return true;
}

// Identifiers a kernel's name, or one the C header derives from it, must
// not be: the header would not compile, or would clash with the code that
// includes it.
const char *const kCKeywords[] = {
    // C23
    "alignas", "alignof", "auto", "bool", "break", "case", "char", "const",
    "constexpr", "continue", "default", "do", "double", "else", "enum",
    "extern", "false", "float", "for", "goto", "if", "inline", "int", "long",
    "nullptr", "register", "restrict", "return", "short", "signed", "sizeof",
    "static", "static_assert", "struct", "switch", "thread_local", "true",
    "typedef", "typeof", "typeof_unqual", "union", "unsigned", "void",
    "volatile", "while",
    // C++23 beyond C's
    "and", "and_eq", "asm", "bitand", "bitor", "catch", "char8_t", "char16_t",
    "char32_t", "class", "co_await", "co_return", "co_yield", "compl",
    "concept", "const_cast", "consteval", "constinit", "decltype", "delete",
    "dynamic_cast", "explicit", "export", "friend", "mutable", "namespace",
    "new", "noexcept", "not", "not_eq", "operator", "or", "or_eq", "private",
    "protected", "public", "reinterpret_cast", "requires", "static_cast",
    "template", "this", "throw", "try", "typeid", "typename", "using",
    "virtual", "wchar_t", "xor", "xor_eq"};
// The program's entry point, what <stdint.h> and <stddef.h> declare (the
// header includes the first), and the C library functions that compilers
// treat as builtins.
const char *const kCLibraryNames[] = {
    "main",      "int8_t",   "int16_t",   "int32_t",  "int64_t",   "uint8_t",
    "uint16_t",  "uint32_t", "uint64_t",  "intptr_t", "uintptr_t", "intmax_t",
    "uintmax_t", "size_t",   "ptrdiff_t", "NULL",     "abort",     "abs",
    "calloc",    "exit",     "free",      "malloc",   "realloc",   "memchr",
    "memcmp",    "memcpy",   "memmove",   "memset",   "strcat",    "strchr",
    "strcmp",    "strcpy",   "strlen",    "strncat",  "strncmp",   "strncpy",
    "strrchr",   "strstr",   "printf",    "fprintf",  "sprintf",   "snprintf",
    "puts",      "putchar",  "fabs",      "sqrt",     "exp",       "exp2",
    "log",       "log2",     "pow",       "sin",      "cos",       "tan",
    "tanh",      "floor",    "ceil",      "round",    "fmin",      "fmax",
    "fma",       "errno",    "assert",    "offsetof"};
// The runtime's identifiers (attn/runtime.h and attn/kernel_abi.h; a unit
// test checks that this list covers both headers).
const char *const kRuntimeNames[] = {"attn_additive_args",
                                     "attn_additive_backward_args",
                                     "attn_additive_backward_run_fn",
                                     "attn_additive_backward_work_items_fn",
                                     "attn_additive_run_fn",
                                     "attn_additive_work_items_fn",
                                     "attn_alignment",
                                     "attn_backward_args",
                                     "attn_backward_run_fn",
                                     "attn_backward_work_items_fn",
                                     "attn_capture",
                                     "attn_capture_desc",
                                     "attn_copy_direction",
                                     "attn_cuda_copy",
                                     "attn_cuda_device",
                                     "attn_cuda_free",
                                     "attn_cuda_malloc",
                                     "attn_device",
                                     "attn_dtype",
                                     "attn_feature_map",
                                     "attn_fill_block_table",
                                     "attn_gpu_additive_kernel_params",
                                     "attn_gpu_attention_tensor_params",
                                     "attn_gpu_backward_kernel_params",
                                     "attn_gpu_dropout_params",
                                     "attn_gpu_image_format",
                                     "attn_gpu_kernel",
                                     "attn_gpu_kernel_params",
                                     "attn_gpu_linear_kernel_params",
                                     "attn_gpu_tensor_params",
                                     "attn_kernel_args",
                                     "attn_kernel_check_cpu",
                                     "attn_kernel_desc",
                                     "attn_kernel_device",
                                     "attn_kernel_dropout_bits",
                                     "attn_kernel_grad_captures",
                                     "attn_kernel_has_block_table",
                                     "attn_kernel_has_dropout",
                                     "attn_kernel_has_grad_mask",
                                     "attn_kernel_has_key_split",
                                     "attn_kernel_has_sinks",
                                     "attn_kernel_kind",
                                     "attn_kernel_kind_of",
                                     "attn_kernel_num_captures",
                                     "attn_last_error",
                                     "attn_library",
                                     "attn_library_v1",
                                     "attn_linear_args",
                                     "attn_linear_backward_args",
                                     "attn_linear_backward_run_fn",
                                     "attn_linear_backward_work_items_fn",
                                     "attn_linear_run_fn",
                                     "attn_linear_work_items_fn",
                                     "attn_mask_kind",
                                     "attn_mha_args",
                                     "attn_mha_run_fn",
                                     "attn_mha_work_items_fn",
                                     "attn_module",
                                     "attn_module_find",
                                     "attn_module_from_library",
                                     "attn_module_kernel",
                                     "attn_module_load",
                                     "attn_module_num_kernels",
                                     "attn_module_unload",
                                     "attn_parallel_for_fn",
                                     "attn_prepare",
                                     "attn_prepare_additive",
                                     "attn_prepare_additive_backward",
                                     "attn_prepare_backward",
                                     "attn_prepare_backward_with",
                                     "attn_prepare_linear",
                                     "attn_prepare_linear_backward",
                                     "attn_prepare_mha",
                                     "attn_prepare_weights",
                                     "attn_prepare_with",
                                     "attn_run",
                                     "attn_run_additive",
                                     "attn_run_additive_backward",
                                     "attn_run_backward",
                                     "attn_run_backward_with",
                                     "attn_run_dropout",
                                     "attn_run_fn",
                                     "attn_run_linear",
                                     "attn_run_linear_backward",
                                     "attn_run_mha",
                                     "attn_run_options",
                                     "attn_run_split",
                                     "attn_run_weights",
                                     "attn_run_weights_with",
                                     "attn_run_with",
                                     "attn_split_run_fn",
                                     "attn_split_work_items_fn",
                                     "attn_status",
                                     "attn_status_name",
                                     "attn_task_fn",
                                     "attn_team_fn",
                                     "attn_team_run_fn",
                                     "attn_tensor",
                                     "attn_tensor_contiguous",
                                     "attn_thread_pool",
                                     "attn_thread_pool_create",
                                     "attn_thread_pool_create_on_team",
                                     "attn_thread_pool_destroy",
                                     "attn_thread_pool_parallel_for",
                                     "attn_thread_pool_size",
                                     "attn_work_items_fn"};
// What the header declares for a kernel `n`: n itself and these suffixes.
const char *const kDerivedSuffixes[] = {"_desc",
                                        "_work_items",
                                        "_run",
                                        "_task",
                                        "_partial_work_items",
                                        "_partial_run",
                                        "_merge_work_items",
                                        "_merge_run",
                                        "_block_table_work_items",
                                        "_block_table_run",
                                        "_launch_shape",
                                        "_ENTRY",
                                        "_BLOCK_THREADS",
                                        "_BLOCK_ROWS",
                                        "_SHARED_BYTES"};

template <size_t N>
bool listed(const char *const (&list)[N], std::string_view name) {
  return std::any_of(std::begin(list), std::end(list),
                     [&](const char *entry) { return name == entry; });
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(separator, start);
    if (pos == std::string_view::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, pos - start));
    start = pos + 1;
  }
}

std::optional<Alignment> parseAlignment(std::string_view text) {
  if (text == "top_left")
    return Alignment::TopLeft;
  if (text == "bottom_right")
    return Alignment::BottomRight;
  return std::nullopt;
}

const char *alignmentName(Alignment alignment) {
  return alignment == Alignment::TopLeft ? "top_left" : "bottom_right";
}

/// Formats a float with the shortest digits that read back to the same value.
std::string formatFloat(float value) {
  char buffer[64];
  auto [ptr, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  if (ec != std::errc())
    return "nan";
  return std::string(buffer, ptr);
}

//===----------------------------------------------------------------------===//
// The parser
//===----------------------------------------------------------------------===//

class SpecParser {
public:
  explicit SpecParser(std::string &error) : error(error) {}

  std::optional<KernelSpec> parse(std::string_view text);

private:
  bool fail(const std::string &message) {
    error = message;
    return false;
  }
  bool badValue(std::string_view key, std::string_view value,
                const std::string &expected) {
    return fail("invalid value " + quote(value) + " for key '" +
                std::string(key) + "': expected " + expected);
  }

  bool parseItem(std::string_view item);
  bool parseHeadDim(std::string_view key, std::string_view value, int64_t &out);
  bool parseEmbedDim(std::string_view key, std::string_view value,
                     int64_t &out);
  bool parseWindow(std::string_view value);
  bool parseMask(std::string_view value);
  bool parseSizes(std::string_view value);
  bool parseGradCaptures(std::string_view value);
  bool parseFlag(std::string_view key, std::string_view value, bool hasValue,
                 bool &out);
  bool checkConsistency();
  /// The keys of linear attention's kernel and what it refuses.
  bool checkLinear();
  /// The same for additive attention's.
  bool checkAdditive();
  /// The same for a multi-head attention layer's.
  bool checkMha();

  std::string &error;
  KernelSpec spec;
  std::vector<std::string> seenKeys;
  std::optional<Alignment> causalAlignment, explicitAlignment;
};

std::optional<KernelSpec> SpecParser::parse(std::string_view text) {
  error.clear();
  text = trim(text);
  // The empty string is the default spec; an empty item elsewhere is a typo.
  if (!text.empty()) {
    for (std::string_view item : split(text, ',')) {
      if (!parseItem(trim(item)))
        return std::nullopt;
    }
  }
  if (!checkConsistency())
    return std::nullopt;
  return spec;
}

bool SpecParser::parseItem(std::string_view item) {
  if (item.empty())
    return fail("empty item in kernel spec (stray ',')");
  size_t eq = item.find('=');
  bool hasValue = eq != std::string_view::npos;
  std::string_view key = trim(item.substr(0, eq));
  std::string_view value = hasValue ? trim(item.substr(eq + 1)) : "";
  if (key.empty())
    return fail("missing key before '=' in item " + quote(item));

  static const char *const knownKeys[] = {
      "name",     "dtype",        "d",     "dv",           "causal",
      "align",    "window",       "mask",  "lse",          "gqa",
      "scale",    "softcap",      "sizes", "backward",     "dropout",
      "weights",  "sinks",        "dbias", "linear",       "eps",
      "chunk",    "feature_map",  "state", "additive",     "dq",
      "attn_dim", "with_weights", "mha",   "embed",        "heads",
      "kdim",     "vdim",         "bias",  "unnormalized", "dcaptures"};
  bool known = false;
  for (const char *k : knownKeys)
    known |= key == k;
  if (!known)
    return fail("unknown key " + quote(key) +
                " in kernel spec (known: name, dtype, d, dv, causal, align, "
                "window, mask, lse, gqa, scale, softcap, sizes, backward, "
                "dropout, weights, sinks, dbias, linear, eps, chunk, "
                "feature_map, state, additive, dq, attn_dim, with_weights, "
                "mha, embed, heads, kdim, vdim, bias, unnormalized, "
                "dcaptures)");
  for (const std::string &seen : seenKeys)
    if (key == seen)
      return fail("duplicate key '" + std::string(key) + "' in kernel spec");
  seenKeys.emplace_back(key);

  // Only `causal`, `lse`, `backward`, `dropout`, `weights`, `sinks`,
  // `dbias`, `linear`, `state`, `additive`, `with_weights`, `mha`, `bias`
  // and `unnormalized` may stand alone.
  if (!hasValue && key != "causal" && key != "lse" && key != "backward" &&
      key != "dropout" && key != "weights" && key != "sinks" &&
      key != "dbias" && key != "linear" && key != "state" &&
      key != "additive" && key != "with_weights" && key != "mha" &&
      key != "bias" && key != "unnormalized")
    return fail("key '" + std::string(key) + "' needs a value ('" +
                std::string(key) + "=...')");
  if (hasValue && value.empty())
    return fail("empty value for key '" + std::string(key) + "'");

  if (key == "name") {
    std::string problem = kernelNameProblem(value);
    if (!problem.empty())
      return fail("invalid value " + quote(value) +
                  " for key 'name': " + problem);
    spec.name = std::string(value);
    return true;
  }
  if (key == "dtype") {
    if (value == "f32")
      spec.elementType = ElementType::F32;
    else if (value == "f16")
      spec.elementType = ElementType::F16;
    else if (value == "bf16")
      spec.elementType = ElementType::BF16;
    else
      return badValue(key, value, "f32, f16 or bf16");
    return true;
  }
  if (key == "d")
    return parseHeadDim(key, value, spec.headDim);
  if (key == "dv")
    return parseHeadDim(key, value, spec.valueDim);
  if (key == "causal") {
    if (!hasValue) {
      causalAlignment = Alignment::TopLeft;
    } else {
      causalAlignment = parseAlignment(value);
      if (!causalAlignment)
        return badValue(key, value, "top_left or bottom_right");
    }
    spec.causal = true;
    return true;
  }
  if (key == "align") {
    explicitAlignment = parseAlignment(value);
    if (!explicitAlignment)
      return badValue(key, value, "top_left or bottom_right");
    return true;
  }
  if (key == "window")
    return parseWindow(value);
  if (key == "mask")
    return parseMask(value);
  if (key == "lse")
    return parseFlag(key, value, hasValue, spec.lse);
  if (key == "backward")
    return parseFlag(key, value, hasValue, spec.backward);
  if (key == "dropout")
    return parseFlag(key, value, hasValue, spec.dropout);
  if (key == "weights")
    return parseFlag(key, value, hasValue, spec.weights);
  if (key == "sinks")
    return parseFlag(key, value, hasValue, spec.sinks);
  if (key == "dbias")
    return parseFlag(key, value, hasValue, spec.gradMask);
  if (key == "dcaptures")
    return parseGradCaptures(value);
  if (key == "linear")
    return parseFlag(key, value, hasValue, spec.linear);
  if (key == "additive")
    return parseFlag(key, value, hasValue, spec.additive);
  if (key == "with_weights")
    return parseFlag(key, value, hasValue, spec.additiveWeights);
  if (key == "mha")
    return parseFlag(key, value, hasValue, spec.mha);
  if (key == "bias")
    return parseFlag(key, value, hasValue, spec.mhaBias);
  if (key == "embed")
    return parseEmbedDim(key, value, spec.embedDim);
  if (key == "kdim")
    return parseEmbedDim(key, value, spec.keyEmbedDim);
  if (key == "vdim")
    return parseEmbedDim(key, value, spec.valueEmbedDim);
  if (key == "heads") {
    int64_t heads;
    if (!parseInt(value, heads))
      return badValue(key, value, "an integer");
    if (heads < 1 || heads > kMaxEmbedDim)
      return badValue(key, value, "a head count >= 1 that divides embed");
    spec.mhaHeads = heads;
    return true;
  }
  if (key == "dq")
    return parseHeadDim(key, value, spec.queryDim);
  if (key == "attn_dim")
    return parseHeadDim(key, value, spec.attnDim);
  if (key == "state")
    return parseFlag(key, value, hasValue, spec.linearState);
  if (key == "unnormalized")
    return parseFlag(key, value, hasValue, spec.unnormalized);
  if (key == "eps") {
    float eps;
    if (!parseFloat(value, eps))
      return badValue(key, value, "a number within the f32 range");
    if (!std::isfinite(eps) || eps < 0.0f)
      return badValue(key, value, "a finite number >= 0");
    spec.eps = eps;
    return true;
  }
  if (key == "chunk") {
    int64_t chunk;
    if (!parseInt(value, chunk))
      return badValue(key, value, "an integer");
    if (chunk < 1 || chunk > kMaxLinearChunk)
      return badValue(key, value,
                      "a chunk in [1, " + std::to_string(kMaxLinearChunk) +
                          "]");
    spec.chunk = chunk;
    return true;
  }
  if (key == "feature_map") {
    if (value == "elu_plus_one")
      spec.featureMap = FeatureMap::EluPlusOne;
    else if (value == "relu")
      spec.featureMap = FeatureMap::Relu;
    else if (value == "identity")
      spec.featureMap = FeatureMap::Identity;
    else
      return badValue(key, value, "elu_plus_one, relu or identity");
    return true;
  }
  if (key == "gqa") {
    int64_t group;
    if (!parseInt(value, group))
      return badValue(key, value, "an integer");
    if (group < 1)
      return badValue(key, value, "a group size >= 1");
    spec.group = group;
    return true;
  }
  if (key == "scale") {
    float scale;
    if (!parseFloat(value, scale))
      return badValue(key, value, "a number within the f32 range");
    if (!std::isfinite(scale))
      return badValue(key, value, "a finite number");
    spec.scale = scale;
    return true;
  }
  if (key == "softcap") {
    float softcap;
    if (!parseFloat(value, softcap))
      return badValue(key, value, "a number within the f32 range");
    if (!std::isfinite(softcap) || !(softcap > 0.0f))
      return badValue(key, value, "a finite number > 0");
    spec.softcap = softcap;
    return true;
  }
  return parseSizes(value); // key == "sizes"
}

bool SpecParser::parseHeadDim(std::string_view key, std::string_view value,
                              int64_t &out) {
  int64_t dim;
  if (!parseInt(value, dim))
    return badValue(key, value, "an integer");
  if (dim < kMinHeadDim || dim > kMaxHeadDim)
    return badValue(key, value, "a head dim in [1, 1024]");
  out = dim;
  return true;
}

bool SpecParser::parseEmbedDim(std::string_view key, std::string_view value,
                               int64_t &out) {
  int64_t dim;
  if (!parseInt(value, dim))
    return badValue(key, value, "an integer");
  if (dim < 1 || dim > kMaxEmbedDim)
    return badValue(key, value,
                    "a width in [1, " + std::to_string(kMaxEmbedDim) + "]");
  out = dim;
  return true;
}

bool SpecParser::parseWindow(std::string_view value) {
  size_t colon = value.find(':');
  if (colon == std::string_view::npos)
    return badValue("window", value, "L:R (each a count >= 0 or 'inf')");
  std::string_view sides[2] = {value.substr(0, colon), value.substr(colon + 1)};
  std::optional<int64_t> *targets[2] = {&spec.windowLeft, &spec.windowRight};
  for (int i = 0; i < 2; ++i) {
    if (sides[i] == "inf") {
      targets[i]->reset();
      continue;
    }
    int64_t extent;
    if (!parseInt(sides[i], extent))
      return badValue("window", value,
                      "L:R (each a count >= 0 or 'inf'), got side " +
                          quote(sides[i]));
    if (extent < 0)
      return badValue("window", value,
                      std::string("a non-negative ") +
                          (i == 0 ? "left" : "right") + " side, got " +
                          quote(sides[i]));
    *targets[i] = extent;
  }
  return true;
}

bool SpecParser::parseMask(std::string_view value) {
  size_t colon = value.find(':');
  std::string_view kind = value.substr(0, colon);
  if (kind == "none")
    spec.mask = MaskKind::None;
  else if (kind == "bool")
    spec.mask = MaskKind::Bool;
  else if (kind == "bias")
    spec.mask = MaskKind::Bias;
  else
    return badValue("mask", value, "none, bool or bias");
  if (colon == std::string_view::npos)
    return true;

  // The broadcast dims: b1, h1, q1 written together ("b1h1") or separated
  // by ':' ("b1:h1").
  std::string_view dims = value.substr(colon + 1);
  if (dims.empty())
    return badValue("mask", value, "broadcast dims (b1, h1, q1) after ':'");
  if (spec.mask == MaskKind::None)
    return badValue("mask", value,
                    "no broadcast dims with mask=none (a broadcast needs a "
                    "bool or bias mask)");
  static const char *const dimNames[3] = {"b1", "h1", "q1"};
  for (std::string_view group : split(dims, ':')) {
    if (group.empty())
      return badValue("mask", value, "broadcast dims (b1, h1, q1) between ':'");
    for (size_t pos = 0; pos < group.size(); pos += 2) {
      std::string_view token = group.substr(pos, 2);
      int index = -1;
      for (int i = 0; i < 3; ++i)
        if (token == dimNames[i])
          index = i;
      if (index < 0)
        return badValue("mask", value,
                        "broadcast dims among b1, h1, q1, got " +
                            quote(group.substr(pos)));
      if (spec.maskBroadcast[index])
        return badValue("mask", value,
                        std::string("each broadcast dim once, got '") +
                            dimNames[index] + "' twice");
      spec.maskBroadcast[index] = true;
    }
  }
  return true;
}

bool SpecParser::parseSizes(std::string_view value) {
  std::vector<std::string_view> parts = split(value, ':');
  if (parts.size() != 5)
    return badValue("sizes", value,
                    "five sizes B:Hq:Hkv:Sq:Sk (each >= 1 or '?')");
  for (size_t i = 0; i < 5; ++i) {
    if (parts[i] == "?") {
      spec.staticSizes[i] = -1;
      continue;
    }
    int64_t size;
    if (!parseInt(parts[i], size) || size < 1)
      return badValue("sizes", value,
                      "five sizes B:Hq:Hkv:Sq:Sk (each >= 1 or '?'), got " +
                          quote(parts[i]));
    spec.staticSizes[i] = size;
  }
  return true;
}

bool SpecParser::parseGradCaptures(std::string_view value) {
  const std::string expected =
      "capture numbers in increasing order, separated by ':' (each 0.." +
      std::to_string(kMaxCaptures - 1) + ")";
  int64_t previous = -1;
  for (std::string_view part : split(value, ':')) {
    int64_t number;
    if (!parseInt(part, number) || number < 0 ||
        number >= static_cast<int64_t>(kMaxCaptures) || number <= previous)
      return badValue("dcaptures", value, expected + ", got " + quote(part));
    spec.gradCaptures |= 1u << number;
    previous = number;
  }
  return true;
}

bool SpecParser::parseFlag(std::string_view key, std::string_view value,
                           bool hasValue, bool &out) {
  if (!hasValue || value == "true" || value == "1") {
    out = true;
    return true;
  }
  if (value == "false" || value == "0") {
    out = false;
    return true;
  }
  return badValue(key, value, "true or false (or the bare key)");
}

bool SpecParser::checkLinear() {
  auto seen = [&](const char *key) {
    return std::find(seenKeys.begin(), seenKeys.end(), key) != seenKeys.end();
  };
  if (!spec.linear) {
    for (const char *key :
         {"eps", "chunk", "feature_map", "state", "unnormalized"})
      if (seen(key))
        return fail(std::string("'") + key +
                    "' is an option of linear attention's kernel: it needs "
                    "'linear'");
    return true;
  }
  // What softmax attention has and linear attention does not.
  for (const char *key : {"align", "window", "mask", "lse", "scale", "softcap",
                          "dropout", "weights", "sinks", "dbias"})
    if (seen(key))
      return fail(std::string("linear attention's kernel takes no '") + key +
                  "' (docs/spec.md, \"Linear attention\")");
  // 'backward' makes the gradients' kernel (attn.linear_backward), not the
  // attention backward's.
  spec.linearBackward = spec.backward;
  spec.backward = false;
  if (spec.linearBackward && seen("chunk"))
    return fail("'chunk' orders the forward's sums: linear attention's "
                "backward kernel takes none (it makes its own chunks)");
  if (spec.causal && spec.alignment != Alignment::TopLeft)
    return fail("causal linear attention has Sq = Sk: its only alignment is "
                "top_left");
  int64_t rows = spec.staticSizes[3], keys = spec.staticSizes[4];
  if (spec.causal && rows > 0 && keys > 0 && rows != keys)
    return fail("causal linear attention needs Sq = Sk (query i sees keys "
                "0..i), found sizes Sq = " +
                std::to_string(rows) + ", Sk = " + std::to_string(keys));
  if (spec.unnormalized && seen("eps"))
    return fail("'eps' is the denominator's and an 'unnormalized' kernel "
                "has none: drop one of them");
  return true;
}

bool SpecParser::checkAdditive() {
  auto seen = [&](const char *key) {
    return std::find(seenKeys.begin(), seenKeys.end(), key) != seenKeys.end();
  };
  if (!spec.additive) {
    for (const char *key : {"dq", "attn_dim", "with_weights"})
      if (seen(key))
        return fail(std::string("'") + key +
                    "' is an option of additive attention's kernel: it needs "
                    "'additive'");
    return true;
  }
  if (spec.linear)
    return fail("'linear' and 'additive' are two kinds of kernel: a spec "
                "takes one");
  for (const char *key :
       {"causal", "align", "window", "lse", "scale", "softcap", "dropout",
        "weights", "sinks", "dbias", "gqa"})
    if (seen(key))
      return fail(std::string("additive attention's kernel takes no '") + key +
                  "' (docs/spec.md, \"Additive attention\")");
  // 'backward' makes the gradients' kernel (attn.additive_backward), not
  // the attention backward's.
  spec.additiveBackward = spec.backward;
  spec.backward = false;
  if (spec.additiveBackward && spec.additiveWeights)
    return fail("additive attention's backward kernel takes no "
                "'with_weights': the forward's kernel writes them");
  if (spec.mask == MaskKind::Bias)
    return fail("additive attention's mask is a keep-mask: 'mask=bool'");
  if (spec.maskBroadcast[1])
    return fail("additive attention's mask [B or 1, Sq or 1, Sk] has no "
                "head dim: its broadcast dims are b1 and q1");
  if (spec.staticSizes[1] > 0 || spec.staticSizes[2] > 0)
    return fail("additive attention has no heads: its sizes are B:?:?:Sq:Sk");
  if (!seen("dq"))
    spec.queryDim = spec.headDim;
  if (!seen("attn_dim"))
    spec.attnDim = spec.headDim;
  return true;
}

bool SpecParser::checkMha() {
  auto seen = [&](const char *key) {
    return std::find(seenKeys.begin(), seenKeys.end(), key) != seenKeys.end();
  };
  if (!spec.mha) {
    for (const char *key : {"embed", "heads", "kdim", "vdim", "bias"})
      if (seen(key))
        return fail(std::string("'") + key +
                    "' is an option of a multi-head attention layer's "
                    "kernel: it needs 'mha'");
    return true;
  }
  if (spec.linear || spec.additive)
    return fail("'mha' and '" +
                std::string(spec.linear ? "linear" : "additive") +
                "' are two kinds of kernel: a spec takes one");
  for (const char *key : {"d", "dv", "lse", "backward", "dropout", "weights",
                          "sinks", "dbias", "gqa"})
    if (seen(key))
      return fail(std::string("a multi-head attention layer's kernel takes no "
                              "'") +
                  key +
                  "' (its heads are embed / heads wide; docs/spec.md, "
                  "\"Multi-head attention layer\")");
  if (!seen("embed"))
    return fail("'mha' needs 'embed=E', the layer's width");
  if (spec.embedDim % spec.mhaHeads != 0)
    return fail("embed=" + std::to_string(spec.embedDim) +
                " is not a multiple of heads=" + std::to_string(spec.mhaHeads));
  if (spec.embedDim / spec.mhaHeads > kMaxHeadDim)
    return fail("a head (embed / heads = " +
                std::to_string(spec.embedDim / spec.mhaHeads) +
                ") is at most " + std::to_string(kMaxHeadDim) + " wide");
  if (spec.staticSizes[1] > 0 || spec.staticSizes[2] > 0)
    return fail("a multi-head attention layer's heads are 'heads': its "
                "sizes are B:?:?:Sq:Sk");
  if (!seen("kdim"))
    spec.keyEmbedDim = spec.embedDim;
  if (!seen("vdim"))
    spec.valueEmbedDim = spec.embedDim;
  spec.headDim = spec.valueDim = spec.embedDim / spec.mhaHeads;
  return true;
}

bool SpecParser::checkConsistency() {
  if (causalAlignment && explicitAlignment &&
      *causalAlignment != *explicitAlignment)
    return fail(std::string("conflicting alignments: causal=") +
                alignmentName(*causalAlignment) +
                " but align=" + alignmentName(*explicitAlignment));
  if (causalAlignment)
    spec.alignment = *causalAlignment;
  else if (explicitAlignment)
    spec.alignment = *explicitAlignment;
  bool seenValueDim =
      std::find(seenKeys.begin(), seenKeys.end(), "dv") != seenKeys.end();
  if (spec.weights && spec.backward)
    return fail("'weights' and 'backward' are two kinds of kernel: a spec "
                "takes one");
  // The sinks are part of the forward's LSE, which both other kinds read.
  if (spec.sinks && spec.backward)
    return fail("a backward kernel takes no 'sinks': it reads the forward's "
                "LSE, which includes them (the sinks' own gradient is "
                "docs/spec.md's d-sigma, from O, dO and that LSE)");
  if (spec.sinks && spec.weights)
    return fail("a weights kernel takes no 'sinks': give it 'lse' and the "
                "forward's LSE, which includes them");
  if (spec.gradMask && (!spec.backward || spec.mask != MaskKind::Bias))
    return fail("'dbias' is the gradient of an additive bias: it needs "
                "'backward' and 'mask=bias'");
  if (spec.gradCaptures && !spec.backward)
    return fail("'dcaptures' are gradients of a backward kernel: it needs "
                "'backward'");
  if (spec.weights && seenValueDim)
    return fail("a weights kernel reads no V: 'dv' does not apply");
  if (!checkLinear() || !checkAdditive() || !checkMha())
    return false;
  // Dv defaults to D: "d=128" means a 128-wide value head too.
  if (!seenValueDim && !spec.mha)
    spec.valueDim = spec.headDim;

  int64_t heads = spec.staticSizes[1], kvHeads = spec.staticSizes[2];
  if (heads > 0 && kvHeads > 0) {
    if (heads % kvHeads != 0)
      return fail(
          "invalid value for key 'sizes': Hq = " + std::to_string(heads) +
          " is not a multiple of Hkv = " + std::to_string(kvHeads));
    // heads / kvHeads, not group * kvHeads: a huge gqa=G must not overflow.
    if (spec.group > 0 && heads / kvHeads != spec.group)
      return fail("conflicting gqa=" + std::to_string(spec.group) +
                  " and sizes Hq = " + std::to_string(heads) +
                  ", Hkv = " + std::to_string(kvHeads));
  }
  return true;
}

} // namespace

std::string attn::kernelNameProblem(std::string_view name) {
  if (!isIdentifier(name))
    return "a kernel name is a C identifier (letters, digits, '_', not "
           "starting with a digit, at most " +
           std::to_string(kMaxNameLength) + " characters)";
  // Reserved to the implementation in C (file scope) and C++.
  if (name.front() == '_')
    return "names starting with '_' are reserved in C and C++";
  if (name.find("__") != std::string_view::npos)
    return "names containing '__' are reserved in C++";
  if (listed(kCKeywords, name))
    return "it is a C or C++ keyword";
  std::vector<std::string> identifiers = {std::string(name)};
  for (const char *suffix : kDerivedSuffixes)
    identifiers.push_back(std::string(name) + suffix);
  for (const std::string &identifier : identifiers) {
    std::string which =
        identifier == name ? "it" : "the header's '" + identifier + "'";
    if (identifier == "main")
      return which + " would clash with the program's entry point 'main'";
    if (listed(kCLibraryNames, identifier))
      return which + " would clash with the C library's '" + identifier + "'";
    if (listed(kRuntimeNames, identifier) ||
        std::string_view(identifier).substr(0, 5) == "ATTN_")
      return which + " would clash with the attn runtime's '" + identifier +
             "'";
  }
  return "";
}

std::optional<KernelSpec> attn::parseKernelSpec(const std::string &text,
                                                std::string &error) {
  return SpecParser(error).parse(text);
}

//===----------------------------------------------------------------------===//
// The printer
//===----------------------------------------------------------------------===//

std::string attn::printKernelSpec(const KernelSpec &spec) {
  // Fields are printed in a fixed order and only when they differ from the
  // default, except dtype, d and dv (but for a weights kernel, which has
  // none), which a reader always wants to see.
  std::string out;
  auto add = [&](const std::string &item) {
    if (!out.empty())
      out += ',';
    out += item;
  };
  add(std::string("dtype=") + elementTypeName(spec.elementType));
  // A layer's heads are embed / heads wide: it prints those instead.
  if (!spec.mha)
    add("d=" + std::to_string(spec.headDim));
  if (!spec.weights && !spec.mha) // a weights kernel reads no V
    add("dv=" + std::to_string(spec.valueDim));
  if (spec.causal)
    add(std::string("causal=") + alignmentName(spec.alignment));
  else if (spec.alignment != Alignment::TopLeft)
    add(std::string("align=") + alignmentName(spec.alignment));
  if (spec.windowed()) {
    auto side = [](const std::optional<int64_t> &extent) {
      return extent ? std::to_string(*extent) : std::string("inf");
    };
    add("window=" + side(spec.windowLeft) + ":" + side(spec.windowRight));
  }
  if (spec.mask != MaskKind::None) {
    std::string mask = spec.mask == MaskKind::Bool ? "mask=bool" : "mask=bias";
    static const char *const dimNames[3] = {"b1", "h1", "q1"};
    bool any = false;
    for (int i = 0; i < 3; ++i) {
      if (!spec.maskBroadcast[i])
        continue;
      mask += any ? "" : ":";
      mask += dimNames[i];
      any = true;
    }
    add(mask);
  }
  if (spec.lse)
    add("lse");
  if (spec.backward)
    add("backward");
  if (spec.gradMask)
    add("dbias");
  if (spec.gradCaptures) {
    std::string numbers;
    for (size_t n = 0; n < kMaxCaptures; ++n)
      if (spec.gradCaptures & (1u << n))
        numbers += (numbers.empty() ? "" : ":") + std::to_string(n);
    add("dcaptures=" + numbers);
  }
  if (spec.dropout)
    add("dropout");
  if (spec.sinks)
    add("sinks");
  if (spec.weights)
    add("weights");
  if (spec.additive) {
    add("additive");
    add("dq=" + std::to_string(spec.queryDim));
    add("attn_dim=" + std::to_string(spec.attnDim));
    if (spec.additiveWeights)
      add("with_weights");
    if (spec.additiveBackward)
      add("backward");
  }
  if (spec.mha) {
    add("mha");
    add("embed=" + std::to_string(spec.embedDim));
    add("heads=" + std::to_string(spec.mhaHeads));
    if (spec.keyEmbedDim != spec.embedDim)
      add("kdim=" + std::to_string(spec.keyEmbedDim));
    if (spec.valueEmbedDim != spec.embedDim)
      add("vdim=" + std::to_string(spec.valueEmbedDim));
    if (spec.mhaBias)
      add("bias");
  }
  if (spec.linear) {
    add("linear");
    if (spec.eps != KernelSpec().eps)
      add("eps=" + formatFloat(spec.eps));
    if (spec.chunk != KernelSpec().chunk)
      add("chunk=" + std::to_string(spec.chunk));
    if (spec.featureMap == FeatureMap::Relu)
      add("feature_map=relu");
    if (spec.featureMap == FeatureMap::Identity)
      add("feature_map=identity");
    if (spec.linearState)
      add("state");
    if (spec.unnormalized)
      add("unnormalized");
    if (spec.linearBackward)
      add("backward");
  }
  if (spec.group != -1)
    add("gqa=" + std::to_string(spec.group));
  if (spec.scale)
    add("scale=" + formatFloat(*spec.scale));
  if (spec.softcap)
    add("softcap=" + formatFloat(*spec.softcap));
  bool anyStatic = false;
  for (int64_t size : spec.staticSizes)
    anyStatic |= size != -1;
  if (anyStatic) {
    std::string sizes = "sizes=";
    for (int i = 0; i < 5; ++i) {
      if (i)
        sizes += ':';
      sizes += spec.staticSizes[i] == -1 ? std::string("?")
                                         : std::to_string(spec.staticSizes[i]);
    }
    add(sizes);
  }
  if (spec.name != KernelSpec().name)
    add("name=" + spec.name);
  return out;
}
