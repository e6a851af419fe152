#include "certify/campaign/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>

#include "certify/io/hash.h"
#include "certify/isolation/fd_write.h"
#include "certify/report/wire.h"

namespace ncert::certify {

namespace {

using Json = nlohmann::ordered_json;

/// The journal format this ncert writes: 2, lines chained by checksums (1 had none).
constexpr int kJournalFormat = 2;

// A line is exactly kSumPrefix, 32 hex digits, kBodyPrefix, the body, '}': the sum covers the
// body's bytes as written, never a re-serialization of them.
constexpr std::string_view kSumPrefix = "{\"sum\":\"";
constexpr std::string_view kBodyPrefix = "\",\"line\":";
constexpr std::size_t kSumDigits = 32;

Status io_error(const std::string& path, const std::string& what) {
  return Status(ErrorCode::kIo, path + ": " + what + ": " + std::strerror(errno));
}

Status write_line(int fd, const std::string& path, const std::string& line) {
  if (const int err = write_all(fd, line); err != 0) {
    errno = err;
    return io_error(path, "write");
  }
  if (::fdatasync(fd) != 0) return io_error(path, "fdatasync");
  return Status();
}

// The journals this process holds open and locked. A child forked to run a work item closes its
// copies of their descriptors at once: the lock belongs to the open file, so a child's copy kept
// it locked after the campaign itself was killed, until the child ended (a review's resume right
// after a SIGKILL was refused, 1 time in 40, while the workers exited).
struct HeldFd {
  std::atomic<int> fd{-1};
};
// One campaign holds one journal; tests open a few. A journal beyond these is still locked and
// written; only its children's copies stay open (the refusal after a kill, above).
constexpr int kMaxHeld = 64;
HeldFd g_held[kMaxHeld];

void close_held_in_child() {
  for (HeldFd& h : g_held) {
    const int fd = h.fd.load();
    if (fd >= 0) ::close(fd);
  }
}

void hold(int fd) {
  static std::once_flag registered;
  std::call_once(registered, [] { ::pthread_atfork(nullptr, nullptr, close_held_in_child); });
  for (HeldFd& h : g_held) {
    int none = -1;
    if (h.fd.compare_exchange_strong(none, fd)) return;
  }
}

void unhold(int fd) {
  for (HeldFd& h : g_held) {
    int held = fd;
    if (h.fd.compare_exchange_strong(held, -1)) return;
  }
}

Status held_by_another(const std::string& path) {
  return Status(ErrorCode::kOutputExists,
                path +
                    ": another campaign is running with this journal (or one just stopped whose worker processes "
                    "are still ending): wait for it, or give this one another --state directory");
}

/// Takes the journal's lock (flock, exclusive, not waiting): one campaign at a time writes a
/// journal. The lock goes with the descriptor, so a killed campaign never leaves it held.
Status lock(int fd, const std::string& path) {
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return Status();
  if (errno == EWOULDBLOCK) return held_by_another(path);
  return io_error(path, "lock");
}

/// lock(), then whether the locked file is still the one at `path`: a campaign that replaces
/// the journal renames a new file over it while it holds the old one's lock, so a campaign that
/// opened the old file and locks it after that holds a file no longer there (two campaigns
/// started within milliseconds both ran, and one journal was lost: a review's).
Status lock_current(int fd, const std::string& path) {
  NCERT_RETURN_IF_ERROR(lock(fd, path));
  struct stat held {
  }, now{};
  if (::fstat(fd, &held) != 0) return io_error(path, "stat");
  if (::stat(path.c_str(), &now) != 0 || held.st_ino != now.st_ino || held.st_dev != now.st_dev) {
    return held_by_another(path);
  }
  return Status();
}

/// 128 random bits: the campaign's id in its header, so no line of another journal (even of the
/// same manifest) chains into this one.
std::string campaign_id() {
  std::random_device device;
  char text[33];
  std::snprintf(text, sizeof text, "%08x%08x%08x%08x", device(), device(), device(), device());
  return text;
}

/// The header's body: the journal's format, the wire form of the results it holds (report/wire.h
/// kWireVersion), the manifest it belongs to and the campaign's id.
std::string header_body(const std::string& manifest_xxh3) {
  return Json{{"ncert_campaign_journal", kJournalFormat},
              {"wire", kWireVersion},
              {"manifest_xxh3_128", manifest_xxh3},
              {"campaign", campaign_id()}}
      .dump();
}

bool is_hex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

struct Framed {
  std::string sum;
  std::string body;
};

/// A format-2 line's sum and body, or none when the line is not one.
std::optional<Framed> unframe(std::string_view line) {
  const std::size_t head = kSumPrefix.size() + kSumDigits + kBodyPrefix.size();
  if (line.size() < head + 1 || line.substr(0, kSumPrefix.size()) != kSumPrefix ||
      line.substr(kSumPrefix.size() + kSumDigits, kBodyPrefix.size()) != kBodyPrefix || line.back() != '}') {
    return std::nullopt;
  }
  const std::string_view sum = line.substr(kSumPrefix.size(), kSumDigits);
  if (!is_hex(sum)) return std::nullopt;
  return Framed{std::string(sum), std::string(line.substr(head, line.size() - head - 1))};
}

std::optional<Json> parse(std::string_view text) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::exception&) {
    return std::nullopt;
  }
}

