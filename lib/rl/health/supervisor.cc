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
#include "rl/health/placement_driver.h"
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
  Status StartSections(size_t first, size_t last, const std::atomic<bool>& stop);
  Status StartAll(const std::atomic<bool>& stop);
  // Stops every role; `failed` (may be null) is the role whose failure made the stop.
  void StopAll(bool graceful, const Instance* failed = nullptr);
  void Observe(const std::vector<Detection>& ds);
  // Looks at every process; returns an exit code when the pipeline is over.
  std::optional<int> CheckProcesses();
  std::optional<int> OnFailure(Instance* inst, const std::string& reason, double fault_ts);
  Status RestartRole(Instance* inst);
  Status RestartGroup(Instance* failed);
  void LendSlotTo(Instance* trainer);
  Status MoveSlot(Instance* from, Instance* to, const std::string& reason);
  void AssignSlots();
  void ReturnLentSlots();
  void KeepSpares();
  Instance* Find(const std::string& key);
  nlohmann::json Fields(const Instance& inst) const;
  void SaveState();
  void LoadState();
  void RestoreHistory(Instance* inst);
  void CountTrainerSteps(pid_t pid, uint64_t steps);

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
  bool state_changed_ = false;   // state.json is behind: saved at the end of the next Observe
  nlohmann::json saved_roles_ = nlohmann::json::object();  // state.json's roles, for adoption
  pid_t saved_trainer_pid_ = 0;  // state.json's trainer and its steps when that was written
  uint64_t saved_trainer_steps_ = 0;
  nlohmann::json saved_placement_;  // state.json's parked instances and slots, for a restarted watchdog
  std::unique_ptr<PlacementDriver> placement_;  // null without [placement]
};

// True for the kinds that talk to the queue and to nothing whose start or stop they wait for: they
// start together once the queue runs. With the queue running they stop cleanly in parallel (each
// gives its leases back); without it they have nothing left to save (their leases come back to
// their successors at once, by holder, and the trainer goes on from its last checkpoint) and
// nothing to wait for.
bool QueueClient(const std::string& kind) {
  return kind == "rollout" || kind == "reward" || kind == "ref" || kind == "train";
}

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

// state.json: the policy's memory, and for each running role its process and history, so that a
// watchdog restarted on the same run directory goes on where this one was (an adopted role is not
// freshly started). Written whole (a watchdog killed mid-write leaves the previous one).
void Supervisor::SaveState() {
  nlohmann::json roles = nlohmann::json::object();
  for (const auto& inst : instances_) {
    if (inst.pid == 0) continue;
    roles[inst.key] = {{"pid", inst.pid}, {"start_ticks", inst.start_ticks}, {"restarts", inst.restarts},
                       {"failed_restarts", inst.failed_restarts}, {"steps_since_start", inst.steps_since_start}};
  }
  nlohmann::json parked = nlohmann::json::array(), slots = nlohmann::json::object();
  for (const auto& inst : instances_) {
    if (inst.parked) parked.push_back(inst.key);
    if (!inst.slots.empty()) slots[inst.key] = inst.slots;
  }
  nlohmann::json j = policy_.State();
  j["roles"] = std::move(roles);
  j["placement"] = {{"parked", parked}, {"slots", slots}};
  j["trainer"] = {{"pid", trainer_pid_}, {"steps", trainer_steps_}};
  Status s = WriteFileAtomic(o_.run_dir + "/watchdog/state.json", j.dump() + "\n");
  if (!s.ok()) spdlog::error("state: {}", s.ToString());
  state_changed_ = false;
}

void Supervisor::LoadState() {
  std::ifstream in(o_.run_dir + "/watchdog/state.json");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object()) return;
  policy_.Restore(j);
  if (j.contains("roles") && j["roles"].is_object()) saved_roles_ = j["roles"];
  if (j.contains("placement") && j["placement"].is_object()) saved_placement_ = j["placement"];
  const nlohmann::json& t = j.contains("trainer") ? j["trainer"] : nlohmann::json::object();
  saved_trainer_pid_ = t.is_object() ? t.value("pid", 0) : 0;
  saved_trainer_steps_ = t.is_object() ? t.value("steps", uint64_t{0}) : 0;
}

// An adopted role takes its history from state.json when that names the same process (pid and
// kernel start time). Without it (a state.json from before histories were kept) the role counts
// the adopted trainer's steps so far as its own (CountTrainerSteps), as it ran beside them.
void Supervisor::RestoreHistory(Instance* inst) {
  auto it = saved_roles_.find(inst->key);
  if (it == saved_roles_.end() || !it->is_object() || it->value("pid", 0) != inst->pid ||
      it->value("start_ticks", int64_t{-2}) != inst->start_ticks) {
    return;
  }
  inst->restarts = it->value("restarts", 0);
  inst->failed_restarts = it->value("failed_restarts", 0);
  inst->steps_since_start = it->value("steps_since_start", int64_t{0});
  inst->history_restored = true;
}

