// Row reads chunk by chunk: raw chunks copied out of HDF5 (cheap under its global lock), then
// decoded on every thread and copied into place. Large reads of deflate/shuffle datasets come
// here for the threads; reads that touch many chunks (any pipeline but fletcher32) for the
// bounds: one H5Dread over n chunks holds ~6.7 KB of libhdf5 bookkeeping per chunk for its whole
// length and is one watched call, where this holds at most kBatchChunks raw chunks at a time and
// marks progress after every chunk.
#include <algorithm>
#include <cstring>
#include <optional>
#include <span>

#include "certify/io/detail/page_buffer.h"
#include "certify/io/detail/reader_impl.h"
#include "certify/isolation/activity.h"

namespace ncert::certify::detail {

std::optional<std::vector<ChunkFilter>> decodable_pipeline(const DatasetInfo& d) {
  if (d.layout != Layout::kChunked || d.shape.empty()) return std::nullopt;
  std::vector<ChunkFilter> p;
  for (const std::string& f : d.filters) {
    if (f == "shuffle")
      p.push_back(ChunkFilter::kShuffle);
    else if (f.rfind("deflate", 0) == 0)
      p.push_back(ChunkFilter::kDeflate);
    else
      return std::nullopt;  // fletcher32: HDF5 verifies it
  }
  return p;
}

namespace {

std::string coords_text(const std::vector<hsize_t>& c) {
  std::string s = "[";
  for (std::size_t i = 0; i < c.size(); ++i) s += (i ? ", " : "") + std::to_string(c[i]);
  return s + "]";
}

/// Copies the part of one decoded chunk (at element offset `offset`) that lies inside the
/// dataset and inside rows [row, row + count) into dst, laid out [count, shape[1], ...].
void copy_chunk(const unsigned char* chunk, const std::vector<hsize_t>& offset, const DatasetInfo& d, Index row,
                Index count, unsigned char* dst) {
  const auto rank = d.shape.size();
  const auto esize = static_cast<std::size_t>(dtype_size(d.dtype));
  const Index o0 = static_cast<Index>(offset[0]);
  if (rank == 1) {
    const Index begin = std::max(o0, row), end = std::min({o0 + d.chunk[0], row + count, d.shape[0]});
    if (end > begin) {
      std::memcpy(dst + static_cast<std::size_t>(begin - row) * esize,
                  chunk + static_cast<std::size_t>(begin - o0) * esize, static_cast<std::size_t>(end - begin) * esize);
    }
    return;
  }
  // Lines along the last dimension, for every local index (l_0 .. l_{rank-2}) of the chunk.
  const std::size_t last = rank - 1;
  const Index o_last = static_cast<Index>(offset[last]);
  const Index len = std::min(d.chunk[last], d.shape[last] - o_last);
  std::vector<Index> l(last, 0);
  for (;;) {
    bool inside = true;
    Index src = 0, dst_line = 0;
    for (std::size_t k = 0; k < last; ++k) {
      const Index g = static_cast<Index>(offset[k]) + l[k];
      inside = inside && g < d.shape[k] && (k > 0 || (g >= row && g < row + count));
      src = src * d.chunk[k] + l[k];
      dst_line = k == 0 ? g - row : dst_line * d.shape[k] + g;
    }
    if (inside && len > 0) {
      std::memcpy(dst + static_cast<std::size_t>(dst_line * d.shape[last] + o_last) * esize,
                  chunk + static_cast<std::size_t>(src * d.chunk[last]) * esize, static_cast<std::size_t>(len) * esize);
    }
    std::size_t k = last;
    while (k-- > 0) {
      if (++l[k] < d.chunk[k]) break;
      l[k] = 0;
    }
    if (k == static_cast<std::size_t>(-1)) break;
  }
}

/// One stored chunk as HDF5 holds it: still filtered, with its filter mask. Its buffer is
/// reused from read to read and never zero-filled (PageBuffer): a fresh 9.7 MB vector per chunk
/// (a deflated 16-row chunk of 151,936-wide f32 logits) cost a zero-fill and its page faults,
/// 20 % and 17 % of the CPU of a compare of two such files, more than inflating them.
struct RawChunk {
  std::vector<hsize_t> offset;
  std::uint32_t mask = 0;
  PageBuffer buffer;
  std::size_t size = 0;

