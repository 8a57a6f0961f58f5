//===- Npy.cpp - Reading and writing NumPy .npy files ---------------------===//
//
// The header of a .npy file is the repr of a Python dict, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and ended by a newline. Rather than a general Python
// literal parser, this file parses exactly that dict grammar (strings, True,
// False and tuples of integers), which is all NumPy ever writes and keeps the
// attack surface of a fuzzed reader small.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/Npy.h"

#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <string_view>

using namespace attn;

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// NumPy pads the header so that the data starts at a multiple of 64 bytes.
constexpr size_t kHeaderAlignment = 64;

struct DtypeInfo {
  const char *name;  // our name
  const char *descr; // what NumPy writes
  size_t itemSize;
};

constexpr DtypeInfo kDtypes[] = {
    {"f32", "<f4", 4},  {"f16", "<f2", 2},       {"f64", "<f8", 8},
    {"bool", "|b1", 1}, {"bf16", "bfloat16", 2},
};

const DtypeInfo *findByName(const std::string &name) {
  for (const DtypeInfo &info : kDtypes)
    if (name == info.name)
      return &info;
  return nullptr;
}

/// Maps a descr to a dtype; `error` explains a refusal.
const DtypeInfo *findByDescr(std::string_view descr, std::string &error) {
  for (const DtypeInfo &info : kDtypes)
    if (descr == info.descr)
      return &info;
  // One-byte types have no byte order; NumPy writes '|' but '<' and '=' are
  // equally unambiguous.
  if (descr == "<b1" || descr == "=b1" || descr == "?" || descr == "|?")
    return findByName("bool");
  if (!descr.empty() && descr[0] == '>') {
    error = "big-endian dtype '" + std::string(descr) +
            "' is not supported (convert with arr.astype(arr.dtype."
            "newbyteorder('<')))";
    return nullptr;
  }
  std::string shown(descr.substr(0, 32));
  for (char &c : shown)
    if (static_cast<unsigned char>(c) < 0x20 ||
        static_cast<unsigned char>(c) >= 0x7f)
      c = '?';
  error = "unsupported dtype '" + shown +
          "' (supported: <f4, <f2, <f8, |b1, bfloat16)";
  return nullptr;
}

/// Multiplies without overflow; false if the product exceeds int64.
bool checkedMultiply(int64_t a, int64_t b, int64_t &result) {
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a)
    return false;
  result = a * b;
  return true;
}

//===----------------------------------------------------------------------===//
// The header dict
//===----------------------------------------------------------------------===//

class HeaderParser {
public:
  HeaderParser(std::string_view text, std::string &error)
      : text(text), error(error) {}

  bool parse(std::string &descr, bool &fortranOrder,
             std::vector<int64_t> &shape);

private:
  bool fail(const std::string &message) {
    error = "malformed .npy header: " + message;
    return false;
  }
  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }
  bool consume(char c) {
    skipSpace();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  bool peek(char c) {
    skipSpace();
    return pos < text.size() && text[pos] == c;
  }
  bool parseString(std::string &out);
  bool parseBool(bool &out);
  bool parseTuple(std::vector<int64_t> &out);

  std::string_view text;
  size_t pos = 0;
  std::string &error;
};

bool HeaderParser::parseString(std::string &out) {
  skipSpace();
  if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"'))
    return fail("expected a quoted string");
  char quoteChar = text[pos++];
  size_t end = text.find(quoteChar, pos);
  if (end == std::string_view::npos)
    return fail("unterminated string");
  std::string_view body = text.substr(pos, end - pos);
  // NumPy never writes escapes; refusing them avoids guessing their meaning.
  if (body.find('\\') != std::string_view::npos || body.size() > 256)
    return fail("unexpected string contents");
  out.assign(body);
  pos = end + 1;
  return true;
}

bool HeaderParser::parseBool(bool &out) {
  skipSpace();
  std::string_view rest = text.substr(pos);
  if (rest.substr(0, 4) == "True") {
    out = true;
    pos += 4;
    return true;
  }
  if (rest.substr(0, 5) == "False") {
    out = false;
    pos += 5;
    return true;
  }
  return fail("expected True or False for 'fortran_order'");
}

