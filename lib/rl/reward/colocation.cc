// The partial-vs-full colocation measurement; see colocation.h.
#include "rl/reward/colocation.h"

#include <ATen/Parallel.h>
#include <pthread.h>
#include <sched.h>

#include <condition_variable>
#include <deque>
#include <iomanip>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/model/generate.h"
#include "rl/model/hf_dir.h"
#include "rl/model/model_file.h"
#include "rl/model/prompt_encoder.h"
#include "rl/task/dataset.h"

namespace rl::reward {
namespace {

constexpr int64_t kMaxDrawFactor = 10;

double Seconds(int64_t since_ms) { return (MonoMillis() - since_ms) / 1000.0; }

// Pins the calling thread to `cores`.
Status Pin(const std::vector<int>& cores) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores) CPU_SET(c, &set);
  int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (rc == 0) return Status::OK();
  return Status::InvalidArgument("--cores: cannot pin a thread (error " + std::to_string(rc) + ")");
}

Result<std::vector<int>> ChooseCores(const std::vector<int>& asked) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return Status::Internal("sched_getaffinity failed");
  std::vector<int> allowed;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) allowed.push_back(c);
  }
  if (asked.empty()) {
    if (allowed.size() < 2) return Status::InvalidArgument("colocation needs two cores; this process may use one");
    return std::vector<int>{allowed[0], allowed[1]};
  }
  if (asked.size() != 2 || asked[0] == asked[1]) {
    return Status::InvalidArgument("--cores wants two cores, SAMPLER,JUDGE");
  }
  for (int c : asked) {
    if (c < 0 || c >= CPU_SETSIZE || !CPU_ISSET(c, &set)) {
      return Status::InvalidArgument("--cores: this process may not use core " + std::to_string(c));
    }
  }
  return asked;
}

// Everything both placements share: the policy, the judge, the prompts and the draw cursor.
class Bench {
 public:
  Bench(const ColocationOptions& o, model::PromptEncoder enc, model::Transformer policy,
        std::unique_ptr<JudgeVerifier> judge, std::unique_ptr<Verifier> rule, std::vector<task::Example> problems,
        std::vector<int> cores)
      : o_(o), enc_(std::move(enc)), policy_(std::move(policy)), judge_(std::move(judge)), rule_(std::move(rule)),
        problems_(std::move(problems)), cores_(std::move(cores)) {}

  // Rewards of n groups drawn next, generated in one batch (a micro-batch, or a full round).
  Result<std::vector<RewardRequest>> Generate(const std::vector<const task::Example*>& groups, uint64_t seed) const {
    std::vector<std::vector<int64_t>> prompts;
    for (const task::Example* e : groups) {
      RL_ASSIGN_OR_RETURN(std::vector<int64_t> ids, enc_.Prompt(*e));
      for (int64_t g = 0; g < o_.group_size; ++g) prompts.push_back(ids);
    }
    model::GenerateOptions go;
    go.max_new_tokens = o_.max_new_tokens;
    go.sampling.temperature = o_.temperature;
    go.seed = seed;
    go.slots = static_cast<int64_t>(prompts.size());
    go.eos_id = enc_.dir().eos_id;
    RL_ASSIGN_OR_RETURN(std::vector<model::Generation> gens, model::Generate(policy_, prompts, go));
    std::vector<RewardRequest> reqs;
    for (size_t i = 0; i < gens.size(); ++i) {
      const task::Example* e = groups[i / o_.group_size];
      RL_ASSIGN_OR_RETURN(std::string text, enc_.Decode(gens[i].response_ids));
      reqs.push_back({model::QuestionOf(*e), std::move(text), e->answer});
    }
    return reqs;
  }

