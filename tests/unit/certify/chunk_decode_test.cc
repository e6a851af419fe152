// The reader's chunk-by-chunk reads (deflate / shuffle chunks decoded on every thread, not
// inside HDF5; unfiltered chunks copied out one by one): for datasets chunked along every
// dimension (edge chunks included), of 1 to 3 dimensions and 2- and 4-byte elements, every row
// window read chunk by chunk equals the same window read through HDF5, bit for bit; unallocated
// chunks fall back to HDF5's fill value; a corrupt deflate stream is an error naming the dataset
// and the chunk, never garbage. The decoder (libdeflate) is checked against streams zlib's own
// compress2 makes, as HDF5's deflate filter does: each is decoded exactly, and a truncated
// stream, a bad Adler-32 and a stream of the wrong length are each refused.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <libdeflate.h>
#include <zlib.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "certify/io/detail/chunk_codec.h"
#include "certify/io/dump_reader.h"
#include "tests/common/mini_dump.h"
#include "tests/common/test_paths.h"

namespace ncert::certify {
namespace {

using ncert::testing::open_mini_dump;
using ncert::testing::scratch_file;

struct Layout {
  const char* name;
  std::vector<hsize_t> dims, chunk;
  hid_t type;  // H5T_IEEE_F32LE or H5T_STD_U16LE (read back raw)
  bool shuffle, deflate;
  bool write_all = true;  // false: leave the dataset's last chunks unwritten (unallocated)
};

/// Adds /tensors/<name> with the layout through the writer's native handle; returns the bytes.
std::vector<unsigned char> add_tensor(hid_t file, const Layout& l) {
  const int rank = static_cast<int>(l.dims.size());
  hsize_t n = 1;
  for (hsize_t d : l.dims) n *= d;
  const std::size_t esize = H5Tget_size(l.type);
  std::vector<unsigned char> data(n * esize);
  std::mt19937 rng(7);
  for (std::size_t i = 0; i < n; ++i) {
    // Compressible but not constant: small integers as floats, or small u16.
    const auto v = static_cast<std::uint32_t>(rng() % 50);
    if (esize == 4) {
      const float f = static_cast<float>(v) * 0.25f;
      std::memcpy(&data[i * 4], &f, 4);
    } else {
      const auto h = static_cast<std::uint16_t>(0x3F80 + v);
      std::memcpy(&data[i * 2], &h, 2);
    }
  }
  const hid_t space = H5Screate_simple(rank, l.dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, rank, l.chunk.data());
  if (l.shuffle) H5Pset_shuffle(dcpl);
  if (l.deflate) H5Pset_deflate(dcpl, 4);
  const std::string path = std::string("/tensors/") + l.name;
  const hid_t ds = H5Dcreate2(file, path.c_str(), l.type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  EXPECT_GE(ds, 0) << path;
  if (l.write_all) {
    EXPECT_GE(H5Dwrite(ds, l.type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()), 0);
  } else if (l.chunk[0] >= l.dims[0]) {
    std::fill(data.begin(), data.end(), 0);  // one chunk row: nothing written at all
  } else {
    // Only the first chunk row: the rest stays unallocated and reads as the fill value 0.
    std::vector<hsize_t> start(rank, 0), count(l.dims);
    count[0] = l.chunk[0];
    const hid_t fs = H5Dget_space(ds);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
    const hid_t ms = H5Screate_simple(rank, count.data(), nullptr);
    EXPECT_GE(H5Dwrite(ds, l.type, ms, fs, H5P_DEFAULT, data.data()), 0);
    H5Sclose(ms);
    H5Sclose(fs);
    std::fill(data.begin() + static_cast<std::ptrdiff_t>(count[0] * (n / l.dims[0]) * esize), data.end(), 0);
  }
  if (esize == 2) {
    const hid_t a_space = H5Screate(H5S_SCALAR);
    const hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, 4);
    const hid_t attr = H5Acreate2(ds, "dtype", str, a_space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attr, str, "bf16");
    H5Aclose(attr);
    H5Tclose(str);
    H5Sclose(a_space);
  }
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
  return data;
}

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> l = {
      {"rows_deflate", {50, 40}, {7, 40}, H5T_IEEE_F32LE, false, true},
      {"grid_shuffle_deflate", {50, 40}, {6, 9}, H5T_IEEE_F32LE, true, true},
      {"grid_shuffle_only", {33, 17}, {5, 4}, H5T_IEEE_F32LE, true, false},
      {"bf16_grid", {23, 31}, {4, 8}, H5T_STD_U16LE, true, true},
      {"vector", {1000}, {64}, H5T_IEEE_F32LE, true, true},
      {"cube", {9, 5, 11}, {2, 3, 4}, H5T_IEEE_F32LE, true, true},
      {"rows_plain", {50, 40}, {3, 40}, H5T_IEEE_F32LE, false, false},
      {"grid_plain", {33, 17}, {2, 3}, H5T_IEEE_F32LE, false, false},
      {"bf16_elements_plain", {23, 31}, {1, 1}, H5T_STD_U16LE, false, false},
  };
  return l;
}

TEST(ChunkDecode, EveryRowWindowEqualsTheHdf5Read) {
  const std::string path = scratch_file("chunks.h5");
  std::vector<std::vector<unsigned char>> expected;
  {
    auto w = open_mini_dump(path);
    for (const Layout& l : layouts()) expected.push_back(add_tensor(static_cast<hid_t>(w.native_handle()), l));
    ASSERT_TRUE(w.close().ok());
  }
  ReaderOptions parallel;
  parallel.parallel_decode_min_bytes = 0;  // every read of a filtered dataset goes chunk by chunk
  parallel.chunk_by_chunk_min_chunks = 0;  // and every read of an unfiltered one
  ReaderOptions hdf5;
  hdf5.parallel_decode_min_bytes = ~std::uint64_t{0};  // never
  hdf5.chunk_by_chunk_min_chunks = ~std::uint64_t{0};
  auto rp = DumpReader::open(path, parallel);
  auto rh = DumpReader::open(path, hdf5);
  ASSERT_TRUE(rp.ok()) << rp.status().to_string();
  ASSERT_TRUE(rh.ok());
  for (std::size_t i = 0; i < layouts().size(); ++i) {
    const Layout& l = layouts()[i];
    SCOPED_TRACE(l.name);
    const std::string ds = std::string("/tensors/") + l.name;
    const Index rows = static_cast<Index>(l.dims[0]);
    const std::size_t row_bytes = expected[i].size() / static_cast<std::size_t>(rows);
    for (Index first : {Index{0}, Index{1}, Index{5}, rows / 2, rows - 1}) {
      for (Index count : {Index{1}, Index{3}, Index{8}, rows - first}) {
        if (first + count > rows) continue;
        std::vector<unsigned char> a(static_cast<std::size_t>(count) * row_bytes, 0xCD);
        std::vector<unsigned char> b(a.size(), 0xEF);
        ASSERT_TRUE(rp->read_rows(ds, first, count, a.data()).ok()) << first << "+" << count;
        ASSERT_TRUE(rh->read_rows(ds, first, count, b.data()).ok());
        EXPECT_EQ(a, b) << first << "+" << count;
        EXPECT_EQ(0, std::memcmp(a.data(), expected[i].data() + static_cast<std::size_t>(first) * row_bytes, a.size()))
            << first << "+" << count;
      }
    }
    // Content hashes agree too (they read through read_rows).
    EXPECT_EQ(*rp->dataset_hash(ds), *rh->dataset_hash(ds));
  }
}

TEST(ChunkDecode, APartlyWrittenDatasetIsRefusedBeforeAnythingReadsIt) {
  // Its unallocated chunks would read as fill values: a review's dataset of one chunk, never
  // written, was certified as zeros (the slack of one chunk covered all of it). Refused as
  // storage-bomb (dump-format §7), whatever the chunk's size.
  for (const Layout& l : {Layout{"partly", {40, 12}, {8, 5}, H5T_IEEE_F32LE, true, true, false},
                          Layout{"one_chunk", {40, 12}, {40, 12}, H5T_IEEE_F32LE, false, false, false}}) {
    SCOPED_TRACE(l.name);
    const std::string path = scratch_file(std::string(l.name) + ".h5");
    {
      auto w = open_mini_dump(path);
      add_tensor(static_cast<hid_t>(w.native_handle()), l);
      ASSERT_TRUE(w.close().ok());
    }
    const auto r = DumpReader::open(path);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kStorageBomb) << r.status().to_string();
    EXPECT_NE(r.status().message().find("unwritten chunks would read as fill values"), std::string::npos)
        << r.status().to_string();
  }
}

