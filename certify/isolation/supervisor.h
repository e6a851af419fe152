// This header defines the supervisor: a command's work runs in a forked child process, so that
// a corrupt file which crashes or hangs libhdf5 (Debian's HDF5 1.10 parses attacker-chosen
// metadata; no reader can pre-validate every byte it parses) cannot take the verdict with it.
// The parent only waits: it watches the child's activity page (activity.h), kills it when
// libhdf5 makes no progress for the watchdog's time, and turns how the child ended into an
// outcome the CLI reports (docs/cli.md "Isolation").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "reference/status.h"

namespace ncert::certify {

struct IsolationOptions {
  bool enabled = true;  ///< false: run in-process (NCERT_ISOLATION=off, for debuggers)
  /// Seconds libhdf5 may go without entering or leaving a call before the child is killed
  /// (0: never). Legitimate metadata takes milliseconds; one whole-dataset read of a few GB
  /// takes seconds.
  double hdf5_timeout_seconds = 60;
  /// Address-space limit of the child in bytes (0: none). Set to the memory budget plus the
  /// process's fixed overhead, it turns a runaway allocation into std::bad_alloc.
  std::uint64_t address_space_limit = 0;
};

/// How the child ended.
struct ChildEnd {
  enum class Kind : std::uint8_t {
    kExited,         ///< returned normally: exit_code is the command's
    kCrashedInHdf5,  ///< killed by a signal while inside libhdf5
    kHungInHdf5,     ///< killed by the watchdog: no progress inside libhdf5
    kCrashed,        ///< killed by a signal outside libhdf5 (a bug in ncert, or the OOM killer)
    kInterrupted,    ///< the supervisor received SIGINT/SIGTERM and stopped the child
  } kind = Kind::kExited;
  int exit_code = 0;
  int signal = 0;  ///< the child's fatal signal, or the one the supervisor received
  pid_t pid = 0;
  std::string action;          ///< what libhdf5 was doing ("reading"), when known
  std::string object;          ///< on which file and object
  double stalled_seconds = 0;  ///< kHungInHdf5: time without progress
};

/// Installs the supervisor's own SIGINT / SIGTERM handler for good (run_isolated installs it
/// only while it waits): a stop that comes before the child starts reaches it as soon as it
/// does, and one after it ended normally ends nothing (its reports are in place). For a process
/// that runs one isolated command and then exits; or that schedules others' work and polls
/// stop_received() (a campaign's MPI rank 0).
void hold_stops_for_the_supervisor();

/// The SIGINT or SIGTERM the supervisor's handler has seen (0: none).
int stop_received();

/// Runs `body` in a child and waits for it. Flushes stdio first so nothing is written twice.
/// Returns kIo if the child cannot be created. With isolation disabled, runs `body` here.
Result<ChildEnd> run_isolated(const std::function<int()>& body, const IsolationOptions& options);

/// Many isolated jobs at once, supervised by one event loop in the calling thread (a campaign's
/// workers): each job is a child that returns a string (its result, over a pipe) and is
/// watched like run_isolated's. Not thread-safe: one thread starts and waits.
class IsolatedJobs {
 public:
  explicit IsolatedJobs(IsolationOptions options);
  IsolatedJobs(const IsolatedJobs&) = delete;
  IsolatedJobs& operator=(const IsolatedJobs&) = delete;
  ~IsolatedJobs();  ///< kills and reaps jobs still running

  /// Starts `body` in a new child; its return value is the job's output. The job's id.
  Result<int> start(const std::function<std::string()>& body);
  /// Jobs started and not yet returned by wait_any.
  int running() const;

  struct Done {
    int id = 0;
    ChildEnd end;        ///< kExited with exit_code 0 when the body returned
    std::string output;  ///< what the body returned (complete only for kExited, code 0)
  };
  /// Waits until one job ends (kInvalidArgument when none runs).
  Result<Done> wait_any();

 private:
  struct Job;
  IsolationOptions options_;
  std::vector<Job*> jobs_;
  int next_id_ = 0;
};

/// The error an abnormal end becomes: kHdf5Crashed / kHdf5Hung (exit 3: the file is corrupt),
/// kInternal (exit 4: a crash outside libhdf5), kInterrupted. `file` names the input(s).
Status child_end_status(const ChildEnd& end, const IsolationOptions& options);

/// "SIGSEGV" for 11, "signal 42" for names it does not know.
std::string signal_name(int signal);

}  // namespace ncert::certify