  // Judges the groups of `reqs`; returns how many were rejected (uniform rewards).
  Result<int64_t> Judge(const std::vector<RewardRequest>& reqs) {
    std::vector<Result<double>> scored = judge_->ScoreBatch(reqs);
    if (rule_) scored = rule_->ScoreBatch(reqs);  // the judge's work is done; the rule decides
    int64_t rejected = 0;
    for (size_t g = 0; g < scored.size(); g += o_.group_size) {
      bool uniform = true;
      for (size_t i = g; i < g + o_.group_size; ++i) {
        if (!scored[i].ok()) return scored[i].status();
        uniform = uniform && *scored[i] == *scored[g];
      }
      rejected += uniform;
    }
    return rejected;
  }

  std::vector<const task::Example*> Draw(int64_t n) {
    std::vector<const task::Example*> out;
    for (int64_t i = 0; i < n; ++i) out.push_back(&problems_[cursor_++ % problems_.size()]);
    return out;
  }

  // A step draws at most this many groups, however many are rejected (a judge that calls every
  // response alike would otherwise never fill one).
  int64_t DrawCap() const { return kMaxDrawFactor * o_.prompts_per_step; }

  Result<ColocationStep> Full(int64_t step);
  Result<ColocationStep> Partial(int64_t step);

 private:
  const ColocationOptions& o_;
  model::PromptEncoder enc_;
  model::Transformer policy_;
  std::unique_ptr<JudgeVerifier> judge_;
  std::unique_ptr<Verifier> rule_;  // null: the judge's rewards decide rejection
  std::vector<task::Example> problems_;
  std::vector<int> cores_;
  uint64_t cursor_ = 0;
  uint64_t seed_ = 0;
  friend class PartialStep;
};

Result<ColocationStep> Bench::Full(int64_t step) {
  RL_RETURN_IF_ERROR(Pin(cores_));
  at::set_num_threads(2);
  ColocationStep s{"full", step};
  int64_t start = MonoMillis(), accepted = 0;
  while (accepted < o_.prompts_per_step && s.groups < DrawCap()) {
    auto groups = Draw(std::min(o_.prompts_per_step - accepted, DrawCap() - s.groups));
    int64_t t = MonoMillis();
    RL_ASSIGN_OR_RETURN(std::vector<RewardRequest> reqs, Generate(groups, o_.seed + ++seed_));
    s.generate_s += Seconds(t);
    t = MonoMillis();
    RL_ASSIGN_OR_RETURN(int64_t rejected, Judge(reqs));
    s.judge_s += Seconds(t);
    s.groups += static_cast<int64_t>(groups.size());
    s.rejected += rejected;
    accepted += static_cast<int64_t>(groups.size()) - rejected;
    spdlog::debug("colocation: full round of {} groups, {} rejected", groups.size(), rejected);
  }
  s.seconds = Seconds(start);
  return s;
}

// One partial step: a sampler thread and a judge thread with a queue of micro-batches between.
class PartialStep {
 public:
  PartialStep(Bench* b, const ColocationOptions& o) : b_(b), o_(o) {}

  Result<ColocationStep> Run(int64_t step) {
    s_ = {"partial", step};
    int64_t start = MonoMillis();
    std::thread sampler([this] { Finish(Sample()); });
    std::thread judge([this] { Finish(JudgeAll()); });
    sampler.join();
    judge.join();
    s_.seconds = Seconds(start);
    if (!error_.ok()) return error_;
    return s_;
  }

 private:
  struct MicroBatch {
    int64_t groups;
    std::vector<RewardRequest> reqs;
  };

