// This header defines the library entry points of `ncert witness`: the raw target-maximum
// witness of every emitted token of every logits run, optionally written to a witness file
// (logits/witness_file.h) with a JSON summary beside it, and `ncert witness --verify WITNESS.h5
// DUMP.h5`, which re-derives every stored witness from the dump's rows and compares it field by
// field, row hash included (a modified row is named by run and position).
#pragma once

#include <optional>
#include <string>

#include "certify/io/dump_reader.h"
#include "certify/logits/witness.h"
#include "certify/report/report.h"
#include "reference/linear_spec.h"

namespace ncert::certify {

struct WitnessOptions {
  std::string dump;
  ReaderOptions reader;
  std::optional<double> logit_error;
  double lambda = reference::kDefaultLambda;
  std::string out;  ///< witness file to write ("" for none); refuses to overwrite
  bool overwrite = false;
  std::string only;                       ///< runs whose name contains this (kUsage if none does)
  Requirement require;                    ///< --require: skips of these kinds fail the run
  std::optional<SkipPolicy> skip_policy;  ///< --policy: expected skips pass, unexpected ones fail
  bool table = false;                     ///< every emission under its run's check, not only the tightest
};

/// Report with one "witness" check per run and every witness under extra["witnesses"].
Result<Report> run_witness(const WitnessOptions& options);

struct VerifyOptions {
  std::string witness_file;
  std::string dump;
  ReaderOptions reader;
  double lambda = reference::kDefaultLambda;
};

/// One "witness" check per stored run: PASS iff every stored witness matches the dump.
Result<Report> run_witness_verify(const VerifyOptions& options);

}  // namespace ncert::certify
