// This header defines the option table of each command that has options of its own: the one
// place they are written down (option_table.h says who reads them). The options every command
// shares (--json, --threads, ...) are the CLI's (certify/cli/common_options.h), a campaign's own
// (--workers, --journal, --resume) the campaign's, and demo's the demo's.
#pragma once

#include "certify/commands/check.h"
#include "certify/commands/compare.h"
#include "certify/commands/forks.h"
#include "certify/commands/inspect.h"
#include "certify/commands/option_table.h"
#include "certify/commands/sweep.h"
#include "certify/commands/witness.h"

namespace ncert::certify {

const OptionTable<CheckCommandOptions>& check_option_table();
const OptionTable<CompareOptions>& compare_option_table();
const OptionTable<ForksOptions>& forks_option_table();
/// `ncert witness` (and a campaign's witness entries); --verify and its lambda are the CLI's.
const OptionTable<WitnessOptions>& witness_option_table();
/// A campaign's verify entries (`ncert witness --verify` on the command line).
const OptionTable<VerifyOptions>& verify_option_table();
const OptionTable<InspectOptions>& inspect_option_table();
const OptionTable<SweepOptions>& sweep_option_table();

/// "a:b" as a run pair (kUsage "expected a:b, got X" otherwise).
Result<std::pair<std::string, std::string>> parse_run_pair(std::string_view text);

}  // namespace ncert::certify
