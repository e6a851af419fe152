#include "certify/hash.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

namespace ncert::certify {

namespace {
std::string canonical_hex(XXH128_hash_t h) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  static const char* kDigits = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[2 * i] = kDigits[c.digest[i] >> 4];
    out[2 * i + 1] = kDigits[c.digest[i] & 0xF];
  }
  return out;
}
}  // namespace

std::string xxh3_128_hex(const void* data, std::size_t size) {
  return canonical_hex(XXH3_128bits(data, size));
}

struct Xxh3Stream::State {
  XXH3_state_t s;
};

Xxh3Stream::Xxh3Stream() : state_(std::make_unique<State>()) { XXH3_128bits_reset(&state_->s); }
Xxh3Stream::~Xxh3Stream() = default;

void Xxh3Stream::update(const void* data, std::size_t size) {
  XXH3_128bits_update(&state_->s, data, size);
}

std::string Xxh3Stream::hex() const { return canonical_hex(XXH3_128bits_digest(&state_->s)); }

Result<std::string> file_xxh3_128(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status(errno == ENOENT ? ErrorCode::kFileNotFound : ErrorCode::kIo,
                  path + ": cannot open: " + std::strerror(errno));
  }
  Xxh3Stream stream;
  std::vector<unsigned char> buf(4 << 20);
  for (;;) {
    const ssize_t got = ::read(fd, buf.data(), buf.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      return Status(ErrorCode::kIo, path + ": read failed: " + std::strerror(e));
    }
    if (got == 0) break;
    stream.update(buf.data(), static_cast<std::size_t>(got));
  }
  ::close(fd);
  return stream.hex();
}

}  // namespace ncert::certify
