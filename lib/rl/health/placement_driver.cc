#include "rl/health/placement_driver.h"

#include <algorithm>

#include "rl/core/log.h"
#include "rl/profile/percentile.h"

namespace rl::health {
namespace {

bool Of(const Instance& inst, const std::string& kind) { return inst.spec->kind == kind; }

// events/train-0.jsonl for the trainer train/0.
std::string EventsOf(const std::string& run_dir, std::string member) {
  std::replace(member.begin(), member.end(), '/', '-');
  return run_dir + "/events/" + member + ".jsonl";
}

}  // namespace

int PlacementDriver::Instances(const PipelineSpec& p, const RoleSpec& role) {
  const auto& between = p.placement.between;
  if (std::find(between.begin(), between.end(), role.kind) == between.end()) return role.count;
  int pool = 0;
  for (const RoleSpec& r : p.roles) {
    if (std::find(between.begin(), between.end(), r.kind) != between.end()) pool += r.count;
  }
  return pool - 1;
}

PlacementDriver::PlacementDriver(const PipelineSpec& p, const std::string& run_dir, EventLog* events, MoveFn move)
    : p_(p), events_(events), move_(std::move(move)), clock_(EventsOf(run_dir, p.placement.trainer)) {
  for (const RoleSpec& r : p.roles) {
    if (std::find(p.placement.between.begin(), p.placement.between.end(), r.kind) != p.placement.between.end()) {
      pool_ += r.count;
    }
  }
}

int PlacementDriver::Split(const std::vector<Instance>& instances) const {
  return static_cast<int>(std::count_if(instances.begin(), instances.end(), [this](const Instance& i) {
    return Of(i, p_.placement.between[0]) && !i.parked;
  }));
}

// Every instance of both roles runs and has been heard from, and none is lent to a trainer: steps
// now show what the split does, not a restart.
bool PlacementDriver::Steady(const std::vector<Instance>& instances) const {
  for (const Instance& i : instances) {
    if (!Of(i, p_.placement.between[0]) && !Of(i, p_.placement.between[1])) continue;
    if (i.parked) continue;
    if (i.lent || i.pid == 0 || !i.ready) return false;
  }
  return true;
}

void PlacementDriver::Pump(std::vector<Instance>* instances) {
  std::vector<double> steps = clock_.Poll();
  steps_ += static_cast<int64_t>(steps.size());
  if (!Steady(*instances)) {
    window_.clear();  // a restart or a move still loading: these steps say nothing of the split
    return;
  }
  int x = Split(*instances);
  if (!search_) {
    if (searches_ > 0 && (p_.placement.every == 0 || steps_ < next_search_step_)) return;
    search_ = std::make_unique<SplitSearch>(1, pool_ - 1, p_.placement.search == "sweep");
    search_moves_ = 0;
    ++searches_;
    window_.clear();
    events_->Emit("placement-search", {{"search", searches_}, {"split", x}, {"pool", pool_},
                                        {"between", p_.placement.between}});
    spdlog::info("placement: search {} from {} {} / {} {}", searches_, x, p_.placement.between[0], pool_ - x,
                 p_.placement.between[1]);
  }
  window_.insert(window_.end(), steps.begin(), steps.end());
  const size_t settle = static_cast<size_t>(p_.placement.settle);
  const size_t need = settle + static_cast<size_t>(p_.placement.measure);
  std::optional<int> wanted = search_->Next(x);
  if (wanted && *wanted == x) {
    if (window_.size() < need) return;
    std::vector<double> measured(window_.begin() + static_cast<std::ptrdiff_t>(settle), window_.end());
    Measured(x, profile::Median(&measured));
    wanted = search_->Next(x);
  }
  int target = wanted ? *wanted : search_->best();
  if (target != x) {
    MoveTowards(x, target, instances);
    return;
  }
  if (wanted) return;  // measuring here
  nlohmann::json measured = nlohmann::json::object();
  for (const auto& [k, v] : search_->measured()) measured[std::to_string(k)] = v;
  events_->Emit("placement-found", {{"search", searches_}, {"split", x}, {"seconds", search_->best_seconds()},
                                    {"moves", search_moves_}, {"measured", measured}});
  spdlog::info("placement: {} {} / {} {} is best ({:.3f} s per step), found in {} moves", x,
               p_.placement.between[0], pool_ - x, p_.placement.between[1], search_->best_seconds(), search_moves_);
  search_.reset();
  next_search_step_ = steps_ + p_.placement.every;
}

void PlacementDriver::Measured(int x, double seconds) {
  search_->Record(x, seconds);
  events_->Emit("placement-measure", {{"search", searches_}, {"split", x}, {"seconds", seconds},
                                      {"steps", p_.placement.measure}});
  spdlog::info("placement: {} {} / {} {}: {:.3f} s per step", x, p_.placement.between[0], pool_ - x,
               p_.placement.between[1], seconds);
  window_.clear();
}

// One slot from the role that has too many to the other: its newest running instance is drained,
// the other role's first parked instance starts in the slot.
void PlacementDriver::MoveTowards(int x, int target, std::vector<Instance>* instances) {
  const std::string& give = target > x ? p_.placement.between[1] : p_.placement.between[0];
  const std::string& take = target > x ? p_.placement.between[0] : p_.placement.between[1];
  Instance* from = nullptr;
  Instance* to = nullptr;
  for (Instance& i : *instances) {
    if (Of(i, give) && !i.parked) from = &i;
    if (Of(i, take) && i.parked && to == nullptr) to = &i;
  }
  if (from == nullptr || to == nullptr) return;  // cannot happen: 1 <= target <= pool - 1
  std::string reason = "placement search " + std::to_string(searches_) + ": towards " + std::to_string(target) + " " +
                       p_.placement.between[0] + " / " + std::to_string(pool_ - target) + " " + p_.placement.between[1];
  window_.clear();
  Status s = move_(from, to, reason);
  if (!s.ok()) {
    spdlog::error("placement: move of {} to {}: {}", from->key, to->key, s.ToString());
    return;
  }
  ++search_moves_;
  ++total_moves_;
}

}  // namespace rl::health
