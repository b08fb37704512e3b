// PlacementDriver: the [placement] of a pipeline at work inside rl-watchdog run (placement.h for
// the search). It watches the trainer's steps, and while every instance of the two roles runs and
// is ready it measures the time per step at the current split (the median of `measure` steps,
// after `settle` steps that let a move's new process load and warm up), feeds it to a SplitSearch,
// and asks the supervisor to move one slot at a time towards the split the search wants next.
// When the search is done it walks to the best split and stays; with `every` = K it searches
// again K steps later, since response lengths, and so the best split, drift as training goes on.
// Each measurement, move and result is an event of the watchdog's log.
// Thread safety: one thread (the supervisor's).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "rl/core/event_log.h"
#include "rl/core/status.h"
#include "rl/health/instance.h"
#include "rl/health/pipeline.h"
#include "rl/health/placement.h"

namespace rl::health {

class PlacementDriver {
 public:
  // Drains `from` (an instance of one role: stopped gracefully, parked) and starts `to` (a parked
  // instance of the other) in the slot `from` held.
  using MoveFn = std::function<Status(Instance* from, Instance* to, const std::string& reason)>;

  PlacementDriver(const PipelineSpec& p, const std::string& run_dir, EventLog* events, MoveFn move);

  // How many instances `role` has in all, running and parked: its count, or for a role of the
  // placement the pool less one (the other role keeps a slot).
  static int Instances(const PipelineSpec& p, const RoleSpec& role);

  // Looks at the trainer's new steps and makes at most one move. Call every pump.
  void Pump(std::vector<Instance>* instances);

  int moves() const { return total_moves_; }

 private:
  int Split(const std::vector<Instance>& instances) const;  // running instances of role A
  bool Steady(const std::vector<Instance>& instances) const;
  void Measured(int x, double seconds);
  void MoveTowards(int x, int target, std::vector<Instance>* instances);

  const PipelineSpec& p_;
  EventLog* events_;
  MoveFn move_;
  StepClock clock_;
  int pool_ = 0;                         // slots of the two roles together
  std::unique_ptr<SplitSearch> search_;  // null between searches
  int64_t steps_ = 0;                    // trainer steps seen
  int64_t next_search_step_ = 0;
  std::vector<double> window_;           // step times at the current split, settle steps first
  int search_moves_ = 0, total_moves_ = 0, searches_ = 0;
};

}  // namespace rl::health
