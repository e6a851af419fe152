#include "certify/cli/generated_errors.h"

#include <nlohmann/json.hpp>

#include <sstream>
#include <string_view>

#include "reference/status.h"

namespace ncert::cli {

namespace {

/// The headings of docs/error-codes.md, one per band (the number's hundreds).
struct Band {
  int hundreds;
  std::string_view title;
};
constexpr Band kBands[] = {
    {1, "Input and command line"},
    {2, "I/O, HDF5 and dump schema"},
    {3, "Packing host guards"},
    {4, "Numeric formats and descriptors"},
    {9, "Internal"},
};

std::string_view band_title(int hundreds) {
  for (const Band& b : kBands) {
    if (b.hundreds == hundreds) return b.title;
  }
  // A code in a new band needs its heading here; the generated docs test fails until it has one.
  NCERT_UNREACHABLE("an error code's band has no heading in generated_errors.cc");
}

}  // namespace

std::string error_codes_markdown() {
  std::ostringstream os;
  int band = -1;
  for (ErrorCode code : all_error_codes()) {
    const int number = static_cast<int>(code);
    if (number / 100 != band) {
      band = number / 100;
      if (os.tellp() > 0) os << "\n";
      os << "## " << band << "xx: " << band_title(band) << "\n\n| code | name | meaning |\n|---|---|---|\n";
    }
    os << "| " << number << " | `" << error_name(code) << "` | " << error_description(code) << " |\n";
  }
  return os.str();
}

std::string error_pairs_json() {
  nlohmann::ordered_json pairs = nlohmann::ordered_json::array();
  for (ErrorCode code : all_error_codes()) {
    std::string description(error_description(code));
    // interrupted and report-write already say their exit, which depends on more than the code.
    if (description.find("(exit ") == std::string::npos) {
      description += " (exit " + std::to_string(exit_code_for(code)) + ")";
    }
    pairs.push_back(
        {{"properties", {{"code", {{"const", static_cast<int>(code)}}}, {"name", {{"const", error_name(code)}}}}},
         {"description", description}});
  }
  return pairs.dump();
}

std::string error_codes_python() {
  std::ostringstream os;
  os << "#: Every error name of reference/error_codes.h with its number (docs/error-codes.md).\n"
        "ERROR_CODES = {\n";
  for (ErrorCode code : all_error_codes()) {
    // Names are kebab case (reference/detail/error_table.h): no character needs escaping.
    os << "    \"" << error_name(code) << "\": " << static_cast<int>(code) << ",\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace ncert::cli
