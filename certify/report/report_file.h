// This header defines where reports go and how they get there safely: every path a command
// reads or writes is checked before any work (no output is an input or another output, never a
// directory, always in a writable place), and a report is written so
// that a reader never sees half a report, an existing regular file is replaced only whole,
// a device or pipe is written in place (never replaced by a regular file), write errors are
// detected (stdout included), and no temporary file survives any path out, SIGINT and SIGTERM
// included (docs/cli.md "Reports and exit status").
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "reference/status.h"

namespace ncert::certify {

/// One file a command reads or writes, and what names it ("DUMP", "--weights", "--json",
/// "entry step-3", "--journal"): the messages say which two paths meet.
struct NamedPath {
  std::string role;
  std::string path;  ///< "" none; for an output "-" is stdout
  /// An output that is a report (--json, --html, --junit): it replaces an existing regular file
  /// only when that file is empty or a report ncert wrote (replaceable_by_report).
  bool report = false;
};

/// Whether the regular file at `path` may be replaced by a report: "" when it is empty or
/// begins as a report of ncert's does (JSON: `{` then the key `"tool": "ncert"` first; HTML:
/// `<!DOCTYPE html>` with `<title>ncert ` in its first 4 KiB; JUnit: `<?xml` with
/// `<testsuites name="ncert ` there), else what it is instead ("an HDF5 file", "not a report
/// of ncert's", "a file that cannot be read (...)"). A rerun replaces its own report; a
/// mistyped `--json step.h5` never replaces a dump.
std::string replaceable_by_report(const std::string& path);

/// Every path one command reads or writes (docs/cli.md "Reports and exit status"): inputs
/// (dumps, weights dumps, witness files, the manifest, every campaign entry's inputs,
/// vocabularies) and outputs (--json, --html, --junit, witness --out and its summary, the
/// campaign journal).
struct CommandPaths {
  std::vector<NamedPath> inputs;
  std::vector<NamedPath> outputs;
};

/// The rules of one output path alone (part of check_command_paths): not a directory, writable
/// where it points, and, for a report, only over an empty file or a report (kOutputExists).
Status check_output_place(const NamedPath& out);

/// Checked before any work, so a long run never ends in a lost report or a replaced input:
/// kPathConflict when an output is the same file as an input or as another output (by device
/// and inode; by path where one of them does not exist yet), a stream excepted (an existing
/// path that is not a regular file, such as /dev/null, takes several outputs); kUsage when an
/// output cannot be written where it points (a directory, a missing or unwritable directory) or
/// two outputs are stdout ("-", /dev/stdout, /dev/fd/1, /proc/self/fd/1, or a path to the file
/// or pipe fd 1 is open on); kPathConflict too when stdout is open on an input (`--json - >>
/// D.h5`); kOutputExists when a report would replace a regular file that is
/// not a report (replaceable_by_report). Inputs may repeat (`compare A.h5 A.h5`).
Status check_command_paths(const CommandPaths& paths);

/// True when `path` is written in place rather than replaced: it exists and is not a regular
/// file (a device, FIFO or socket), or it names a descriptor already open (/dev/stdout,
/// /dev/stderr, /dev/fd/N, /proc/self/fd/N, /proc/<pid>/fd/N: replacing the file behind stdout
/// would drop what was already printed to it). A regular file anywhere else, /dev/shm included,
/// is replaced whole.
bool is_stream_path(const std::string& path);

/// Writes `text` to `path` ("-": stdout). A regular file or a new path: a temporary file
/// beside the target (removed on every failure and on SIGINT/SIGTERM), then rename; an
/// existing device, FIFO or socket: written in place. kReportWrite on any failure.
Status write_report_file(const std::string& path, const std::string& text);

/// Writes several (path, text) reports as one: each as write_report_file does, every regular
/// file first to its temporary file, then all renamed into place with SIGINT and SIGTERM
/// ignored, so a stop leaves every target as it was or replaces them all. One status per file.
/// `last`: the run's last act, and stops stay ignored after it: a stop that came once the reports
/// were in place would end the run by the signal, "no report written" (seen in 2 of 40 stops).
std::vector<Status> write_report_files(const std::vector<std::pair<std::string, std::string>>& files, bool last);

/// Writes `text` to stdout and flushes; kReportWrite if the stream fails (a full disk, a
/// closed pipe: SIGPIPE must be ignored, as the CLI does).
Status write_stdout(const std::string& text);

/// The temporary name write_report_file uses for `path` in process `pid` (the supervisor
/// removes a crashed child's).
std::string report_temp_path(const std::string& path, long pid);

}  // namespace ncert::certify
