#include "certify/campaign/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "certify/report/wire.h"

namespace ncert::certify {

namespace {

using Json = nlohmann::ordered_json;

Status io_error(const std::string& path, const std::string& what) {
  return Status(ErrorCode::kIo, path + ": " + what + ": " + std::strerror(errno));
}

Status write_line(int fd, const std::string& path, const std::string& line) {
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(path, "write");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fdatasync(fd) != 0) return io_error(path, "fdatasync");
  return Status();
}

/// The first line: the journal's format, the wire form of the results it holds (report/wire.h
/// kWireVersion) and the manifest it belongs to.
Json header(const std::string& manifest_xxh3) {
  return Json{{"ncert_campaign_journal", 1}, {"wire", kWireVersion}, {"manifest_xxh3_128", manifest_xxh3}};
}

/// The wire version a journal header declares: 1 when it has none (journals written before
/// results carried typed evidence); null when the line is no journal header.
Json wire_version(const Json& first_line) {
  if (!first_line.is_object() || !first_line.contains("ncert_campaign_journal")) return nullptr;
  const auto it = first_line.find("wire");
  return it == first_line.end() ? Json(1) : *it;
}

}  // namespace

Journal::Journal(Journal&& o) noexcept : path_(std::move(o.path_)), fd_(std::exchange(o.fd_, -1)) {}
Journal& Journal::operator=(Journal&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}
Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

Result<Journal> Journal::create(const std::string& path, const std::string& manifest_xxh3) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0666);
  if (fd < 0) {
    if (errno == EEXIST) {
      return Status(ErrorCode::kOutputExists,
                    path + ": a campaign journal is already there: --resume to finish that campaign, or remove it");
    }
    return io_error(path, "create");
  }
  Journal j(path, fd);
  NCERT_RETURN_IF_ERROR(write_line(fd, path, header(manifest_xxh3).dump() + "\n"));
  return j;
}

Result<Journal> Journal::resume(const std::string& path, const std::string& manifest_xxh3,
                                std::vector<JournalRecord>* records) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(ErrorCode::kFileNotFound, path + ": no campaign journal to resume");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::size_t pos = 0, good = 0;
  bool first = true;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // a torn last line: never finished, dropped
    Json line;
    try {
      line =
          Json::parse(text.begin() + static_cast<std::ptrdiff_t>(pos), text.begin() + static_cast<std::ptrdiff_t>(nl));
    } catch (const Json::exception&) {
      return Status(ErrorCode::kUsage, path + ": line at byte " + std::to_string(pos) + " is not a journal record");
    }
    if (first) {
      // A journal of another wire form (1: no "wire" member, written while evidence travelled
      // as its rendered stats) is refused here, before any record is read, with a usage error
      // that says what to do. Were its records read anyway, nothing would crash: report_from_wire
      // and checks_from_wire reject every result not in this form (kInvalidArgument naming the
      // member) and CampaignRun::report makes that entry a failed one carrying the error.
      if (const Json wire = wire_version(line); !wire.is_null() && wire != Json(kWireVersion)) {
        return Status(ErrorCode::kUsage, path + " holds results in wire format " + wire.dump() +
                                             ", written by another ncert version (this one reads format " +
                                             std::to_string(kWireVersion) +
                                             "): finish that campaign with the ncert that started it, or "
                                             "remove the journal to start again");
      }
      if (line != header(manifest_xxh3)) {
        return Status(ErrorCode::kUsage,
                      path + " is the journal of another manifest (or of this one before it changed)");
      }
      first = false;
    } else {
      if (!line.contains("key") || !line["key"].is_string() || !line.contains("result") ||
          (line.contains("batch") && !line["batch"].is_string())) {
        return Status(ErrorCode::kUsage, path + ": line at byte " + std::to_string(pos) + " is not a journal record");
      }
      records->push_back(
          JournalRecord{line["key"].get<std::string>(), line["result"], line.value("batch", std::string())});
    }
    pos = nl + 1;
    good = pos;
  }
  if (first) return Status(ErrorCode::kUsage, path + " has no journal header");
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return io_error(path, "open");
  if (good < text.size() && ::ftruncate(fd, static_cast<off_t>(good)) != 0) {
    ::close(fd);
    return io_error(path, "truncate the torn last record");
  }
  return Journal(path, fd);
}

Status Journal::append(const JournalRecord& r) {
  Json line = Json{{"key", r.key}, {"result", r.result}};
  if (!r.batch.empty()) line["batch"] = r.batch;
  return write_line(fd_, path_, utf8_repaired(line).dump() + "\n");
}

}  // namespace ncert::certify
