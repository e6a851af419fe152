#include "certify/io/detail/survey_parts.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

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

/// Writes all of `bytes` to `fd`; false on an error.
bool write_all(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

/// All a helper wrote, then its exit: the parts it surveyed, or nullopt when it did not end well.
std::optional<std::vector<TreePart>> collect(pid_t pid, int fd) {
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    bytes.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return decode_parts(bytes);
}

}  // namespace

std::string encode_parts(const std::vector<TreePart>& parts) {
  Writer w;
  w.list(parts, [&](const TreePart& p) { write_part(w, p); });
  return w.take();
}

std::optional<std::vector<TreePart>> decode_parts(std::string_view bytes) {
  Reader r(bytes);
  std::vector<TreePart> parts = r.list<TreePart>(8, [&] { return read_part(r); });
  if (!r.done()) return std::nullopt;
  return parts;
}

/// Surveys ranges [first, last) of `units` items: the first range here, the others on helper
/// processes forked here. libhdf5 runs one call at a time in a process; each helper reads the
/// file open here through its own copy of the library's state, with pread, which moves no shared
/// file offset. A helper that fails to start, crashes or hands back a partial encoding has its
/// range surveyed here instead, where a crash inside libhdf5 then happens as it would have
/// without helpers (and is reported by the supervisor as such).
std::vector<TreePart> survey_in_processes(std::size_t units, std::size_t processes, const SurveyRange& survey) {
  processes = std::max<std::size_t>(1, std::min(processes, units));
  struct Helper {
    std::size_t first = 0, last = 0;
    pid_t pid = -1;
    int fd = -1;
  };
  std::vector<Helper> helpers;
  for (std::size_t h = 1; h < processes; ++h) {
    Helper helper{units * h / processes, units * (h + 1) / processes};
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) == 0) {
      std::fflush(nullptr);
      helper.pid = fork();
      if (helper.pid == 0) {
        close(fds[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        const bool ok = write_all(fds[1], encode_parts(survey(helper.first, helper.last)));
        _exit(ok ? 0 : 1);  // no exit handlers: the file and the library belong to the parent
      }
      close(fds[1]);
      if (helper.pid > 0) {
        helper.fd = fds[0];
      } else {
        close(fds[0]);
      }
    }
    helpers.push_back(helper);
  }
  std::vector<TreePart> parts = survey(0, units / processes);
  for (const Helper& helper : helpers) {
    std::optional<std::vector<TreePart>> got;
    if (helper.pid > 0) got = collect(helper.pid, helper.fd);
    if (!got || got->size() != helper.last - helper.first) got = survey(helper.first, helper.last);
    for (TreePart& p : *got) parts.push_back(std::move(p));
  }
  return parts;
}

}  // namespace ncert::certify::detail
