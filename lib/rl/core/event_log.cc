#include "rl/core/event_log.h"

#include <fcntl.h>
#include <unistd.h>

#include "rl/core/clock.h"
#include "rl/core/fs.h"
#include "rl/core/json_field.h"

namespace rl {

namespace {
std::mutex current_mu;
EventLog* current = nullptr;  // guarded by current_mu
}  // namespace

EventLog::EventLog() {
  std::lock_guard<std::mutex> lock(current_mu);
  current = this;
}

EventLog::~EventLog() {
  {
    std::lock_guard<std::mutex> lock(current_mu);
    if (current == this) current = nullptr;
  }
  if (fd_ >= 0) ::close(fd_);
}

std::string EventLog::phase() {
  std::lock_guard<std::mutex> lock(mu_);
  return phase_;
}

int64_t EventLog::step() {
  std::lock_guard<std::mutex> lock(mu_);
  return step_;
}

bool EventLog::Current(std::string* phase, int64_t* step) {
  std::lock_guard<std::mutex> lock(current_mu);
  if (current == nullptr) return false;
  *phase = current->phase();
  *step = current->step();
  return true;
}

Status EventLog::Open(const std::string& run_dir, const std::string& role, const std::string& id) {
  std::string dir = run_dir + "/events";
  RL_RETURN_IF_ERROR(MakeDirs(dir));
  path_ = dir + "/" + role + "-" + id + ".jsonl";
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) return Status::IOError(ErrnoMessage("open", path_));
  role_ = role;
  id_ = id;
  return Status::OK();
}

void EventLog::SetPhase(const std::string& phase) {
  std::lock_guard<std::mutex> lock(mu_);
  phase_ = phase;
}

void EventLog::EnterPhase(const std::string& phase) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (phase == phase_) return;
    phase_ = phase;
  }
  Emit("phase");
}

void EventLog::SetStep(int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  step_ = step;
}

void EventLog::Emit(const std::string& event, const nlohmann::json& fields) {
  if (fd_ < 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json line = {{"ts", WallSeconds()}, {"role", role_}, {"id", id_},
                         {"event", event},      {"step", step_}, {"phase", phase_}};
  if (fields.is_object()) {
    for (auto it = fields.begin(); it != fields.end(); ++it) line[it.key()] = it.value();
  }
  std::string text = JsonText(line) + "\n";
  // One write per line; a short write on a local file only happens on a full disk, and then
  // there is nowhere better to report it than the log we cannot write.
  ssize_t n = ::write(fd_, text.data(), text.size());
  (void)n;
}

}  // namespace rl
