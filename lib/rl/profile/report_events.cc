#include "rl/profile/report_events.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "rl/core/fs.h"
#include "rl/core/json_field.h"

namespace rl::profile {
namespace {

// A JSON object with a finite number "ts" and a string "event".
bool IsEventLine(const nlohmann::json& j) {
  const double ts = NumberField(j, "ts", std::nan(""));
  const nlohmann::json* event = FieldOf(j, "event");
  return std::isfinite(ts) && event != nullptr && event->is_string();
}

Status ParseLane(const std::string& name, const std::string& text, std::vector<RunEvent>* out) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    bool last = in.peek() == EOF;
    if (!IsEventLine(j)) {
      if (last) continue;  // torn by a kill in the middle of a write
      return Status::DataError(name + ".jsonl line " + std::to_string(n) + " is not an event line");
    }
    RunEvent e;
    e.ts = j["ts"].get<double>();
    e.event = TextField(j, "event");
    e.phase = TextField(j, "phase");
    e.step = IntField(j, "step", 0);
    e.fields = std::move(j);
    out->push_back(std::move(e));
  }
  std::stable_sort(out->begin(), out->end(), [](const RunEvent& a, const RunEvent& b) { return a.ts < b.ts; });
  return Status::OK();
}

}  // namespace

Result<RunEvents> ParseRunEvents(const std::map<std::string, std::string>& lanes) {
  RunEvents r;
  for (const auto& [name, text] : lanes) RL_RETURN_IF_ERROR(ParseLane(name, text, &r.lanes[name]));
  return r;
}

Result<RunEvents> LoadRunEvents(const std::string& run_dir) {
  std::string dir = run_dir + "/events";
  std::map<std::string, std::string> texts;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string file = entry.path().filename().string();
    if (file.size() <= 6 || file.substr(file.size() - 6) != ".jsonl") continue;
    RL_ASSIGN_OR_RETURN(std::string text, ReadFile(entry.path().string()));
    texts[file.substr(0, file.size() - 6)] = std::move(text);
  }
  if (ec) return Status::NotFound("no event logs in " + dir + ": " + ec.message());
  if (texts.empty()) return Status::NotFound("no event logs in " + dir);
  return ParseRunEvents(texts);
}

}  // namespace rl::profile
