// This header defines the files, and sections of files, that are written from the code's own
// tables rather than by hand: the options tables of docs/cli.md and docs/campaigns.md (from the
// commands' option tables), and whatever else registers here. `ncert-docgen check SRC` compares
// each with what the code would write (a CTest runs it, so a table edited by hand out of step,
// or a code change without its docs, fails the suite); `ncert-docgen write SRC` rewrites them.
//
// A section lives between two marker lines, which the writer keeps:
//   Markdown:       <!-- BEGIN generated: NAME (ncert-docgen write) -->  ...  <!-- END generated: NAME -->
//   Python, shell:  # BEGIN generated: NAME (ncert-docgen write)          ...  # END generated: NAME
// A part whose section is empty is a whole generated file.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "reference/status.h"

namespace ncert::cli {

struct GeneratedPart {
  std::string path;     ///< relative to the source root
  std::string section;  ///< the marker's NAME; "" : the whole file
  std::function<std::string()> render;
};

/// Every generated part, in a fixed order.
const std::vector<GeneratedPart>& generated_parts();

/// `text` with section `name` replaced by `body` (kInvalidArgument naming the file when the
/// markers are missing, repeated or out of order).
Result<std::string> replace_section(const std::string& text, const std::string& path, const std::string& name,
                                    const std::string& body);

/// What `path` (under `root`) should hold: its text with every generated section re-rendered.
Result<std::string> regenerate(const std::string& root, const std::string& path);

/// The parts whose committed text differs from what the code would write ("path" or
/// "path#section"); kIo when a file cannot be read.
Result<std::vector<std::string>> stale_parts(const std::string& root);
/// Rewrites every stale file under `root`; returns the paths rewritten.
Result<std::vector<std::string>> write_parts(const std::string& root);

}  // namespace ncert::cli
