#include "certify/demo/demo.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <optional>

#include "certify/commands/check.h"
#include "certify/commands/compare.h"
#include "certify/commands/forks.h"
#include "certify/io/dump_reader.h"
#include "certify/io/output_file.h"
#include "fixtures/generator.h"
#include "fixtures/logits.h"

namespace ncert::certify {

namespace {

struct Entry {
  std::string file;
  fixtures::Fault fault;
  std::string story;  ///< what the fault is, in the engine's terms
};

const std::vector<Entry>& entries() {
  using fixtures::Fault;
  static const std::vector<Entry> e = {
      {"good.h5", Fault::kNone, "a correct engine build"},
      {"wrong-row-scattered.h5", Fault::kWrongRowScattered, "the packed path scatters a slot into the next row"},
      {"slots-swapped.h5", Fault::kSlotsSwapped, "two compact slots hold each other's rows"},
      {"stale-compact-slot.h5", Fault::kStaleCompactSlot, "a compact slot keeps the previous call's values"},
      {"padding-clobbered.h5", Fault::kPaddingClobbered, "the packed path writes a padding column"},
      {"unselected-row-written.h5", Fault::kUnselectedRowWritten, "the packed path writes a row it did not select"},
      {"dropped-k-tile-packed.h5", Fault::kDroppedKTilePacked, "the packed kernel skips a 256-term K tile"},
      {"bf16-truncation-packed.h5", Fault::kBf16TruncationPacked,
       "the packed path truncates to bf16 instead of rounding"},
      {"af4-scale-x2.h5", Fault::kAf4ScaleTimes2, "the kernel uses twice the scale of one AF4 group"},
      {"nibble-order-swapped.h5", Fault::kNibbleOrderSwapped, "the kernel reads AF4 nibbles in the wrong order"},
      {"nan-output.h5", Fault::kNanOutput, "one output element is NaN"},
  };
  return e;
}

/// The logits part of the tour: two builds compared, and three wording forks.
struct ForkEntry {
  std::string tag;  ///< files <tag>-a.h5, <tag>-b.h5
  fixtures::ForkKind kind;
  ForkClass expected_class;
  std::string story;
};

const std::vector<ForkEntry>& fork_entries() {
  using fixtures::ForkKind;
  static const std::vector<ForkEntry> e = {
      {"fork-near-tie", ForkKind::kUlpFlip, ForkClass::kNearTie, "two builds pick different tokens one ulp apart"},
      {"fork-unexplained", ForkKind::kUnexplained, ForkClass::kUnexplained,
       "build B's logit of its token is 1.5 too high"},
      {"fork-invalid", ForkKind::kInvalid, ForkClass::kInvalid, "build B emits a token that is not its row's maximum"},
  };
  return e;
}

std::vector<std::string> demo_files() {
  std::vector<std::string> files;
  for (const Entry& e : entries()) files.push_back(e.file);
  files.push_back("logits-a.h5");
  files.push_back("logits-b.h5");
  for (const ForkEntry& f : fork_entries()) {
    files.push_back(f.tag + "-a.h5");
    files.push_back(f.tag + "-b.h5");
  }
  return files;
}

/// Writes `paths` through `write`, which is handed temporary names beside them, and renames
/// each to its name once all are whole: an interrupted or failed demo leaves no half-written
/// file, which demo --force, replacing only its own earlier dumps, could not tell from a user's.
Status written_whole(const std::vector<std::string>& paths,
                     const std::function<Status(const std::vector<std::string>&)>& write) {
  std::vector<std::string> temps(paths.size());
  std::transform(paths.begin(), paths.end(), temps.begin(), temporary_beside);
  Status s = write(temps);
  for (std::size_t i = 0; s.ok() && i < paths.size(); ++i)
    s = move_into_place(temps[i], paths[i], true, "the demo file");
  std::error_code ec;
  for (const std::string& t : temps) std::filesystem::remove(t, ec);
  return s;
}

/// One dump of the tour: written with its fault, certified as `ncert check` would, and held
/// against what its fault table row expects.
Result<CheckResult> tour_dump(const Entry& e, const std::string& dir, Report& report) {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(dir) / e.file).string();
  NCERT_RETURN_IF_ERROR(written_whole({path}, [&](const std::vector<std::string>& t) {
    return fixtures::write_dump(t[0], fixtures::preset_tiny(), {e.fault, ""}, true);
  }));
  CheckCommandOptions co;
  co.dump = path;
  NCERT_ASSIGN_OR_RETURN(Report r, run_check(co));
  report.inputs.push_back(r.inputs.front());
  CheckResult c;
  c.id = "demo/" + e.file.substr(0, e.file.size() - 3);
  const bool good = e.fault == fixtures::Fault::kNone;
  const CheckKind expected = good ? CheckKind::kSchema : fixtures::fault_caught_by(e.fault);
  c.kind = expected;
  const CheckResult* first_fail = nullptr;
  const CheckResult* expected_fail = nullptr;
  DemoDumpEvidence ev;
  ev.file = path;
  ev.dump_verdict = std::string(verdict_name(r.verdict()));
  ev.checks = static_cast<Index>(r.checks.size());
  for (const CheckResult& x : r.checks) {
    if (!x.failed()) continue;
    ev.failed_checks.push_back(x.id);
    if (!first_fail) first_fail = &x;
    if (!expected_fail && x.kind == expected) expected_fail = &x;
  }
  if (good) {
    c.verdict = r.verdict() == Verdict::kPass ? Verdict::kPass : Verdict::kFail;
    c.reason = e.story + ": " +
               (c.verdict == Verdict::kPass
                    ? "PASS, all " + std::to_string(r.checks.size()) + " checks"
                    : "unexpectedly FAILED: " + (first_fail ? first_fail->id + ": " + first_fail->reason : "?"));
  } else {
    ev.fault = std::string(fixtures::fault_name(e.fault));
    ev.expected = {expected};
    if (expected_fail) {
      c.reason = e.story + ": FAIL, caught by " + expected_fail->id + ": " + expected_fail->reason;
    } else {
      c.verdict = Verdict::kFail;
      c.reason = e.story + ": NOT caught by the " + std::string(check_kind_name(expected)) + " check (dump verdict " +
                 std::string(verdict_name(r.verdict())) + ")";
    }
  }
  c.evidence = std::move(ev);
  return c;
}

/// The logits part: two builds whose logits differ by noise, compared under a KL policy.
Result<CheckResult> tour_compare(const std::string& dir, Report& report) {
  namespace fs = std::filesystem;
  const std::string a = (fs::path(dir) / "logits-a.h5").string();
  const std::string b = (fs::path(dir) / "logits-b.h5").string();
  fixtures::LogitsPairSpec spec;
  spec.tokens = 64;
  spec.vocab = 32000;
  spec.noise = 1e-3f;
  NCERT_RETURN_IF_ERROR(written_whole(
      {a, b}, [&](const std::vector<std::string>& t) { return fixtures::write_logits_pair(t[0], t[1], spec, true); }));
  CompareOptions co;
  co.a = a;
  co.b = b;
  co.policy = *parse_policy("kl:1e-5");
  NCERT_ASSIGN_OR_RETURN(Report r, run_compare(co));
  for (const InputInfo& in : r.inputs) report.inputs.push_back(in);
  CheckResult c;
  c.id = "demo/compare-logits";
  c.kind = CheckKind::kLogits;
  c.verdict = r.verdict();
  const CheckResult* lc = r.checks.empty() ? nullptr : &r.checks.front();
  c.reason = "two builds, logits within 1e-3 of each other: `ncert compare --policy kl:1e-5`: " +
             std::string(verdict_name(r.verdict())) + (lc ? ", " + lc->reason : "");
  c.evidence = DemoCompareEvidence{{a, b}, "kl:1e-5"};
  return c;
}

/// One wording fork: the pair written, `ncert forks` run, its class held against the expected.
Result<CheckResult> tour_fork(const ForkEntry& e, const std::string& dir, Report& report) {
  namespace fs = std::filesystem;
  const std::string a = (fs::path(dir) / (e.tag + "-a.h5")).string();
  const std::string b = (fs::path(dir) / (e.tag + "-b.h5")).string();
  fixtures::ForkPairSpec spec;
  spec.forks = {{10, e.kind}};
  NCERT_RETURN_IF_ERROR(written_whole(
      {a, b}, [&](const std::vector<std::string>& t) { return fixtures::write_fork_pair(t[0], t[1], spec, true); }));
  ForksOptions fo;
  fo.a = a;
  fo.b = b;
  NCERT_ASSIGN_OR_RETURN(Report r, run_forks(fo));
  for (const InputInfo& in : r.inputs) report.inputs.push_back(in);
  const CheckResult* fork = nullptr;
  std::optional<ForkClass> got;
  for (const CheckResult& x : r.checks) {
    if (const auto* f = std::get_if<ForkEvidence>(&x.evidence)) {
      fork = &x;
      got = f->fork.cls;
    }
  }
  const std::string got_name = got ? std::string(fork_class_name(*got)) : "none";
  CheckResult c;
  c.id = "demo/" + e.tag;
  c.kind = CheckKind::kFork;
  c.evidence = DemoForkEvidence{
      {a, b}, std::string(fork_class_name(e.expected_class)), got_name, std::string(verdict_name(r.verdict()))};
  const bool as_expected = got == e.expected_class;
  c.verdict = as_expected ? Verdict::kPass : Verdict::kFail;
  c.reason = e.story + ": `ncert forks` says " + got_name + " (" + std::string(verdict_name(r.verdict())) + ")" +
             (as_expected ? "" : ", expected " + std::string(fork_class_name(e.expected_class))) +
             (fork ? ": " + fork->reason : "");
  return c;
}

}  // namespace

