#include "certify/io/dump_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "certify/io/detail/reader_impl.h"
#include "certify/io/hash.h"
#include "certify/isolation/activity.h"

namespace ncert::certify {

using detail::Hid;

DumpReader::DumpReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DumpReader::DumpReader(DumpReader&&) noexcept = default;
DumpReader& DumpReader::operator=(DumpReader&&) noexcept = default;
DumpReader::~DumpReader() = default;

Result<DumpReader> DumpReader::survey(const std::string& path, const ReaderOptions& options) {
  NCERT_ASSIGN_OR_RETURN(auto impl, detail::survey_file(path, options));
  return DumpReader(std::move(impl));
}

Result<DumpReader> DumpReader::open(const std::string& path, const ReaderOptions& options) {
  NCERT_ASSIGN_OR_RETURN(auto impl, detail::survey_file(path, options));
  const Status s = impl->model.first_error();
  if (!s.ok()) return Status(s.code(), path + ": " + s.message());
  return DumpReader(std::move(impl));
}

const DumpModel& DumpReader::model() const { return impl_->model; }
const ReaderOptions& DumpReader::options() const { return impl_->options; }

Status DumpReader::read_rows(const std::string& path, Index row, Index count, void* dst) const {
  const DatasetInfo* d = impl_->model.dataset(path);
  if (!d) return Status(ErrorCode::kMissingMember, path + ": not a validated dataset of this dump");
  if (count == 0) return Status();
  const int rank = static_cast<int>(d->shape.size());
  if (rank == 0) {
    if (row != 0 || count != 1) {
      return Status(ErrorCode::kInvalidArgument, path + ": scalar dataset has one row");
    }
  } else if (row < 0 || count < 0 || row > d->shape[0] - count) {
    return Status(ErrorCode::kInvalidArgument, path + ": rows [" + std::to_string(row) + ", " +
                                                   std::to_string(row + count) + ") outside [0, " +
                                                   std::to_string(d->shape[0]) + ")");
  }
  if (const auto pipeline = detail::decodable_pipeline(*d);
      pipeline &&
      ((!pipeline->empty() && static_cast<std::uint64_t>(count * d->row_elements() * dtype_size(d->dtype)) >=
                                  impl_->options.parallel_decode_min_bytes) ||
       detail::chunks_touched(*d, row, count) > impl_->options.chunk_by_chunk_min_chunks)) {
    Status s = detail::read_rows_parallel(*impl_, path, *d, *pipeline, row, count, dst);
    if (s.code() != ErrorCode::kMissingMember) return s;  // else: an unallocated chunk, HDF5 fills it
  }
  const std::string rows = "rows [" + std::to_string(row) + ", " + std::to_string(row + count) + ")";
  Hdf5Activity activity("reading", rows + " of " + path + " in " + impl_->model.file);
  Hid ds = detail::open_dataset(*impl_, *d);
  if (!ds.valid())
    return detail::hdf5_failure(ErrorCode::kHdf5, path + ": cannot open the dataset (corrupt object header)");
  Hid type = detail::own_type(H5Dget_type(ds.get()));
  herr_t rc = 0;
  // The error stack is read at once: every later HDF5 call (closing the dataspaces below)
  // clears it on entry.
  detail::Hdf5Error error;
  if (rank == 0) {
    rc = H5Dread(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, dst);
    if (rc < 0) error = detail::hdf5_error();
  } else {
    Hid fspace = detail::own_space(H5Dget_space(ds.get()));
    std::vector<hsize_t> start(rank, 0), cnt(rank);
    start[0] = static_cast<hsize_t>(row);
    cnt[0] = static_cast<hsize_t>(count);
    for (int i = 1; i < rank; ++i) cnt[i] = static_cast<hsize_t>(d->shape[i]);
    H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, cnt.data(), nullptr);
    Hid mspace = detail::own_space(H5Screate_simple(rank, cnt.data(), nullptr));
    rc = H5Dread(ds.get(), type.get(), mspace.get(), fspace.get(), H5P_DEFAULT, dst);
    if (rc < 0) error = detail::hdf5_error();
  }
  if (rc < 0) {
    // Named by file too: compare and forks read two dumps holding the same object names. When
    // libhdf5 ran out of memory, the budget is the cause to name (hdf5_failure says it); only
    // otherwise is the stored data blamed.
    const std::string what = impl_->model.file + ": " + path + ": " + rows + " cannot be read";
    if (error.out_of_memory) return detail::hdf5_failure(ErrorCode::kHdf5, what, error);
    return detail::hdf5_failure(ErrorCode::kHdf5,
                                what +
                                    ": the stored data is corrupt (a chunk that does not decompress, a checksum that "
                                    "does not match, or storage past the end of the file)",
                                error);
  }
  return Status();
}

