// Scratch paths for tests: one directory per test binary under the build tree (CTest sets
// NCERT_TEST_TMP), cleaned per test name.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace ncert::testing {

inline std::string scratch_dir() {
  const char* env = std::getenv("NCERT_TEST_TMP");
  std::filesystem::path base = env ? env : std::filesystem::temp_directory_path() / "ncert-tests";
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info) base /= std::string(info->test_suite_name()) + "." + info->name();
  std::filesystem::create_directories(base);
  return base.string();
}

/// A fresh path inside the scratch dir (any old file of that name removed).
inline std::string scratch_file(const std::string& name) {
  const std::string p = scratch_dir() + "/" + name;
  std::filesystem::remove(p);
  return p;
}

/// The two dumps of a pair (runs A and B of a compare, a fork pair), each a fresh scratch file.
struct DumpPair {
  std::string a, b;
};

inline DumpPair scratch_pair(const std::string& tag) {
  return {scratch_file(tag + "-a.h5"), scratch_file(tag + "-b.h5")};
}

}  // namespace ncert::testing
