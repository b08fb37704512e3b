// Supervisor's use of slots: a drained rollout's slot lent to a restarting trainer, spares kept
// warm, placement moves, and the [watchdog] slots each instance runs in.
#include "rl/health/supervisor_internal.h"

#include <algorithm>

#include "rl/core/clock.h"
#include "rl/core/log.h"

namespace rl::health::supervisor_internal {

constexpr int64_t kPumpMs = 50;  // how often processes are looked at: exits are seen within this
// A spare starts once every instance of its role has been ready this long: its start-up (a second
// of CPU for libtorch) must not compete with a role that is still loading its state.
constexpr int64_t kSpareAfterReadyMs = 3000;
// A spare that exits unused is replaced after a delay that doubles, 1 s to 32 s: a command that
// cannot start must not be forked every pump.
constexpr int64_t kSpareBackoffMinMs = 1000, kSpareBackoffMaxMs = 32000;

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

}  // namespace rl::health::supervisor_internal
