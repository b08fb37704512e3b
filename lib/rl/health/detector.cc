#include "rl/health/detector.h"

#include <algorithm>
#include <cstdio>

namespace rl::health {
namespace {

std::string Secs(int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", ms / 1000.0);
  return buf;
}

}  // namespace

const char* MemberStateName(MemberState s) {
  switch (s) {
    case MemberState::kAlive: return "alive";
    case MemberState::kSuspect: return "suspect";
    case MemberState::kFailed: return "failed";
    case MemberState::kLeft: return "left";
  }
  return "?";
}

void Membership::Forget(const std::string& key, uint64_t pid) {
  constexpr size_t kForgottenKept = 256;  // far more than the processes a full restart stops
  auto it = members_.find(key);
  if (it != members_.end() && it->second.last.pid != pid) forgotten_.emplace_back(key, it->second.last.pid);
  if (pid != 0) forgotten_.emplace_back(key, pid);
  while (forgotten_.size() > kForgottenKept) forgotten_.pop_front();
  members_.erase(key);
}

const Member* Membership::Find(const std::string& key) const {
  auto it = members_.find(key);
  return it == members_.end() ? nullptr : &it->second;
}

int64_t Membership::TrainerStep() const {
  int64_t step = -1;
  for (const auto& [key, m] : members_) {
    if (m.last.role == "train") step = std::max(step, m.last.step);
  }
  return step;
}

Detection Membership::Make(const char* event, const Member& m, std::string reason) const {
  Detection d;
  d.event = event;
  d.key = m.last.Key();
  d.hb = m.last;
  d.reason = std::move(reason);
  return d;
}

bool Membership::Active(const Member& m) const {
  auto it = o_.active_phases.find(m.last.role);
  return it != o_.active_phases.end() && it->second.count(m.last.phase) > 0;
}

void Membership::StartProbe(Member* m, int64_t now_ms, int64_t window_ms, std::vector<Detection>* out) {
  m->probe_rid = next_probe_rid_++;
  m->progress_at_probe = m->progress_sum;
  m->probe_deadline_ms = now_ms + window_ms + 2 * static_cast<int64_t>(m->last.interval_ms);
  if (!m->stall_suspect) m->probe_deadline_ms = now_ms + static_cast<int64_t>(m->last.interval_ms);
  Detection d = Make("probe", *m, m->reason);
  d.routing = m->routing;
  d.probe_rid = m->probe_rid;
  d.probe_window_ms = window_ms;
  out->push_back(std::move(d));
}

void Membership::OnProbeAnswer(Member* m, const Heartbeat& hb, int64_t now_ms, std::vector<Detection>* out) {
  bool progressed = hb.ProgressSum() != m->progress_at_probe;
  m->probe_rid = 0;
  char why[160];
  if (progressed || hb.cpu_busy >= o_.busy_cores) {
    std::snprintf(why, sizeof why, "probe: %s, %.2f cores busy", progressed ? "progress" : "no progress", hb.cpu_busy);
    m->state = MemberState::kAlive;
    m->stall_suspect = false;
    m->progress_ms = now_ms;  // a slow but working role gets a whole threshold again
    out->push_back(Make("cleared", *m, why));
    return;
  }
  std::snprintf(why, sizeof why, "%s; a probe found no progress and %.2f cores busy", m->reason.c_str(),
                std::max(0.0, hb.cpu_busy));
  m->state = MemberState::kFailed;
  m->reason = why;
  Detection d = Make("failed", *m, why);
  d.silent_ms = now_ms - m->progress_ms;
  out->push_back(std::move(d));
}

std::vector<Detection> Membership::OnHeartbeat(const Received& r, int64_t now_ms) {
  std::vector<Detection> out;
  const Heartbeat& hb = r.hb;
  int64_t sent_at = now_ms - (o_.age_ms ? std::max<int64_t>(0, o_.age_ms(hb)) : 0);
  auto it = members_.find(hb.Key());
  if (hb.leaving && (it == members_.end() || it->second.last.pid != hb.pid)) return out;  // a goodbye from
  // a process the table no longer holds (stopped on purpose and forgotten): nothing to say
  if (it == members_.end() || it->second.last.pid != hb.pid || it->second.last.started_ms != hb.started_ms) {
    if (std::find(forgotten_.begin(), forgotten_.end(), std::make_pair(hb.Key(), hb.pid)) != forgotten_.end()) {
      return out;  // sent before its process was stopped on purpose, read after: not a join
    }
    uint64_t previous = it == members_.end() ? 0 : it->second.last.pid;
    Member m;
    m.last = hb;
    m.routing = r.routing;
    m.seen_ms = sent_at;
    m.progress_ms = now_ms;
    m.progress_sum = hb.ProgressSum();
    m.state = hb.leaving ? MemberState::kLeft : MemberState::kAlive;
    Detection d = Make("joined", m);
    d.previous_pid = previous;
    out.push_back(std::move(d));
    if (hb.leaving) out.push_back(Make("left", m, "stopped on purpose"));
    members_[hb.Key()] = std::move(m);
    return out;
  }
  Member& m = it->second;
  bool phase_changed = hb.phase != m.last.phase;
  bool moved = hb.ProgressSum() != m.progress_sum || phase_changed;
  m.last = hb;
  m.routing = r.routing;
  m.seen_ms = std::max(m.seen_ms, sent_at);
  // An old heartbeat (sent before the silence that made the member suspect or failed) says
  // nothing about now.
  bool fresh = now_ms - m.seen_ms <= o_.missed * static_cast<int64_t>(hb.interval_ms);
  if (moved) {
    m.progress_ms = now_ms;
    m.progress_sum = hb.ProgressSum();
  }
  if (m.state == MemberState::kLeft) return out;
  if (hb.leaving) {
    m.state = MemberState::kLeft;
    out.push_back(Make("left", m, "stopped on purpose"));
    return out;
  }
  if (m.state == MemberState::kSuspect) {
    if (!m.stall_suspect && !fresh) {
      return out;
    } else if (!m.stall_suspect) {
      m.state = MemberState::kAlive;
      m.probe_rid = 0;
      out.push_back(Make("cleared", m, "heartbeats resumed"));
    } else if (hb.probe_rid != 0 && hb.probe_rid == m.probe_rid) {
      OnProbeAnswer(&m, hb, now_ms, &out);
    } else if (moved) {
      m.state = MemberState::kAlive;
      m.stall_suspect = false;
      m.probe_rid = 0;
      out.push_back(Make("cleared", m, phase_changed ? "phase changed" : "progress resumed"));
    }
  } else if (m.state == MemberState::kFailed && fresh && (moved || !m.stall_suspect)) {
    // Failed for silence, it speaks again (a long freeze ended); failed for a stall, it moves.
    m.state = MemberState::kAlive;
    m.stall_suspect = false;
    out.push_back(Make("recovered", m, moved ? "progress resumed" : "heartbeats resumed"));
  }
  return out;
}

std::vector<Detection> Membership::Tick(int64_t now_ms) {
  std::vector<Detection> out;
  for (auto& entry : members_) {
    // A reference, not a structured binding: C++17 lambdas may not capture bindings (clang
    // refuses; the fuzz build uses clang).
    Member& m = entry.second;
    if (m.state == MemberState::kLeft || m.state == MemberState::kFailed) continue;
    int64_t interval = static_cast<int64_t>(m.last.interval_ms);
    int64_t silent = now_ms - m.seen_ms;
    auto fail = [&](std::string why, int64_t since_ms) {
      m.state = MemberState::kFailed;
      m.reason = why;
      m.probe_rid = 0;
      Detection d = Make("failed", m, std::move(why));
      d.silent_ms = since_ms;
      out.push_back(std::move(d));
    };
    if (o_.process_gone && o_.process_gone(m.last)) {
      m.stall_suspect = true;  // a gone process never recovers by heartbeats of its own
      fail("process " + std::to_string(m.last.pid) + " is gone", silent);
      continue;
    }
    if (m.state == MemberState::kSuspect) {
      if (m.probe_rid != 0 && now_ms > m.probe_deadline_ms) {
        fail(m.reason + " and no answer to a probe", m.stall_suspect ? now_ms - m.progress_ms : silent);
      }
      continue;
    }
    if (silent > o_.missed * interval) {
      m.state = MemberState::kSuspect;
      m.stall_suspect = false;
      m.reason = "no heartbeat for " + Secs(silent);
      Detection d = Make("suspect", m, m.reason);
      d.silent_ms = silent;
      out.push_back(std::move(d));
      StartProbe(&m, now_ms, 0, &out);
      continue;
    }
    auto stall = o_.stall_ms.find(m.last.role);
    if (!Active(m) || stall == o_.stall_ms.end() || now_ms - m.progress_ms <= stall->second) continue;
    std::string why = "no progress in phase " + m.last.phase + " for " + Secs(now_ms - m.progress_ms);
    if (o_.probe_stalls.count(m.last.role) == 0) {
      m.stall_suspect = true;
      fail(why, now_ms - m.progress_ms);
      continue;
    }
    m.state = MemberState::kSuspect;
    m.stall_suspect = true;
    m.reason = why;
    Detection d = Make("suspect", m, why);
    d.silent_ms = now_ms - m.progress_ms;
    out.push_back(std::move(d));
    StartProbe(&m, now_ms, o_.probe_window_ms, &out);
  }
  return out;
}

}  // namespace rl::health
