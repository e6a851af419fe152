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

/// Stable error codes. Numbers never change once released; new codes take new numbers.
/// Bands: 1xx input/CLI, 2xx I/O, HDF5 and dump schema, 3xx packing host guards,
/// 4xx numeric formats and descriptors, 9xx internal. docs/error-codes.md lists them all
/// (a unit test keeps that table complete).
enum class ErrorCode : int {
  kOk = 0,  ///< no error

  kUsage = 100,            ///< bad command-line flags or arguments
  kInvalidArgument = 101,  ///< a library call got an argument outside its documented range
  kOutputExists = 102,     ///< refusing to overwrite an existing output file
  kFileNotFound = 103,     ///< an input path does not exist or is not a regular file
  kInterrupted = 104,      ///< stopped by SIGINT or SIGTERM (exit 128 + signal)

  kIo = 200,                  ///< the operating system failed a read, write, map or stat
  kNotHdf5 = 201,             ///< the file is not an HDF5 file (or is truncated before its superblock)
  kHdf5 = 202,                ///< the HDF5 library failed (corrupt or truncated file); message has its error
  kHdf5Crashed = 203,         ///< the HDF5 library crashed reading the file (isolated: the file is corrupt)
  kHdf5Hung = 204,            ///< the HDF5 library made no progress within the watchdog's time
  kReportWrite = 205,         ///< the report could not be written (exit 5 unless the verdict is FAIL)
  kExternalLink = 210,        ///< an external link; refused without opening its target
  kExternalStorage = 211,     ///< a dataset whose raw data lives in external files
  kVirtualDataset = 212,      ///< a virtual dataset (VDS); a missing source would read as zeros
  kFilterRefused = 213,       ///< a filter outside deflate/shuffle/fletcher32
  kLayoutRefused = 214,       ///< a storage layout other than contiguous, compact or chunked
  kLinkRefused = 215,         ///< a user-defined or dangling link
  kObjectAliased = 216,       ///< two names (hard links) for one HDF5 object
  kTreeLimit = 217,           ///< the group tree is deeper or has more objects than the limits
  kStorageBomb = 218,         ///< a dataset declares far more data than the file stores or can expand to
  kDatatypeRefused = 220,     ///< a datatype the format does not allow for that object
  kMissingAttribute = 221,    ///< a required attribute is absent
  kAttributeInvalid = 222,    ///< an attribute has the wrong type or an invalid value
  kMissingMember = 223,       ///< a required dataset or group is absent
  kShapeMismatch = 224,       ///< a dataset's shape disagrees with the attributes or other datasets
  kSizeOverflow = 225,        ///< dims whose element or byte count overflows 64 bits
  kMemoryLimit = 226,         ///< a read would exceed the configured memory limit
  kSchemaUnknown = 227,       ///< the root does not declare ncert_schema = "ncert-dump"
  kSchemaVersion = 228,       ///< an ncert_schema_version this build does not know
  kVocabMismatch = 230,       ///< two runs to compare have different vocabularies
  kNoCommonRuns = 231,        ///< two dumps share no run or tensor to compare
  kWitnessFileInvalid = 232,  ///< a witness file is not one ncert wrote
  kVocabFileInvalid = 233,    ///< a --vocab file is neither a JSON list of strings nor a tokenizer.json

  kGuardRowOutOfRange = 300,       ///< a selector row is not in [0, M) (or is < -1)
  kGuardDuplicateRow = 301,        ///< two physical slots select the same original row
  kGuardCapExceeded = 302,         ///< a request gathers more rows than cap
  kGuardNotPrefix = 303,           ///< a request's selected rows are not its first c rows
  kGuardCommitMismatch = 304,      ///< commit_counts disagree with the selector
  kGuardTooFewSlots = 305,         ///< the committed rows do not fit in the P physical slots
  kGuardStrideBelowWidth = 306,    ///< a row stride is smaller than the valid width
  kGuardExtentTooSmall = 307,      ///< a buffer or scratch is shorter than its geometry needs
  kGuardSegmentTable = 308,        ///< weight segments leave gaps, overlap or miss the total N
  kGuardAf4Geometry = 309,         ///< AF4 group size does not divide K, or codes/scales shapes wrong
  kGuardUnsupported = 310,         ///< a format/epilogue/output combination the helper cannot run
  kGuardPartialOverlap = 311,      ///< two buffers overlap without being the same buffer
  kGuardOutputAliasesInput = 312,  ///< the output buffer overlaps the input X
  kGuardMisaligned = 313,          ///< a buffer base address is not aligned for the kernel
  kGuardWalkSplit = 314,           ///< k_walk split:<P> with K not a multiple of P
  kGuardPlanShape = 315,           ///< R, B, cap or P outside the helper's limits or inconsistent
  kGuardCapacity = 316,            ///< no compiled width bucket can hold the prompt
  kGuardCanaryClobbered = 317,     ///< a canary byte around a buffer changed (out-of-bounds write)

  kFormatUnknown = 400,          ///< a weight segment format other than af4, bf16, f32
  kAf4VariantUnknown = 401,      ///< AF4 variant other than affine, codebook
  kAf4CodebookUnknown = 402,     ///< AF4 codebook other than nf4, af4-64, custom
  kAf4PackingUnknown = 403,      ///< AF4 packing other than u32-lsb, u8-msb, u8-lsb
  kAf4DequantUnknown = 404,      ///< AF4 dequant other than exact, f32, output, folded
  kAccumulatorUnknown = 405,     ///< accumulator other than f32-rn, f32-rz, matrix-unit, u=<x>
  kKWalkInvalid = 406,           ///< k_walk other than seq, seq-fma, split:<P>[:fma]
  kEpilogueUnknown = 407,        ///< epilogue other than none, bias, residual, bias+residual
  kOutputDtypeUnknown = 408,     ///< output_dtype other than f32, bf16 (or residual_at invalid)
  kPolicyInvalid = 409,          ///< a comparison policy string that does not parse
  kOutputRoundingUnknown = 410,  ///< output_rounding other than rne, rz, any
  kDequantOpUnknown = 411,       ///< AF4 dequant_op other than fma, mul-add, either

  kInternal = 900,  ///< a bug in ncert: an invariant failed
};

/// "kGuardDuplicateRow" -> "guard-duplicate-row": the stable, printable name of a code.
std::string_view error_name(ErrorCode code);
/// One line saying what the code means (the ///< text above).
std::string_view error_description(ErrorCode code);
/// Every error code (kOk excluded), in numeric order (for docs and tests).
const std::vector<ErrorCode>& all_error_codes();
/// The process exit code the CLI maps an error to (docs/cli.md): 2 usage, 3 input refused,
/// 4 internal, 5 report not written, 130/143 interrupted.
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