bool HeaderParser::parseTuple(std::vector<int64_t> &out) {
  out.clear();
  if (!consume('('))
    return fail("expected a tuple for 'shape'");
  while (!consume(')')) {
    skipSpace();
    if (pos >= text.size() || text[pos] < '0' || text[pos] > '9')
      return fail("expected a non-negative integer in 'shape'");
    int64_t value = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      int digit = text[pos++] - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10)
        return fail("dimension in 'shape' overflows int64");
      value = value * 10 + digit;
    }
    // Python 2 wrote long integers with an 'L' suffix.
    if (pos < text.size() && text[pos] == 'L')
      ++pos;
    if (out.size() >= 64)
      return fail("'shape' has more than 64 dimensions");
    out.push_back(value);
    if (!consume(',')) {
      if (!consume(')'))
        return fail("expected ',' or ')' in 'shape'");
      break;
    }
  }
  return true;
}

bool HeaderParser::parse(std::string &descr, bool &fortranOrder,
                         std::vector<int64_t> &shape) {
  bool seenDescr = false, seenOrder = false, seenShape = false;
  if (!consume('{'))
    return fail("expected '{'");
  while (!consume('}')) {
    std::string key;
    if (!parseString(key))
      return false;
    if (!consume(':'))
      return fail("expected ':' after key '" + key + "'");
    if (key == "descr") {
      if (seenDescr)
        return fail("duplicate key 'descr'");
      seenDescr = true;
      if (peek('['))
        return fail("structured dtypes are not supported");
      if (!parseString(descr))
        return false;
    } else if (key == "fortran_order") {
      if (seenOrder)
        return fail("duplicate key 'fortran_order'");
      seenOrder = true;
      if (!parseBool(fortranOrder))
        return false;
    } else if (key == "shape") {
      if (seenShape)
        return fail("duplicate key 'shape'");
      seenShape = true;
      if (!parseTuple(shape))
        return false;
    } else {
      return fail("unexpected key '" + key.substr(0, 32) + "'");
    }
    if (!consume(',')) {
      if (!consume('}'))
        return fail("expected ',' or '}'");
      break;
    }
  }
  skipSpace();
  if (pos != text.size())
    return fail("unexpected characters after the dict");
  if (!seenDescr || !seenOrder || !seenShape)
    return fail("missing key (need 'descr', 'fortran_order' and 'shape')");
  return true;
}

} // namespace

//===----------------------------------------------------------------------===//
// NpyArray
//===----------------------------------------------------------------------===//

int64_t NpyArray::numElements() const {
  int64_t count = 1;
  for (int64_t dim : shape)
    if (!checkedMultiply(count, dim, count))
      return -1;
  return count;
}

std::vector<int64_t> NpyArray::strides() const {
  std::vector<int64_t> result(shape.size());
  // An empty array may have other sizes whose product overflows, e.g.
  // (0, 2^40, 2^40): its strides address nothing and saturate instead.
  int64_t stride = 1;
  auto step = [&](size_t i) {
    result[i] = stride;
    if (!checkedMultiply(stride, shape[i] > 0 ? shape[i] : 1, stride))
      stride = std::numeric_limits<int64_t>::max();
  };
  if (fortranOrder) {
    for (size_t i = 0; i < shape.size(); ++i)
      step(i);
  } else {
    for (size_t i = shape.size(); i-- > 0;)
      step(i);
  }
  return result;
}

size_t attn::npyItemSize(const std::string &dtype) {
  const DtypeInfo *info = findByName(dtype);
  return info ? info->itemSize : 0;
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

bool attn::parseNpy(const uint8_t *bytes, size_t size, NpyArray &out,
                    std::string &error) {
  error.clear();
  if (size < kMagicSize + 2 || std::memcmp(bytes, kMagic, kMagicSize) != 0) {
    error = "not a .npy file (missing the \\x93NUMPY magic)";
    return false;
  }
  uint8_t major = bytes[kMagicSize], minor = bytes[kMagicSize + 1];
  size_t lengthBytes;
  if (major == 1 && minor == 0)
    lengthBytes = 2;
  else if ((major == 2 || major == 3) && minor == 0)
    lengthBytes = 4;
  else {
    error = "unsupported .npy format version " + std::to_string(major) + "." +
            std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)";
    return false;
  }
  size_t prefix = kMagicSize + 2 + lengthBytes;
  if (size < prefix) {
    error = "truncated .npy file: no header length";
    return false;
  }
  uint64_t headerLength = 0;
  for (size_t i = 0; i < lengthBytes; ++i)
    headerLength |= static_cast<uint64_t>(bytes[kMagicSize + 2 + i]) << (8 * i);
  if (headerLength > size - prefix) {
    error = "truncated .npy file: header of " + std::to_string(headerLength) +
            " bytes but only " + std::to_string(size - prefix) + " bytes left";
    return false;
  }

  std::string_view header(reinterpret_cast<const char *>(bytes + prefix),
                          static_cast<size_t>(headerLength));
  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;
  if (!HeaderParser(header, error).parse(descr, fortranOrder, shape))
    return false;
  const DtypeInfo *info = findByDescr(descr, error);
  if (!info)
    return false;

  int64_t count = 1;
  for (int64_t dim : shape) {
    if (!checkedMultiply(count, dim, count)) {
      error = "malformed .npy header: the element count of 'shape' overflows";
      return false;
    }
  }
  int64_t dataBytes;
  if (!checkedMultiply(count, static_cast<int64_t>(info->itemSize),
                       dataBytes)) {
    error = "malformed .npy header: the data size of 'shape' overflows";
    return false;
  }
  size_t offset = prefix + static_cast<size_t>(headerLength);
  uint64_t available = size - offset;
  if (static_cast<uint64_t>(dataBytes) != available) {
    error = "data size mismatch: shape and dtype need " +
            std::to_string(dataBytes) + " bytes but the file holds " +
            std::to_string(available);
    return false;
  }

  out.dtype = info->name;
  out.shape = std::move(shape);
  out.fortranOrder = fortranOrder;
  out.data.assign(bytes + offset, bytes + size);
  return true;
}

