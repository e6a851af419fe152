#include "certify/io/detail/survey_parts.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "certify/isolation/activity.h"
#include "certify/isolation/fd_write.h"

namespace ncert::certify::detail {

namespace {

// Both ends are one build of ncert on one machine (a forked helper and its parent), so integers
// travel in native byte order; the reader still checks every length against what is left.

class Writer {
 public:
  template <typename T>
  void pod(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void count(std::size_t n) { pod<std::uint64_t>(n); }
  void text(const std::string& s) {
    count(s.size());
    out_ += s;
  }
  template <typename T, typename F>
  void list(const std::vector<T>& v, F&& each) {
    count(v.size());
    for (const T& x : v) each(x);
  }
  void attr(const AttrValue& a) {
    pod(static_cast<std::uint8_t>(a.kind));
    pod(static_cast<std::uint8_t>(a.scalar));
    list(a.strings, [&](const std::string& s) { text(s); });
    list(a.ints, [&](std::int64_t x) { pod(x); });
    list(a.floats, [&](double x) { pod(x); });
    text(a.type_description);
  }
  void attributes(const std::vector<AttributeInfo>& v) {
    list(v, [&](const AttributeInfo& a) {
      text(a.name);
      attr(a.value);
    });
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  bool done() const { return ok_ && in_.empty(); }

  template <typename T>
  T pod() {
    T v{};
    if (in_.size() < sizeof v) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, in_.data(), sizeof v);
    in_.remove_prefix(sizeof v);
    return v;
  }
  /// A count of items each at least `min_bytes` long: never more than the bytes left can hold.
  std::size_t count(std::size_t min_bytes) {
    const auto n = pod<std::uint64_t>();
    if (!ok_ || n > in_.size() / min_bytes) {
      ok_ = false;
      return 0;
    }
    return static_cast<std::size_t>(n);
  }
  std::string text() {
    const std::size_t n = count(1);
    std::string s(in_.substr(0, n));
    in_.remove_prefix(n);
    return s;
  }
  template <typename T, typename F>
  std::vector<T> list(std::size_t min_bytes, F&& each) {
    std::vector<T> v(count(min_bytes));
    for (T& x : v) {
      if (!ok_) break;
      x = each();
    }
    return v;
  }
  AttrValue attr() {
    AttrValue a;
    a.kind = static_cast<AttrValue::Kind>(pod<std::uint8_t>());
    a.scalar = pod<std::uint8_t>() != 0;
    a.strings = list<std::string>(8, [&] { return text(); });
    a.ints = list<std::int64_t>(8, [&] { return pod<std::int64_t>(); });
    a.floats = list<double>(8, [&] { return pod<double>(); });
    a.type_description = text();
    return a;
  }
  std::vector<AttributeInfo> attributes() {
    return list<AttributeInfo>(8, [&] {
      AttributeInfo a;
      a.name = text();
      a.value = attr();
      return a;
    });
  }

 private:
  std::string_view in_;
  bool ok_ = true;
};

void write_part(Writer& w, const TreePart& p) {
  w.list(p.groups, [&](const GroupInfo& g) {
    w.text(g.path);
    w.attributes(g.attributes);
  });
  w.list(p.datasets, [&](const DatasetInfo& d) {
    w.text(d.path);
    w.pod(static_cast<std::uint8_t>(d.dtype));
    w.pod(static_cast<std::uint8_t>(d.tagged_raw));
    w.list(d.shape, [&](Index x) { w.pod(x); });
    w.pod(d.elements);
    w.pod(d.bytes);
    w.pod(static_cast<std::uint8_t>(d.layout));
    w.list(d.chunk, [&](Index x) { w.pod(x); });
    w.list(d.filters, [&](const std::string& f) { w.text(f); });
    w.attributes(d.attributes);
    w.pod(static_cast<std::uint8_t>(d.file_offset.has_value()));
    w.pod<std::uint64_t>(d.file_offset.value_or(0));
    w.pod<std::uint64_t>(d.object_address);
  });
  w.list(p.attrs, [&](const std::pair<std::string, TypedAttrs>& a) {
    w.text(a.first);
    w.attributes(a.second);
  });
  w.list(p.failed, [&](const std::string& f) { w.text(f); });
  w.list(p.findings, [&](const Finding& f) {
    w.pod(static_cast<std::uint8_t>(f.severity));
    w.pod(static_cast<std::int32_t>(f.code));
    w.text(f.path);
    w.text(f.message);
  });
  w.list(p.soft, [&](const std::pair<std::string, std::string>& s) {
    w.text(s.first);
    w.text(s.second);
  });
  w.list(p.objects, [&](const std::pair<haddr_t, std::string>& o) {
    w.pod(o.first);
    w.text(o.second);
  });
  w.pod(p.seen);
  w.pod(static_cast<std::uint8_t>(p.over_limit));
}

TreePart read_part(Reader& r) {
  TreePart p;
  p.groups = r.list<GroupInfo>(16, [&] {
    GroupInfo g;
    g.path = r.text();
    g.attributes = r.attributes();
    return g;
  });
  p.datasets = r.list<DatasetInfo>(16, [&] {
    DatasetInfo d;
    d.path = r.text();
    d.dtype = static_cast<DType>(r.pod<std::uint8_t>());
    d.tagged_raw = r.pod<std::uint8_t>() != 0;
    d.shape = r.list<Index>(8, [&] { return r.pod<Index>(); });
    d.elements = r.pod<Index>();
    d.bytes = r.pod<Index>();
    d.layout = static_cast<Layout>(r.pod<std::uint8_t>());
    d.chunk = r.list<Index>(8, [&] { return r.pod<Index>(); });
    d.filters = r.list<std::string>(8, [&] { return r.text(); });
    d.attributes = r.attributes();
    const bool has_offset = r.pod<std::uint8_t>() != 0;
    const auto offset = r.pod<std::uint64_t>();
    if (has_offset) d.file_offset = offset;
    d.object_address = r.pod<std::uint64_t>();
    return d;
  });
  p.attrs = r.list<std::pair<std::string, TypedAttrs>>(16, [&] {
    std::pair<std::string, TypedAttrs> a;
    a.first = r.text();
    a.second = r.attributes();
    return a;
  });
  p.failed = r.list<std::string>(8, [&] { return r.text(); });
  p.findings = r.list<Finding>(16, [&] {
    Finding f;
    f.severity = static_cast<Severity>(r.pod<std::uint8_t>());
    f.code = static_cast<ErrorCode>(r.pod<std::int32_t>());
    f.path = r.text();
    f.message = r.text();
    return f;
  });
  p.soft = r.list<std::pair<std::string, std::string>>(16, [&] {
    std::pair<std::string, std::string> s;
    s.first = r.text();
    s.second = r.text();
    return s;
  });
  p.objects = r.list<std::pair<haddr_t, std::string>>(16, [&] {
    std::pair<haddr_t, std::string> o;
    o.first = r.pod<haddr_t>();
    o.second = r.text();
    return o;
  });
  p.seen = r.pod<Index>();
  p.over_limit = r.pod<std::uint8_t>() != 0;
  return p;
}

/// What arrives from one helper: frames (a 64-bit length, then the encoding of one chunk's
/// parts) read and decoded as they come, between the chunks this process surveys, so that
/// decoding overlaps the helpers' work. A frame is whole or ignored: what a helper that dies
/// mid-frame leaves is never placed.
class HelperStream {
 public:
  HelperStream(pid_t pid, int fd) : pid_(pid), fd_(fd) { fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK); }
  HelperStream(const HelperStream&) = delete;
  HelperStream& operator=(const HelperStream&) = delete;
  HelperStream(HelperStream&& o) noexcept
      : pid_(o.pid_), fd_(std::exchange(o.fd_, -1)), buf_(std::move(o.buf_)), broken_(o.broken_) {}
  HelperStream& operator=(HelperStream&&) = delete;
  ~HelperStream() {
    if (fd_ >= 0) close(fd_);
  }

