// This header defines the library entry point of `ncert check DUMP.h5`: validate the dump, then
// certify every projection (geometry, identity, bound, walk, untouched, vacuity) and every
// logits run (raw target-maximum witnesses), in name order, into one Report.
#pragma once

#include <optional>
#include <string>

#include "certify/io/dump_reader.h"
#include "certify/projection/checks.h"
#include "certify/report/report.h"

namespace ncert::certify {

struct CheckCommandOptions {
  std::string dump;
  ReaderOptions reader;
  CheckOptions check;
  std::optional<double> logit_error;  ///< --logit-error ABS for runs without an lm_head
  std::string only;                   ///< certify only objects whose name contains this
  Requirement require;                ///< --require: skips of these kinds fail the run
};

/// A refused dump is a Report with `error` set (exit 3), not a failed Result. kUsage when `only`
/// selects nothing.
Result<Report> run_check(const CheckCommandOptions& options);

}  // namespace ncert::certify
