#include "certify/io/row_stream.h"

#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <vector>

#include "certify/io/detail/page_buffer.h"
#include "certify/io/detail/reader_impl.h"
#include "certify/io/input_file.h"

namespace ncert::certify {

struct RowStream::Impl {
  // One block's memory, read into from the file or through HDF5; reused block after block, so
  // its pages are mapped once (never zero-filled again).
  struct Window {
    detail::PageBuffer buffer;
  };

  const DumpReader* reader = nullptr;
  std::string path;
  Index rows = 0;
  Index row_bytes = 0;
  Index per_block = 1;
  Index next_row = 0;
  int fd = -1;               // direct: the file, read block by block with pread
  std::uint64_t offset = 0;  // of the dataset's first byte
  // Two windows, used in turn, so a block stays valid while the next one is fetched.
  Window window[2];
  int slot = 0;
  FileHashCursor* hash = nullptr;  // offered every block read directly

  ~Impl() {
    if (fd >= 0) ::close(fd);
  }
};

RowStream::RowStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RowStream::RowStream(RowStream&&) noexcept = default;
RowStream& RowStream::operator=(RowStream&&) noexcept = default;
RowStream::~RowStream() = default;

Result<RowStream> RowStream::open(const DumpReader& reader, const std::string& dataset, Index rows_per_block,
                                  FileHashCursor* hash) {
  const DatasetInfo* d = reader.model().dataset(dataset);
  if (!d || d->shape.empty()) {
    return Status(ErrorCode::kMissingMember, dataset + ": not a validated dataset with rows");
  }
  if (rows_per_block < 1) return Status(ErrorCode::kInvalidArgument, "rows_per_block < 1");
  auto impl = std::make_unique<Impl>();
  impl->reader = &reader;
  impl->path = dataset;
  impl->rows = d->shape[0];
  impl->row_bytes = d->row_elements() * dtype_size(d->dtype);
  impl->per_block = rows_per_block;
  // Two blocks are held at once (one, if it is every row). Whole chunks of many rows make large blocks (a chunk of
  // 16,384 rows by one column is every row: 2.4 GB read under --max-memory 256 MiB, a review's): refused up front where
  // the budget cannot hold them, naming the layout. Parts of chunks would be read 20x slower (each filtered chunk
  // decoded again by every block). Only where the chunks made the blocks that large: an unchunked dataset's blocks are
  // the caller's few MiB, which a tight budget meets in the reserve below or not at all.
  const std::uint64_t held =
      std::min<std::uint64_t>(2 * static_cast<std::uint64_t>(rows_per_block), static_cast<std::uint64_t>(impl->rows)) *
      static_cast<std::uint64_t>(impl->row_bytes);
  const bool chunk_rows =
      d->layout == Layout::kChunked && !d->chunk.empty() && d->chunk[0] > 1 && rows_per_block >= d->chunk[0];
  if (chunk_rows && held > reader.options().memory_limit) {
    return Status(ErrorCode::kMemoryLimit,
                  reader.model().file + ": " + dataset + ": its blocks of " +
                      std::to_string(std::min(rows_per_block, impl->rows)) + " rows take " + std::to_string(held) +
                      " bytes at once, over the memory limit of " + std::to_string(reader.options().memory_limit) +
                      " (its chunks hold " + std::to_string(d->chunk[0]) +
                      " rows each, read whole: rewrite it in chunks of fewer rows, or raise --max-memory)");
  }
  // A filtered chunk is inflated whole for any element of it, whatever the rows read: one
  // wider than the dataset is that much more (a review's [6, 2^26] chunks on [6, 256] logits
  // read 1.5 GiB under --max-memory 1 GiB).
  if (d->layout == Layout::kChunked && !d->filters.empty() && detail::chunk_bytes(*d) > reader.options().memory_limit) {
    return Status(ErrorCode::kMemoryLimit, reader.model().file + ": " + dataset + ": its chunks of " +
                                               std::to_string(detail::chunk_bytes(*d)) +
                                               " bytes are inflated whole, over the memory limit of " +
                                               std::to_string(reader.options().memory_limit) +
                                               " (rewrite it in smaller chunks, or raise --max-memory)");
  }
  impl->hash = hash;
  if (d->file_offset && d->filters.empty() && d->layout == Layout::kContiguous) {
    impl->fd = ::open(reader.model().file.c_str(), O_RDONLY | O_CLOEXEC);
    if (impl->fd >= 0) impl->offset = *d->file_offset;
  }
  return RowStream(std::move(impl));
}

Index RowStream::rows() const { return impl_->rows; }
Index RowStream::row_bytes() const { return impl_->row_bytes; }
Index RowStream::rows_per_block() const { return impl_->per_block; }
bool RowStream::direct() const { return impl_->fd >= 0; }

Result<RowBlock> RowStream::next() {
  Impl& s = *impl_;
  RowBlock b;
  b.first_row = s.next_row;
  b.rows = std::min(s.per_block, s.rows - s.next_row);
  if (b.rows <= 0) {
    b.rows = 0;
    return b;
  }
  // The window of two calls ago is reused; the previous call's block stays valid.
  s.slot ^= 1;
  Impl::Window& w = s.window[s.slot];
  const std::size_t block_bytes = static_cast<std::size_t>(b.rows * s.row_bytes);
  unsigned char* buffer = w.buffer.reserve(static_cast<std::size_t>(s.per_block * s.row_bytes));
  if (buffer == nullptr) {
    return Status(ErrorCode::kMemoryLimit, s.reader->model().file + ": " + s.path + ": no memory for a block of " +
                                               std::to_string(s.per_block) + " rows (" +
                                               std::to_string(s.per_block * s.row_bytes) + " bytes)");
  }
  if (s.fd >= 0) {
    // pread, not a mapping of the file: the kernel copies from the page cache through its own
    // mapping of all memory, where a mapping's pages each cost a first-touch fault in user
    // space. 1 GiB of logits read and hashed at 6.7 GB/s in 16 MiB blocks, 9.8 GB/s in 4 MiB
    // ones (compare's) this way, 2.6-2.9 GB/s mapped (docs/performance.md, "Hashing and
    // streaming by pread").
    const std::uint64_t begin = s.offset + static_cast<std::uint64_t>(b.first_row * s.row_bytes);
    int error = 0;
    if (read_at_most(s.fd, begin, buffer, block_bytes, error) < block_bytes) {
      return Status(ErrorCode::kIo, s.path + ": cannot read rows " + std::to_string(b.first_row) + ": " +
                                        (error == 0 ? std::string("the file shrank while it was read")
                                                    : std::string(std::strerror(error))));
    }
    b.data = buffer;
    if (s.hash) NCERT_RETURN_IF_ERROR(s.hash->offer(begin, b.data, block_bytes));
  } else {
    NCERT_RETURN_IF_ERROR(s.reader->read_rows(s.path, b.first_row, b.rows, buffer));
    b.data = buffer;
  }
  s.next_row += b.rows;
  return b;
}

Index block_rows_for(const std::vector<const DatasetInfo*>& datasets, Index target_bytes, Index max_rows) {
  Index row_bytes = 1;
  Index chunk_rows = 0;  // common leading chunk dimension; -1: they differ or some are not chunked
  for (const DatasetInfo* d : datasets) {
    if (!d) continue;
    row_bytes = std::max(row_bytes, d->row_elements() * dtype_size(d->dtype));
    const Index c = d->layout == Layout::kChunked && !d->chunk.empty() ? d->chunk[0] : -1;
    chunk_rows = chunk_rows == 0 ? c : (chunk_rows == c ? c : -1);
  }
  Index rows = std::clamp<Index>(target_bytes / row_bytes, 1, std::max<Index>(max_rows, 1));
  if (chunk_rows > 1) rows = std::max(chunk_rows, rows / chunk_rows * chunk_rows);
  return rows;
}

namespace {

using RowsDone = std::function<void(Index rows_done)>;

/// stream_rows for streams read directly. Block k is read once two things have
/// happened: block k-1 was read (reads go in order: the windows alternate and the hash is
/// offered bytes in order) and block k-2 was visited whole (block k reuses its windows). The
/// thread that brings about the second of the two reads block k, at once; the others go on
/// claiming rows, in order, across block borders, and wait only for a block not read yet.
class Pipeline {
 public:
  Pipeline(std::span<RowStream* const> streams, Index rows, const RowVisitor& visit, const RowsDone& after_block)
      : streams_(streams),
        rows_(rows),
        per_block_(streams[0]->rows_per_block()),
        blocks_((rows + per_block_ - 1) / per_block_),
        conditions_(static_cast<std::size_t>(blocks_)),
        state_(static_cast<std::size_t>(blocks_)),
        unvisited_(static_cast<std::size_t>(blocks_)),
        data_(static_cast<std::size_t>(blocks_)),
        visit_(visit),
        after_block_(after_block) {
    for (Index k = 0; k < blocks_; ++k) {
      // Block 0 waits for the start only, block 1 for block 0's read, the others for both.
      conditions_[static_cast<std::size_t>(k)].store(k < 2 ? 1 : 2, std::memory_order_relaxed);
      unvisited_[static_cast<std::size_t>(k)].store(block_rows(k), std::memory_order_relaxed);
    }
  }

