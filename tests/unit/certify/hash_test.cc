#include "certify/io/hash.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

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

}  // namespace
}  // namespace ncert::certify
