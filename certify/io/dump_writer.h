// This header defines DumpWriter, which writes files in the ncert dump format (versions 1 and 2)
// (docs/dump-format.md). Fixtures, tests and `ncert witness --out` use it. Values are written as
// raw bit patterns: bf16 either as uint16 with the attribute dtype = "bf16" (form b, the
// default) or as the custom 16-bit float of docs/formats.md "HDF5 storage" (form a); memory type == file type
// so HDF5 never converts (its f32 -> bf16 conversion is not round-to-nearest-even).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reference/dtype.h"
#include "reference/status.h"

namespace ncert::certify {

enum class Bf16Form : std::uint8_t {
  kU16Attr,  ///< uint16 + attribute dtype = "bf16" (form b)
  kFloat16,  ///< custom HDF5 float with 1/8/7 bits, bias 127 (form a)
};

/// How one dataset is stored.
struct StorageOptions {
  Index chunk_rows = 0;  ///< 0: contiguous; else chunked by this many leading rows
  int deflate = 0;       ///< 1..9: deflate level (needs chunk_rows > 0)
  bool shuffle = false;
  bool fletcher32 = false;
  bool compact = false;  ///< compact layout (small datasets only)
  Bf16Form bf16_form = Bf16Form::kU16Attr;
};

struct RootInfo {
  std::string engine = "ncert-fixture";
  std::string build = "unknown";
  std::string model;   ///< optional, omitted when empty
  std::string device;  ///< optional, omitted when empty
  std::int64_t schema_version = 1;
};

class DumpWriter {
 public:
  /// Creates a new file. kOutputExists if it exists and overwrite is false.
  static Result<DumpWriter> create(const std::string& path, bool overwrite = false);

  DumpWriter(DumpWriter&&) noexcept;
  DumpWriter& operator=(DumpWriter&&) noexcept;
  ~DumpWriter();

  /// Writes the root attributes of docs/dump-format.md §2.
  Status write_root(const RootInfo& root);
  /// Creates a group and any missing parents ("/projections/q/weight/seg0").
  Status create_group(const std::string& path);
  /// Writes a dataset of raw elements (data holds product(shape) elements of dtype t).
  Status write_dataset(const std::string& path, DType t, const std::vector<Index>& shape, const void* data,
                       const StorageOptions& storage = {});
  /// Creates a dataset to be filled with write_rows (large data written block by block).
  Status create_dataset(const std::string& path, DType t, const std::vector<Index>& shape,
                        const StorageOptions& storage = {});
  /// Writes rows [row, row + count) of a dataset made by create_dataset.
  Status write_rows(const std::string& path, DType t, Index row, Index count, const void* data);
  Status write_attr(const std::string& object, const std::string& name, const std::string& value);
  Status write_attr(const std::string& object, const std::string& name, std::int64_t value);
  Status write_attr_f64(const std::string& object, const std::string& name, double value);
  /// Flushes and closes; the destructor closes too, but only close() reports errors. After a
  /// dataset that could not be created or written (a full disk), the file is emptied before it
  /// is closed (kIo): its caller discards it anyway, and HDF5 1.10 cannot close a file whose
  /// flush fails for want of room (it crashes at the process's exit).
  Status close();

  /// The underlying HDF5 file id, for tests that craft hostile objects next to valid ones.
  std::int64_t native_handle() const;

 private:
  struct Impl;
  explicit DumpWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ncert::certify
