// InputFile (certify/io/input_file.h): what kind of path is read, and how far into an HDF5 file.
// The end-of-file address is checked against files libhdf5 itself writes (superblock versions 0
// and 3, with and without a user block) whose size it sets: HDF5 truncates a file to that address
// on close, so the end found must be the file's size.
#include "certify/io/input_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "certify/io/hash.h"
#include "tests/common/test_paths.h"

namespace ncert::certify {
namespace {

/// An HDF5 file with one 10,000-element dataset, written by the library: `latest` selects
/// superblock version 3, `user_block` bytes precede the superblock.
std::string write_hdf5(const std::string& name, bool latest, hsize_t user_block) {
  const std::string path = ncert::testing::scratch_file(name);
  const hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  if (user_block > 0) H5Pset_userblock(fcpl, user_block);
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (latest) H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, fapl);
  const hsize_t n = 10000;
  const hid_t space = H5Screate_simple(1, &n, nullptr);
  const hid_t ds = H5Dcreate2(file, "x", H5T_NATIVE_INT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  std::vector<int> values(n, 7);
  H5Dwrite(ds, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  H5Dclose(ds);
  H5Sclose(space);
  H5Fclose(file);
  H5Pclose(fapl);
  H5Pclose(fcpl);
  return path;
}

std::uint64_t size_of(const std::string& path) { return std::filesystem::file_size(path); }

TEST(InputFile, TheEndOfAnHdf5FileIsItsSuperblocksEndOfFileAddress) {
  struct Case {
    const char* name;
    bool latest;
    hsize_t user_block;
  };
  for (const Case& c : {Case{"sb0.h5", false, 0}, Case{"sb0-ub.h5", false, 4096}, Case{"sb3.h5", true, 0},
                        Case{"sb3-ub.h5", true, 1024}}) {
    const std::string path = write_hdf5(c.name, c.latest, c.user_block);
    auto f = InputFile::open(path);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    ASSERT_TRUE(f->hdf5_end().has_value()) << c.name;
    EXPECT_EQ(*f->hdf5_end(), size_of(path)) << c.name;
    EXPECT_EQ(f->size(), size_of(path)) << c.name;
  }
}

TEST(InputFile, MoreThanOneMibPastTheEndIsTrailingData) {
  const std::string path = write_hdf5("tail.h5", false, 0);
  const std::uint64_t end = size_of(path);
  std::filesystem::resize_file(path, end + kTrailingBytesAllowed);
  ASSERT_TRUE(InputFile::open(path).ok());
  EXPECT_TRUE(file_xxh3_128(path).ok());
  // A sparse 64 GiB tail: refused from the sizes alone, and the hash never reads it.
  std::filesystem::resize_file(path, std::uint64_t{64} << 30);
  const auto refused = InputFile::open(path);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kTrailingData);
  EXPECT_NE(refused.status().message().find("at byte " + std::to_string(end)), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(file_xxh3_128(path).status().code(), ErrorCode::kTrailingData);
  std::filesystem::resize_file(path, end + kTrailingBytesAllowed + 1);
  EXPECT_EQ(InputFile::open(path).status().code(), ErrorCode::kTrailingData);
  std::filesystem::remove(path);
}

TEST(InputFile, AFileRenamedOverThePathAfterTheCheckIsNotTheSameFile) {
  // The survey checks the path, then libhdf5 opens it by name; what libhdf5 opened must be the
  // file checked. The same file under a second name (a hard link) is; another file renamed over
  // the path is input-changed.
  const std::string path = write_hdf5("checked.h5", false, 0);
  const std::string other = write_hdf5("other.h5", false, 0);
  const std::string linked = ncert::testing::scratch_file("checked-link.h5");
  std::filesystem::remove(linked);
  std::filesystem::create_hard_link(path, linked);
  auto checked = InputFile::open(path);
  ASSERT_TRUE(checked.ok()) << checked.status().to_string();
  std::filesystem::rename(other, path);
  const int by_link = ::open(linked.c_str(), O_RDONLY);
  const int by_name = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(by_link, 0);
  ASSERT_GE(by_name, 0);
  EXPECT_TRUE(checked->same_file_as(by_link).ok());
  const Status replaced = checked->same_file_as(by_name);
  EXPECT_EQ(replaced.code(), ErrorCode::kInputChanged);
  EXPECT_NE(replaced.message().find(path), std::string::npos) << replaced.message();
  EXPECT_EQ(checked->same_file_as(-1).code(), ErrorCode::kIo);
  ::close(by_link);
  ::close(by_name);
}

TEST(InputFile, TextFilesAreReadWholeAndNotJudgedAsHdf5) {
  const std::string path = ncert::testing::scratch_file("manifest.json");
  std::ofstream(path) << "{\"ncert_campaign\": 1}";
  auto f = InputFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_FALSE(f->hdf5_end().has_value());
  EXPECT_EQ(*f->read_all(), "{\"ncert_campaign\": 1}");
}

TEST(InputFile, OnlyRegularFilesAreOpenedAndNothingBlocks) {
  const std::string dir = ncert::testing::scratch_file("special-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string fifo = dir + "/fifo.h5";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // sun_path holds 108 bytes: the socket goes under the temporary directory, not the (long)
  // test directory, or bind() would truncate its name.
  const std::string sock_path =
      (std::filesystem::temp_directory_path() / ("ncert-sock-" + std::to_string(::getpid()) + ".h5")).string();
  std::filesystem::remove(sock_path);
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock_path.c_str());
  ASSERT_EQ(::bind(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  // A FIFO without a writer would block a plain open forever; a socket cannot be opened.
  const std::vector<std::pair<std::string, std::string>> special = {
      {fifo, "a FIFO"}, {sock_path, "a socket"}, {"/dev/zero", "a character device"}, {dir, "a directory"}};
  for (const auto& [path, what] : special) {
    const auto f = InputFile::open(path);
    ASSERT_FALSE(f.ok()) << path;
    EXPECT_EQ(f.status().code(), ErrorCode::kNotRegularFile) << path;
    EXPECT_EQ(f.status().message().rfind(path + ": " + what, 0), 0u) << f.status().message();
    EXPECT_EQ(file_xxh3_128(path).status().code(), ErrorCode::kNotRegularFile) << path;
  }
  ::close(sock);
  EXPECT_EQ(InputFile::open(dir + "/none.h5").status().code(), ErrorCode::kFileNotFound);
  ::unlink(fifo.c_str());
  ::unlink(sock_path.c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace ncert::certify
