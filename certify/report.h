// This header defines the report every ncert command produces: the inputs with their
// content hashes, one CheckResult per check (id, kind, verdict, reason, stats, details) and
// top-level stats, rendered as a concise human summary or as the JSON report of
// cli-contract.md. Verdicts are values; an input the tool refused is carried as `error`.
// Reports are deterministic: only fields named timing_* may differ between identical runs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "certify/hash.h"
#include "reference/status.h"

namespace ncert::certify {

using Json = nlohmann::ordered_json;

enum class Verdict : std::uint8_t { kPass, kFail };
std::string_view verdict_name(Verdict v);

struct CheckResult {
  std::string id;    ///< "projections/gdn_in/identity", "logits/greedy/witness", ...
  std::string kind;  ///< one of the kinds of cli-contract.md
  Verdict verdict = Verdict::kPass;
  std::string reason;                ///< one line: what passed, or the first failure
  Json stats = Json::object();       ///< numbers a script can use
  std::vector<std::string> details;  ///< extra lines for the human summary (failures)
  bool always_show_details = false;  ///< print details on PASS too (forks explain themselves)
};

struct InputInfo {
  std::string path;
  std::string xxh3_128;  ///< hash of the whole file's bytes ("" if the file cannot be read)
};

/// The whole-file hashes of a command's inputs. Readers that stream a file's bytes anyway offer
/// them to cursor(i) (RowStream does), so those bytes are hashed as they go by; finish()
/// hashes the rest, one file per thread.
class InputHashes {
 public:
  explicit InputHashes(const std::vector<std::string>& paths);
  /// The cursor of input i; nullptr if the file cannot be opened (its reader reports why).
  FileHashCursor* cursor(std::size_t i);
  /// The inputs with their hashes ("" where a file cannot be read).
  std::vector<InputInfo> finish();

 private:
  std::vector<std::string> paths_;
  std::vector<std::optional<FileHashCursor>> cursors_;
};

/// InputHashes(paths).finish(): the inputs of a command that does not stream them.
std::vector<InputInfo> describe_inputs(const std::vector<std::string>& paths);

struct Report {
  std::string command;
  std::vector<InputInfo> inputs;
  std::vector<CheckResult> checks;
  Json stats = Json::object();  ///< top-level stats
  Json extra = Json::object();  ///< command-specific top-level members (inspect: datasets)
  std::optional<Status> error;  ///< set when an input was refused (exit 3)
  std::vector<std::string> preamble;  ///< lines printed before the checks (human summary)

  /// FAIL when any check failed or an input was refused.
  Verdict verdict() const;
  int failed_checks() const;
  /// The JSON report (cli-contract.md "JSON report").
  Json to_json() const;
  /// The human summary: preamble, one line per check (details under failures), verdict line.
  /// `only_failures` prints only failing checks (for --quiet).
  std::string to_text(bool only_failures) const;
  /// The process exit code: 0 pass, 1 fail, or the error's code (cli-contract.md).
  int exit_code() const;
  /// Records a refused input: `error`, and a failing "schema" check carrying its message.
  Report& refuse(const Status& status);
};

/// The ncert version string ("0.1.0").
std::string_view ncert_version();

/// Formats a float for humans and reports: shortest round-trip decimal ("0.1", "1e-07").
std::string format_float(double v);
/// Shortest decimal that reads back as the same f32 (logits: "13.999999", not "13.999999046325684").
std::string format_f32(float v);
/// 4 significant digits, for statistics in human-readable reasons ("1.27e-05", "0.0161").
std::string format_short(double v);
/// "0x3f800000" for an f32, "0x3f80" for a bf16 pattern.
std::string hex_bits_f32(float v);
std::string hex_bits_u16(std::uint16_t v);

}  // namespace ncert::certify