  /// Places every whole frame that has arrived; with `to_end`, waits for all the helper sends
  /// and for its exit. Helpers publish no activity of their own (one that died inside libhdf5
  /// would leave the page's count of open scopes raised for good): while this process waits, it
  /// is inside libhdf5 on their behalf, a scope renewed with every read that returns, so that a
  /// helper making no progress is stopped by the watchdog as a hung libhdf5 call would be.
  template <typename Place>
  void drain(bool to_end, Place&& place, const std::string& file) {
    if (fd_ < 0) return;
    if (to_end) fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
    char chunk[1 << 16];
    bool ended = false;
    for (;;) {
      std::optional<Hdf5Activity> waiting;
      if (to_end) waiting.emplace("waiting for a helper process surveying", file);
      const ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ended = n == 0 || errno != EAGAIN;
        break;
      }
      buf_.append(chunk, static_cast<std::size_t>(n));
    }
    std::size_t pos = 0;
    while (!broken_ && buf_.size() - pos >= sizeof(std::uint64_t)) {
      std::uint64_t len = 0;
      std::memcpy(&len, buf_.data() + pos, sizeof len);
      if (buf_.size() - pos - sizeof len < len) break;  // not whole yet
      std::optional<PartsAt> at = decode_parts(std::string_view(buf_).substr(pos + sizeof len, len));
      if (!at) {
        broken_ = true;  // cannot happen between one build's processes; the rest is walked again
        break;
      }
      place(std::move(*at));
      pos += sizeof len + len;
    }
    buf_.erase(0, pos);
    if (ended) {
      close(fd_);
      fd_ = -1;
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }

