// Datasets read by mapping the file (ReaderOptions::data_mapped, Bytes::map_file): a contiguous,
// unfiltered dataset read_bytes maps holds exactly the bytes HDF5's read delivers; chunked and
// filtered datasets, datasets under mapped_min_bytes and datasets whose offset would misalign
// their elements are read as before; writing into a mapped Bytes changes only this process's
// copy, never the file; `ncert check` gives the same report, PASS or FAIL, mapped or not; and
// a file truncated while its data is mapped ends the isolated child with SIGBUS, reported with
// that cause, while one truncated under a row stream (read, not mapped) is an I/O error.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "certify/commands/check.h"
#include "certify/io/bytes.h"
#include "certify/io/dump_reader.h"
#include "certify/io/hash.h"
#include "certify/io/row_stream.h"
#include "certify/isolation/supervisor.h"
#include "fixtures/generator.h"
#include "reference/address_sanitizer.h"
#include "tests/common/fixture_check.h"
#include "tests/common/h5_tensor.h"
#include "tests/common/mini_dump.h"
#include "tests/common/report_json.h"
#include "tests/common/test_paths.h"

namespace ncert::certify {
namespace {

using ncert::testing::add_f32_tensor;
using ncert::testing::open_mini_dump;
using ncert::testing::scratch_file;
using ncert::testing::write_fixture;

struct Written {
  std::string path;
  std::vector<unsigned char> big, chunked;
};

const Written& written() {
  static const Written w = [] {
    Written out{scratch_file("mapped.h5"), {}, {}};
    auto writer = open_mini_dump(out.path);
    const auto file = static_cast<hid_t>(writer.native_handle());
    out.big = add_f32_tensor(file, "big", 640, 512, 0, 1);  // 1.25 MiB: over the default threshold
    out.chunked = add_f32_tensor(file, "chunked", 640, 512, 64, 2);
    EXPECT_TRUE(writer.close().ok());
    return out;
  }();
  return w;
}

bool equals(const Bytes& b, const std::vector<unsigned char>& v) {
  return b.size() == v.size() && std::memcmp(b.data(), v.data(), v.size()) == 0;
}

/// Whether read_bytes may map the dataset: contiguous, unfiltered, allocated, aligned.
bool mappable(const DumpReader& r, const std::string& path) {
  const DatasetInfo* d = r.model().dataset(path);
  return d && d->file_offset && d->filters.empty() && *d->file_offset % dtype_size(d->dtype) == 0;
}

TEST(MappedRead, AContiguousDatasetIsMappedAndHoldsTheBytesHdf5Reads) {
  const Written& w = written();
  auto mapped = DumpReader::open(w.path);
  ReaderOptions off;
  off.data_mapped = false;
  auto read = DumpReader::open(w.path, off);
  ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
  ASSERT_TRUE(read.ok());
  auto a = mapped->read_bytes("/tensors/big");
  auto b = read->read_bytes("/tensors/big");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(equals(*a, w.big));
  EXPECT_TRUE(equals(*b, w.big));
  EXPECT_FALSE(b->mapped());
  // HDF5 aligns nothing by default; a misaligned offset would be read, never mapped. The
  // writer's layout puts this dataset at a 4-byte multiple (19,856 with HDF5 1.10.8).
  ASSERT_TRUE(mappable(*mapped, "/tensors/big"));
  EXPECT_TRUE(a->mapped());
  // The typed read copies out of the mapping.
  auto f = mapped->read_f32("/tensors/big");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(0, std::memcmp(f->data(), w.big.data(), w.big.size()));
}

TEST(MappedRead, ChunkedSmallAndSwitchedOffDatasetsAreRead) {
  const Written& w = written();
  auto r = DumpReader::open(w.path);
  ASSERT_TRUE(r.ok());
  auto c = r->read_bytes("/tensors/chunked");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->mapped());
  EXPECT_TRUE(equals(*c, w.chunked));
  auto x = r->read_bytes("/projections/p/x");  // 128 bytes: under mapped_min_bytes
  ASSERT_TRUE(x.ok());
  EXPECT_FALSE(x->mapped());
  ReaderOptions all;
  all.mapped_min_bytes = 0;
  auto r0 = DumpReader::open(w.path, all);
  ASSERT_TRUE(r0.ok());
  auto x0 = r0->read_bytes("/projections/p/x");
  ASSERT_TRUE(x0.ok());
  EXPECT_EQ(x0->mapped(), mappable(*r0, "/projections/p/x"));
  EXPECT_EQ(x0->size(), x->size());
  EXPECT_EQ(0, std::memcmp(x0->data(), x->data(), x->size()));
}

TEST(MappedRead, WritingIntoAMappedDatasetChangesOnlyThisCopy) {
  const Written& w = written();
  auto r = DumpReader::open(w.path);
  ASSERT_TRUE(r.ok());
  auto a = r->read_bytes("/tensors/big");
  ASSERT_TRUE(a.ok());
  Bytes copy = *a;  // a copy is always in memory
  EXPECT_FALSE(copy.mapped());
  EXPECT_TRUE(equals(copy, w.big));
  EXPECT_TRUE(a->mapped());
  std::memset(a->mutable_data(), 0x5A, 4096 + 3);  // copy-on-write from here on
  EXPECT_FALSE(a->mapped());
  EXPECT_EQ((*a)[4096 + 2], 0x5A);
  EXPECT_TRUE(equals(copy, w.big));
  auto again = r->read_bytes("/tensors/big");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(equals(*again, w.big));  // the file is unchanged
  Bytes moved = std::move(*a);
  EXPECT_EQ(moved.size(), w.big.size());
  EXPECT_TRUE(a->empty());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
}

/// check's report with every aligned dataset mapped, and with none.
void expect_same_report_mapped_or_read(const std::string& path) {
  Json reports[2];
  for (int mapped = 0; mapped < 2; ++mapped) {
    CheckCommandOptions co;
    co.dump = path;
    co.reader.data_mapped = mapped == 1;
    co.reader.mapped_min_bytes = 0;
    auto r = run_check(co);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    reports[mapped] = without_timing(r->to_json());
  }
  EXPECT_EQ(reports[0].dump(), reports[1].dump());
}

TEST(MappedRead, CheckReportsAreTheSameMappedOrRead) {
  expect_same_report_mapped_or_read(write_fixture(fixtures::preset_tiny(), "mapped_pass.h5"));
  expect_same_report_mapped_or_read(
      write_fixture(fixtures::preset_tiny(), "mapped_fail.h5", fixtures::Fault::kNibbleOrderSwapped));
}

// A file that shrank after it was opened is refused, mapped or not: libhdf5 itself would read
// the missing bytes as zeros, and a mapping of them would raise SIGBUS.
TEST(MappedRead, AFileThatShrankSinceItWasOpenedIsRefusedMappedOrNot) {
  for (const bool mapped : {true, false}) {
    SCOPED_TRACE(mapped ? "mapped" : "read");
    const std::string path = scratch_file(mapped ? "shrank-mapped.h5" : "shrank-read.h5");
    std::filesystem::copy_file(written().path, path);
    ReaderOptions o;
    o.data_mapped = mapped;
    auto r = DumpReader::open(path, o);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(std::filesystem::file_size(path) - 4096)), 0);
    auto b = r->read_bytes("/tensors/big");
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), ErrorCode::kInputChanged);
    EXPECT_NE(b.status().message().find("the file shrank from"), std::string::npos) << b.status().to_string();
  }
}

