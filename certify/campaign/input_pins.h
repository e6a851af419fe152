// This header defines a campaign's input pins: every file a campaign reads (each entry's dumps,
// a check entry's weights dump, a forks entry's vocabulary), hashed once (XXH3-128 of the whole
// file, certify/io/hash.h) by the process that schedules the work, with the file's stamp: its
// type, inode, size and modification and change times to the nanosecond. A work item carries the
// pins of its entry's files and checks each file's stamp before and after it reads it, so the
// hash a journal record and a report carry is that of the bytes the item read: a file replaced
// or written since it was hashed changes its inode or its change time (which no process can set),
// and the item ends with an error instead of a verdict on other bytes. The device number is left
// out of the stamp: MPI ranks on other nodes see a shared filesystem under another one.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "certify/campaign/manifest.h"
#include "certify/io/hash.h"
#include "reference/status.h"

namespace ncert::certify {

/// What stat() says of a file, enough to tell that its bytes may have changed.
struct FileStamp {
  bool exists = false;     ///< false: stat failed (missing, unreadable directory); nothing else set
  std::uint32_t type = 0;  ///< st_mode & S_IFMT
  std::uint64_t inode = 0, size = 0;
  std::int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

/// The stamp of `path` now (stat follows symbolic links, as the readers do; it never opens the
/// file, so a FIFO does not block).
FileStamp stamp_of(const std::string& path);

/// One input as the campaign hashed it.
struct InputPin {
  std::string path;
  std::string xxh3_128;  ///< "" when the file is not a regular file or cannot be read
  FileStamp stamp;
  /// The file changed while it was hashed, twice: no item may read it (each ends with an error).
  bool unstable = false;
};

nlohmann::ordered_json pin_json(const InputPin& pin);
Result<InputPin> pin_from_json(const nlohmann::ordered_json& j);

/// Every file an entry reads: its inputs, then a check entry's weights dump, a forks entry's
/// vocabulary and the entry's skip policy file (resolved paths, as the manifest holds them).
std::vector<std::string> entry_files(const CampaignEntry& entry);

/// The pins of every file of every entry, by path, hashed in parallel (one file per thread).
std::map<std::string, InputPin> pin_inputs(const Manifest& manifest);

/// kIo naming the first pinned file whose stamp is no longer the one it was hashed with (or that
/// was unstable when hashed); ok when every file is the one the campaign hashed.
Status pins_hold(const std::vector<InputPin>& pins);

}  // namespace ncert::certify
