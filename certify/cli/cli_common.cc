#include "certify/cli/cli_common.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "certify/io/hash.h"
#include "certify/isolation/supervisor.h"
#include "certify/report/printable.h"
#include "certify/report/progress.h"
#include "certify/report/render_html.h"
#include "certify/report/render_junit.h"
#include "certify/report/report_file.h"

namespace ncert::cli {

const certify::OptionTable<CommonOptions>& common_option_table() {
  using O = CommonOptions;
  using certify::integer_option;
  using certify::number_option;
  using certify::path_option;
  static const certify::OptionTable<O> table = [] {
    certify::OptionTable<O> t = {
        path_option<O>("json", "PATH",
                       "Write the JSON report to PATH ('-': stdout, and the human summary is not printed)",
                       [](O& o) -> std::string& { return o.json_path; }),
        path_option<O>("html", "PATH", "Write the HTML report, one self-contained page, to PATH ('-': stdout)",
                       [](O& o) -> std::string& { return o.html_path; }),
        path_option<O>("junit", "PATH", "Write the JUnit XML report, one testcase per check, to PATH ('-': stdout)",
                       [](O& o) -> std::string& { return o.junit_path; }),
        integer_option<O>("threads", "N",
                          "Worker threads (default: OMP_NUM_THREADS, else every core); results are identical at any N",
                          1, 1024, [](O& o) -> int& { return o.threads; }),
        certify::flag_option<O>("quiet", "Print only failing checks and the verdict line",
                                [](O& o) -> bool& { return o.quiet; }),
        certify::flag_option<O>("verbose",
                                "Also print an error's low-level detail (the HDF5 library's error stack) on stderr; "
                                "witness also prints every emission's margin, not only the tightest five",
                                [](O& o) -> bool& { return o.verbose; }),
        integer_option<O>(
            "max-memory", "BYTES",
            "The run's memory budget: a dataset larger than it is never read whole "
            "(refused, memory-limit, exit 3), and a run that needs more memory ends the same way; logits and "
            "tensors are streamed and never read whole, in blocks of whole chunks (a chunk layout whose two "
            "blocks, or one deflated chunk, exceed the budget is refused the same way, naming the file)",
            std::int64_t{1} << 20, std::int64_t{1} << 50, [](O& o) -> std::uint64_t& { return o.max_memory; }),
        number_option<O>("hdf5-timeout", "SECONDS",
                         "Seconds the HDF5 library may make no progress reading a file before it is stopped as "
                         "corrupt (0: never; docs/cli.md \"Isolation\")",
                         0, 86400, [](O& o) -> double& { return o.hdf5_timeout; }),
    };
    // The threads default (0) means "OpenMP's", which the help says; no option of the common
    // table goes into a campaign manifest: they are the whole run's.
    t[3].shown_default = [](const O&) { return std::optional<std::string>(); };
    t[6].shown_default = [](const O& o) {
      const bool whole_gib = o.max_memory % (std::uint64_t{1} << 30) == 0;
      return std::optional<std::string>(whole_gib ? std::to_string(o.max_memory >> 30) + " GiB"
                                                  : std::to_string(o.max_memory));
    };
    for (certify::OptionSpec<O>& s : t) s.key.clear();
    return t;
  }();
  return table;
}

void apply_threads(const CommonOptions& o) {
  omp_set_dynamic(0);
  if (o.threads > 0) omp_set_num_threads(o.threads);
}

namespace {

/// The process's fixed address-space overhead beside the data the memory budget covers:
/// code, libraries, thread stacks and malloc arenas (glibc reserves 64 MiB of address space
/// per arena, up to 8 per core).
std::uint64_t address_space_limit(const CommonOptions& o) {
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define NCERT_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(NCERT_SANITIZED)
  (void)o;
  return 0;  // sanitizers reserve terabytes of shadow address space
#else
  const auto threads = static_cast<std::uint64_t>(std::max(1, omp_get_max_threads()));
  return o.max_memory + (std::uint64_t{2} << 30) + threads * (std::uint64_t{80} << 20);
#endif
}

certify::IsolationOptions isolation_options(const CommonOptions& o) {
  certify::IsolationOptions iso;
  const char* env = std::getenv("NCERT_ISOLATION");
  iso.enabled = !(env && std::string(env) == "off");
  iso.hdf5_timeout_seconds = o.hdf5_timeout;
  iso.address_space_limit = address_space_limit(o);
  return iso;
}

/// Prints the report and writes --json; the exit code. A report that cannot be written never
/// hides the verdict: a FAIL or a refusal keeps its exit code, a PASS becomes 5.
int output(const certify::Report& report, const CommonOptions& o) {
  int rc = report.exit_code();
  auto failed_write = [&](const Status& s) {
    std::fprintf(stderr, "ncert: %s\n", certify::printable(s.to_string()).c_str());
    if (rc == 0) rc = exit_code_for(s.code());
  };
  if (o.verbose && report.error && !report.error->detail().empty()) {
    std::fprintf(stderr, "ncert: detail: %s\n", certify::printable(report.error->detail()).c_str());
  }
  if (o.json_path != "-" && o.html_path != "-" && o.junit_path != "-") {
    if (Status s = certify::write_stdout(report.to_text(o.quiet)); !s.ok()) failed_write(s);
  }
  for (const Status& s : report.output_errors) failed_write(s);
  // The three reports are replaced together or not at all (write_report_files).
  std::vector<std::pair<std::string, std::string>> files;
  if (!o.json_path.empty()) files.emplace_back(o.json_path, report.to_json().dump(2) + "\n");
  if (!o.html_path.empty()) files.emplace_back(o.html_path, certify::render_html(report));
  if (!o.junit_path.empty()) files.emplace_back(o.junit_path, certify::render_junit(report));
  for (const Status& s : certify::write_report_files(files, true)) {
    if (!s.ok()) failed_write(s);
  }
  return rc;
}

/// Every path the command reads or writes, checked before any work (check_command_paths): the
/// reports, the command's own outputs, its inputs.
Status check_paths(const CommonOptions& o, const CommandFiles& files) {
  certify::CommandPaths paths;
  paths.inputs = files.inputs;
  paths.inputs.insert(paths.inputs.end(), files.other_inputs.begin(), files.other_inputs.end());
  paths.outputs = {{"--json", o.json_path, true}, {"--html", o.html_path, true}, {"--junit", o.junit_path, true}};
  paths.outputs.insert(paths.outputs.end(), files.outputs.begin(), files.outputs.end());
  return certify::check_command_paths(paths);
}

/// The report of a command that could not run to its end: the error, the inputs by name and
/// content hash (hashing reads bytes, never through libhdf5).
certify::Report error_report(const char* command, const std::vector<std::string>& inputs, const Status& status) {
  certify::Report r;
  r.command = command;
  r.inputs = certify::describe_inputs(inputs);
  r.refuse(status);
  return r;
}

/// The command itself, in the child: its report, or the error it ended with.
int run_child(const char* command, const CommonOptions& o, const std::vector<std::string>& inputs,
              const std::function<Result<certify::Report>()>& run) {
  Result<certify::Report> result = Status(ErrorCode::kInternal, "not run");
  try {
    result = run();
  } catch (const std::bad_alloc&) {
    result = Status(ErrorCode::kMemoryLimit, "the run needs more memory than the budget allows (--max-memory " +
                                                 std::to_string(o.max_memory) +
                                                 " bytes): raise it, or certify fewer projections at once (--only)");
  }
  if (!result.ok()) return output(error_report(command, inputs, result.status()), o);
  return output(*result, o);
}

}  // namespace

certify::IsolationOptions command_isolation(const CommonOptions& o) { return isolation_options(o); }

int refuse_before_running(const Status& s) {
  std::fprintf(stderr, "ncert: %s\n", certify::printable(s.to_string()).c_str());
  return exit_code_for(s.code());
}

int run_reported(const char* command, const CommonOptions& o, const CommandFiles& files,
                 const std::function<Result<certify::Report>()>& run, bool isolate) {
  std::vector<std::string> inputs;
  for (const certify::NamedPath& p : files.inputs) {
    if (!p.path.empty()) inputs.push_back(p.path);
  }
  if (Status s = check_paths(o, files); !s.ok()) return refuse_before_running(s);
  // A progress line for long runs, on a terminal only (never in pipes, logs or reports), after
  // 1 s or NCERT_PROGRESS_DELAY seconds.
  double delay = 1.0;
  if (const char* env = std::getenv("NCERT_PROGRESS_DELAY")) {
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    if (end != env && *end == '\0' && v >= 0 && v <= 3600) delay = v;
  }
  certify::Progress::enable(!o.quiet && ::isatty(STDERR_FILENO), delay);
  certify::IsolationOptions iso = isolation_options(o);
  iso.enabled = iso.enabled && isolate;
  // A stop that reaches the supervisor once its child has ended normally (the reports in place)
  // ends nothing; by the default action it ended the run by the signal beside whole reports (2
  // of 40 stops timed there). One before the child starts is forwarded to it once it does.
  if (iso.enabled) certify::hold_stops_for_the_supervisor();
  auto end = certify::run_isolated([&] { return run_child(command, o, inputs, run); }, iso);
  if (!end.ok()) return output(error_report(command, inputs, end.status()), o);
  if (end->kind == certify::ChildEnd::Kind::kExited) return end->exit_code;
  // The child ended abnormally: nothing of its report reached --json (it writes whole or not
  // at all), but its temporary file may be left. Then the supervisor reports.
  for (const std::string* path : {&o.json_path, &o.html_path, &o.junit_path}) {
    if (!path->empty() && *path != "-") ::unlink(certify::report_temp_path(*path, static_cast<long>(end->pid)).c_str());
  }
  if (end->kind == certify::ChildEnd::Kind::kInterrupted) {
    std::fprintf(stderr, "ncert: interrupted (%s); no report written\n", certify::signal_name(end->signal).c_str());
    std::signal(end->signal, SIG_DFL);
    std::raise(end->signal);
    return 128 + end->signal;
  }
  return output(error_report(command, inputs, certify::child_end_status(*end, iso)), o);
}

}  // namespace ncert::cli