bool is_header(const Json& j) { return j.is_object() && j.contains("ncert_campaign_journal"); }

bool is_record(const Json& j) {
  return j.is_object() && j.contains("key") && j["key"].is_string() && j.contains("inputs") &&
         j["inputs"].is_object() && j.contains("result") && (!j.contains("batch") || j["batch"].is_string());
}

std::string line_name(std::size_t number, const std::optional<Json>& body) {
  std::string name = "line " + std::to_string(number);
  if (body && body->is_object() && body->contains("key") && (*body)["key"].is_string()) {
    name += " (" + (*body)["key"].get<std::string>() + ")";
  }
  return name;
}

/// "" when the file open on `fd` may be replaced by a new journal: it is empty, or its first
/// line begins as a journal header does (format 2: `{"sum":"<32 hex digits>","line":` and then
/// the header's first key; format 1: that key at once); else what it is instead. `--journal
/// notes.txt` or a stray file named <manifest>.journal is never replaced.
std::string replaceable_by_journal(int fd) {
  // A header's first key sits 50 bytes in (format 2: 8 + 32 digits + 10); 256 bytes hold it.
  char head[256];
  std::size_t got = 0;
  while (got < sizeof head) {
    const ssize_t n = ::pread(fd, head + got, sizeof head - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::string("a file that cannot be read (") + std::strerror(errno) + ")";
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  std::string_view text(head, got);
  if (text.empty()) return "";
  constexpr std::string_view kHeaderKey = "{\"ncert_campaign_journal\":";
  if (text.starts_with(kSumPrefix) && text.size() > kSumPrefix.size() + kSumDigits &&
      is_hex(text.substr(kSumPrefix.size(), kSumDigits))) {
    text = text.substr(kSumPrefix.size() + kSumDigits);
    if (!text.starts_with(kBodyPrefix)) return "not a campaign journal";
    text = text.substr(kBodyPrefix.size());
  }
  if (text.starts_with(kHeaderKey)) return "";
  if (text.starts_with("\x89HDF\r\n\x1a\n")) return "an HDF5 file";
  return "not a campaign journal";
}

/// Reads the journal's lines in order: verified records into `contents`, a notice for each
/// line not trusted. Tracks the chain: `prev` is the previous line's sum as written.
class Reader {
 public:
  Reader(std::string path, std::string manifest_xxh3, JournalContents* contents)
      : path_(std::move(path)), manifest_(std::move(manifest_xxh3)), contents_(contents) {}

  Status line(std::size_t number, std::string_view text) {
    const std::optional<Framed> framed = unframe(text);
    if (!framed) return unframed(number, text);
    const std::optional<Json> body = parse(framed->body);
    if (body && is_header(*body)) return header(number, *framed, *body);
    if (number == 1) return no_header();
    const bool verifies = framed->sum == journal_line_sum(prev_, framed->body);
    prev_ = framed->sum;
    last_trusted_ = false;
    if (!body || !is_record(*body)) {
      notice(number, body, "is not a journal record");
    } else if (!trusted_segment_) {
      notice(number, body, "follows a journal header that does not verify");
    } else if (!verifies) {
      notice(number, body,
             "does not verify against its content and the line before it (edited, a line before it removed, or "
             "copied from another journal)");
    } else {
      contents_->records.push_back(JournalRecord{(*body)["key"].get<std::string>(), (*body)["inputs"],
                                                 (*body)["result"], body->value("batch", std::string()), number});
      last_trusted_ = true;
    }
    return Status();
  }

  /// After the last line: the notice of format-1 records, if any.
  void finish() {
    if (old_header_ == 0) return;
    contents_->notices.push_back(
        "line " + std::to_string(old_header_) + " starts a journal written before journal lines carried checksums " +
        "(format 1): none of its " + std::to_string(old_records_) + " records is trusted; their items ran again");
  }

  bool saw_header() const { return saw_header_; }
  /// Whether new lines may continue the chain (the last line is a trusted header or record).
  bool chain_continues() const { return last_trusted_; }
  const std::string& last_sum() const { return prev_; }

 private:
  Status no_header() const { return Status(ErrorCode::kUsage, path_ + " does not start with a journal header"); }

  Status other_manifest() const {
    return Status(ErrorCode::kUsage, path_ + " is the journal of another manifest (or of this one before it changed)");
  }

  /// A line without a checksum: a format-1 header or record, or not a journal line.
  Status unframed(std::size_t number, std::string_view text) {
    const std::optional<Json> j = parse(text);
    prev_.clear();
    last_trusted_ = false;
    if (j && is_header(*j)) {
      // Format 1: bound to the manifest like format 2, but nothing in it is trusted (read as
      // lines only, whatever wire form its results have).
      if (j->value("manifest_xxh3_128", std::string()) != manifest_) return other_manifest();
      saw_header_ = true;
      trusted_segment_ = false;
      if (old_header_ == 0) old_header_ = number;
      return Status();
    }
    if (number == 1) return no_header();
    if (old_header_ != 0 && !trusted_segment_ && j && j->is_object() && j->contains("key")) {
      ++old_records_;
    } else {
      notice(number, j, "is not a journal line (no checksum)");
    }
    return Status();
  }

  Status header(std::size_t number, const Framed& framed, const Json& body) {
    const Json& format = body["ncert_campaign_journal"];
    if (format != Json(kJournalFormat)) {
      return Status(ErrorCode::kUsage, path_ + " is a journal of format " + format.dump() +
                                           ", written by another ncert version (this one writes format " +
                                           std::to_string(kJournalFormat) + "): remove it to start again");
    }
    // Results of another wire form are refused before any is read, with a usage error that says
    // what to do (were they read anyway, report_from_wire and checks_from_wire would reject each,
    // kInvalidArgument naming the member, and the entry would fail carrying the error).
    if (const auto wire = body.find("wire"); wire == body.end() || *wire != Json(kWireVersion)) {
      return Status(ErrorCode::kUsage,
                    path_ + " holds results in wire format " + (wire == body.end() ? "none" : wire->dump()) +
                        ", written by another ncert version (this one reads format " + std::to_string(kWireVersion) +
                        "): finish that campaign with the ncert that started it, or remove the journal to start "
                        "again");
    }
    if (body.value("manifest_xxh3_128", std::string()) != manifest_) return other_manifest();
    saw_header_ = true;
    trusted_segment_ = framed.sum == journal_line_sum(manifest_, framed.body);
    if (!trusted_segment_) {
      notice(number, body, "is a journal header that does not verify: the records after it are not trusted");
    }
    prev_ = framed.sum;
    last_trusted_ = trusted_segment_;
    return Status();
  }

  void notice(std::size_t number, const std::optional<Json>& body, const std::string& what) {
    contents_->notices.push_back(line_name(number, body) + " " + what + ": not trusted, its item ran again");
  }

  std::string path_, manifest_;
  JournalContents* contents_;
  std::string prev_;
  bool saw_header_ = false, trusted_segment_ = false, last_trusted_ = false;
  std::size_t old_header_ = 0, old_records_ = 0;
};

}  // namespace

std::string journal_line_sum(const std::string& prev, const std::string& body) {
  const std::string text = prev + body;
  return xxh3_128_hex(text.data(), text.size());
}

Journal::Journal(Journal&& o) noexcept
    : path_(std::move(o.path_)), fd_(std::exchange(o.fd_, -1)), last_sum_(std::move(o.last_sum_)) {}
Journal& Journal::operator=(Journal&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) {
      unhold(fd_);
      ::close(fd_);
    }
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    last_sum_ = std::move(o.last_sum_);
  }
  return *this;
}
Journal::~Journal() {
  if (fd_ >= 0) {
    unhold(fd_);
    ::close(fd_);
  }
}

