// This header defines `ncert inspect`: list what a dump holds (groups, datasets with shape,
// type, storage and content hash, attributes) and every validation finding. A valid dump
// gives a PASS report (exit 0); a refused one carries the first error (exit 3) and still lists
// everything that could be surveyed safely.
#pragma once

#include <string>

#include "certify/io/dump_reader.h"
#include "certify/report/report.h"

namespace ncert::certify {

struct InspectOptions {
  std::string dump;
  ReaderOptions reader;
  bool skip_hashes = false;  ///< --no-hashes: hash no dataset (hashing reads all raw data)
};

/// Never fails for a bad dump (that is the report's `error`); fails only for internal errors.
Result<Report> run_inspect(const InspectOptions& options);

}  // namespace ncert::certify
