#include "rl/core/json_shape.h"

#include <vector>

namespace rl {

JsonShape ScanJsonShape(std::string_view text, int max_depth, int64_t max_array) {
  // Per open level: whether it is an array, and the commas seen in it.
  std::vector<std::pair<bool, int64_t>> open;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (static_cast<int>(open.size()) >= max_depth) return JsonShape::kTooDeep;
      open.emplace_back(c == '[', 0);
    } else if (c == ']' || c == '}') {
      if (!open.empty()) open.pop_back();
    } else if (c == ',' && !open.empty() && open.back().first && ++open.back().second >= max_array) {
      return JsonShape::kArrayTooLong;
    }
  }
  return JsonShape::kWithin;
}

}  // namespace rl
