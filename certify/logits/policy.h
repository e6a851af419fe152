// This header defines the verdict policies of `ncert compare`: how close two runs' logits (or
// two dumps' tensors) must be. bitwise (default), ulp:N, abs:A[,rel:R], kl:X, top1.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "reference/status.h"

namespace ncert::certify {

struct Policy {
  enum class Kind : std::uint8_t { kBitwise, kUlp, kAbs, kKl, kTop1 } kind = Kind::kBitwise;
  std::uint64_t ulp = 0;
  double abs = 0;
  double rel = 0;
  double kl = 0;
  std::string text = "bitwise";

  /// Policies judged element by element (bitwise, ulp, abs) rather than row by row (kl, top1).
  bool element_wise() const { return kind == Kind::kBitwise || kind == Kind::kUlp || kind == Kind::kAbs; }
};
/// "bitwise", "ulp:N", "abs:A", "abs:A,rel:R", "kl:X", "top1" (kPolicyInvalid otherwise).
Result<Policy> parse_policy(std::string_view s);
/// Tensor policies are bitwise, ulp:N or abs:A[,rel:R] (kl and top1 need logits).
Result<Policy> parse_tensor_policy(std::string_view s);

}  // namespace ncert::certify