  const unsigned char* data() const { return buffer.data(); }
  /// Room for `n` bytes, their values unspecified; grown to `most` at once (stored sizes
  /// differ from chunk to chunk, and growing by the difference each time reallocated most
  /// chunks: 53 MB of fresh pages where 17 MB are needed). Null when the memory is refused.
  unsigned char* reserve(std::size_t n, std::size_t most) {
    size = n;
    return buffer.reserve(n <= buffer.capacity() ? n : std::max(n, most));
  }
};

/// The chunks rows [row, row + count) touch, in storage (row-major chunk) order: chunk rows
/// [row / c0, (row + count - 1) / c0], every chunk of the other dimensions.
class ChunkWalk {
 public:
  ChunkWalk(const DatasetInfo& d, Index row, Index count) : d_(d), idx_(d.shape.size(), 0), across_(d.shape.size()) {
    for (std::size_t k = 0; k < d.shape.size(); ++k) across_[k] = (d.shape[k] + d.chunk[k] - 1) / d.chunk[k];
    idx_[0] = row / d.chunk[0];
    last0_ = (row + count - 1) / d.chunk[0];
  }
  bool done() const { return done_; }
  /// The current chunk's element offset.
  std::vector<hsize_t> offset() const {
    std::vector<hsize_t> o(idx_.size());
    for (std::size_t k = 0; k < idx_.size(); ++k) {
      o[k] = static_cast<hsize_t>(idx_[k]) * static_cast<hsize_t>(d_.chunk[k]);
    }
    return o;
  }
  /// Odometer over the chunk grid, the first dimension limited to the rows asked.
  void next() {
    std::size_t k = idx_.size();
    while (k-- > 0) {
      if (++idx_[k] < (k == 0 ? last0_ + 1 : across_[k])) return;
      if (k > 0) idx_[k] = 0;
    }
    done_ = true;
  }

