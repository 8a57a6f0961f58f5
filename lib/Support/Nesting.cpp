//===- Nesting.cpp - Refuse input nested deeper than the parser can take --===//
#include "lib/Support/Nesting.h"

#include <cctype>
#include <vector>

using namespace attn;

namespace {

bool continuesName(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
         c == '$';
}

} // namespace

std::string attn::nestingProblem(std::string_view text) {
  std::vector<char> open; // the kinds of the brackets open now
  int64_t line = 1, column = 0;
  char previous = '\0';
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    ++column;
    if (c == '\n') {
      ++line;
      column = 0;
    } else if (c == '"') {
      // A string literal, escapes included, up to its closing quote.
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\')
          ++i;
        if (i < text.size() && text[i] == '\n') {
          ++line;
          column = 0;
        }
      }
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i;
    } else if (c == '(' || c == '[' || c == '{' ||
               (c == '<' && continuesName(previous))) {
      open.push_back(c);
      if (static_cast<int64_t>(open.size()) > kMaxNesting)
        return "the input nests brackets more than " +
               std::to_string(kMaxNesting) + " deep (at line " +
               std::to_string(line) + ", column " + std::to_string(column) +
               "); attn reads at most " + std::to_string(kMaxNesting) +
               " levels";
    } else if (c == ')' || c == ']' || c == '}') {
      // A '<' left open (a comparison, say) closes with what encloses it.
      char match = c == ')' ? '(' : c == ']' ? '[' : '{';
      while (!open.empty() && open.back() == '<' && match != '<')
        open.pop_back();
      if (!open.empty() && open.back() == match)
        open.pop_back();
    } else if (c == '>' && previous != '-' && !open.empty() &&
               open.back() == '<') {
      open.pop_back();
    }
    previous = c;
  }
  return "";
}
