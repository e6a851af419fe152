// Internal to the dump reader: the open file behind a DumpReader, what the survey found before
// the schema is checked, and the steps reading a dump goes through (survey.cc, schema.cc,
// chunk_reads.cc, dump_reader.cc).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "certify/io/detail/chunk_codec.h"
#include "certify/io/detail/hdf5_util.h"
#include "certify/io/detail/survey_parts.h"
#include "certify/io/dump_reader.h"
#include "certify/isolation/activity.h"

namespace ncert::certify {

struct DumpReader::Impl {
  ReaderOptions options;
  detail::Hid file;
  DumpModel model;
  std::uint64_t file_size = 0;
  /// The descriptor libhdf5 opened the file with (its default driver's), found once at open:
  /// the survey checks it is the file checked, read_bytes maps from it. libhdf5 owns it.
  int fd = -1;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  /// Closing evicts the metadata cache, where corrupt files have crashed libhdf5: published.
  ~Impl() {
    Hdf5Activity activity("closing", model.file);
    file.reset();
  }
};

namespace detail {

/// Opens a dataset of the model where the survey found its object header (no path resolved).
inline Hid open_dataset(const DumpReader::Impl& impl, const DatasetInfo& d) {
  return own_dataset(H5Oopen_by_addr(impl.file.get(), static_cast<haddr_t>(d.object_address)));
}

/// What the survey of a file found, before the schema is checked.
struct Surveyed {
  /// The attributes of objects the model does not hold (refused datasets, named datatypes); the
  /// model holds the others' (root, groups, datasets).
  std::map<std::string, TypedAttrs> loose;
  std::set<std::string> failed;  ///< datasets that exist but were refused
};

inline std::string parent_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}
inline std::string leaf_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }
inline std::string shape_string(const std::vector<Index>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Opens the file and surveys every link and object (survey.cc), then checks the schema.
Result<std::unique_ptr<DumpReader::Impl>> survey_file(const std::string& path, const ReaderOptions& options);

/// Validates the surveyed objects against the dump format, versions 1 and 2 (schema.cc): fills the model's
/// projections, logits runs and tensors, and appends findings.
void check_schema(const ReaderOptions& options, Surveyed& surveyed, DumpModel& model);

/// The pipeline of a chunked dataset when every filter can be decoded here (shuffle, deflate;
/// empty for an unfiltered one); nullopt for fletcher32 (HDF5 verifies it) and other layouts.
std::optional<std::vector<ChunkFilter>> decodable_pipeline(const DatasetInfo& d);

/// How many chunks rows [row, row + count) of a chunked dataset touch (0 when not chunked);
/// all rows: the size of its chunk grid. Saturates at UINT64_MAX.
std::uint64_t chunks_touched(const DatasetInfo& d, Index row, Index count);

/// The bytes of data one chunk of a chunked dataset holds (its element size when not chunked).
/// Saturates at UINT64_MAX.
std::uint64_t chunk_bytes(const DatasetInfo& d);

/// Rows [row, row + count) of a chunked dataset read chunk by chunk and decoded on every
/// thread (chunk_reads.cc). kMissingMember when a chunk is not allocated (HDF5 then fills it).
Status read_rows_parallel(const DumpReader::Impl& impl, const std::string& path, const DatasetInfo& d,
                          const std::vector<ChunkFilter>& pipeline, Index row, Index count, void* dst);

}  // namespace detail
}  // namespace ncert::certify
