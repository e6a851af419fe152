// This header defines the typed model of an ncert engine dump (docs/dump-format.md v1) that the
// reader builds after validating a file: what every dataset is (type, shape, storage), what
// every projection, logits run and state tensor declares, and the findings of validation.
// It holds descriptions only; data is read on demand through DumpReader. No HDF5 types here.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "reference/af4.h"
#include "reference/dtype.h"
#include "reference/linear_spec.h"
#include "reference/status.h"

namespace ncert::certify {

enum class Layout : std::uint8_t { kContiguous, kCompact, kChunked };
std::string_view layout_name(Layout l);

/// An attribute's value as read from the file, typed (no HDF5 types).
struct AttrValue {
  enum class Kind { kString, kInt, kFloat, kOther } kind = Kind::kOther;
  std::vector<std::string> strings;
  std::vector<std::int64_t> ints;
  std::vector<double> floats;
  std::string type_description;
  bool scalar = true;  ///< one element (scalar or 1-element simple dataspace)

  /// Rendered for listings: "8", "\"f32-rn\"", "[1, 2]".
  std::string render() const;
  /// "string", "int", "float", or the HDF5 class for others.
  std::string kind_name() const;
  /// The one string of a string attribute, the one number of a numeric one.
  std::optional<std::string> as_string() const;
  std::optional<double> as_number() const;
};

/// An attribute as found in the file.
struct AttributeInfo {
  std::string name;
  AttrValue value;
};

/// One dataset: where it is, what it holds and how it is stored.
struct DatasetInfo {
  std::string path;  ///< absolute, e.g. "/projections/q/x"
  DType dtype = DType::kF32;
  /// Raw patterns in an integer type tagged by the attribute dtype: bf16 / f16 as uint16 (form b),
  /// e4m3 / e5m2 as uint8.
  bool tagged_raw = false;
  std::vector<Index> shape;
  Index elements = 0;
  Index bytes = 0;
  Layout layout = Layout::kContiguous;
  std::vector<Index> chunk;          ///< chunk dims when chunked
  std::vector<std::string> filters;  ///< "deflate(4)", "shuffle", "fletcher32"
  std::vector<AttributeInfo> attributes;
  /// File offset of the raw bytes when they can be read directly (contiguous, no filter,
  /// allocated); read_bytes maps such datasets and RowStream reads them with pread.
  std::optional<std::uint64_t> file_offset;
  /// Where the reader found the dataset's object header: reads reopen it there, never by a path
  /// resolved again (inspect's hashes of 96,000 datasets spent 70 % of their time resolving).
  std::uint64_t object_address = 0;

  Index rows() const { return shape.empty() ? 1 : shape[0]; }
  Index row_elements() const;  ///< product of dims after the first
};

struct GroupInfo {
  std::string path;
  std::vector<AttributeInfo> attributes;
};

enum class Severity : std::uint8_t { kNote, kError };

/// One validation finding, naming the object. Errors make the dump refused (exit 3).
struct Finding {
  Severity severity = Severity::kNote;
  ErrorCode code = ErrorCode::kOk;
  std::string path;
  std::string message;
};

/// One weight segment of a projection (docs/dump-format.md §4).
struct SegmentInfo {
  std::string name;
  std::string path;  ///< the segment group
  reference::WeightFormat format = reference::WeightFormat::kBf16;
  Index row_begin = 0;
  Index row_end = 0;
  reference::Af4Layout af4;  ///< AF4 only
  /// int8 / e4m3 / e5m2 only: the value and scale types, group_size, scale_rows and dequant
  /// (no data: the pointers stay null until the weights are read).
  reference::ScaledView scaled;
  DType values_dtype = DType::kBf16;  ///< bf16/f32 values, or the AF4 codes type (u8/u32)
};

/// One /projections/<name> group with its attributes parsed: the projection's arithmetic and
/// layout (reference/linear_spec.h) plus what the dump says about where its members are.
struct ProjectionInfo : reference::ProjectionArithmetic, reference::ProjectionLayout {
  std::string name;
  std::string path;
  Index m = 0;  ///< rows of x
  Index p = 0;  ///< physical slots (selector length)
  std::optional<Index> layer;
  std::string role;
  std::string logits_run;
  std::optional<Index> requests;
  std::optional<Index> block_rows;
  std::optional<Index> cap;
  std::optional<DType> bias_dtype;
  std::optional<DType> residual_dtype;
  DType x_scales_dtype = DType::kF32;  ///< with x_quant
  bool has_x_zero_points = false;      ///< with an integer x_quant
  bool has_commit_counts = false;
  bool has_y_unpacked = false;
  bool has_y_packed = false;
  bool has_y_compact = false;
  bool has_y_before = false;
  /// The declared weights hash (docs/dump-format.md §4.5), "" when the dump declares none.
  std::string weights_xxh3;
  /// The projection has no weight group: its weights are the weights dump's projection whose
  /// weights hash is weights_xxh3 (accepted only when the reader was told a weights dump is
  /// given, ReaderOptions::weights_elsewhere). `segments` is then empty.
  bool weights_omitted = false;
  std::vector<SegmentInfo> segments;  ///< sorted by row_begin

  /// The segment holding output column `col`, nullptr where none does (weights omitted).
  const SegmentInfo* segment_at(Index col) const {
    for (const SegmentInfo& s : segments) {
      if (col >= s.row_begin && col < s.row_end) return &s;
    }
    return nullptr;
  }
};

/// One /logits/<run>.
struct LogitsRunInfo {
  std::string name;
  std::string path;
  Index vocab = 0;
  Index tokens = 0;  ///< T
  std::string tie_break = "lowest";
  std::string prompt;
  bool has_positions = false;
  bool has_prompt_tokens = false;
};

/// One /tensors/<name>.
struct TensorInfo {
  std::string name;
  std::string path;
  DType dtype = DType::kF32;
  std::vector<Index> shape;
  std::string compare;  ///< the "compare" attribute, empty when absent
};

/// Everything validation learned about a dump.
struct DumpModel {
  std::string file;
  std::string engine;
  std::string build;
  std::string model;
  std::string device;
  std::int64_t schema_version = 0;
  std::vector<AttributeInfo> root_attributes;
  std::vector<GroupInfo> groups;            ///< sorted by path
  std::vector<DatasetInfo> datasets;        ///< sorted by path
  std::vector<ProjectionInfo> projections;  ///< sorted by name
  std::vector<LogitsRunInfo> logits;        ///< sorted by name
  std::vector<TensorInfo> tensors;          ///< sorted by name
  std::vector<Finding> findings;            ///< in traversal order (sorted paths)
  /// Projections of 0 rows: noted and left out of `projections` (nothing to certify there).
  Index projections_without_rows = 0;

  const DatasetInfo* dataset(const std::string& path) const;
  const GroupInfo* group(const std::string& path) const;  ///< "/" is not in `groups`
  /// The datasets whose path starts with `prefix` ("/projections/p/"), found by binary search
  /// in the sorted list: a caller asking for every projection's members stays O(n log n).
  std::span<const DatasetInfo> datasets_under(const std::string& prefix) const;
  bool refused() const;
  /// The first error finding as a Status (ok when the dump is valid).
  Status first_error() const;
};

/// The first error among `findings` as a Status, "path: message" (ok when there is none).
Status first_error(std::span<const Finding> findings);

}  // namespace ncert::certify
