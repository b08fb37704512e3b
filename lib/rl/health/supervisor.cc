#include "rl/health/supervisor.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "rl/core/clock.h"
#include "rl/core/fs.h"
#include "rl/core/log.h"
#include "rl/health/instance.h"
#include "rl/health/process.h"
#include "rl/health/spare_pool.h"

namespace rl::health {
namespace {

constexpr int64_t kPumpMs = 50;  // how often processes are looked at: exits are seen within this
// A spare starts once every instance of its role has been ready this long: its start-up (a second
// of CPU for libtorch) must not compete with a role that is still loading its state.
constexpr int64_t kSpareAfterReadyMs = 3000;
// A spare that exits unused is replaced after a delay that doubles, 1 s to 32 s: a command that
// cannot start must not be forked every pump.
constexpr int64_t kSpareBackoffMinMs = 1000, kSpareBackoffMaxMs = 32000;

class Supervisor {
 public:
  Supervisor(SupervisorOptions o, EventLog* events)
      : o_(std::move(o)), events_(events), policy_(o_.pipeline.restart == "job", o_.pipeline.max_full_restarts) {}

  Result<int> Run(const std::atomic<bool>& stop);

 private:
  Status StartSection(size_t section, const std::atomic<bool>& stop);
  Status StartAll(const std::atomic<bool>& stop);
  void StopAll(bool graceful);
  void Observe(const std::vector<Detection>& ds);
  // Looks at every process; returns an exit code when the pipeline is over.
  std::optional<int> CheckProcesses();
  std::optional<int> OnFailure(Instance* inst, const std::string& reason, double fault_ts);
  Status RestartRole(Instance* inst);
  void LendSlotTo(Instance* trainer);
  void ReturnLentSlots();
  void KeepSpares();
  Instance* Find(const std::string& key);
  nlohmann::json Fields(const Instance& inst) const;
  void SaveState();
  void LoadState();

