#include "certify/io/detail/dataset_checks.h"

#include <algorithm>
#include <optional>

#include "certify/io/detail/reader_impl.h"

namespace ncert::certify::detail {

namespace {

/// Whether the dataset's filter pipeline holds deflate (read_chunking names it "deflate(<level>)").
bool deflated(const DatasetInfo& info) {
  return std::any_of(info.filters.begin(), info.filters.end(),
                     [](const std::string& f) { return f.rfind("deflate", 0) == 0; });
}

bool mul_overflows(Index a, Index b, Index* out) { return __builtin_mul_overflow(a, b, out); }

/// Refuses storage that could read through to another file or as fill values: virtual
/// datasets, external raw data, layouts other than contiguous, compact and chunked.
Status refuse_foreign_storage(hid_t dcpl, H5D_layout_t layout) {
  if (layout == H5D_VIRTUAL) {
    size_t count = 0;
    H5Pget_virtual_count(dcpl, &count);
    std::string src = "?";
    if (count > 0) {
      char name[512] = {0};
      if (H5Pget_virtual_filename(dcpl, 0, name, sizeof name) >= 0) src = name;
    }
    return Status(ErrorCode::kVirtualDataset, "virtual dataset with " + std::to_string(count) +
                                                  " source mapping(s), first in \"" + src +
                                                  "\"; refused (a missing source would read as fill values)");
  }
  if (layout != H5D_CONTIGUOUS && layout != H5D_COMPACT && layout != H5D_CHUNKED) {
    return Status(ErrorCode::kLayoutRefused, "storage layout " + std::to_string(layout) + " refused");
  }
  const int external = H5Pget_external_count(dcpl);
  if (external > 0) {
    char name[512] = {0};
    off_t offset = 0;
    hsize_t size = 0;
    H5Pget_external(dcpl, 0, sizeof name, name, &offset, &size);
    return Status(ErrorCode::kExternalStorage,
                  "raw data stored in " + std::to_string(external) + " external file(s), first \"" + name + "\"");
  }
  return Status::ok_status();
}

/// The dataspace: info->shape and info->elements, refusing null spaces and overflowing counts.
Status read_shape(hid_t ds, DatasetInfo* info) {
  Hid space = own_space(H5Dget_space(ds));
  if (!space.valid()) return Status(ErrorCode::kHdf5, "cannot read dataspace");
  const H5S_class_t sclass = H5Sget_simple_extent_type(space.get());
  if (sclass == H5S_NULL) return Status(ErrorCode::kShapeMismatch, "null dataspace (no elements)");
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0 || rank > 32) return Status(ErrorCode::kShapeMismatch, "invalid rank");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  Index elements = 1;
  for (hsize_t d : dims) {
    if (d > static_cast<hsize_t>(INT64_MAX) || mul_overflows(elements, static_cast<Index>(d), &elements)) {
      std::string s = "[";
      for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
      return Status(ErrorCode::kSizeOverflow, "dims " + s + "] overflow a 64-bit element count");
    }
    info->shape.push_back(static_cast<Index>(d));
  }
  info->elements = elements;
  return Status::ok_status();
}

/// The element type (uint16 only as tagged raw bf16 or f16, uint8 tagged as raw e4m3 or e5m2) and
/// the byte count.
Status read_dtype(hid_t ds, const TypedAttrs& attrs, DatasetInfo* info) {
  Hid type = own_type(H5Dget_type(ds));
  const TypeClass tc = classify_type(type.get());
  const auto it = std::find_if(attrs.begin(), attrs.end(), [](const AttributeInfo& a) { return a.name == "dtype"; });
  std::optional<std::string> tag;
  if (it != attrs.end() && it->value.kind == AttrValue::Kind::kString && it->value.strings.size() == 1) {
    tag = it->value.strings[0];
  }
  const bool tag_defined = tc.is_u16 || (tc.allowed && tc.dtype == DType::kU8);  // where dtype means a type
  if (tag_defined && it != attrs.end() && it->value.type_description.starts_with("oversized")) {
    // Read as absent, it was refused as a missing tag; it is there, and too large (§1).
    return Status(ErrorCode::kAttributeInvalid, "attribute dtype <" + it->value.type_description +
                                                    ">: not a dtype tag (\"bf16\", \"f16\", \"e4m3\", \"e5m2\")");
  }
  if (tc.is_u16) {
    if (tag != "bf16" && tag != "f16") {
      return Status(ErrorCode::kDatatypeRefused,
                    "uint16 dataset without the attribute dtype = \"bf16\" or \"f16\" (16-bit integers are "
                    "only accepted as raw bf16 or f16 patterns)" +
                        (tag ? std::string(", found dtype = \"" + *tag + "\"") : std::string()));
    }
    info->dtype = *tag == "bf16" ? DType::kBf16 : DType::kF16;
    info->tagged_raw = true;
  } else if (!tc.allowed) {
    return Status(ErrorCode::kDatatypeRefused, "datatype " + tc.description + " is not allowed");
  } else if (tc.dtype == DType::kU8 && (tag == "e4m3" || tag == "e5m2")) {
    // uint8 holds FP8 patterns only when tagged so; other attributes named dtype on a uint8
    // dataset were ignored by version 1 and still are.
    info->dtype = *tag == "e4m3" ? DType::kE4m3 : DType::kE5m2;
    info->tagged_raw = true;
  } else {
    info->dtype = tc.dtype;
  }
  // A native 16- or 8-bit float or int8 dataset tagged as another type of its size holds bits
  // the tag says are that type: bf16 written into a native float16 dataset (a plausible exporter
  // mistake) was read as f16 without a word. Refused there only: any other tag stays ignored, as
  // version 1 read it (an f32 tensor tagged "bf16" by an exporter that upcast it loads as ever).
  const bool reinterpretable =
      !info->tagged_raw && (info->dtype == DType::kF16 || info->dtype == DType::kBf16 || info->dtype == DType::kI8);
  if (tag && reinterpretable) {
    if (const std::optional<DType> named = parse_dtype(*tag);
        named && *named != info->dtype && dtype_size(*named) == dtype_size(info->dtype)) {
      return Status(ErrorCode::kDatatypeRefused, "stored as " + std::string(dtype_name(info->dtype)) +
                                                     " but its attribute dtype = \"" + *tag +
                                                     "\" names another type: write the one it holds");
    }
  }
  if (mul_overflows(info->elements, dtype_size(info->dtype), &info->bytes)) {
    return Status(ErrorCode::kSizeOverflow, "shape " + shape_string(info->shape) + " overflows a 64-bit byte count");
  }
  return Status::ok_status();
}

/// Chunk shape and filter pipeline of a chunked dataset: deflate, shuffle and fletcher32 only.
Status read_chunking(hid_t dcpl, DatasetInfo* info) {
  const int rank = static_cast<int>(info->shape.size());
  std::vector<hsize_t> chunk(static_cast<std::size_t>(std::max(rank, 1)));
  H5Pget_chunk(dcpl, rank, chunk.data());
  for (int i = 0; i < rank; ++i) info->chunk.push_back(static_cast<Index>(chunk[i]));
  const int nfilters = H5Pget_nfilters(dcpl);
  for (int i = 0; i < nfilters; ++i) {
    unsigned flags = 0;
    size_t nelmts = 8;
    unsigned cd[8] = {0};
    char name[256] = {0};
    unsigned config = 0;
    const H5Z_filter_t id =
        H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &nelmts, cd, sizeof name, name, &config);
    if (id == H5Z_FILTER_DEFLATE) {
      // Twice deflated, a GiB is a few kB and passes the expansion bound below, which counts one
      // layer (a review's 37 KB file of 1 GiB read 3.1 GB, then "corrupt").
      if (deflated(*info)) {
        return Status(ErrorCode::kFilterRefused, "deflate again at pipeline position " + std::to_string(i) +
                                                     "; a dataset is deflated once at most");
      }
      info->filters.push_back("deflate(" + std::to_string(nelmts > 0 ? cd[0] : 0) + ")");
    } else if (id == H5Z_FILTER_SHUFFLE) {
      info->filters.push_back("shuffle");
    } else if (id == H5Z_FILTER_FLETCHER32) {
      info->filters.push_back("fletcher32");
    } else {
      return Status(ErrorCode::kFilterRefused, "filter id " + std::to_string(id) + " (\"" + name +
                                                   "\") at pipeline position " + std::to_string(i) +
                                                   "; only deflate, shuffle and fletcher32 are allowed");
    }
  }
  return Status::ok_status();
}

