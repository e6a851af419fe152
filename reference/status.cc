#include "reference/status.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace ncert {

namespace {

struct CodeInfo {
  ErrorCode code;
  std::string_view name;
  std::string_view description;
};

// One row per code, in numeric order. The switch-free table keeps names and descriptions next
// to each other; error_name() asserts every enumerator has a row (all_error_codes_are_named test).
constexpr CodeInfo kCodes[] = {
    {ErrorCode::kOk, "ok", "no error"},
    {ErrorCode::kUsage, "usage", "bad command-line flags or arguments"},
    {ErrorCode::kInvalidArgument, "invalid-argument", "a library call got an argument outside its documented range"},
    {ErrorCode::kOutputExists, "output-exists", "refusing to overwrite an existing output file"},
    {ErrorCode::kFileNotFound, "file-not-found", "an input path does not exist or is not a regular file"},
    {ErrorCode::kInterrupted, "interrupted", "stopped by SIGINT or SIGTERM (exit 128 + signal)"},
    {ErrorCode::kIo, "io", "the operating system failed a read, write, map or stat"},
    {ErrorCode::kNotHdf5, "not-hdf5", "the file is not an HDF5 file (or is truncated before its superblock)"},
    {ErrorCode::kHdf5, "hdf5", "the HDF5 library failed (corrupt or truncated file)"},
    {ErrorCode::kHdf5Crashed, "hdf5-crashed",
     "the HDF5 library crashed reading the file (isolated: the file is corrupt)"},
    {ErrorCode::kHdf5Hung, "hdf5-hung", "the HDF5 library made no progress within the watchdog's time"},
    {ErrorCode::kReportWrite, "report-write", "the report could not be written (exit 5 unless the verdict is FAIL)"},
    {ErrorCode::kExternalLink, "external-link", "an external link; refused without opening its target"},
    {ErrorCode::kExternalStorage, "external-storage", "a dataset whose raw data lives in external files"},
    {ErrorCode::kVirtualDataset, "virtual-dataset", "a virtual dataset (VDS); a missing source would read as zeros"},
    {ErrorCode::kFilterRefused, "filter-refused", "a filter outside deflate/shuffle/fletcher32"},
    {ErrorCode::kLayoutRefused, "layout-refused", "a storage layout other than contiguous, compact or chunked"},
    {ErrorCode::kLinkRefused, "link-refused", "a user-defined or dangling link"},
    {ErrorCode::kObjectAliased, "object-aliased", "two names (hard links) for one HDF5 object"},
    {ErrorCode::kTreeLimit, "tree-limit", "the group tree is deeper or has more objects than the limits"},
    {ErrorCode::kStorageBomb, "storage-bomb", "a dataset declares far more data than the file stores or can expand to"},
    {ErrorCode::kDatatypeRefused, "datatype-refused", "a datatype the format does not allow for that object"},
    {ErrorCode::kMissingAttribute, "missing-attribute", "a required attribute is absent"},
    {ErrorCode::kAttributeInvalid, "attribute-invalid", "an attribute has the wrong type or an invalid value"},
    {ErrorCode::kMissingMember, "missing-member", "a required dataset or group is absent"},
    {ErrorCode::kShapeMismatch, "shape-mismatch", "a dataset's shape disagrees with the attributes or other datasets"},
    {ErrorCode::kSizeOverflow, "size-overflow", "dims whose element or byte count overflows 64 bits"},
    {ErrorCode::kMemoryLimit, "memory-limit", "a read would exceed the configured memory limit"},
    {ErrorCode::kSchemaUnknown, "schema-unknown", "the root does not declare ncert_schema = \"ncert-dump\""},
    {ErrorCode::kSchemaVersion, "schema-version", "an ncert_schema_version this build does not know"},
    {ErrorCode::kVocabMismatch, "vocab-mismatch", "two runs to compare have different vocabularies"},
    {ErrorCode::kNoCommonRuns, "no-common-runs", "two dumps share no run or tensor to compare"},
    {ErrorCode::kWitnessFileInvalid, "witness-file-invalid", "a witness file is not one ncert wrote"},
    {ErrorCode::kVocabFileInvalid, "vocab-file-invalid",
     "a --vocab file is neither a JSON list of strings nor a tokenizer.json"},
    {ErrorCode::kGuardRowOutOfRange, "guard-row-out-of-range", "a selector row is not in [0, M) (or is < -1)"},
    {ErrorCode::kGuardDuplicateRow, "guard-duplicate-row", "two physical slots select the same original row"},
    {ErrorCode::kGuardCapExceeded, "guard-cap-exceeded", "a request gathers more rows than cap"},
    {ErrorCode::kGuardNotPrefix, "guard-not-prefix", "a request's selected rows are not its first c rows"},
    {ErrorCode::kGuardCommitMismatch, "guard-commit-mismatch", "commit_counts disagree with the selector"},
    {ErrorCode::kGuardTooFewSlots, "guard-too-few-slots", "the committed rows do not fit in the P physical slots"},
    {ErrorCode::kGuardStrideBelowWidth, "guard-stride-below-width", "a row stride is smaller than the valid width"},
    {ErrorCode::kGuardExtentTooSmall, "guard-extent-too-small",
     "a buffer or scratch is shorter than its geometry needs"},
    {ErrorCode::kGuardSegmentTable, "guard-segment-table", "weight segments leave gaps, overlap or miss the total N"},
    {ErrorCode::kGuardAf4Geometry, "guard-af4-geometry",
     "AF4 group size does not divide K, or codes/scales shapes wrong"},
    {ErrorCode::kGuardUnsupported, "guard-unsupported", "a format/epilogue/output combination the helper cannot run"},
    {ErrorCode::kGuardPartialOverlap, "guard-partial-overlap", "two buffers overlap without being the same buffer"},
    {ErrorCode::kGuardOutputAliasesInput, "guard-output-aliases-input", "the output buffer overlaps the input X"},
    {ErrorCode::kGuardMisaligned, "guard-misaligned", "a buffer base address is not aligned for the kernel"},
    {ErrorCode::kGuardWalkSplit, "guard-walk-split", "k_walk split:<P> with K not a multiple of P"},
    {ErrorCode::kGuardPlanShape, "guard-plan-shape", "R, B, cap or P outside the helper's limits or inconsistent"},
    {ErrorCode::kGuardCapacity, "guard-capacity", "no compiled width bucket can hold the prompt"},
    {ErrorCode::kGuardCanaryClobbered, "guard-canary-clobbered",
     "a canary byte around a buffer changed (out-of-bounds write)"},
    {ErrorCode::kFormatUnknown, "format-unknown", "a weight segment format other than af4, bf16, f32"},
    {ErrorCode::kAf4VariantUnknown, "af4-variant-unknown", "AF4 variant other than affine, codebook"},
    {ErrorCode::kAf4CodebookUnknown, "af4-codebook-unknown", "AF4 codebook other than nf4, af4-64, custom"},
    {ErrorCode::kAf4PackingUnknown, "af4-packing-unknown", "AF4 packing other than u32-lsb, u8-msb, u8-lsb"},
    {ErrorCode::kAf4DequantUnknown, "af4-dequant-unknown", "AF4 dequant other than exact, f32, output, folded"},
    {ErrorCode::kAccumulatorUnknown, "accumulator-unknown",
     "accumulator other than f32-rn, f32-rz, matrix-unit, u=<x>"},
    {ErrorCode::kKWalkInvalid, "k-walk-invalid", "k_walk other than seq, seq-fma, split:<P>[:fma]"},
    {ErrorCode::kEpilogueUnknown, "epilogue-unknown", "epilogue other than none, bias, residual, bias+residual"},
    {ErrorCode::kOutputDtypeUnknown, "output-dtype-unknown",
     "output_dtype other than f32, bf16 (or residual_at invalid)"},
    {ErrorCode::kPolicyInvalid, "policy-invalid", "a comparison policy string that does not parse"},
    {ErrorCode::kOutputRoundingUnknown, "output-rounding-unknown", "output_rounding other than rne, rz, any"},
    {ErrorCode::kDequantOpUnknown, "dequant-op-unknown", "AF4 dequant_op other than fma, mul-add, either"},
    {ErrorCode::kInternal, "internal", "a bug in ncert: an invariant failed"},
};

const CodeInfo* find_code(ErrorCode code) {
  for (const CodeInfo& info : kCodes) {
    if (info.code == code) return &info;
  }
  return nullptr;
}

}  // namespace

std::string_view error_name(ErrorCode code) {
  const CodeInfo* info = find_code(code);
  return info ? info->name : std::string_view("unknown-code");
}

std::string_view error_description(ErrorCode code) {
  const CodeInfo* info = find_code(code);
  return info ? info->description : std::string_view("unknown code");
}

const std::vector<ErrorCode>& all_error_codes() {
  static const std::vector<ErrorCode> codes = [] {
    std::vector<ErrorCode> v;
    for (const CodeInfo& info : kCodes) {
      if (info.code != ErrorCode::kOk) v.push_back(info.code);
    }
    return v;
  }();
  return codes;
}

int exit_code_for(ErrorCode code) {
  const int n = static_cast<int>(code);
  if (n == 0) return 0;
  if (code == ErrorCode::kInterrupted) return 130;
  if (code == ErrorCode::kReportWrite) return 5;
  if (n >= 100 && n < 200) return code == ErrorCode::kFileNotFound ? 3 : 2;
  if (n >= 900) return 4;
  return 3;
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  std::string s = "error ";
  s += error_name(code_);
  s += " (" + std::to_string(static_cast<int>(code_)) + "): ";
  s += message_;
  return s;
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
