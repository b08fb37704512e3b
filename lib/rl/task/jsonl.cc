#include "rl/task/jsonl.h"

#include <cerrno>
#include <cstring>

#include "rl/core/json_field.h"

namespace rl::task {

LineReader::LineReader(std::istream* in, size_t max_bytes, uint64_t first_line, uint64_t first_offset, size_t chunk)
    : in_(in), max_bytes_(max_bytes), buf_(chunk > 0 ? chunk : 1), line_number_(first_line - 1),
      next_offset_(first_offset) {}

bool LineReader::Fill() {
  if (!*in_) return false;
  in_->read(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  pos_ = 0;
  end_ = static_cast<size_t>(in_->gcount());
  return end_ > 0;
}

Result<LineReader::Got> LineReader::Next(std::string* line) {
  line->clear();
  bool too_long = false, any = false;
  line_offset_ = next_offset_;
  for (;;) {
    if (pos_ == end_ && !Fill()) {
      if (in_->bad()) return Status::IOError(std::string("read failed: ") + std::strerror(errno));
      if (!any) return Got::kEnd;
      break;  // a last line without '\n'
    }
    any = true;
    const char* start = buf_.data() + pos_;
    const char* nl = static_cast<const char*>(std::memchr(start, '\n', end_ - pos_));
    size_t n = nl ? static_cast<size_t>(nl - start) : end_ - pos_;
    if (!too_long && line->size() + n > max_bytes_ + 1) {  // + 1: room for a '\r' dropped below
      too_long = true;
      line->clear();
      line->shrink_to_fit();
    }
    if (!too_long) line->append(start, n);
    pos_ += n + (nl ? 1 : 0);
    next_offset_ += n + (nl ? 1 : 0);
    if (nl) break;
  }
  ++line_number_;
  if (!line->empty() && line->back() == '\r') line->pop_back();
  if (!too_long && line->size() > max_bytes_) too_long = true;
  if (too_long) {
    line->clear();
    return Got::kTooLong;
  }
  if (line_offset_ == 0 && line->compare(0, 3, "\xEF\xBB\xBF") == 0) line->erase(0, 3);
  return Got::kLine;
}

Status WriteJsonLine(std::ostream& out, const nlohmann::ordered_json& j) {
  out << JsonText(j) << '\n';
  if (!out) return Status::IOError("write failed");
  return Status::OK();
}

}  // namespace rl::task
