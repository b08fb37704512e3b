#include "rl/profile/plan_sim.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <queue>
#include <random>

namespace rl::profile {
namespace {

constexpr double kPollS = 0.2;  // the trainer's get waits this long before its feeder runs again
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxEvents = 50000000;  // a simulation that stops making progress ends here
constexpr int64_t kMaxIdlePolls = 10000;  // ... as does one where only the trainer's polls happen

// Linear interpolation in points sorted by x, extrapolated along the nearest segment.
double Interpolate(const std::vector<std::pair<double, double>>& p, double x) {
  if (p.size() == 1) return p[0].second;
  size_t i = 1;
  while (i + 1 < p.size() && p[i].first < x) ++i;
  const auto& [x0, y0] = p[i - 1];
  const auto& [x1, y1] = p[i];
  return x1 == x0 ? y1 : std::max(0.0, y0 + (y1 - y0) * (x - x0) / (x1 - x0));
}

struct Group {
  int64_t min_version = 0, version = -1;
};

class Sim {
 public:
  Sim(const PlanCosts& c, const PlanShape& s, const PlanConfig& cfg, double cores, uint64_t seed)
      : c_(c), s_(s), cfg_(cfg), cores_(cores), rng_(seed), rollouts_(cfg.rollouts), rewards_(cfg.rewards) {}

  Result<SimResult> Run(int64_t steps, int64_t warmup) {
    Dispatch();
    int64_t events = 0;
    while (step_ < steps) {
      if (++events > kMaxEvents || idle_polls_ > kMaxIdlePolls || !Advance()) {
        return Status::Internal("plan: the simulation of " + cfg_.mode + " stopped at step " + std::to_string(step_));
      }
      Dispatch();
    }
    SimResult r;
    const double t0 = warmup > 0 ? ends_[warmup - 1] : 0.0, span = ends_.back() - t0;
    r.step_s = span / static_cast<double>(steps - warmup);
    r.samples_per_s = static_cast<double>(s_.prompts_per_step * s_.group_size) / r.step_s;
    r.trainer_idle = span > 0 ? std::max(0.0, 1 - (train_busy_ - busy_at_warmup_) / span) : 0;
    r.rollout_busy = span > 0 ? (gen_busy_ - gen_at_warmup_) / span / cfg_.rollouts : 0;
    r.regenerated = regenerated_;
    r.step_ends = ends_;
    return r;
  }

  void set_warmup(int64_t w) { warmup_ = w; }

 private:
  // --- The discrete-event core: timers on a heap, and computing jobs sharing the cores.
  struct Timer {
    double t;
    uint64_t seq;
    bool poll;  // the trainer's poll: time passing with nothing else happening
    std::function<void()> fn;
  };
  struct TimerAfter {
    bool operator()(const Timer& a, const Timer& b) const { return a.t > b.t || (a.t == b.t && a.seq > b.seq); }
  };
  struct Job {
    double work;  // core-seconds left
    uint64_t seq;
    std::function<void()> done;
  };

  void At(double t, std::function<void()> fn) { timers_.push({t, seq_++, false, std::move(fn)}); }
  void At(double t, bool poll, std::function<void()> fn) { timers_.push({t, seq_++, poll, std::move(fn)}); }
  void Compute(double work, std::function<void()> done) {
    jobs_.push_back({std::max(0.0, work), seq_++, std::move(done)});
  }
  double Rate() const {
    return static_cast<double>(jobs_.size()) <= cores_ ? 1.0 : cores_ / static_cast<double>(jobs_.size());
  }

