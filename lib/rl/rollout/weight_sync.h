// WeightSync: how rl-rollout gets new weight versions over UCX (docs/design.md "Weights": a rollout
// keeps generating with version v while v+1 arrives into host memory, and switches at a batch
// boundary).
//
// A thread of its own asks the sources (rl-train, relays, other rollouts) every poll interval
// what they hold. When one holds a version newer than the policy's, it pulls it (puller.h: every
// chunk checked as it arrives, resumed from another source when one dies, stalls or corrupts,
// whole and matching its digest before anyone sees it) and decodes it into a model, all off the
// generating thread. The rollout loop takes it at its next batch boundary (SwitchIfNewer; with
// --on-new-weights interrupt, before its next decode step), so a partial or corrupt bundle can
// never reach the policy. With a bind endpoint the rollout also
// serves each version it pulled, as a relay.
//
// Fallback: when for fallback_s no source answered and gave us what it had (none reachable,
// UCX cannot be set up, or every pull failed), InFallback() turns true and the loop reads weights
// files from the checkpoint directory instead. One warning line says why for each cause (not
// one per batch); one line says so when UCX works again and the files are left alone.
//
// Thread safety: SwitchIfNewer, HasNewer and InFallback from the loop's thread; the rest is the sync's.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "rl/core/event_log.h"
#include "rl/core/status.h"
#include "rl/model/transformer.h"
#include "rl/rollout/policy.h"
#include "rl/weights/puller.h"
#include "rl/weights/source.h"

namespace rl::rollout {

struct WeightSyncOptions {
  std::vector<std::string> sources;  // ZeroMQ endpoints of weight sources
  std::string bind;                  // serve what we pulled here; empty: do not serve
  uint32_t max_pulls = 4;
  int poll_ms = 20;         // between looks at the sources (an info round trip is ~0.2 ms)
  int stall_ms = 5000;      // no chunk for this long: the pull moves on to another source
  double fallback_s = 10;   // no working source for this long: read weights files instead
  std::string fallback_dir;  // the checkpoint directory, for the warning (may be empty)
  std::string id = "0";
  EventLog* events = nullptr;  // may be null; must outlive the sync
  // The process's stop flag (may be null): once set, pulls stop and nothing more is warned about.
  const std::atomic<bool>* process_stop = nullptr;
};

class WeightSync {
 public:
  // Starts the thread; `held` is the version the policy holds already (none: pull any). A UCX
  // that cannot be set up is no error (the sync starts in fallback); a bind that fails is.
  static Result<std::unique_ptr<WeightSync>> Start(WeightSyncOptions options, std::optional<uint64_t> held);
  ~WeightSync();  // stops a pull in progress and the thread

  // At a batch boundary (or a decode step): switches *policy to the newest version that arrived, if it is newer
  // than the policy's. Logs it and emits a "weights" event (via "ucx"). True when it switched.
  bool SwitchIfNewer(Policy* policy);
  // Whether a version newer than `version` has arrived, which SwitchIfNewer would take.
  bool HasNewer(uint64_t version);
  // True while weights files are the way versions come (see the file comment).
  bool InFallback() const { return fallback_.load(); }
  // The endpoint this rollout serves weights on; empty when it does not.
  std::string endpoint() const { return relay_ ? relay_->endpoint() : std::string(); }

 private:
  struct Arrived {
    model::Transformer model;
    uint64_t version;
    std::string source, digest;
    weights::PullReport report;
    int64_t at_ms;  // when it was ready
  };
  explicit WeightSync(WeightSyncOptions o) : options_(std::move(o)) {}
  void Run();
  bool Stopping() const;
  // One look at the sources, and a pull when one holds something newer. OK when a source
  // answered and we hold what it has (or got it now).
  // *cause names the kind of failure ("unreachable", "pull") for the once-per-cause warning.
  Status Step(std::string* cause);
  // Pulls the newest version at least min_version, decodes it and leaves it in arrived_.
  Status Pull(uint64_t min_version);
  void Succeeded();
  // Counts towards the fallback; `now` skips the fallback_s bound (UCX cannot come back).
  void Failed(const std::string& cause, const Status& why, bool now);

  WeightSyncOptions options_;
  std::shared_ptr<weights::UcxContext> context_;  // null: UCX could not be set up
  std::unique_ptr<weights::Puller> puller_;
  std::unique_ptr<weights::Source> relay_;
  weights::PullOptions pull_;  // test hooks from the environment
  std::atomic<bool> stop_{false};
  std::atomic<bool> fallback_{false};
  std::atomic<int64_t> current_{-1};  // the policy's version as the loop last saw it; -1: none
  int64_t pulled_ = -1;                  // the newest version the thread pulled; -1: none
  std::optional<uint64_t> bad_version_;  // pulled whole but would not decode: not pulled again
  int64_t last_ok_ms_ = 0;               // when a source last answered and gave what it had
  std::set<std::string> warned_;         // causes warned about since UCX last worked

  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Arrived> arrived_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace rl::rollout
