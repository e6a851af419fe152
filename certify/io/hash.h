// This header defines ncert's content hashes: XXH3-128 (xxHash 0.8, stable since 0.8.0) in
// canonical form (big-endian bytes, high 64 bits first, as XXH128_canonicalFromHash writes
// them), printed as 32 lowercase hex digits. Used for dataset hashes, whole-file hashes in
// report inputs, and the row hashes of logits witnesses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

/// Hash of a whole file's bytes (kFileNotFound / kNotRegularFile / kTrailingData / kIo on failure:
/// the refusals of InputFile::open, certify/io/input_file.h).
Result<std::string> file_xxh3_128(const std::string& path);

/// The whole-file hash, computed in order while a reader goes through the file anyway: a
/// reader that reads regions of the file straight into memory (RowStream) offers them; a gap
/// before an offered region is read from the file (1 MiB preads) and hashed, bytes already
/// hashed are skipped, finish() hashes to the end. Any sequence of offers gives
/// file_xxh3_128's value. Comparing two 1.24 GB dumps this saves reading every byte twice.
/// Not thread-safe: one thread offers at a time.
class FileHashCursor {
 public:
  /// As InputFile::open refuses (missing, not a regular file, an HDF5 file far past its end).
  static Result<FileHashCursor> open(const std::string& path);
  FileHashCursor(FileHashCursor&&) noexcept;
  FileHashCursor& operator=(FileHashCursor&&) noexcept;
  ~FileHashCursor();

  /// `data` holds the file's bytes [offset, offset + size).
  Status offer(std::uint64_t offset, const void* data, std::size_t size);
  /// Hashes the rest of the file and returns the hash; the cursor is spent.
  Result<std::string> finish();

 private:
  struct Impl;
  explicit FileHashCursor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// A command's input file and the XXH3-128 of its bytes.
struct InputInfo {
  std::string path;
  std::string xxh3_128;  ///< "" if the file cannot be read
};

/// The whole-file hashes of a command's inputs. Readers that stream a file's bytes anyway offer
/// them to cursor(i) (RowStream does), so those bytes are hashed as they go by; finish()
/// hashes the rest, one file per thread.
class InputHashes {
 public:
  explicit InputHashes(const std::vector<std::string>& paths);
  /// The cursor of input i; nullptr if the file cannot be opened (its reader reports why).
  FileHashCursor* cursor(std::size_t i);
  /// The inputs with their hashes ("" where a file cannot be read); the files on a team of
  /// threads, or, with `serial`, on the calling thread alone (a thread beside an OpenMP team,
  /// where a second team would take cores from the first).
  std::vector<InputInfo> finish(bool serial = false);

 private:
  std::vector<std::string> paths_;
  std::vector<std::optional<FileHashCursor>> cursors_;
};

/// InputHashes(paths).finish(serial): the inputs of a command that does not stream them.
std::vector<InputInfo> describe_inputs(const std::vector<std::string>& paths, bool serial = false);

}  // namespace ncert::certify
