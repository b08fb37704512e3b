// JSON lines, read and written: a streaming line reader with a size limit (a line too long is
// reported and skipped, never buffered whole), and a writer that cannot throw.
// Thread safety: a LineReader is used by one thread; WriteJsonLine is a free function.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl::task {

constexpr size_t kMaxLineBytes = size_t{16} << 20;  // 16 MiB

class LineReader {
 public:
  enum class Got { kLine, kTooLong, kEnd };

  // *in must outlive the reader. Lines are numbered from first_line, and their byte offsets
  // counted from first_offset (where *in is positioned now). The stream is read `chunk` bytes at
  // a time: small for reading one line here and there, large for reading a file through.
  LineReader(std::istream* in, size_t max_bytes = kMaxLineBytes, uint64_t first_line = 1,
             uint64_t first_offset = 0, size_t chunk = size_t{64} << 10);

  // The next line into *line, without its '\n' or a '\r' before it (and without a UTF-8 byte
  // order mark on line 1). kTooLong: the line had more than max_bytes bytes; it was read past
  // and *line is empty. kEnd: no more lines. IOError when the stream fails.
  Result<Got> Next(std::string* line);
  // The number and byte offset of the line Next returned last.
  uint64_t line_number() const { return line_number_; }
  uint64_t line_offset() const { return line_offset_; }
  // The byte offset where the next line starts.
  uint64_t next_offset() const { return next_offset_; }

 private:
  bool Fill();  // reads more into buf_; false at the end or on failure

  std::istream* in_;
  size_t max_bytes_;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
  uint64_t line_number_ = 0, line_offset_ = 0, next_offset_ = 0;
};

// One JSON line (j.dump() and '\n'); invalid UTF-8 in strings is written as U+FFFD instead of
// throwing. IOError when the stream fails.
Status WriteJsonLine(std::ostream& out, const nlohmann::ordered_json& j);

}  // namespace rl::task
