// This header defines DumpReader, the one hardened reader of ncert dumps (docs/dump-format.md v1).
// Opening a file surveys every link and dataset before any raw data is read, refuses hostile
// or malformed objects (external links, external storage, virtual datasets, foreign filters,
// unexpected datatypes, shapes that disagree with attributes, byte counts that overflow or
// exceed the memory limit, unknown schema versions) and builds the typed DumpModel. Raw data
// is then read on demand: whole datasets, row ranges, or content hashes. 16-bit types are
// always read as raw bit patterns; HDF5 never converts a value on the way in.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "certify/io/bytes.h"
#include "certify/io/dump_model.h"
#include "reference/status.h"

namespace ncert::certify {

/// 8 GiB: the largest single dataset ncert reads whole by default (projection members,
/// tensors slices). Logits are streamed and only one row must fit.
inline constexpr std::uint64_t kDefaultMemoryLimit = 8ull << 30;

/// A chunk-count bomb (kChunkBomb): a chunked dataset with more than kMaxSmallChunks chunks
/// holding under kSmallChunkBytes of data each. libhdf5 costs ~30 us and, inside one read,
/// ~6.7 KB of memory per chunk whatever its size (4 MiB of f32 logits in 1-element chunks:
/// 30 s and 6.7 GB), so such a file stalls or exhausts a reader while looking valid. 65,536
/// small chunks read chunk by chunk take under 2 s; exporters chunk by rows (KiB to MiB, h5py
/// never picks chunks under 8 KiB), far from either limit.
inline constexpr std::uint64_t kMaxSmallChunks = 65'536;
inline constexpr std::uint64_t kSmallChunkBytes = 1024;
/// The largest chunk a chunked dataset may have where the chunk holds more bytes than the whole
/// dataset declares (kChunkBomb): libhdf5 reads and inflates a whole chunk for any element of it.
/// Exporters chunk by rows (a 64-row chunk of a 151,936-token vocabulary is 39 MB) and an
/// extendible dataset may hold fewer rows than one chunk; 256 MiB is far above either.
inline constexpr std::uint64_t kMaxOversizedChunkBytes = 256ull << 20;

struct ReaderOptions {
  std::uint64_t memory_limit = kDefaultMemoryLimit;
  /// The root's ncert_schema: "ncert-dump" for engine dumps; other file types ncert writes in
  /// the same container (witness files, logits/witness_file.h) name theirs.
  std::string schema = "ncert-dump";
  /// Root members and attributes such a file type defines beyond a dump's: accepted without a
  /// note. Their contents are validated by the module that owns the file type.
  std::vector<std::string> extra_root_members;
  std::vector<std::string> extra_root_attributes;
  /// Row reads of at least this many bytes from a chunked dataset compressed with deflate
  /// and/or shuffle decode their chunks on every thread instead of inside HDF5 (whose global
  /// lock serialises decompression). Smaller reads go through HDF5. Tests lower it.
  std::uint64_t parallel_decode_min_bytes = 1u << 20;
  /// Row reads of a chunked dataset (of any pipeline but fletcher32, which HDF5 verifies) that
  /// touch more chunks than this go chunk by chunk whatever their size: libhdf5 then never holds
  /// more than a batch of chunks' bookkeeping (~6.7 KB per chunk inside one H5Dread), and the
  /// watchdog sees progress after every chunk. 64 chunks of a row-chunked dump are 64 rows or
  /// more. Tests move it.
  std::uint64_t chunk_by_chunk_min_chunks = 64;
  /// Limits of the group tree walked at open (kTreeLimit beyond them). A dump is 3-4 levels
  /// deep (/projections/<name>/segments/<seg>) with a few thousand objects for a whole model;
  /// the walk is ncert's own loop, never recursion inside libhdf5.
  int max_depth = 32;
  Index max_objects = 200'000;
  /// Processes that survey a file (the reader forks helpers for all but one; libhdf5 runs one
  /// call at a time per process): 0, as many as OpenMP threads. Fewer when the file has fewer
  /// than survey_units_per_process objects per process two links below the root, such as
  /// /projections/<name> (a whole model has a few hundred; forking costs more than surveying
  /// them). The survey's result is the same at any count. Tests move both.
  int survey_processes = 0;
  std::size_t survey_units_per_process = 2048;
  /// The survey reads object headers from a read-only mapping of the file instead of one pread
  /// each (detail/file_image.h): 24,000 1x1 projections surveyed in 1.65 s instead of 2.43 s.
  /// Files larger than half of memory_limit are never mapped (the mapping counts against the
  /// address-space limit). Another process truncating the file while it is mapped raises
  /// SIGBUS in this one; a process embedding the reader that cannot accept that turns it off.
  /// The survey's result is the same either way.
  bool survey_mapped = true;
  /// read_bytes maps a contiguous, unfiltered dataset of at least mapped_min_bytes from the file
  /// (Bytes::map_file) instead of copying it into memory: the bytes are those a read delivers,
  /// taken from the page cache without a copy (tools/bench/bench_engine.py's dump, 347 MB:
  /// check's reading 0.22-0.26 s into memory, 0.021 s mapped). As with survey_mapped, another process
  /// truncating the file while its data is mapped raises SIGBUS in this one; a process that
  /// cannot accept that turns it off. Results are the same either way (tested).
  bool data_mapped = true;
  /// Below 1 MiB a read costs microseconds and a mapping a system call and page-table work of
  /// its own (check reads dozens of small datasets per projection); tests lower it to 0.
  std::uint64_t mapped_min_bytes = std::uint64_t{1} << 20;
  /// A weights dump is given (`ncert check --weights`, a campaign's "weights"): a projection
  /// that declares weights_xxh3 may omit its weight group (docs/dump-format.md §4.5). Without
  /// it such a projection is refused as missing-member, as every projection without weights.
  bool weights_elsewhere = false;
  /// This file is read as the weights dump of others: a projection omitting its weights is
  /// refused saying so (a weights dump carries them), not asking for a weights dump.
  bool is_weights_dump = false;
};

class DumpReader {
 public:
  /// Opens and validates a dump; refuses it with the first error finding (2xx/4xx codes:
  /// kFileNotFound, kNotHdf5, kHdf5, kExternalLink, ..., kSchemaVersion).
  static Result<DumpReader> open(const std::string& path, const ReaderOptions& options = {});
  /// Opens and validates but keeps every finding instead of refusing (for `ncert inspect`).
  /// Fails only when the file cannot be opened at all.
  static Result<DumpReader> survey(const std::string& path, const ReaderOptions& options = {});