TEST(ChunkDecode, ADatasetDeflatedTwiceIsRefused) {
  // A GiB deflated twice is a few kB: it passed the one-layer expansion bound, read 3.1 GB and
  // was then called corrupt (a review's). Refused from its pipeline.
  const std::string path = scratch_file("twice.h5");
  {
    auto w = open_mini_dump(path);
    const hid_t file = static_cast<hid_t>(w.native_handle());
    const hsize_t dims[2] = {64, 64};
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, dims);
    const unsigned level = 1;
    H5Pset_filter(dcpl, H5Z_FILTER_DEFLATE, H5Z_FLAG_OPTIONAL, 1, &level);
    H5Pset_filter(dcpl, H5Z_FILTER_DEFLATE, H5Z_FLAG_OPTIONAL, 1, &level);
    ASSERT_EQ(H5Pget_nfilters(dcpl), 2);
    const hid_t ds = H5Dcreate2(file, "/tensors/twice", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    std::vector<float> v(std::size_t{64} * 64, 1.0f);
    EXPECT_GE(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    ASSERT_TRUE(w.close().ok());
  }
  const auto r = DumpReader::open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kFilterRefused) << r.status().to_string();
  EXPECT_NE(r.status().message().find("deflate again at pipeline position 1"), std::string::npos)
      << r.status().to_string();
}

