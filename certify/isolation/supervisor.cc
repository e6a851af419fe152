#include "certify/isolation/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "certify/isolation/activity.h"
#include "certify/isolation/fd_write.h"

// The coverage runtime's flush (gcov's and clang's), in NCERT_COVERAGE builds only: a child
// ends with _exit, which skips the atexit handler that writes the counts. The reference is
// strong: the runtime is a static archive, and a weak reference does not pull it in.
#if defined(NCERT_COVERAGE)
extern "C" void __gcov_dump(void);
#endif

namespace ncert::certify {

namespace {

/// Ends a supervised child: its output flushed, its coverage counts written in a coverage
/// build, and no static destructors or atexit handlers (the parent owns the process's exit).
[[noreturn]] void end_child(int rc) {
  std::fflush(nullptr);
#if defined(NCERT_COVERAGE)
  __gcov_dump();
#endif
  _exit(rc);
}

volatile sig_atomic_t g_received = 0;  // SIGINT/SIGTERM seen by the supervisor

extern "C" void on_stop_signal(int sig) { g_received = sig; }

}  // namespace

int stop_received() { return g_received; }

void hold_stops_for_the_supervisor() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

namespace {

/// Installs on_stop_signal for SIGINT and SIGTERM without SA_RESTART, so poll() returns EINTR.
struct StopSignals {
  struct sigaction old_int {
  }, old_term{};
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

constexpr std::int64_t kStopGraceNs = 2'000'000'000;  // then SIGKILL: a child looping in libhdf5

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

/// Everything after fork() in the child, before the job's own work.
void prepare_child(ActivityPage* page, const IsolationOptions& o) {
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
}

/// Runs a job body, mapping what escapes it to exit 4 (the supervisor reports a crash).
template <typename F>
int guarded(F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "ncert: internal error (900): out of memory\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ncert: internal error (900): %s\n", e.what());
  }
  return 4;
}

}  // namespace

/// One supervised child: its pid and pidfd, its activity page, its output pipe (pool jobs).
struct IsolatedJobs::Job {
  int id = 0;
  pid_t pid = 0;
  int pidfd = -1;
  int out_fd = -1;
  ActivityPage* page = nullptr;
  std::string output;
  bool watchdog_killed = false, stop_killed = false;
  std::int64_t stop_sent_ns = 0;
  double stalled_seconds = 0;

  ~Job() {
    if (pidfd >= 0) close(pidfd);
    if (out_fd >= 0) close(out_fd);
    if (page) {
      page->~ActivityPage();
      munmap(page, sizeof(ActivityPage));
    }
  }

  /// How the child ended, from its wait status and what the supervisor did to it.
  ChildEnd end_from(int status) const {
    ChildEnd end;
    end.pid = pid;
    if (WIFEXITED(status)) {
      end.kind = ChildEnd::Kind::kExited;
      end.exit_code = WEXITSTATUS(status);
      return end;
    }
    end.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    if (watchdog_killed) {
      end.kind = ChildEnd::Kind::kHungInHdf5;
      end.stalled_seconds = stalled_seconds;
    } else if (stop_killed) {
      end.kind = ChildEnd::Kind::kInterrupted;
      end.signal = g_received;
    } else if (end.signal == SIGINT || end.signal == SIGTERM) {
      // Nothing in ncert raises these: a terminal's Ctrl-C reaches the whole process group, so
      // the child can die of it before the supervisor's handler has even run (and a campaign
      // would then journal the stop as a crash of that item). It is a stop, never a verdict.
      end.kind = ChildEnd::Kind::kInterrupted;
    } else {
      end.kind =
          page->depth.load(std::memory_order_acquire) > 0 ? ChildEnd::Kind::kCrashedInHdf5 : ChildEnd::Kind::kCrashed;
    }
    read_text(*page, &end.action, &end.object);
    return end;
  }

  /// Stop signals forwarded, the watchdog applied.
  void police(const IsolationOptions& o) {
    const std::int64_t now = monotonic_ns();
    if (g_received != 0 && !stop_killed) {
      // Stop the child the same way; it removes its temporary files on the way out.
      kill(pid, g_received);
      stop_killed = true;
      stop_sent_ns = now;
    } else if (stop_killed && now - stop_sent_ns > kStopGraceNs) {
      kill(pid, SIGKILL);
    }
    const auto timeout_ns = static_cast<std::int64_t>(o.hdf5_timeout_seconds * 1e9);
    if (timeout_ns > 0 && !watchdog_killed && !stop_killed && page->depth.load(std::memory_order_acquire) > 0) {
      const std::int64_t stalled = now - page->since_ns.load(std::memory_order_acquire);
      if (stalled > timeout_ns) {
        stalled_seconds = static_cast<double>(stalled) / 1e9;
        kill(pid, SIGKILL);
        watchdog_killed = true;
      }
    }
  }

  /// Reads what the pipe holds now (non-blocking).
  void drain() {
    if (out_fd < 0) return;
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(out_fd, buf, sizeof buf);
      if (n > 0) {
        output.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0) {
        close(out_fd);
        out_fd = -1;
      }
      return;  // EAGAIN, EINTR or EOF
    }
  }
};

