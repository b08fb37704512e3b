#include "rl/profile/plan_cmd.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "rl/core/fail.h"
#include "rl/core/log.h"
#include "rl/core/printf.h"

namespace rl::profile {
namespace {

constexpr char kTool[] = "rl-profile";

std::string Slots(const PlanConfig& c) {
  return Printf("%dR+%dW+%dT", c.rollouts, c.rewards, c.ranks);
}

Result<RunEvents> LoadRun(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return Status::IOError("plan: no run directory " + dir);
  return LoadRunEvents(dir);
}

nlohmann::json CostsJson(const PlanCosts& c, const PlanShape& s) {
  return {{"type", "costs"}, {"gen_round_s", c.gen_round_s}, {"gen_token_s", c.gen_token_s},
          {"gen_row_s", c.gen_row_s}, {"decode_profile", !c.decode.empty()}, {"lengths", c.lengths},
          {"prompt_tokens", c.prompt_tokens}, {"reward_batch_s", c.reward_batch_s},
          {"reward_row_s", c.reward_row_s}, {"train_step_s", c.train_step_s}, {"train_token_s", c.train_token_s},
          {"train_tokens_per_row", c.train_tokens_per_row}, {"post_s", c.post_s}, {"write_s", c.write_s},
          {"sync_s", c.sync_s}, {"hop_s", c.hop_s}, {"prompts_per_step", s.prompts_per_step},
          {"group_size", s.group_size}, {"rollout_rows", s.rollout_rows}, {"reward_rows", s.reward_rows},
          {"micro_batch", s.micro_batch}, {"keep", s.keep}};
}

void PrintCosts(const PlanCosts& c, const PlanShape& s, std::ostream& out) {
  out << Printf("costs: rollout batch = %.4f s/round + %.6f s/token + %.6f s/row%s; lengths %g..%g (median %g)\n",
                c.gen_round_s, c.gen_token_s, c.gen_row_s, c.decode.empty() ? "" : " (rounds: decode profile)",
                c.lengths[0], c.lengths[4], c.lengths[2]);
  out << Printf("       reward batch = %.4f s + %.6f s/row; train = %.4f s/step + %.3g s/token (%.1f tokens/row)\n",
                c.reward_batch_s, c.reward_row_s, c.train_step_s, c.train_token_s, c.train_tokens_per_row);
  out << Printf("       trainer serial %.4f s/step, checkpoint write %.4f s, weight sync %.4f s, hand-over %.4f s\n",
                c.post_s, c.write_s, c.sync_s, c.hop_s);
  out << Printf("shape: %lld prompts x %lld per step, keep %.3f (dynamic sampling), rollout %lld rows, reward %lld "
                "rows, micro-batch %lld\n",
                static_cast<long long>(s.prompts_per_step), static_cast<long long>(s.group_size), s.keep,
                static_cast<long long>(s.rollout_rows), static_cast<long long>(s.reward_rows),
                static_cast<long long>(s.micro_batch));
}

void PrintRanking(const std::vector<PlanRow>& rows, int pool, double cores, std::ostream& out) {
  out << Printf("\nranking: %zu configurations of %d slots on %g cores\n", rows.size(), pool, cores);
  out << "rank  slots       mode        s/step  samples/s  trainer-idle  rollout-busy  regenerated\n";
  int n = 0;
  for (const PlanRow& r : rows) {
    out << Printf("%4d  %-10s  %-10s %7.3f %10.1f %13.2f %13.2f %12lld\n", ++n, Slots(r.config).c_str(),
                  r.config.mode.c_str(), r.result.step_s, r.result.samples_per_s, r.result.trainer_idle,
                  r.result.rollout_busy, static_cast<long long>(r.result.regenerated));
  }
}

nlohmann::json RowJson(const char* type, const PlanConfig& c, const SimResult& r) {
  return {{"type", type}, {"rollouts", c.rollouts}, {"rewards", c.rewards}, {"ranks", c.ranks}, {"mode", c.mode},
          {"staleness", c.staleness}, {"start_fraction", c.start_fraction}, {"step_s", r.step_s},
          {"samples_per_s", r.samples_per_s}, {"trainer_idle", r.trainer_idle}, {"rollout_busy", r.rollout_busy},
          {"regenerated", r.regenerated}};
}

PlanShape ShapeOf(const PlanOptions& o, const PlanFit* fit) {
  PlanShape s = fit ? fit->run.shape : PlanShape{};
  if (o.micro_batch > 0) s.micro_batch = o.micro_batch;
  return s;
}

// Predicts each --check run's configuration with the fitted costs and compares.
Status Check(const PlanOptions& o, const PlanCosts& costs, const PlanShape& shape, double cores, std::ostream& out) {
  std::vector<double> errors;
  std::string line = "plan error:";
  if (o.checks.empty()) return Status::OK();
  if (!o.json) {
    out << "\ncheck: predicted against measured\n"
        << "run                                        slots       mode        predicted  measured   error\n";
  }
  for (const std::string& dir : o.checks) {
    RL_ASSIGN_OR_RETURN(RunEvents run, LoadRun(dir));
    RL_ASSIGN_OR_RETURN(RunMeasure m, MeasureRun(run, o.warmup));
    PlanShape s = shape;  // the fitted run's workload, in the checked run's batch shape
    s.prompts_per_step = m.shape.prompts_per_step;
    s.group_size = m.shape.group_size;
    s.micro_batch = m.shape.micro_batch;
    RL_ASSIGN_OR_RETURN(SimResult r, Simulate(costs, s, m.config, o.steps, o.warmup, cores, o.seed));
    const double err = std::fabs(r.step_s - m.step_s) / m.step_s;
    line += Printf(" %.1f%%", 100 * err);
    if (o.json) {
      nlohmann::json j = RowJson("check", m.config, r);
      j["run"] = dir;
      j["measured_step_s"] = m.step_s;
      j["error"] = err;
      out << j.dump() << "\n";
    } else {
      std::string name = dir.size() > 42 ? "..." + dir.substr(dir.size() - 39) : dir;
      out << Printf("%-42s %-10s  %-10s %9.3f %9.3f %6.1f%%\n", name.c_str(), Slots(m.config).c_str(),
                    m.config.mode.c_str(), r.step_s, m.step_s, 100 * err);
    }
  }
  if (!o.checks.empty()) out << line << "\n";
  return Status::OK();
}

int RunPlan(const PlanOptions& o) {
  auto fail = [](const Status& s) { return Fail(kTool, s); };
  if (o.from.empty() && o.decode_profile.empty()) {
    return fail(Status::InvalidArgument("plan needs --from RUN_DIR, --decode-profile FILE or both"));
  }
  if (o.from.empty() && !o.checks.empty()) return fail(Status::InvalidArgument("plan: --check needs --from"));
  const double cores = o.cores > 0 ? o.cores : static_cast<double>(std::max(1u, std::thread::hardware_concurrency()));
  PlanFit fit;
  if (!o.from.empty()) {
    auto run = LoadRun(o.from);
    if (!run.ok()) return fail(run.status());
    auto fitted = FitRun(*run, o.warmup);
    if (!fitted.ok()) return fail(fitted.status());
    fit = std::move(*fitted);
  }
  if (!o.decode_profile.empty()) {
    auto table = LoadDecodeTable(o.decode_profile);
    if (!table.ok()) return fail(table.status());
    fit.costs.decode = std::move(*table);
    fit.costs.gen_row_s = 0;  // the profile's prefill stands for the per-row cost
  }
  if (o.from.empty()) spdlog::warn("plan: no --from run: rewards, training and weight sync cost nothing in this plan");
  fit.run.shape = ShapeOf(o, o.from.empty() ? nullptr : &fit);
  if (!o.from.empty()) {
    auto hop = CalibrateHop(fit, o, cores);
    if (!hop.ok()) return fail(hop.status());
    fit.costs.hop_s = *hop;
  }
  const int pool = o.pool > 0 ? o.pool : fit.run.config.rollouts + fit.run.config.rewards + 1;
  auto rows = SearchPlans(fit.costs, fit.run.shape, o, pool, cores);
  if (!rows.ok()) return fail(rows.status());
  if (o.json) {
    std::cout << CostsJson(fit.costs, fit.run.shape).dump() << "\n";
    if (!o.from.empty()) {
      nlohmann::json j = {{"type", "fitted"}, {"run", o.from}, {"mode", fit.run.config.mode},
                          {"rollouts", fit.run.config.rollouts}, {"rewards", fit.run.config.rewards},
                          {"measured_step_s", fit.run.step_s}};
      std::cout << j.dump() << "\n";
    }
    for (const PlanRow& r : *rows) std::cout << RowJson("plan", r.config, r.result).dump() << "\n";
  } else {
    if (!o.from.empty()) {
      std::cout << Printf("fitted to %s: %s, %s, %lld steps, %.3f s/step measured\n", o.from.c_str(),
                          Slots(fit.run.config).c_str(), fit.run.config.mode.c_str(),
                          static_cast<long long>(fit.run.steps), fit.run.step_s);
    }
    PrintCosts(fit.costs, fit.run.shape, std::cout);
    PrintRanking(*rows, pool, cores, std::cout);
  }
  if (Status s = Check(o, fit.costs, fit.run.shape, cores, std::cout); !s.ok()) return fail(s);
  return std::cout.flush() ? int{kExitOk} : int{kExitIOErr};
}

}  // namespace

Result<double> CalibrateHop(const PlanFit& fit, const PlanOptions& o, double cores) {
  auto at = [&](double hop) -> Result<double> {
    PlanCosts c = fit.costs;
    c.hop_s = hop;
    RL_ASSIGN_OR_RETURN(SimResult r, Simulate(c, fit.run.shape, fit.run.config, o.steps, o.warmup, cores, o.seed));
    return r.step_s;
  };
  RL_ASSIGN_OR_RETURN(double none, at(0));
  const double target = fit.run.step_s;
  if (none >= target) {
    spdlog::warn("plan: the role costs alone give {:.3f} s/step for the fitted run, which measured {:.3f}: no "
                 "hand-over latency added", none, target);
    return 0.0;
  }
  double lo = 0, hi = target;
  for (int i = 0; i < 40; ++i) {
    const double mid = (lo + hi) / 2;
    RL_ASSIGN_OR_RETURN(double s, at(mid));
    (s < target ? lo : hi) = mid;
  }
  spdlog::info("plan: hand-over latency {:.4f} s makes the simulated step of the fitted run {:.3f} s (role costs "
               "alone: {:.3f} s)", lo, target, none);
  return lo;
}

Result<std::vector<PlanRow>> SearchPlans(const PlanCosts& costs, const PlanShape& shape, const PlanOptions& o,
                                         int pool, double cores) {
  std::vector<PlanRow> rows;
  for (int ranks : o.trainer_ranks) {
    for (int rollouts = 1; rollouts + 1 + ranks <= pool; ++rollouts) {
      for (const std::string& mode : o.modes) {
        PlanRow row;
        RL_RETURN_IF_ERROR(ParseMode(mode, &row.config));
        row.config.rollouts = rollouts;
        row.config.rewards = pool - ranks - rollouts;
        row.config.ranks = ranks;
        RL_ASSIGN_OR_RETURN(row.result, Simulate(costs, shape, row.config, o.steps, o.warmup, cores, o.seed));
        row.result.step_ends.clear();
        rows.push_back(std::move(row));
      }
    }
  }
  if (rows.empty()) {
    return Status::InvalidArgument("plan: a pool of " + std::to_string(pool) +
                                   " slots leaves no room for a rollout, a reward and the trainer ranks");
  }
  std::stable_sort(rows.begin(), rows.end(), [](const PlanRow& a, const PlanRow& b) {
    return a.result.step_s < b.result.step_s;
  });
  return rows;
}

Subcommand AddPlanCommand(CommandLine& cl) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* app = cl.Sub("plan",
                         "simulate the pipeline with costs fitted to a run and rank splits of slots and training "
                         "modes by predicted time per step");
  cl.Bind(app, "--from", &o->from);
  cl.Bind(app, "--decode-profile", &o->decode_profile);
  cl.Bind(app, "--pool", &o->pool)->check(CLI::Range(0, 1024));
  cl.Bind(app, "--modes", &o->modes)->delimiter(',');
  cl.Bind(app, "--trainer-ranks", &o->trainer_ranks)->delimiter(',')->check(CLI::Range(1, 1024));
  cl.Bind(app, "--sim-steps", &o->steps)->check(CLI::Range(int64_t{2}, int64_t{100000}));
  cl.Bind(app, "--warmup", &o->warmup)->check(CLI::Range(int64_t{0}, int64_t{10000}));
  cl.Bind(app, "--cores", &o->cores)->check(CLI::Range(0.0, 4096.0));
  cl.Bind(app, "--micro-batch", &o->micro_batch)->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cl.Bind(app, "--check", &o->checks);
  cl.Bind(app, "--seed", &o->seed);
  cl.BindFlag(app, "--json", &o->json);
  return {app, [o] {
            for (const std::string& m : o->modes) {
              PlanConfig c;
              if (Status s = ParseMode(m, &c); !s.ok()) return Fail(kTool, s);
            }
            if (o->cores > 0 && o->cores < 1) {
              return Fail(kTool, Status::InvalidArgument("plan: --cores must be at least 1 (0: this machine's)"));
            }
            if (o->warmup >= o->steps) {
              return Fail(kTool, Status::InvalidArgument("plan: --warmup must be below --sim-steps"));
            }
            return RunPlan(*o);
          }};
}

}  // namespace rl::profile
