#include "certify/io/detail/file_image.h"

#include <hdf5_hl.h>
#include <sys/mman.h>

#include <utility>

namespace ncert::certify::detail {

std::optional<FileImage> FileImage::open(int fd, std::uint64_t size) {
  hdf5_init_once();
  if (size == 0) return std::nullopt;
  void* map = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) return std::nullopt;
  // DONT_COPY: the core driver reads the mapping in place; DONT_RELEASE: it never frees it (the
  // destructor unmaps). Without OPEN_RW the file is read-only, so nothing writes to the pages.
  Hid file = own_file(H5LTopen_file_image(map, static_cast<std::size_t>(size),
                                          H5LT_FILE_IMAGE_DONT_COPY | H5LT_FILE_IMAGE_DONT_RELEASE));
  if (!file.valid()) {
    hdf5_error_text();  // clear: the file opened by name reports what is wrong
    ::munmap(map, static_cast<std::size_t>(size));
    return std::nullopt;
  }
  return FileImage(map, size, std::move(file));
}

FileImage::FileImage(void* map, std::uint64_t size, Hid file) : map_(map), size_(size), file_(std::move(file)) {}

FileImage::FileImage(FileImage&& other) noexcept
    : map_(std::exchange(other.map_, nullptr)), size_(std::exchange(other.size_, 0)), file_(std::move(other.file_)) {}

FileImage::~FileImage() {
  // An object of the file still open would keep libhdf5 reading the mapping after the close:
  // then the mapping is left in place (the survey closes every object it opens, so it never is).
  const bool only_the_file = !file_.valid() || H5Fget_obj_count(file_.get(), H5F_OBJ_ALL | H5F_OBJ_LOCAL) <= 1;
  file_.reset();
  if (map_ && only_the_file) ::munmap(map_, static_cast<std::size_t>(size_));
}

}  // namespace ncert::certify::detail