TEST(ChunkDecode, CorruptDeflateStreamIsAnErrorNamingTheChunk) {
  std::vector<float> values(64);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  std::vector<unsigned char> raw(reinterpret_cast<unsigned char*>(values.data()),
                                 reinterpret_cast<unsigned char*>(values.data()) + 256);
  std::vector<unsigned char> out;
  detail::PageBuffer scratch;
  // Not a zlib stream at all.
  Status s = detail::decode_chunk(raw.data(), raw.size(), {detail::ChunkFilter::kDeflate}, 0, 4, 256, out, scratch,
                                  "/tensors/t: chunk [0, 0]");
  EXPECT_EQ(s.code(), ErrorCode::kHdf5);
  // A Status has no typed location: its message naming the chunk is the contract.
  EXPECT_NE(s.message().find("/tensors/t: chunk [0, 0]"), std::string::npos) << s.message();
  // The deflate filter skipped for this chunk (HDF5's mask): the raw bytes are the data.
  s = detail::decode_chunk(raw.data(), raw.size(), {detail::ChunkFilter::kDeflate}, 1u, 4, 256, out, scratch, "x");
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(out, raw);
  // A chunk whose size disagrees with the dataset's chunk size is refused.
  s = detail::decode_chunk(raw.data(), 200, {}, 0, 4, 256, out, scratch, "y");
  EXPECT_EQ(s.code(), ErrorCode::kHdf5);
}

/// `bytes` as HDF5's deflate filter stores them: a zlib stream (header, deflate, Adler-32) made
/// by zlib's compress2 at `level`.
std::vector<unsigned char> zlib_compress(const std::vector<unsigned char>& bytes, int level) {
  uLongf size = compressBound(static_cast<uLong>(bytes.size()));
  std::vector<unsigned char> z(size);
  EXPECT_EQ(compress2(z.data(), &size, bytes.data(), static_cast<uLong>(bytes.size()), level), Z_OK);
  z.resize(size);
  return z;
}

/// HDF5's shuffle of `s`-byte elements (H5Z_filter_shuffle): byte j of element i goes to j n + i
/// for the n whole elements; trailing bytes stay in place.
std::vector<unsigned char> hdf5_shuffle(const std::vector<unsigned char>& bytes, std::size_t s) {
  const std::size_t n = bytes.size() / s;
  std::vector<unsigned char> out(bytes);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < s; ++j) out[j * n + i] = bytes[i * s + j];
  }
  return out;
}

/// 16 KiB of f32: small multiples of 0.25 (compressible, like logits near zero) or random bits
/// (incompressible: level 0 and random data take deflate's stored blocks).
std::vector<unsigned char> chunk_data(bool random_bits) {
  std::vector<unsigned char> bytes(16384);
  std::mt19937 rng(11);
  for (std::size_t i = 0; i < bytes.size(); i += 4) {
    const float f = static_cast<float>(rng() % 50) * 0.25f;
    const std::uint32_t r = static_cast<std::uint32_t>(rng());
    std::memcpy(&bytes[i], random_bits ? static_cast<const void*>(&r) : static_cast<const void*>(&f), 4);
  }
  return bytes;
}

using detail::ChunkFilter;

