//===- NpyTest.cpp - Tests of the .npy reader and writer ------------------===//
//
// Round trips for every supported dtype, files laid out exactly as NumPy
// writes them (versions 1.0, 2.0 and 3.0, Fortran order), and malformed
// files, which must be refused with a message and never crash the reader.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/Npy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <random>

using namespace attn;

namespace {

/// Builds a file with a hand-written header, as NumPy (or an attacker)
/// would lay it out.
std::vector<uint8_t> makeFile(const std::string &header, size_t dataBytes,
                              int major = 1) {
  std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  bytes.push_back(static_cast<uint8_t>(major));
  bytes.push_back(0);
  size_t length = header.size();
  int lengthBytes = major == 1 ? 2 : 4;
  for (int i = 0; i < lengthBytes; ++i)
    bytes.push_back(static_cast<uint8_t>(length >> (8 * i)));
  bytes.insert(bytes.end(), header.begin(), header.end());
  for (size_t i = 0; i < dataBytes; ++i)
    bytes.push_back(static_cast<uint8_t>(i * 7));
  return bytes;
}

bool parse(const std::vector<uint8_t> &bytes, NpyArray &array,
           std::string &error) {
  return parseNpy(bytes.data(), bytes.size(), array, error);
}

void expectRefused(const std::vector<uint8_t> &bytes, const char *fragment) {
  NpyArray array;
  std::string error;
  EXPECT_FALSE(parse(bytes, array, error));
  EXPECT_NE(error.find(fragment), std::string::npos)
      << "message: " << error << "\nmissing: " << fragment;
}

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "attn_npy_test_" + name + ".npy";
}

TEST(Npy, RoundTripsEveryDtypeThroughAFile) {
  const char *dtypes[] = {"f32", "f16", "bf16", "f64", "bool"};
  const std::vector<std::vector<int64_t>> shapes = {
      {}, {0}, {5}, {2, 3}, {2, 1, 3, 4}, {3, 0, 2}};
  for (const char *dtype : dtypes) {
    for (const auto &shape : shapes) {
      NpyArray array;
      array.dtype = dtype;
      array.shape = shape;
      size_t count = static_cast<size_t>(array.numElements());
      for (size_t i = 0; i < count * npyItemSize(dtype); ++i)
        array.data.push_back(static_cast<uint8_t>(
            std::string(dtype) == "bool" ? i % 2 : i * 31 + 1));
      std::string path = tempPath(dtype);
      std::string error;
      ASSERT_TRUE(writeNpy(path, array, error)) << error;
      NpyArray back;
      ASSERT_TRUE(readNpy(path, back, error)) << error;
      EXPECT_EQ(back.dtype, array.dtype);
      EXPECT_EQ(back.shape, array.shape);
      EXPECT_EQ(back.data, array.data);
      EXPECT_FALSE(back.fortranOrder);
      std::remove(path.c_str());
    }
  }
}