/// A chunk grid of more than kMaxSmallChunks chunks under kSmallChunkBytes each is a bomb
/// (dump_reader.h says why), refused from the declared shape and chunk dims alone: nothing has
/// touched the chunk index yet (H5Dget_storage_size, below, walks all of it).
Status check_chunk_count(const DatasetInfo& info) {
  const std::uint64_t chunks = chunks_touched(info, 0, info.shape.empty() ? 0 : info.shape[0]);
  const std::uint64_t one_chunk = chunk_bytes(info);
  if (chunks > kMaxSmallChunks && one_chunk < kSmallChunkBytes) {
    return Status(ErrorCode::kChunkBomb,
                  "declares " + shape_string(info.shape) + " in chunks of " + shape_string(info.chunk) + " (" +
                      std::to_string(one_chunk) + " bytes each): " + std::to_string(chunks) + " chunks, over the " +
                      std::to_string(kMaxSmallChunks) + " allowed under " + std::to_string(kSmallChunkBytes) +
                      " bytes each: its chunk index outweighs its data; refused before reading; rewrite it with "
                      "chunks of whole rows");
  }
  // HDF5 reads (and inflates) a whole chunk for any element of it. A chunk far wider than the
  // dataset passes the storage bound, which counts declared bytes: a 1.7 MB file's [6, 256]
  // logits in deflated chunks of [6, 2^26] read 1.5 GiB per chunk and peaked at 1.6 GB in every
  // command, whatever --max-memory said (a review's). A chunk may exceed the extent (an
  // extendible dataset's rows written so far), up to kMaxOversizedChunkBytes.
  const std::uint64_t declared = static_cast<std::uint64_t>(std::max<Index>(info.bytes, 0));
  if (one_chunk > declared && one_chunk > kMaxOversizedChunkBytes) {
    return Status(ErrorCode::kChunkBomb,
                  "declares " + shape_string(info.shape) + " (" + std::to_string(declared) + " bytes) in chunks of " +
                      shape_string(info.chunk) + " (" + std::to_string(one_chunk) +
                      " bytes each): HDF5 reads and inflates a whole chunk for any element of it, and a chunk larger "
                      "than the dataset may be at most " +
                      std::to_string(kMaxOversizedChunkBytes) + " bytes; refused before reading");
  }
  return Status::ok_status();
}

