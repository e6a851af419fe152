// This header defines the library entry point of `ncert forks A.h5 B.h5`: every run pair's
// wording forks (logits/forks.h), one check per fork, with token text when a vocabulary is given.
#pragma once

#include "certify/logits/forks.h"
#include "certify/report/report.h"

namespace ncert::certify {

/// Refusals (kVocabMismatch, kNoCommonRuns, an unreadable --vocab, unreadable dumps) are the
/// report's `error`.
Result<Report> run_forks(const ForksOptions& options);

}  // namespace ncert::certify
