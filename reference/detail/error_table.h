// The rules every row of the error-code table (reference/error_codes.h) must follow, as a
// constexpr check: status.cc static_asserts them on the real table, and the unit test shows each
// rule catching a planted bad row. The X-macro already makes the enum and the name table one
// list (no enumerator can lack a row); these rules catch what a hand-written row can still get
// wrong: a reused or out-of-order number, a name that is empty, reused or not its enumerator's,
// an exit code outside docs/cli.md's list, a description that would break the generated copies.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace ncert::detail {

/// One NCERT_ERROR_CODE row; `enumerator` is the stringized identifier ("kGuardDuplicateRow").
struct ErrorCodeRow {
  std::string_view enumerator;
  int number;
  std::string_view name;
  int exit_code;
  std::string_view description;
};

/// The first rule a table breaks: `row` is its index and `what` says which rule; `what` is empty
/// when the table is valid.
struct ErrorTableProblem {
  std::size_t row = 0;
  std::string_view what;
};

/// Whether `name` is `enumerator` without its k, in kebab case: every upper-case letter after
/// the first starts a new word and digits stay with theirs (kHdf5Crashed -> hdf5-crashed,
/// kKWalkInvalid -> k-walk-invalid).
constexpr bool is_kebab_name_of(std::string_view enumerator, std::string_view name) {
  if (enumerator.size() < 2 || enumerator[0] != 'k') return false;
  std::size_t at = 0;
  for (std::size_t i = 1; i < enumerator.size(); ++i) {
    const char c = enumerator[i];
    const bool upper = c >= 'A' && c <= 'Z';
    if (upper && i > 1) {
      if (at >= name.size() || name[at] != '-') return false;
      ++at;
    }
    const char lower = upper ? static_cast<char>(c - 'A' + 'a') : c;
    if (at >= name.size() || name[at] != lower) return false;
    ++at;
  }
  return at == name.size();
}

/// The exit codes docs/cli.md gives an error: 2 usage, 3 input refused, 4 internal, 5 report
/// not written, 130 interrupted (128 + SIGINT).
constexpr bool is_documented_exit(int exit_code) {
  return exit_code == 2 || exit_code == 3 || exit_code == 4 || exit_code == 5 || exit_code == 130;
}

/// Checks the table row by row. Row 0 must be kOk (0, "ok", exit 0); every later row has a number
/// in 100..999 above the previous row's, so numbers are unique and in order.
constexpr ErrorTableProblem error_table_problem(std::span<const ErrorCodeRow> rows) {
  if (rows.empty()) return {0, "the table is empty"};
  const ErrorCodeRow& ok = rows[0];
  if (ok.enumerator != "kOk" || ok.number != 0 || ok.name != "ok" || ok.exit_code != 0) {
    return {0, "the first row is not kOk, 0, \"ok\", exit 0"};
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const ErrorCodeRow& r = rows[i];
    if (i > 0 && (r.number < 100 || r.number > 999)) return {i, "the number is outside 100..999"};
    if (i > 0 && r.number <= rows[i - 1].number) return {i, "the number is not above the previous row's"};
    if (r.name.empty()) return {i, "the name is empty"};
    if (!is_kebab_name_of(r.enumerator, r.name)) return {i, "the name is not its enumerator in kebab case"};
    for (std::size_t j = 0; j < i; ++j) {
      if (rows[j].name == r.name) return {i, "the name is an earlier row's"};
    }
    if (i > 0 && !is_documented_exit(r.exit_code)) return {i, "the exit code is not one docs/cli.md lists"};
    if (r.description.empty()) return {i, "the description is empty"};
    // The description becomes a Markdown table cell and a Python string (docs/error-codes.md,
    // python/ncert_dump/errors.py): one line, no cell separator.
    if (r.description.find_first_of("|\n") != std::string_view::npos) {
      return {i, "the description has a '|' or a line break"};
    }
  }
  return {};
}

}  // namespace ncert::detail