  SupervisorOptions o_;
  EventLog* events_;
  RestartPolicy policy_;
  std::unique_ptr<Watcher> watcher_;
  std::vector<Instance> instances_;
  SparePool spares_;
  struct SpareBackoff {
    int64_t delay_ms = 0, not_before_ms = 0;
  };
  std::map<const RoleSpec*, SpareBackoff> spare_backoff_;
  int64_t pipeline_step_ = -1;   // the trainer's step, as its heartbeats last said
  pid_t trainer_pid_ = 0;
  uint64_t trainer_steps_ = 0;   // its "steps" counter: steps that process completed
};

// True when a heartbeat's pid is the instance's process or runs in its session (a command that
// is a shell list runs the role as a child of the shell).
bool BelongsTo(uint64_t hb_pid, const Instance& inst) {
  if (inst.pid == 0) return false;
  return hb_pid == static_cast<uint64_t>(inst.pid) || ProcessSession(static_cast<pid_t>(hb_pid)) == inst.pid;
}

nlohmann::json Supervisor::Fields(const Instance& inst) const {
  return {{"member", inst.key}, {"kind", inst.spec->kind}, {"instance", inst.id}, {"pid", inst.pid}};
}

Instance* Supervisor::Find(const std::string& key) {
  for (auto& inst : instances_) {
    if (inst.key == key) return &inst;
  }
  return nullptr;
}

void Supervisor::SaveState() {
  std::ofstream out(o_.run_dir + "/watchdog/state.json", std::ios::trunc);
  out << nlohmann::json{{"full_restarts", policy_.full_restarts()}}.dump() << "\n";
}

void Supervisor::LoadState() {
  std::ifstream in(o_.run_dir + "/watchdog/state.json");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_object()) policy_.set_full_restarts(j.value("full_restarts", 0));
}

// Starts (or adopts) the instances of one section and waits until each heartbeats, one exits,
// or the section's ready timeout passes (the main loop then treats it as a failed start).
Status Supervisor::StartSection(size_t section, const std::atomic<bool>& stop) {
  double ready_s = 0;
  for (auto& inst : instances_) {
    if (inst.section != section || inst.lent) continue;
    ready_s = std::max(ready_s, inst.spec->ready_s);
    if (inst.pid != 0 && !ProcessGone(inst.pid)) continue;
    if (AdoptFromPidFile(o_.run_dir, &inst)) {
      events_->Emit("adopted", Fields(inst));
      spdlog::info("adopted {} (pid {}) from a previous watchdog", inst.key, inst.pid);
      continue;
    }
    RL_RETURN_IF_ERROR(SpawnInstance(o_.pipeline, watcher_->endpoint(), o_.run_dir, &inst));
    events_->Emit("start-role", Fields(inst));
    spdlog::info("started {} (pid {})", inst.key, inst.pid);
  }
  int64_t until = MonoMillis() + static_cast<int64_t>(ready_s * 1000);
  while (!stop.load() && MonoMillis() < until) {
    Observe(watcher_->Pump(kPumpMs));
    bool all = true, exited = false;
    for (auto& inst : instances_) {
      if (inst.section != section || inst.lent) continue;
      all = all && inst.ready;
      exited = exited || ProcessGone(inst.pid);
    }
    if (all || exited) break;
  }
  return Status::OK();
}

Status Supervisor::StartAll(const std::atomic<bool>& stop) {
  for (size_t s = 0; s < o_.pipeline.roles.size() && !stop.load(); ++s) RL_RETURN_IF_ERROR(StartSection(s, stop));
  return Status::OK();
}

void Supervisor::StopAll(bool graceful) {
  spares_.StopAll();
  int64_t grace = graceful ? static_cast<int64_t>(o_.pipeline.grace_s * 1000) : 0;
  for (auto it = instances_.rbegin(); it != instances_.rend(); ++it) {
    if (it->pid == 0) continue;
    StopProcess(it->pid, grace);
    RemovePidFile(o_.run_dir, *it);
    watcher_->membership().Forget(it->key);
    it->pid = 0;
    it->ready = false;
  }
}

// Readiness of (re)started instances and the trainer's completed steps, from heartbeats.
void Supervisor::Observe(const std::vector<Detection>& ds) {
  for (auto& inst : instances_) {
    const Member* m = inst.ready || inst.pid == 0 ? nullptr : watcher_->membership().Find(inst.key);
    if (m == nullptr || !BelongsTo(m->last.pid, inst)) continue;
    inst.ready = true;
    inst.ready_ms = MonoMillis();
    inst.failed_restarts = 0;
    nlohmann::json f = Fields(inst);
    f["seconds"] = (MonoMillis() - inst.started_ms) / 1000.0;
    events_->Emit("ready", f);
  }
  for (const auto& [key, m] : watcher_->membership().members()) {
    if (m.last.role != "train" || m.state == MemberState::kLeft) continue;
    // Steps completed, from the trainer's own counter (its step number also jumps when it loads
    // a checkpoint, which is no progress). A new trainer process counts from 0.
    auto it = m.last.counters.find("steps");
    uint64_t steps = it == m.last.counters.end() ? 0 : it->second;
    if (static_cast<pid_t>(m.last.pid) != trainer_pid_) trainer_steps_ = 0;
    if (steps > trainer_steps_) {
      for (auto& inst : instances_) inst.steps_since_start += static_cast<int64_t>(steps - trainer_steps_);
    }
    trainer_pid_ = static_cast<pid_t>(m.last.pid);
    trainer_steps_ = std::max(trainer_steps_, steps);
    pipeline_step_ = m.last.step;
  }
  (void)ds;
}

std::optional<int> Supervisor::CheckProcesses() {
  for (auto& inst : instances_) {
    if (inst.pid == 0 || inst.lent) continue;
    std::optional<int> status = inst.child ? ReapChild(inst.pid) : std::nullopt;
    if (!status && !ProcessGone(inst.pid)) {
      if (!inst.ready && MonoMillis() - inst.started_ms > static_cast<int64_t>(inst.spec->ready_s * 1000)) {
        std::string why = "no heartbeat within " + std::to_string(static_cast<int>(inst.spec->ready_s)) + " s of its start";
        if (auto code = OnFailure(&inst, why, WallSeconds())) return code;
      }
      continue;
    }
    if (status && inst.spec->finish && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) {
      nlohmann::json f = Fields(inst);
      f["step"] = pipeline_step_;
      events_->Emit("finished", f);
      spdlog::info("{} finished: stopping the pipeline", inst.key);
      RemovePidFile(o_.run_dir, inst);
      inst.pid = 0;
      StopAll(true);
      std::remove((o_.run_dir + "/watchdog/state.json").c_str());  // a new run starts from 0 full restarts
      return kExitOk;
    }
    // A multi-threaded process shows as a zombie while its other threads still exit; its status
    // comes a moment later.
    for (int i = 0; inst.child && !status && i < 50; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      status = ReapChild(inst.pid);
    }
    std::string why = status ? DescribeWaitStatus(*status) : "process " + std::to_string(inst.pid) + " is gone";
    if (auto code = OnFailure(&inst, why, WallSeconds())) return code;
  }
  return std::nullopt;
}

void Supervisor::LendSlotTo(Instance* trainer) {
  for (auto& inst : instances_) {
    if (inst.spec->kind != "rollout" || inst.pid == 0 || inst.lent) continue;
    nlohmann::json f = Fields(inst);
    f["reason"] = trainer->key + " takes the slot of " + inst.key + " (warm standby)";
    events_->Emit("standby", f);
    spdlog::warn("{}", f["reason"].get<std::string>());
    StopProcess(inst.pid, static_cast<int64_t>(o_.pipeline.grace_s * 1000));  // SIGTERM: it gives its lease back
    RemovePidFile(o_.run_dir, inst);
    watcher_->membership().Forget(inst.key);
    inst.pid = 0;
    inst.lent = true;
    inst.lent_to = trainer->key;
    return;
  }
}

// A drained rollout comes back once the trainer that took its slot has completed a step since
// its restart: the trainer's own slot (here, its dead process) is free again by then, and a
// trainer that fails in its first step escalates to a full restart, which starts every role
// anyway, so the rollout never competes with a restart that is still in doubt. When it was the
// only rollout, the trainer cannot complete a step without it: it comes back as soon as the
// trainer heartbeats.
void Supervisor::ReturnLentSlots() {
  bool rollout_running = false;
  for (const auto& inst : instances_) rollout_running |= inst.spec->kind == "rollout" && inst.pid != 0 && !inst.lent;
  for (auto& inst : instances_) {
    if (!inst.lent) continue;
    Instance* trainer = Find(inst.lent_to);
    bool stepped = trainer == nullptr || (trainer->ready && trainer->steps_since_start >= 1);
    bool alone = trainer != nullptr && trainer->ready && !rollout_running;
    if (!stepped && !alone) continue;
    std::string reason = inst.key + " is back: " + inst.lent_to +
                         (stepped ? " completed a step since it took its slot" : " heartbeats and has no other rollout");
    Status s = SpawnInstance(o_.pipeline, watcher_->endpoint(), o_.run_dir, &inst);
    if (!s.ok()) {
      spdlog::error("return of {}: {}", inst.key, s.ToString());
      continue;
    }
    nlohmann::json f = Fields(inst);
    f["reason"] = reason;
    events_->Emit("standby-return", f);
    spdlog::info("{}", reason);
  }
}

// Spares are started once every instance of their role has been ready for a while (never
// competing with a start or a restart for the cores), and replaced the same way after one is used.
void Supervisor::KeepSpares() {
  auto back_off = [this](const RoleSpec* r) -> const SpareBackoff& {
    SpareBackoff& b = spare_backoff_[r];
    b.delay_ms = std::clamp(b.delay_ms * 2, kSpareBackoffMinMs, kSpareBackoffMaxMs);
    b.not_before_ms = MonoMillis() + b.delay_ms;
    return b;
  };
  for (const RoleSpec* r : spares_.Reap()) {
    const SpareBackoff& b = back_off(r);
    spdlog::warn("a spare of {} exited before it was needed (see its log in {}/logs); another in {} s", r->name,
                 o_.run_dir, b.delay_ms / 1000);
    events_->Emit("spare-exit", {{"kind", r->kind}, {"retry_s", b.delay_ms / 1000.0}});
  }
  for (const RoleSpec& r : o_.pipeline.roles) {
    if (r.spares == 0 || spares_.Count(&r) >= r.spares) continue;
    if (MonoMillis() < spare_backoff_[&r].not_before_ms) continue;
    bool settled = true;
    for (const auto& inst : instances_) {
      settled &= inst.spec != &r || (inst.ready && !inst.lent && MonoMillis() - inst.ready_ms >= kSpareAfterReadyMs);
    }
    if (!settled) continue;
    auto started = spares_.Fill(o_.pipeline, &r, watcher_->endpoint(), o_.run_dir);
    if (!started.ok()) {
      spdlog::error("spare of {}: {}; trying again in {} s", r.name, started.status().ToString(),
                    back_off(&r).delay_ms / 1000);
      continue;
    }
    for (pid_t pid : *started) {
      events_->Emit("spare", {{"kind", r.kind}, {"pid", pid}});
      spdlog::info("started a spare of {} (pid {})", r.name, pid);
    }
  }
}

Status Supervisor::RestartRole(Instance* inst) {
  pid_t old = inst->pid;
  if (old != 0) StopProcess(old, 0);  // it failed: no grace
  watcher_->membership().Forget(inst->key);
  if (o_.pipeline.standby && inst->spec->kind == "train") LendSlotTo(inst);
  ++inst->restarts;
  RL_ASSIGN_OR_RETURN(bool from_spare, spares_.Activate(o_.run_dir, inst));
  if (from_spare) spare_backoff_.erase(inst->spec);  // a spare that served: the next one starts without delay
  if (!from_spare) RL_RETURN_IF_ERROR(SpawnInstance(o_.pipeline, watcher_->endpoint(), o_.run_dir, inst));
  nlohmann::json f = Fields(*inst);
  f["old_pid"] = old;
  f["spare"] = from_spare;
  events_->Emit("restart", f);
  spdlog::info("restarted {} (pid {} -> {})", inst->key, old, inst->pid);
  return Status::OK();
}

std::optional<int> Supervisor::OnFailure(Instance* inst, const std::string& reason, double fault_ts) {
  if (!inst->ready && inst->restarts > 0) ++inst->failed_restarts;
  Failure f{inst->key, reason, pipeline_step_, inst->steps_since_start, inst->failed_restarts};
  nlohmann::json fields = Fields(*inst);
  fields.update({{"reason", reason}, {"fault_ts", fault_ts}, {"pipeline_step", pipeline_step_},
                 {"steps_since_start", inst->steps_since_start}});
  events_->Emit("failure", fields);
  spdlog::warn("{} failed at step {}: {}", inst->key, pipeline_step_, reason);
  Decision d = policy_.Decide(f);
  events_->Emit("decision", {{"member", inst->key}, {"action", ActionName(d.action)}, {"reason", d.reason}});
  spdlog::warn("decision: {} ({})", ActionName(d.action), d.reason);
  SaveState();
  if (d.action == Action::kGiveUp) {
    StopAll(true);
    std::string history;
    for (const auto& h : policy_.history()) history += "\n  " + h;
    std::fprintf(stderr, "rl-watchdog: giving up: %s; failures:%s\n", d.reason.c_str(), history.c_str());
    return kExitSoftware;
  }
  if (d.action == Action::kRestartRole) {
    Status s = RestartRole(inst);
    if (!s.ok()) spdlog::error("restart of {}: {}", inst->key, s.ToString());
    return std::nullopt;
  }
  events_->Emit("restart-job", {{"reason", d.reason}, {"full_restarts", policy_.full_restarts()}});
  StopAll(true);
  for (auto& i : instances_) {
    i.lent = false;
    ++i.restarts;
    i.failed_restarts = 0;
  }
  static const std::atomic<bool> never{false};
  Status s = StartAll(never);
  if (!s.ok()) spdlog::error("full restart: {}", s.ToString());
  return std::nullopt;
}

Result<int> Supervisor::Run(const std::atomic<bool>& stop) {
  for (const RoleSpec& r : o_.pipeline.roles) {
    if (r.stall_s > 0) o_.detector.stall_ms[r.kind] = static_cast<int64_t>(r.stall_s * 1000);
  }
  o_.detector.missed = o_.pipeline.missed;
  o_.detector.probe_window_ms = static_cast<int64_t>(o_.pipeline.probe_window_s * 1000);
  RL_ASSIGN_OR_RETURN(watcher_, Watcher::Open(o_.pipeline.heartbeat, o_.detector, events_));
  RL_RETURN_IF_ERROR(MakeDirs(o_.run_dir + "/watchdog"));
  {
    std::ofstream pid(o_.run_dir + "/watchdog/watchdog.pid", std::ios::trunc);
    pid << ::getpid() << "\n";
  }
  LoadState();
  for (size_t s = 0; s < o_.pipeline.roles.size(); ++s) {
    const RoleSpec& r = o_.pipeline.roles[s];
    for (int i = 0; i < r.count; ++i) {
      Instance inst;
      inst.spec = &o_.pipeline.roles[s];
      inst.section = s;
      inst.id = std::to_string(i);
      inst.key = r.kind + "/" + inst.id;
      instances_.push_back(inst);
    }
  }
  events_->Emit("watch", {{"heartbeat", watcher_->endpoint()}, {"roles", instances_.size()},
                          {"restart", o_.pipeline.restart}, {"full_restarts", policy_.full_restarts()}});
  RL_RETURN_IF_ERROR(StartAll(stop));
  while (!stop.load()) {
    std::vector<Detection> ds = watcher_->Pump(kPumpMs);
    Observe(ds);
    ReturnLentSlots();
    KeepSpares();
    for (const Detection& d : ds) {
      Instance* inst = d.event == "failed" ? Find(d.key) : nullptr;
      if (inst == nullptr || !BelongsTo(d.hb.pid, *inst)) continue;
      if (auto code = OnFailure(inst, d.reason, (WallMillis() - d.silent_ms) / 1000.0)) return *code;
    }
    if (auto code = CheckProcesses()) {
      std::remove((o_.run_dir + "/watchdog/watchdog.pid").c_str());
      return *code;
    }
  }
  events_->Emit("detach", {{"reason", "stop signal: the roles keep running"}});
  std::remove((o_.run_dir + "/watchdog/watchdog.pid").c_str());
  return kExitOk;
}

}  // namespace

