// Internal to the dump reader's survey (survey.cc): how one dataset's storage, shape and type
// are examined before any of its raw data is read.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "certify/io/detail/survey_parts.h"
#include "certify/io/dump_model.h"

namespace ncert::certify::detail {

/// Validates one dataset's storage and type; fills `info` (all but its attributes) and appends
/// findings; false when the dataset is refused. Storage comes first: a virtual dataset must be
/// refused before anything could read through it. `attrs` are its attributes (`dtype` tags raw
/// bf16, f16 and FP8 patterns); `file_size` bounds where contiguous raw data may lie.
bool inspect_dataset(hid_t ds, const std::string& path, const TypedAttrs& attrs, std::uint64_t file_size,
                     DatasetInfo* info, std::vector<Finding>* findings);

}  // namespace ncert::certify::detail
