// Shared helpers of the benchmarks: the command line, wall time, peak RSS, median of
// repetitions, and timing a binary run as a child. Benchmarks report ratios against a baseline
// run in the same process, because this machine is shared and absolute times move 10-30 %
// between runs.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace ncert::bench {

/// An integer option's check: at least `lo` (1 for a count, 0 where 0 means a default). CLI11's
/// PositiveNumber would do, but its message spells DBL_MAX out in 309 digits.
inline CLI::Validator at_least(long long lo) {
  return CLI::Validator(
      [lo](std::string& text) {
        long long v = 0;
        const bool ok = CLI::detail::lexical_cast(text, v) && v >= lo;
        return ok ? std::string() : text + " is not an integer >= " + std::to_string(lo);
      },
      lo == 1   ? "POSITIVE"
      : lo == 0 ? "NONNEGATIVE"
                : ">=" + std::to_string(lo));
}

/// Parses a benchmark's command line (CLI11) into the variables bound to `app`'s options.
/// std::nullopt to go on; else the exit code to return at once, before any work: 0 after
/// --help, 2 (a usage error, as for `ncert`) after CLI11 printed why the line was refused.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  // --help shows each option's default: its variable's value before parsing (positionals are
  // what the command is run on, with no default: an empty list would read "[]").
  for (CLI::Option* o : app.get_options()) {
    if (!o->get_positional()) o->capture_default_str();
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // A misspelt option is left over, and the value after it may have been taken for a
    // positional, so CLI11 would complain first of what that did ("DUMP.h5 requires --bounds",
    // "DIR is required"): name the option instead.
    std::vector<std::string> unknown;
    for (const std::string& a : app.remaining()) {
      if (a.size() > 1 && a[0] == '-') unknown.push_back(a);
    }
    const int rc = unknown.empty() || e.get_exit_code() == 0 ? app.exit(e) : app.exit(CLI::ExtrasError(unknown));
    return rc == 0 ? 0 : 2;
  }
  return std::nullopt;
}

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Peak resident set size of this process so far, in MiB.
inline double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Runs a binary as a child process (stdout to /dev/null); its wall time, or -1 when it did not
/// exit with 0 (or with 1, a FAIL verdict, when `fail_is_ok`).
inline double run_seconds(const std::vector<std::string>& argv_s, bool fail_is_ok = false) {
  std::vector<char*> argv;
  argv.reserve(argv_s.size() + 1);
  for (const std::string& a : argv_s) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  const double t0 = now_seconds();
  const pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout)) _exit(127);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const double t = now_seconds() - t0;
  const bool ok = WIFEXITED(status) && (WEXITSTATUS(status) == 0 || (fail_is_ok && WEXITSTATUS(status) == 1));
  return ok ? t : -1;
}

}  // namespace ncert::bench