  void Finish(const Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!s.ok() && error_.ok()) error_ = s;
    if (!s.ok()) done_ = true;
    cv_.notify_all();
  }

  Status Sample() {
    RL_RETURN_IF_ERROR(Pin({b_->cores_[0]}));
    at::set_num_threads(1);
    for (;;) {
      std::vector<const task::Example*> groups;
      uint64_t seed;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] {
          return done_ || (accepted_ + in_flight_ < o_.prompts_per_step && drawn_ < b_->DrawCap());
        });
        if (done_) return Status::OK();
        int64_t n = std::min({o_.micro_groups, o_.prompts_per_step - accepted_ - in_flight_, b_->DrawCap() - drawn_});
        in_flight_ += n;
        drawn_ += n;
        groups = b_->Draw(n);
        seed = o_.seed + ++b_->seed_;
      }
      int64_t t = MonoMillis();
      RL_ASSIGN_OR_RETURN(std::vector<RewardRequest> reqs, b_->Generate(groups, seed));
      std::lock_guard<std::mutex> lock(mu_);
      s_.generate_s += Seconds(t);
      ready_.push_back({static_cast<int64_t>(groups.size()), std::move(reqs)});
      cv_.notify_all();
    }
  }

  Status JudgeAll() {
    RL_RETURN_IF_ERROR(Pin({b_->cores_[1]}));
    at::set_num_threads(1);
    for (;;) {
      MicroBatch mb;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return done_ || !ready_.empty(); });
        if (done_) return Status::OK();
        mb = std::move(ready_.front());
        ready_.pop_front();
      }
      int64_t t = MonoMillis();
      RL_ASSIGN_OR_RETURN(int64_t rejected, b_->Judge(mb.reqs));
      std::lock_guard<std::mutex> lock(mu_);
      s_.judge_s += Seconds(t);
      s_.groups += mb.groups;
      s_.rejected += rejected;
      in_flight_ -= mb.groups;
      accepted_ += mb.groups - rejected;
      if (accepted_ >= o_.prompts_per_step || (drawn_ >= b_->DrawCap() && in_flight_ == 0)) done_ = true;
      cv_.notify_all();
    }
  }

  Bench* b_;
  const ColocationOptions& o_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<MicroBatch> ready_;
  int64_t accepted_ = 0, in_flight_ = 0, drawn_ = 0;
  bool done_ = false;
  Status error_;
  ColocationStep s_;
};

Result<ColocationStep> Bench::Partial(int64_t step) { return PartialStep(this, o_).Run(step); }

void Print(const ColocationOptions& o, const ColocationStep& s, std::ostream& out) {
  if (o.json) {
    nlohmann::ordered_json j = {{"mode", s.mode}, {"step", s.step}, {"seconds", s.seconds},
                                {"generate_s", s.generate_s}, {"judge_s", s.judge_s},
                                {"groups", s.groups}, {"rejected", s.rejected}};
    out << j.dump() << "\n";
    return;
  }
  out << std::left << std::setw(8) << s.mode << std::right << std::setw(5) << s.step << std::fixed
      << std::setprecision(3) << std::setw(10) << s.seconds << std::setw(12) << s.generate_s << std::setw(10)
      << s.judge_s << std::setw(8) << s.groups << std::setw(10) << s.rejected << "\n";
}

Result<std::vector<task::Example>> ReadProblems(const std::string& path) {
  RL_ASSIGN_OR_RETURN(std::unique_ptr<task::Dataset> data, task::Dataset::Open(path, task::DatasetOptions{}));
  std::vector<task::Example> out;
  for (size_t i = 0; i < std::min<size_t>(data->size(), 100000); ++i) {
    RL_ASSIGN_OR_RETURN(task::Example e, data->Read(i));
    out.push_back(std::move(e));
  }
  if (out.empty()) return Status::DataError(path + ": no prompts");
  return out;
}

Status Check(const ColocationOptions& o) {
  if (o.group_size < 2) return Status::InvalidArgument("--group-size must be at least 2 (dynamic sampling)");
  if (o.prompts_per_step < 1 || o.micro_groups < 1 || o.steps < 1 || o.max_new_tokens < 1) {
    return Status::InvalidArgument("--prompts-per-step, --micro-groups, --steps and --max-new-tokens must be >= 1");
  }
  return Status::OK();
}

}  // namespace

