#include "rl/profile/plan_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>

#include "rl/core/fs.h"
#include "rl/core/json_field.h"

namespace rl::profile {
namespace {

using Json = nlohmann::json;

constexpr double kMostBatch = 1 << 20;  // a decode profile's largest batch

bool StartsWith(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// A number field of an event, or DataError naming the lane and the event.
Result<double> Number(const std::string& lane, const RunEvent& e, const char* key) {
  auto it = e.fields.find(key);
  if (it == e.fields.end() || !it->is_number()) {
    return Status::DataError("plan: " + lane + ": a " + e.event + " event has no number " + key +
                             " (a run from an older roleflow?)");
  }
  return it->get<double>();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Solves the normal equations of the chosen columns (Gaussian elimination); false when singular.
bool Solve(const std::vector<std::vector<double>>& x, const std::vector<double>& y, const std::vector<size_t>& cols,
           std::vector<double>* b) {
  const size_t k = cols.size();
  std::vector<std::vector<double>> a(k, std::vector<double>(k + 1, 0));
  for (size_t r = 0; r < x.size(); ++r) {
    for (size_t i = 0; i < k; ++i) {
      for (size_t j = 0; j < k; ++j) a[i][j] += x[r][cols[i]] * x[r][cols[j]];
      a[i][k] += x[r][cols[i]] * y[r];
    }
  }
  for (size_t i = 0; i < k; ++i) {
    size_t p = i;
    for (size_t r = i + 1; r < k; ++r) p = std::fabs(a[r][i]) > std::fabs(a[p][i]) ? r : p;
    std::swap(a[i], a[p]);
    if (std::fabs(a[i][i]) < 1e-12 * (1 + std::fabs(a[i][k]))) return false;
    for (size_t r = 0; r < k; ++r) {
      if (r == i) continue;
      const double m = a[r][i] / a[i][i];
      for (size_t c = i; c <= k; ++c) a[r][c] -= m * a[i][c];
    }
  }
  b->assign(x.empty() ? 0 : x[0].size(), 0);
  for (size_t i = 0; i < k; ++i) (*b)[cols[i]] = a[i][k] / a[i][i];
  return true;
}

// Seconds between step events after the warm-up, and the configuration the trainer ran.
Status MeasureTrainer(const std::vector<RunEvent>& lane, int64_t warmup, RunMeasure* m) {
  std::vector<double> ends;
  bool has_shape = false;
  for (const RunEvent& e : lane) {
    if (e.event == "step") ends.push_back(e.ts);
    if (e.event == "start" && e.fields.contains("staleness")) {
      m->config.staleness = IntField(e.fields, "staleness", 0);
      m->config.start_fraction = NumberField(e.fields, "start_fraction", 1.0);
      m->shape.prompts_per_step = IntField(e.fields, "prompts_per_step", m->shape.prompts_per_step);
      m->shape.group_size = IntField(e.fields, "group_size", m->shape.group_size);
      m->shape.micro_batch = IntField(e.fields, "micro_batch", m->shape.micro_batch);
      has_shape = e.fields.contains("prompts_per_step");
    }
  }
  m->steps = static_cast<int64_t>(ends.size());
  const int64_t w = std::max<int64_t>(1, warmup);  // from the end of step w, as the simulator counts
  if (m->steps < w + 2) {
    return Status::DataError("plan: the trainer made " + std::to_string(m->steps) + " steps; at least " +
                             std::to_string(w + 2) + " are needed (--warmup " + std::to_string(warmup) + ")");
  }
  m->step_s = (ends.back() - ends[static_cast<size_t>(w - 1)]) / static_cast<double>(m->steps - w);
  m->config.mode = ModeName(m->config.staleness, m->config.start_fraction);
  if (!has_shape) {
    return Status::DataError("plan: the trainer's start event has no prompts_per_step (a run from an older roleflow?)");
  }
  return Status::OK();
}

Status FitRollouts(const RunEvents& run, PlanFit* fit) {
  std::vector<std::vector<double>> x;
  std::vector<double> y, prompt, rows_max;
  std::vector<double> q(5, 0);
  for (const auto& [name, lane] : run.lanes) {
    if (!StartsWith(name, "rollout-")) continue;
    for (const RunEvent& e : lane) {
      if (e.event != "batch") continue;
      RL_ASSIGN_OR_RETURN(double rows, Number(name, e, "rows"));
      RL_ASSIGN_OR_RETURN(double tokens, Number(name, e, "tokens"));
      RL_ASSIGN_OR_RETURN(double rounds, Number(name, e, "rounds"));
      RL_ASSIGN_OR_RETURN(double seconds, Number(name, e, "seconds"));
      RL_ASSIGN_OR_RETURN(double prompt_tokens, Number(name, e, "prompt_tokens"));
      const Json& len = ArrayField(e.fields, "lengths");
      if (!len.is_array() || len.size() != 5 || rows <= 0) {
        return Status::DataError("plan: " + name + ": a batch event's lengths is not [min, q1, median, q3, max]");
      }
      for (size_t i = 0; i < 5; ++i) {
        if (!len[i].is_number()) return Status::DataError("plan: " + name + ": a batch length is not a number");
        q[i] += len[i].get<double>();
      }
      x.push_back({rounds, tokens, rows});
      y.push_back(seconds);
      prompt.push_back(prompt_tokens / rows);
      rows_max.push_back(rows);
    }
  }
  if (x.empty()) return Status::DataError("plan: the run has no rollout batch events");
  std::vector<double> b = NonNegativeFit(x, y);
  fit->costs.gen_round_s = b[0];
  fit->costs.gen_token_s = b[1];
  fit->costs.gen_row_s = b[2];
  for (double& v : q) v /= static_cast<double>(x.size());
  fit->costs.lengths = q;
  fit->costs.prompt_tokens = Mean(prompt);
  fit->run.shape.rollout_rows = static_cast<int64_t>(*std::max_element(rows_max.begin(), rows_max.end()));
  return Status::OK();
}

Status FitRewards(const RunEvents& run, PlanFit* fit) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  double most = 0;
  for (const auto& [name, lane] : run.lanes) {
    if (!StartsWith(name, "reward-")) continue;
    for (const RunEvent& e : lane) {
      if (e.event != "batch") continue;
      RL_ASSIGN_OR_RETURN(double rows, Number(name, e, "rows"));
      RL_ASSIGN_OR_RETURN(double seconds, Number(name, e, "seconds"));
      x.push_back({rows, 1});
      y.push_back(seconds);
      most = std::max(most, rows);
    }
  }
  if (x.empty()) return Status::DataError("plan: the run has no reward batch events");
  std::vector<double> b = NonNegativeFit(x, y);
  fit->costs.reward_row_s = b[0];
  fit->costs.reward_batch_s = b[1];
  fit->run.shape.reward_rows = static_cast<int64_t>(most);
  return Status::OK();
}

Status FitTrainer(const std::string& name, const std::vector<RunEvent>& lane, PlanFit* fit) {
  std::vector<std::vector<double>> x;
  std::vector<double> y, eval, snapshot, write, per_row;
  std::map<int64_t, double> snapshot_ts;
  double samples = 0, uniform = 0;
  for (const RunEvent& e : lane) {
    if (e.event == "step") {
      RL_ASSIGN_OR_RETURN(double tokens, Number(name, e, "tokens"));
      RL_ASSIGN_OR_RETURN(double train, Number(name, e, "train_seconds"));
      RL_ASSIGN_OR_RETURN(double n, Number(name, e, "samples"));
      RL_ASSIGN_OR_RETURN(double ev, Number(name, e, "eval_seconds"));
      x.push_back({tokens, 1});
      y.push_back(train);
      eval.push_back(ev);
      samples += n;
      uniform += NumberField(e.fields, "uniform_rows", 0.0);
      if (n > 0) per_row.push_back(tokens / n);
    } else if (e.event == "snapshot") {
      RL_ASSIGN_OR_RETURN(double s, Number(name, e, "seconds"));
      snapshot.push_back(s);
      snapshot_ts[IntField(e.fields, "version", -1)] = e.ts;
    } else if (e.event == "checkpoint") {
      auto it = snapshot_ts.find(IntField(e.fields, "version", -1));
      if (it != snapshot_ts.end()) write.push_back(e.ts - it->second);
    }
  }
  if (snapshot.empty()) {
    return Status::DataError("plan: " + name + " has no snapshot events (a run from an older roleflow?)");
  }
  std::vector<double> b = NonNegativeFit(x, y);
  fit->costs.train_token_s = b[0];
  fit->costs.train_step_s = b[1];
  fit->costs.train_tokens_per_row = Mean(per_row);
  fit->costs.post_s = Mean(eval) + Mean(snapshot);
  fit->costs.write_s = Median(write);
  fit->run.shape.keep = samples + uniform > 0 ? samples / (samples + uniform) : 1;
  return Status::OK();
}

// The median time from a version's snapshot to its arrival at a rollout; 0 without arrivals.
double FitSync(const RunEvents& run, const std::vector<RunEvent>& train) {
  std::map<int64_t, double> offered;
  for (const RunEvent& e : train) {
    if (e.event == "snapshot") offered[IntField(e.fields, "version", -1)] = e.ts;
  }
  std::vector<double> delays;
  for (const auto& [name, lane] : run.lanes) {
    if (!StartsWith(name, "rollout-")) continue;
    bool ucx = std::any_of(lane.begin(), lane.end(), [](const RunEvent& e) { return e.event == "weights-arrived"; });
    for (const RunEvent& e : lane) {
      if (e.event != (ucx ? "weights-arrived" : "weights")) continue;
      auto it = offered.find(IntField(e.fields, "version", -1));
      if (it != offered.end() && e.ts >= it->second) delays.push_back(e.ts - it->second);
    }
  }
  return Median(delays);
}

const std::vector<RunEvent>* TrainerLane(const RunEvents& run, std::string* name) {
  for (const auto& [n, lane] : run.lanes) {
    if (StartsWith(n, "train-")) {
      *name = n;
      return &lane;
    }
  }
  return nullptr;
}

int CountLanes(const RunEvents& run, const std::string& prefix) {
  int n = 0;
  for (const auto& [name, lane] : run.lanes) {
    if (StartsWith(name, prefix) &&
        std::any_of(lane.begin(), lane.end(), [](const RunEvent& e) { return e.event == "batch"; })) {
      ++n;
    }
  }
  return n;
}

}  // namespace

std::string ModeName(int64_t staleness, double start_fraction) {
  if (staleness == 0 && start_fraction == 1) return "sync";
  if (staleness == 1 && start_fraction == 0.5) return "semi-sync";
  if (staleness == 1 && start_fraction == 0) return "async";
  if (start_fraction == 0) return "async-k" + std::to_string(staleness);
  char buf[64];
  std::snprintf(buf, sizeof buf, "k=%lld,f=%g", static_cast<long long>(staleness), start_fraction);
  return buf;
}

Status ParseMode(const std::string& name, PlanConfig* c) {
  c->mode = name;
  if (name == "sync") {
    c->staleness = 0, c->start_fraction = 1;
  } else if (name == "semi-sync") {
    c->staleness = 1, c->start_fraction = 0.5;
  } else if (name == "async") {
    c->staleness = 1, c->start_fraction = 0;
  } else if (StartsWith(name, "async-k") && name.size() > 7 && name.size() < 10 &&
             std::all_of(name.begin() + 7, name.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
    c->staleness = std::stoll(name.substr(7)), c->start_fraction = 0;
    if (c->staleness < 1) return Status::InvalidArgument("plan: async needs k >= 1, not '" + name + "'");
  } else {
    return Status::InvalidArgument("plan: a mode is sync, semi-sync, async or async-kN, not '" + name + "'");
  }
  return Status::OK();
}

std::vector<double> NonNegativeFit(const std::vector<std::vector<double>>& x, const std::vector<double>& y) {
  const size_t n = x.empty() ? 0 : x[0].size();
  std::vector<double> best(n, 0);
  double best_err = 0;
  size_t best_cols = 0;
  for (size_t r = 0; r < y.size(); ++r) best_err += y[r] * y[r];
  // Fewer columns first, earlier columns first; a later subset must cut the squared error by
  // 10% to be taken, so that noise does not hand the whole cost to a column the data cannot tell
  // apart (a constant step cost when every step trains about as many tokens).
  constexpr double kParsimony = 0.9;
  std::vector<uint32_t> masks;
  for (uint32_t mask = 1; mask < (1u << n); ++mask) masks.push_back(mask);
  std::stable_sort(masks.begin(), masks.end(),
                   [](uint32_t a, uint32_t b) { return __builtin_popcount(a) < __builtin_popcount(b); });
  for (uint32_t mask : masks) {
    std::vector<size_t> cols;
    for (size_t i = 0; i < n; ++i) {
      if (mask & (1u << i)) cols.push_back(i);
    }
    std::vector<double> b;
    if (!Solve(x, y, cols, &b) || std::any_of(b.begin(), b.end(), [](double v) { return v < 0; })) continue;
    double err = 0;
    for (size_t r = 0; r < y.size(); ++r) {
      double p = 0;
      for (size_t i = 0; i < n; ++i) p += b[i] * x[r][i];
      err += (y[r] - p) * (y[r] - p);
    }
    if (err < best_err * (best_cols > 0 ? kParsimony : 1.0)) best = b, best_err = err, best_cols = cols.size();
  }
  return best;
}

Result<RunMeasure> MeasureRun(const RunEvents& run, int64_t warmup) {
  std::string name;
  const std::vector<RunEvent>* train = TrainerLane(run, &name);
  if (train == nullptr) return Status::DataError("plan: the run has no trainer event log (events/train-*.jsonl)");
  RunMeasure m;
  RL_RETURN_IF_ERROR(MeasureTrainer(*train, warmup, &m));
  m.config.rollouts = std::max(1, CountLanes(run, "rollout-"));
  m.config.rewards = std::max(1, CountLanes(run, "reward-"));
  return m;
}

Result<PlanFit> FitRun(const RunEvents& run, int64_t warmup) {
  PlanFit fit;
  RL_ASSIGN_OR_RETURN(fit.run, MeasureRun(run, warmup));
  std::string name;
  const std::vector<RunEvent>* train = TrainerLane(run, &name);
  RL_RETURN_IF_ERROR(FitRollouts(run, &fit));
  RL_RETURN_IF_ERROR(FitRewards(run, &fit));
  RL_RETURN_IF_ERROR(FitTrainer(name, *train, &fit));
  fit.costs.sync_s = FitSync(run, *train);
  return fit;
}

Result<DecodeTable> LoadDecodeTable(const std::string& path) {
  RL_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseDecodeTable(text, path);
}

Result<DecodeTable> ParseDecodeTable(const std::string& text, const std::string& source) {
  Json j = Json::parse(text, nullptr, false);
  auto bad = [&](const std::string& why) { return Status::DataError("plan: decode profile " + source + ": " + why); };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  if (!j.contains("decode") || !j["decode"].is_array()) return bad("no decode array");
  std::map<int64_t, std::vector<std::pair<double, double>>> by_batch;
  for (const Json& p : j["decode"]) {
    auto number = [](const Json& v) { return v.is_number(); };
    if (!p.is_array() || p.size() != 4 || !std::all_of(p.begin(), p.end(), number)) {
      return bad("a decode point is not [tp, batch, context, seconds]");
    }
    if (p[0].get<double>() != 1) continue;
    const double batch = p[1].get<double>(), context = p[2].get<double>(), seconds = p[3].get<double>();
    // A whole batch within what a rollout runs (a cast of 1e300 to int64_t is undefined).
    if (!(batch >= 1 && batch <= kMostBatch) || batch != std::floor(batch)) {
      return bad("a decode point's batch is not a whole number in [1, " + std::to_string(static_cast<int64_t>(kMostBatch)) + "]");
    }
    if (!(context >= 0) || !(seconds > 0)) return bad("a decode point has a negative context or seconds not positive");
    by_batch[static_cast<int64_t>(batch)].emplace_back(context, seconds);
  }
  if (by_batch.empty()) return bad("no decode points at tp 1");
  DecodeTable t;
  for (auto& [b, pts] : by_batch) {
    std::sort(pts.begin(), pts.end());
    t.by_batch.emplace_back(b, std::move(pts));
  }
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (const Json& p : ArrayField(j, "prefill")) {
    if (!p.is_array() || p.size() != 3 || !p[1].is_number() || !p[2].is_number()) {
      return bad("a prefill point is not [tp, tokens, seconds]");
    }
    if (p[0] == 1) x.push_back({p[1].get<double>()}), y.push_back(p[2].get<double>());
  }
  if (!x.empty()) t.prefill_token_s = NonNegativeFit(x, y)[0];
  return t;
}

}  // namespace rl::profile