  // Moves the clock to the next timer or job end and runs what happens then. False when nothing
  // is left to happen.
  bool Advance() {
    const double rate = Rate();
    double job_dt = kInf;
    for (const Job& j : jobs_) job_dt = std::min(job_dt, j.work / rate);
    const double timer_dt = timers_.empty() ? kInf : timers_.top().t - now_;
    const double dt = std::max(0.0, std::min(job_dt, timer_dt));
    if (dt == kInf) return false;
    Account(dt);
    now_ += dt;
    if (timer_dt <= job_dt) {
      Timer t = timers_.top();
      timers_.pop();
      for (Job& j : jobs_) j.work -= dt * rate;
      idle_polls_ = t.poll ? idle_polls_ + 1 : 0;
      t.fn();
      return true;
    }
    idle_polls_ = 0;
    std::vector<Job> done;
    for (Job& j : jobs_) j.work -= dt * rate;
    auto ended = [&](const Job& j) { return j.work <= 1e-12 * (1 + now_); };
    for (const Job& j : jobs_) {
      if (ended(j)) done.push_back(j);
    }
    jobs_.erase(std::remove_if(jobs_.begin(), jobs_.end(), ended), jobs_.end());
    std::sort(done.begin(), done.end(), [](const Job& a, const Job& b) { return a.seq < b.seq; });
    for (Job& j : done) j.done();
    return true;
  }

  void Account(double dt) {
    if (trainer_ == T::kPiece || trainer_ == T::kFinish || trainer_ == T::kPost) train_busy_ += dt;
    for (const Rollout& r : rollouts_) {
      if (r.state == R::kBusy) gen_busy_ += dt;
    }
  }

  // --- The pipeline.
  enum class R { kIdle, kWaitVersion, kBusy };
  struct Rollout {
    R state = R::kIdle;
    int64_t version = 0;
    std::vector<int64_t> groups;
  };
  struct Reward {
    bool busy = false;
  };
  enum class T { kStepStart, kCollect, kPiece, kFinish, kPost };

  void Dispatch() {
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t i = 0; i < rollouts_.size(); ++i) moved = RolloutTurn(i) || moved;
      for (size_t i = 0; i < rewards_.size(); ++i) moved = RewardTurn(i) || moved;
      moved = TrainerTurn() || moved;
    }
  }

  int64_t GroupsPer(int64_t rows) const { return std::max<int64_t>(1, rows / s_.group_size); }

  std::vector<int64_t> Take(std::deque<int64_t>* q, int64_t n) {
    std::vector<int64_t> out;
    while (!q->empty() && static_cast<int64_t>(out.size()) < n) {
      out.push_back(q->front());
      q->pop_front();
    }
    return out;
  }

  void Later(std::deque<int64_t>* q, std::vector<int64_t> groups) {
    At(now_ + c_.hop_s, [q, groups = std::move(groups)] { q->insert(q->end(), groups.begin(), groups.end()); });
  }

  bool RolloutTurn(size_t i) {
    Rollout& r = rollouts_[i];
    bool moved = false;
    if (r.state == R::kIdle && !gen_ready_.empty()) {
      r.groups = Take(&gen_ready_, GroupsPer(s_.rollout_rows));
      r.state = R::kWaitVersion;
      moved = true;
    }
    if (r.state != R::kWaitVersion) return moved;
    r.version = std::max(r.version, arrived_);  // at the batch boundary: the newest that arrived
    int64_t need = 0;
    for (int64_t g : r.groups) need = std::max(need, groups_[g].min_version);
    if (r.version < need) return moved;
    r.state = R::kBusy;
    Compute(BatchCost(static_cast<int64_t>(r.groups.size()) * s_.group_size), [this, i] {
      Rollout& done = rollouts_[i];
      for (int64_t g : done.groups) groups_[g].version = done.version;
      Later(&reward_ready_, std::move(done.groups));
      done.groups.clear();
      done.state = R::kIdle;
    });
    return true;
  }

  double Uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

  // Response lengths from the quartiles: the inverse of a piecewise-linear distribution function.
  int64_t DrawLength() {
    const double u = Uniform() * 4;
    const size_t i = std::min<size_t>(3, static_cast<size_t>(u));
    const double x = c_.lengths[i] + (c_.lengths[i + 1] - c_.lengths[i]) * (u - static_cast<double>(i));
    return std::max<int64_t>(1, std::llround(x));
  }