Result<int> RunSupervisor(SupervisorOptions options, EventLog* events, const std::atomic<bool>& stop) {
  Supervisor s(std::move(options), events);
  return s.Run(stop);
}

Result<int> StopPipeline(const std::string& run_dir, double grace_s) {
  std::string dir = run_dir + "/watchdog";
  std::ifstream wd(dir + "/watchdog.pid");
  long long wpid = 0;
  if (wd >> wpid && wpid > 0 && !ProcessGone(static_cast<pid_t>(wpid))) {
    ::kill(static_cast<pid_t>(wpid), SIGTERM);  // it detaches; then nobody restarts what we stop
    for (int i = 0; i < 500 && !ProcessGone(static_cast<pid_t>(wpid)); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  if (ec) return Status::NotFound("no pipeline to stop in " + run_dir + ": " + ec.message());
  struct Entry {
    long long section, pid, ticks;
    std::string path;
  };
  std::vector<Entry> entries;
  for (const auto& n : names) {
    if (n.size() < 5 || n.substr(n.size() - 4) != ".pid" || n == "watchdog.pid") continue;
    std::ifstream in(dir + "/" + n);
    Entry e{0, 0, -1, dir + "/" + n};
    if (in >> e.pid >> e.ticks >> e.section) entries.push_back(e);
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.section > b.section; });
  int stopped = 0;
  for (const Entry& e : entries) {
    pid_t pid = static_cast<pid_t>(e.pid);
    if (!ProcessGone(pid) && ProcessStartTicks(pid) == e.ticks) {
      StopProcess(pid, static_cast<int64_t>(grace_s * 1000));
      ++stopped;
    }
    std::remove(e.path.c_str());
  }
  return stopped;
}

}  // namespace rl::health
