#include "certify/report/report_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>

#include "certify/isolation/fd_write.h"

namespace ncert::certify {

namespace {

// The temporary files in flight, for the signal handler: fixed buffers (no allocation in a
// handler), empty when none. A command writes at most its three reports at once.
constexpr std::size_t kMaxTemps = 3;
char g_temps[kMaxTemps][PATH_MAX + 32] = {};
struct sigaction g_old_int {
}, g_old_term{};
volatile sig_atomic_t g_held_stop = 0;  // a stop that came while the renames ran

extern "C" void remove_temp_and_die(int sig) {
  for (auto& temp : g_temps) {
    if (temp[0] != '\0') unlink(temp);
  }
  // Die by the same signal, as if the handler had never been installed.
  signal(sig, SIG_DFL);
  raise(sig);
}

extern "C" void hold_stop(int sig) { g_held_stop = sig; }

void install(void (*handler)(int)) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

/// The signal handling of one write_report_files call, in one object so no moment is left
/// between two owners: a stop while the temporaries are written removes them and ends the
/// process (remove_temp_and_die); hold_stops() then notes a stop while the renames run, and the
/// end either delivers it (once everything is in place or removed) or, keep_held(), ignores
/// stops from then on. Two guards restoring in turn left the default action back in place after
/// the renames, and a stop there ended the run "no report written" beside its new reports (a
/// review's, under strace).
class TempGuard {
 public:
  explicit TempGuard(const std::vector<std::string>& paths) {
    for (std::size_t i = 0; i < paths.size() && i < kMaxTemps; ++i) {
      std::snprintf(g_temps[i], sizeof g_temps[i], "%s", paths[i].c_str());
    }
    struct sigaction sa {};
    sa.sa_handler = remove_temp_and_die;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &g_old_int);
    sigaction(SIGTERM, &sa, &g_old_term);
  }
  TempGuard(const TempGuard&) = delete;
  TempGuard& operator=(const TempGuard&) = delete;
  void hold_stops() {
    g_held_stop = 0;
    install(hold_stop);
  }
  void keep_held() { keep_held_ = true; }
  ~TempGuard() {
    for (auto& temp : g_temps) {
      if (temp[0] != '\0') unlink(temp);  // after a successful rename there is nothing left to remove
      temp[0] = '\0';
    }
    if (keep_held_) {
      install(SIG_IGN);
      return;
    }
    sigaction(SIGINT, &g_old_int, nullptr);
    sigaction(SIGTERM, &g_old_term, nullptr);
    if (const int held = g_held_stop; held != 0) {
      g_held_stop = 0;
      raise(held);
    }
  }

 private:
  bool keep_held_ = false;
};

Status write_failure(const std::string& path, const std::string& what, int err) {
  return Status(ErrorCode::kReportWrite,
                "cannot write the report to " + path + ": " + what + ": " + std::strerror(err));
}

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// The file a path names after following symlinks, or the path itself when it does not exist.
std::string resolved(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) != nullptr) return buf;
  // A symbolic link to a file not there yet: the report goes where it points, as through a link
  // to an existing one (a dangling link was replaced by a regular file and its target never
  // written: a review's). Followed as the kernel would, up to its 40 links.
  std::string p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) break;
    char target[PATH_MAX];
    const ssize_t n = ::readlink(p.c_str(), target, sizeof target - 1);
    if (n < 0) break;
    target[n] = '\0';
    const std::filesystem::path t(target);
    p = t.is_absolute() ? t.string() : (std::filesystem::path(p).parent_path() / t).string();
  }
  return p;
}

/// The path made absolute and normal, following the symbolic links of the part that exists: two
/// spellings of one path not yet created compare equal ("r.json", "./sub/../r.json").
std::string normal_path(const std::string& path) {
  std::error_code ec;
  // A dangling link names the path it points at (resolved), which another output may name too.
  const auto p = std::filesystem::weakly_canonical(std::filesystem::absolute(resolved(path), ec), ec);
  return ec ? path : p.lexically_normal().string();
}

