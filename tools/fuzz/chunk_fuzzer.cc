// libFuzzer target over ncert's own chunk decoder (certify/io/detail/chunk_codec): the code
// that inflates and unshuffles raw chunks copied out of a dump without HDF5 looking at them
// (large row reads of deflate/shuffle datasets, chunk_reads.cc). No libhdf5 frame can appear
// in its crashes: every finding here is ncert's. See tools/fuzz/README.md.
//
// Input layout: byte 0 picks the filter pipeline and the per-chunk skip mask, byte 1 the
// element size, bytes 2-4 the declared decoded size (24 bits, so at most 16 MiB), the rest is
// the raw chunk as stored.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "certify/io/detail/chunk_codec.h"

using ncert::certify::detail::ChunkFilter;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t kHeader = 5;
  if (size < kHeader) return 0;
  // Pipelines as the reader admits them (in write order): deflate, shuffle + deflate, shuffle,
  // and deflate twice (legal in HDF5, though no writer does it).
  static const std::vector<ChunkFilter> kPipelines[4] = {
      {ChunkFilter::kDeflate},
      {ChunkFilter::kShuffle, ChunkFilter::kDeflate},
      {ChunkFilter::kShuffle},
      {ChunkFilter::kDeflate, ChunkFilter::kDeflate},
  };
  const std::vector<ChunkFilter>& pipeline = kPipelines[data[0] & 3];
  const std::uint32_t skipped = (data[0] >> 2) & 3;
  // dtype sizes ncert reads: 1 (u8 codes), 2 (bf16/f16), 4 (f32/i32/u32), 8 (i64); odd ones
  // too, which shuffle must also survive.
  const int element_size = 1 + (data[1] & 7);
  const std::size_t out_size = static_cast<std::size_t>(data[2]) | static_cast<std::size_t>(data[3]) << 8 |
                               static_cast<std::size_t>(data[4]) << 16;
  std::vector<unsigned char> out;
  ncert::certify::detail::PageBuffer scratch;
  (void)ncert::certify::detail::decode_chunk(data + kHeader, size - kHeader, pipeline, skipped, element_size, out_size,
                                             out, scratch, "/fuzz chunk [0, 0]");
  return 0;
}
