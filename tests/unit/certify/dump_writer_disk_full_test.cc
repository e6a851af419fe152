// A disk that fills while a dump is written (an outside engine's test on a 1 MiB tmpfs): the
// write is refused with io (200), the dump is discarded, nothing is left behind, and the process
// exits normally. HDF5 1.10 cannot close a file whose flush failed; its exit handler then
// crashed on it (SIGSEGV after main returned), so this executable's own exit status is part of
// the test: ctest fails it on a crash after every TEST passed.
//
// The full disk is simulated here: this executable defines pwrite, which HDF5's sec2 driver
// calls, and refuses with ENOSPC a write that would take an armed file's allocated bytes
// (st_blocks) beyond its budget, as a full file system does (what fits is written first);
// emptying the file frees them.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "certify/io/dump_builder.h"
#include "certify/io/dump_writer.h"
#include "certify/logits/witness_file.h"

namespace {

// The simulated disk: files under g_dir may hold g_budget allocated bytes each; -1: off.
std::atomic<std::int64_t> g_budget{-1};
char g_dir[4096];

bool armed(int fd) {
  char link[64], target[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, target, sizeof target - 1);
  if (n <= 0) return false;
  target[n] = '\0';
  return std::strncmp(target, g_dir, std::strlen(g_dir)) == 0;
}

}  // namespace

extern "C" ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  using Real = ssize_t (*)(int, const void*, size_t, off_t);
  static const auto real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "pwrite"));
  struct stat st {};
  const std::int64_t budget = g_budget.load();
  if (budget >= 0 && armed(fd) && ::fstat(fd, &st) == 0) {
    // Pages already allocated inside the file are rewritten in place; new ones need room.
    const std::int64_t end = static_cast<std::int64_t>(off) + static_cast<std::int64_t>(n);
    const std::int64_t grows = std::max<std::int64_t>(0, end - static_cast<std::int64_t>(st.st_size));
    const std::int64_t room = budget - static_cast<std::int64_t>(st.st_blocks) * 512;
    if (grows > room) {
      // As a file system does: what fits is written (a short count), then nothing.
      const std::int64_t fits = room - std::max<std::int64_t>(0, static_cast<std::int64_t>(st.st_size) - off);
      if (fits <= 0) {
        errno = ENOSPC;
        return -1;
      }
      n = static_cast<size_t>(std::min<std::int64_t>(static_cast<std::int64_t>(n), fits));
    }
  }
  return real(fd, buf, n, off);
}

namespace ncert::certify {
namespace {

namespace fs = std::filesystem;

std::string scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("ncert_disk_full_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

/// Fills the simulated disk of the files in `dir` at `budget` bytes each.
void arm(const fs::path& dir, std::int64_t budget) {
  const std::string d = fs::canonical(dir).string() + "/";
  std::snprintf(g_dir, sizeof g_dir, "%s", d.c_str());
  g_budget = budget;
}

TEST(DiskFull, AFullDiskFailsTheWriteDiscardsTheDumpAndLeavesNothing) {
  const std::string path = scratch("full.h5");
  const Index m = 4, k = 2048, n = 1024;  // 8 MiB of weights against a budget of 1 MiB
  std::vector<float> x(static_cast<std::size_t>(m * k), 0.5f), w(static_cast<std::size_t>(n * k), 0.25f),
      y(static_cast<std::size_t>(m * n), 256.0f);
  std::vector<std::int32_t> selector(static_cast<std::size_t>(m));
  std::iota(selector.begin(), selector.end(), 0);
  auto b = DumpBuilder::create(path, {.engine = "e", .build = "b"});
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  arm(fs::path(path).parent_path(), 1 << 20);
  Projection p{.name = "p",
               .k = k,
               .n = n,
               .accumulator = "f32-rn",
               .output_dtype = DType::kF32,
               .epilogue = reference::Epilogue::kNone};
  p.x = DumpArray(DType::kF32, x, {m, k});
  p.weight.push_back({.name = "w",
                      .format = reference::WeightFormat::kF32,
                      .row_begin = 0,
                      .row_end = n,
                      .values = DumpArray(DType::kF32, w, {n, k})});
  p.selector = DumpArray(DType::kI32, selector, {m});
  p.y_unpacked = DumpArray(DType::kF32, y, {m, n});
  const Status s = b->add_projection(p);
  EXPECT_EQ(s.code(), ErrorCode::kIo) << s.to_string();
  EXPECT_NE(s.message().find("was discarded"), std::string::npos) << s.to_string();
  EXPECT_FALSE(b->close().ok());
  g_budget = -1;
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(fs::path(path).parent_path()));
  fs::remove_all(fs::path(path).parent_path());
}

TEST(DiskFull, AWriterWhoseWriteFailedIsClosedByItsDestructor) {
  // No close(): an error path that returns early (the witness file's) leaves the writer to its
  // destructor, which must close what the disk has no room for as close() does.
  const std::string path = scratch("writer.h5");
  {
    auto w = DumpWriter::create(path, false);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    arm(fs::path(path).parent_path(), 1 << 20);
    std::vector<float> v(std::size_t{1} << 21, 1.0f);
    ASSERT_TRUE(w->create_group("/g").ok());
    ASSERT_TRUE(w->write_dataset("/g/a", DType::kF32, {4, 4}, v.data()).ok());
    EXPECT_EQ(w->write_dataset("/g/v", DType::kF32, {1 << 11, 1 << 10}, v.data()).code(), ErrorCode::kIo);
    ASSERT_TRUE(w->write_attr("/g", "after", std::string("the failure")).ok());
  }
  g_budget = -1;
  fs::remove_all(fs::path(path).parent_path());
}

TEST(DiskFull, AWitnessFileThatDoesNotFitLeavesTheOneThatWasThere) {
  // witness --out --force wrote over the old file in place: a full disk left half a file where a
  // whole one had been. It is written beside the target now, and renamed only once whole.
  const std::string path = scratch("w.h5");
  DumpModel dump;
  dump.engine.assign(1, 'e');  // assigned, not from literals: GCC 12's -Wrestrict misreads those here
  dump.build.assign(1, 'b');
  RunWitnesses run;
  run.run = "greedy";
  run.vocab = 8;
  run.model.source = "test";
  run.witnesses.resize(20000);
  for (std::size_t i = 0; i < run.witnesses.size(); ++i) {
    run.witnesses[i].row = static_cast<Index>(i);
    run.witnesses[i].position = static_cast<std::int64_t>(i);
    run.witnesses[i].row_xxh3 = std::string(32, '0');
  }
  RunWitnesses one = run;
  one.witnesses.resize(1);
  const std::vector<RunWitnesses> small = {one};
  ASSERT_TRUE(write_witness_file(path, false, dump, std::string(32, 'a'), small).ok());
  const auto before = fs::file_size(path);
  arm(fs::path(path).parent_path(), 64 << 10);  // 20,000 witnesses take ~1 MB
  const Status s = write_witness_file(path, true, dump, std::string(32, 'a'), {run});
  g_budget = -1;
  EXPECT_EQ(s.code(), ErrorCode::kIo) << s.to_string();
  EXPECT_EQ(fs::file_size(path), before);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(fs::path(path).parent_path())) ++files;
  EXPECT_EQ(files, 1u) << "a temporary file was left";
  fs::remove_all(fs::path(path).parent_path());
}

}  // namespace
}  // namespace ncert::certify
