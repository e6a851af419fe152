// The reader's limits on chunked storage, at their boundaries: more than kMaxSmallChunks chunks
// of under kSmallChunkBytes each is a chunk-count bomb, refused from the declared grid before
// anything walks the chunk index; one chunk fewer, or chunks of kSmallChunkBytes, are not (they
// then meet the storage-bomb check, which unwritten datasets fail). And an allocation that
// fails inside libhdf5 is the memory limit, not a corrupt file.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <string>
#include <vector>

#include "certify/io/detail/hdf5_util.h"
#include "certify/io/dump_reader.h"
#include "tests/common/mini_dump.h"
#include "tests/common/test_paths.h"

namespace ncert::certify {
namespace {

using ncert::testing::open_mini_dump;
using ncert::testing::scratch_file;

/// Declares /tensors/<name> as f32 `dims` in chunks of `chunk`; writes `values` when given,
/// else nothing.
void declare_tensor(hid_t file, const std::string& name, const std::vector<hsize_t>& dims,
                    const std::vector<hsize_t>& chunk, const float* values = nullptr) {
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
  const hid_t ds =
      H5Dcreate2(file, ("/tensors/" + name).c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  EXPECT_GE(ds, 0) << name;
  if (values) {
    EXPECT_GE(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), 0) << name;
  }
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
}

ErrorCode code_of(const DumpModel& m, const std::string& path) {
  for (const Finding& f : m.findings) {
    if (f.path == path && f.severity == Severity::kError) return f.code;
  }
  return ErrorCode::kOk;
}

TEST(ChunkLimits, MoreThan65536ChunksUnder1KiBAreAChunkBombAndNoFewer) {
  static_assert(kMaxSmallChunks == 65'536 && kSmallChunkBytes == 1024, "the grids below sit on these limits");
  const std::string path = scratch_file("chunk_limits.h5");
  {
    auto w = open_mini_dump(path);
    const auto file = static_cast<hid_t>(w.native_handle());
    declare_tensor(file, "a_bomb", {256, 257}, {1, 1});           // 65,792 chunks of 4 bytes
    declare_tensor(file, "bomb_1d", {65'537}, {1});               // one over, rank 1
    declare_tensor(file, "at_limit", {256, 256}, {1, 1});         // 65,536 chunks of 4 bytes
    declare_tensor(file, "kib_chunks", {65'537, 256}, {1, 256});  // 65,537 chunks of 1,024 bytes
    declare_tensor(file, "edge", {65'537 * 2 - 1}, {2});          // 65,537 chunks, the last half full
    ASSERT_TRUE(w.close().ok());
  }
  auto r = DumpReader::survey(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const DumpModel& m = r->model();
  EXPECT_EQ(code_of(m, "/tensors/a_bomb"), ErrorCode::kChunkBomb);
  EXPECT_EQ(code_of(m, "/tensors/bomb_1d"), ErrorCode::kChunkBomb);
  EXPECT_EQ(code_of(m, "/tensors/edge"), ErrorCode::kChunkBomb);
  // Not bombs; unwritten, they are storage bombs instead (declared bytes the file does not hold).
  EXPECT_EQ(code_of(m, "/tensors/at_limit"), ErrorCode::kStorageBomb);
  EXPECT_EQ(code_of(m, "/tensors/kib_chunks"), ErrorCode::kStorageBomb);
  // The message names the grid and the count, so the exporter knows what to change.
  for (const Finding& f : m.findings) {
    if (f.path != "/tensors/a_bomb") continue;
    EXPECT_NE(f.message.find("[256, 257] in chunks of [1, 1] (4 bytes each): 65792 chunks"), std::string::npos)
        << f.message;
  }
  auto opened = DumpReader::open(path);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), ErrorCode::kChunkBomb) << opened.status().to_string();
}

TEST(ChunkLimits, ReadsOfManySmallChunksGoChunkByChunkAndEqualOneHdf5Read) {
  // 20,000 written 4-byte chunks: under the bomb limit, valid, read either way alike.
  const std::string path = scratch_file("many_chunks.h5");
  std::vector<float> values(std::size_t{200} * 100);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  {
    auto w = open_mini_dump(path);
    declare_tensor(static_cast<hid_t>(w.native_handle()), "t", {200, 100}, {1, 1}, values.data());
    ASSERT_TRUE(w.close().ok());
  }
  ReaderOptions hdf5;
  hdf5.chunk_by_chunk_min_chunks = ~std::uint64_t{0};
  auto by_chunk = DumpReader::open(path);
  auto whole = DumpReader::open(path, hdf5);
  ASSERT_TRUE(by_chunk.ok()) << by_chunk.status().to_string();
  ASSERT_TRUE(whole.ok());
  std::vector<float> a(values.size(), -1.0f), b(values.size(), -2.0f);
  ASSERT_TRUE(by_chunk->read_rows("/tensors/t", 0, 200, a.data()).ok());
  ASSERT_TRUE(whole->read_rows("/tensors/t", 0, 200, b.data()).ok());
  EXPECT_EQ(a, values);
  EXPECT_EQ(b, values);
  EXPECT_EQ(*by_chunk->dataset_hash("/tensors/t"), *whole->dataset_hash("/tensors/t"));
}

TEST(ChunkLimits, AnAllocationFailureInsideLibhdf5IsTheMemoryLimit) {
  detail::hdf5_init_once();
  // The error stack libhdf5 leaves when its allocator fails (H5MM_malloc under RLIMIT_AS).
  H5Epush2(H5E_DEFAULT, __FILE__, "H5D__chunk_io_init", __LINE__, H5E_ERR_CLS, H5E_RESOURCE, H5E_CANTALLOC,
           "memory allocation failed for chunk info");
  Status s = detail::hdf5_failure(ErrorCode::kHdf5, "/logits/run/logits: rows [0, 64) cannot be read");
  EXPECT_EQ(s.code(), ErrorCode::kMemoryLimit) << s.to_string();
  EXPECT_NE(s.message().find("--max-memory"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("/logits/run/logits"), std::string::npos) << s.message();
  // Any other failure keeps the code its caller gave.
  H5Epush2(H5E_DEFAULT, __FILE__, "H5Z_pipeline", __LINE__, H5E_ERR_CLS, H5E_PLINE, H5E_READERROR,
           "filter returned failure during read");
  s = detail::hdf5_failure(ErrorCode::kHdf5, "/logits/run/logits: rows [0, 64) cannot be read");
  EXPECT_EQ(s.code(), ErrorCode::kHdf5) << s.to_string();
}

}  // namespace
}  // namespace ncert::certify
