// The event logs of a run (<run-dir>/events/*.jsonl, docs/design.md "Event log"), loaded for
// rl-profile report: one lane per file (a role instance), lines in time order.
// Thread safety: plain values and reentrant functions.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl::profile {

struct RunEvent {
  double ts = 0;
  std::string event, phase;
  int64_t step = 0;
  nlohmann::json fields;  // the whole line
};

struct RunEvents {
  // "train-0" -> its lines by ts. The watchdog's lane is "watchdog-<id>".
  std::map<std::string, std::vector<RunEvent>> lanes;
};

// Reads every events/*.jsonl of run_dir. A torn last line (a role killed mid-write) is skipped;
// any other line that is not a JSON object with ts (a finite number) and event (a string) is a DataError
// naming file and line. Other fields of the wrong type read as absent.
Result<RunEvents> LoadRunEvents(const std::string& run_dir);
// The same from text, for tests: lane name -> JSON lines.
Result<RunEvents> ParseRunEvents(const std::map<std::string, std::string>& lanes);

}  // namespace rl::profile
