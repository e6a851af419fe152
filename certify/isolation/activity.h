// This header defines what the process publishes about its work inside libhdf5, so that a
// supervisor (supervisor.h) can say what was being read when a corrupt file crashed or hung the
// library: a page of shared memory holding "inside libhdf5 since T, <action> <object>".
// Unsupervised (tests, library users), the scopes cost one relaxed load and do nothing else.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

namespace ncert::certify {

/// The shared page a supervised child writes and its supervisor reads. Plain bytes and
/// lock-free atomics only: it lives in MAP_SHARED memory across fork().
struct ActivityPage {
  static constexpr std::size_t kText = 1024;
  std::atomic<std::int32_t> depth{0};     ///< open scopes, all threads
  std::atomic<std::int64_t> since_ns{0};  ///< CLOCK_MONOTONIC of the last scope entry or exit
  std::atomic<std::uint64_t> version{0};  ///< bumped on every text change (odd while writing)
  char action[32] = {};                   ///< "opening", "reading", "closing", ...
  char object[kText] = {};                ///< file and object path, truncated to fit
};

/// Makes `page` the process's activity page (nullptr: unsupervised). Called by the supervisor
/// in the child, before anything touches HDF5.
void set_activity_page(ActivityPage* page);

/// Marks the calling thread as inside libhdf5 doing `action` on `object` until destroyed.
/// Nested and concurrent scopes are counted; the text shows the latest one entered.
class Hdf5Activity {
 public:
  Hdf5Activity(std::string_view action, std::string_view object);
  Hdf5Activity(const Hdf5Activity&) = delete;
  Hdf5Activity& operator=(const Hdf5Activity&) = delete;
  ~Hdf5Activity();

 private:
  ActivityPage* page_;
};

/// Monotonic clock in nanoseconds (the page's time base).
std::int64_t monotonic_ns();

}  // namespace ncert::certify