TEST(Npy, WritesWhatNumPyWrites) {
  NpyArray array;
  array.dtype = "f32";
  array.shape = {2, 3};
  array.data.assign(24, 0);
  std::vector<uint8_t> bytes;
  std::string error;
  ASSERT_TRUE(serializeNpy(array, bytes, error)) << error;
  // The header, padded so that the data starts 64-byte aligned.
  ASSERT_EQ(bytes.size(), 128u + 24u);
  std::string header(bytes.begin() + 10, bytes.begin() + 128);
  EXPECT_EQ(header.substr(0, 59),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(bytes[6], 1);
  EXPECT_EQ(bytes[7], 0);
  EXPECT_EQ(bytes[8] | bytes[9] << 8, 118);

  // One-element tuples keep their comma; bf16 uses the ml_dtypes name.
  array.dtype = "bf16";
  array.shape = {12};
  ASSERT_TRUE(serializeNpy(array, bytes, error)) << error;
  std::string text(bytes.begin(), bytes.end());
  EXPECT_NE(text.find("'descr': 'bfloat16'"), std::string::npos);
  EXPECT_NE(text.find("'shape': (12,)"), std::string::npos);
}

TEST(Npy, ReadsVersions2And3AndFortranOrder) {
  std::string header =
      "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }   \n";
  for (int major : {1, 2, 3}) {
    NpyArray array;
    std::string error;
    ASSERT_TRUE(parse(makeFile(header, 48, major), array, error)) << error;
    EXPECT_EQ(array.dtype, "f64");
    EXPECT_TRUE(array.fortranOrder);
    EXPECT_EQ(array.strides(), (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(array.data.size(), 48u);
  }
  NpyArray array;
  std::string error;
  ASSERT_TRUE(parse(makeFile("{'descr':'<f2','fortran_order':False,"
                             "'shape':(2,3,4)}\n",
                             48),
                    array, error))
      << error;
  EXPECT_EQ(array.strides(), (std::vector<int64_t>{12, 4, 1}));
}

TEST(Npy, AcceptsHeaderVariants) {
  NpyArray array;
  std::string error;
  // Key order, double quotes, Python 2 longs, no trailing comma.
  ASSERT_TRUE(parse(makeFile("{\"shape\": (3L,), \"fortran_order\": False, "
                             "\"descr\": \"|b1\"}\n",
                             3),
                    array, error))
      << error;
  EXPECT_EQ(array.dtype, "bool");
  EXPECT_EQ(array.shape, std::vector<int64_t>{3});
  ASSERT_TRUE(parse(makeFile("{'descr': '<f4', 'fortran_order': False, "
                             "'shape': (), }\n",
                             4),
                    array, error))
      << error;
  EXPECT_TRUE(array.shape.empty());
  EXPECT_EQ(array.numElements(), 1);
}

// Found by attn-fuzz-npy: the strides of an empty array whose other sizes
// multiply past 2^63 overflowed (undefined behaviour); they saturate.
TEST(Npy, EmptyArrayWithHugeSizesHasStrides) {
  NpyArray array;
  std::string error;
  ASSERT_TRUE(parse(makeFile("{'descr': '|b1', 'fortran_order': False, "
                             "'shape': (0, 4294967296, 4294967296, 3), }\n",
                             0),
                    array, error))
      << error;
  EXPECT_EQ(array.numElements(), 0);
  EXPECT_EQ(array.strides(),
            (std::vector<int64_t>{INT64_MAX, 3 * 4294967296, 3, 1}));
}

TEST(Npy, RefusesBadWrites) {
  NpyArray array;
  std::vector<uint8_t> bytes;
  std::string error;
  array.dtype = "i32";
  EXPECT_FALSE(serializeNpy(array, bytes, error));
  EXPECT_NE(error.find("'i32'"), std::string::npos) << error;
  array.dtype = "f32";
  array.shape = {2};
  array.data.assign(7, 0);
  EXPECT_FALSE(serializeNpy(array, bytes, error));
  EXPECT_NE(error.find("data size mismatch"), std::string::npos) << error;
  array.data.assign(8, 0);
  array.fortranOrder = true;
  EXPECT_FALSE(serializeNpy(array, bytes, error));
  EXPECT_NE(error.find("Fortran"), std::string::npos) << error;
  array.fortranOrder = false;
  EXPECT_FALSE(writeNpy("/nonexistent-dir/x.npy", array, error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
}

TEST(Npy, RefusesMalformedFiles) {
  const std::string good = "{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (2,), }\n";
  expectRefused({}, "magic");
  expectRefused({'N', 'U', 'M', 'P', 'Y'}, "magic");
  expectRefused({0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 5}, "truncated");
  std::vector<uint8_t> version = makeFile(good, 8);
  version[6] = 4;
  expectRefused(version, "version 4.0");
  version[6] = 1;
  version[7] = 1;
  expectRefused(version, "version 1.1");
  // Header length beyond the end of the file.
  std::vector<uint8_t> longHeader = makeFile(good, 8);
  longHeader[8] = 0xff;
  longHeader[9] = 0xff;
  expectRefused(longHeader, "truncated");
  std::vector<uint8_t> hugeHeader = makeFile(good, 8, 2);
  hugeHeader[11] = 0xff;
  expectRefused(hugeHeader, "truncated");

  expectRefused(makeFile(good, 4), "data size mismatch");
  expectRefused(makeFile(good, 9), "data size mismatch");
  expectRefused(makeFile("{'descr': '>f4', 'fortran_order': False, "
                         "'shape': (2,), }\n",
                         8),
                "big-endian");
  expectRefused(makeFile("{'descr': '<i4', 'fortran_order': False, "
                         "'shape': (2,), }\n",
                         8),
                "unsupported dtype '<i4'");
  expectRefused(makeFile("{'descr': [('a', '<f4')], 'fortran_order': False, "
                         "'shape': (2,), }\n",
                         8),
                "structured");
  expectRefused(makeFile("{'descr': '<f4', 'shape': (2,), }\n", 8),
                "missing key");
  expectRefused(makeFile("{'descr': '<f4', 'descr': '<f4', 'fortran_order': "
                         "False, 'shape': (2,), }\n",
                         8),
                "duplicate key 'descr'");
  expectRefused(makeFile("{'descr': '<f4', 'fortran_order': False, "
                         "'shape': (2,), 'extra': 1}\n",
                         8),
                "unexpected key 'extra'");
  expectRefused(makeFile("{'descr': '<f4', 'fortran_order': Maybe, "
                         "'shape': (2,), }\n",
                         8),
                "True or False");
  expectRefused(makeFile("{'descr': '<f4', 'fortran_order': False, "
                         "'shape': (-2,), }\n",
                         8),
                "non-negative integer");
  expectRefused(makeFile("{'descr': '<f4', 'fortran_order': False, "
                         "'shape': (2 3), }\n",
                         8),
                "expected ',' or ')'");
  expectRefused(makeFile("{'descr': '<f4', 'fortran_order': False, "
                         "'shape': (2,), } junk\n",
                         8),
                "after the dict");
  expectRefused(makeFile("{'descr': '<f4, 'fortran_order': False}\n", 8),
                "malformed");
  expectRefused(makeFile("{'descr': '<f4', 'fortran_order': False, "
                         "'shape': (99999999999999999999,), }\n",
                         8),
                "overflows int64");
  // Each dimension fits but the element count does not.
  expectRefused(makeFile("{'descr': '<f4', 'fortran_order': False, "
                         "'shape': (4294967296, 4294967296), }\n",
                         8),
                "overflows");
  // The element count fits but the byte count does not.
  expectRefused(makeFile("{'descr': '<f8', 'fortran_order': False, "
                         "'shape': (4611686018427387904,), }\n",
                         8),
                "overflows");
  // A large but representable size must be checked against the file
  // before anything is allocated.
  expectRefused(makeFile("{'descr': '<f8', 'fortran_order': False, "
                         "'shape': (1000000000000,), }\n",
                         8),
                "data size mismatch");
  // A zero-sized dimension makes an earlier overflow harmless.
  NpyArray array;
  std::string error;
  EXPECT_TRUE(parse(makeFile("{'descr': '<f4', 'fortran_order': False, "
                             "'shape': (0, 9223372036854775807), }\n",
                             0),
                    array, error))
      << error;
}

TEST(Npy, ReadMissingFile) {
  NpyArray array;
  std::string error;
  EXPECT_FALSE(readNpy("/nonexistent-dir/x.npy", array, error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
}

TEST(Npy, ArbitraryBytesNeverCrash) {
  NpyArray seedArray;
  seedArray.dtype = "f16";
  seedArray.shape = {2, 3};
  seedArray.data.assign(12, 1);
  std::vector<uint8_t> seed;
  std::string error;
  ASSERT_TRUE(serializeNpy(seedArray, seed, error));
  std::mt19937 rng(5);
  for (int n = 0; n < 20000; ++n) {
    std::vector<uint8_t> bytes = seed;
    if (n % 3 == 0) {
      bytes.resize(rng() % (seed.size() + 8));
    }
    for (int m = 0, e = rng() % 6; m < e && !bytes.empty(); ++m)
      bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    NpyArray array;
    if (parseNpy(bytes.data(), bytes.size(), array, error)) {
      EXPECT_EQ(array.data.size(), static_cast<size_t>(array.numElements()) *
                                       npyItemSize(array.dtype));
    } else {
      EXPECT_FALSE(error.empty());
    }
  }
}

} // namespace
