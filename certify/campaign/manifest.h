// This header defines a campaign manifest: the dumps to check, logits pairs to compare, fork
// pairs, dumps to witness and witness files to verify, each an entry with its own options over
// shared defaults (docs/cli.md "ncert campaign"). JSON; paths are relative to the manifest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "certify/report/report_file.h"
#include "reference/status.h"

namespace ncert::certify {

enum class EntryKind : std::uint8_t { kCheck, kCompare, kForks, kWitness, kVerify };

/// "check", "compare", "forks", "witness", "verify": the command an entry runs.
std::string_view entry_kind_name(EntryKind k);

struct CampaignEntry {
  std::string id;  ///< unique in the manifest
  EntryKind kind = EntryKind::kCheck;
  std::vector<std::string> inputs;  ///< resolved paths: 1 (check, witness) or 2 (compare, forks, verify)
  nlohmann::ordered_json options;   ///< the defaults this kind accepts, then the entry's own
};

struct Manifest {
  std::string path;
  std::string name;
  std::string xxh3_128;  ///< of the manifest file's bytes (the journal is bound to it)
  std::vector<CampaignEntry> entries;
};

/// Reads and validates a manifest: kUsage naming the entry and key for anything unknown or
/// malformed (a typo must not silently drop an option), kFileNotFound for a missing manifest,
/// kNotRegularFile for one that is a FIFO, socket or device (never blocking on it).
Result<Manifest> load_manifest(const std::string& path);

/// Every file an entry reads, as resolved: its inputs, its weights dump (`check`) and its
/// vocabulary (`forks`), each named by the entry ("entry step-3", "entry step-3 weights"), so
/// that no output of the campaign can be one of them (docs/cli.md "Reports and exit status");
/// the same files as input_pins.h's entry_files, with a name for messages.
std::vector<NamedPath> named_entry_files(const CampaignEntry& entry);

}  // namespace ncert::certify