  DumpReader(DumpReader&&) noexcept;
  DumpReader& operator=(DumpReader&&) noexcept;
  ~DumpReader();

  const DumpModel& model() const;
  const ReaderOptions& options() const;

  /// The raw bytes of a whole dataset, row-major, little-endian. kMemoryLimit if it exceeds
  /// the limit, kMissingMember if the path is not a validated dataset.
  Result<Bytes> read_bytes(const std::string& path) const;
  /// Typed whole-dataset reads; the dataset's element size must match T (kDatatypeRefused).
  Result<std::vector<float>> read_f32(const std::string& path) const;
  Result<std::vector<std::uint16_t>> read_u16(const std::string& path) const;  ///< bf16/f16
  Result<std::vector<std::int32_t>> read_i32(const std::string& path) const;
  Result<std::vector<std::int64_t>> read_i64(const std::string& path) const;
  Result<std::vector<std::uint8_t>> read_u8(const std::string& path) const;

  /// Reads rows [row, row + count) of a dataset of rank >= 1 (a row is everything after the
  /// first index) into dst, which must hold count * row_elements * element size bytes.
  /// Large reads of deflate/shuffle chunks decode on the OpenMP team (parallel_decode_min_bytes);
  /// called inside a parallel region they decode on the calling thread.
  Status read_rows(const std::string& path, Index row, Index count, void* dst) const;

  /// XXH3-128 of the dataset's raw bytes in row-major order, canonical hex (32 digits); the
  /// same whatever the chunking or compression. Streamed in blocks of at most 32 MiB.
  Result<std::string> dataset_hash(const std::string& path) const;

  struct Impl;  ///< opaque: the open file and the validated model

 private:
  explicit DumpReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ncert::certify
