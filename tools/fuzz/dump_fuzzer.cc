// libFuzzer target over ncert's dump-opening and schema layer (certify/io): the input bytes are
// a candidate dump, opened the way every command opens one (DumpReader::survey, then
// DumpReader::open), followed by bounded reads of what the validated model says exists: whole
// small datasets, first and last rows, content hashes, and logits rows streamed through
// RowStream. See tools/fuzz/README.md for how to build, run and triage it.
//
// The input is written to a new file in a tmpfs directory (/dev/shm, else $TMPDIR, else /tmp;
// NCERT_FUZZ_DIR overrides) and removed after the run. A new file per input, not one rewritten
// in place: HDF5 recognises an already-open file by device and inode, and a file a corrupt input
// left open inside the library would hand the next input its cached metadata. (A memfd opened
// through /proc/self/fd does not work: HDF5 1.10 resolves the symbolic link to the file's
// actual name, "/memfd:... (deleted)", and the open fails.)
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "certify/io/dump_reader.h"
#include "certify/io/row_stream.h"
#include "certify/isolation/fd_write.h"

namespace {

using ncert::Index;
using ncert::certify::DatasetInfo;
using ncert::certify::DumpReader;
using ncert::certify::ReaderOptions;
using ncert::certify::RowStream;

// Bounds that keep one input well under libFuzzer's default 2 GB RSS limit and its timeout:
// the corpus dumps are 150-200 KB with at most 44 datasets of at most 192 KB, so every read path
// (whole reads, row reads, hashes, streams) is reached within them.
constexpr std::uint64_t kMemoryLimit = 64ull << 20;  // ReaderOptions::memory_limit
constexpr Index kMaxWholeBytes = 4 << 20;            // whole-dataset reads and hashes
constexpr Index kMaxRowBytes = 1 << 20;              // single-row reads
constexpr std::size_t kMaxDatasets = 96;             // datasets read per input
constexpr int kMaxBlocks = 4;                        // RowStream blocks per logits run

/// The directory inputs are written to: tmpfs when there is one, so no input touches a disk.
std::string input_dir() {
  if (const char* d = std::getenv("NCERT_FUZZ_DIR"); d && *d) return d;
  if (::access("/dev/shm", W_OK) == 0) return "/dev/shm";
  if (const char* d = std::getenv("TMPDIR"); d && *d) return d;
  return "/tmp";
}

/// Writes the input to a new file; returns its path (empty on failure).
std::string input_file(const std::uint8_t* data, std::size_t size) {
  static const std::string path = input_dir() + "/ncert-fuzz-" + std::to_string(::getpid()) + ".h5";
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return {};
  const int err = ncert::certify::write_all(fd, std::string_view(reinterpret_cast<const char*>(data), size));
  ::close(fd);
  if (err != 0) {
    ::unlink(path.c_str());
    return {};
  }
  return path;
}

/// The reads a command makes of a validated dataset, kept small.
void read_dataset(const DumpReader& reader, const DatasetInfo& d) {
  if (d.bytes <= kMaxWholeBytes) {
    (void)reader.read_bytes(d.path);
    (void)reader.dataset_hash(d.path);
  }
  if (d.shape.empty() || d.shape[0] <= 0) return;
  const Index row_bytes = d.row_elements() * ncert::dtype_size(d.dtype);
  if (row_bytes <= 0 || row_bytes > kMaxRowBytes) return;
  std::vector<unsigned char> row(static_cast<std::size_t>(row_bytes));
  (void)reader.read_rows(d.path, 0, 1, row.data());
  (void)reader.read_rows(d.path, d.shape[0] - 1, 1, row.data());
  // Rows that do not exist must be refused, never read.
  (void)reader.read_rows(d.path, d.shape[0], 1, row.data());
}

void stream_logits(const DumpReader& reader, const std::string& dataset) {
  const DatasetInfo* d = reader.model().dataset(dataset);
  if (!d || d->shape.size() != 2) return;
  const Index row_bytes = d->row_elements() * ncert::dtype_size(d->dtype);
  if (row_bytes <= 0 || row_bytes > kMaxRowBytes) return;
  auto stream = RowStream::open(reader, dataset, std::max<Index>(1, (256 << 10) / row_bytes));
  if (!stream.ok()) return;
  for (int b = 0; b < kMaxBlocks; ++b) {
    auto block = stream->next();
    if (!block.ok() || block->rows == 0) return;
    // Touch the first and last byte of the block: a mapping past the file's end would fault.
    volatile unsigned char sink = block->data[0];
    sink = block->data[static_cast<std::size_t>(block->rows * stream->row_bytes() - 1)];
    (void)sink;
  }
}

void exercise(const std::string& path) {
  ReaderOptions options;
  options.memory_limit = kMemoryLimit;
  // Every chunked deflate/shuffle read goes through ncert's own chunk decoder
  // (chunk_reads.cc), not only the large ones the default threshold sends there.
  options.parallel_decode_min_bytes = 1;

  if (auto surveyed = DumpReader::survey(path, options); surveyed.ok()) {
    const auto& m = surveyed->model();
    std::size_t n = 0;
    for (const DatasetInfo& d : m.datasets) {
      if (n++ == kMaxDatasets) break;
      read_dataset(*surveyed, d);
    }
    (void)m.first_error();
  }

  auto opened = DumpReader::open(path, options);
  if (!opened.ok()) return;
  for (const auto& run : opened->model().logits) stream_logits(*opened, run.path + "/logits");
  for (const auto& t : opened->model().tensors) stream_logits(*opened, t.path);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = input_file(data, size);
  if (path.empty()) return 0;
  exercise(path);
  ::unlink(path.c_str());
  return 0;
}
