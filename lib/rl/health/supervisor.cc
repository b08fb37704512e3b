// Supervisor (supervisor.h): starting and stopping the roles, failures and restarts, the main loop;
// RunSupervisor and StopPipeline.
#include "rl/health/supervisor_internal.h"

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
#include "rl/health/cpu_quota.h"
#include "rl/health/slots.h"

namespace rl::health {
namespace supervisor_internal {

constexpr int64_t kPumpMs = 50;  // how often processes are looked at: exits are seen within this

nlohmann::json Supervisor::Fields(const Instance& inst) const {
  return {{"member", inst.key}, {"kind", inst.spec->kind}, {"instance", inst.id}, {"pid", inst.pid}};
}

Instance* Supervisor::Find(const std::string& key) {
  for (auto& inst : instances_) {
    if (inst.key == key) return &inst;
  }
  return nullptr;
}

// Starts (or adopts) the instances of sections first..last and waits until each heartbeats, one
// exits, or their ready timeout passes (the main loop then treats it as a failed start).
Status Supervisor::StartSections(size_t first, size_t last, const std::atomic<bool>& stop) {
  auto in = [first, last](const Instance& inst) { return inst.section >= first && inst.section <= last; };
  double ready_s = 0;
  for (auto& inst : instances_) {
    if (!in(inst) || inst.lent || inst.parked) continue;
    ready_s = std::max(ready_s, inst.spec->ready_s);
    if (inst.pid != 0 && !ProcessGone(inst.pid)) continue;
    if (AdoptFromPidFile(o_.run_dir, &inst)) {
      RestoreHistory(&inst);
      nlohmann::json f = Fields(inst);
      f.update({{"history", inst.history_restored ? "state.json" : "none"}, {"restarts", inst.restarts},
                {"steps_since_start", inst.steps_since_start}});
      events_->Emit("adopted", f);
      spdlog::info("adopted {} (pid {}) from a previous watchdog", inst.key, inst.pid);
      state_changed_ = true;
      continue;
    }
    state_changed_ = true;
    RL_RETURN_IF_ERROR(SpawnInstance(o_.pipeline, watcher_->endpoint(), o_.run_dir, &inst));
    events_->Emit("start-role", Fields(inst));
    spdlog::info("started {} (pid {})", inst.key, inst.pid);
  }
  int64_t until = MonoMillis() + static_cast<int64_t>(ready_s * 1000);
  while (!stop.load() && MonoMillis() < until) {
    Observe(watcher_->Pump(kPumpMs));
    bool all = true, exited = false;
    for (auto& inst : instances_) {
      if (!in(inst) || inst.lent || inst.parked) continue;
      all = all && inst.ready;
      exited = exited || ProcessGone(inst.pid);
    }
    if (all || exited) break;
  }
  return Status::OK();
}

// Tables start in file order, each once the one before heartbeats, except that neighbouring tables
// of queue clients start together: they wait for the queue only, and a full restart then costs
// the slowest client's start, not the sum.
Status Supervisor::StartAll(const std::atomic<bool>& stop) {
  const auto& roles = o_.pipeline.roles;
  for (size_t s = 0; s < roles.size() && !stop.load();) {
    size_t last = s;
    while (QueueClient(roles[s].kind) && last + 1 < roles.size() && QueueClient(roles[last + 1].kind)) ++last;
    RL_RETURN_IF_ERROR(StartSections(s, last, stop));
    s = last + 1;
  }
  return Status::OK();
}

// Stops every role. Tables are stopped newest first, as they were started, except that
// neighbouring tables of queue clients go together: stopping N roles costs the slowest stop, not
// the sum. A role that cannot stop cleanly gets no grace: the failed one (a frozen or stalled
// process whose clean stop would only be waited for) and, when the queue failed or is gone, every
// queue client (a clean stop needs the queue; it would only wait for its own timeouts until
// SIGKILL, one grace per role).
void Supervisor::StopAll(bool graceful, const Instance* failed) {
  int64_t t0 = MonoMillis();
  spares_.StopAll();
  int64_t grace = graceful ? static_cast<int64_t>(o_.pipeline.grace_s * 1000) : 0;
  bool queue_dead = false;
  for (const auto& inst : instances_) {
    if (inst.spec->kind != "queue") continue;
    queue_dead |= &inst == failed || inst.pid == 0 || ProcessGone(inst.pid);
  }
  std::vector<std::string> killed;
  std::vector<StopOrder> wave;
  auto flush = [&wave] {
    StopProcesses(wave);
    wave.clear();
  };
  int roles = 0;
  const std::string* wave_kind = nullptr;
  for (auto it = instances_.rbegin(); it != instances_.rend(); ++it) {
    if (it->pid == 0) continue;
    ++roles;
    bool client = QueueClient(it->spec->kind);
    bool together = wave_kind != nullptr && (*wave_kind == it->spec->kind || (client && QueueClient(*wave_kind)));
    if (!together) flush();
    wave_kind = &it->spec->kind;
    bool no_grace = &*it == failed || (queue_dead && client);
    if (no_grace && grace > 0 && !ProcessGone(it->pid)) killed.push_back(it->key);
    wave.push_back({it->pid, no_grace ? 0 : grace});
  }
  flush();
  for (auto& inst : instances_) {
    if (inst.pid == 0) continue;
    RemovePidFile(o_.run_dir, inst);
    watcher_->membership().Forget(inst.key, inst.pid);
    inst.pid = 0;
    inst.ready = false;
  }
  nlohmann::json f = {{"roles", roles}, {"seconds", (MonoMillis() - t0) / 1000.0}, {"killed", killed}};
  if (!killed.empty()) {
    f["reason"] = queue_dead ? "the queue is gone: its clients have nothing to save and cannot stop cleanly"
                             : "the failed role gets no grace";
  }
  events_->Emit("stopped-all", f);
  spdlog::info("stopped {} roles in {:.2f} s ({} killed at once)", roles, f["seconds"].get<double>(), killed.size());
}

// Readiness of (re)started instances and the trainer's completed steps, from heartbeats.
void Supervisor::Observe(const std::vector<Detection>& ds) {
  for (auto& inst : instances_) {
    const Member* m = inst.ready || inst.pid == 0 ? nullptr : watcher_->membership().Find(inst.key);
    if (m == nullptr || !BelongsTo(m->last.pid, inst)) continue;
    inst.ready = true;
    inst.ready_ms = MonoMillis();
    inst.failed_restarts = 0;
    state_changed_ = true;
    nlohmann::json f = Fields(inst);
    f["seconds"] = (MonoMillis() - inst.started_ms) / 1000.0;
    events_->Emit("ready", f);
  }
  // The ranks of a group trainer step together: rank 0 (train/0) speaks for them, since the step
  // count below follows one trainer process.
  const bool group_trainer = std::any_of(o_.pipeline.roles.begin(), o_.pipeline.roles.end(),
                                         [](const RoleSpec& r) { return r.kind == "train" && r.group; });
  for (const auto& [key, m] : watcher_->membership().members()) {
    if (m.last.role != "train" || m.state == MemberState::kLeft) continue;
    if (group_trainer && key != "train/0") continue;
    auto it = m.last.counters.find("steps");
    CountTrainerSteps(static_cast<pid_t>(m.last.pid), it == m.last.counters.end() ? 0 : it->second);
    pipeline_step_ = m.last.step;
  }
  (void)ds;
  if (state_changed_) SaveState();
}

// When the instance's own process heartbeats under another name than its table's (a kind that is
// not the role its heartbeats name, say "trainer" for rl-train grpo's "train"), what it is: the
// watchdog then waits for heartbeats that never come, and only this says why.
std::string Supervisor::MisnamedHeartbeat(const Instance& inst) const {
  for (const auto& [key, m] : watcher_->membership().members()) {
    if (key == inst.key || !BelongsTo(m.last.pid, inst)) continue;
    return "; its process heartbeats as " + key + ": set kind = \"" + m.last.role + "\" in [role." +
           inst.spec->name + "]";
  }
  return "";
}

std::optional<int> Supervisor::CheckProcesses() {
  for (auto& inst : instances_) {
    if (inst.pid == 0 || inst.lent) continue;
    std::optional<int> status = inst.child ? ReapChild(inst.pid) : std::nullopt;
    if (!status && !ProcessGone(inst.pid)) {
      if (!inst.ready && MonoMillis() - inst.started_ms > static_cast<int64_t>(inst.spec->ready_s * 1000)) {
        std::string why = "no heartbeat within " + std::to_string(static_cast<int>(inst.spec->ready_s)) + " s of its start";
        why += MisnamedHeartbeat(inst);
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

Status Supervisor::RestartRole(Instance* inst) {
  if (inst->spec->group) return RestartGroup(inst);
  pid_t old = inst->pid;
  if (old != 0) StopProcess(old, 0);  // it failed: no grace
  watcher_->membership().Forget(inst->key, old);
  if (o_.pipeline.standby && inst->spec->kind == "train") LendSlotTo(inst);
  ++inst->restarts;
  RL_ASSIGN_OR_RETURN(bool from_spare, spares_.Activate(o_.pipeline, o_.run_dir, inst));
  if (from_spare) spare_backoff_.erase(inst->spec);  // a spare that served: the next one starts without delay
  if (!from_spare) RL_RETURN_IF_ERROR(SpawnInstance(o_.pipeline, watcher_->endpoint(), o_.run_dir, inst));
  nlohmann::json f = Fields(*inst);
  f["old_pid"] = old;
  f["spare"] = from_spare;
  events_->Emit("restart", f);
  spdlog::info("restarted {} (pid {} -> {})", inst->key, old, inst->pid);
  state_changed_ = true;
  return Status::OK();
}

// A rank of a group role failed: the others would wait on it (or fail their next collective), so
// every instance of the role stops at once and starts again under the next RL_GROUP_EPOCH.
Status Supervisor::RestartGroup(Instance* failed) {
  std::vector<StopOrder> orders;
  for (auto& i : instances_) {
    if (i.spec == failed->spec && i.pid != 0) orders.push_back({i.pid, 0});
  }
  StopProcesses(orders);
  for (auto& i : instances_) {
    if (i.spec != failed->spec) continue;
    pid_t old = i.pid;
    watcher_->membership().Forget(i.key, old);
    if (old != 0 && i.child) (void)ReapChild(old);
    ++i.restarts;
    RL_RETURN_IF_ERROR(SpawnInstance(o_.pipeline, watcher_->endpoint(), o_.run_dir, &i));
    nlohmann::json f = Fields(i);
    f["old_pid"] = old;
    f["group"] = true;
    f["failed"] = i.key == failed->key;
    events_->Emit("restart", f);
    spdlog::info("restarted {} with its group (pid {} -> {}, epoch {})", i.key, old, i.pid, i.restarts);
  }
  state_changed_ = true;
  return Status::OK();
}

std::optional<int> Supervisor::OnFailure(Instance* inst, const std::string& reason, double fault_ts) {
  // A restart of ours that failed before it was heard from (an adopted role was heard from by the
  // watchdog that started it).
  if (!inst->ready && inst->child && inst->restarts > 0) ++inst->failed_restarts;
  Failure f{inst->key, reason, pipeline_step_, inst->steps_since_start, inst->failed_restarts};
  nlohmann::json fields = Fields(*inst);
  fields.update({{"reason", reason}, {"fault_ts", fault_ts}, {"pipeline_step", pipeline_step_},
                 {"steps_since_start", inst->steps_since_start}});
  events_->Emit("failure", fields);
  spdlog::warn("{} failed at step {}: {}", inst->key, pipeline_step_, reason);
  Decision d = policy_.Decide(f);
  if (d.action == Action::kRestartRole && inst->spec->group) {
    d.reason = "restart " + inst->key + " with every instance of role " + inst->spec->name + " (a group)";
  }
  events_->Emit("decision", {{"member", inst->key}, {"action", ActionName(d.action)}, {"reason", d.reason}});
  spdlog::warn("decision: {} ({})", ActionName(d.action), d.reason);
  SaveState();
  if (d.action == Action::kGiveUp) {
    StopAll(true, inst);
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
  StopAll(true, inst);
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

// Slots with quotas need a cpu controller we may make groups in: without one the roles would run
// unbounded and a placement would measure the wrong thing, so the pipeline does not start.
Status Supervisor::CheckQuotas() const {
  auto with_quota = std::find_if(o_.pipeline.slots.begin(), o_.pipeline.slots.end(), [](const std::string& text) {
    auto slot = ParseSlot(text);
    return slot.ok() && slot->quota > 0;
  });
  if (with_quota == o_.pipeline.slots.end()) return Status::OK();
  auto controller = FindCpuController();
  if (controller.ok()) return Status::OK();
  return Status::Unavailable("slot '" + *with_quota + "' has a CPU quota and this machine cannot enforce one: " +
                             controller.status().message() + " (man rl-watchdog, SLOTS)");
}

Result<int> Supervisor::Run(const std::atomic<bool>& stop) {
  for (const RoleSpec& r : o_.pipeline.roles) {
    if (r.stall_s > 0) o_.detector.stall_ms[r.kind] = static_cast<int64_t>(r.stall_s * 1000);
  }
  o_.detector.missed = o_.pipeline.missed;
  o_.detector.probe_window_ms = static_cast<int64_t>(o_.pipeline.probe_window_s * 1000);
  RL_RETURN_IF_ERROR(CheckQuotas());
  RL_ASSIGN_OR_RETURN(watcher_, Watcher::Open(o_.pipeline.heartbeat, o_.detector, events_));
  RL_RETURN_IF_ERROR(MakeDirs(o_.run_dir + "/watchdog"));
  {
    std::ofstream pid(o_.run_dir + "/watchdog/watchdog.pid", std::ios::trunc);
    pid << ::getpid() << "\n";
  }
  LoadState();
  for (size_t s = 0; s < o_.pipeline.roles.size(); ++s) {
    const RoleSpec& r = o_.pipeline.roles[s];
    for (int i = 0; i < PlacementDriver::Instances(o_.pipeline, r); ++i) {
      Instance inst;
      inst.spec = &o_.pipeline.roles[s];
      inst.section = s;
      inst.id = std::to_string(i);
      inst.key = r.kind + "/" + inst.id;
      inst.parked = i >= r.count;  // a placement's room to grow
      instances_.push_back(inst);
    }
  }
  AssignSlots();
  if (!o_.pipeline.placement.between.empty()) {
    placement_ = std::make_unique<PlacementDriver>(
        o_.pipeline, o_.run_dir, events_,
        [this](Instance* from, Instance* to, const std::string& why) { return MoveSlot(from, to, why); });
  }
  events_->Emit("watch", {{"heartbeat", watcher_->endpoint()}, {"roles", instances_.size()},
                          {"restart", o_.pipeline.restart}, {"full_restarts", policy_.full_restarts()}});
  RL_RETURN_IF_ERROR(StartAll(stop));
  while (!stop.load()) {
    std::vector<Detection> ds = watcher_->Pump(kPumpMs);
    Observe(ds);
    ReturnLentSlots();
    KeepSpares();
    if (placement_) placement_->Pump(&instances_);
    for (const Detection& d : ds) {
      Instance* inst = d.event == "failed" ? Find(d.key) : nullptr;
      if (inst == nullptr || !BelongsTo(d.hb.pid, *inst)) continue;
      if (auto code = OnFailure(inst, d.reason, (WallMillis() - d.silent_ms) / 1000.0)) return *code;
    }
    if (auto code = CheckProcesses()) {
      std::remove((o_.run_dir + "/watchdog/watchdog.pid").c_str());
      RemoveQuotaGroups(o_.run_dir);
      return *code;
    }
  }
  events_->Emit("detach", {{"reason", "stop signal: the roles keep running"}});
  std::remove((o_.run_dir + "/watchdog/watchdog.pid").c_str());
  return kExitOk;
}

}  // namespace supervisor_internal

using supervisor_internal::QueueClient;
using supervisor_internal::Supervisor;


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
    std::string path, kind;
  };
  std::vector<Entry> entries;
  for (const auto& n : names) {
    if (n.size() < 5 || n.substr(n.size() - 4) != ".pid" || n == "watchdog.pid") continue;
    std::ifstream in(dir + "/" + n);
    Entry e{0, 0, -1, dir + "/" + n, n.substr(0, n.rfind('-'))};  // KIND-ID.pid
    if (in >> e.pid >> e.ticks >> e.section) entries.push_back(e);
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.section > b.section; });
  // Newest table first, as StopAll: the tables of queue clients together, each other table alone.
  int stopped = 0;
  std::vector<StopOrder> wave;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    pid_t pid = static_cast<pid_t>(e.pid);
    if (!ProcessGone(pid) && ProcessStartTicks(pid) == e.ticks) {
      wave.push_back({pid, static_cast<int64_t>(grace_s * 1000)});
      ++stopped;
    }
    const Entry* next = i + 1 < entries.size() ? &entries[i + 1] : nullptr;
    bool together = next != nullptr && (next->section == e.section || (QueueClient(e.kind) && QueueClient(next->kind)));
    if (!together) {
      StopProcesses(wave);
      wave.clear();
    }
  }
  for (const Entry& e : entries) std::remove(e.path.c_str());
  RemoveQuotaGroups(run_dir);
  return stopped;
}

}  // namespace rl::health