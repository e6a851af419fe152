// This header defines the library entry point of `ncert check DUMP.h5`: validate the dump, then
// certify every projection (geometry, identity, bound, walk, untouched, vacuity) and every
// logits run (raw target-maximum witnesses), in name order, into one Report.
#pragma once

#include <optional>
#include <string>

#include "certify/io/dump_reader.h"
#include "certify/projection/checks.h"
#include "certify/projection/shared_weights.h"
#include "certify/report/report.h"

namespace ncert::certify {

struct CheckCommandOptions {
  std::string dump;
  ReaderOptions reader;
  CheckOptions check;
  std::optional<double> logit_error;      ///< --logit-error ABS for runs without an lm_head
  std::string only;                       ///< certify only objects whose name contains this
  Requirement require;                    ///< --require: skips of these kinds fail the run
  std::optional<SkipPolicy> skip_policy;  ///< --policy: expected skips pass, unexpected ones fail
  /// --weights W.h5: the weights dump projections that omit their weights take them from, by
  /// weights hash (docs/dump-format.md §4.5). "" : none (such projections are refused).
  std::string weights;
  /// Weights kept across the calls of one process (a campaign's batch of units sharing their
  /// weights); null: each call reads its own and keeps nothing.
  WeightsCache* weights_cache = nullptr;
};

/// A refused dump is a Report with `error` set (exit 3), not a failed Result. kUsage when `only`
/// selects nothing.
Result<Report> run_check(const CheckCommandOptions& options);

// `ncert check` in parts that can run apart (on other threads, processes or ranks: a campaign)
// and be assembled into exactly the report run_check writes: plan the dump, run each unit,
// assemble. run_check is these three steps in one process.

/// One unit of a dump's certification: one projection alone, or (no projection) the rest:
/// schema, the lm_head projections with their runs' witnesses, every logits run.
struct CheckUnit {
  std::optional<std::string> projection;
  double cost = 0;  ///< estimated work: M*N*K for a projection (scheduling only)
  /// For a projection that takes its weights from a weights dump: "<weights dump>|<hash>", so a
  /// campaign can run units with the same key in one process and read those weights once.
  std::string shared_weights;
};

struct CheckPlan {
  std::optional<Status> refused;   ///< the dump was refused (or is over the memory budget)
  std::vector<std::string> order;  ///< selected projections in the dump's order
  std::vector<CheckUnit> units;    ///< projections first, the rest last
  bool has_tensors = false;
  Index projections_without_rows = 0;  ///< left out by the reader (DumpModel)
};

/// What one unit produced: checks by projection, the schema check (rest), witness checks
/// (rest), counts and timings.
struct CheckPart {
  std::vector<std::pair<std::string, std::vector<CheckResult>>> projections;
  std::vector<CheckResult> head, tail;
  Index runs = 0;        ///< logits runs with at least one emission
  Index empty_runs = 0;  ///< logits runs with none (their witness check fails; they certify nothing)
  double read_seconds = 0, reference_seconds = 0, compare_seconds = 0, other_seconds = 0, logits_seconds = 0;
};

/// Opens the dump and plans it (a refused dump is a plan with `refused`). kUsage when `only`
/// selects nothing.
Result<CheckPlan> plan_check(const CheckCommandOptions& options);
Result<CheckPlan> plan_check(const DumpReader& reader, const CheckCommandOptions& options);
/// Runs one unit, opening the dump itself (or with a reader already open).
Result<CheckPart> run_check_part(const CheckCommandOptions& options, const CheckUnit& unit);
Result<CheckPart> run_check_part(const DumpReader& reader, const CheckCommandOptions& options, const CheckUnit& unit);
/// The report of the whole dump from its plan and every unit's part (any order).
Report assemble_check(const CheckCommandOptions& options, const InputInfo& input, const CheckPlan& plan,
                      std::vector<CheckPart> parts, double total_seconds);

}  // namespace ncert::certify