// RowStream reads with pread, never a mapping: a file truncated under it is an I/O error naming
// the rows and the cause, and the file hash reports the shrink the same way.
TEST(MappedRead, AFileTruncatedWhileStreamedIsAnIoErrorNotACrash) {
  const std::string path = scratch_file("streamed.h5");
  std::filesystem::copy_file(written().path, path);
  auto r = DumpReader::open(path);
  ASSERT_TRUE(r.ok());
  auto hash = FileHashCursor::open(path);
  ASSERT_TRUE(hash.ok());
  auto stream = RowStream::open(*r, "/tensors/big", 64, &*hash);
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(stream->direct());
  auto first = stream->next();
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(0, std::memcmp(first->data, written().big.data(), static_cast<std::size_t>(first->rows * 512 * 4)));
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  auto second = stream->next();
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), ErrorCode::kIo);
  EXPECT_NE(second.status().message().find("the file shrank while it was read"), std::string::npos)
      << second.status().to_string();
  auto digest = hash->finish();
  ASSERT_FALSE(digest.ok());
  EXPECT_EQ(digest.status().code(), ErrorCode::kIo);
}

// AddressSanitizer handles SIGBUS itself (its report, then exit 1), so the child would not end
// by the signal this test is about: it exists in the builds without ASan.
#if !NCERT_ADDRESS_SANITIZER
TEST(MappedRead, AFileTruncatedWhileMappedEndsTheChildNamingThatCause) {
  const std::string path = scratch_file("truncated.h5");
  std::filesystem::copy_file(written().path, path);
  IsolationOptions o;
  auto end = run_isolated(
      [&]() -> int {
        auto r = DumpReader::open(path);
        if (!r.ok()) return 10;
        auto b = r->read_bytes("/tensors/big");
        if (!b.ok() || !b->mapped()) return 11;
        if (::truncate(path.c_str(), 0) != 0) return 12;  // another process would do this
        volatile std::uint8_t last = (*b)[b->size() - 1];
        return last == 0 ? 13 : 14;  // not reached: the page is gone
      },
      o);
  ASSERT_TRUE(end.ok()) << end.status().to_string();
  ASSERT_EQ(end->kind, ChildEnd::Kind::kCrashed) << "exit code " << end->exit_code;
  EXPECT_EQ(end->signal, SIGBUS);
  const Status s = child_end_status(*end, o);
  EXPECT_EQ(s.code(), ErrorCode::kInternal);
  EXPECT_NE(s.message().find("another process truncated an input file while its data was mapped"), std::string::npos)
      << s.message();
}
#endif

}  // namespace
}  // namespace ncert::certify
