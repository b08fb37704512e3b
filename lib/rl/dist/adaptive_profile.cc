#include "rl/dist/adaptive_profile.h"

#include <ATen/Parallel.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>

#include "rl/core/fail.h"
#include "rl/dist/adaptive_generate.h"
#include "rl/dist/decode_grid.h"
#include "rl/model/device.h"
#include "rl/model/model_dir.h"

extern char** environ;

namespace rl::dist {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void Progress(const AdaptiveProfileOptions& o, const std::string& line) {
  if (o.rank == 0) std::cerr << "rl-profile adaptive: " << line << std::endl;
}

// The model in --precision on this rank's device.
Result<model::Transformer> LoadModel(const AdaptiveProfileOptions& o, const c10::Device& device) {
  RL_ASSIGN_OR_RETURN(model::ModelDir dir, model::OpenModelDir(o.model));
  const int64_t context = o.prompt_tokens + o.max_new_tokens + 1;
  const model::DType dtype = o.precision == "bf16" ? model::DType::kBF16 : model::DType::kF32;
  RL_ASSIGN_OR_RETURN(model::Transformer m, model::InitialModel(dir, o.seed, model::HfLoadOptions{dtype, context}));
  RL_RETURN_IF_ERROR(m.ToDType(dtype));  // a directory without weights starts in float32
  RL_RETURN_IF_ERROR(m.To(device));
  return m;
}

struct Workload {
  std::string name;
  std::vector<std::vector<int64_t>> prompts;
  std::vector<int64_t> caps;
};

// Long tail: every 1/tail-th prompt runs to max_new_tokens, the others short_tokens +- 50%.
// Uniform: every prompt the long tail's mean length (the same tokens in all).
std::vector<Workload> MakeWorkloads(const AdaptiveProfileOptions& o, int64_t vocab) {
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  std::uniform_int_distribution<int64_t> short_len(std::max<int64_t>(1, o.short_tokens / 2), o.short_tokens * 3 / 2);
  Workload tail{"long-tail", {}, {}};
  const int64_t every = std::max<int64_t>(1, std::llround(1.0 / std::max(o.tail, 1e-9)));
  int64_t total = 0;
  for (int64_t i = 0; i < o.prompts; ++i) {
    std::vector<int64_t> p;
    for (int64_t j = 0; j < o.prompt_tokens; ++j) p.push_back(id(rng));
    tail.prompts.push_back(p);
    tail.caps.push_back(i % every == every / 2 ? o.max_new_tokens : short_len(rng));
    total += tail.caps.back();
  }
  Workload uniform{"uniform", tail.prompts, std::vector<int64_t>(tail.prompts.size(), std::max<int64_t>(1, total / o.prompts))};
  return {tail, uniform};
}

struct Run {
  double seconds = 0;
  AdaptiveResult result;
};

Result<Run> RunStage(Group& group, const model::Transformer& whole, const Workload& w,
                     const AdaptiveProfileOptions& o, const LatencyModel& predictor, LatencyCalibration* calibration,
                     bool adaptive, int start_tp) {
  AdaptiveOptions a;
  a.generate.sampling.temperature = 0;
  a.generate.slots = o.slots;
  a.generate.max_new_tokens_each = w.caps;
  a.adaptive = adaptive;
  a.start_tp = start_tp;
  a.check_every = o.check_every;
  a.margin = o.margin;
  a.predictor = &predictor;
  a.calibration = calibration;
  RL_RETURN_IF_ERROR(group.Barrier());
  const auto t = Clock::now();
  RL_ASSIGN_OR_RETURN(AdaptiveResult r, AdaptiveGenerate(group, whole, w.prompts, a));
  RL_RETURN_IF_ERROR(group.Barrier());
  return Run{Since(t), std::move(r)};
}

// The time a fresh process takes to start and load the model: what a switch that restarts the
// engine processes pays before it can decode again.
Result<double> TimeFreshLoad(const AdaptiveProfileOptions& o, const c10::Device& device) {
  std::vector<std::string> args = {"rl-profile", "adaptive", "--load-only", "--model", o.model,
                                   "--max-new-tokens", std::to_string(o.max_new_tokens),
                                   "--prompt-tokens", std::to_string(o.prompt_tokens),
                                   "--device", model::DeviceName(device), "--precision", o.precision};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto t = Clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) != 0) {
    return Status::IOError("adaptive: cannot start a process to time a model load");
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return Status::Internal("adaptive: the load-only process failed");
  return Since(t);
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Describe(const AdaptiveResult& r) {
  if (r.switches.empty()) return "no switch";
  std::string out;
  for (const SwitchRecord& s : r.switches) {
    out += std::string(out.empty() ? "" : "; ") + "tp " + std::to_string(s.from) + " -> " + std::to_string(s.to) +
           " after round " + std::to_string(s.round) + ": " + std::to_string(s.sequences) + " sequences, " +
           (s.recompute ? "recomputed" : "cache moved") + ", predicted " + Fixed(s.predicted.total_s(), 2) +
           " s vs " + Fixed(s.predicted.stay_s, 2) + " s staying";
  }
  return out;
}

int RunProfile(const AdaptiveProfileOptions& o) {
  at::set_num_threads(o.threads);
  auto device = model::OpenRankDevice(o.device, o.load_only ? 0 : o.rank);
  if (!device.ok()) return Fail("rl-profile", device.status());
  if (o.load_only) {
    auto m = LoadModel(o, *device);
    if (m.ok()) model::Synchronize(*device);  // the copy to a GPU is part of the load
    return m.ok() ? kExitOk : Fail("rl-profile", m.status());
  }
  GroupOptions g;
  if (device->is_cuda()) g.gpu = device->has_index() ? device->index() : 0;
  g.endpoint = o.rendezvous;
  g.rank = o.rank;
  g.size = o.ranks;
  g.name = "adaptive";
  g.timeout_ms = 120000;
  auto group = Group::Join(g);
  if (!group.ok()) return Fail("rl-profile", group.status());
  auto whole = LoadModel(o, *device);
  if (!whole.ok()) return Fail("rl-profile", whole.status());
  const int n = o.ranks;
  std::string degrees;
  for (int t : ProfiledDegrees(whole->config(), n)) degrees += (degrees.empty() ? "" : ", ") + std::to_string(t);
  Progress(o, "profiling decode at tp " + degrees);
  DecodeGridOptions grid;
  grid.steps = o.steps;
  grid.seed = o.seed;
  grid.batches.clear();
  for (int64_t b = 1; b <= o.slots; b *= 2) grid.batches.push_back(b);
  grid.lengths = {o.prompt_tokens, o.prompt_tokens + o.max_new_tokens / 4, o.prompt_tokens + o.max_new_tokens - o.steps - 1};
  auto t = Clock::now();
  auto predictor = MeasureDecodeGrid(*group, *whole, grid);
  if (!predictor.ok()) return Fail("rl-profile", predictor.status());
  const double profile_s = Since(t);
  if (o.rank == 0 && !o.profile_out.empty()) {
    std::ofstream out(o.profile_out);
    out << predictor->ToJson().dump() << "\n";
    if (!out.flush()) return Fail("rl-profile", Status::IOError("--profile-out " + o.profile_out + ": cannot write"));
  }
  // Static runs at every profiled degree (N/t replicas of degree t), then adaptive from 1.
  const std::vector<int> statics = ProfiledDegrees(whole->config(), n);
  struct Row {
    std::string name;
    std::vector<Run> statics;
    Run adaptive;
  };
  // With --repeats R every configuration runs R times, the configurations taking turns, so that
  // a slow spell of a shared machine falls on all of them; each reports its median time, and the
  // first repeat's run (its decisions, its switch) stands for it. Every run's rounds feed the
  // predictor's error.
  std::vector<Row> rows;
  std::vector<Run> extra_runs;
  // One calibration across every run, as a long-lived rollout keeps one across its batches.
  LatencyCalibration calibration;
  for (const Workload& w : MakeWorkloads(o, whole->config().vocab_size)) {
    Row row{w.name, {}, {}};
    std::vector<std::vector<double>> times(statics.size() + 1);
    for (int rep = 0; rep < o.repeats; ++rep) {
      for (size_t mode = 0; mode <= statics.size(); ++mode) {
        const bool adaptive = mode == statics.size();
        const int tp = adaptive ? 1 : statics[mode];
        const std::string what = w.name + ": " + (adaptive ? std::string("adaptive") : "static tp " + std::to_string(tp)) +
                                 (o.repeats > 1 ? " (" + std::to_string(rep + 1) + "/" + std::to_string(o.repeats) + ")" : "");
        auto run = RunStage(*group, *whole, w, o, *predictor, &calibration, adaptive, tp);
        if (!run.ok()) return Fail("rl-profile", run.status());
        // Each run's own time, so that the spread behind a median can be seen.
        Progress(o, what + ": " + Fixed(run->seconds, 2) + " s" +
                        (adaptive && !run->result.switches.empty() ? ", " + Describe(run->result) : ""));
        times[mode].push_back(run->seconds);
        if (rep > 0) {
          extra_runs.push_back(std::move(*run));
        } else {
          (adaptive ? row.adaptive : row.statics.emplace_back()) = std::move(*run);
        }
      }
    }
    for (size_t mode = 0; mode <= statics.size(); ++mode) {
      std::sort(times[mode].begin(), times[mode].end());
      (mode == statics.size() ? row.adaptive : row.statics[mode]).seconds = times[mode][times[mode].size() / 2];
    }
    rows.push_back(std::move(row));
  }
  // The naive switch: a fresh process loads the model, a fresh group forms, the moved sequences
  // are prefilled again (predicted from the profile).
  Progress(o, "timing a naive switch (fresh process, model load, fresh group)");
  double load_s = 0;
  if (o.rank == 0) {
    auto l = TimeFreshLoad(o, *device);
    if (!l.ok()) return Fail("rl-profile", l.status());
    load_s = *l;
  }
  t = Clock::now();
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  auto fresh = group->Subgroup(all, "naive-restart");
  if (!fresh.ok()) return Fail("rl-profile", fresh.status());
  const double group_s = Since(t);
  // Every rank has joined before any leaves: a rank that left while rank 0 still joined closed
  // its connections under rank 0's join (Gloo: "Connection closed by peer", seen under load).
  if (Status b = fresh->Barrier(); !b.ok()) return Fail("rl-profile", b);
  if (o.rank != 0) return kExitOk;

  // Predictor error on the real trajectories: pure decode rounds of every run, each predicted
  // before it ran (the profile times the calibration of the rounds before it) against measured,
  // summed (the quantity the decision uses) and per step; and the profile alone, uncalibrated.
  double predicted = 0, measured = 0, profiled = 0;
  std::vector<double> step_errors;
  std::vector<const Run*> runs;
  for (const Row& row : rows) {
    runs.push_back(&row.adaptive);
    for (const Run& r : row.statics) runs.push_back(&r);
  }
  for (const Run& r : extra_runs) runs.push_back(&r);
  for (const Run* run : runs) {
    for (const RoundTrace& r : run->result.trace) {
      if (r.prefill || r.batch == 0) continue;
      const double p = r.predicted;
      predicted += p;
      profiled += predictor->Step(r.tp, r.batch, r.context_tokens);
      measured += r.seconds;
      step_errors.push_back(std::abs(p - r.seconds) / r.seconds);
    }
  }
  std::sort(step_errors.begin(), step_errors.end());
  const double trajectory_error = measured > 0 ? std::abs(predicted - measured) / measured : 0;
  const double profile_error = measured > 0 ? std::abs(profiled - measured) / measured : 0;
  const double step_median = step_errors.empty() ? 0 : step_errors[step_errors.size() / 2];

  std::cout << "adaptive tensor parallelism: " << n << " ranks, " << o.prompts << " prompts of "
            << o.prompt_tokens << " tokens, " << o.slots << " slots per replica, long tail "
            << o.max_new_tokens << " tokens (" << Fixed(o.tail * 100, 0) << "%), short " << o.short_tokens
            << "; " << model::DeviceName(*device) << (group->OnNccl() ? " (NCCL)" : "") << ", " << o.precision
            << "; profile " << Fixed(profile_s, 1) << " s"
            << (o.repeats > 1 ? "; times are medians of " + std::to_string(o.repeats) + " runs" : std::string())
            << "\n";
  std::cout << "| workload |";
  for (int tp : statics) std::cout << " static tp " << tp << " (dp " << n / tp << ") s |";
  std::cout << " adaptive s | adaptive/best static | decision |\n";
  std::cout << "| --- |";
  for (size_t i = 0; i < statics.size(); ++i) std::cout << " --- |";
  std::cout << " --- | --- | --- |\n";
  std::vector<double> ratios;
  const SwitchRecord* measured_switch = nullptr;
  for (const Row& row : rows) {
    double best = row.statics[0].seconds;
    std::cout << "| " << row.name << " |";
    for (const Run& r : row.statics) {
      best = std::min(best, r.seconds);
      std::cout << " " << Fixed(r.seconds, 2) << " |";
    }
    ratios.push_back(row.adaptive.seconds / best);
    std::cout << " " << Fixed(row.adaptive.seconds, 2) << " | " << Fixed(ratios.back(), 2) << " | "
              << Describe(row.adaptive.result) << " |\n";
    if (!row.adaptive.result.switches.empty() && measured_switch == nullptr) {
      measured_switch = &row.adaptive.result.switches[0];
    }
  }
  double switch_ratio = 0;
  if (measured_switch != nullptr) {
    const SwitchRecord& s = *measured_switch;
    const double prefill = s.predicted.recompute_s - predictor->ToJson()["switch"]["reshard_s"].get<double>();
    const double naive = load_s + group_s + prefill;
    switch_ratio = s.total_s() / naive;
    std::cout << "switch: " << Fixed(s.total_s() * 1e3, 1) << " ms = state " << Fixed(s.state_s * 1e3, 1)
              << " + resharding " << Fixed(s.reshard_s * 1e3, 1) << " + other " << Fixed(s.other_s * 1e3, 1)
              << "; naive restart " << Fixed(naive * 1e3, 1) << " ms = process start and model load "
              << Fixed(load_s * 1e3, 1) << " + group " << Fixed(group_s * 1e3, 1) << " + prefill of "
              << s.sequences << " sequences " << Fixed(prefill * 1e3, 1) << " (predicted)\n";
  } else {
    std::cout << "switch: none took place\n";
  }
  std::cout << "predictor: decode time of " << step_errors.size() << " real steps predicted "
            << Fixed(predicted, 2) << " s, measured " << Fixed(measured, 2) << " s (error "
            << Fixed(trajectory_error * 100, 1) << "%); per-step median error " << Fixed(step_median * 100, 1)
            << "%; the profile alone, uncalibrated, " << Fixed(profiled, 2) << " s (error "
            << Fixed(profile_error * 100, 1) << "%)\n";
  std::cout << "adaptive/best-static: long-tail " << Fixed(ratios[0], 2) << " uniform " << Fixed(ratios[1], 2)
            << "; switch/naive-restart " << Fixed(switch_ratio, 2) << "; predictor error "
            << Fixed(trajectory_error * 100, 1) << "%" << std::endl;
  return kExitOk;
}

}  // namespace