/// Whether two paths are one file: the same device and inode when both exist, else the same
/// normal path (one of them is still to be created, and would be created over the other).
bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  const bool a_exists = ::stat(a.c_str(), &sa) == 0;
  const bool b_exists = ::stat(b.c_str(), &sb) == 0;
  if (a_exists && b_exists) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (a_exists != b_exists) return false;  // one exists and the other does not: two paths
  return a == b || normal_path(a) == normal_path(b);
}

/// /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N, /proc/thread-self/fd/N and
/// /proc/<pid>/fd/N name a descriptor already open.
bool names_open_descriptor(const std::string& path) {
  if (path == "/dev/stdout" || path == "/dev/stderr") return true;
  for (const char* prefix : {"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"}) {
    if (path.rfind(prefix, 0) == 0) return true;
  }
  if (path.rfind("/proc/", 0) != 0) return false;
  const std::size_t digits = path.find_first_not_of("0123456789", 6);
  return digits > 6 && digits != std::string::npos && path.compare(digits, 4, "/fd/") == 0;
}

/// Whether `path` names the file `file` describes (same device and inode).
bool names_file(const std::string& path, const struct stat& file) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && st.st_dev == file.st_dev && st.st_ino == file.st_ino;
}

/// What fd 1 is (device and inode), or nullopt when it is closed.
std::optional<struct stat> stdout_file() {
  struct stat st {};
  if (::fstat(STDOUT_FILENO, &st) != 0) return std::nullopt;
  return st;
}

/// Whether an output goes to stdout: "-", a name of descriptor 1 (/dev/stdout, /dev/fd/1,
/// /proc/self/fd/1, /proc/<this pid>/fd/1), or any path to the file fd 1 is open on (`--json
/// out.txt > out.txt`, /dev/stderr after 2>&1) unless that is a character device: /dev/null
/// takes any number of reports, and a terminal shows them in turn. Two outputs on a file or pipe
/// mix or overwrite each other: one is written through stdout at its own offset, the other
/// appended through a descriptor of its own, so the second report lands over the first.
bool goes_to_stdout(const std::string& path, const std::optional<struct stat>& out) {
  if (path == "-") return true;
  for (const std::string& spelling :
       {std::string("/dev/stdout"), std::string("/dev/fd/1"), std::string("/proc/self/fd/1"),
        std::string("/proc/thread-self/fd/1"), "/proc/" + std::to_string(::getpid()) + "/fd/1"}) {
    if (path == spelling) return true;
  }
  return out && !S_ISCHR(out->st_mode) && names_file(path, *out);
}

}  // namespace

Status check_output_place(const NamedPath& out) {
  const std::string& flag = out.role;
  const std::string& path = out.path;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status(ErrorCode::kUsage, flag + " " + path + " is a directory");
    if (is_stream_path(path)) {
      if (::access(path.c_str(), W_OK) != 0) {
        return Status(ErrorCode::kUsage, flag + " " + path + " is not writable: " + std::strerror(errno));
      }
      return Status();
    }
    if (out.report) {
      if (const std::string what = replaceable_by_report(path); !what.empty()) {
        return Status(ErrorCode::kOutputExists, flag + " " + path + " exists and is " + what +
                                                    ": refusing to replace it with a report (remove it, or "
                                                    "choose another path)");
      }
    }
  }
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode) && ::stat(path.c_str(), &st) != 0 && errno == ELOOP) {
    return Status(ErrorCode::kUsage, flag + " " + path + " is a symbolic link that loops");
  }
  const std::string dir = directory_of(resolved(path));
  if (::stat(dir.c_str(), &st) != 0) {
    return Status(ErrorCode::kUsage, flag + " " + path + ": the directory " + dir + " does not exist");
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status(ErrorCode::kUsage, flag + " " + path + ": " + dir + " is not a directory");
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    return Status(ErrorCode::kUsage,
                  flag + " " + path + ": cannot create files in " + dir + ": " + std::strerror(errno));
  }
  // access() answers yes to root wherever the mode bits do, and a file system may still refuse
  // (sysfs, a read-only mount): a file made and removed again is the answer (a review's --state
  // /sys/kernel was found out only by the run, as io, exit 3).
  const std::string probe = dir + "/.ncert-probe." + std::to_string(static_cast<long>(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    if (err != EEXIST) {
      return Status(ErrorCode::kUsage,
                    flag + " " + path + ": cannot create files in " + dir + ": " + std::strerror(err));
    }
  } else {
    ::close(fd);
    ::unlink(probe.c_str());
  }
  return Status();
}