  double BatchCost(int64_t rows) {
    std::vector<int64_t> len(static_cast<size_t>(rows));
    for (int64_t& l : len) l = DrawLength();
    const int64_t rounds = *std::max_element(len.begin(), len.end());
    double tokens = 0;
    for (int64_t l : len) tokens += static_cast<double>(l);
    const double per_row = c_.gen_row_s * static_cast<double>(rows);
    if (c_.decode.empty()) return c_.gen_round_s * static_cast<double>(rounds) + c_.gen_token_s * tokens + per_row;
    double s = per_row + c_.decode.prefill_token_s * c_.prompt_tokens * static_cast<double>(rows);
    for (int64_t round = 1; round <= rounds; ++round) {
      int64_t active = 0;
      for (int64_t l : len) active += l >= round ? 1 : 0;
      s += c_.decode.Round(active, static_cast<int64_t>(static_cast<double>(active) * (c_.prompt_tokens + round)));
    }
    return s;
  }

  bool RewardTurn(size_t i) {
    if (rewards_[i].busy || reward_ready_.empty()) return false;
    std::vector<int64_t> groups = Take(&reward_ready_, GroupsPer(s_.reward_rows));
    const double rows = static_cast<double>(groups.size() * s_.group_size);
    rewards_[i].busy = true;
    Compute(c_.reward_batch_s + c_.reward_row_s * rows, [this, i, groups = std::move(groups)]() mutable {
      rewards_[i].busy = false;
      Later(&train_ready_, std::move(groups));
    });
    return true;
  }

  // Keeps (1 + k) steps' worth of groups in flight, stamped with the oldest version they may train.
  void Feed() {
    const int64_t target = s_.prompts_per_step * (1 + cfg_.staleness);
    std::vector<int64_t> fed;
    for (; in_flight_ < target; ++in_flight_) {
      groups_.push_back({std::max<int64_t>(0, version_ - cfg_.staleness), -1});
      fed.push_back(static_cast<int64_t>(groups_.size()) - 1);
    }
    if (!fed.empty()) Later(&gen_ready_, std::move(fed));
  }

  bool TrainerTurn() {
    const int64_t need = s_.prompts_per_step;
    if (trainer_ == T::kStepStart) {
      if (cfg_.staleness == 0 && writes_ > 0) return false;  // on-policy: wait for v+1 to be out
      got_ = 0;
      pending_rows_ = 0;
      started_ = false;
      trainer_ = T::kCollect;
      Feed();
      return true;
    }
    if (trainer_ != T::kCollect) return false;
    bool took = false;
    while (!train_ready_.empty() && got_ < need) {
      const int64_t g = train_ready_.front();
      train_ready_.pop_front();
      took = true;
      if (groups_[g].version < version_ - cfg_.staleness) {  // too old: generated again
        groups_[g].min_version = std::max<int64_t>(0, version_ - cfg_.staleness);
        ++regenerated_;
        Later(&gen_ready_, {g});
        continue;
      }
      if (Uniform() >= s_.keep) {  // dynamic sampling drops a group of equal rewards
        --in_flight_;
        continue;
      }
      ++got_;
      pending_rows_ += s_.group_size;
    }
    if (took) Feed();
    const int64_t start_groups = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(cfg_.start_fraction * need)));
    started_ = started_ || got_ >= start_groups;
    if (started_ && pending_rows_ > 0 && (pending_rows_ >= s_.micro_batch || got_ >= need)) {
      StartPiece();
      return true;
    }
    if (got_ >= need) {
      trainer_ = T::kFinish;
      Compute(c_.train_step_s + (cfg_.ranks > 1 ? c_.allreduce_s : 0), [this] { Post(); });
      return true;
    }
    if (!polling_) {  // the get returns after kPollS without rows, and the feeder runs again
      polling_ = true;
      At(now_ + kPollS, true, [this] {
        polling_ = false;
        if (trainer_ == T::kCollect) Feed();
      });
    }
    return took;
  }

  void StartPiece() {
    trainer_ = T::kPiece;
    const double work = c_.train_token_s * c_.train_tokens_per_row * static_cast<double>(pending_rows_);
    pending_rows_ = 0;
    ranks_left_ = cfg_.ranks;
    for (int rank = 0; rank < cfg_.ranks; ++rank) {
      Compute(work / cfg_.ranks, [this] {
        if (--ranks_left_ == 0) trainer_ = T::kCollect;
      });
    }
  }

  void Post() {
    trainer_ = T::kPost;
    Compute(c_.post_s, [this] {
      ++step_;
      ++version_;
      ends_.push_back(now_);
      const int64_t v = version_;
      if (c_.sync_s > 0) {
        At(now_ + c_.sync_s, [this, v] { arrived_ = std::max(arrived_, v); });
      } else {
        arrived_ = v;
      }
      ++writes_;
      if (writes_ == 1) Write();
      trainer_ = T::kStepStart;
      if (step_ == warmup_) busy_at_warmup_ = train_busy_, gen_at_warmup_ = gen_busy_;
    });
  }

  // Checkpoint writes go one at a time; each acks its step's batch when it ends.
  void Write() {
    Compute(c_.write_s, [this] {
      in_flight_ -= s_.prompts_per_step;
      if (--writes_ > 0) Write();
    });
  }

  const PlanCosts& c_;
  const PlanShape& s_;
  const PlanConfig& cfg_;
  const double cores_;
  std::mt19937_64 rng_;
  double now_ = 0;
  uint64_t seq_ = 0;
  std::priority_queue<Timer, std::vector<Timer>, TimerAfter> timers_;
  std::vector<Job> jobs_;

  std::vector<Group> groups_;
  std::deque<int64_t> gen_ready_, reward_ready_, train_ready_;
  std::vector<Rollout> rollouts_;
  std::vector<Reward> rewards_;
  int64_t arrived_ = 0;  // the newest version that reached the rollouts

  T trainer_ = T::kStepStart;
  int64_t version_ = 0, step_ = 0, got_ = 0, pending_rows_ = 0, in_flight_ = 0, writes_ = 0, regenerated_ = 0;
  int ranks_left_ = 0;
  int64_t idle_polls_ = 0;
  bool started_ = false, polling_ = false;
  int64_t warmup_ = 0;
  double train_busy_ = 0, gen_busy_ = 0, busy_at_warmup_ = 0, gen_at_warmup_ = 0;
  std::vector<double> ends_;
};

}  // namespace

