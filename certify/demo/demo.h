// This header defines `ncert demo`: the zero-setup tour. It writes a few synthetic dumps into a
// directory (one good, one per planted fault), certifies each with the same code as
// `ncert check`, and reports whether every outcome is the expected one: the good dump passes,
// every faulty dump fails on the check meant to catch its fault. Then logits: two builds compared
// under a KL policy (`ncert compare`), and three wording forks (`ncert forks`: a near-tie that
// passes, an unexplained fork and an invalid emission that fail).
#pragma once

#include <string>
#include <vector>

#include "certify/commands/option_table.h"
#include "certify/report/report.h"

namespace ncert::certify {

struct DemoOptions {
  std::string dir = "ncert-demo";
  bool force = false;  ///< overwrite demo files left by an earlier run
};

/// `ncert demo`'s options (--dir, --force).
const OptionTable<DemoOptions>& demo_option_table();

/// kOutputExists when a demo file exists and force is false; kIo when the directory cannot be
/// created.
Result<Report> run_demo(const DemoOptions& options);

/// The paths of the files the demo writes in `dir`.
std::vector<std::string> demo_paths(const std::string& dir);

}  // namespace ncert::certify
