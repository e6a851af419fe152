// Test support: a fixture dump (fixtures/generator.h) written to a fresh scratch file, with at
// most one planted fault, and `ncert check` run on a dump through its library entry point.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "certify/commands/check.h"
#include "fixtures/generator.h"
#include "tests/common/test_paths.h"

namespace ncert::testing {

/// Writes `spec` to scratch file `name`, planting `fault` in `projection` (empty: the first
/// projection that allows it); returns the path.
inline std::string write_fixture(const fixtures::DumpSpec& spec, const std::string& name,
                                 fixtures::Fault fault = fixtures::Fault::kNone, const std::string& projection = "") {
  const std::string path = scratch_file(name);
  const Status s = fixtures::write_dump(path, spec, {fault, projection}, true);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return path;
}

/// `ncert check` of one dump; an empty report (and a test failure) when it could not run.
inline certify::Report check_dump(const std::string& path, certify::CheckOptions options = {}) {
  certify::CheckCommandOptions co;
  co.dump = path;
  co.check = options;
  auto r = certify::run_check(co);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : certify::Report{};
}

}  // namespace ncert::testing
