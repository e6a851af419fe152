// Opening a dump: every link is visited and every object's storage and type examined before any
// raw data is read; hostile objects become findings that name them.

#include <omp.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "certify/io/detail/dataset_checks.h"
#include "certify/io/detail/file_image.h"
#include "certify/io/detail/reader_impl.h"
#include "certify/io/detail/survey_parts.h"
#include "certify/io/input_file.h"
#include "certify/isolation/activity.h"

namespace ncert::certify::detail {

namespace {

/// A hard link found by listing a group: its name and the address of its object header.
struct HardLink {
  std::string path;
  haddr_t addr = HADDR_UNDEF;
};

/// A group waiting to be listed, `depth` links below the root.
struct Queued {
  std::string path;
  haddr_t addr = HADDR_UNDEF;
  int depth = 0;
};

/// The names objects were first met under: those of the parts merged before (`base`, shared,
/// read only) and this part's own, in the order met (TreePart::objects).
class FirstNames {
 public:
  FirstNames(const std::unordered_map<haddr_t, std::string>& base, TreePart& part) : base_(base), part_(part) {}
  /// The name `addr` was first met under, or nullptr after recording `path` as its first name.
  const std::string* met(haddr_t addr, const std::string& path) {
    if (const auto it = base_.find(addr); it != base_.end()) return &it->second;
    const auto [it, fresh] = own_.emplace(addr, path);
    if (!fresh) return &it->second;
    part_.objects.emplace_back(addr, path);
    return nullptr;
  }

