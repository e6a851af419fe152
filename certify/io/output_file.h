// This header defines how a file ncert writes whole appears at its name: written under a
// temporary name beside it, then moved there in one step, so that a failed or interrupted write
// leaves no half file and never replaces one that was there unless asked (dumps written by
// DumpBuilder, witness files, the demo's dumps).
#pragma once

#include <string>
#include <string_view>

#include "reference/status.h"

namespace ncert::certify {

/// A name beside `path` no other writer of this or another process picks:
/// ".<file name>.<pid>.<n>.partial".
std::string temporary_beside(const std::string& path);

/// Moves the finished file `temp` to `path`. With `overwrite` by rename, which replaces
/// atomically; without, by a hard link, which fails rather than replace a file that appeared
/// meanwhile (kOutputExists, "<path>: exists; refusing to overwrite it"), and on a file system
/// without hard links by a rename after one more look that nothing is there. kIo otherwise,
/// naming `what` ("the dump"). `temp` is left for the caller to remove (after a link it is a
/// second name of the file).
Status move_into_place(const std::string& temp, const std::string& path, bool overwrite, std::string_view what);

}  // namespace ncert::certify