profile::Subcommand AddAdaptiveProfile(CommandLine& cl) {
  auto o = std::make_shared<AdaptiveProfileOptions>();
  CLI::App* app = cl.Sub("adaptive",
                         "adaptive tensor parallelism on a model: static at each tp 1, 2, 4 .. N and adaptive on a "
                         "long-tail and a uniform workload, the switch against a naive restart, the predictor's error");
  cl.Require(cl.Bind(app, "--model", &o->model));
  cl.Bind(app, "--ranks", &o->ranks)->check(CLI::Range(1, 64));
  cl.Bind(app, "--rank", &o->rank)->check(CLI::Range(0, 63));
  cl.Bind(app, "--rendezvous", &o->rendezvous);
  cl.Bind(app, "--requests", &o->prompts)->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  cl.Bind(app, "--prompt-tokens", &o->prompt_tokens)->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  cl.Bind(app, "--slots", &o->slots)->check(CLI::Range(int64_t{1}, int64_t{1} << 12));
  cl.Bind(app, "--max-new-tokens", &o->max_new_tokens)->check(CLI::Range(int64_t{8}, int64_t{1} << 16));
  cl.Bind(app, "--short-tokens", &o->short_tokens)->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  cl.Bind(app, "--tail", &o->tail)->check(CLI::Range(0.001, 1.0));
  cl.Bind(app, "--check-every", &o->check_every)->check(CLI::Range(1, 1 << 16));
  cl.Bind(app, "--switch-margin", &o->margin)->check(CLI::Range(0.0, 10.0));
  cl.Bind(app, "--steps", &o->steps)->check(CLI::Range(1, 1000));
  cl.Bind(app, "--repeats", &o->repeats)->check(CLI::Range(1, 100));
  cl.Bind(app, "--threads", &o->threads)->check(CLI::Range(1, 256));
  cl.Bind(app, "--device", &o->device);
  cl.Bind(app, "--precision", &o->precision)->check(CLI::IsMember({"float32", "bf16"}));
  cl.Bind(app, "--seed", &o->seed);
  cl.BindFlag(app, "--load-only", &o->load_only);
  cl.Bind(app, "--profile-out", &o->profile_out);
  return {app, [o]() -> int {
            if (!o->load_only && (o->rendezvous.empty() || o->rank >= o->ranks)) {
              return Fail("rl-profile", Status::InvalidArgument("adaptive: --rendezvous HOST:PORT and a --rank below --ranks are needed"));
            }
            if (!o->load_only && o->short_tokens >= o->max_new_tokens) {  // a load needs no workload
              return Fail("rl-profile", Status::InvalidArgument("adaptive: --short-tokens must be below --max-new-tokens"));
            }
            return RunProfile(*o);
          }};
}

}  // namespace rl::dist