std::string replaceable_by_report(const std::string& path) {
  // 4 KiB holds each form's opening with room to spare: the JSON report's first key, the HTML
  // title ~400 bytes in, the JUnit suite on its second line.
  char head[4096];
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  // A file that cannot be read cannot be told from a dump, and the rename would replace it.
  if (fd < 0) return std::string("a file that cannot be read (") + std::strerror(errno) + ")";
  std::size_t got = 0;
  while (got < sizeof head) {
    const ssize_t n = ::read(fd, head + got, sizeof head - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  std::string_view text(head, got);
  if (text.empty()) return "";
  // Each form as ncert writes it, from its first byte: a file that merely quotes a marker (a
  // header, these notes) is not a report.
  const auto after_space = [](std::string_view t) {
    return t.substr(std::min(t.size(), t.find_first_not_of(" \t\r\n")));
  };
  if (std::string_view t = text; t.starts_with("{")) {
    t = after_space(t.substr(1));
    if (t.starts_with(R"("tool")")) {
      t = after_space(t.substr(6));
      if (t.starts_with(":") && after_space(t.substr(1)).starts_with(R"("ncert")")) return "";
    }
  }
  if (text.starts_with("<!DOCTYPE html>") && text.find("<title>ncert ") != std::string_view::npos) return "";
  if (text.starts_with("<?xml") && text.find(R"(<testsuites name="ncert )") != std::string_view::npos) return "";
  if (text.starts_with("\x89HDF\r\n\x1a\n")) return "an HDF5 file";
  return "not a report of ncert's";
}

bool is_stream_path(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  return !S_ISREG(st.st_mode) || names_open_descriptor(path);
}

std::string report_temp_path(const std::string& path, long pid) {
  return resolved(path) + ".tmp." + std::to_string(pid);
}

Status check_command_paths(const CommandPaths& paths) {
  std::vector<const NamedPath*> outputs;
  for (const NamedPath& out : paths.outputs) {
    if (!out.path.empty()) outputs.push_back(&out);
  }
  const std::optional<struct stat> out_file = stdout_file();
  // Stdout is always written (the summary, or the report given "-"): appended to an input
  // (`check D.h5 --json - >> D.h5`), it would change the bytes the report vouches for.
  if (out_file) {
    for (const NamedPath& in : paths.inputs) {
      if (!in.path.empty() && names_file(in.path, *out_file)) {
        return Status(ErrorCode::kPathConflict,
                      "stdout is the input " + in.path + " (" + in.role + "): refusing to write into an input");
      }
    }
  }
  const NamedPath* on_stdout = nullptr;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& out = *outputs[i];
    if (goes_to_stdout(out.path, out_file)) {
      // A report may go through stdout (`--json out.txt > out.txt`); any other output on the
      // file stdout appends to gets the summary lines mixed in (a review's `--resume >>
      // model.json.journal`).
      if (!out.report && out.path != "-") {
        return Status(ErrorCode::kPathConflict, "stdout is " + out.role + " " + out.path +
                                                    ": refusing to write the summary into it (redirect stdout "
                                                    "elsewhere)");
      }
      if (on_stdout != nullptr) {
        const auto named = [](const NamedPath& o) { return o.role + (o.path == "-" ? "" : " " + o.path); };
        return Status(ErrorCode::kUsage,
                      named(*on_stdout) + " and " + named(out) + " both name stdout: give each report its own path");
      }
      on_stdout = &out;
      if (out.path == "-") continue;
    }
    for (const NamedPath& in : paths.inputs) {
      if (!in.path.empty() && same_file(out.path, in.path)) {
        return Status(ErrorCode::kPathConflict, out.role + " " + out.path + " is the input " + in.path + " (" +
                                                    in.role + "): refusing to overwrite an input");
      }
    }
    // A device or pipe (/dev/null twice) is written in place and can take several outputs.
    if (!is_stream_path(out.path)) {
      for (std::size_t j = 0; j < i; ++j) {
        const NamedPath& other = *outputs[j];
        if (other.path != "-" && same_file(out.path, other.path)) {
          return Status(ErrorCode::kPathConflict,
                        other.role + " and " + out.role + " both name " + out.path + ": give each output its own path");
        }
      }
    }
    NCERT_RETURN_IF_ERROR(check_output_place(out));
  }
  return Status();
}

Status write_stdout(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    const int err = errno;
    std::clearerr(stdout);
    return write_failure("standard output", "write", err);
  }
  return Status();
}

Status write_report_file(const std::string& path, const std::string& text) {
  return write_report_files({{path, text}}, false).front();
}

std::vector<Status> write_report_files(const std::vector<std::pair<std::string, std::string>>& files, bool last) {
  std::vector<Status> out(files.size());
  // Regular files or new ones: whole or not at all, each to a temporary file beside its real
  // target (rename stays on one filesystem, and a symlink keeps pointing at the report).
  std::vector<std::string> temps(files.size()), targets(files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string& path = files[i].first;
    if (path == "-" || is_stream_path(path)) continue;
    targets[i] = resolved(path);
    temps[i] = report_temp_path(path, static_cast<long>(::getpid()));
  }
  TempGuard guard(temps);
  for (std::size_t i = 0; i < files.size(); ++i) {
    const auto& [path, text] = files[i];
    if (path == "-") {
      out[i] = write_stdout(text);
    } else if (temps[i].empty()) {
      // A device, FIFO or open descriptor: in place, appending (a regular file behind
      // /dev/stdout already holds the human summary). Any other regular file, in /dev/shm too,
      // is replaced.
      const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
      if (fd < 0) {
        out[i] = write_failure(path, "open", errno);
        continue;
      }
      const int err = write_all(fd, text);
      const int cerr = ::close(fd) != 0 ? errno : 0;
      if (err != 0) out[i] = write_failure(path, "write", err);
      if (err == 0 && cerr != 0 && cerr != EINTR) out[i] = write_failure(path, "close", cerr);
    } else {
      const int fd = ::open(temps[i].c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd < 0) {
        out[i] = write_failure(path, "create " + temps[i], errno);
        temps[i].clear();
        continue;
      }
      int err = write_all(fd, text);
      if (err == 0 && ::fsync(fd) != 0 && errno != EINVAL) err = errno;
      if (::close(fd) != 0 && err == 0 && errno != EINTR) err = errno;
      if (err != 0) {
        out[i] = write_failure(path, "write", err);
        ::unlink(temps[i].c_str());
        temps[i].clear();
      }
    }
  }
  // Every report written, or none replaced: one that could not be written (a full disk) leaves
  // the others as they were too, each failing with the reason.
  const auto failed = std::find_if(out.begin(), out.end(), [](const Status& s) { return !s.ok(); });
  if (failed != out.end()) {
    const std::string why = failed->message();
    for (std::size_t i = 0; i < files.size(); ++i) {
      if (temps[i].empty() || !out[i].ok()) continue;
      out[i] = Status(ErrorCode::kReportWrite,
                      "not replacing " + files[i].first + ": the reports are replaced together, and " + why);
    }
    return out;  // the guard removes the temporaries
  }
  // Put in place together. A SIGTERM while three were written left the JSON new beside the old
  // JUnit and HTML, under "no report written" (a review's): a stop before this point changes
  // none, one during the renames waits for them, and after the run's last act none stops it.
  guard.hold_stops();
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (temps[i].empty()) continue;
    if (::rename(temps[i].c_str(), targets[i].c_str()) != 0) out[i] = write_failure(files[i].first, "rename", errno);
  }
  if (last) guard.keep_held();
  return out;
}

}  // namespace ncert::certify