Status Journal::append_line(const std::string& prev, const std::string& body) {
  const std::string sum = journal_line_sum(prev, body);
  NCERT_RETURN_IF_ERROR(
      write_line(fd_, path_, std::string(kSumPrefix) + sum + std::string(kBodyPrefix) + body + "}\n"));
  last_sum_ = sum;
  return Status();
}

Result<Journal> Journal::create(const std::string& path, const std::string& manifest_xxh3) {
  // A journal already there (a finished campaign's, or an unfinished one's not resumed) is
  // replaced only once this one has its header on disk: the new journal is written beside it and
  // renamed over it, so at every moment the path holds one whole journal. One still in use by a
  // running campaign is refused instead.
  // The file at the path (an empty one created where there is none, so that two campaigns
  // starting together lock the same file) is locked until the new journal, locked too, has been
  // renamed over it: a second campaign finds one of the two locked, or holds a file no longer
  // at the path (lock_current).
  bool created = false;
  int old = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (old < 0 && errno == ENOENT) {
    old = ::open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    created = old >= 0;
    if (old < 0 && errno == EEXIST) old = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  }
  // Still missing after O_EXCL found something there: a symbolic link to a file that does not
  // exist. Replacing it would leave nothing to lock, so two campaigns started together could
  // both run (a review's): refused, naming it.
  if (old < 0) {
    const int err = errno;
    struct stat link {};
    if (err == ENOENT && !created && ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
      return Status(ErrorCode::kOutputExists, path +
                                                  " is a symbolic link to a file that does not exist: remove it, or "
                                                  "give another --journal or --state");
    }
    errno = err;
    return io_error(path, "open");
  }
  const std::string what = replaceable_by_journal(old);
  const Status locked = what.empty() ? lock_current(old, path)
                                     : Status(ErrorCode::kOutputExists,
                                              path + " exists and is " + what +
                                                  ": refusing to replace it with a campaign journal (remove it, "
                                                  "or give another --journal or --state)");
  if (!locked.ok()) {
    ::close(old);
    return locked;
  }
  const std::string fresh = path + ".new-" + std::to_string(::getpid());
  const int fd = ::open(fresh.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0666);
  if (fd < 0) {
    const Status s = io_error(fresh, "create");
    if (created) ::unlink(path.c_str());
    ::close(old);
    return s;
  }
  Journal j(path, fd, "");
  hold(fd);
  Status written = lock(fd, path);
  if (written.ok()) written = j.append_line(manifest_xxh3, header_body(manifest_xxh3));
  if (written.ok() && ::rename(fresh.c_str(), path.c_str()) != 0) written = io_error(path, "replace");
  if (!written.ok()) {
    ::unlink(fresh.c_str());
    if (created) ::unlink(path.c_str());
  }
  ::close(old);  // only now: the path holds the new journal, locked
  if (!written.ok()) return written;
  return j;
}