std::string signal_name(int signal) {
  switch (signal) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGABRT:
      return "SIGABRT";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGKILL:
      return "SIGKILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGTRAP:
      return "SIGTRAP";
    default:
      return "signal " + std::to_string(signal);
  }
}

IsolatedJobs::IsolatedJobs(IsolationOptions options) : options_(options) {}

IsolatedJobs::~IsolatedJobs() {
  for (Job* j : jobs_) {
    kill(j->pid, SIGKILL);
    int status = 0;
    waitpid(j->pid, &status, 0);
    delete j;
  }
}

int IsolatedJobs::running() const { return static_cast<int>(jobs_.size()); }

Result<int> IsolatedJobs::start(const std::function<std::string()>& body) {
  void* mem = mmap(nullptr, sizeof(ActivityPage), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED)
    return Status(ErrorCode::kIo, std::string("cannot map an activity page: ") + std::strerror(errno));
  auto* job = new Job;
  job->id = next_id_++;
  job->page = new (mem) ActivityPage();
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    delete job;
    return Status(ErrorCode::kIo, std::string("cannot create a pipe: ") + std::strerror(errno));
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    delete job;
    return Status(ErrorCode::kIo, std::string("cannot start an isolated job: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    close(fds[0]);
    prepare_child(job->page, options_);
    end_child(guarded([&] { return write_all(fds[1], body()) == 0 ? 0 : 4; }));
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  job->pid = pid;
  job->out_fd = fds[0];
  job->pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  jobs_.push_back(job);
  return job->id;
}

Result<IsolatedJobs::Done> IsolatedJobs::wait_any() {
  if (jobs_.empty()) return Status(ErrorCode::kInvalidArgument, "no isolated job is running");
  StopSignals stop;
  for (;;) {
    for (std::size_t i = 0; i < jobs_.size(); ++i) {
      Job* j = jobs_[i];
      j->drain();
      int status = 0;
      const pid_t w = waitpid(j->pid, &status, WNOHANG);
      if (w == j->pid) {
        j->drain();  // what the child wrote before it exited
        Done d;
        d.id = j->id;
        d.end = j->end_from(status);
        d.output = std::move(j->output);
        jobs_.erase(jobs_.begin() + static_cast<std::ptrdiff_t>(i));
        delete j;
        return d;
      }
      j->police(options_);
    }
    // Woken when a child exits (pidfd) or writes (pipe); else every 100 ms for the watchdog.
    std::vector<pollfd> fds;
    for (Job* j : jobs_) {
      if (j->pidfd >= 0) fds.push_back(pollfd{j->pidfd, POLLIN, 0});
      if (j->out_fd >= 0) fds.push_back(pollfd{j->out_fd, POLLIN, 0});
    }
    if (fds.empty())
      usleep(20'000);
    else
      poll(fds.data(), fds.size(), 100);
  }
}

Result<ChildEnd> run_isolated(const std::function<int()>& body, const IsolationOptions& o) {
  if (!o.enabled) {
    ChildEnd end;
    end.exit_code = body();
    return end;
  }
  // One job whose exit code is the body's; it writes its own output (the report) itself.
  IsolatedJobs jobs(o);
  auto id = jobs.start([&]() -> std::string { end_child(guarded(body)); });
  if (!id.ok()) return id.status();
  NCERT_ASSIGN_OR_RETURN(IsolatedJobs::Done done, jobs.wait_any());
  return done.end;
}

Status child_end_status(const ChildEnd& end, const IsolationOptions& o) {
  const std::string where = end.object.empty() ? std::string() : " while " + end.action + " " + end.object;
  switch (end.kind) {
    case ChildEnd::Kind::kExited:
      return Status();
    case ChildEnd::Kind::kCrashedInHdf5:
      // SIGBUS inside libhdf5 is also what a file truncated while the survey reads its mapping
      // raises (certify/io/detail/file_image.h).
      return Status(ErrorCode::kHdf5Crashed,
                    "the HDF5 library crashed (" + signal_name(end.signal) + ")" + where +
                        (end.signal == SIGBUS ? ": the file is corrupt, or another process truncated it"
                                              : ": the file is corrupt"));
    case ChildEnd::Kind::kHungInHdf5: {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.0f", o.hdf5_timeout_seconds);
      return Status(ErrorCode::kHdf5Hung, std::string("the HDF5 library made no progress for ") + secs + " s" + where +
                                              ": the file is corrupt, or one call takes longer than that (a "
                                              "chunk that inflates to gigabytes; stopped by the watchdog: "
                                              "--hdf5-timeout sets its time)");
    }
    case ChildEnd::Kind::kCrashed:
      return Status(ErrorCode::kInternal,
                    "ncert crashed (" + signal_name(end.signal) + ") outside the HDF5 library" +
                        (end.signal == SIGKILL ? " (SIGKILL: perhaps the system ran out of memory)" : std::string()) +
                        (end.signal == SIGBUS ? ": another process truncated an input file while its data was mapped "
                                                "(certify files nothing writes to), or this is a bug in ncert"
                                              : ": this is a bug in ncert, please report it with the input"));
    case ChildEnd::Kind::kInterrupted:
      return Status(ErrorCode::kInterrupted, "interrupted by " + signal_name(end.signal));
  }
  return Status();
}

}  // namespace ncert::certify
