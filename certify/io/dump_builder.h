// This header defines DumpBuilder, the typed C++ writer of ncert dumps (docs/cpp-writer.md): an
// engine describes a projection, a logits run or a state tensor as a struct of typed fields and
// element arrays, and the builder validates it with the reader's own member rules
// (certify/io/schema_rules.h) before writing anything, then writes it through DumpWriter.
//
// Conventions:
// - Data is never converted. A DumpArray carries the element type the caller declares, the
//   extents and the caller's elements, whose C++ type must be the storage of that type: float for
//   f32, uint16_t bit patterns for bf16 and f16, uint8_t patterns for e4m3 and e5m2, int8_t for
//   i8, uint8_t for u8, uint32_t, int32_t, int64_t. float elements declared bf16 are refused
//   (invalid-argument): round them first (reference/float_bits.h, reference/narrow_float.h).
// - A member is refused before any of it is written, with the error code the reader gives the
//   same file (223 missing-member, 220 datatype-refused, 224 shape-mismatch, 221/222, 400-412),
//   and the reader's message, naming the file, the object path, the member and the value. The
//   builder stays usable.
// - The file is written under a temporary name beside the target and appears at its name only
//   when close() succeeds; a builder destroyed without close(), or a failed close(), leaves no
//   file. An existing file is replaced only with BuilderOptions::overwrite.
// - The root's ncert_schema_version is decided at close(): the least version that describes
//   what was added (2 as soon as one member or value of version 2 is, else 1).
// - Geometry the reader judges when it certifies (segments tiling 0..N-1, codes and scales
//   columns, selector ranges) is left to `ncert check` (guards 300-315, a FAIL, not a refusal).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "reference/af4.h"
#include "reference/dtype.h"
#include "reference/linear_spec.h"
#include "reference/status.h"

namespace ncert::certify {

/// The C++ element types a DumpArray may hold: the storage of each DType.
enum class ElementStorage : std::uint8_t { kFloat, kU16, kU8, kI8, kU32, kI32, kI64 };
/// How messages name a storage: "float", "uint16_t", ...
std::string_view element_storage_name(ElementStorage s);
/// The storage of one DType: kFloat for f32, kU16 for bf16 and f16, kU8 for u8, e4m3, e5m2, ...
ElementStorage element_storage(DType t);

template <typename T>
constexpr ElementStorage storage_of() {
  if constexpr (std::is_same_v<T, float>)
    return ElementStorage::kFloat;
  else if constexpr (std::is_same_v<T, std::uint16_t>)
    return ElementStorage::kU16;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return ElementStorage::kU8;
  else if constexpr (std::is_same_v<T, std::int8_t>)
    return ElementStorage::kI8;
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return ElementStorage::kU32;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return ElementStorage::kI32;
  else {
    static_assert(std::is_same_v<T, std::int64_t>,
                  "elements are float, uint16_t, uint8_t, int8_t, uint32_t, "
                  "int32_t or int64_t (no double: nothing is converted)");
    return ElementStorage::kI64;
  }
}

/// One dataset as the caller holds it: a declared element type, row-major extents and a view of
/// the elements (not owned: they must outlive the add_* call). Default-constructed: absent.
class DumpArray {
 public:
  DumpArray() = default;
  template <typename T>
  DumpArray(DType dtype, std::span<const T> elements, std::vector<Index> shape)
      : present_(true),
        dtype_(dtype),
        given_(storage_of<T>()),
        shape_(std::move(shape)),
        data_(elements.data()),
        count_(static_cast<Index>(elements.size())) {}
  template <typename T>
  DumpArray(DType dtype, const std::vector<T>& elements, std::vector<Index> shape)
      : DumpArray(dtype, std::span<const T>(elements), std::move(shape)) {}

  bool present() const { return present_; }
  DType dtype() const { return dtype_; }
  ElementStorage given() const { return given_; }  ///< the C++ element type of the view
  const std::vector<Index>& shape() const { return shape_; }
  const void* data() const { return data_; }
  Index count() const { return count_; }  ///< elements in the view

