//===- Nesting.h - Refuse input nested deeper than the parser can take ----===//
//
// MLIR's parser descends recursively into regions, parenthesized types and
// attribute brackets, and overflows the stack on input nested a few
// thousand levels deep (a file of 3,000 nested regions or 20,000 nested
// parentheses crashes it with the default 8 MiB stack). Every tool that
// reads .mlir text scans it with this first: a file nested deeper than
// kMaxNesting is refused with a message, never parsed. attn's own IR nests
// fewer than 20 levels.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_SUPPORT_NESTING_H
#define ATTN_SUPPORT_NESTING_H

#include <cstdint>
#include <string>
#include <string_view>

namespace attn {

/// The deepest bracket nesting a tool parses.
constexpr int64_t kMaxNesting = 1000;

/// Empty when `text` (MLIR assembly) nests its brackets -- `(`, `[`, `{`,
/// and the `<` of a type or attribute (`tensor<`, `!x.y<`, `#a<`) -- at
/// most kMaxNesting deep; else a message naming the line and column where
/// it goes deeper. String literals and `//` comments are skipped.
std::string nestingProblem(std::string_view text);

} // namespace attn

#endif // ATTN_SUPPORT_NESTING_H
