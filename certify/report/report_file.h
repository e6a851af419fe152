// This header defines where reports go and how they get there safely: a report path is checked
// before any work (never an input, never a directory, in a writable place), and written so
// that a reader never sees half a report, an existing regular file is replaced only whole,
// a device or pipe is written in place (never replaced by a regular file), write errors are
// detected (stdout included), and no temporary file survives any path out, SIGINT and SIGTERM
// included (docs/cli.md "Reports and exit status").
#pragma once

#include <string>
#include <vector>

#include "reference/status.h"

namespace ncert::certify {

/// kUsage when `path` ("" none, "-" stdout) cannot take a report: it is one of `inputs` (the
/// same file under any name), a directory, or in a directory that does not exist or is not
/// writable. Checked before the command runs, so a long run never ends in a lost report.
Status check_report_path(const std::string& path, const std::vector<std::string>& inputs,
                         const std::string& flag = "--json");

/// Writes `text` to `path` ("-": stdout). A regular file or a new path: a temporary file
/// beside the target (removed on every failure and on SIGINT/SIGTERM), then rename; an
/// existing device, FIFO or socket: written in place. kReportWrite on any failure.
Status write_report_file(const std::string& path, const std::string& text);

/// Writes `text` to stdout and flushes; kReportWrite if the stream fails (a full disk, a
/// closed pipe: SIGPIPE must be ignored, as the CLI does).
Status write_stdout(const std::string& text);

/// The temporary name write_report_file uses for `path` in process `pid` (the supervisor
/// removes a crashed child's).
std::string report_temp_path(const std::string& path, long pid);

}  // namespace ncert::certify
