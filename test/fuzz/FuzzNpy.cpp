//===- FuzzNpy.cpp - libFuzzer target: the .npy reader --------------------===//
//
// attn-fuzz-npy: bytes -> parseNpy. The reader takes untrusted files (any
// `attn-run --query file.npy`), so any input must end in an array or a
// message. An array it accepts must be self-consistent (its data holds
// exactly the elements its shape and dtype name, its strides are those of
// its order) and, in C order, must survive serializeNpy and parseNpy again
// unchanged.
//
//===----------------------------------------------------------------------===//
#include "lib/Support/Npy.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace {
void expect(bool condition) {
  if (!condition)
    __builtin_trap();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  attn::NpyArray array;
  std::string error;
  if (!attn::parseNpy(data, size, array, error)) {
    expect(!error.empty());
    return 0;
  }
  const size_t itemSize = attn::npyItemSize(array.dtype);
  expect(itemSize != 0);
  const int64_t elements = array.numElements();
  expect(elements >= 0);
  expect(static_cast<unsigned __int128>(elements) * itemSize ==
         array.data.size());
  const std::vector<int64_t> strides = array.strides();
  expect(strides.size() == array.shape.size());
  if (elements > 0) {
    // The last element's offset is elements - 1 in either order.
    __int128 last = 0;
    for (size_t d = 0; d < strides.size(); ++d)
      last += static_cast<__int128>(strides[d]) * (array.shape[d] - 1);
    expect(last == elements - 1);
  }

  if (array.fortranOrder)
    return 0; // serializeNpy writes C order only
  std::vector<uint8_t> bytes;
  expect(attn::serializeNpy(array, bytes, error));
  attn::NpyArray again;
  expect(attn::parseNpy(bytes.data(), bytes.size(), again, error));
  expect(again.dtype == array.dtype && again.shape == array.shape &&
         again.data == array.data && !again.fortranOrder);
  return 0;
}
