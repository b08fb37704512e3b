// File-system helpers with the durability steps spelled out: write a temporary file, fsync it,
// rename it over the target, fsync the directory. Errors come back as IOError with the path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl {

Status MakeDirs(const std::string& path);
Status FsyncDir(const std::string& dir);
// Replaces `path` with `bytes` so that a crash leaves either the old or the new file, whole.
Status WriteFileAtomic(const std::string& path, const std::string& bytes);
Result<std::string> ReadFile(const std::string& path);
std::string ErrnoMessage(const std::string& what, const std::string& path);
// The numbers N of the files in `dir` named <prefix>N<suffix> (N: 1 to 18 decimal digits),
// ascending. Names that do not fit, such as half-written "<prefix>N<suffix>.tmp", are skipped.
std::vector<uint64_t> NumberedFiles(const std::string& dir, const std::string& prefix, const std::string& suffix);

}  // namespace rl
