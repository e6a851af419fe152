// Internal to the dump reader's survey (survey.cc): what surveying one part of a file's group
// tree found, how parts are surveyed on helper processes, and the wire form in which a helper
// hands its parts back to the process that merges them.
#pragma once

#include <hdf5.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "certify/io/dump_model.h"

namespace ncert::certify::detail {

using TypedAttrs = std::vector<AttributeInfo>;

/// What surveying one part of the tree (the groups and datasets under one group, or the top
/// two levels) found, in the order it was walked.
struct TreePart {
  std::vector<GroupInfo> groups;
  std::vector<DatasetInfo> datasets;
  /// The attributes of objects surveyed that are neither a group nor a dataset kept: refused
  /// datasets, named datatypes (the others carry theirs).
  std::vector<std::pair<std::string, TypedAttrs>> attrs;
  std::vector<std::string> failed;  ///< objects that exist but were refused
  std::vector<Finding> findings;
  std::vector<std::pair<std::string, std::string>> soft;  ///< soft links: path, target
  /// Every object header opened, by the address and the name it was first met under: how parts
  /// walked apart are found to share an object (an alias across parts).
  std::vector<std::pair<haddr_t, std::string>> objects;
  Index seen = 0;           ///< links visited
  bool over_limit = false;  ///< the walk stopped at its link budget
};

/// The parts of items [first, first + parts.size()) of a list.
struct PartsAt {
  std::size_t first = 0;
  std::vector<TreePart> parts;
};

/// One chunk's parts, as bytes for a pipe.
std::string encode_parts(const PartsAt& at);
/// The parts back; nullopt when the bytes are not a whole encoding.
std::optional<PartsAt> decode_parts(std::string_view bytes);

/// Surveys items [first, last) of a list: one part per item, in order, possibly stopping early
/// (at a link budget), never more than last - first.
using SurveyRange = std::function<std::vector<TreePart>(std::size_t first, std::size_t last)>;

/// How items are surveyed apart.
struct SplitPlan {
  std::size_t processes = 1;  ///< this one and processes - 1 helpers
  std::size_t chunk = 128;    ///< items a process takes at a time
  /// Links the whole walk may still visit: once the chunks finished have seen more, no process
  /// takes another (every later item is past the limit).
  Index link_budget = 0;
  std::string file;  ///< named while this process waits for helpers (certify/isolation/activity.h)
};

/// The parts of items [0, units), each at its item's index. The items are taken a chunk at a time,
/// in order, by this process and by helper processes forked for the call, as each becomes free
/// (the two cores of a machine do not run a libhdf5 survey at the same pace). An item no process
/// delivered (a helper that failed, a chunk past the link budget) is nullopt: the caller walks
/// it itself, where a crash inside libhdf5 then happens as it would have without helpers. The
/// calling process must be the only user of its HDF5 files until this returns.
std::vector<std::optional<TreePart>> survey_in_processes(std::size_t units, const SplitPlan& plan,
                                                         const SurveyRange& survey);

}  // namespace ncert::certify::detail