double DecodeTable::Round(int64_t active, int64_t context_tokens) const {
  const double t = static_cast<double>(context_tokens);
  auto hi = std::lower_bound(by_batch.begin(), by_batch.end(), active,
                             [](const auto& e, int64_t b) { return e.first < b; });
  if (hi != by_batch.end() && hi->first == active) return Interpolate(hi->second, t);
  if (by_batch.size() == 1) return Interpolate(by_batch[0].second, t);
  if (hi == by_batch.end()) --hi;
  if (hi == by_batch.begin()) ++hi;
  auto lo = std::prev(hi);
  const std::vector<std::pair<double, double>> across = {{static_cast<double>(lo->first), Interpolate(lo->second, t)},
                                                         {static_cast<double>(hi->first), Interpolate(hi->second, t)}};
  return Interpolate(across, static_cast<double>(active));
}

Result<SimResult> Simulate(const PlanCosts& costs, const PlanShape& shape, const PlanConfig& config,
                           int64_t steps, int64_t warmup, double cores, uint64_t seed) {
  if (config.rollouts < 1 || config.rewards < 1 || config.ranks < 1) {
    return Status::DataError("plan: a configuration needs a rollout slot, a reward slot and a trainer rank");
  }
  if (!(config.start_fraction >= 0 && config.start_fraction <= 1) || config.staleness < 0) {
    return Status::DataError("plan: the start fraction must be in [0, 1] and the staleness bound >= 0");
  }
  if (steps < 1 || warmup < 0 || warmup >= steps) {
    return Status::DataError("plan: warm-up steps must be fewer than steps");
  }
  if (!(cores >= 1) || shape.prompts_per_step < 1 || shape.group_size < 1 || costs.lengths.size() != 5) {
    return Status::DataError("plan: cores, prompts per step and group size must be positive, lengths five numbers");
  }
  Sim sim(costs, shape, config, cores, seed);
  sim.set_warmup(warmup);
  return sim.Run(steps, warmup);
}

}  // namespace rl::profile
