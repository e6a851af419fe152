// This header defines how a manifest entry becomes the options of its command, with the same
// meaning and ranges as the command-line flags (docs/cli.md): a campaign entry certifies
// exactly what `ncert <command>` with those flags certifies.
#pragma once

#include "certify/campaign/manifest.h"
#include "certify/commands/check.h"
#include "certify/commands/compare.h"
#include "certify/commands/forks.h"
#include "certify/commands/witness.h"

namespace ncert::certify {

/// kUsage naming the entry and option for a value of the wrong type or out of range.
Result<CheckCommandOptions> check_options(const CampaignEntry& e, const ReaderOptions& reader);
Result<CompareOptions> compare_options(const CampaignEntry& e, const ReaderOptions& reader);
Result<ForksOptions> forks_options(const CampaignEntry& e, const ReaderOptions& reader);
Result<WitnessOptions> witness_options(const CampaignEntry& e, const ReaderOptions& reader);
Result<VerifyOptions> verify_options(const CampaignEntry& e, const ReaderOptions& reader);

/// The manifest keys an entry of this kind takes: its command's option table's.
std::vector<std::string> entry_option_keys(EntryKind kind);

/// Validates every option of every entry up front (a campaign never fails hours in on a typo).
Status validate_entries(const Manifest& m);

}  // namespace ncert::certify
