// The copies of the error-code table (reference/error_codes.h) that live outside C++, as
// ncert-docgen writes them (generated.h registers them as parts): the per-band tables of
// docs/error-codes.md, the code/name pairs of docs/report.schema.json and the Python writer's
// ERROR_CODES. Each is rendered from the public API of reference/status.h (all_error_codes,
// error_name, error_description, exit_code_for), which the table itself fills.
#pragma once

#include <string>

namespace ncert::cli {

/// docs/error-codes.md, section "error-codes": per band, its heading and a
/// `| code | name | meaning |` table.
std::string error_codes_markdown();

/// docs/report.schema.json at /$defs/error/oneOf: one {code, name} pairing per code (JSON text),
/// so a report can pair a code only with its own name; the description adds the exit code.
std::string error_pairs_json();

/// python/ncert_dump/errors.py, section "error-codes": `ERROR_CODES = {name: number, ...}`.
std::string error_codes_python();

}  // namespace ncert::cli
