// This header defines the progress line of long runs: on stderr, only when stderr is a terminal
// and the user did not ask for --quiet (the CLI turns it on), only after the first second, at
// most four times a second, erased when the work ends. Never in reports, pipes or logs.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ncert::certify {

/// Wall seconds since `t0` on the steady clock: the timing fields of reports.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class Progress {
 public:
  /// Turns progress lines on or off for the process (off by default: library users and tests).
  /// Nothing is drawn before `delay_seconds` have passed, so short runs stay silent.
  static void enable(bool on, double delay_seconds = 1.0);

  /// `what` names the work ("check: projections"); `total` its units. Names from a dump are
  /// escaped like every text from a dump (printable.h).
  Progress(const std::string& what, std::int64_t total);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress();  ///< erases the line if one was drawn

  /// `n` more units done.
  void advance(std::int64_t n = 1);
  /// `done` units done in all (callers that count themselves: rows streamed, items recorded).
  void reach(std::int64_t done) { advance(done - done_); }

 private:
  std::string what_;
  std::int64_t total_ = 0, done_ = 0;
  std::chrono::steady_clock::time_point start_, last_;
  bool drawn_ = false;
};

}  // namespace ncert::certify
