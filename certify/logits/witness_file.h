// This header defines the witness file, written by `ncert witness --out` and read back by
// `ncert witness --verify`, in one place: HDF5, root attributes as a dump's with
// ncert_schema = "ncert-witness", plus source_dump and source_xxh3_128 (the dump's whole-file
// hash). Per run a group /witness/<run> with attributes vocab, tie_break, error_source (and
// logit_error when absolute), and datasets of length T: row, position (i64), token, runner_up,
// ties (i32), logit, runner_up_logit (f32), class (u8: 0 certified, 1 near-tie, 2 tie,
// 3 unbounded, 255 failed) and row_xxh3 [T, 16] (u8, the canonical XXH3-128 bytes of each row).
// Margins are not stored: they are exactly logit - runner_up_logit in f64.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "certify/io/dump_reader.h"
#include "certify/logits/witness.h"

namespace ncert::certify {

/// The class code stored for a witness (255 for a failed one).
std::uint8_t stored_class(const Witness& w);
/// What a stored class code means: "certified", "near-tie", "tie", "unbounded", "failed", or
/// "unknown class code N".
std::string stored_class_name(std::uint8_t code);

/// Writes the witnesses of `runs`, made from `dump` (whose whole-file hash is `dump_hash`).
/// kOutputExists when the file exists and overwrite is false.
Status write_witness_file(const std::string& path, bool overwrite, const DumpModel& dump, const std::string& dump_hash,
                          const std::vector<RunWitnesses>& runs);

/// One run's stored witnesses, every dataset of length T.
struct StoredRun {
  std::string run;
  std::optional<double> logit_error;  ///< the absolute error model they were made with (finite, >= 0)
  Index vocab = 0;                    ///< the run's vocabulary when witnessed (attribute `vocab`)
  std::vector<std::int64_t> row, position;
  std::vector<std::int32_t> token, runner_up, ties;
  std::vector<float> logit, runner_up_logit;
  std::vector<std::uint8_t> cls;
  std::vector<std::uint8_t> row_xxh3;   ///< T x 16
  std::string row_hash(Index t) const;  ///< canonical hex of row t's stored hash
};

class WitnessFile {
 public:
  /// Opens and validates the container; anything that is not a witness file ncert wrote is
  /// kWitnessFileInvalid, except a path that is not a regular file (kNotRegularFile) or a file
  /// far past its HDF5 end (kTrailingData), refused as every input is.
  static Result<WitnessFile> open(const std::string& path, const ReaderOptions& options);
  /// The stored runs, sorted by name.
  const std::vector<std::string>& runs() const { return runs_; }
  /// Reads run `run`, which must hold `tokens` witnesses (kWitnessFileInvalid naming the
  /// dataset otherwise).
  Result<StoredRun> read(const std::string& run, Index tokens) const;
  /// The number of witnesses stored for a run (the length of its token dataset; 0 if absent).
  Index stored_tokens(const std::string& run) const;
  /// The whole-file XXH3-128 of the dump the witnesses were made from (source_xxh3_128).
  std::string source_hash() const;

 private:
  explicit WitnessFile(DumpReader reader, std::string path);
  DumpReader reader_;
  std::string path_;
  std::vector<std::string> runs_;
};

}  // namespace ncert::certify
