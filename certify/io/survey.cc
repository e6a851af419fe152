// Opening a dump: every link is visited and every object's storage and type examined before any
// raw data is read; hostile objects become findings that name them.

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "certify/io/detail/reader_impl.h"
#include "certify/io/input_file.h"
#include "certify/isolation/activity.h"

namespace ncert::certify::detail {

namespace {

bool mul_overflows(Index a, Index b, Index* out) { return __builtin_mul_overflow(a, b, out); }

/// A hard link found by the walk, with what its object is.
struct HardLink {
  std::string path;
  H5O_type_t type = H5O_TYPE_UNKNOWN;
  haddr_t addr = HADDR_UNDEF;
};

struct LinkWalk {
  hid_t file = H5I_INVALID_HID;
  hid_t lapl = H5I_INVALID_HID;
  const std::string* file_name = nullptr;
  std::string group;  ///< the group being iterated ("/" or "/a/b")
  Index seen = 0;     ///< links visited so far
  Index max_objects = 0;
  bool over_limit = false;
  std::vector<HardLink> hard;
  std::vector<std::pair<std::string, std::string>> soft;  // path, target
  std::vector<Finding> findings;
};

std::string child_path(const std::string& group, const char* name) {
  return group == "/" ? "/" + std::string(name) : group + "/" + name;
}

herr_t visit_link(hid_t, const char* name, const H5L_info_t* info, void* data) {
  auto* w = static_cast<LinkWalk*>(data);
  if (++w->seen > w->max_objects) {
    w->over_limit = true;
    return 1;  // stop iterating
  }
  const std::string path = child_path(w->group, name);
  switch (info->type) {
    case H5L_TYPE_HARD: {
      HardLink h;
      h.path = path;
      w->hard.push_back(std::move(h));
      break;
    }
    case H5L_TYPE_SOFT: {
      std::vector<char> buf(info->u.val_size + 1, '\0');
      H5Lget_val(w->file, path.c_str(), buf.data(), info->u.val_size, w->lapl);
      w->soft.emplace_back(path, std::string(buf.data()));
      break;
    }
    case H5L_TYPE_EXTERNAL: {
      std::vector<char> buf(info->u.val_size + 1, '\0');
      std::string target = "?";
      if (H5Lget_val(w->file, path.c_str(), buf.data(), info->u.val_size, w->lapl) >= 0) {
        unsigned flags = 0;
        const char* fname = nullptr;
        const char* obj = nullptr;
        if (H5Lunpack_elink_val(buf.data(), info->u.val_size, &flags, &fname, &obj) >= 0) {
          target = std::string(fname ? fname : "?") + ":" + (obj ? obj : "?");
        }
      }
      w->findings.push_back({Severity::kError, ErrorCode::kExternalLink, path,
                             "external link to \"" + target + "\"; refused without opening the target"});
      break;
    }
    default:
      w->findings.push_back(
          {Severity::kError, ErrorCode::kLinkRefused, path, "user-defined link of type " + std::to_string(info->type)});
      break;
  }
  return 0;
}

/// Walks the group tree breadth-first with ncert's own loop: depth and object count bounded
/// (a 10,000-deep chain overflowed the stack inside H5Lvisit), every object's header read once
/// (type and address), groups reachable under two names never entered twice.
void walk_tree(LinkWalk& w, int max_depth) {
  std::vector<std::pair<std::string, int>> queue = {{"/", 0}};
  std::set<haddr_t> entered;  // groups already queued: a second name is reported as an alias
  {
    H5O_info_t root{};
    if (H5Oget_info_by_name2(w.file, "/", &root, H5O_INFO_BASIC, w.lapl) >= 0) entered.insert(root.addr);
  }
  for (std::size_t next = 0; next < queue.size() && !w.over_limit; ++next) {
    const auto [group, depth] = queue[next];
    const std::size_t first_new = w.hard.size();
    Hid g;
    {
      Hdf5Activity activity("listing", group + " in " + *w.file_name);
      g = own_group(H5Gopen2(w.file, group.c_str(), H5P_DEFAULT));
      if (!g.valid()) {
        w.findings.push_back(
            {Severity::kError, ErrorCode::kHdf5, group, "cannot open the group: " + hdf5_error_text()});
        continue;
      }
      w.group = group;
      hsize_t idx = 0;
      if (H5Literate(g.get(), H5_INDEX_NAME, H5_ITER_INC, &idx, visit_link, &w) < 0) {
        w.findings.push_back({Severity::kError, ErrorCode::kHdf5, group,
                              "cannot list the group's links (a corrupt link table): " + hdf5_error_text()});
      }
    }
    for (std::size_t i = first_new; i < w.hard.size(); ++i) {
      HardLink& h = w.hard[i];
      Hdf5Activity activity("reading the object header of", h.path + " in " + *w.file_name);
      H5O_info_t oi{};
      // Looked up in the open group, not from the root by full path: one B-tree search instead
      // of one per level (24,000 projections: the walk's lookups were a quarter of the survey).
      const char* name = h.path.c_str() + h.path.rfind('/') + 1;  // a link name holds no '/'
      if (H5Oget_info_by_name2(g.get(), name, &oi, H5O_INFO_BASIC, w.lapl) < 0) {
        hdf5_error_text();  // cleared; the object is reported when it is read below
        continue;
      }
      h.type = oi.type;
      h.addr = oi.addr;
      if (h.type != H5O_TYPE_GROUP || !entered.insert(h.addr).second) continue;
      if (depth + 1 >= max_depth) {
        w.findings.push_back({Severity::kError, ErrorCode::kTreeLimit, h.path,
                              "groups nested deeper than " + std::to_string(max_depth) +
                                  " levels (a dump needs 4); refused without walking further"});
        continue;
      }
      queue.emplace_back(h.path, depth + 1);
    }
  }
  if (w.over_limit) {
    w.findings.push_back({Severity::kError, ErrorCode::kTreeLimit, w.group,
                          "more than " + std::to_string(w.max_objects) +
                              " links in the file (a whole model's dump has a few thousand); refused"});
  }
}

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
  const auto it = std::find_if(attrs.begin(), attrs.end(), [](const auto& a) { return a.first == "dtype"; });
  std::optional<std::string> tag;
  if (it != attrs.end() && it->second.kind == AttrValue::Kind::kString && it->second.strings.size() == 1) {
    tag = it->second.strings[0];
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
  return Status::ok_status();
}

/// What the file stores for a dataset bounds what it can hold: unfiltered storage holds its
/// bytes one for one, deflate expands at most ~1032:1 (zlib's limit). A declared size beyond
/// that is unallocated space that would read as fill values (or be hashed, decompressed and
/// compared as such): a bomb, refused before anything reads it. One chunk of slack covers edge
/// chunks. Contiguous raw data must also lie inside the file.
Status check_storage_bounds(hid_t ds, H5D_layout_t layout, std::uint64_t file_size, DatasetInfo* info) {
  if (info->bytes > 0 && layout != H5D_COMPACT) {
    const std::uint64_t stored = H5Dget_storage_size(ds);
    const bool deflated = std::find_if(info->filters.begin(), info->filters.end(), [](const std::string& f) {
                            return f.rfind("deflate", 0) == 0;
                          }) != info->filters.end();
    const std::uint64_t expand = deflated ? 1100 : 1;
    const std::uint64_t expanded = stored > UINT64_MAX / expand ? UINT64_MAX : stored * expand;
    const std::uint64_t slack = layout == H5D_CHUNKED ? chunk_bytes(*info) : 0;
    const std::uint64_t can_hold = expanded > UINT64_MAX - slack ? UINT64_MAX : expanded + slack;
    if (static_cast<std::uint64_t>(info->bytes) > can_hold) {
      return Status(ErrorCode::kStorageBomb, "declares " + shape_string(info->shape) + " = " +
                                                 std::to_string(info->bytes) + " bytes but the file stores " +
                                                 std::to_string(stored) + " bytes for it" +
                                                 (deflated ? " (deflate expands at most ~1032x)" : "") +
                                                 ": unwritten space would read as fill values; refused");
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

/// Validates one dataset's storage and type; fills `info` and appends findings. Storage comes
/// first: a virtual dataset must be refused before anything could read through it.
bool inspect_dataset(hid_t ds, const std::string& path, const TypedAttrs& attrs, std::uint64_t file_size,
                     DatasetInfo* info, std::vector<Finding>* findings) {
  auto refused = [&](const Status& s) {
    findings->push_back({Severity::kError, s.code(), path, s.message()});
    return false;
  };
  info->path = path;
  for (const auto& [name, v] : attrs) info->attributes.push_back({name, v});
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

/// Soft links: refused inside the dump tree (they can make two checked objects share bytes),
/// noted and ignored outside it.
void soft_link_findings(const std::vector<std::pair<std::string, std::string>>& soft, std::vector<Finding>* findings) {
  for (const auto& [spath, target] : soft) {
    const bool in_tree =
        spath.rfind("/projections", 0) == 0 || spath.rfind("/logits", 0) == 0 || spath.rfind("/tensors", 0) == 0;
    if (in_tree) {
      findings->push_back({Severity::kError, ErrorCode::kLinkRefused, spath,
                           "soft link to \"" + target +
                               "\" inside the dump tree; only hard links are accepted (a soft "
                               "link can make two checked objects share bytes)"});
    } else {
      findings->push_back(
          {Severity::kNote, ErrorCode::kOk, spath, "soft link to \"" + target + "\" outside the dump tree, ignored"});
    }
  }
}

/// Opens every hard-linked object once: refuses an object reached under two names (two hard
/// links would let an identity check compare a dataset with itself), reads its attributes, and
/// records groups and inspected datasets in the model.
void survey_objects(DumpReader::Impl& impl, const std::vector<HardLink>& hard, Surveyed& s,
                    std::vector<Finding>& findings) {
  DumpModel& m = impl.model;
  std::set<std::string>& groups = s.groups;
  std::set<std::string>& failed = s.failed;
  std::map<haddr_t, std::string> first_name;
  for (const HardLink& link : hard) {
    const std::string& hp = link.path;
    Hdf5Activity activity("reading", hp + " in " + impl.model.file);
    if (link.type == H5O_TYPE_UNKNOWN) {
      findings.push_back(
          {Severity::kError, ErrorCode::kHdf5, hp, "cannot read the object's header (corrupt object header)"});
      failed.insert(hp);
      continue;
    }
    if (const auto [it, fresh] = first_name.emplace(link.addr, hp); !fresh) {
      findings.push_back(
          {Severity::kError, ErrorCode::kObjectAliased, hp,
           "is the same HDF5 object as " + it->second + " (a hard link): every member must be its own object"});
      failed.insert(hp);
      continue;
    }
    // By the address the walk read from its link: no path to resolve again from the root.
    Hid obj = own_object(H5Oopen_by_addr(impl.file.get(), link.addr));
    if (!obj.valid()) {
      findings.push_back({Severity::kError, ErrorCode::kHdf5, hp, "cannot open object: " + hdf5_error_text()});
      failed.insert(hp);
      continue;
    }
    auto obj_attrs = read_attributes(obj.get());
    if (!obj_attrs.ok()) {
      findings.push_back({Severity::kError, obj_attrs.status().code(), hp, obj_attrs.status().message()});
      failed.insert(hp);
      continue;
    }
    s.attrs[hp] = *obj_attrs;
    if (link.type == H5O_TYPE_GROUP) {
      groups.insert(hp);
      GroupInfo g;
      g.path = hp;
      for (const auto& [n, v] : *obj_attrs) g.attributes.push_back({n, v});
      m.groups.push_back(std::move(g));
    } else if (link.type == H5O_TYPE_DATASET) {
      DatasetInfo info;
      if (inspect_dataset(obj.get(), hp, *obj_attrs, impl.file_size, &info, &findings)) {
        m.datasets.push_back(std::move(info));
      } else {
        failed.insert(hp);
      }
    } else {
      findings.push_back({Severity::kNote, ErrorCode::kOk, hp, "named datatype, ignored"});
    }
  }
}

}  // namespace

Result<std::unique_ptr<DumpReader::Impl>> survey_file(const std::string& path, const ReaderOptions& options) {
  hdf5_init_once();
  // A regular file, opened without blocking, and no HDF5 file that extends far past its
  // end-of-file address (certify/io/input_file.h), before libhdf5 opens it by name.
  std::uint64_t file_size = 0;
  {
    NCERT_ASSIGN_OR_RETURN(InputFile input, InputFile::open(path));
    file_size = input.size();
  }
  std::optional<Hdf5Activity> opening;
  opening.emplace("opening", path);
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 <= 0) {
    hdf5_error_text();  // clear
    return Status(ErrorCode::kNotHdf5, path + ": not an HDF5 file (no HDF5 superblock signature)");
  }
  auto impl = std::make_unique<DumpReader::Impl>();
  impl->options = options;
  impl->file_size = file_size;
  impl->model.file = path;
  Hid fapl = own_plist(H5Pcreate(H5P_FILE_ACCESS));
  // Read-only certification never needs the lock, and locking fails on read-only media.
  H5Pset_file_locking(fapl.get(), false, true);
  impl->file = own_file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()));
  if (!impl->file.valid()) {
    return hdf5_failure(ErrorCode::kHdf5, path + ": cannot open (corrupt or truncated)");
  }
  opening.reset();
  Hid lapl = make_safe_lapl();
  impl->dapl = own_plist(H5Pcreate(H5P_DATASET_ACCESS));
  H5Pset_elink_cb(
      impl->dapl.get(),
      [](const char*, const char*, const char*, const char*, unsigned*, hid_t, void*) -> herr_t { return -1; },
      nullptr);

  LinkWalk walk;
  walk.file = impl->file.get();
  walk.lapl = lapl.get();
  walk.file_name = &impl->model.file;
  walk.max_objects = options.max_objects;
  walk_tree(walk, options.max_depth);
  DumpModel& m = impl->model;
  Surveyed s;
  {
    Hdf5Activity activity("reading the root attributes of", path);
    if (auto root_attrs = read_attributes(impl->file.get()); root_attrs.ok()) {
      s.attrs["/"] = *root_attrs;
      for (const auto& [n, v] : *root_attrs) m.root_attributes.push_back({n, v});
    } else {
      walk.findings.push_back({Severity::kError, root_attrs.status().code(), "/", root_attrs.status().message()});
    }
  }

  std::sort(walk.hard.begin(), walk.hard.end(), [](const HardLink& a, const HardLink& b) { return a.path < b.path; });
  std::vector<Finding> findings = std::move(walk.findings);
  soft_link_findings(walk.soft, &findings);
  survey_objects(*impl, walk.hard, s, findings);
  std::sort(m.datasets.begin(), m.datasets.end(),
            [](const DatasetInfo& a, const DatasetInfo& b) { return a.path < b.path; });
  m.findings = std::move(findings);
  check_schema(impl->options, s, m);
  // Stable order for reports: by object path, then as found.
  std::stable_sort(m.findings.begin(), m.findings.end(),
                   [](const Finding& a, const Finding& b) { return a.path < b.path; });
  return impl;
}

}  // namespace ncert::certify::detail