 private:
  bool present_ = false;
  DType dtype_ = DType::kF32;
  ElementStorage given_ = ElementStorage::kFloat;
  std::vector<Index> shape_;
  const void* data_ = nullptr;
  Index count_ = 0;
};

// Every field below has an initializer, even `{}`: GCC 12's -Wmissing-field-initializers (in
// -Wextra) counts a field a designated initializer leaves out as missing unless it has one, and
// the structs are meant to be filled that way ({.name = "q", .k = 64, ...}).

/// One weight segment, `/projections/<p>/weight/<name>` (docs/dump-format.md §4.1). Fields left
/// unset are not written: a required one missing is refused as the reader refuses it.
struct WeightSegment {
  std::string name{};
  reference::WeightFormat format = reference::WeightFormat::kBf16;
  std::optional<Index> row_begin{}, row_end{};
  DumpArray values{};  ///< bf16, f32, f16: the weights; int8, e4m3, e5m2: the codes (i8, e4m3, e5m2) [rows, K]
  std::optional<Index> group_size{};  ///< af4 and scaled formats
  std::optional<Index> scale_rows{};  ///< scaled formats (default 1)
  std::optional<reference::Af4Variant> variant{};
  std::optional<reference::Af4Codebook> codebook{};  ///< variant codebook
  std::optional<reference::Af4Packing> packing{};
  std::optional<reference::ZeroPointPacking> zero_point_packing{};  ///< variant zero-point (default u8)
  std::optional<reference::Dequant> dequant{};                      ///< af4 and scaled (default exact)
  std::optional<reference::DequantOp> dequant_op{};                 ///< af4
  DumpArray codes{};           ///< af4: u32 (u32-lsb) or u8 (u8-msb, u8-lsb) [rows, K/c]
  DumpArray scales{};          ///< af4 and scaled: bf16, f16 or f32 [ceil(rows/scale_rows), K/group_size]
  DumpArray biases{};          ///< af4 affine: as scales [rows, K/group_size]
  DumpArray codebook_table{};  ///< af4 codebook custom: f32 [16] (the `codebook` dataset)
  DumpArray zero_points{};     ///< af4 zero-point: u8 or u32 by zero_point_packing [rows, Z]
};

/// One projection call, `/projections/<name>` (docs/dump-format.md §3.1); `op` is "linear".
struct Projection {
  std::string name{};
  std::optional<Index> k{}, n{}, in_stride{}, out_stride{};
  std::string accumulator{};  ///< f32-rn, f32-rz, matrix-unit or u=<x> (required)
  std::optional<DType> output_dtype{};
  std::optional<reference::Epilogue> epilogue{};
  std::optional<reference::ResidualAt> residual_at{};
  std::optional<reference::BiasAt> bias_at{};  ///< "start": the output holds the bias before the kernel adds
  std::optional<reference::OutputRounding> output_rounding{};
  std::optional<std::string> k_walk{};  ///< the §3.4 grammar, e.g. "seq", "lanes:8:halving:fma"
  std::optional<Index> layer{};
  std::optional<std::string> role{}, logits_run{};  ///< role "lm_head" with its run (§3.5)
  std::optional<Index> requests{}, block_rows{}, cap{};
  std::optional<std::string> weights_xxh3{};  ///< 32 lowercase hex digits (§4.5)
  std::optional<reference::XQuantType> x_quant{};
  std::optional<Index> x_quant_group{};
  std::optional<reference::XQuantRounding> x_quant_rounding{};
  DumpArray x{}, x_quantized{}, x_scales{}, x_zero_points{};
  std::vector<WeightSegment> weight{};
  DumpArray bias{}, residual{}, selector{}, commit_counts{};
  DumpArray y_unpacked{}, y_packed{}, y_compact{}, y_before{};
};

/// One generation, `/logits/<name>` (docs/dump-format.md §5.1).
struct LogitsRun {
  std::string name{};
  std::optional<Index> vocab{};
  std::optional<std::string> tie_break{};  ///< only "lowest" is defined
  std::optional<std::string> prompt{};
  DumpArray tokens{}, logits{}, positions{}, prompt_tokens{};
};

/// One state tensor, `/tensors/<name>` (docs/dump-format.md §6.1); the name may hold '/'.
struct StateTensor {
  std::string name{};
  DumpArray values{};                    ///< f32, f16, bf16, e4m3 or e5m2, any rank
  std::optional<std::string> compare{};  ///< bitwise, ulp:<n> or abs:<a>[,rel:<r>]
};

struct BuilderOptions {
  std::string engine{};  ///< required
  std::string build{};   ///< required
  std::string model{};   ///< optional, omitted when empty
  std::string device{};  ///< optional, omitted when empty
  bool overwrite = false;
};

class DumpBuilder {
 public:
  /// Starts a dump at `path` (written under a temporary name until close()). kOutputExists if
  /// the file exists and options.overwrite is false; kInvalidArgument without engine or build.
  static Result<DumpBuilder> create(const std::string& path, const BuilderOptions& options);

  DumpBuilder(DumpBuilder&&) noexcept;
  DumpBuilder& operator=(DumpBuilder&&) noexcept;
  /// Without a successful close(): removes what was written; nothing appears at the path.
  ~DumpBuilder();

  /// Validate, then write. A refusal writes nothing of the member and leaves the builder usable.
  Status add_projection(const Projection& p);
  Status add_logits_run(const LogitsRun& run);
  Status add_tensor(const StateTensor& t);

  /// The ncert_schema_version close() will write for what was added so far, and why (empty for
  /// 1; else the first member or value of version 2, e.g. "/projections/q/x: an f16 x").
  std::int64_t schema_version() const;
  const std::string& version_2_reason() const;

  /// Checks what joins members (an lm_head's run exists and matches its shape), writes the root
  /// with the least version, closes and moves the file to its name. On failure removes it.
  Status close();
  /// Discards everything written: no file appears at the path.
  void abort();

 private:
  struct Impl;
  explicit DumpBuilder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ncert::certify