  Status run() {
#pragma omp parallel
    {
      if (omp_get_thread_num() == 0) meet_condition(0);
      work();
    }
    if (failed_.load(std::memory_order_acquire)) return std::move(error_);
    report_progress();
    return Status::ok_status();
  }

 private:
  enum : int { kUnread = 0, kRead = 1, kFailed = 2 };

  Index block_rows(Index k) const { return std::min(per_block_, rows_ - k * per_block_); }

  void work() {
    const bool calling_thread = omp_get_thread_num() == 0;
    std::array<const unsigned char*, kMaxStreams> rows{};
    for (;;) {
      if (failed_.load(std::memory_order_acquire)) return;
      const Index t = next_row_.fetch_add(1, std::memory_order_relaxed);
      if (t >= rows_) return;
      const Index k = t / per_block_;
      std::atomic<int>& state = state_[static_cast<std::size_t>(k)];
      int s = state.load(std::memory_order_acquire);
      while (s == kUnread) {
        state.wait(kUnread, std::memory_order_acquire);
        s = state.load(std::memory_order_acquire);
      }
      if (s == kFailed) return;
      const std::array<const unsigned char*, kMaxStreams>& block = data_[static_cast<std::size_t>(k)];
      for (std::size_t i = 0; i < streams_.size(); ++i) {
        rows[i] = block[i] + (t - k * per_block_) * streams_[i]->row_bytes();
      }
      visit_(t, rows.data());
      if (unvisited_[static_cast<std::size_t>(k)].fetch_sub(1, std::memory_order_acq_rel) == 1 && k + 2 < blocks_) {
        meet_condition(k + 2);
      }
      if (calling_thread) report_progress();
    }
  }

