#include "certify/isolation/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>

#include "certify/isolation/activity.h"

namespace ncert::certify {

namespace {

volatile sig_atomic_t g_received = 0;  // SIGINT/SIGTERM seen by the supervisor

extern "C" void on_stop_signal(int sig) { g_received = sig; }

/// Installs on_stop_signal for SIGINT and SIGTERM without SA_RESTART, so poll() returns EINTR.
struct StopSignals {
  struct sigaction old_int {}, old_term {};
  StopSignals() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
  }
};

/// The activity page's text, read consistently (the child may still be writing it).
void read_text(const ActivityPage& page, std::string* action, std::string* object) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::uint64_t v0 = page.version.load(std::memory_order_acquire);
    if (v0 % 2 == 1) continue;
    std::string a(page.action, strnlen(page.action, sizeof page.action));
    std::string o(page.object, strnlen(page.object, sizeof page.object));
    if (page.version.load(std::memory_order_acquire) == v0) {
      *action = std::move(a);
      *object = std::move(o);
      return;
    }
  }
}

[[noreturn]] void run_child(const std::function<int()>& body, ActivityPage* page, const IsolationOptions& o) {
  // The child must not outlive its supervisor (killed by SIGKILL, say).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // fork() copied the supervisor's SIGINT/SIGTERM handlers; the child dies by those signals
  // (the report writer installs its own cleanup for the moment a temporary file exists).
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  set_activity_page(page);
  if (o.address_space_limit > 0) {
    const rlimit lim{o.address_space_limit, o.address_space_limit};
    setrlimit(RLIMIT_AS, &lim);
  }
  int rc = 4;
  try {
    rc = body();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "ncert: internal error (900): out of memory\n");
    rc = 4;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ncert: internal error (900): %s\n", e.what());
    rc = 4;
  }
  std::fflush(nullptr);
  // No static destructors or atexit handlers: the parent owns the process's exit.
  _exit(rc);
}

ChildEnd::Kind kind_for_signal(const ActivityPage& page) {
  return page.depth.load(std::memory_order_acquire) > 0 ? ChildEnd::Kind::kCrashedInHdf5 : ChildEnd::Kind::kCrashed;
}

/// Waits for the child, watching for stalls inside libhdf5 and for stop signals.
ChildEnd supervise(pid_t pid, const ActivityPage& page, const IsolationOptions& o) {
  ChildEnd end;
  end.pid = pid;
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  const auto timeout_ns = static_cast<std::int64_t>(o.hdf5_timeout_seconds * 1e9);
  bool killed_by_watchdog = false, killed_by_stop = false;
  std::int64_t stop_sent_ns = 0;
  constexpr std::int64_t kStopGraceNs = 2'000'000'000;  // then SIGKILL: a child looping in libhdf5
  for (;;) {
    int status = 0;
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      if (WIFEXITED(status)) {
        end.kind = ChildEnd::Kind::kExited;
        end.exit_code = WEXITSTATUS(status);
      } else {
        end.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        end.kind = killed_by_watchdog ? ChildEnd::Kind::kHungInHdf5
                   : killed_by_stop   ? ChildEnd::Kind::kInterrupted
                                      : kind_for_signal(page);
        if (killed_by_stop) end.signal = g_received;
      }
      break;
    }
    if (w < 0 && errno != EINTR) {
      end.kind = ChildEnd::Kind::kCrashed;
      break;
    }
    if (g_received != 0 && !killed_by_stop) {
      // Stop the child the same way; it removes its temporary files on the way out.
      kill(pid, g_received);
      killed_by_stop = true;
      stop_sent_ns = monotonic_ns();
    } else if (killed_by_stop && monotonic_ns() - stop_sent_ns > kStopGraceNs) {
      kill(pid, SIGKILL);
    }
    if (timeout_ns > 0 && !killed_by_watchdog && !killed_by_stop && page.depth.load(std::memory_order_acquire) > 0) {
      const std::int64_t stalled = monotonic_ns() - page.since_ns.load(std::memory_order_acquire);
      if (stalled > timeout_ns) {
        end.stalled_seconds = static_cast<double>(stalled) / 1e9;
        kill(pid, SIGKILL);
        killed_by_watchdog = true;
      }
    }
    // Woken at once when the child exits (pidfd), else every 100 ms for the watchdog.
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      poll(&p, 1, 100);
    } else {
      usleep(20'000);
    }
  }
  if (pidfd >= 0) close(pidfd);
  if (end.kind != ChildEnd::Kind::kExited) read_text(page, &end.action, &end.object);
  return end;
}

}  // namespace

std::string signal_name(int signal) {
  switch (signal) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGABRT: return "SIGABRT";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGTRAP: return "SIGTRAP";
    default: return "signal " + std::to_string(signal);
  }
}

Result<ChildEnd> run_isolated(const std::function<int()>& body, const IsolationOptions& o) {
  if (!o.enabled) {
    ChildEnd end;
    end.exit_code = body();
    return end;
  }
  void* mem = mmap(nullptr, sizeof(ActivityPage), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return Status(ErrorCode::kIo, std::string("cannot map the activity page: ") + std::strerror(errno));
  auto* page = new (mem) ActivityPage();
  std::fflush(nullptr);
  StopSignals stop;
  const pid_t pid = fork();
  if (pid < 0) {
    munmap(mem, sizeof(ActivityPage));
    return Status(ErrorCode::kIo, std::string("cannot start the isolated reader: fork: ") + std::strerror(errno));
  }
  if (pid == 0) run_child(body, page, o);
  const ChildEnd end = supervise(pid, *page, o);
  page->~ActivityPage();
  munmap(mem, sizeof(ActivityPage));
  return end;
}

Status child_end_status(const ChildEnd& end, const IsolationOptions& o) {
  const std::string where = end.object.empty() ? std::string() : " while " + end.action + " " + end.object;
  switch (end.kind) {
    case ChildEnd::Kind::kExited: return Status();
    case ChildEnd::Kind::kCrashedInHdf5:
      return Status(ErrorCode::kHdf5Crashed, "the HDF5 library crashed (" + signal_name(end.signal) + ")" + where +
                                                 ": the file is corrupt");
    case ChildEnd::Kind::kHungInHdf5: {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.0f", o.hdf5_timeout_seconds);
      return Status(ErrorCode::kHdf5Hung, std::string("the HDF5 library made no progress for ") + secs + " s" + where +
                                              ": the file is corrupt (stopped by the watchdog; --hdf5-timeout sets "
                                              "its time)");
    }
    case ChildEnd::Kind::kCrashed:
      return Status(ErrorCode::kInternal,
                    "ncert crashed (" + signal_name(end.signal) + ") outside the HDF5 library" +
                        (end.signal == SIGKILL ? " (SIGKILL: perhaps the system ran out of memory)" : std::string()) +
                        ": this is a bug in ncert, please report it with the input");
    case ChildEnd::Kind::kInterrupted:
      return Status(ErrorCode::kInterrupted, "interrupted by " + signal_name(end.signal));
  }
  return Status();
}

}  // namespace ncert::certify
