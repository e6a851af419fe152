// This header defines the alias / host-guard / identity sweep of the packing helper behind
// `ncert sweep`: a generated case table (every format and mix, R = 1..8, every commit pattern
// class, both output types, each epilogue and residual stage, in-place residual, padded strides
// up to 16640/16480, every K walk), a runner that executes one case with every buffer wrapped in
// canary bytes and NaN-patterned padding, and a deterministic summary with the first failure's
// one-line repro (`ncert sweep --case "<key>"`).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "packing/helper.h"

namespace ncert::packing {

enum class CaseKind : std::uint8_t {
  kIdentity,  ///< valid plan: packed == unpacked on selected rows, everything else untouched
  kGuard,     ///< planted violation: the expected guard code, no byte touched
  kWidth,     ///< width buckets: shared weights, identical rows at every width
};

struct SweepCase {
  CaseKind kind = CaseKind::kIdentity;
  Index requests = 1;
  Index block_rows = 4;
  Index cap = 2;
  Index slots = 8;
  std::string commit = "full";   ///< full, one, ragged, single, alternate, decreasing, empty
  std::string formats = "bf16";  ///< bf16, f32, af4a, af4c, mix
  Index k = 64;
  Index n = 32;
  Index in_pad = 0;
  Index out_pad = 0;
  Index compact_pad = 0;
  DType x = DType::kBf16;
  DType output = DType::kF32;
  DType bias = DType::kF32;
  DType residual = DType::kF32;
  reference::Epilogue epilogue = reference::Epilogue::kNone;
  reference::ResidualAt at = reference::ResidualAt::kF32;
  bool inplace = false;
  std::string walk;      ///< empty: undeclared (the kernel uses seq-fma)
  bool permute = false;  ///< slots filled in a shuffled order instead of request order
  std::string guard;     ///< kGuard/kWidth: the planted violation (see guard_names())
  std::uint64_t seed = 1;

  /// "pack(kind=identity,R=3,B=4,...,seed=7)": the repro key, parsed back by parse_case.
  std::string key() const;
};

/// Parses a key written by SweepCase::key() (kUsage with the offending field otherwise).
Result<SweepCase> parse_case(std::string_view key);

/// The planted violations a guard case can name, with the code each must produce.
const std::vector<std::pair<std::string, ErrorCode>>& guard_names();

/// The default table (docs/packing.md "sweep"): 15,840 identity cases over R x commit class x
/// (cap, B) x format mix x output type x epilogue variant, plus empty-commit, wide-stride,
/// width-bucket and guard cases.
std::vector<SweepCase> default_cases();

struct CaseResult {
  bool pass = true;
  std::string failure;    ///< first problem found, with the numbers
  bool compared = false;  ///< selected rows were compared bit for bit (packed vs unpacked, or widths)
  Index rows_compared = 0;
  bool alias = false;                ///< in-place residual case
  ErrorCode guard = ErrorCode::kOk;  ///< the code a guard case produced
  bool fell_back = false;            ///< an unsupported plan ran the unpacked path
};

/// The helper entry point the sweep exercises; execute() by default. Self-tests pass
/// deliberately faulty helpers to prove the sweep catches each fault.
using ExecuteFn = std::function<Result<PathTaken>(const PackPlan&, const LinearKernel&, const HostBuffers&)>;

CaseResult run_case(const SweepCase& c, const ExecuteFn& helper = execute);

/// Each population under its own name: identity cases (a separate output buffer), alias cases
/// (the residual added in place), width-bucket cases (rows at two compiled widths).
struct SweepSummary {
  Index cases = 0;
  Index passed = 0;
  Index failed = 0;
  Index identity_comparisons = 0;  ///< identity cases whose selected rows matched bit for bit
  Index rows_compared = 0;         ///< their selected rows
  Index alias_cases = 0;
  Index alias_comparisons = 0;  ///< in-place cases whose selected rows matched bit for bit
  Index alias_rows = 0;
  Index guard_cases = 0;
  Index width_cases = 0;
  Index width_rows = 0;  ///< rows compared across widths
  Index fallbacks = 0;
  std::set<ErrorCode> guards_covered;
  Index first_failure = -1;  ///< index into the case list
  std::string first_failure_key;
  std::string first_failure_reason;
  /// Failures per kind, for the report's per-kind checks.
  Index failed_identity = 0, failed_alias = 0, failed_guard = 0, failed_width = 0;
};

/// Runs the cases on the OpenMP team; the summary does not depend on the thread count.
SweepSummary sweep_cases(const std::vector<SweepCase>& cases, const ExecuteFn& helper = execute);

}  // namespace ncert::packing