  /// One of block k's conditions is met; the thread meeting the last one reads it, and then
  /// every block that its read makes due.
  void meet_condition(Index k) {
    while (k < blocks_ && conditions_[static_cast<std::size_t>(k)].fetch_sub(1, std::memory_order_acq_rel) == 1) {
      if (!read(k)) return;
      ++k;
    }
  }

  bool read(Index k) {
    std::array<const unsigned char*, kMaxStreams>& block = data_[static_cast<std::size_t>(k)];
    for (std::size_t i = 0; i < streams_.size(); ++i) {
      Result<RowBlock> b = streams_[i]->next();
      if (!b.ok()) {
        fail(k, b.status());
        return false;
      }
      block[i] = b->data;
    }
    state_[static_cast<std::size_t>(k)].store(kRead, std::memory_order_release);
    state_[static_cast<std::size_t>(k)].notify_all();
    return true;
  }

  /// Block k cannot be read: every block from k on fails, and whoever waits for one stops.
  void fail(Index k, Status status) {
    error_ = std::move(status);
    failed_.store(true, std::memory_order_release);
    for (Index j = k; j < blocks_; ++j) {
      state_[static_cast<std::size_t>(j)].store(kFailed, std::memory_order_release);
      state_[static_cast<std::size_t>(j)].notify_all();
    }
  }

  /// The calling thread reports each block visited whole, in order.
  void report_progress() {
    while (reported_ < blocks_ &&
           unvisited_[static_cast<std::size_t>(reported_)].load(std::memory_order_acquire) == 0) {
      ++reported_;
      if (after_block_) after_block_(std::min(rows_, reported_ * per_block_));
    }
  }

