// This header defines RowStream: blocks of consecutive rows of a 2-D dataset (logits rows,
// tensor slices), in order, with memory bounded by one block whatever the number of rows.
// A validated contiguous, unfiltered dataset is read straight from the file with pread into a
// reused buffer (the reader has checked that its bytes lie inside the file), and those bytes are
// offered to the file's hash; chunked or compressed datasets go through DumpReader::read_rows
// (which decodes deflate/shuffle chunks on every thread) into a reused buffer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "certify/io/dump_reader.h"
#include "certify/io/hash.h"

namespace ncert::certify {

struct RowBlock {
  Index first_row = 0;
  Index rows = 0;  ///< 0: end of the dataset
  /// rows x row_bytes; valid until the second next() after the one that returned it.
  const unsigned char* data = nullptr;
};

class RowStream {
 public:
  /// `rows_per_block` >= 1. kMissingMember if the dataset is not a validated one. Blocks read
  /// directly are offered to `hash` (the reader's file's cursor), if given.
  static Result<RowStream> open(const DumpReader& reader, const std::string& dataset, Index rows_per_block,
                                FileHashCursor* hash = nullptr);
  RowStream(RowStream&&) noexcept;
  RowStream& operator=(RowStream&&) noexcept;
  ~RowStream();

  Index rows() const;
  Index row_bytes() const;
  Index rows_per_block() const;
  bool direct() const;  ///< read from the file with pread rather than through HDF5
  /// The next block (rows == 0 at the end). kIo / kHdf5 on read failures.
  Result<RowBlock> next();

 private:
  struct Impl;
  explicit RowStream(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

inline constexpr std::size_t kMaxStreams = 4;

/// Rows per block for streaming these datasets together: about `target_bytes` of the widest
/// row, at most `max_rows`, and when they are chunked alike a multiple of their chunk's row
/// count, so each compressed chunk is decoded once rather than by two blocks (with 16-row
/// chunks and 27-row blocks a third of the chunks would be decoded twice).
Index block_rows_for(const std::vector<const DatasetInfo*>& datasets, Index target_bytes, Index max_rows);

/// visit(t, rows): row t of every stream (rows[k] points at stream k's row bytes).
using RowVisitor = std::function<void(Index t, const unsigned char* const* rows)>;

/// Visits rows [0, limit) of up to kMaxStreams streams in lockstep (opened with the same
/// rows_per_block), each row once, on the OpenMP team (rows in any order and on any thread, so
/// `visit` must write only row t's results).
/// - Streams read directly: the threads claim rows in order across block borders, and block
///   k+2 is read (and hashed) by whichever thread completes block k, once block k+1 is read, while
///   the others go on: no thread waits at a block's end for another's last row (at compare's
///   6-row blocks and ~0.5 ms a row pair that wait was 5 % of its CPU), and reading 2.5 GB is
///   not serial.
/// - Compressed streams are fetched between blocks, with the team waiting, so every thread
///   decodes chunks (DumpReader::read_rows).
/// `after_block`, when set, is called on the calling thread, in order, with the rows of the
/// blocks visited whole so far (progress lines; it must not touch the rows), last with every row.
/// `visit` and `after_block` run inside the OpenMP team: neither may throw.
Status stream_rows(std::span<RowStream* const> streams, Index limit, const RowVisitor& visit,
                   const std::function<void(Index rows_done)>& after_block = {});

}  // namespace ncert::certify