namespace {

/// kInputChanged if the file is now shorter than when it was opened: libhdf5 reads the missing
/// bytes as zeros without an error (its default driver, inside the end-of-file address the file
/// records), and a mapping of them would raise SIGBUS.
Status still_whole(const DumpReader::Impl& impl, const std::string& path) {
  struct stat st {};
  if (::fstat(impl.fd, &st) != 0) return Status::ok_status();
  const auto now = static_cast<std::uint64_t>(st.st_size);
  if (now >= impl.file_size) return Status::ok_status();
  return Status(ErrorCode::kInputChanged, impl.model.file + ": " + path + ": the file shrank from " +
                                              std::to_string(impl.file_size) + " to " + std::to_string(now) +
                                              " bytes since it was opened (another process writes to it)");
}

/// Whether read_bytes maps a dataset instead of reading it: contiguous, unfiltered, allocated
/// (file_offset), at least ReaderOptions::mapped_min_bytes, and stored at an offset that keeps
/// its elements aligned (HDF5 aligns nothing by default; the typed views over the bytes need
/// it). It is mapped from the descriptor libhdf5 opened, so the bytes are those of the file the
/// survey validated even if its path was replaced since.
bool mappable(const DumpReader::Impl& impl, const DatasetInfo& d) {
  return impl.options.data_mapped && d.file_offset && d.filters.empty() && d.layout == Layout::kContiguous &&
         static_cast<std::uint64_t>(d.bytes) >= impl.options.mapped_min_bytes &&
         *d.file_offset % static_cast<std::uint64_t>(dtype_size(d.dtype)) == 0;
}

}  // namespace

Result<Bytes> DumpReader::read_bytes(const std::string& path) const {
  const DatasetInfo* d = impl_->model.dataset(path);
  if (!d) return Status(ErrorCode::kMissingMember, path + ": not a validated dataset of this dump");
  if (static_cast<std::uint64_t>(d->bytes) > impl_->options.memory_limit) {
    return Status(ErrorCode::kMemoryLimit, path + ": " + std::to_string(d->bytes) +
                                               " bytes exceed the memory limit of " +
                                               std::to_string(impl_->options.memory_limit));
  }
  NCERT_RETURN_IF_ERROR(still_whole(*impl_, path));
  if (mappable(*impl_, *d)) {
    // nullopt: the system refused the mapping (the address-space limit); read it instead.
    if (auto mapped = Bytes::map_file(impl_->fd, *d->file_offset, static_cast<std::size_t>(d->bytes))) {
      return std::move(*mapped);
    }
  }
  Bytes out(static_cast<std::size_t>(d->bytes));
  NCERT_RETURN_IF_ERROR(read_rows(path, 0, d->shape.empty() ? 1 : d->shape[0], out.mutable_data()));
  return out;
}

namespace {
template <typename T>
Result<std::vector<T>> typed_read(const DumpReader& r, const std::string& path) {
  const DatasetInfo* d = r.model().dataset(path);
  if (!d) return Status(ErrorCode::kMissingMember, path + ": not a validated dataset of this dump");
  if (dtype_size(d->dtype) != static_cast<int>(sizeof(T))) {
    return Status(ErrorCode::kDatatypeRefused, path + ": element type " + std::string(dtype_name(d->dtype)) +
                                                   " read as a " + std::to_string(sizeof(T)) + "-byte type");
  }
  NCERT_ASSIGN_OR_RETURN(auto bytes, r.read_bytes(path));
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}
}  // namespace

Result<std::vector<float>> DumpReader::read_f32(const std::string& p) const { return typed_read<float>(*this, p); }
Result<std::vector<std::uint16_t>> DumpReader::read_u16(const std::string& p) const {
  return typed_read<std::uint16_t>(*this, p);
}
Result<std::vector<std::int32_t>> DumpReader::read_i32(const std::string& p) const {
  return typed_read<std::int32_t>(*this, p);
}
Result<std::vector<std::int64_t>> DumpReader::read_i64(const std::string& p) const {
  return typed_read<std::int64_t>(*this, p);
}
Result<std::vector<std::uint8_t>> DumpReader::read_u8(const std::string& p) const {
  return typed_read<std::uint8_t>(*this, p);
}

Result<std::string> DumpReader::dataset_hash(const std::string& path) const {
  const DatasetInfo* d = impl_->model.dataset(path);
  if (!d) return Status(ErrorCode::kMissingMember, path + ": not a validated dataset of this dump");
  Xxh3Stream stream;
  if (d->shape.empty()) {
    NCERT_ASSIGN_OR_RETURN(auto bytes, read_bytes(path));
    stream.update(bytes.data(), bytes.size());
    return stream.hex();
  }
  const Index row_bytes = d->row_elements() * dtype_size(d->dtype);
  constexpr Index kBlockBytes = 32 << 20;
  const Index rows_per_block = std::max<Index>(1, row_bytes > 0 ? kBlockBytes / row_bytes : d->shape[0]);
  std::vector<std::uint8_t> buf;
  for (Index r = 0; r < d->shape[0]; r += rows_per_block) {
    const Index n = std::min(rows_per_block, d->shape[0] - r);
    buf.resize(static_cast<std::size_t>(n * row_bytes));
    NCERT_RETURN_IF_ERROR(read_rows(path, r, n, buf.data()));
    stream.update(buf.data(), buf.size());
  }
  return stream.hex();
}

}  // namespace ncert::certify
