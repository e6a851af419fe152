#include "certify/report/progress.h"

#include <atomic>
#include <cstdio>

#include "certify/report/printable.h"

namespace ncert::certify {

namespace {

std::atomic<bool> g_enabled{false};
std::atomic<double> g_delay{1.0};

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

void Progress::enable(bool on, double delay_seconds) {
  g_enabled = on;
  g_delay = delay_seconds;
}

Progress::Progress(const std::string& what, std::int64_t total)
    : what_(printable(what)), total_(total), start_(std::chrono::steady_clock::now()), last_(start_) {}

Progress::~Progress() {
  if (drawn_) {
    std::fputs("\r\033[K", stderr);  // erase the line: the report follows on stdout
    std::fflush(stderr);
  }
}

void Progress::advance(std::int64_t n) {
  done_ += n;
  if (!g_enabled) return;
  const auto now = std::chrono::steady_clock::now();
  // Short runs print nothing; long ones at most four lines a second.
  if (seconds(now - start_) < g_delay || (drawn_ && seconds(now - last_) < 0.25)) return;
  last_ = now;
  const double elapsed = seconds(now - start_);
  const double rate = done_ > 0 ? static_cast<double>(done_) / elapsed : 0;
  char eta[32] = "";
  if (done_ > 0 && done_ < total_)
    std::snprintf(eta, sizeof eta, ", ETA %.0f s", static_cast<double>(total_ - done_) / rate);
  std::fprintf(stderr, "\r\033[Kncert %s %lld/%lld (%.0f%%), %.1f s, %.3g/s%s", what_.c_str(),
               static_cast<long long>(done_), static_cast<long long>(total_),
               total_ > 0 ? 100.0 * static_cast<double>(done_) / static_cast<double>(total_) : 0.0, elapsed, rate, eta);
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace ncert::certify
