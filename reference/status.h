// This header defines ncert's one error vocabulary: ErrorCode (stable numbers, in bands),
// Status (a code plus a message carrying the numbers) and Result<T> (a value or a Status).
// It lives in reference/ because reference/ is the bottom of the module layering; packing/,
// certify/ and fixtures/ all use it. A check's verdict is never a Status: Status means "the tool
// could not decide" (bad input, I/O, a tripped guard in an API call), a verdict is data.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace ncert {

/// Stable error codes, one enumerator per row of reference/error_codes.h (the one table of
/// numbers, names, exit codes and descriptions). Numbers never change once released; new codes
/// take new numbers. Bands: 1xx input/CLI, 2xx I/O, HDF5 and dump schema, 3xx packing host
/// guards, 4xx numeric formats and descriptors, 9xx internal. docs/error-codes.md lists them all
/// (written from the table by ncert-docgen).
enum class ErrorCode : int {
#define NCERT_ERROR_CODE(enumerator, number, name, exit, description) enumerator = (number),
#include "reference/error_codes.h"
#undef NCERT_ERROR_CODE
};

/// "kGuardDuplicateRow" -> "guard-duplicate-row": the stable, printable name of a code.
std::string_view error_name(ErrorCode code);
/// One line saying what the code means (its row's description).
std::string_view error_description(ErrorCode code);
/// Every error code (kOk excluded), in numeric order (for docs and tests).
const std::vector<ErrorCode>& all_error_codes();
/// The process exit code the CLI maps an error to (its row's exit; docs/cli.md): 0 for kOk,
/// 2 usage, 3 input refused, 4 internal, 5 report not written, 130 interrupted (the CLI exits
/// 128 + the signal it actually received, so 143 for SIGTERM).
int exit_code_for(ErrorCode code);

/// The result of an operation that can fail: ok, or a code with a message that names the
/// object and the offending numbers ("row 17 >= rows 16 in /projections/q/selector").
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "error guard-duplicate-row (301): <message>".
  std::string to_string() const;
  /// "guard-duplicate-row: <message>": the code's name and the message, for a check's reason or
  /// a report line, where the number and the word "error" would be noise.
  std::string named_message() const;

  /// Prefix the message with more context ("while reading /logits/a: ...").
  Status with_context(std::string_view context) const;

  /// Low-level detail for --verbose (the HDF5 library's own error chain), never the first line.
  const std::string& detail() const { return detail_; }
  Status with_detail(std::string detail) const {
    Status s = *this;
    s.detail_ = std::move(detail);
    return s;
  }

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
  std::string detail_;
};

/// A value or an error. Alias to std::expected once the project moves to C++23.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design, like std::expected
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) {
      v_ = Status(ErrorCode::kInternal, "Result constructed from an ok Status without a value");
    }
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

namespace detail {
[[noreturn]] void assert_fail(const char* cond, const char* msg, const char* file, int line);
}  // namespace detail

}  // namespace ncert

/// Always-on invariant check for programming errors (never for user-triggerable conditions).
#define NCERT_ASSERT(cond, msg)                                                \
  do {                                                                         \
    if (!(cond)) ::ncert::detail::assert_fail(#cond, msg, __FILE__, __LINE__); \
  } while (0)

#ifndef NDEBUG
#define NCERT_DASSERT(cond, msg) NCERT_ASSERT(cond, msg)
#else
#define NCERT_DASSERT(cond, msg) \
  do {                           \
  } while (0)
#endif

#define NCERT_UNREACHABLE(msg) ::ncert::detail::assert_fail("unreachable", msg, __FILE__, __LINE__)

#define NCERT_CONCAT_INNER(a, b) a##b
#define NCERT_CONCAT(a, b) NCERT_CONCAT_INNER(a, b)

/// Return the Status of `expr` from the enclosing function if it is not ok.
#define NCERT_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::ncert::Status ncert_status_ = (expr);        \
    if (!ncert_status_.ok()) return ncert_status_; \
  } while (0)

/// `NCERT_ASSIGN_OR_RETURN(auto x, f());` binds the value of a Result or returns its Status.
#define NCERT_ASSIGN_OR_RETURN(lhs, expr) NCERT_ASSIGN_OR_RETURN_IMPL(NCERT_CONCAT(ncert_result_, __LINE__), lhs, expr)
// NOLINTBEGIN(bugprone-macro-parentheses): lhs is a declaration (`auto x`) and tmp a new name;
// neither can be parenthesized.
#define NCERT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
