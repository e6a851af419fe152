#include "certify/io/dump_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include "certify/io/detail/hdf5_util.h"

namespace ncert::certify {

using detail::Hid;

struct DumpWriter::Impl {
  std::string path;
  Hid file;
  /// A write failed (a full disk, a file size limit): the file is discarded, and close() must
  /// not flush what the disk has no room for.
  bool broken = false;

  ~Impl() { (void)close(); }

  Status failed(const std::string& what) {
    broken = true;
    return detail::hdf5_failure(ErrorCode::kIo, path + ": " + what);
  }

  /// Flushes and closes the file. HDF5 1.10 cannot close a file whose flush failed: the metadata
  /// cache is left inconsistent ("slist not empty"), every later flush fails, H5Fclose fails,
  /// and the library's exit handler then crashes on the file still registered (SIGSEGV after
  /// main returned: an outside engine's disk-full test). After a failed write the file's bytes
  /// are dropped first, so the flush has room: emptied, the file frees the disk's pages, and
  /// the metadata's few kB are written into it.
  Status close() {
    if (!file.valid()) return Status();
    if (broken) ::truncate(path.c_str(), 0);
    const bool flushed = H5Fflush(file.get(), H5F_SCOPE_LOCAL) >= 0;
    Status s = !flushed ? detail::hdf5_failure(ErrorCode::kIo, path + ": flush failed")
               : broken ? Status(ErrorCode::kIo, path + ": a write failed; the file was emptied")
                        : Status();
    file.reset();
    return s;
  }
};

DumpWriter::DumpWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DumpWriter::DumpWriter(DumpWriter&&) noexcept = default;
DumpWriter& DumpWriter::operator=(DumpWriter&&) noexcept = default;
DumpWriter::~DumpWriter() = default;

Result<DumpWriter> DumpWriter::create(const std::string& path, bool overwrite) {
  detail::hdf5_init_once();
  struct stat st {};
  if (!overwrite && ::stat(path.c_str(), &st) == 0) {
    return Status(ErrorCode::kOutputExists, path + ": exists; refusing to overwrite it");
  }
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  Hid fapl = detail::own_plist(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_file_locking(fapl.get(), false, true);
  // No modification times in object headers (the root group's included): the same content
  // gives the same bytes, so a file's hash identifies its content.
  Hid fcpl = detail::own_plist(H5Pcreate(H5P_FILE_CREATE));
  H5Pset_obj_track_times(fcpl.get(), false);
  impl->file =
      detail::own_file(H5Fcreate(path.c_str(), overwrite ? H5F_ACC_TRUNC : H5F_ACC_EXCL, fcpl.get(), fapl.get()));
  if (!impl->file.valid()) return detail::hdf5_failure(ErrorCode::kIo, path + ": cannot create");
  return DumpWriter(std::move(impl));
}

std::int64_t DumpWriter::native_handle() const { return impl_->file.get(); }

Status DumpWriter::write_root(const RootInfo& root) {
  NCERT_RETURN_IF_ERROR(write_attr("/", "ncert_schema", std::string("ncert-dump")));
  NCERT_RETURN_IF_ERROR(write_attr("/", "ncert_schema_version", root.schema_version));
  NCERT_RETURN_IF_ERROR(write_attr("/", "engine", root.engine));
  NCERT_RETURN_IF_ERROR(write_attr("/", "build", root.build));
  if (!root.model.empty()) NCERT_RETURN_IF_ERROR(write_attr("/", "model", root.model));
  if (!root.device.empty()) NCERT_RETURN_IF_ERROR(write_attr("/", "device", root.device));
  return Status();
}

Status DumpWriter::create_group(const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return Status(ErrorCode::kInvalidArgument, "group path \"" + path + "\" is not absolute");
  }
  std::size_t pos = 1;
  while (pos <= path.size()) {
    const std::size_t next = path.find('/', pos);
    const std::string prefix = path.substr(0, next == std::string::npos ? path.size() : next);
    if (prefix.size() > 1) {
      const htri_t exists = H5Lexists(impl_->file.get(), prefix.c_str(), H5P_DEFAULT);
      if (exists <= 0) {
        Hid gcpl = detail::own_plist(H5Pcreate(H5P_GROUP_CREATE));
        H5Pset_obj_track_times(gcpl.get(), false);
        Hid g = detail::own_group(H5Gcreate2(impl_->file.get(), prefix.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT));
        if (!g.valid()) {
          return detail::hdf5_failure(ErrorCode::kIo, impl_->path + ": cannot create group " + prefix);
        }
      }
    }
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  return Status();
}

Status DumpWriter::create_dataset(const std::string& path, DType t, const std::vector<Index>& shape,
                                  const StorageOptions& storage) {
  const auto slash = path.rfind('/');
  if (slash != 0) NCERT_RETURN_IF_ERROR(create_group(path.substr(0, slash)));
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Hid space = detail::own_space(dims.empty() ? H5Screate(H5S_SCALAR)
                                             : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  const bool bf16_float = storage.bf16_form == Bf16Form::kFloat16;
  Hid type = detail::make_file_type(t, bf16_float);
  Hid dcpl = detail::own_plist(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_obj_track_times(dcpl.get(), false);
  if (storage.compact) {
    H5Pset_layout(dcpl.get(), H5D_COMPACT);
  } else if (storage.chunk_rows > 0 && !dims.empty()) {
    std::vector<hsize_t> chunk = dims;
    chunk[0] = static_cast<hsize_t>(std::min<Index>(storage.chunk_rows, std::max<Index>(shape[0], 1)));
    for (auto& c : chunk) c = std::max<hsize_t>(c, 1);
    H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
    if (storage.shuffle) H5Pset_shuffle(dcpl.get());
    if (storage.deflate > 0) H5Pset_deflate(dcpl.get(), static_cast<unsigned>(storage.deflate));
    if (storage.fletcher32) H5Pset_fletcher32(dcpl.get());
  } else {
    // Contiguous data allocated at creation: row writes then land in place.
    H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY);
  }
  Hid ds = detail::own_dataset(
      H5Dcreate2(impl_->file.get(), path.c_str(), type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  if (!ds.valid()) return impl_->failed("cannot create " + path);
  if ((t == DType::kBf16 && !bf16_float) || is_fp8_dtype(t)) {
    ds.reset();
    NCERT_RETURN_IF_ERROR(write_attr(path, "dtype", std::string(dtype_name(t))));
  }
  return Status();
}

Status DumpWriter::write_rows(const std::string& path, DType t, Index row, Index count, const void* data) {
  (void)t;
  Hid ds = detail::own_dataset(H5Dopen2(impl_->file.get(), path.c_str(), H5P_DEFAULT));
  if (!ds.valid()) return detail::hdf5_failure(ErrorCode::kIo, impl_->path + ": cannot open " + path);
  Hid type = detail::own_type(H5Dget_type(ds.get()));
  Hid fspace = detail::own_space(H5Dget_space(ds.get()));
  const int rank = H5Sget_simple_extent_ndims(fspace.get());
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(fspace.get(), dims.data(), nullptr);
  std::vector<hsize_t> start(static_cast<std::size_t>(rank), 0), cnt = dims;
  start[0] = static_cast<hsize_t>(row);
  cnt[0] = static_cast<hsize_t>(count);
  H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, cnt.data(), nullptr);
  Hid mspace = detail::own_space(H5Screate_simple(rank, cnt.data(), nullptr));
  if (H5Dwrite(ds.get(), type.get(), mspace.get(), fspace.get(), H5P_DEFAULT, data) < 0) {
    return impl_->failed("cannot write rows of " + path);
  }
  return Status();
}

Status DumpWriter::write_dataset(const std::string& path, DType t, const std::vector<Index>& shape, const void* data,
                                 const StorageOptions& storage) {
  NCERT_RETURN_IF_ERROR(create_dataset(path, t, shape, storage));
  Index elements = 1;
  for (Index d : shape) elements *= d;
  if (elements == 0) return Status();
  if (shape.empty()) {
    Hid ds = detail::own_dataset(H5Dopen2(impl_->file.get(), path.c_str(), H5P_DEFAULT));
    Hid type = detail::own_type(H5Dget_type(ds.get()));
    if (H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
      return impl_->failed("cannot write " + path);
    }
    return Status();
  }
  return write_rows(path, t, 0, shape[0], data);
}

namespace {
Result<Hid> open_object(hid_t file, const std::string& object) {
  Hid obj = detail::own_object(H5Oopen(file, object.c_str(), H5P_DEFAULT));
  if (!obj.valid()) return detail::hdf5_failure(ErrorCode::kIo, "cannot open " + object);
  return obj;
}

Status write_attr_raw(hid_t obj, const std::string& name, hid_t type, const void* value) {
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  Hid space = detail::own_space(H5Screate(H5S_SCALAR));
  Hid attr = detail::own_attr(H5Acreate2(obj, name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!attr.valid() || H5Awrite(attr.get(), type, value) < 0) {
    return detail::hdf5_failure(ErrorCode::kIo, "cannot write attribute " + name);
  }
  return Status();
}
}  // namespace

Status DumpWriter::write_attr(const std::string& object, const std::string& name, const std::string& value) {
  NCERT_ASSIGN_OR_RETURN(Hid obj, open_object(impl_->file.get(), object));
  Hid type = detail::own_type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  const char* p = value.c_str();
  return write_attr_raw(obj.get(), name, type.get(), &p);
}

Status DumpWriter::write_attr(const std::string& object, const std::string& name, std::int64_t value) {
  NCERT_ASSIGN_OR_RETURN(Hid obj, open_object(impl_->file.get(), object));
  return write_attr_raw(obj.get(), name, H5T_NATIVE_INT64, &value);
}

Status DumpWriter::write_attr_f64(const std::string& object, const std::string& name, double value) {
  NCERT_ASSIGN_OR_RETURN(Hid obj, open_object(impl_->file.get(), object));
  return write_attr_raw(obj.get(), name, H5T_NATIVE_DOUBLE, &value);
}

Status DumpWriter::close() { return impl_ ? impl_->close() : Status(); }

}  // namespace ncert::certify