/// What the file stores for a dataset bounds what it can hold: unfiltered storage holds its
/// bytes one for one, deflate expands at most ~1032:1 (zlib's limit). A declared size beyond
/// that is unallocated space that would read as fill values (or be hashed, decompressed and
/// compared as such): a bomb, refused before anything reads it. One chunk of slack covers edge
/// chunks. Contiguous raw data must also lie inside the file.
Status check_storage_bounds(hid_t ds, H5D_layout_t layout, std::uint64_t file_size, DatasetInfo* info) {
  if (info->bytes > 0 && layout == H5D_COMPACT) {
    // Compact raw data lives in the layout message, whose size field HDF5 trusts: one declaring
    // fewer bytes than the shape needs was read past its buffer, and heap memory came back as
    // logits and tokens, different on every run (a review's). The sizes must agree exactly.
    const std::uint64_t stored = H5Dget_storage_size(ds);
    if (stored != static_cast<std::uint64_t>(info->bytes)) {
      return Status(ErrorCode::kHdf5, "compact storage of " + std::to_string(stored) + " bytes where its shape " +
                                          shape_string(info->shape) + " needs " + std::to_string(info->bytes) +
                                          ": a corrupt layout message; refused before reading");
    }
  }
  if (info->bytes > 0 && layout != H5D_COMPACT) {
    const std::uint64_t stored = H5Dget_storage_size(ds);
    const bool inflates = deflated(*info);
    const std::uint64_t expand = inflates ? 1100 : 1;
    const std::uint64_t expanded = stored > UINT64_MAX / expand ? UINT64_MAX : stored * expand;
    const std::uint64_t slack = layout == H5D_CHUNKED ? chunk_bytes(*info) : 0;
    const std::uint64_t can_hold = expanded > UINT64_MAX - slack ? UINT64_MAX : expanded + slack;
    if (static_cast<std::uint64_t>(info->bytes) > can_hold) {
      return Status(ErrorCode::kStorageBomb, "declares " + shape_string(info->shape) + " = " +
                                                 std::to_string(info->bytes) + " bytes but the file stores " +
                                                 std::to_string(stored) + " bytes for it" +
                                                 (inflates ? " (deflate expands at most ~1032x)" : "") +
                                                 ": unwritten space would read as fill values; refused");
    }
    // The slack above lets one chunk go unstored, and a chunk as large as the dataset lets it all
    // (a review's 8.5 KB file, nothing written, certified as zeros): every chunk must be stored.
    if (layout == H5D_CHUNKED) {
      hsize_t written = 0;
      const std::uint64_t chunks = chunks_touched(*info, 0, info->shape.empty() ? 0 : info->shape[0]);
      const Hid space = own_space(H5Dget_space(ds));
      if (!space.valid() || H5Dget_num_chunks(ds, space.get(), &written) < 0) {
        return Status(ErrorCode::kHdf5, "cannot count the chunks the file stores");
      }
      if (written < chunks) {
        return Status(ErrorCode::kStorageBomb, "declares " + shape_string(info->shape) + " in " +
                                                   std::to_string(chunks) + " chunks of " + shape_string(info->chunk) +
                                                   " but the file stores " + std::to_string(written) +
                                                   " of them: unwritten chunks would read as fill values; refused");
      }
    }
  }
  if (layout == H5D_CONTIGUOUS) {
    const haddr_t addr = H5Dget_offset(ds);
    if (addr != HADDR_UNDEF) {
      if (addr > file_size || static_cast<std::uint64_t>(info->bytes) > file_size - addr) {
        return Status(ErrorCode::kHdf5, "raw data at offset " + std::to_string(addr) + " + " +
                                            std::to_string(info->bytes) + " bytes extends past the end of the file (" +
                                            std::to_string(file_size) + " bytes): truncated?");
      }
      info->file_offset = addr;
    }
  }
  return Status::ok_status();
}

}  // namespace

