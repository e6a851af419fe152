#include "certify/io/hash.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "tests/common/test_paths.h"

namespace ncert::certify {
namespace {

// docs/formats.md "Hashes", verified values on xxHash 0.8.1.
TEST(Hash, KnownVectorsInCanonicalForm) {
  EXPECT_EQ(xxh3_128_hex("", 0), "99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(xxh3_128_hex("abc", 3), "06b05ab6733a618578af5f94892f3950");
}

TEST(Hash, StreamingEqualsOneShotForAnySplit) {
  std::string data(100000, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
  const std::string want = xxh3_128_hex(data.data(), data.size());
  for (std::size_t split : {0ul, 1ul, 3ul, 240ul, 241ul, 4096ul, 99999ul}) {
    Xxh3Stream s;
    s.update(data.data(), split);
    s.update(data.data() + split, data.size() - split);
    EXPECT_EQ(s.hex(), want) << split;
  }
}

TEST(Hash, WholeFile) {
  const std::string path = ncert::testing::scratch_file("f.bin");
  std::ofstream(path) << "abc";
  EXPECT_EQ(*file_xxh3_128(path), "06b05ab6733a618578af5f94892f3950");
  EXPECT_EQ(file_xxh3_128(path + ".none").status().code(), ErrorCode::kFileNotFound);
}

// Every input by the one-shot hash of its bytes, "" where a file cannot be read, in the order
// given; the same on the calling thread alone (check hashes beside its reference's team) and
// on a team. The large file spans several of the cursor's 1 MiB reads and ends mid-block.
TEST(Hash, DescribeInputsOnATeamOrOnTheCallingThread) {
  std::string big((5u << 20) / 2 + 17, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 2654435761u >> 13);
  const std::string small = ncert::testing::scratch_file("small.bin");
  const std::string large = ncert::testing::scratch_file("large.bin");
  std::ofstream(small) << "abc";
  std::ofstream(large, std::ios::binary).write(big.data(), static_cast<std::streamsize>(big.size()));
  const std::vector<std::string> paths = {large, small + ".none", small};
  for (bool serial : {false, true}) {
    const std::vector<InputInfo> got = describe_inputs(paths, serial);
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[0].path, large);
    EXPECT_EQ(got[0].xxh3_128, xxh3_128_hex(big.data(), big.size())) << serial;
    EXPECT_EQ(got[1].path, small + ".none");
    EXPECT_EQ(got[1].xxh3_128, "") << serial;
    EXPECT_EQ(got[2].xxh3_128, "06b05ab6733a618578af5f94892f3950") << serial;
  }
}

}  // namespace
}  // namespace ncert::certify
