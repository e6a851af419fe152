// This header defines a JSON parse that notices a key given twice in one object. nlohmann keeps
// the last value of a repeated key and drops the first without a word, so a user file (a
// campaign manifest, a skip policy) whose key is written twice would be read as the last
// spelling; the parse watches every object's keys itself and the caller refuses the file. It
// also refuses text after a NUL byte and nesting no ncert file needs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ncert::certify {

/// A key given twice in one object: where (the keys and list indices leading to that object)
/// and the key.
struct DuplicateKey {
  std::vector<std::string> where;  ///< the keys and list indices (as digits) up to it: "entries", "0"
  std::vector<bool> is_index;      ///< per element of `where`: a list index (else a key)
  std::string key;
};

/// Objects and lists nested deeper than this are refused: no ncert file nests more than 4.
inline constexpr int kMaxJsonDepth = 64;

/// Parses `text` (throws nlohmann's parse_error as Json::parse does), noting the first key an
/// object repeats in `*duplicate`. Also throws (nlohmann's other_error) for a NUL byte anywhere
/// in the text (nlohmann would stop reading there) and for nesting deeper than kMaxJsonDepth.
nlohmann::ordered_json parse_watching_keys(const std::string& text, std::optional<DuplicateKey>* duplicate);

}  // namespace ncert::certify
