// EventLog: appends JSON lines to <run-dir>/events/<role>-<id>.jsonl (docs/design.md "Event log").
// Each line has ts (Unix seconds), role, id, event, step, phase, then the caller's fields.
// A line is written with one write(2) on an O_APPEND descriptor, so a kill -9 leaves whole lines
// (a line is at most PIPE_BUF-independent: the kernel appends it in one piece on local files).
// Thread safety: Emit may be called from several threads.
#pragma once

#include <nlohmann/json.hpp>

#include <mutex>
#include <string>

#include "rl/core/status.h"

namespace rl {

class EventLog {
 public:
  EventLog();  // disabled: Emit does nothing
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Opens (creating directories) <run_dir>/events/<role>-<id>.jsonl for appending.
  Status Open(const std::string& run_dir, const std::string& role, const std::string& id);
  bool enabled() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

  void SetPhase(const std::string& phase);
  // Sets the phase and appends a "phase" line, only when the phase changes.
  void EnterPhase(const std::string& phase);
  void SetStep(int64_t step);
  // Appends one line. `fields` must be a JSON object (or null).
  void Emit(const std::string& event, const nlohmann::json& fields = nullptr);

  // The phase and step last set, from any thread (the heartbeat thread reads them).
  std::string phase();
  int64_t step();
  // Phase and step of the role log of this process: the EventLog constructed last and still
  // alive (a role process has one). False when there is none. Lets lib/rl/health report a role's
  // phase without the role passing its log around.
  static bool Current(std::string* phase, int64_t* step);

 private:
  std::mutex mu_;
  int fd_ = -1;
  std::string path_, role_, id_, phase_ = "start";
  int64_t step_ = 0;
};

}  // namespace rl