 private:
  const std::unordered_map<haddr_t, std::string>& base_;
  std::unordered_map<haddr_t, std::string> own_;
  TreePart& part_;
};

/// What every part's walk shares: the open file and its limits.
struct Walk {
  DumpReader::Impl* impl = nullptr;
  hid_t file = H5I_INVALID_HID;  ///< the file surveyed: impl's, or the same bytes mapped (FileImage)
  hid_t lapl = H5I_INVALID_HID;
  int max_depth = 0;
  AttributeBudget* attributes = nullptr;  ///< every attribute read charged to it
};

/// One group's listing (H5Literate's callback state).
struct Listing {
  const Walk* walk = nullptr;
  const std::string* group = nullptr;
  TreePart* part = nullptr;
  Index budget = 0;  ///< links the part may visit in all
  std::vector<HardLink> hard;
};

/// The longest path (names of every group above included) an object may have.
constexpr std::size_t kMaxPathBytes = 1024;

std::string child_path(const std::string& group, const char* name) {
  return group == "/" ? "/" + std::string(name) : group + "/" + name;
}

herr_t visit_link(hid_t, const char* name, const H5L_info_t* info, void* data) {
  auto* l = static_cast<Listing*>(data);
  if (++l->part->seen > l->budget) {
    l->part->over_limit = true;
    return 1;  // stop iterating
  }
  const hid_t file = l->walk->file;
  const std::string path = child_path(*l->group, name);
  if (path.size() > kMaxPathBytes) {
    // Every path below it repeats it: a 9.9 MB file's 12,000 children of a group named with
    // 60,000 characters took 3.5 GB and a 720 MB report (a review's). Not entered; refused.
    l->part->findings.push_back({Severity::kError, ErrorCode::kTreeLimit, path.substr(0, 64) + "...",
                                 "a path of " + std::to_string(path.size()) + " bytes, over the " +
                                     std::to_string(kMaxPathBytes) +
                                     " an object's path may have (the format's are a few dozen); refused"});
    return 1;  // stop listing this group
  }
  switch (info->type) {
    case H5L_TYPE_HARD:
      // The link holds its object's address: the object is opened by it, never looked up
      // again by name (24,000 projections: name lookups in /projections were a third of the
      // survey, each one re-reading that group's 24,000-name heap).
      l->hard.push_back({path, info->u.address});
      break;
    case H5L_TYPE_SOFT: {
      std::vector<char> buf(info->u.val_size + 1, '\0');
      H5Lget_val(file, path.c_str(), buf.data(), info->u.val_size, l->walk->lapl);
      l->part->soft.emplace_back(path, std::string(buf.data()));
      break;
    }
    case H5L_TYPE_EXTERNAL: {
      std::vector<char> buf(info->u.val_size + 1, '\0');
      std::string target = "?";
      if (H5Lget_val(file, path.c_str(), buf.data(), info->u.val_size, l->walk->lapl) >= 0) {
        unsigned flags = 0;
        const char* fname = nullptr;
        const char* obj = nullptr;
        if (H5Lunpack_elink_val(buf.data(), info->u.val_size, &flags, &fname, &obj) >= 0) {
          target = std::string(fname ? fname : "?") + ":" + (obj ? obj : "?");
        }
      }
      l->part->findings.push_back({Severity::kError, ErrorCode::kExternalLink, path,
                                   "external link to \"" + target + "\"; refused without opening the target"});
      break;
    }
    default:
      l->part->findings.push_back(
          {Severity::kError, ErrorCode::kLinkRefused, path, "user-defined link of type " + std::to_string(info->type)});
      break;
  }
  return 0;
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

/// Surveys one hard-linked object, open as `obj`: reads its attributes and records a group or
/// an inspected dataset. False when the object was refused.
bool survey_object(const Walk& w, hid_t obj, const HardLink& link, H5I_type_t type, TreePart& part) {
  const std::string& path = link.path;
  auto attrs = read_attributes(obj, w.attributes);
  if (!attrs.ok()) {
    part.findings.push_back({Severity::kError, attrs.status().code(), path, attrs.status().message()});
    return false;
  }
  if (type == H5I_GROUP) {
    part.groups.push_back({path, std::move(*attrs)});
    return true;
  }
  if (type == H5I_DATASET) {
    DatasetInfo info;
    const bool ok = inspect_dataset(obj, path, *attrs, w.impl->file_size, &info, &part.findings);
    if (ok) {
      info.attributes = std::move(*attrs);
      info.object_address = link.addr;
      part.datasets.push_back(std::move(info));
    } else {
      part.attrs.emplace_back(path, std::move(*attrs));
    }
    return ok;
  }
  part.findings.push_back({Severity::kNote, ErrorCode::kOk, path, "named datatype, ignored"});
  part.attrs.emplace_back(path, std::move(*attrs));
  return true;
}

/// Objects this many links below the root are the units the survey splits the tree into, each
/// with the groups below it: /projections/<name>, /logits/<run>, /tensors/<name>.
constexpr int kUnitDepth = 2;

/// Surveys the objects `links` lead to, `depth` links below the root: each object header opened
/// once, by the address its link holds; an object met under a second name (a hard link) refused
/// as aliased, naming the first; a group never entered twice, and queued to be listed. With
/// `units`, objects kUnitDepth links down are handed there unopened instead.
void survey_links(const Walk& w, const std::vector<HardLink>& links, int depth, FirstNames& names, TreePart& part,
                  std::vector<Queued>& queue, std::vector<Queued>* units) {
  const hid_t fid = w.file;
  for (const HardLink& link : links) {
    if (units && depth >= kUnitDepth) {
      units->push_back({link.path, link.addr, depth});
      continue;
    }
    if (const std::string* first = names.met(link.addr, link.path)) {
      part.findings.push_back(
          {Severity::kError, ErrorCode::kObjectAliased, link.path,
           "is the same HDF5 object as " + *first + " (a hard link): every member must be its own object"});
      part.failed.push_back(link.path);
      continue;
    }
    Hdf5Activity activity("reading", link.path + " in " + w.impl->model.file);
    Hid obj = own_object(H5Oopen_by_addr(fid, link.addr));
    if (!obj.valid()) {
      part.findings.push_back({Severity::kError, ErrorCode::kHdf5, link.path,
                               "cannot read the object's header (corrupt object header): " + hdf5_error_text()});
      part.failed.push_back(link.path);
      continue;
    }
    const H5I_type_t type = H5Iget_type(obj.get());
    if (!survey_object(w, obj.get(), link, type, part)) {
      part.failed.push_back(link.path);
      continue;
    }
    if (type != H5I_GROUP) continue;
    if (depth >= w.max_depth) {
      part.findings.push_back({Severity::kError, ErrorCode::kTreeLimit, link.path,
                               "groups nested deeper than " + std::to_string(w.max_depth) +
                                   " levels (a dump needs 4); refused without walking further"});
      continue;
    }
    queue.push_back({link.path, link.addr, depth});
  }
}

/// Lists the groups of `queue`, and those found below them, breadth-first with ncert's own loop
/// (a 10,000-deep chain overflowed the stack inside H5Lvisit), surveying what they link to
/// (survey_links); stops after `budget` links.
void walk_groups(const Walk& w, std::vector<Queued> queue, FirstNames& names, Index budget, TreePart& part,
                 std::vector<Queued>* units) {
  for (std::size_t next = 0; next < queue.size() && !part.over_limit; ++next) {
    const Queued group = queue[next];
    Listing listing{&w, &group.path, &part, budget, {}};
    {
      Hdf5Activity activity("listing", group.path + " in " + w.impl->model.file);
      Hid g = own_object(H5Oopen_by_addr(w.file, group.addr));
      if (!g.valid()) {
        part.findings.push_back(
            {Severity::kError, ErrorCode::kHdf5, group.path, "cannot open the group: " + hdf5_error_text()});
        continue;
      }
      hsize_t idx = 0;
      if (H5Literate(g.get(), H5_INDEX_NAME, H5_ITER_INC, &idx, visit_link, &listing) < 0) {
        part.findings.push_back({Severity::kError, ErrorCode::kHdf5, group.path,
                                 "cannot list the group's links (a corrupt link table): " + hdf5_error_text()});
      }
    }
    survey_links(w, listing.hard, group.depth + 1, names, part, queue, units);
    if (part.over_limit) {
      part.findings.push_back({Severity::kError, ErrorCode::kTreeLimit, group.path,
                               "more than " + std::to_string(w.impl->options.max_objects) +
                                   " links in the file (a whole model's dump has a few thousand); refused"});
    }
  }
}

/// Surveys one unit: its object, then the groups below it.
void walk_unit(const Walk& w, const Queued& unit, FirstNames& names, Index budget, TreePart& part) {
  std::vector<Queued> queue;
  survey_links(w, {HardLink{unit.path, unit.addr}}, unit.depth, names, part, queue, nullptr);
  walk_groups(w, std::move(queue), names, budget, part, nullptr);
}

/// Surveys units[first, last), each on its own: the names met before them are `base` only, and
/// their budget what is left after `spent` links and the units before them in this range. The
/// merge (survey_tree) walks again any unit this could get wrong.
std::vector<TreePart> survey_units(const Walk& w, const std::vector<Queued>& units, std::size_t first, std::size_t last,
                                   const std::unordered_map<haddr_t, std::string>& base, Index spent) {
  std::vector<TreePart> parts;
  for (std::size_t u = first; u < last && spent <= w.impl->options.max_objects; ++u) {
    TreePart& part = parts.emplace_back();
    FirstNames names(base, part);
    walk_unit(w, units[u], names, w.impl->options.max_objects - spent, part);
    spent += part.seen;  // past the limit, every later unit is too
  }
  return parts;
}

/// The number of processes that survey the units: one per unit_per_process units, at most
/// options.survey_processes (0: as many as OpenMP threads).
std::size_t survey_processes(const ReaderOptions& o, std::size_t units) {
  const std::size_t wanted = o.survey_processes > 0 ? static_cast<std::size_t>(o.survey_processes)
                                                    : static_cast<std::size_t>(std::max(1, omp_get_max_threads()));
  const std::size_t per = std::max<std::size_t>(1, o.survey_units_per_process);
  return std::clamp<std::size_t>(units / per, 1, wanted);
}

/// Appends one part to what the survey found.
void take_part(TreePart&& part, DumpModel& m, Surveyed& s, std::vector<Finding>& findings,
               std::vector<std::pair<std::string, std::string>>& soft,
               std::unordered_map<haddr_t, std::string>& names) {
  for (GroupInfo& g : part.groups) m.groups.push_back(std::move(g));
  for (DatasetInfo& d : part.datasets) m.datasets.push_back(std::move(d));
  for (auto& [path, attrs] : part.attrs) s.loose[path] = std::move(attrs);
  for (std::string& f : part.failed) s.failed.insert(std::move(f));
  for (Finding& f : part.findings) findings.push_back(std::move(f));
  for (auto& link : part.soft) soft.push_back(std::move(link));
  for (auto& [addr, path] : part.objects) names.emplace(addr, std::move(path));
}

/// Walks the whole tree: the top kUnitDepth levels here, then every unit below them (on several
/// processes when there are many), merged in the order one process walking them one after
/// another would have met them. A unit surveyed on its own can be wrong in two ways only: it
/// shares an object with an earlier unit (an alias it could not see), or the links before it
/// exhaust the link limit. Either shows in what it hands back (an object met earlier, or more
/// links than were left), and such a unit is walked again here with what the units before it
/// met, exactly as one walk would. So the findings are the same at any process count.
void survey_tree(DumpReader::Impl& impl, hid_t file, hid_t lapl, Surveyed& s, std::vector<Finding>& findings,
                 std::vector<std::pair<std::string, std::string>>& soft, AttributeBudget& attributes) {
  Walk w{&impl, file, lapl, impl.options.max_depth, &attributes};
  const Index max_links = impl.options.max_objects;
  std::unordered_map<haddr_t, std::string> names;
  TreePart top;
  std::vector<Queued> units;
  {
    H5O_info_t root{};
    if (H5Oget_info2(file, &root, H5O_INFO_BASIC) < 0) {
      findings.push_back(
          {Severity::kError, ErrorCode::kHdf5, "/", "cannot read the root group's header: " + hdf5_error_text()});
      return;
    }
    names.emplace(root.addr, "/");
    FirstNames top_names(names, top);
    walk_groups(w, {{"/", root.addr, 0}}, top_names, max_links, top, &units);
  }
  Index spent = top.seen;
  const bool stopped = top.over_limit;
  take_part(std::move(top), impl.model, s, findings, soft, names);
  if (stopped) return;
  SplitPlan plan;
  plan.processes = survey_processes(impl.options, units.size());
  // At least 8 chunks per process, so that one that runs ahead takes more; at most 128 units
  // per chunk (24,000 projections: 188 chunks of about 4 ms each).
  plan.chunk = std::clamp<std::size_t>(units.size() / (plan.processes * 8), 1, 128);
  plan.link_budget = max_links - spent;
  plan.file = impl.model.file;
  std::vector<std::optional<TreePart>> parts = survey_in_processes(
      units.size(), plan,
      [&](std::size_t first, std::size_t last) { return survey_units(w, units, first, last, names, spent); });
  for (std::size_t u = 0; u < units.size(); ++u) {
    TreePart part = parts[u] ? std::move(*parts[u]) : TreePart();
    const bool alias =
        std::any_of(part.objects.begin(), part.objects.end(), [&](const auto& o) { return names.count(o.first) > 0; });
    if (!parts[u] || alias || part.over_limit || part.seen > max_links - spent) {
      part = TreePart();
      FirstNames again(names, part);
      walk_unit(w, units[u], again, max_links - spent, part);
    }
    spent += part.seen;
    const bool over = part.over_limit;
    take_part(std::move(part), impl.model, s, findings, soft, names);
    if (over) return;  // one walk stops at the limit
  }
}

/// The survey's metadata cache: a fixed 256 KiB in place of libhdf5's `default_config`. The
/// survey opens each object header once, so a cache only costs: libhdf5's default (2 MiB growing
/// to 32 MiB, sized by the headers' size on disk, several times smaller than their decoded form)
/// held 1.4 GB and took 23 s on 24,000 1x1 projections (168,000 objects); with 256 KiB, 565 MB
/// and 18 s, before anything else changed.
H5AC_cache_config_t survey_cache(const H5AC_cache_config_t& default_config) {
  H5AC_cache_config_t config = default_config;
  config.set_initial_size = true;
  config.initial_size = config.min_size = config.max_size = std::size_t{256} * 1024;
  config.incr_mode = H5C_incr__off;
  config.flash_incr_mode = H5C_flash_incr__off;
  config.decr_mode = H5C_decr__off;
  return config;
}

/// The descriptor libhdf5 opened `file` with.
Result<int> hdf5_fd(hid_t file, const std::string& path) {
  void* handle = nullptr;
  if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || handle == nullptr) {
    return hdf5_failure(ErrorCode::kIo, path + ": cannot get the file libhdf5 opened");
  }
  return *static_cast<int*>(handle);
}

}  // namespace

Result<std::unique_ptr<DumpReader::Impl>> survey_file(const std::string& path, const ReaderOptions& options) {
  hdf5_init_once();
  // A regular file, opened without blocking, and no HDF5 file that extends far past its
  // end-of-file address (certify/io/input_file.h), before libhdf5 opens it by name.
  NCERT_ASSIGN_OR_RETURN(InputFile input, InputFile::open(path));
  const std::uint64_t file_size = input.size();
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
  H5AC_cache_config_t default_cache{};
  default_cache.version = H5AC__CURR_CACHE_CONFIG_VERSION;
  H5Pget_mdc_config(fapl.get(), &default_cache);
  H5AC_cache_config_t surveying = survey_cache(default_cache);
  H5Pset_mdc_config(fapl.get(), &surveying);
  impl->file = own_file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()));
  if (!impl->file.valid()) {
    const Hdf5Error error = hdf5_error();
    // A superblock v3 whose writer has the file open, or never closed it, carries consistency
    // flags libhdf5 refuses to read past: not corruption (a review's dump read "corrupt or
    // truncated", the cause in --verbose alone).
    if (error.text.find("already open for write") != std::string::npos) {
      return hdf5_failure(ErrorCode::kHdf5,
                          path +
                              ": cannot open: a writer has it open, or did not close it (its superblock's "
                              "consistency flags are set); certify it once the writer has closed it, or "
                              "clear the flags with `h5clear -s` if no writer is left",
                          error);
    }
    return hdf5_failure(ErrorCode::kHdf5, path + ": cannot open (corrupt or truncated)", error);
  }
  // kInputChanged unless libhdf5 opened, by name, the file checked as `input`: the path was
  // replaced in between, and the survey (through a mapping of `input`) and the reads would see
  // two files.
  NCERT_ASSIGN_OR_RETURN(impl->fd, hdf5_fd(impl->file.get(), path));
  NCERT_RETURN_IF_ERROR(input.same_file_as(impl->fd));
  // The survey reads the same bytes from a mapping when it may (detail/file_image.h).
  std::optional<FileImage> image = options.survey_mapped && file_size <= options.memory_limit / 2
                                       ? FileImage::open(input.fd(), file_size)
                                       : std::optional<FileImage>();
  if (image) H5Fset_mdc_config(image->file(), &surveying);
  const hid_t surveyed_file = image ? image->file() : impl->file.get();
  opening.reset();
  Hid lapl = make_safe_lapl();

  DumpModel& m = impl->model;
  Surveyed s;
  std::vector<Finding> findings;
  AttributeBudget attributes = attribute_budget(file_size);
  {
    Hdf5Activity activity("reading the root attributes of", path);
    if (auto root_attrs = read_attributes(surveyed_file, &attributes); root_attrs.ok()) {
      m.root_attributes = std::move(*root_attrs);
    } else {
      findings.push_back({Severity::kError, root_attrs.status().code(), "/", root_attrs.status().message()});
    }
  }
  std::vector<std::pair<std::string, std::string>> soft;
  survey_tree(*impl, surveyed_file, lapl.get(), s, findings, soft, attributes);
  if (image) {
    Hdf5Activity activity("closing the mapping of", path);
    image.reset();
  }
  soft_link_findings(soft, &findings);
  std::sort(m.groups.begin(), m.groups.end(), [](const GroupInfo& a, const GroupInfo& b) { return a.path < b.path; });
  std::sort(m.datasets.begin(), m.datasets.end(),
            [](const DatasetInfo& a, const DatasetInfo& b) { return a.path < b.path; });
  m.findings = std::move(findings);
  check_schema(impl->options, s, m);
  // Data reads look chunk indexes up many times: the default cache from here on.
  H5Fset_mdc_config(impl->file.get(), &default_cache);
  // Stable order for reports: by object path, then as found.
  std::stable_sort(m.findings.begin(), m.findings.end(),
                   [](const Finding& a, const Finding& b) { return a.path < b.path; });
  return impl;
}

}  // namespace ncert::certify::detail