TEST(ChunkDecode, DecodesZlibStreamsWithAndWithoutShuffle) {
  for (const bool random_bits : {false, true}) {
    const std::vector<unsigned char> data = chunk_data(random_bits);
    for (const int level : {0, 1, 4, 9}) {
      SCOPED_TRACE(std::string(random_bits ? "random" : "small values") + ", level " + std::to_string(level));
      std::vector<unsigned char> out(7, 0xAA);  // stale contents must not survive
      detail::PageBuffer scratch;
      const std::vector<unsigned char> z = zlib_compress(data, level);
      Status s =
          detail::decode_chunk(z.data(), z.size(), {ChunkFilter::kDeflate}, 0, 4, data.size(), out, scratch, "deflate");
      ASSERT_TRUE(s.ok()) << s.to_string();
      EXPECT_EQ(out, data);
      // Written shuffle first, then deflate (the filter order of H5Pset_shuffle + H5Pset_deflate).
      const std::vector<unsigned char> zs = zlib_compress(hdf5_shuffle(data, 4), level);
      s = detail::decode_chunk(zs.data(), zs.size(), {ChunkFilter::kShuffle, ChunkFilter::kDeflate}, 0, 4, data.size(),
                               out, scratch, "shuffle + deflate");
      ASSERT_TRUE(s.ok()) << s.to_string();
      EXPECT_EQ(out, data);
      // The same bytes with the shuffle skipped for this chunk (mask bit 0): deflate alone.
      s = detail::decode_chunk(z.data(), z.size(), {ChunkFilter::kShuffle, ChunkFilter::kDeflate}, 1u, 4, data.size(),
                               out, scratch, "shuffle skipped");
      ASSERT_TRUE(s.ok()) << s.to_string();
      EXPECT_EQ(out, data);
    }
  }
}

/// decode_chunk's refusal of `z` declared as `out_size` bytes: kHdf5, naming the chunk, and
/// the output never grown past the declared size.
void expect_stream_refused(const std::vector<unsigned char>& z, std::size_t out_size, const std::string& says) {
  std::vector<unsigned char> out;
  detail::PageBuffer scratch;
  const Status s = detail::decode_chunk(z.data(), z.size(), {ChunkFilter::kShuffle, ChunkFilter::kDeflate}, 0, 4,
                                        out_size, out, scratch, "/logits/a: chunk [16, 0]");
  EXPECT_EQ(s.code(), ErrorCode::kHdf5) << s.to_string();
  EXPECT_EQ(s.message().rfind("/logits/a: chunk [16, 0]: deflate stream ", 0), 0u) << s.message();
  EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
  EXPECT_LE(out.size(), out_size);
}

TEST(ChunkDecode, RefusesTruncatedCorruptAndWrongLengthStreams) {
  const std::vector<unsigned char> data = chunk_data(false);
  const std::vector<unsigned char> z = zlib_compress(hdf5_shuffle(data, 4), 4);
  ASSERT_GT(z.size(), 64u);
  {
    SCOPED_TRACE("the good stream");  // the direction that passes, for contrast
    std::vector<unsigned char> out;
    detail::PageBuffer scratch;
    ASSERT_TRUE(detail::decode_chunk(z.data(), z.size(), {ChunkFilter::kShuffle, ChunkFilter::kDeflate}, 0, 4,
                                     data.size(), out, scratch, "good")
                    .ok());
    EXPECT_EQ(out, data);
  }
  for (const std::size_t cut : {std::size_t{1}, std::size_t{4}, z.size() / 2, z.size() - 2}) {
    SCOPED_TRACE("truncated by " + std::to_string(cut) + " bytes");
    // libdeflate reads zeros past the end: a cut stream is corrupt (1) or runs on past the chunk (3).
    expect_stream_refused(std::vector<unsigned char>(z.begin(), z.end() - static_cast<std::ptrdiff_t>(cut)),
                          data.size(), "is corrupt");
  }
  {
    SCOPED_TRACE("Adler-32 off by one bit");
    // The deflate data is intact (zlib's raw inflate of it gives the chunk back): only the
    // checksum in the last 4 bytes disagrees.
    std::vector<unsigned char> bad = z;
    bad.back() ^= 0x01;
    std::vector<unsigned char> raw(data.size());
    z_stream zs{};
    ASSERT_EQ(inflateInit2(&zs, -15), Z_OK);
    zs.next_in = bad.data() + 2;
    zs.avail_in = static_cast<uInt>(bad.size() - 6);
    zs.next_out = raw.data();
    zs.avail_out = static_cast<uInt>(raw.size());
    EXPECT_EQ(inflate(&zs, Z_FINISH), Z_STREAM_END);
    inflateEnd(&zs);
    EXPECT_EQ(raw, hdf5_shuffle(data, 4));
    expect_stream_refused(bad, data.size(), "is corrupt (libdeflate result 1)");
  }
  {
    SCOPED_TRACE("a byte flipped inside the deflate data");
    // Refused by whichever check meets it first (a bad code, the length, the Adler-32).
    std::vector<unsigned char> bad = z;
    bad[bad.size() / 2] ^= 0x5A;
    expect_stream_refused(bad, data.size(), "");
  }
  {
    SCOPED_TRACE("decodes to more bytes than the chunk");
    expect_stream_refused(z, data.size() - 4, "longer than the chunk's 16380 bytes (libdeflate result 3)");
  }
  {
    SCOPED_TRACE("decodes to fewer bytes than the chunk");
    expect_stream_refused(z, data.size() + 4, "decodes to 16384 bytes, expected 16388");
  }
}

