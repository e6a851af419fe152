#include "certify/campaign/input_pins.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace ncert::certify {

namespace {

using Json = nlohmann::ordered_json;

/// Files hashed at once: a few keep a fast disk or the page cache busy (XXH3 itself runs at
/// ~7.7 GB/s per thread here: a 1.24 GB dump in 0.16 s).
constexpr std::size_t kHashThreads = 4;

std::int64_t nanoseconds(const timespec& t) { return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec; }

std::string stamp_text(const FileStamp& s) {
  if (!s.exists) return "absent";
  return "inode " + std::to_string(s.inode) + ", " + std::to_string(s.size) + " bytes, changed at " +
         std::to_string(s.ctime_ns) + " ns";
}

/// The XXH3-128 of a regular file's bytes; "" for anything else (a FIFO is never opened: it
/// would block) or a file that cannot be read (its item's reader reports why).
std::string regular_file_hash(const std::string& path) {
  if (stamp_of(path).type != S_IFREG) return "";
  auto hash = file_xxh3_128(path);
  return hash.ok() ? *hash : "";
}

/// Hashes `pins`, stamping each before and after: a file whose stamp moved while it was hashed
/// is marked unstable. On std::threads, not OpenMP: the campaign forks its items after this, and
/// libgomp's thread pool does not survive a fork (the child's first parallel region waits
/// forever).
void hash_pins(const std::vector<InputPin*>& pins) {
  const std::size_t workers =
      std::min<std::size_t>({pins.size(), std::max(1u, std::thread::hardware_concurrency()), kHashThreads});
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < pins.size(); i = next++) {
      InputPin& pin = *pins[i];
      const FileStamp before = stamp_of(pin.path);
      pin.xxh3_128 = regular_file_hash(pin.path);
      pin.stamp = stamp_of(pin.path);
      pin.unstable = !(pin.stamp == before);
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t t = 1; t < workers; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
}

}  // namespace

FileStamp stamp_of(const std::string& path) {
  struct stat st {};
  FileStamp s;
  if (::stat(path.c_str(), &st) != 0) return s;
  s.exists = true;
  s.type = st.st_mode & S_IFMT;
  s.inode = st.st_ino;
  s.size = static_cast<std::uint64_t>(st.st_size);
  s.mtime_ns = nanoseconds(st.st_mtim);
  s.ctime_ns = nanoseconds(st.st_ctim);
  return s;
}

Json pin_json(const InputPin& pin) {
  const FileStamp& s = pin.stamp;
  return Json{{"path", pin.path},
              {"xxh3_128", pin.xxh3_128},
              {"unstable", pin.unstable},
              {"stamp", Json{{"exists", s.exists},
                             {"type", s.type},
                             {"inode", s.inode},
                             {"size", s.size},
                             {"mtime_ns", s.mtime_ns},
                             {"ctime_ns", s.ctime_ns}}}};
}

Result<InputPin> pin_from_json(const Json& j) {
  InputPin pin;
  try {
    pin.path = j.at("path").get<std::string>();
    pin.xxh3_128 = j.at("xxh3_128").get<std::string>();
    pin.unstable = j.at("unstable").get<bool>();
    const Json& s = j.at("stamp");
    pin.stamp.exists = s.at("exists").get<bool>();
    pin.stamp.type = s.at("type").get<std::uint32_t>();
    pin.stamp.inode = s.at("inode").get<std::uint64_t>();
    pin.stamp.size = s.at("size").get<std::uint64_t>();
    pin.stamp.mtime_ns = s.at("mtime_ns").get<std::int64_t>();
    pin.stamp.ctime_ns = s.at("ctime_ns").get<std::int64_t>();
  } catch (const Json::exception& e) {
    return Status(ErrorCode::kInvalidArgument, std::string("malformed input pin: ") + e.what());
  }
  return pin;
}

std::vector<std::string> entry_files(const CampaignEntry& e) {
  std::vector<std::string> files = e.inputs;
  // The skip policy too: a policy edited between a run and its --resume changes the verdicts of
  // the entries that read it, so their journal records must not be trusted (a review's resume
  // kept a PASS a fresh run fails).
  for (const char* key : {"weights", "vocab", "skip_policy"}) {
    const auto it = e.options.find(key);
    if (it != e.options.end() && it->is_string()) files.push_back(it->get<std::string>());
  }
  return files;
}

std::map<std::string, InputPin> pin_inputs(const Manifest& manifest) {
  std::map<std::string, InputPin> pins;
  for (const CampaignEntry& e : manifest.entries) {
    for (const std::string& path : entry_files(e)) pins[path].path = path;
  }
  std::vector<InputPin*> all;
  all.reserve(pins.size());
  for (auto& [path, pin] : pins) all.push_back(&pin);
  hash_pins(all);
  // A file written while it was hashed gets one more try; one that moves again is unstable.
  std::vector<InputPin*> again;
  for (InputPin* p : all) {
    if (p->unstable) again.push_back(p);
  }
  if (!again.empty()) hash_pins(again);
  for (InputPin* p : all) {
    if (p->unstable) p->xxh3_128.clear();
  }
  return pins;
}

Status pins_hold(const std::vector<InputPin>& pins) {
  for (const InputPin& pin : pins) {
    if (pin.unstable) {
      return Status(ErrorCode::kIo, pin.path +
                                        " changed while the campaign hashed it, twice: certify it when it no "
                                        "longer changes");
    }
    const FileStamp now = stamp_of(pin.path);
    if (!(now == pin.stamp)) {
      return Status(ErrorCode::kIo, pin.path + " changed since the campaign hashed it (then " + stamp_text(pin.stamp) +
                                        "; now " + stamp_text(now) +
                                        "): no verdict on other bytes than the hashed ones; --resume hashes it "
                                        "again and reruns what read it");
    }
  }
  return Status();
}

}  // namespace ncert::certify
