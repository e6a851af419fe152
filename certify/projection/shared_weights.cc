#include "certify/projection/shared_weights.h"

#include <chrono>
#include <cstring>
#include <string_view>

#include "certify/io/hash.h"
#include "reference/af4.h"

namespace ncert::certify {

namespace {

/// The byte stream of docs/dump-format.md §4.5, hashed as it is produced.
class WeightsHasher {
 public:
  // Lines are built by append: GCC 12 warns (-Wrestrict, a false positive) on some chains of
  // std::string operator+.
  WeightsHasher(Index k, Index n) {
    text("ncert-weights-v1\n");
    attribute("k", std::to_string(k));
    attribute("n", std::to_string(n));
  }
  void text(std::string_view s) { stream_.update(s.data(), s.size()); }
  void attribute(std::string_view name, std::string_view value) {
    std::string line;
    line.append(name).append("=").append(value).append("\n");
    text(line);
  }
  /// One dataset member: "<member> <dtype> <dims...>\n", then its raw bytes.
  void member(std::string_view name, const DatasetInfo& d, const Bytes& bytes) {
    std::string line;
    line.append(name).append(" ").append(dtype_name(d.dtype));
    for (Index e : d.shape) line.append(" ").append(std::to_string(e));
    line.append("\n");
    text(line);
    stream_.update(bytes.data(), bytes.size());
  }
  std::string hex() const { return stream_.hex(); }

