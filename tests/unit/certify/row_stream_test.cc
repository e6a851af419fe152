// stream_rows (certify/io/row_stream.h), the one loop under compare, witness, forks and tensor
// comparisons: every row in [0, min(limit, rows)) is visited exactly once with its own bytes in
// every stream, at any thread count and block size, whether the streams are read directly (rows
// claimed across block borders, the next blocks read by whichever thread makes them due) or one
// is decoded from compressed chunks (blocks fetched between the team's passes); progress is
// reported on the calling thread, in order, ending with every row; a file truncated while it
// streams is an I/O error, never a crash or a hang.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <omp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "certify/io/dump_reader.h"
#include "certify/io/hash.h"
#include "certify/io/row_stream.h"
#include "tests/common/h5_tensor.h"
#include "tests/common/mini_dump.h"
#include "tests/common/test_paths.h"

namespace ncert::certify {
namespace {

using ncert::testing::add_f32_tensor;
using ncert::testing::open_mini_dump;
using ncert::testing::scratch_file;

constexpr hsize_t kRows = 203;  // 40 blocks of 5 rows and a last one of 3
constexpr hsize_t kCols = 64;
constexpr hsize_t kShortRows = 151;  // "short": fewer rows than the others

struct Written {
  std::string path;
  std::vector<unsigned char> a, b, packed, short_rows;  // the bytes written
};

const Written& written() {
  static const Written w = [] {
    Written out{scratch_file("rows.h5"), {}, {}, {}, {}};
    auto writer = open_mini_dump(out.path);
    const auto file = static_cast<hid_t>(writer.native_handle());
    out.a = add_f32_tensor(file, "a", kRows, kCols, 0, 1);
    out.b = add_f32_tensor(file, "b", kRows, kCols, 0, 2);
    out.packed = add_f32_tensor(file, "packed", kRows, kCols, 8, 3);  // chunks of 8 rows, deflate
    out.short_rows = add_f32_tensor(file, "short", kShortRows, kCols, 0, 4);
    EXPECT_TRUE(writer.close().ok());
    return out;
  }();
  return w;
}

struct Outcome {
  Status status;
  std::vector<int> visits;      // per row
  int wrong_bytes = 0;          // rows whose bytes differ from the written ones
  std::vector<Index> progress;  // after_block's arguments, in call order
  int progress_off_thread = 0;  // after_block calls not on the calling thread
};

/// Streams `names` of `path` together, rows [0, limit), on `threads` threads.
Outcome stream(const std::string& path, const std::vector<std::string>& names, Index limit, int threads,
               Index per_block = 5, const std::function<void(Index)>& on_visit = {},
               FileHashCursor* hash_first = nullptr) {
  const Written& w = written();
  Outcome out;
  auto reader = DumpReader::open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().to_string();
  std::vector<RowStream> streams;
  streams.reserve(names.size());
  for (const std::string& n : names) {
    auto s = RowStream::open(*reader, "/tensors/" + n, per_block, streams.empty() ? hash_first : nullptr);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    streams.push_back(std::move(*s));
  }
  std::vector<RowStream*> ptrs;
  std::vector<const std::vector<unsigned char>*> want;
  ptrs.reserve(streams.size());
  want.reserve(names.size());
  for (RowStream& s : streams) ptrs.push_back(&s);
  for (const std::string& n : names) {
    want.push_back(n == "a" ? &w.a : n == "b" ? &w.b : n == "short" ? &w.short_rows : &w.packed);
  }
  std::vector<std::atomic<int>> visits(kRows + 64);
  std::atomic<int> wrong{0};
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  out.status = stream_rows(
      ptrs, limit,
      [&](Index t, const unsigned char* const* rows) {
        visits[static_cast<std::size_t>(t)].fetch_add(1);
        for (std::size_t k = 0; k < ptrs.size(); ++k) {
          // The bytes streamed must be the bytes written.
          if (std::memcmp(rows[k], want[k]->data() + t * static_cast<Index>(kCols) * 4, kCols * 4) != 0) {
            wrong.fetch_add(1);
          }
        }
        if (on_visit) on_visit(t);
      },
      [&](Index done) {
        out.progress.push_back(done);
        if (omp_get_thread_num() != 0) ++out.progress_off_thread;
      });
  omp_set_num_threads(saved);
  for (const auto& v : visits) out.visits.push_back(v.load());
  out.wrong_bytes = wrong.load();
  return out;
}

void expect_each_row_once(const Outcome& o, Index rows) {
  for (Index t = 0; t < static_cast<Index>(o.visits.size()); ++t) {
    ASSERT_EQ(o.visits[static_cast<std::size_t>(t)], t < rows ? 1 : 0) << "row " << t;
  }
  EXPECT_EQ(o.wrong_bytes, 0);
  ASSERT_FALSE(o.progress.empty());
  for (std::size_t i = 1; i < o.progress.size(); ++i) EXPECT_LE(o.progress[i - 1], o.progress[i]);
  EXPECT_EQ(o.progress.back(), rows);
  EXPECT_EQ(o.progress_off_thread, 0);
}

TEST(StreamRows, DirectStreamsVisitEveryRowOnceAtAnyThreadCount) {
  for (const int threads : {1, 2, 3, 8}) {
    SCOPED_TRACE(threads);
    const Outcome o = stream(written().path, {"a", "b"}, kRows, threads);
    ASSERT_TRUE(o.status.ok()) << o.status.to_string();
    expect_each_row_once(o, kRows);
  }
}

TEST(StreamRows, BlocksOfOneRowAndOfAllRows) {
  for (const Index per_block : {Index{1}, Index{kRows}, Index{kRows + 10}}) {
    SCOPED_TRACE(per_block);
    const Outcome o = stream(written().path, {"a", "b"}, kRows, 2, per_block);
    ASSERT_TRUE(o.status.ok()) << o.status.to_string();
    expect_each_row_once(o, kRows);
  }
}

TEST(StreamRows, ALimitStopsTheRowsAndOneBeyondThemIsTheRows) {
  for (const Index limit : {Index{0}, Index{1}, Index{77}, Index{200}}) {
    SCOPED_TRACE(limit);
    const Outcome o = stream(written().path, {"a", "b"}, limit, 2);
    ASSERT_TRUE(o.status.ok()) << o.status.to_string();
    for (Index t = 0; t < static_cast<Index>(o.visits.size()); ++t) {
      ASSERT_EQ(o.visits[static_cast<std::size_t>(t)], t < limit ? 1 : 0) << "row " << t;
    }
    EXPECT_EQ(o.wrong_bytes, 0);
  }
  const Outcome beyond = stream(written().path, {"a"}, kRows + 40, 2);
  ASSERT_TRUE(beyond.status.ok()) << beyond.status.to_string();
  expect_each_row_once(beyond, kRows);
}

TEST(StreamRows, StreamsOfDifferentLengthsStopAtTheShortest) {
  for (const int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    const Outcome o = stream(written().path, {"a", "short"}, kRows, threads);
    ASSERT_TRUE(o.status.ok()) << o.status.to_string();
    expect_each_row_once(o, kShortRows);
  }
}

TEST(StreamRows, BytesReadOnAnyThreadHashAsTheWholeFile) {
  // Thread 0 visits slowly, so the other thread completes most blocks and reads the next ones:
  // the hash is offered blocks from both threads, one at a time.
  const auto expected = file_xxh3_128(written().path);
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  auto cursor = FileHashCursor::open(written().path);
  ASSERT_TRUE(cursor.ok()) << cursor.status().to_string();
  const Outcome o = stream(
      written().path, {"a", "b"}, kRows, 2, 5,
      [](Index) {
        if (omp_get_thread_num() == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
      },
      &*cursor);
  ASSERT_TRUE(o.status.ok()) << o.status.to_string();
  expect_each_row_once(o, kRows);
  const auto got = cursor->finish();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, *expected);
}

TEST(StreamRows, ADecodedStreamBesideADirectOneVisitsTheSameRows) {
  for (const int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    const Outcome o = stream(written().path, {"a", "packed"}, kRows, threads, 8);
    ASSERT_TRUE(o.status.ok()) << o.status.to_string();
    expect_each_row_once(o, kRows);
  }
}

TEST(StreamRows, NoThreadWaitsAtABlockBorderForAnothersLastRow) {
  // Row 0 (block 0) is held until row 7 (block 1) has been visited: with a barrier between
  // blocks that could never happen, and row 0 would give up after 20 s.
  std::atomic<bool> seven{false}, seen{false};
  std::atomic<int> team{0};
  const Outcome o = stream(written().path, {"a", "b"}, kRows, 2, 5, [&](Index t) {
    team.store(std::max(team.load(), omp_get_num_threads()));
    if (t == 7) seven.store(true);
    if (t != 0) return;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!seven.load() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    seen.store(seven.load());
  });
  ASSERT_TRUE(o.status.ok()) << o.status.to_string();
  ASSERT_EQ(team.load(), 2) << "OpenMP gave one thread: nothing ran concurrently";
  EXPECT_TRUE(seen.load());
  expect_each_row_once(o, kRows);
}

TEST(StreamRows, StreamsOfDifferentBlockSizesAreRefused) {
  auto reader = DumpReader::open(written().path);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  auto a = RowStream::open(*reader, "/tensors/a", 5);
  auto b = RowStream::open(*reader, "/tensors/b", 6);
  ASSERT_TRUE(a.ok() && b.ok());
  RowStream* streams[] = {&*a, &*b};
  int visits = 0;
  const Status s = stream_rows(streams, kRows, [&](Index, const unsigned char* const*) { ++visits; });
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  EXPECT_EQ(visits, 0);
}

TEST(StreamRows, AFileTruncatedWhileItStreamsIsAnIoErrorNotAHang) {
  for (const int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    const std::string path = scratch_file("truncated-rows-" + std::to_string(threads) + ".h5");
    std::filesystem::copy_file(written().path, path, std::filesystem::copy_options::overwrite_existing);
    std::atomic<bool> cut{false};
    const Outcome o = stream(path, {"a", "b"}, kRows, threads, 5, [&](Index) {
      if (!cut.exchange(true)) {
        EXPECT_EQ(::truncate(path.c_str(), 0), 0);
      }
    });
    ASSERT_FALSE(o.status.ok());
    EXPECT_EQ(o.status.code(), ErrorCode::kIo) << o.status.to_string();
    for (const int v : o.visits) EXPECT_LE(v, 1);
    EXPECT_EQ(o.wrong_bytes, 0);  // rows visited were read before the cut
  }
}

TEST(StreamRows, AFileTruncatedBeforeTheFirstReadIsAnIoErrorWithNoVisit) {
  for (const int threads : {1, 2, 3}) {
    SCOPED_TRACE(threads);
    const std::string path = scratch_file("truncated-first-" + std::to_string(threads) + ".h5");
    std::filesystem::copy_file(written().path, path, std::filesystem::copy_options::overwrite_existing);
    auto reader = DumpReader::open(path);  // validated while whole
    ASSERT_TRUE(reader.ok()) << reader.status().to_string();
    auto a = RowStream::open(*reader, "/tensors/a", 5);
    auto b = RowStream::open(*reader, "/tensors/b", 5);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(::truncate(path.c_str(), 0), 0);
    RowStream* streams[] = {&*a, &*b};
    std::atomic<int> visits{0};
    int progress = 0;
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    const Status s = stream_rows(
        streams, kRows, [&](Index, const unsigned char* const*) { visits.fetch_add(1); }, [&](Index) { ++progress; });
    omp_set_num_threads(saved);
    EXPECT_EQ(s.code(), ErrorCode::kIo) << s.to_string();
    EXPECT_EQ(visits.load(), 0);
    EXPECT_EQ(progress, 0);
  }
}

TEST(StreamRows, AReadFailingOnAnotherThreadStopsTheTeam) {
  // The file is cut on the first row the second thread visits while the first thread's visits
  // are slow, so the second thread completes blocks and its next read is the one that fails.
  const std::string path = scratch_file("truncated-worker.h5");
  std::filesystem::copy_file(written().path, path, std::filesystem::copy_options::overwrite_existing);
  std::atomic<bool> cut{false};
  const Outcome o = stream(path, {"a", "b"}, kRows, 2, 5, [&](Index) {
    if (omp_get_thread_num() == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    } else if (!cut.exchange(true)) {
      EXPECT_EQ(::truncate(path.c_str(), 0), 0);
    }
  });
  ASSERT_FALSE(o.status.ok());
  EXPECT_EQ(o.status.code(), ErrorCode::kIo) << o.status.to_string();
  for (const int v : o.visits) EXPECT_LE(v, 1);
  EXPECT_EQ(o.wrong_bytes, 0);
  EXPECT_TRUE(cut.load());
}

}  // namespace
}  // namespace ncert::certify
