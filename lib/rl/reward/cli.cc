#include "rl/reward/cli.h"

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <iostream>

#include "rl/core/event_log.h"
#include "rl/core/fail.h"
#include "rl/core/json_field.h"
#include "rl/core/log.h"
#include "rl/core/options.h"
#include "rl/core/signals.h"
#include "rl/health/flags.h"
#include "rl/reward/exec_verifier.h"
#include "rl/reward/judge_flags.h"
#include "rl/reward/reward_loop.h"
#include "rl/task/addition.h"
#include "rl/task/dataset.h"

namespace rl::reward {
namespace {

constexpr char kTool[] = "rl-reward";

struct VerifierFlags {
  std::string verifier, exec;
  double tolerance = 1e-6, exec_timeout_s = 10;
  JudgeOptions judge;
  int threads = 1;

  void Bind(CommandLine& cl, CLI::App* sub) {
    cl.Bind(sub, "--verifier", &verifier)->check(CLI::IsMember({"addition", "exact", "numeric", "math"}));
    cl.Bind(sub, "--tolerance", &tolerance)->check(kNonNegative);
    cl.Bind(sub, "--exec", &exec);
    cl.Bind(sub, "--exec-timeout", &exec_timeout_s)->check(CLI::Range(0.001, 3600.0));
    BindJudgeFlags(cl, sub, &judge);
    cl.Bind(sub, "--threads", &threads)->check(CLI::Range(1, 1024));
  }
  Result<std::unique_ptr<Verifier>> Make() const {
    if (verifier.empty() + exec.empty() + judge.dir.empty() != 2) {
      return Status::InvalidArgument("give one of --verifier, --exec and --judge");
    }
    if (!judge.dir.empty()) {
      at::set_num_threads(threads);
      RL_ASSIGN_OR_RETURN(std::unique_ptr<JudgeVerifier> j, JudgeVerifier::Open(judge));
      spdlog::info("judge {} loaded ({} mode, {} threads)", judge.dir, judge.mode, threads);
      return std::unique_ptr<Verifier>(std::move(j));
    }
    if (!exec.empty()) {
      return std::unique_ptr<Verifier>(new ExecVerifier(exec, static_cast<int>(exec_timeout_s * 1000)));
    }
    return MakeVerifier(verifier, tolerance);
  }
};

Result<std::string> Field(const nlohmann::ordered_json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return Status::DataError(std::string("no \"") + name + "\"");
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number()) return task::JsonNumberText(*it);  // "answer": 2.5 or 18
  return Status::DataError(std::string("\"") + name + "\" is not a string");
}

Result<RewardRequest> RequestOfLine(const nlohmann::ordered_json& j) {
  if (!j.is_object()) return Status::DataError("not a JSON object");
  RewardRequest req;
  RL_ASSIGN_OR_RETURN(req.prompt, Field(j, "prompt"));
  RL_ASSIGN_OR_RETURN(req.response, Field(j, "response"));
  RL_ASSIGN_OR_RETURN(req.answer, Field(j, "answer"));
  return req;
}

int RunMakeData(const std::string& task, uint64_t count, uint64_t seed, bool heldout) {
  if (task != "addition") return Fail(kTool, Status::InvalidArgument("unknown task '" + task + "' (addition)"));
  // The held-out set is rl-train's evaluation set (its first `count` problems), whatever the seed.
  for (const task::Problem& e : heldout ? task::HeldOutSet(count) : task::MakeProblems(count, seed)) {
    nlohmann::ordered_json j = {{"prompt", e.prompt}, {"answer", e.answer}};
    std::cout << j.dump() << "\n";
  }
  std::cout.flush();
  return std::cout ? kExitOk : kExitIOErr;
}

int RunLoop(RewardLoopOptions o, Verifier* verifier, const std::string& run_dir, const std::string& id) {
  EventLog events;
  if (!run_dir.empty()) {
    if (Status s = events.Open(run_dir, "reward", id); !s.ok()) return Fail(kTool, s);
    o.events = &events;
    events.Emit("start", {{"endpoint", o.client.endpoint}});
  }
  o.events = &events;  // a disabled log still keeps the phase the heartbeat reports
  const std::atomic<bool>& stop = InstallStopSignals();
  StopWatchdog watchdog(stop, o.wait_ms + 5000, kTool);
  o.watchdog = &watchdog;
  o.client.stop = &stop;  // a waiting get ends at once on a stop: the role holds nothing then
  RewardStats stats;
  Status s = RunRewardLoop(o, verifier, stop, &stats);
  events.Emit("stop", {{"rows", stats.rows}, {"failed", stats.failed}, {"error", s.ok() ? "" : s.ToString()}});
  return s.ok() ? kExitOk : Fail(kTool, s);
}

}  // namespace