bool inspect_dataset(hid_t ds, const std::string& path, const TypedAttrs& attrs, std::uint64_t file_size,
                     DatasetInfo* info, std::vector<Finding>* findings) {
  auto refused = [&](const Status& s) {
    findings->push_back({Severity::kError, s.code(), path, s.message()});
    return false;
  };
  info->path = path;
  Hid dcpl = own_plist(H5Dget_create_plist(ds));
  if (!dcpl.valid()) return refused(Status(ErrorCode::kHdf5, "cannot read creation properties"));
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (Status s = refuse_foreign_storage(dcpl.get(), layout); !s.ok()) return refused(s);
  if (Status s = read_shape(ds, info); !s.ok()) return refused(s);
  if (Status s = read_dtype(ds, attrs, info); !s.ok()) return refused(s);
  if (layout == H5D_CHUNKED) {
    info->layout = Layout::kChunked;
    if (Status s = read_chunking(dcpl.get(), info); !s.ok()) return refused(s);
    if (Status s = check_chunk_count(*info); !s.ok()) return refused(s);
  } else {
    info->layout = layout == H5D_COMPACT ? Layout::kCompact : Layout::kContiguous;
  }
  if (Status s = check_storage_bounds(ds, layout, file_size, info); !s.ok()) return refused(s);
  return true;
}

}  // namespace ncert::certify::detail