bool attn::readNpy(const std::string &path, NpyArray &out, std::string &error) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) {
    error = "cannot open '" + path + "' for reading";
    return false;
  }
  std::streamoff size = file.tellg();
  if (size < 0) {
    error = "cannot determine the size of '" + path + "'";
    return false;
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  file.seekg(0);
  if (size > 0 && !file.read(reinterpret_cast<char *>(bytes.data()), size)) {
    error = "cannot read '" + path + "'";
    return false;
  }
  if (!parseNpy(bytes.data(), bytes.size(), out, error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

bool attn::serializeNpy(const NpyArray &in, std::vector<uint8_t> &bytes,
                        std::string &error) {
  const DtypeInfo *info = findByName(in.dtype);
  if (!info) {
    error = "cannot write dtype '" + in.dtype +
            "' (supported: f32, f16, bf16, f64, bool)";
    return false;
  }
  if (in.fortranOrder) {
    error = "writing Fortran-order arrays is not supported";
    return false;
  }
  for (int64_t dim : in.shape) {
    if (dim < 0) {
      error = "cannot write a negative dimension " + std::to_string(dim);
      return false;
    }
  }
  int64_t count = in.numElements();
  int64_t dataBytes;
  if (count < 0 || !checkedMultiply(count, static_cast<int64_t>(info->itemSize),
                                    dataBytes)) {
    error = "the element count of the shape overflows";
    return false;
  }
  if (static_cast<uint64_t>(dataBytes) != in.data.size()) {
    error = "data size mismatch: shape and dtype need " +
            std::to_string(dataBytes) + " bytes but the array holds " +
            std::to_string(in.data.size());
    return false;
  }

  std::string header = "{'descr': '";
  header += info->descr;
  header += "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < in.shape.size(); ++i) {
    if (i)
      header += ", ";
    header += std::to_string(in.shape[i]);
  }
  // A one-element tuple needs its trailing comma to stay a tuple.
  header += in.shape.size() == 1 ? ",), }" : "), }";
  size_t prefix = kMagicSize + 4;
  size_t total = prefix + header.size() + 1; // + the final newline
  header.append(
      (kHeaderAlignment - total % kHeaderAlignment) % kHeaderAlignment, ' ');
  header += '\n';
  if (header.size() > 0xffff) {
    error = "the .npy header is too long for format version 1.0";
    return false;
  }

  bytes.clear();
  bytes.reserve(prefix + header.size() + in.data.size());
  bytes.insert(bytes.end(), kMagic, kMagic + kMagicSize);
  bytes.push_back(1);
  bytes.push_back(0);
  bytes.push_back(static_cast<uint8_t>(header.size() & 0xff));
  bytes.push_back(static_cast<uint8_t>(header.size() >> 8));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), in.data.begin(), in.data.end());
  return true;
}

bool attn::writeNpy(const std::string &path, const NpyArray &in,
                    std::string &error) {
  std::vector<uint8_t> bytes;
  if (!serializeNpy(in, bytes, error))
    return false;
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) {
    error = "cannot open '" + path + "' for writing";
    return false;
  }
  file.write(reinterpret_cast<const char *>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) {
    error = "cannot write '" + path + "'";
    return false;
  }
  return true;
}