int RunScore(Verifier* verifier, std::istream& in, std::ostream& out, size_t batch) {
  std::string line;
  uint64_t n = 0, rows = 0, failed = 0;
  double sum = 0;
  std::vector<nlohmann::ordered_json> lines;  // a batch of parsed lines, scored in one call
  std::vector<uint64_t> numbers;
  std::vector<RewardRequest> reqs;
  auto report = [&](uint64_t line_no, const Status& s) {
    std::cerr << "rl-reward: stdin line " << line_no << ": " << s.message() << "\n";
    ++failed;
  };
  auto flush = [&]() -> bool {  // false: the verifier is broken
    std::vector<Result<double>> scored = verifier->ScoreBatch(reqs);
    for (size_t i = 0; i < scored.size(); ++i) {
      if (!scored[i].ok()) {
        report(numbers[i], scored[i].status());
        if (verifier->broken()) return false;
        continue;
      }
      lines[i]["reward"] = *scored[i];
      out << JsonText(lines[i]) << "\n";
      ++rows;
      sum += *scored[i];
    }
    lines.clear();
    numbers.clear();
    reqs.clear();
    return true;
  };
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(line, nullptr, false);
    Result<RewardRequest> req =
        j.is_discarded() ? Result<RewardRequest>(Status::DataError("not valid JSON")) : RequestOfLine(j);
    if (!req.ok()) {
      report(n, req.status());
      continue;
    }
    lines.push_back(std::move(j));
    numbers.push_back(n);
    reqs.push_back(std::move(*req));
    if (reqs.size() >= batch && !flush()) return kExitUnavailable;
  }
  if (!reqs.empty() && !flush()) return kExitUnavailable;
  out.flush();
  spdlog::info("{} rows scored, mean reward {:.4f}{}", rows, rows ? sum / rows : 0.0,
               failed ? ", " + std::to_string(failed) + " failed" : "");
  return failed ? kExitDataErr : kExitOk;
}

int RewardMain(int argc, char** argv) {
  CommandLine cl(kTool,
                 "rl-reward: scores responses with a rule-based verifier, an external command or a judge model "
                 "(see man rl-reward)");
  std::string log_level = "info";
  cl.Bind(nullptr, "--log-level", &log_level);

  VerifierFlags run_v, score_v;
  RewardLoopOptions lo;
  std::string connect = "tcp://127.0.0.1:5555", run_dir, id = "0";
  double timeout_s = 60, lease_s = 60, wait_s = 5, progress_s = 10;
  CLI::App* run = cl.Sub("run", "score rows of task 'reward' from rl-queue until stopped");
  run_v.Bind(cl, run);
  cl.Bind(run, "--connect", &connect);
  cl.Bind(run, "--timeout", &timeout_s);
  cl.Bind(run, "--count", &lo.count)->check(CLI::Range(1, 100000))->description("rows per get");
  cl.Bind(run, "--lease", &lease_s)->check(kLeaseSeconds);
  cl.Bind(run, "--wait", &wait_s)->check(CLI::Range(0.0, 3600.0));
  cl.Bind(run, "--progress-interval", &progress_s)->check(kNonNegative);
  cl.Bind(run, "--run-dir", &run_dir);
  cl.Bind(run, "--id", &id);
  health::HeartbeatFlags heartbeat;
  heartbeat.Bind(cl, run);

  CLI::App* score = cl.Sub("score", "score JSON lines {prompt, response, answer} from stdin; no queue");
  score_v.Bind(cl, score);
  size_t score_batch = 64;
  cl.Bind(score, "--count", &score_batch)->check(CLI::Range(1, 100000))->description("lines per verifier call");

  std::string task = "addition";
  uint64_t count = 1000, seed = 0;
  bool heldout = false;
  CLI::App* make = cl.Sub("make-data", "print the demo task's prompts as JSON lines {prompt, answer, prompt_ids}");
  cl.Bind(make, "--task", &task)->description("demo task: addition (3-digit, zero-padded)");
  cl.Bind(make, "--count", &count)->check(CLI::Range(uint64_t{1}, uint64_t{10000000}))->description("prompts to print");
  cl.Bind(make, "--seed", &seed);
  cl.BindFlag(make, "--heldout", &heldout);

  if (auto code = cl.Parse(argc, argv)) return *code;
  if (Status s = InitLogging(kTool, log_level); !s.ok()) return Fail(kTool, s);

  if (make->parsed()) return RunMakeData(task, count, seed, heldout);
  VerifierFlags& vf = run->parsed() ? run_v : score_v;
  auto verifier = vf.Make();
  if (!verifier.ok()) return Fail(kTool, verifier.status());
  if (score->parsed()) return RunScore(verifier->get(), std::cin, std::cout, score_batch);
  lo.client.endpoint = connect;
  lo.client.give_up_s = timeout_s;
  lo.client.sender = NewSenderId("rl-reward");
  lo.lease_ms = static_cast<int64_t>(lease_s * 1000);
  lo.holder = "reward/" + id;
  lo.wait_ms = static_cast<int64_t>(wait_s * 1000);
  lo.progress_ms = static_cast<int64_t>(progress_s * 1000);
  auto beat = heartbeat.Start("reward", id, {{"queue", connect}});
  if (!beat.ok()) return Fail(kTool, beat.status());
  return RunLoop(lo, verifier->get(), run_dir, id);
}

}  // namespace rl::reward
