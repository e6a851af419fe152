// Shared helpers of the benchmarks: wall time, peak RSS, median of repetitions, and a
// deterministic random filler. Benchmarks report ratios against a baseline run in the same
// process, because this machine is shared and absolute times move 10-30 % between runs.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace ncert::bench {

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
