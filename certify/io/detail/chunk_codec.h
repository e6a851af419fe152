// Internal: decoding of one raw HDF5 chunk through the reverse of its filter pipeline, so
// chunks can be decompressed on every thread instead of inside HDF5 (Debian's HDF5 is built
// thread-safe with one global lock: one thread at 0.18 GB/s for deflate + shuffle,
// docs/performance.md). Only the filters the reader admits and can decode bit-exactly
// itself: shuffle and deflate. Fletcher32 datasets keep going through HDF5, which verifies
// the checksum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "certify/io/detail/page_buffer.h"
#include "reference/status.h"

namespace ncert::certify::detail {

enum class ChunkFilter : std::uint8_t { kShuffle, kDeflate };

/// Decodes `raw` (as stored) into exactly `out_size` bytes of `out`. `pipeline` is the filters
/// in the order they were applied when writing; bit i of `skipped_mask` set means filter i was
/// not applied to this chunk (HDF5's per-chunk filter mask). `scratch` is reused between calls.
/// kHdf5 naming `where` when the data does not decode to exactly `out_size` bytes (a corrupt or
/// truncated deflate stream, a bad Adler-32, a stream longer or shorter than the chunk);
/// kMemoryLimit when this thread's deflate decompressor (libdeflate) cannot be allocated.
/// The same, written to `into` (out_size bytes; nothing past them is written, and on a refusal
/// its contents are unspecified): the last filter's output goes there directly, so a chunk that
/// is a contiguous run of the rows asked decodes in place. `scratch` and `spare` hold the
/// stages before the last (`spare` only for three or more filters) and are reused; kMemoryLimit
/// when they cannot grow.
Status decode_chunk_into(const unsigned char* raw, std::size_t raw_size, const std::vector<ChunkFilter>& pipeline,
                         std::uint32_t skipped_mask, int element_size, std::size_t out_size, unsigned char* into,
                         PageBuffer& scratch, PageBuffer& spare, const std::string& where);

Status decode_chunk(const unsigned char* raw, std::size_t raw_size, const std::vector<ChunkFilter>& pipeline,
                    std::uint32_t skipped_mask, int element_size, std::size_t out_size, std::vector<unsigned char>& out,
                    PageBuffer& scratch, const std::string& where);

}  // namespace ncert::certify::detail
