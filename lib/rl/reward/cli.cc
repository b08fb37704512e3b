#include "rl/reward/cli.h"

#include <nlohmann/json.hpp>

#include <iostream>

#include "rl/core/event_log.h"
#include "rl/core/fail.h"
#include "rl/core/log.h"
#include "rl/core/options.h"
#include "rl/core/signals.h"
#include "rl/health/flags.h"
#include "rl/task/addition.h"
#include "rl/task/dataset.h"
#include "rl/reward/exec_verifier.h"
#include "rl/reward/reward_loop.h"

namespace rl::reward {
namespace {

constexpr char kTool[] = "rl-reward";

struct VerifierFlags {
  std::string verifier, exec;
  double tolerance = 1e-6, exec_timeout_s = 10;

  void Bind(CommandLine& cl, CLI::App* sub) {
    cl.Bind(sub, "--verifier", &verifier)->check(CLI::IsMember({"addition", "exact", "numeric", "math"}));
    cl.Bind(sub, "--tolerance", &tolerance)->check(CLI::NonNegativeNumber);
    cl.Bind(sub, "--exec", &exec);
    cl.Bind(sub, "--exec-timeout", &exec_timeout_s)->check(CLI::Range(0.001, 3600.0));
  }
  Result<std::unique_ptr<Verifier>> Make() const {
    if (verifier.empty() == exec.empty()) return Status::InvalidArgument("give one of --verifier and --exec");
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

Result<double> ScoreLine(Verifier* verifier, const nlohmann::ordered_json& j) {
  if (!j.is_object()) return Status::DataError("not a JSON object");
  RewardRequest req;
  RL_ASSIGN_OR_RETURN(req.prompt, Field(j, "prompt"));
  RL_ASSIGN_OR_RETURN(req.response, Field(j, "response"));
  RL_ASSIGN_OR_RETURN(req.answer, Field(j, "answer"));
  return verifier->Score(req);
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

int RunScore(Verifier* verifier, std::istream& in, std::ostream& out) {
  std::string line;
  uint64_t n = 0, rows = 0, failed = 0;
  double sum = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(line, nullptr, false);
    Result<double> r = j.is_discarded() ? Result<double>(Status::DataError("not valid JSON")) : ScoreLine(verifier, j);
    if (!r.ok()) {
      std::cerr << "rl-reward: stdin line " << n << ": " << r.status().message() << "\n";
      ++failed;
      if (verifier->broken()) return ExitCodeFor(r.status());
      continue;
    }
    j["reward"] = *r;
    out << j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    ++rows;
    sum += *r;
  }
  out.flush();
  spdlog::info("{} rows scored, mean reward {:.4f}{}", rows, rows ? sum / rows : 0.0,
               failed ? ", " + std::to_string(failed) + " failed" : "");
  return failed ? kExitDataErr : kExitOk;
}

int RewardMain(int argc, char** argv) {
  CommandLine cl(kTool, "rl-reward: scores responses with a rule-based verifier or an external command (see man rl-reward)");
  std::string log_level = "info";
  cl.Bind(nullptr, "--log-level", &log_level);

  VerifierFlags run_v, score_v;
  RewardLoopOptions lo;
  std::string connect = "tcp://127.0.0.1:5555", run_dir, id = "0";
  double timeout_s = 60, lease_s = 60, wait_s = 5, progress_s = 10;
  int threads = 1;
  CLI::App* run = cl.Sub("run", "score rows of task 'reward' from rl-queue until stopped");
  run_v.Bind(cl, run);
  cl.Bind(run, "--connect", &connect);
  cl.Bind(run, "--timeout", &timeout_s);
  cl.Bind(run, "--count", &lo.count)->check(CLI::Range(1, 100000))->description("rows per get");
  cl.Bind(run, "--lease", &lease_s)->check(CLI::PositiveNumber);
  cl.Bind(run, "--wait", &wait_s)->check(CLI::Range(0.0, 3600.0));
  cl.Bind(run, "--progress-interval", &progress_s)->check(CLI::NonNegativeNumber);
  cl.Bind(run, "--run-dir", &run_dir);
  cl.Bind(run, "--id", &id);
  cl.Bind(run, "--threads", &threads)->check(CLI::Range(1, 1024));
  health::HeartbeatFlags heartbeat;
  heartbeat.Bind(cl, run);

  CLI::App* score = cl.Sub("score", "score JSON lines {prompt, response, answer} from stdin; no queue");
  score_v.Bind(cl, score);

  std::string task = "addition";
  uint64_t count = 1000, seed = 0;
  bool heldout = false;
  CLI::App* make = cl.Sub("make-data", "print the demo task's prompts as JSON lines {prompt, answer, prompt_ids}");
  cl.Bind(make, "--task", &task)->description("demo task: addition (3-digit, zero-padded)");
  cl.Bind(make, "--count", &count)->description("prompts to print");
  cl.Bind(make, "--seed", &seed);
  cl.BindFlag(make, "--heldout", &heldout);

  if (auto code = cl.Parse(argc, argv)) return *code;
  if (Status s = InitLogging(kTool, log_level); !s.ok()) return Fail(kTool, s);

  if (make->parsed()) return RunMakeData(task, count, seed, heldout);
  VerifierFlags& vf = run->parsed() ? run_v : score_v;
  auto verifier = vf.Make();
  if (!verifier.ok()) return Fail(kTool, verifier.status());
  if (score->parsed()) return RunScore(verifier->get(), std::cin, std::cout);
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
