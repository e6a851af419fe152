// Writing a whole buffer to a file descriptor. write(2) may take fewer bytes than asked (a pipe
// that is full, a signal arriving mid-write), so the supervisor's result pipe, the survey's
// helper frames, report files and the campaign journal all loop the same way: here, once.
#pragma once

#include <string_view>

namespace ncert::certify {

/// Writes all of `bytes` to `fd`, retrying short writes and EINTR. Returns 0, or the errno of
/// the write that failed (EIO for a write that took nothing, which would never finish).
int write_all(int fd, std::string_view bytes);

}  // namespace ncert::certify
