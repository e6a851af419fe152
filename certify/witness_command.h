// This header defines `ncert witness`: the raw target-maximum witness of every emitted token of
// every logits run, optionally written to a witness file (HDF5, ncert_schema = "ncert-witness")
// with a JSON summary beside it, and `ncert witness --verify WITNESS.h5 DUMP.h5`, which
// re-derives every stored witness from the dump's rows and compares it field by field, row
// hash included (a modified row is named by run and position).
//
// Witness file layout (docs/cli.md): root attributes as a dump's plus source_dump and
// source_xxh3_128; per run a group /witness/<run> (attributes vocab, tie_break, error_source,
// logit_error when absolute) with [T] datasets row, position (i64), token, runner_up, ties
// (i32), logit, runner_up_logit (f32), class (u8: 0 certified, 1 near-tie, 2 tie,
// 3 unbounded) and row_xxh3 [T, 16] (u8, canonical XXH3-128 bytes of each row). Margins are
// derived exactly from logit and runner_up_logit.
#pragma once

#include <optional>
#include <string>

#include "certify/dump_reader.h"
#include "certify/report.h"
#include "certify/witness.h"

namespace ncert::certify {

struct WitnessOptions {
  std::string dump;
  ReaderOptions reader;
  std::optional<double> logit_error;
  double lambda = 10.0;
  std::string out;        ///< witness file to write ("" for none); refuses to overwrite
  bool overwrite = false;
  std::string only;       ///< runs whose name contains this
};

/// Report with one "witness" check per run and every witness under extra["witnesses"].
Result<Report> run_witness(const WitnessOptions& options);

struct VerifyOptions {
  std::string witness_file;
  std::string dump;
  ReaderOptions reader;
  double lambda = 10.0;
};

/// One "witness" check per stored run: PASS iff every stored witness matches the dump.
Result<Report> run_witness_verify(const VerifyOptions& options);

}  // namespace ncert::certify
