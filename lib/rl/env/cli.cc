#include "rl/env/cli.h"

#include <unistd.h>

#include <climits>
#include <iostream>
#include <nlohmann/json.hpp>

#include "rl/core/event_log.h"
#include "rl/core/fail.h"
#include "rl/core/json_field.h"
#include "rl/core/log.h"
#include "rl/core/options.h"
#include "rl/core/signals.h"
#include "rl/env/calc.h"
#include "rl/env/client.h"
#include "rl/env/server.h"
#include "rl/health/flags.h"

namespace rl::env {
namespace {

constexpr char kTool[] = "rl-env";

// A command whose first word is rl-env runs this binary, so `--tool calc="rl-env calc"` works
// whatever PATH says.
std::string ResolveSelf(const std::string& command) {
  if (command != "rl-env" && command.rfind("rl-env ", 0) != 0) return command;
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return command;
  std::string quoted = "'";
  for (char c : std::string(self, static_cast<size_t>(n))) {
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return quoted + "'" + command.substr(6);
}

Result<std::map<std::string, std::string>> ParseTools(const std::vector<std::string>& specs) {
  if (specs.empty()) return Status::InvalidArgument("give at least one --tool NAME=COMMAND");
  std::map<std::string, std::string> tools;
  for (const std::string& spec : specs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      return Status::InvalidArgument("--tool wants NAME=COMMAND, not '" + spec + "'");
    }
    std::string name = spec.substr(0, eq);
    if (!tools.emplace(name, ResolveSelf(spec.substr(eq + 1))).second) {
      return Status::InvalidArgument("--tool " + name + " is given twice");
    }
  }
  return tools;
}

Result<NetworkIsolation> CheckNetwork(const std::string& mode) {
  if (mode == "off") {
    spdlog::info("tools have the network (--no-network off)");
    return NetworkIsolation::kOff;
  }
  Status probe = ProbeNetworkIsolation();
  if (mode == "require") {
    if (!probe.ok()) {
      return Status::Unavailable("--no-network require: tools cannot be cut off the network: " + probe.message());
    }
    spdlog::info("tools run without network (user and network namespaces of their own)");
    return NetworkIsolation::kRequire;
  }
  if (probe.ok()) {
    spdlog::info("tools run without network (user and network namespaces of their own)");
  } else {
    spdlog::warn("tools have the network: {} (--no-network require would refuse to start)", probe.message());
  }
  return NetworkIsolation::kTry;
}

int RunServe(ServerOptions o, const std::string& run_dir, const std::string& id,
             const health::HeartbeatFlags& heartbeat) {
  EventLog events;
  if (!run_dir.empty()) {
    if (Status s = events.Open(run_dir, "env", id); !s.ok()) return Fail(kTool, s);
    o.events = &events;
  }
  const std::atomic<bool>& stop = InstallStopSignals();
  auto server = Server::Open(std::move(o));
  if (!server.ok()) return Fail(kTool, server.status());
  auto beat = heartbeat.Start("env", id, {{"bind", (*server)->endpoint()}});
  if (!beat.ok()) return Fail(kTool, beat.status());
  Status s = (*server)->Run(stop);
  return s.ok() ? kExitOk : Fail(kTool, s);
}

nlohmann::json ResultJson(const ToolResult& r) {
  if (r.ok && r.reward) return {{"output", r.output}, {"reward", *r.reward}};
  if (r.ok) return {{"output", r.output}};
  return {{"error", r.error}, {"kind", r.kind}};
}

int RunCall(ClientOptions co, int64_t timeout_ms, const std::vector<std::string>& args) {
  if (args.empty() || args.size() % 2 != 0) {
    return Fail(kTool, Status::InvalidArgument("call wants NAME ARGUMENTS_JSON pairs (e.g. calc '\"12*34\"')"));
  }
  std::vector<ToolCall> calls;
  for (size_t i = 0; i < args.size(); i += 2) calls.push_back({args[i], args[i + 1]});
  co.sender = NewSenderId("rl-env-call");
  EnvClient client(std::move(co), timeout_ms);
  auto results = client.Call(calls);
  if (!results.ok()) return Fail(kTool, results.status());
  bool all_ok = true;
  for (const ToolResult& r : *results) {
    std::cout << JsonText(ResultJson(r)) << "\n";
    all_ok = all_ok && r.ok;
  }
  std::cout.flush();
  spdlog::debug("{} calls in {:.3f} s on rl-env", calls.size(), client.last_seconds());
  return all_ok ? kExitOk : 1;
}

}  // namespace

int EnvMain(int argc, char** argv) {
  CommandLine cl(kTool, "rl-env: runs the tool calls of multi-turn rollouts in sandboxed processes (see man rl-env)");
  std::string log_level = "info";
  cl.Bind(nullptr, "--log-level", &log_level);

  ServerOptions so;
  std::vector<std::string> tool_specs;
  std::string run_dir, id = "0", network = "try";
  int64_t timeout_ms = 10000, memory_mb = 2048, cpu_s = 600, max_output = 1 << 20;
  int workers = 2;
  CLI::App* serve = cl.Sub("serve", "run tools for tool calls that arrive over ZeroMQ until stopped");
  cl.Bind(serve, "--bind", &so.bind);
  cl.Bind(serve, "--tool", &tool_specs);
  cl.Bind(serve, "--workers", &workers)->check(CLI::Range(1, 256));
  cl.Bind(serve, "--timeout-ms", &timeout_ms)->check(CLI::Range(int64_t{1}, int64_t{3600} * 1000));
  cl.Bind(serve, "--memory-mb", &memory_mb)->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cl.Bind(serve, "--cpu-s", &cpu_s)->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cl.Bind(serve, "--max-output-bytes", &max_output)->check(CLI::Range(int64_t{16}, int64_t{1} << 30));
  cl.Bind(serve, "--no-network", &network)->check(CLI::IsMember({"try", "require", "off"}));
  cl.Bind(serve, "--run-dir", &run_dir);
  cl.Bind(serve, "--id", &id);
  health::HeartbeatFlags heartbeat;
  heartbeat.Bind(cl, serve);

  ClientOptions co;
  co.endpoint = "tcp://127.0.0.1:5570";
  int64_t call_timeout_ms = 10000;
  CLI::App* call = cl.Sub("call", "run tool calls on rl-env and print each result as a JSON line");
  cl.Bind(call, "--endpoint", &co.endpoint);
  cl.Bind(call, "--give-up-s", &co.give_up_s)->check(CLI::Range(0.0, 86400.0));
  cl.Bind(call, "--timeout-ms", &call_timeout_ms)->check(CLI::Range(int64_t{1}, int64_t{3600} * 1000));
  // The pairs are read as extras, untouched: a CLI11 vector option would take an argument such
  // as '[1, 2]' for its own list syntax and hand the tool something else.
  call->allow_extras();
  cl.app().allow_extras();  // extras pass up to the top; other subcommands refuse them below
  call->footer("Arguments: NAME ARGUMENTS_JSON [NAME ARGUMENTS_JSON ...]");

  CLI::App* calc = cl.Sub("calc", "the calculator tool: integer expressions, one JSON request per stdin line");

  if (auto code = cl.Parse(argc, argv)) return *code;
  if (Status s = InitLogging(kTool, log_level); !s.ok()) return Fail(kTool, s);

  std::vector<std::string> extras = call->remaining();
  for (const std::string& e : cl.app().remaining()) extras.push_back(e);
  const bool stray = call->parsed() ? !extras.empty() && extras[0].rfind("-", 0) == 0 : !extras.empty();
  if (stray) {  // an unknown option, or arguments for a subcommand that takes none
    std::fprintf(stderr, "%s: unexpected argument '%s' (see %s --help)\n", kTool, extras[0].c_str(), kTool);
    return kExitUsage;
  }
  if (calc->parsed()) return RunCalcTool(std::cin, std::cout);
  if (call->parsed()) return RunCall(co, call_timeout_ms, extras);

  auto tools = ParseTools(tool_specs);
  if (!tools.ok()) return Fail(kTool, tools.status());
  auto isolation = CheckNetwork(network);
  if (!isolation.ok()) return Fail(kTool, isolation.status());
  so.pool.tools = std::move(*tools);
  so.pool.workers = workers;
  so.pool.limits.timeout_ms = timeout_ms;
  so.pool.limits.memory_mb = memory_mb;
  so.pool.limits.cpu_s = cpu_s;
  so.pool.limits.max_output_bytes = static_cast<size_t>(max_output);
  so.pool.limits.network = *isolation;
  return RunServe(std::move(so), run_dir, id, heartbeat);
}

}  // namespace rl::env