 private:
  const DatasetInfo& d_;
  std::vector<Index> idx_, across_;
  Index last0_ = 0;
  bool done_ = false;
};

/// Reads the walk's next chunks raw through HDF5, one call each with its own activity scope
/// (so a slow valid file makes visible progress), until kBatchChunks chunks or kBatchBytes
/// stored bytes are held. kMissingMember for an unallocated chunk.
Status read_raw_batch(hid_t ds, const std::string& path, const std::string& file, std::size_t chunk_bytes,
                      ChunkWalk& walk, std::vector<RawChunk>& raws, std::size_t& batch) {
  // 4,096 chunks or 64 MiB: batches large enough to keep both threads decoding, small enough
  // that the raw copies stay a bounded part of the memory budget whatever the dataset's size.
  constexpr std::size_t kBatchChunks = 4096;
  constexpr std::size_t kBatchBytes = std::size_t{64} << 20;
  std::size_t used = 0;  // raws[0, used) are this batch; the rest keep their buffers for later
  std::size_t held = 0;
  for (; !walk.done() && used < kBatchChunks && held < kBatchBytes; walk.next()) {
    if (used == raws.size()) raws.emplace_back();
    RawChunk& r = raws[used];
    r.offset = walk.offset();
    Hdf5Activity activity("reading chunk", coords_text(r.offset) + " of " + path + " in " + file);
    // H5Dget_chunk_info_by_coord would do: it scans the whole chunk index in libhdf5 1.10
    // (1.8 ms per call on a 61,440-chunk index, so a read of every chunk is quadratic), where
    // this is one B-tree lookup (~5 us with the read below).
    hsize_t size = 0;
    if (H5Dget_chunk_storage_size(ds, r.offset.data(), &size) < 0) {
      // It fails alike for an unallocated chunk and a corrupt index; the linear lookup, run
      // once on this path only, tells them apart.
      const Hdf5Error error = hdf5_error();
      unsigned mask = 0;
      haddr_t addr = HADDR_UNDEF;
      if (H5Dget_storage_size(ds) == 0 ||
          (H5Dget_chunk_info_by_coord(ds, r.offset.data(), &mask, &addr, &size) >= 0 && addr == HADDR_UNDEF)) {
        hdf5_error();                                                   // cleared
        return Status(ErrorCode::kMissingMember, "unallocated chunk");  // HDF5 fills it
      }
      return hdf5_failure(
          ErrorCode::kHdf5,
          path + ": chunk " + coords_text(r.offset) + " has no entry in the chunk index (corrupt index)", error);
    }
    // deflate expands incompressible data by at most 0.03 % + a few bytes; anything larger than
    // this is not a chunk of this dataset and is never allocated.
    const std::size_t most = chunk_bytes + chunk_bytes / 256 + 1024;
    if (size > most) {
      return Status(ErrorCode::kHdf5, path + ": chunk " + coords_text(r.offset) + " declares " + std::to_string(size) +
                                          " stored bytes for " + std::to_string(chunk_bytes) + " bytes of data");
    }
    unsigned char* bytes = r.reserve(static_cast<std::size_t>(size), most);
    if (bytes == nullptr) {
      return Status(ErrorCode::kMemoryLimit, path + ": chunk " + coords_text(r.offset) + ": no memory for its " +
                                                 std::to_string(size) + " stored bytes");
    }
    std::uint32_t filters = 0;
    if (H5Dread_chunk(ds, H5P_DEFAULT, r.offset.data(), &filters, bytes) < 0) {
      return hdf5_failure(ErrorCode::kHdf5, path + ": chunk " + coords_text(r.offset) +
                                                " cannot be read (stored past the end of the file?)");
    }
    r.mask = filters;
    held += r.size;
    ++used;
  }
  batch = used;
  return Status();
}

/// Where in dst (rows [row, row + count), laid out [count, shape[1], ...]) the chunk at
/// `offset` lies as one run of bytes in its own layout: a chunk of whole rows (every other
/// dimension in one chunk) inside the rows asked. nullopt for any other chunk: it is decoded
/// aside and copied line by line (copy_chunk).
std::optional<std::size_t> in_place(const std::vector<hsize_t>& offset, const DatasetInfo& d, Index row, Index count) {
  const auto o0 = static_cast<Index>(offset[0]);
  if (o0 < row || o0 + d.chunk[0] > row + count || o0 + d.chunk[0] > d.shape[0]) return std::nullopt;
  Index row_elements = 1;
  for (std::size_t k = 1; k < d.shape.size(); ++k) {
    if (d.chunk[k] != d.shape[k]) return std::nullopt;
    row_elements *= d.shape[k];
  }
  return static_cast<std::size_t>((o0 - row) * row_elements * dtype_size(d.dtype));
}

/// Decodes a batch on every thread; each chunk writes its own part of dst.
Status decode_batch(std::span<const RawChunk> raws, const std::string& path, const DatasetInfo& d,
                    const std::vector<ChunkFilter>& pipeline, std::size_t chunk_bytes, Index row, Index count,
                    unsigned char* out) {
  const int esize = dtype_size(d.dtype);
  std::vector<Status> status(raws.size());
  const auto n = static_cast<std::ptrdiff_t>(raws.size());
#pragma omp parallel if (n > 1)
  {
    // Reused across calls: a fresh 10 MB buffer per chunk costs more in page faults than
    // inflating it (0.6 s of system time per 0.3 GB measured).
    thread_local PageBuffer chunk, scratch, spare;
#pragma omp for schedule(dynamic, 16)
    for (std::ptrdiff_t c = 0; c < n; ++c) {
      const RawChunk& r = raws[static_cast<std::size_t>(c)];
      if (pipeline.empty() && r.size == chunk_bytes) {
        copy_chunk(r.data(), r.offset, d, row, count, out);  // unfiltered: no decode, no copy
        continue;
      }
      // A chunk of whole rows decodes straight into place: for 16-row chunks of 151,936-wide
      // f32 logits that saves copying 9.7 MB per chunk through a buffer the size of the chunk.
      const std::optional<std::size_t> at = in_place(r.offset, d, row, count);
      unsigned char* into = at ? out + *at : chunk.reserve(chunk_bytes);
      Status s = into == nullptr ? Status(ErrorCode::kMemoryLimit,
                                          path + ": chunk " + coords_text(r.offset) + ": no memory to decode it")
                                 : decode_chunk_into(r.data(), r.size, pipeline, r.mask, esize, chunk_bytes, into,
                                                     scratch, spare, path + ": chunk " + coords_text(r.offset));
      if (!s.ok()) {
        status[static_cast<std::size_t>(c)] = std::move(s);
        continue;
      }
      if (!at) copy_chunk(chunk.data(), r.offset, d, row, count, out);
    }
  }
  for (Status& s : status) {
    if (!s.ok()) return std::move(s);
  }
  return Status();
}

}  // namespace

std::uint64_t chunks_touched(const DatasetInfo& d, Index row, Index count) {
  if (d.layout != Layout::kChunked || d.shape.empty() || d.chunk.size() != d.shape.size() || count <= 0) return 0;
  // A chunk dimension of 0 is never written by HDF5; counted as 1 rather than divided by.
  auto dim = [&](std::size_t k) { return std::max<Index>(d.chunk[k], 1); };
  std::uint64_t n = static_cast<std::uint64_t>((row + count - 1) / dim(0) - row / dim(0) + 1);
  for (std::size_t k = 1; k < d.shape.size(); ++k) {
    const auto along = static_cast<std::uint64_t>((d.shape[k] + dim(k) - 1) / dim(k));
    n = along != 0 && n > UINT64_MAX / along ? UINT64_MAX : n * along;
  }
  return n;
}

std::uint64_t chunk_bytes(const DatasetInfo& d) {
  auto bytes = static_cast<std::uint64_t>(dtype_size(d.dtype));
  for (const Index c : d.chunk) {
    const auto dim = static_cast<std::uint64_t>(std::max<Index>(c, 1));
    bytes = bytes > UINT64_MAX / dim ? UINT64_MAX : bytes * dim;
  }
  return bytes;
}

/// Rows [row, row + count) of a chunked dataset, batch by batch: the raw chunks are read
/// through HDF5 one after the other (a copy under its lock), then decoded on every thread and
/// copied into place. kMissingMember when a chunk is not allocated (the caller then lets HDF5
/// supply the fill value).
Status read_rows_parallel(const DumpReader::Impl& impl, const std::string& path, const DatasetInfo& d,
                          const std::vector<ChunkFilter>& pipeline, Index row, Index count, void* dst) {
  const auto one_chunk = static_cast<std::size_t>(chunk_bytes(d));
  Hid ds;
  {
    Hdf5Activity activity("opening", path + " in " + impl.model.file);
    ds = open_dataset(impl, d);
  }
  if (!ds.valid()) return hdf5_failure(ErrorCode::kHdf5, path + ": cannot open the dataset (corrupt object header)");
  auto* out = static_cast<unsigned char*>(dst);
  ChunkWalk walk(d, row, count);
  // Kept by the thread from call to call (row streams read block after block): a fresh
  // buffer's page faults cost more than inflating into it. Released after a call that left
  // more than kKeptBytes in it, so at most that stays held between reads.
  constexpr std::size_t kKeptBytes = std::size_t{32} << 20;
  thread_local std::vector<RawChunk> raws;
  struct Release {
    ~Release() {
      std::size_t kept = 0;
      for (const RawChunk& r : raws) kept += r.buffer.capacity();
      if (kept > kKeptBytes) raws.clear();
    }
  } release;
  while (!walk.done()) {
    std::size_t batch = 0;
    NCERT_RETURN_IF_ERROR(read_raw_batch(ds.get(), path, impl.model.file, one_chunk, walk, raws, batch));
    const std::span<const RawChunk> chunks(raws.data(), batch);
    if (Status s = decode_batch(chunks, path, d, pipeline, one_chunk, row, count, out); !s.ok()) {
      // Named by file too, as read_rows' own failures are: compare and forks read two dumps
      // holding the same object names.
      if (s.code() == ErrorCode::kMemoryLimit) {
        return s.with_context(impl.model.file);  // no decompressor: not the data's fault
      }
      // Said in the dump's terms first (which rows could not be read), the chunk's fault after.
      return Status(s.code(), impl.model.file + ": " + path + ": rows [" + std::to_string(row) + ", " +
                                  std::to_string(row + count) + ") cannot be read: the stored data is corrupt (" +
                                  s.message() + ")")
          .with_detail(s.detail());
    }
  }
  return Status();
}

}  // namespace ncert::certify::detail