 private:
  pid_t pid_;
  int fd_;
  std::string buf_;
  bool broken_ = false;
};

/// One chunk's parts as a frame of a helper's stream.
std::string frame(const PartsAt& at) {
  const std::string body = encode_parts(at);
  const std::uint64_t len = body.size();
  return std::string(reinterpret_cast<const char*>(&len), sizeof len) + body;
}

/// The state the processes of one split share, in memory mapped before they fork.
struct SplitShared {
  std::atomic<std::size_t> next_chunk{0};
  std::atomic<Index> links_seen{0};  ///< by the chunks finished
};

/// Surveys chunks taken from `shared` until none is left or the link budget is spent, handing
/// each chunk's parts to `deliver`.
template <typename Deliver>
void take_chunks(std::size_t units, const SplitPlan& plan, SplitShared& shared, const SurveyRange& survey,
                 Deliver&& deliver) {
  const std::size_t chunks = (units + plan.chunk - 1) / plan.chunk;
  for (;;) {
    if (shared.links_seen.load() > plan.link_budget) return;
    const std::size_t c = shared.next_chunk.fetch_add(1);
    if (c >= chunks) return;
    const std::size_t first = c * plan.chunk;
    std::vector<TreePart> parts = survey(first, std::min(units, first + plan.chunk));
    Index seen = 0;
    for (const TreePart& p : parts) seen += p.seen;
    shared.links_seen.fetch_add(seen);
    deliver(PartsAt{first, std::move(parts)});
  }
}

}  // namespace

std::string encode_parts(const PartsAt& at) {
  Writer w;
  w.pod<std::uint64_t>(at.first);
  w.list(at.parts, [&](const TreePart& p) { write_part(w, p); });
  return w.take();
}

std::optional<PartsAt> decode_parts(std::string_view bytes) {
  Reader r(bytes);
  PartsAt at;
  at.first = static_cast<std::size_t>(r.pod<std::uint64_t>());
  at.parts = r.list<TreePart>(8, [&] { return read_part(r); });
  if (!r.done()) return std::nullopt;
  return at;
}

std::vector<std::optional<TreePart>> survey_in_processes(std::size_t units, const SplitPlan& plan,
                                                         const SurveyRange& survey) {
  std::vector<std::optional<TreePart>> out(units);
  auto place = [&](PartsAt&& at) {
    for (std::size_t i = 0; i < at.parts.size() && at.first + i < units; ++i) {
      out[at.first + i] = std::move(at.parts[i]);
    }
  };
  SplitShared own;
  SplitShared* shared = &own;
  void* mem = MAP_FAILED;
  std::size_t processes = std::min(plan.processes, units);
  if (processes > 1) {
    mem = mmap(nullptr, sizeof(SplitShared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
      processes = 1;
    } else {
      shared = new (mem) SplitShared();
    }
  }
  std::vector<HelperStream> helpers;
  for (std::size_t h = 1; h < processes; ++h) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) break;
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      set_activity_page(nullptr);  // the parent's waiting covers this process (HelperStream::drain)
      bool sent = true;
      take_chunks(units, plan, *shared, survey,
                  [&](PartsAt&& at) { sent = sent && write_all(fds[1], frame(at)) == 0; });
      _exit(sent ? 0 : 1);  // no exit handlers: the file and the library are the parent's
    }
    close(fds[1]);
    if (pid < 0) {
      close(fds[0]);
      break;
    }
    // Up to 1 MiB in flight (the default 64 KiB is a fraction of one chunk's frame); where the
    // system refuses, a helper waits for the next drain.
    fcntl(fds[0], F_SETPIPE_SZ, 1 << 20);
    helpers.emplace_back(pid, fds[0]);
  }
  take_chunks(units, plan, *shared, survey, [&](PartsAt&& at) {
    place(std::move(at));
    for (HelperStream& h : helpers) h.drain(false, place, plan.file);
  });
  for (HelperStream& h : helpers) h.drain(true, place, plan.file);
  if (mem != MAP_FAILED) {
    shared->~SplitShared();
    munmap(mem, sizeof(SplitShared));
  }
  return out;
}

}  // namespace ncert::certify::detail