Result<Journal> Journal::resume(const std::string& path, const std::string& manifest_xxh3, JournalContents* contents) {
  // Locked before it is read: a campaign still writing it would add lines after the read.
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status(ErrorCode::kFileNotFound, path + ": no campaign journal to resume");
    return io_error(path, "open");
  }
  Journal j(path, fd, "");  // closes fd on every return below
  hold(fd);
  NCERT_RETURN_IF_ERROR(lock_current(fd, path));
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(path, "read");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  // Empty: the placeholder a campaign stopped before its first line left (create), a journal of
  // nothing, as if there were none.
  if (text.empty()) {
    return Status(ErrorCode::kFileNotFound,
                  path +
                      ": no campaign journal to resume (the file is empty: its campaign stopped before it wrote "
                      "its header)");
  }
  Reader reader(path, manifest_xxh3, contents);
  std::size_t pos = 0, number = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // a torn last line: never finished, dropped
    NCERT_RETURN_IF_ERROR(reader.line(++number, std::string_view(text).substr(pos, nl - pos)));
    pos = nl + 1;
  }
  if (!reader.saw_header()) return Status(ErrorCode::kUsage, path + " has no journal header");
  reader.finish();
  if (pos < text.size() && ::ftruncate(fd, static_cast<off_t>(pos)) != 0) {
    return io_error(path, "truncate the torn last record");
  }
  j.last_sum_ = reader.last_sum();
  // New records chain to a trusted line: the last one, or a new header after lines not trusted.
  if (!reader.chain_continues()) NCERT_RETURN_IF_ERROR(j.append_line(manifest_xxh3, header_body(manifest_xxh3)));
  return j;
}

Status Journal::append(const JournalRecord& r) {
  Json line = Json{{"key", r.key}, {"inputs", r.inputs}, {"result", r.result}};
  if (!r.batch.empty()) line["batch"] = r.batch;
  return append_line(last_sum_, utf8_repaired(line).dump());
}

}  // namespace ncert::certify
