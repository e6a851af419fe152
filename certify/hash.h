// This header defines ncert's content hashes: XXH3-128 (xxHash 0.8, stable since 0.8.0) in
// canonical form (big-endian bytes, high 64 bits first, as XXH128_canonicalFromHash writes
// them), printed as 32 lowercase hex digits. Used for dataset hashes, whole-file hashes in
// report inputs, and the row hashes of logits witnesses.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "reference/status.h"

namespace ncert::certify {

/// One-shot hash of a byte range.
std::string xxh3_128_hex(const void* data, std::size_t size);

/// Streaming hash; hex() may be called at any time and updating may continue after it.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void update(const void* data, std::size_t size);
  std::string hex() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// Hash of a whole file's bytes (kFileNotFound / kIo on failure).
Result<std::string> file_xxh3_128(const std::string& path);

}  // namespace ncert::certify
