#include "certify/io/detail/chunk_codec.h"

#include <zlib.h>

#include <cstring>

namespace ncert::certify::detail {

namespace {

/// HDF5's shuffle stores byte j of every element together: shuffled[j n + i] = bytes[i s + j]
/// for the n = size / s whole elements; trailing bytes stay where they are.
void unshuffle(const unsigned char* in, std::size_t size, int element_size, unsigned char* out) {
  const auto s = static_cast<std::size_t>(element_size);
  const std::size_t n = size / s;
  for (std::size_t j = 0; j < s; ++j) {
    const unsigned char* plane = in + j * n;
    for (std::size_t i = 0; i < n; ++i) out[i * s + j] = plane[i];
  }
  if (size > n * s) std::memcpy(out + n * s, in + n * s, size - n * s);  // never memcpy from null
}

}  // namespace

Status decode_chunk(const unsigned char* raw, std::size_t raw_size, const std::vector<ChunkFilter>& pipeline,
                    std::uint32_t skipped_mask, int element_size, std::size_t out_size, std::vector<unsigned char>& out,
                    std::vector<unsigned char>& scratch, const std::string& where) {
  // The data moves raw -> scratch/out alternately; nothing is copied for its own sake.
  const unsigned char* cur = raw;
  std::size_t cur_size = raw_size;
  std::vector<unsigned char>* next = &out;
  std::vector<unsigned char>* spare = &scratch;
  for (std::size_t k = pipeline.size(); k-- > 0;) {
    if (skipped_mask & (1u << k)) continue;
    switch (pipeline[k]) {
      case ChunkFilter::kDeflate: {
        // A chunk decodes to at most its declared size: a larger stream is refused, never grown.
        next->resize(out_size);
        uLongf got = static_cast<uLongf>(out_size);
        const int rc = uncompress(next->data(), &got, cur, static_cast<uLong>(cur_size));
        if (rc != Z_OK || got != out_size) {
          return Status(
              ErrorCode::kHdf5,
              where + ": deflate stream " +
                  (rc == Z_OK ? "decodes to " + std::to_string(got) + " bytes, expected " + std::to_string(out_size)
                              : std::string("is corrupt (zlib error ") + std::to_string(rc) + ")"));
        }
        cur_size = got;
        break;
      }
      case ChunkFilter::kShuffle:
        next->resize(cur_size);
        unshuffle(cur, cur_size, element_size, next->data());
        break;
    }
    cur = next->data();
    std::swap(next, spare);
  }
  if (cur_size != out_size) {
    return Status(ErrorCode::kHdf5,
                  where + ": chunk holds " + std::to_string(cur_size) + " bytes, expected " + std::to_string(out_size));
  }
  if (cur == scratch.data()) {
    out.swap(scratch);  // the buffers trade places: no copy
  } else if (cur != out.data()) {
    out.assign(cur, cur + cur_size);  // no filter applied to this chunk
  }
  return Status();
}

}  // namespace ncert::certify::detail
