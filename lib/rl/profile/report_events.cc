#include "rl/profile/report_events.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "rl/core/fs.h"

namespace rl::profile {
namespace {

Status ParseLane(const std::string& name, const std::string& text, std::vector<RunEvent>* out) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    bool last = in.peek() == EOF;
    if (j.is_discarded() || !j.is_object() || !j.contains("ts") || !j["ts"].is_number() || !j.contains("event")) {
      if (last) continue;  // torn by a kill in the middle of a write
      return Status::DataError(name + ".jsonl line " + std::to_string(n) + " is not an event line");
    }
    RunEvent e;
    e.ts = j["ts"].get<double>();
    e.event = j.value("event", "");
    e.phase = j.value("phase", "");
    e.step = j.contains("step") && j["step"].is_number_integer() ? j["step"].get<int64_t>() : 0;
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
