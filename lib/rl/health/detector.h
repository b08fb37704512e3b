// Membership: the watchdog's table of roles, built from heartbeats only (soft state: a restarted
// watchdog rebuilds it within a few intervals), and the role- and phase-aware detection rules of
// docs/design.md "Control plane":
//
//   heartbeat loss   no heartbeat for `missed` intervals -> suspect; a probe (answer now) that
//                    gets no answer within one more interval -> failed. A process on this host
//                    that is gone is failed at once.
//   trainer stall    phase `train` and no progress counter moved for stall_ms -> failed.
//   rollout stall    phase `generate` (it holds leased work) and nothing produced for stall_ms
//                    -> suspect; a probe measures the process's CPU over probe_window_ms: busy
//                    (a long generation) or progress since -> cleared, otherwise -> failed.
//   idle phases      any other phase (waiting for data, for a reward command, for weights,
//                    checkpointing) never counts: the stall clock restarts on every phase change.
//
// Time is passed in (monotonic milliseconds), so the rules are tested without sleeping.
// Thread safety: one thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "rl/health/heartbeat.h"
#include "rl/health/receiver.h"

namespace rl::health {

struct DetectorOptions {
  int missed = 3;                  // heartbeats missed before a role is suspect
  int64_t probe_window_ms = 2000;  // CPU measuring window of a stall probe
  double busy_cores = 0.2;         // a stall probe answer with at least this much CPU clears
  // Per role kind: the active phases and how long progress may stand still in them.
  std::map<std::string, std::set<std::string>> active_phases = {{"train", {"train"}}, {"rollout", {"generate"}}};
  std::map<std::string, int64_t> stall_ms = {{"train", 30000}, {"rollout", 60000}};
  // Roles whose stall is confirmed by a probe before they are failed (the others fail at once).
  std::set<std::string> probe_stalls = {"rollout"};
  // True when the process of a heartbeat is known to be gone (same host, pid no longer running).
  // Null: never known.
  std::function<bool(const Heartbeat&)> process_gone;
  // How long ago a heartbeat was sent, where that can be known (its sent_ms on this host's
  // clock); 0 otherwise. Null: always 0. A heartbeat counts as a sign of life at the time it was
  // sent, so those that queued up while the watchdog was frozen do not make a role that froze
  // meanwhile look alive.
  std::function<int64_t(const Heartbeat&)> age_ms;
};

enum class MemberState { kAlive, kSuspect, kFailed, kLeft };
const char* MemberStateName(MemberState s);

struct Member {
  Heartbeat last;
  std::string routing;
  MemberState state = MemberState::kAlive;
  std::string reason;            // why suspect or failed
  int64_t seen_ms = 0;           // last heartbeat
  int64_t progress_ms = 0;       // last change of phase or of a progress counter
  uint64_t progress_sum = 0;
  uint64_t probe_rid = 0;        // the probe in flight, 0: none
  int64_t probe_deadline_ms = 0;
  uint64_t progress_at_probe = 0;
  bool stall_suspect = false;    // suspect for a stall (else for heartbeat loss)
};

// One change in the table, for the event log and the supervisor.
struct Detection {
  std::string event;  // joined, left, suspect, probe, cleared, failed, recovered
  std::string key;    // role/id
  Heartbeat hb;       // the member's last heartbeat
  std::string reason;
  int64_t silent_ms = 0;          // failed/suspect: since the last sign of life (fault estimate)
  uint64_t previous_pid = 0;      // joined: the pid this instance had before, 0: new
  std::string routing;            // probe: where to send it
  uint64_t probe_rid = 0;
  int64_t probe_window_ms = 0;
};

class Membership {
 public:
  explicit Membership(DetectorOptions options) : o_(std::move(options)) {}

  std::vector<Detection> OnHeartbeat(const Received& r, int64_t now_ms);
  // Applies the time rules. Returns "probe" detections the caller must send.
  std::vector<Detection> Tick(int64_t now_ms);
  // Drops a member (the supervisor stopped it on purpose, process `pid`), and from now on ignores
  // the heartbeats of that process and of the member's last one: those still queued from before
  // its stop would make it join again as a ghost of a process that is gone.
  void Forget(const std::string& key, uint64_t pid);
  const std::map<std::string, Member>& members() const { return members_; }
  const Member* Find(const std::string& key) const;
  // The largest step any trainer reported (the pipeline's step), -1 when none did.
  int64_t TrainerStep() const;

 private:
  Detection Make(const char* event, const Member& m, std::string reason = "") const;
  bool Active(const Member& m) const;
  void StartProbe(Member* m, int64_t now_ms, int64_t window_ms, std::vector<Detection>* out);
  void OnProbeAnswer(Member* m, const Heartbeat& hb, int64_t now_ms, std::vector<Detection>* out);

  DetectorOptions o_;
  std::map<std::string, Member> members_;
  std::deque<std::pair<std::string, uint64_t>> forgotten_;  // (key, pid), the newest kForgottenKept
  uint64_t next_probe_rid_ = 1;
};

}  // namespace rl::health