  std::span<RowStream* const> streams_;
  Index rows_, per_block_, blocks_;
  std::vector<std::atomic<int>> conditions_;                         // per block: conditions not met yet
  std::vector<std::atomic<int>> state_;                              // per block: kUnread, kRead, kFailed
  std::vector<std::atomic<Index>> unvisited_;                        // per block: rows not visited yet
  std::vector<std::array<const unsigned char*, kMaxStreams>> data_;  // per block: each stream's rows
  std::atomic<Index> next_row_{0};
  std::atomic<bool> failed_{false};
  Status error_ = Status::ok_status();  // set before failed_
  Index reported_ = 0;                  // blocks reported (calling thread only)
  const RowVisitor& visit_;
  const RowsDone& after_block_;
};

/// stream_rows with at least one stream read through the reader: the team waits while each
/// next block is fetched, so the decoding of its chunks runs on every thread (a nested region,
/// beside the team, could not do that).
Status stream_between_blocks(std::span<RowStream* const> streams, std::ptrdiff_t decoded, Index limit,
                             const RowVisitor& visit, const RowsDone& after_block) {
  const std::size_t S = streams.size();
  std::vector<RowBlock> cur(S), nxt(S);
  auto fetch_one = [&](std::vector<RowBlock>& out, std::size_t k) -> Status {
    NCERT_ASSIGN_OR_RETURN(out[k], streams[k]->next());
    return Status::ok_status();
  };
  auto fetch = [&](std::vector<RowBlock>& out) -> Status {
    if (decoded < 2) {
      for (std::size_t k = 0; k < S; ++k) NCERT_RETURN_IF_ERROR(fetch_one(out, k));
      return Status::ok_status();
    }
    // Two or more streams read through the reader go one per thread: a block of deflated logits is often one
    // chunk per stream (16-row chunks, 16-row blocks), which one read_rows call decodes on one
    // thread; compare's two files then decoded one after the other with the second thread idle
    // (2 x 2048 x 151,936 f32, shuffle + deflate: docs/performance.md "Compressed logits").
    // (Each stream's read_rows then decodes its chunks on its own thread: nested regions are
    // inactive.)
    std::array<Status, kMaxStreams> status;
#pragma omp parallel for schedule(static, 1)
    for (std::size_t k = 0; k < S; ++k) status[k] = fetch_one(out, k);
    for (std::size_t k = 0; k < S; ++k) NCERT_RETURN_IF_ERROR(std::move(status[k]));
    return Status::ok_status();
  };
  NCERT_RETURN_IF_ERROR(fetch(cur));
  for (;;) {
    Index n = limit - cur[0].first_row;
    for (const RowBlock& b : cur) n = std::min(n, b.rows);
    if (n <= 0) break;
#pragma omp parallel for schedule(dynamic, 1)
    for (Index i = 0; i < n; ++i) {
      std::array<const unsigned char*, kMaxStreams> rows{};
      for (std::size_t k = 0; k < S; ++k) {
        rows[k] = cur[k].data + i * streams[k]->row_bytes();
      }
      visit(cur[0].first_row + i, rows.data());
    }
    if (after_block) after_block(cur[0].first_row + n);
    if (cur[0].first_row + n >= limit) break;
    NCERT_RETURN_IF_ERROR(fetch(nxt));
    std::swap(cur, nxt);
  }
  return Status::ok_status();
}

}  // namespace

Status stream_rows(std::span<RowStream* const> streams, Index limit, const RowVisitor& visit,
                   const std::function<void(Index rows_done)>& after_block) {
  if (streams.empty() || streams.size() > kMaxStreams) {
    return Status(ErrorCode::kInvalidArgument, "stream_rows: 1 to 4 streams");
  }
  Index streamed = limit;  // rows every stream has, up to the limit
  for (RowStream* x : streams) {
    if (x->rows_per_block() != streams[0]->rows_per_block()) {
      return Status(ErrorCode::kInvalidArgument, "stream_rows: streams opened with different rows_per_block");
    }
    streamed = std::min(streamed, x->rows());
  }
  const auto decoded = std::count_if(streams.begin(), streams.end(), [](RowStream* x) { return !x->direct(); });
  if (decoded > 0) return stream_between_blocks(streams, decoded, limit, visit, after_block);
  if (streamed <= 0) return Status::ok_status();
  return Pipeline(streams, streamed, visit, after_block).run();
}

}  // namespace ncert::certify