// Trainer steps, from its heartbeats' "steps" counter (steps that process completed; its step
// number also jumps when it loads a checkpoint, which is no progress), counted for every running
// role as steps since its (re)start.
void Supervisor::CountTrainerSteps(pid_t pid, uint64_t steps) {
  if (pid != trainer_pid_) {
    // A trainer process heard from the first time. One this watchdog started counts from 0. One it
    // adopted completed steps before this watchdog listened: those since state.json was written
    // count for the roles that ran then (the adopted ones), all of them when state.json did not
    // say; a role this watchdog started did not see any of them.
    const Instance* trainer = nullptr;
    for (const auto& inst : instances_) {
      if (BelongsTo(pid, inst)) trainer = &inst;
    }
    trainer_pid_ = pid;
    trainer_steps_ = 0;
    if (trainer != nullptr && !trainer->child) {
      uint64_t base = pid == saved_trainer_pid_ ? std::min(saved_trainer_steps_, steps) : 0;
      for (auto& inst : instances_) {
        if (inst.pid == 0 || inst.child) continue;
        inst.steps_since_start += static_cast<int64_t>(steps - base);
      }
      trainer_steps_ = steps;
      state_changed_ = true;
    }
  }
  if (steps <= trainer_steps_) return;
  for (auto& inst : instances_) {
    // What the policy needs to know is whether a role saw a step since its (re)start.
    state_changed_ |= inst.pid != 0 && inst.steps_since_start == 0;
    inst.steps_since_start += static_cast<int64_t>(steps - trainer_steps_);
  }
  trainer_steps_ = steps;
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
    watcher_->membership().Forget(inst.key, inst.pid);
    inst.pid = 0;
    inst.lent = true;
    inst.lent_to = trainer->key;
    // The trainer runs on the rollout's CPUs or GPUs from now on; the rollout comes back on the
    // trainer's old ones, which its dead process no longer uses.
    if (!inst.slots.empty()) std::swap(inst.slots, trainer->slots);
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

// A move of [placement]: `from` is drained like a lent rollout (SIGTERM: it gives its leases back)
// and parked, and `to` starts in the slot it held.
Status Supervisor::MoveSlot(Instance* from, Instance* to, const std::string& reason) {
  nlohmann::json f = {{"from", from->key}, {"to", to->key}, {"slots", from->slots}, {"reason", reason}};
  events_->Emit("placement-move", f);
  spdlog::info("placement: {} gives its slot to {} ({})", from->key, to->key, reason);
  StopProcess(from->pid, static_cast<int64_t>(o_.pipeline.grace_s * 1000));
  RemovePidFile(o_.run_dir, *from);
  watcher_->membership().Forget(from->key, from->pid);
  from->pid = 0;
  from->ready = false;
  from->parked = true;
  to->parked = false;
  to->slots = std::move(from->slots);
  from->slots.clear();
  state_changed_ = true;
  RL_RETURN_IF_ERROR(SpawnInstance(o_.pipeline, watcher_->endpoint(), o_.run_dir, to));
  events_->Emit("start-role", Fields(*to));
  return Status::OK();
}

// Each instance that is not parked takes its role's `slots` from [watchdog] slots, in file order;
// a watchdog restarted on a run takes the parked instances and slots its predecessor saved, when
// they fit the pipeline.
void Supervisor::AssignSlots() {
  if (saved_placement_.is_object()) {
    const nlohmann::json& parked = saved_placement_.value("parked", nlohmann::json::array());
    const nlohmann::json& slots = saved_placement_.value("slots", nlohmann::json::object());
    std::vector<int> uses(o_.pipeline.slots.size(), 0);
    bool fits = parked.is_array() && slots.is_object();
    std::vector<Instance> next = instances_;
    for (auto& inst : next) {
      if (!fits) break;
      inst.parked = std::find(parked.begin(), parked.end(), inst.key) != parked.end();
      inst.slots.clear();
      auto it = slots.find(inst.key);
      if (it != slots.end() && it->is_array()) {
        for (const auto& v : *it) {
          fits = fits && v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<size_t>() < uses.size() &&
                 uses[v.get<size_t>()]++ == 0;
          if (fits) inst.slots.push_back(v.get<int>());
        }
      }
      fits = fits && (inst.parked || static_cast<int>(inst.slots.size()) == inst.spec->slots);
    }
    if (fits) {
      instances_ = std::move(next);
      return;
    }
  }
  int next_slot = 0;
  for (auto& inst : instances_) {
    inst.slots.clear();
    for (int i = 0; !inst.parked && i < inst.spec->slots; ++i) inst.slots.push_back(next_slot++);
  }
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
  return stopped;
}

}  // namespace rl::health
