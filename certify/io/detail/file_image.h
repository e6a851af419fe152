// Internal to the dump reader: an input file mapped read-only and opened by libhdf5 from the
// mapping, for the survey. The survey opens every object header once; through the default
// (sec2) driver each header is a pread of a few hundred bytes, and on a file of 24,000 1x1
// projections (168,000 headers) the survey's two processes spent 2.43 s, of which a fifth in
// pread; from the mapping, 1.65 s. libhdf5's core driver reads a file image in place when its
// callbacks say so (H5LTopen_file_image with DONT_COPY): no copy of the file is made, and pages
// come from the page cache as headers are touched.
//
// The mapping lives only while the survey runs; data is read through the file opened by name,
// as before. A file truncated by another process while it is mapped raises SIGBUS on the next
// read of a lost page: the supervised child then ends as a crash inside libhdf5 (hdf5-crashed,
// 203), never with a wrong result. An embedding process that cannot accept that signal turns
// ReaderOptions::survey_mapped off.
#pragma once

#include <cstdint>
#include <optional>

#include "certify/io/detail/hdf5_util.h"

namespace ncert::certify::detail {

class FileImage {
 public:
  /// The `size` bytes of the regular file open as `fd`, mapped read-only and opened by libhdf5
  /// (read-only, core driver, no copy). nullopt when the system refuses the mapping (the
  /// address-space limit --max-memory sets) or libhdf5 the image: the caller then reads through
  /// the file opened by name, which reports what is wrong with it.
  static std::optional<FileImage> open(int fd, std::uint64_t size);

  FileImage(FileImage&& other) noexcept;
  FileImage& operator=(FileImage&& other) = delete;
  FileImage(const FileImage&) = delete;
  FileImage& operator=(const FileImage&) = delete;
  /// Closes the HDF5 file, then unmaps (libhdf5 reads the mapping until the file is closed).
  ~FileImage();

  hid_t file() const { return file_.get(); }

 private:
  FileImage(void* map, std::uint64_t size, Hid file);
  void* map_ = nullptr;
  std::uint64_t size_ = 0;
  Hid file_;
};

}  // namespace ncert::certify::detail
