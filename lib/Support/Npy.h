//===- Npy.h - Reading and writing NumPy .npy files -----------------------===//
//
// `attn-run` and the tests exchange tensors with Python through NumPy's .npy
// format: a magic string, a version, a small Python-dict header (dtype, order,
// shape) and the raw little-endian data. Reading accepts format versions 1.0,
// 2.0 and 3.0 and the dtypes the attention kernels use; writing produces
// version 1.0 in C order. bf16 has no NumPy dtype of its own: it is written
// with the descr "bfloat16" (the name ml_dtypes uses) and read back from it.
//
// The reader is used on untrusted files and fuzzed: every length is checked
// against the bytes actually present before anything is allocated, and every
// failure returns a message rather than crashing.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_SUPPORT_NPY_H
#define ATTN_SUPPORT_NPY_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace attn {

struct NpyArray {
  /// "f32", "f16", "bf16", "f64" or "bool" (one byte per element).
  std::string dtype;
  /// Empty for a 0-d array (one element).
  std::vector<int64_t> shape;
  /// The raw little-endian elements, in C order unless fortranOrder.
  std::vector<uint8_t> data;
  /// Read only: the file stores the elements in Fortran (column-major)
  /// order; `strides()` accounts for it. writeNpy refuses it.
  bool fortranOrder = false;

  /// The number of elements (the product of the shape).
  int64_t numElements() const;
  /// Strides of each dim, in elements, for the order of `data`.
  std::vector<int64_t> strides() const;
};

/// Bytes per element of a dtype name accepted by NpyArray, 0 if unknown.
size_t npyItemSize(const std::string &dtype);

/// Parses the contents of a .npy file. On failure returns false with a
/// message in `error` and leaves `out` unspecified.
bool parseNpy(const uint8_t *bytes, size_t size, NpyArray &out,
              std::string &error);

/// Reads a .npy file from disk.
bool readNpy(const std::string &path, NpyArray &out, std::string &error);

/// Serializes `in` as a version 1.0 .npy file (C order only).
bool serializeNpy(const NpyArray &in, std::vector<uint8_t> &bytes,
                  std::string &error);

/// Writes `in` to `path` as a version 1.0 .npy file (C order only).
bool writeNpy(const std::string &path, const NpyArray &in, std::string &error);

} // namespace attn

#endif // ATTN_SUPPORT_NPY_H
