// This header defines the comparison of one /tensors/<name> between two dumps (KV cache,
// recurrent state), element by element in blocks of about 16 MiB along the first dimension,
// under a tensor policy (bitwise, ulp:N, abs:A[,rel:R]); a failure names the element's
// multi-index.
#pragma once

#include "certify/io/dump_reader.h"
#include "certify/logits/policy.h"
#include "certify/report/check_result.h"

namespace ncert::certify {

/// `overridden`: the policy came from --tensor-policy (else from A's compare attribute, noted
/// when B's differs). Errors only for read failures.
Result<CheckResult> tensor_check(const DumpReader& a, const TensorInfo& ta, const DumpReader& b, const TensorInfo& tb,
                                 const Policy& policy, bool overridden);

}  // namespace ncert::certify