/// The engine the fixtures write into every demo dump's root: how --force knows its own files.
constexpr std::string_view kDemoEngine = "ncert-fixture";

std::vector<std::string> demo_paths(const std::string& dir) {
  std::vector<std::string> paths;
  for (const std::string& file : demo_files()) paths.push_back((std::filesystem::path(dir) / file).string());
  return paths;
}

Result<Report> run_demo(const DemoOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(options.dir, ec) && !fs::is_directory(options.dir, ec)) {
    return Status(ErrorCode::kUsage, "--dir " + options.dir + " exists and is not a directory");
  }
  fs::create_directories(options.dir, ec);
  if (ec) return Status(ErrorCode::kIo, options.dir + ": cannot create the demo directory: " + ec.message());
  for (const std::string& path : demo_paths(options.dir)) {
    // Only regular files of the directory itself: a link would have the demo write where it
    // points, outside --dir (a review's --force replaced ../precious.h5; a dangling link made
    // ../outside.h5), --force or not.
    const fs::file_status st = fs::symlink_status(path, ec);
    if (fs::is_symlink(st) || (fs::exists(st) && !fs::is_regular_file(st))) {
      return Status(ErrorCode::kOutputExists, path + " is " +
                                                  (fs::is_symlink(st) ? "a symbolic link" : "not a regular file") +
                                                  ": the demo writes only regular files of " + options.dir +
                                                  " (remove it, or give another --dir)");
    }
    if (!options.force && fs::exists(st)) {
      return Status(ErrorCode::kOutputExists,
                    path + " exists (from an earlier demo?); pass --force to overwrite the demo files");
    }
    // --force replaces the demo's own files only: a user's dump that happens to be named good.h5
    // is not one (a review's was overwritten).
    if (fs::exists(st)) {
      // The demo's own files appear whole (written_whole below): one that does not open as a
      // dump of its engine is not the demo's.
      auto earlier = DumpReader::open(path);
      if (!earlier.ok() || earlier->model().engine != kDemoEngine) {
        return Status(ErrorCode::kOutputExists,
                      path + " exists and is not a file of an earlier demo (" +
                          (earlier.ok() ? "engine \"" + earlier->model().engine + "\"" : earlier.status().message()) +
                          "): --force overwrites only the demo's own files; remove it, or give another --dir");
      }
    }
  }
  Report report;
  report.command = "demo";
  report.preamble.push_back(
      "ncert demo: synthetic engine dumps in " + options.dir +
      "/ (preset tiny: 3 packed projections with AF4/BF16/F32 weights, an lm_head and a logits run)");
  report.preamble.push_back("Each dump is certified exactly as `ncert check DUMP.h5` would; the tour:");
  Index caught = 0;
  for (const Entry& e : entries()) {
    NCERT_ASSIGN_OR_RETURN(CheckResult c, tour_dump(e, options.dir, report));
    caught += e.fault != fixtures::Fault::kNone && !c.failed();
    report.checks.push_back(std::move(c));
  }
  NCERT_ASSIGN_OR_RETURN(CheckResult compared, tour_compare(options.dir, report));
  report.checks.push_back(std::move(compared));
  Index forks_caught = 0;
  for (const ForkEntry& e : fork_entries()) {
    NCERT_ASSIGN_OR_RETURN(CheckResult c, tour_fork(e, options.dir, report));
    forks_caught += !c.failed() && e.expected_class != ForkClass::kNearTie;
    report.checks.push_back(std::move(c));
  }
  report.stats["dumps"] = demo_files().size();
  report.stats["faults_caught"] = caught;
  report.stats["faults"] = entries().size() - 1;
  report.stats["fork_faults_caught"] = forks_caught;
  report.stats["fork_faults"] = 2;
  report.preamble.push_back(
      "(verdict PASS below means: the good build certified, every fault was caught by the check "
      "meant to catch it, and every fork got its expected class)");
  return report;
}

const OptionTable<DemoOptions>& demo_option_table() {
  using O = DemoOptions;
  static const OptionTable<O> table = [] {
    OptionTable<O> t = {
        path_option<O>("dir", "DIR", "Directory for the demo dumps", [](O& o) -> std::string& { return o.dir; }),
        flag_option<O>("force",
                       "Overwrite demo files left by an earlier run (only those: a file of the same name that no demo "
                       "wrote is refused)",
                       [](O& o) -> bool& { return o.force; }),
    };
    for (OptionSpec<O>& s : t) s.key.clear();
    return t;
  }();
  return table;
}

}  // namespace ncert::certify
