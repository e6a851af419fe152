// This header defines the verdict policies of `ncert compare`: how close two runs' logits (or
// two dumps' tensors) must be. bitwise, ulp:N, abs:A[,rel:R], kl:X, top1, forks. Without
// --policy, compare takes bitwise, or forks where the two runs' logits differ in dtype.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "certify/io/dump_model.h"
#include "reference/status.h"

namespace ncert::certify {

struct Policy {
  enum class Kind : std::uint8_t { kBitwise, kUlp, kAbs, kKl, kTop1, kForks } kind = Kind::kBitwise;
  std::uint64_t ulp = 0;
  double abs = 0;
  double rel = 0;
  double kl = 0;
  std::string text = "bitwise";

  /// Policies judged element by element (bitwise, ulp, abs) rather than row by row (kl, top1)
  /// or by the token streams (forks).
  bool element_wise() const { return kind == Kind::kBitwise || kind == Kind::kUlp || kind == Kind::kAbs; }
};
/// "bitwise", "ulp:N", "abs:A", "abs:A,rel:R", "kl:X", "top1", "forks" (kPolicyInvalid
/// otherwise).
Result<Policy> parse_policy(std::string_view s);
/// Tensor policies are bitwise, ulp:N or abs:A[,rel:R] (kl, top1 and forks need logits).
Result<Policy> parse_tensor_policy(std::string_view s);
/// A tensor's `compare` attribute (non-empty) as its policy; kPolicyInvalid saying
/// `compare = "<value>": ...` when it is not a tensor policy. compare refuses such a dump with
/// it (after the file and the tensor's path), inspect lists it as one of the dump's errors.
Result<Policy> tensor_attribute_policy(const TensorInfo& tensor);

}  // namespace ncert::certify
