#include "reference/status.h"

#include "reference/detail/error_table.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace ncert {

namespace {

// The table, expanded from reference/error_codes.h in numeric order (row 0 is kOk).
constexpr detail::ErrorCodeRow kRows[] = {
#define NCERT_ERROR_CODE(enumerator, number, name, exit, description) {#enumerator, number, name, exit, description},
#include "reference/error_codes.h"
#undef NCERT_ERROR_CODE
};

// A row that breaks a rule of reference/detail/error_table.h stops the build here; the unit test
// ErrorTable.TheRealTableFollowsEveryRule names the row and the rule.
static_assert(detail::error_table_problem(kRows).what.empty(), "reference/error_codes.h breaks a table rule");

const detail::ErrorCodeRow* find_row(ErrorCode code) {
  for (const detail::ErrorCodeRow& row : kRows) {
    if (row.number == static_cast<int>(code)) return &row;
  }
  return nullptr;
}

}  // namespace

std::string_view error_name(ErrorCode code) {
  const detail::ErrorCodeRow* row = find_row(code);
  return row ? row->name : std::string_view("unknown-code");
}

std::string_view error_description(ErrorCode code) {
  const detail::ErrorCodeRow* row = find_row(code);
  return row ? row->description : std::string_view("unknown code");
}

const std::vector<ErrorCode>& all_error_codes() {
  static const std::vector<ErrorCode> codes = [] {
    std::vector<ErrorCode> v;
    for (const detail::ErrorCodeRow& row : kRows) {
      if (row.number != 0) v.push_back(static_cast<ErrorCode>(row.number));
    }
    return v;
  }();
  return codes;
}

int exit_code_for(ErrorCode code) {
  // A value outside the enum (a cast from a bad integer) is a bug: exit 4 like kInternal.
  const detail::ErrorCodeRow* row = find_row(code);
  return row ? row->exit_code : 4;
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  std::string s = "error ";
  s += error_name(code_);
  s += " (" + std::to_string(static_cast<int>(code_)) + "): ";
  s += message_;
  return s;
}

std::string Status::named_message() const {
  if (ok()) return "ok";
  return std::string(error_name(code_)) + ": " + message_;
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_).with_detail(detail_);
}

namespace detail {
[[noreturn]] void assert_fail(const char* cond, const char* msg, const char* file, int line) {
  std::fprintf(stderr, "ncert: internal error: %s:%d: assertion '%s' failed: %s\n", file, line, cond, msg);
  // docs/cli.md: exit code 4 is "internal error (a bug in ncert)"; abort() would give 134.
  std::fflush(stderr);
  std::_Exit(4);
}
}  // namespace detail

}  // namespace ncert
