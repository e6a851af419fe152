#include "certify/report/json_keys.h"

#include <set>

namespace ncert::certify {

namespace {
using Json = nlohmann::ordered_json;
}  // namespace

Json parse_watching_keys(const std::string& text, std::optional<DuplicateKey>* duplicate) {
  struct Frame {
    bool object = false;
    std::set<std::string> keys;
    std::string key;        ///< an object's current key
    std::size_t index = 0;  ///< a list's current element
  };
  // nlohmann reads a NUL byte as the end of the input: a file with text after one was read as
  // its first part (a review's manifest, "{...}\0 junk {{{", ran).
  if (const std::size_t nul = text.find('\0'); nul != std::string::npos) {
    throw Json::other_error::create(
        501, "a NUL byte at offset " + std::to_string(nul) + ": a JSON file holds text only", nullptr);
  }
  std::vector<Frame> stack;
  const auto next_element = [&] {
    if (!stack.empty() && !stack.back().object) ++stack.back().index;
  };
  return Json::parse(text, [&](int depth, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        // Refused while parsing: code that walks the value recursively (a message that prints
        // it, a check for NULs in every string) overflowed the stack at 100,000 levels.
        if (depth >= kMaxJsonDepth) {
          throw Json::other_error::create(502, "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels",
                                          nullptr);
        }
        stack.push_back(Frame{event == Json::parse_event_t::object_start, {}, {}, 0});
        break;
      case Json::parse_event_t::key:
        stack.back().key = parsed.get<std::string>();
        if (!stack.back().keys.insert(stack.back().key).second && !*duplicate) {
          DuplicateKey d{{}, {}, stack.back().key};
          for (std::size_t i = 0; i + 1 < stack.size(); ++i) {
            d.where.push_back(stack[i].object ? stack[i].key : std::to_string(stack[i].index));
            d.is_index.push_back(!stack[i].object);
          }
          *duplicate = std::move(d);
        }
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        stack.pop_back();
        next_element();
        break;
      case Json::parse_event_t::value:
        next_element();
        break;
    }
    return true;
  });
}

}  // namespace ncert::certify