// The decompressor allocator seen by libdeflate: counts allocations, fails them on request.
std::atomic<int> g_allocations{0};
std::atomic<bool> g_fail_allocations{false};
void* counting_malloc(std::size_t n) {
  if (g_fail_allocations) return nullptr;
  ++g_allocations;
  return std::malloc(n);
}

TEST(ChunkDecode, OneDecompressorPerThreadAndAllocationFailureIsAnError) {
  const std::vector<unsigned char> data = chunk_data(false);
  const std::vector<unsigned char> z = zlib_compress(data, 4);
  libdeflate_set_memory_allocator(counting_malloc, std::free);
  // Fresh threads: their thread_local decompressor does not exist yet.
  std::thread([&] {
    std::vector<unsigned char> out;
    detail::PageBuffer scratch;
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(
          detail::decode_chunk(z.data(), z.size(), {ChunkFilter::kDeflate}, 0, 4, data.size(), out, scratch, "c").ok());
      EXPECT_EQ(out, data);
    }
  }).join();
  EXPECT_EQ(g_allocations, 1) << "one decompressor for the thread's 3 chunks";
  std::thread([&] {
    std::vector<unsigned char> out;
    detail::PageBuffer scratch;
    g_fail_allocations = true;
    const Status s = detail::decode_chunk(z.data(), z.size(), {ChunkFilter::kDeflate}, 0, 4, data.size(), out, scratch,
                                          "/logits/a: chunk [0, 0]");
    EXPECT_EQ(s.code(), ErrorCode::kMemoryLimit) << s.to_string();
    EXPECT_NE(s.message().find("/logits/a: chunk [0, 0]"), std::string::npos) << s.message();
    // Memory back: the same thread allocates its decompressor on the next chunk.
    g_fail_allocations = false;
    ASSERT_TRUE(
        detail::decode_chunk(z.data(), z.size(), {ChunkFilter::kDeflate}, 0, 4, data.size(), out, scratch, "c").ok());
    EXPECT_EQ(out, data);
  }).join();
  EXPECT_EQ(g_allocations, 2);
  libdeflate_set_memory_allocator(std::malloc, std::free);
}

TEST(ChunkDecode, UnshufflesEveryElementSize) {
  // 2, 4 and 8 bytes take the word-at-a-time path, the others the per-plane one; sizes with
  // and without trailing bytes, and chunks shorter than one element.
  std::mt19937 rng(3);
  for (const int s : {1, 2, 3, 4, 5, 8, 16}) {
    for (const std::size_t size :
         {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{64}, std::size_t{1001}, std::size_t{4096}}) {
      SCOPED_TRACE("element " + std::to_string(s) + " bytes, chunk " + std::to_string(size) + " bytes");
      std::vector<unsigned char> data(size);
      for (unsigned char& b : data) b = static_cast<unsigned char>(rng());
      const std::vector<unsigned char> shuffled = hdf5_shuffle(data, static_cast<std::size_t>(s));
      std::vector<unsigned char> out(3, 0xEE);
      detail::PageBuffer scratch;
      const Status st = detail::decode_chunk(shuffled.data(), shuffled.size(), {ChunkFilter::kShuffle}, 0, s, size, out,
                                             scratch, "u");
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_EQ(out, data);
    }
  }
}

TEST(ChunkDecode, ShuffleRoundTripsIncludingTrailingBytes) {
  // 10 bytes of 4-byte elements: two whole elements shuffled, two trailing bytes in place.
  const std::vector<unsigned char> data = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const std::vector<unsigned char> shuffled = {1, 5, 2, 6, 3, 7, 4, 8, 9, 10};
  std::vector<unsigned char> out;
  detail::PageBuffer scratch;
  ASSERT_TRUE(detail::decode_chunk(shuffled.data(), shuffled.size(), {detail::ChunkFilter::kShuffle}, 0, 4, 10, out,
                                   scratch, "z")
                  .ok());
  EXPECT_EQ(out, data);
}

}  // namespace
}  // namespace ncert::certify