 private:
  Xxh3Stream stream_;
};

}  // namespace

Result<std::shared_ptr<const LoadedWeights>> load_weights(const DumpReader& reader, const ProjectionInfo& info) {
  const auto t0 = std::chrono::steady_clock::now();
  auto W = std::make_shared<LoadedWeights>();
  // Pointers into the blobs must not move: at most 5 per segment.
  W->blobs.reserve(info.segments.size() * 5);
  WeightsHasher hash(info.k, info.n);
  auto read = [&](const SegmentInfo& s, const char* name) -> Result<const std::uint8_t*> {
    const std::string path = s.path + "/" + name;
    const DatasetInfo* d = reader.model().dataset(path);
    if (!d) return Status(ErrorCode::kMissingMember, reader.model().file + ": " + path + " is not a dataset");
    NCERT_ASSIGN_OR_RETURN(auto bytes, reader.read_bytes(path));
    hash.member(name, *d, bytes);
    W->bytes += bytes.size();
    W->blobs.push_back(std::move(bytes));
    return W->blobs.back().data();
  };
  auto cols = [&](const SegmentInfo& s, const char* name) -> Index {
    const DatasetInfo* d = reader.model().dataset(s.path + "/" + name);
    return d && d->shape.size() > 1 ? d->shape[1] : 0;
  };
  for (const SegmentInfo& s : info.segments) {
    std::string line = "segment ";
    line.append(std::to_string(s.name.size())).append(" ").append(s.name).append("\n");
    hash.text(line);
    hash.attribute("format", reference::weight_format_name(s.format));
    hash.attribute("row_begin", std::to_string(s.row_begin));
    hash.attribute("row_end", std::to_string(s.row_end));
    reference::WeightSegment seg;
    seg.name = s.name;
    seg.format = s.format;
    seg.row_begin = s.row_begin;
    seg.row_end = s.row_end;
    packing::SegmentGeometry g;
    g.name = s.name;
    g.format = s.format;
    g.row_begin = s.row_begin;
    g.row_end = s.row_end;
    if (reference::is_scaled_format(s.format)) {
      // docs/dump-format.md §4.5: the scale grid and the dequantization, then the datasets.
      reference::ScaledView& v = seg.scaled;
      v = s.scaled;
      hash.attribute("group_size", std::to_string(v.group_size));
      hash.attribute("scale_rows", std::to_string(v.scale_rows));
      hash.attribute("dequant", reference::dequant_name(v.dequant));
      g.values_cols = cols(s, "values");
      g.scales_cols = cols(s, "scales");
      const DatasetInfo* sd = reader.model().dataset(s.path + "/scales");
      g.scales_rows = sd && !sd->shape.empty() ? sd->shape[0] : 0;
      g.scaled = v;
      NCERT_ASSIGN_OR_RETURN(v.values, read(s, "values"));
      NCERT_ASSIGN_OR_RETURN(v.scales, read(s, "scales"));
      v.rows = s.row_end - s.row_begin;
      v.k = info.k;
    } else if (s.format != reference::WeightFormat::kAf4) {
      g.values_cols = cols(s, "values");
      NCERT_ASSIGN_OR_RETURN(seg.values, read(s, "values"));
    } else {
      const reference::Af4Layout& L = s.af4;
      hash.attribute("group_size", std::to_string(L.group_size));
      hash.attribute("variant", reference::af4_variant_name(L.variant));
      if (L.variant == reference::Af4Variant::kCodebook) {
        hash.attribute("codebook", reference::af4_codebook_name(L.codebook));
      }
      hash.attribute("packing", reference::af4_packing_name(L.packing));
      if (L.variant == reference::Af4Variant::kZeroPoint) {
        hash.attribute("zero_point_packing", reference::zero_point_packing_name(L.zero_point_packing));
      }
      hash.attribute("dequant", reference::dequant_name(L.dequant));
      hash.attribute("dequant_op", reference::dequant_op_name(L.dequant_op));
      seg.af4.layout = L;
      g.codes_cols = cols(s, "codes");
      g.scales_cols = cols(s, "scales");
      g.biases_cols = cols(s, "biases");
      NCERT_ASSIGN_OR_RETURN(seg.af4.codes, read(s, "codes"));
      NCERT_ASSIGN_OR_RETURN(seg.af4.scales, read(s, "scales"));
      if (L.variant == reference::Af4Variant::kAffine) {
        NCERT_ASSIGN_OR_RETURN(seg.af4.biases, read(s, "biases"));
      }
      // The schema holds zero_points to the scales' columns; only where those are K/group_size
      // (guard 309, which the geometry check runs later) do they hold K/group_size groups a row.
      // Unpacked on another count, a group_size or k attribute that disagrees with the stored
      // arrays read past the buffer (a crash found by tools/fuzz/values.py); such a projection
      // fails geometry instead, and no check reads its weights. The stored bytes are read (and
      // hashed, for weights_xxh3) either way.
      const bool groups_match =
          L.group_size >= 1 && info.k % L.group_size == 0 && g.scales_cols == info.k / L.group_size;
      if (L.variant == reference::Af4Variant::kZeroPoint) {
        NCERT_ASSIGN_OR_RETURN(const std::uint8_t* stored, read(s, "zero_points"));
        if (groups_match) {
          const Index rows = s.row_end - s.row_begin, groups = info.k / L.group_size;
          Bytes unpacked(static_cast<std::size_t>(rows * groups));
          NCERT_RETURN_IF_ERROR(reference::unpack_zero_points(L.zero_point_packing, stored, rows, groups,
                                                              reader.model().file + ": " + s.path + "/zero_points",
                                                              unpacked.mutable_data()));
          W->blobs.push_back(std::move(unpacked));
          seg.af4.zero_points = W->blobs.back().data();
        }
      }
      if (L.variant == reference::Af4Variant::kCodebook && L.codebook == reference::Af4Codebook::kCustom) {
        NCERT_ASSIGN_OR_RETURN(const std::uint8_t* table, read(s, "codebook"));
        std::memcpy(seg.af4.layout.table.data(), table, 16 * sizeof(float));
      }
      seg.af4.rows = s.row_end - s.row_begin;
      seg.af4.k = info.k;
    }
    g.af4 = seg.af4.layout;
    W->segments.push_back(seg);
    W->geometry.push_back(g);
  }
  W->xxh3 = hash.hex();
  W->read_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::shared_ptr<const LoadedWeights>(std::move(W));
}

std::uint64_t weight_bytes(const DumpModel& model, const ProjectionInfo& info) {
  std::uint64_t total = 0;
  for (const SegmentInfo& s : info.segments) {
    for (const DatasetInfo& d : model.datasets_under(s.path + "/")) {
      if (d.bytes > 0) total += static_cast<std::uint64_t>(d.bytes);
    }
  }
  return total;
}

std::shared_ptr<const LoadedWeights> WeightsCache::find(const std::string& key) const {
  auto it = by_hash_.find(key);
  return it == by_hash_.end() ? nullptr : it->second;
}

void WeightsCache::add(const std::string& key, std::shared_ptr<const LoadedWeights> weights) {
  by_hash_.emplace(key, std::move(weights));
}

WeightsCache::WeightsCache() = default;
WeightsCache::~WeightsCache() = default;

Result<const WeightsDump*> WeightsCache::weights_dump(const std::string& path, const ReaderOptions& options) {
  auto it = dumps_.find(path);
  if (it != dumps_.end()) return it->second.get();
  NCERT_ASSIGN_OR_RETURN(WeightsDump dump, WeightsDump::open(path, options));
  auto owned = std::make_unique<WeightsDump>(std::move(dump));
  const WeightsDump* out = owned.get();
  dumps_.emplace(path, std::move(owned));
  return out;
}

Result<WeightsDump> WeightsDump::open(const std::string& path, const ReaderOptions& options) {
  ReaderOptions own = options;
  own.weights_elsewhere = false;  // a weights dump carries its weights: no chains of dumps
  own.is_weights_dump = true;
  NCERT_ASSIGN_OR_RETURN(DumpReader reader, DumpReader::open(path, own));
  WeightsDump w;
  w.path_ = path;
  w.reader_ = std::make_unique<DumpReader>(std::move(reader));
  return w;
}

Result<const ProjectionInfo*> WeightsDump::find(const std::string& xxh3, const std::string& preferred,
                                                const std::string& wanted_by) const {
  const ProjectionInfo* found = nullptr;
  std::vector<std::string> declared;
  for (const ProjectionInfo& p : reader_->model().projections) {
    if (p.weights_xxh3.empty()) continue;
    declared.push_back(p.name + " " + p.weights_xxh3);
    if (p.weights_xxh3 != xxh3) continue;
    if (!found || p.name == preferred) found = &p;
  }
  if (found) return found;
  std::string listed;
  for (std::size_t i = 0; i < declared.size() && i < 8; ++i) listed += (i ? ", " : "") + declared[i];
  if (declared.size() > 8) listed += ", ... (" + std::to_string(declared.size()) + " in all)";
  return Status(
      ErrorCode::kMissingMember,
      wanted_by + " declares weights_xxh3 = " + xxh3 + " and omits its weights, but the weights dump " + path_ +
          " has no projection with that weights hash (" +
          (declared.empty() ? std::string("none of its projections declares weights_xxh3") : "it declares: " + listed) +
          ")");
}

Result<ProjectionInfo> bind_weights(const DumpReader& reader, const ProjectionInfo& info, const WeightsDump* weights,
                                    WeightsSource* source) {
  if (!info.weights_omitted) {
    *source = WeightsSource{&reader, &info};
    return info;
  }
  const std::string who = reader.model().file + ": " + info.path;
  if (!weights) {
    return Status(ErrorCode::kMissingMember, who + ": missing group \"weight\" and no weights dump given");
  }
  NCERT_ASSIGN_OR_RETURN(const ProjectionInfo* from, weights->find(info.weights_xxh3, info.name, who));
  // The hash covers K and N of the projection that carries the weights: a step dump that declares
  // it must have the same shape, else its declaration is inconsistent (not a kernel fault).
  if (from->k != info.k || from->n != info.n) {
    return Status(ErrorCode::kAttributeInvalid,
                  who + " declares k = " + std::to_string(info.k) + ", n = " + std::to_string(info.n) +
                      " and weights_xxh3 = " + info.weights_xxh3 + ", but " + weights->path() + ": " + from->path +
                      ", which carries weights with that hash, has k = " + std::to_string(from->k) +
                      ", n = " + std::to_string(from->n) + " (docs/dump-format.md §4.5)");
  }
  ProjectionInfo bound = info;
  bound.segments = from->segments;
  *source = WeightsSource{&weights->reader(), from};
  return bound;
}

Status verify_weights_hash(const std::string& file, const ProjectionInfo& info, const LoadedWeights& weights,
                           const std::string& weights_file, const std::string& weights_path) {
  if (info.weights_xxh3.empty() || info.weights_xxh3 == weights.xxh3) return Status();
  const std::string where =
      weights_file == file ? "the weights it carries"
                           : "the weights of " + weights_file + ": " + weights_path + " (which declares the same hash)";
  return Status(ErrorCode::kAttributeInvalid, file + ": " + info.path +
                                                  " declares weights_xxh3 = " + info.weights_xxh3 + " but " + where +
                                                  " hash to " + weights.xxh3 + " (docs/dump-format.md §4.5)");
}

}  // namespace ncert::certify
