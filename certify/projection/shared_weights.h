// This header defines how a projection's weights are identified, read and shared: the weights
// hash of docs/dump-format.md §4.5 (XXH3-128 over the segments' attributes and raw element
// bytes, in row_begin order), the weights read once into owned buffers (LoadedWeights) and
// shared by every projection with the same hash (WeightsCache, one process), and the weights
// dump a step dump that omits its weight group takes them from (WeightsDump, matched by hash,
// never through an HDF5 link).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "certify/io/dump_reader.h"
#include "packing/pack_plan.h"
#include "reference/linear_spec.h"

namespace ncert::certify {

/// A projection's weights, read whole (raw bit patterns) and hashed as they were read.
struct LoadedWeights {
  std::string xxh3;          ///< the §4.5 weights hash of what was read
  std::vector<Bytes> blobs;  ///< values / codes / scales / biases / codebook / zero points (stored, unpacked)
  std::vector<reference::WeightSegment> segments;  ///< views into blobs
  std::vector<packing::SegmentGeometry> geometry;  ///< the segment table the guards check
  std::uint64_t bytes = 0;                         ///< raw bytes read
  double read_seconds = 0;
};

/// Reads the weight segments of `info` (a projection of `reader`'s dump that carries them) and
/// hashes them. Errors only for read failures.
Result<std::shared_ptr<const LoadedWeights>> load_weights(const DumpReader& reader, const ProjectionInfo& info);

/// The raw bytes of `info`'s weight datasets, from the dump's metadata (no read).
std::uint64_t weight_bytes(const DumpModel& model, const ProjectionInfo& info);

class WeightsDump;

/// Weights already read in this process, by weights hash, and the weights dumps already open:
/// the projections of several step dumps that share their weights read and hash them once.
/// It keeps what it holds alive (a campaign batch holds one projection's weights). Not
/// thread-safe (one item at a time).
class WeightsCache {
 public:
  WeightsCache();
  ~WeightsCache();
  /// `key` names what was read: the source file, the source projection and the declared hash.
  std::shared_ptr<const LoadedWeights> find(const std::string& key) const;
  void add(const std::string& key, std::shared_ptr<const LoadedWeights> weights);
  std::size_t size() const { return by_hash_.size(); }
  /// The weights dump at `path`, opened on first use.
  Result<const WeightsDump*> weights_dump(const std::string& path, const ReaderOptions& options);
  Index hits = 0;  ///< loads answered from the cache

 private:
  std::map<std::string, std::shared_ptr<const LoadedWeights>> by_hash_;
  std::map<std::string, std::unique_ptr<WeightsDump>> dumps_;
};

/// Where a projection's weights come from: its own dump, or (weights_omitted) the weights dump.
struct WeightsSource {
  const DumpReader* reader = nullptr;          ///< the dump holding the segments
  const ProjectionInfo* projection = nullptr;  ///< the projection whose segments they are
};

/// A weights dump: any valid ncert dump whose projections carry their weights and declare
/// weights_xxh3 (docs/dump-format.md §4.5), opened once per process.
class WeightsDump {
 public:
  /// Opens it as a dump (refused like any dump; it must carry its own weights).
  static Result<WeightsDump> open(const std::string& path, const ReaderOptions& options);
  const std::string& path() const { return path_; }
  const DumpReader& reader() const { return *reader_; }
  /// The projection carrying weights with this declared hash: the one named `preferred` if it
  /// has them, else the first by name. kMissingMember naming the hash and this dump otherwise.
  Result<const ProjectionInfo*> find(const std::string& xxh3, const std::string& preferred,
                                     const std::string& wanted_by) const;

 private:
  std::string path_;
  std::unique_ptr<DumpReader> reader_;
};

/// The projection as the checks see it: `info`, with the weights dump's segments (same hash)
/// when it omits its own. `source` says where to read them.
Result<ProjectionInfo> bind_weights(const DumpReader& reader, const ProjectionInfo& info, const WeightsDump* weights,
                                    WeightsSource* source);

/// kAttributeInvalid naming the file, the projection and both hashes when `info` declares a
/// weights hash that the weights read do not have; when they came from a weights dump, the
/// projection there (`weights_path`) whose declaration they do not match is named too.
Status verify_weights_hash(const std::string& file, const ProjectionInfo& info, const LoadedWeights& weights,
                           const std::string& weights_file, const std::string& weights_path);

}  // namespace ncert::certify