Result<ColocationResult> RunColocation(const ColocationOptions& o, std::ostream& out) {
  RL_RETURN_IF_ERROR(Check(o));
  RL_ASSIGN_OR_RETURN(std::vector<int> cores, ChooseCores(o.cores));
  RL_ASSIGN_OR_RETURN(model::ModelDir dir, model::OpenModelDir(o.model));
  RL_ASSIGN_OR_RETURN(model::PromptEncoder enc, model::PromptEncoder::Create(dir, "auto"));
  Result<model::Transformer> policy = Status::Internal("unset");
  if (o.weights.empty()) {
    policy = model::LoadHfModel(o.model);
  } else {
    Result<model::LoadedModel> loaded = model::LoadModelFile(o.weights);
    policy = loaded.ok() ? Result<model::Transformer>(loaded->model) : Result<model::Transformer>(loaded.status());
  }
  RL_RETURN_IF_ERROR(policy.status());
  RL_ASSIGN_OR_RETURN(std::unique_ptr<JudgeVerifier> judge, JudgeVerifier::Open(o.judge));
  RL_ASSIGN_OR_RETURN(std::vector<task::Example> problems, ReadProblems(o.prompts));
  std::unique_ptr<Verifier> rule;
  if (!o.reject_by.empty()) {
    RL_ASSIGN_OR_RETURN(rule, MakeVerifier(o.reject_by, 1e-6));
  }
  Bench bench(o, std::move(enc), std::move(*policy), std::move(judge), std::move(rule), std::move(problems), cores);
  spdlog::info("colocation: cores {} (sampler) and {} (judge), {} steps of {} groups of {}, micro-batches of {} groups",
               cores[0], cores[1], o.steps, o.prompts_per_step, o.group_size, o.micro_groups);
  RL_RETURN_IF_ERROR(bench.Full(-1).status());  // warm-up, not measured
  RL_RETURN_IF_ERROR(bench.Partial(-1).status());
  if (!o.json) out << "mode     step   seconds  generate_s   judge_s  groups  rejected\n";
  ColocationResult r;
  int64_t groups[2] = {0, 0}, rejected[2] = {0, 0};
  for (int64_t step = 0; step < o.steps; ++step) {
    for (int k = 0; k < 2; ++k) {
      bool full = (k == 0) == (step % 2 == 0);
      RL_ASSIGN_OR_RETURN(ColocationStep s, full ? bench.Full(step) : bench.Partial(step));
      Print(o, s, out);
      (full ? r.full_s : r.partial_s) += s.seconds / o.steps;
      groups[full] += s.groups;
      rejected[full] += s.rejected;
      r.steps.push_back(s);
    }
    spdlog::info("colocation: step {}/{} done", step + 1, o.steps);
  }
  if (groups[0] + groups[1] >= kMaxDrawFactor * o.prompts_per_step * 2 * o.steps) {
    spdlog::warn("colocation: steps ended at the cap of {} groups drawn: the judge rejects nearly every group",
                 kMaxDrawFactor * o.prompts_per_step);
  }
  r.full_rejected = groups[1] ? static_cast<double>(rejected[1]) / groups[1] : 0;
  r.partial_rejected = groups[0] ? static_cast<double>(rejected[0]) / groups[0] : 0;
  if (o.json) {
    out << nlohmann::ordered_json({{"full_s", r.full_s}, {"partial_s", r.partial_s}, {"ratio", r.ratio()},
                                   {"full_rejected", r.full_rejected}, {"partial_rejected", r.partial_rejected}})
               .dump()
        << "\n";
  } else {
    out << std::fixed << std::setprecision(3) << "rollout time per step: full " << r.full_s << " s, partial "
        << r.partial_s << " s\n"
        << std::setprecision(1) << "dynamic sampling rejected " << 100 * r.full_rejected << "% of groups (full), "
        << 100 * r.partial_rejected << "% (partial)\n"
        << std::setprecision(2) << "partial/full colocation rollout time " << r.ratio() << "\n";
  }
  return r;
}

}  // namespace rl::reward
