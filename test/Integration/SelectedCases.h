//===- SelectedCases.h - The cases of a suite that will run -----*- C++ -*-===//
//
// The conformance suites compile one library of kernels per suite in
// SetUpTestSuite, which is most of their time (about 1.7 s a kernel, mostly
// LLVM's). They compile only the kernels of the tests that will run: after
// --gtest_filter and gtest's sharding, so that one case runs in seconds and
// a sanitizer build can check a shard of the matrix.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEST_INTEGRATION_SELECTEDCASES_H
#define ATTN_TEST_INTEGRATION_SELECTEDCASES_H

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace attn {

/// The case labels of the running suite's parameterized tests that will run
/// ("Test/<label>"), restricted to tests named `test` when it is not empty.
/// Call from SetUpTestSuite. `hasPlainTests`, when given, says whether a
/// test without a parameter (a TEST_F of the suite) will run too.
inline std::set<std::string> selectedCases(const std::string &test = "",
                                           bool *hasPlainTests = nullptr) {
  std::set<std::string> labels;
  if (hasPlainTests)
    *hasPlainTests = false;
  const ::testing::TestSuite *suite =
      ::testing::UnitTest::GetInstance()->current_test_suite();
  if (!suite)
    return labels;
  for (int i = 0; i < suite->total_test_count(); ++i) {
    const ::testing::TestInfo *info = suite->GetTestInfo(i);
    if (!info->should_run())
      continue;
    std::string name = info->name();
    size_t slash = name.rfind('/');
    if (!info->value_param() || slash == std::string::npos) {
      if (hasPlainTests)
        *hasPlainTests = true;
      continue;
    }
    if (test.empty() || name.compare(0, slash, test) == 0)
      labels.insert(name.substr(slash + 1));
  }
  return labels;
}

} // namespace attn

#endif // ATTN_TEST_INTEGRATION_SELECTEDCASES_H
