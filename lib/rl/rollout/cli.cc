#include "rl/rollout/cli.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>

#include "rl/core/event_log.h"
#include "rl/core/fail.h"
#include "rl/core/log.h"
#include "rl/core/options.h"
#include "rl/core/signals.h"
#include "rl/dist/group_generate.h"
#include "rl/health/flags.h"
#include "rl/model/device.h"
#include "rl/model/hf_dir.h"
#include "rl/model/model_file.h"
#include "rl/model/prompt_flags.h"
#include "rl/rollout/generate_jsonl.h"
#include "rl/rollout/rollout_loop.h"
#include "rl/rollout/tool_format.h"
#include "rl/rollout/weight_sync.h"
#include "rl/weights/cli.h"

namespace rl::rollout {
namespace {

constexpr char kTool[] = "rl-rollout";

struct SamplingFlags {
  model::GenerateOptions g;
  int threads = 1;
  uint64_t seed = 0;
  std::string device = "cpu";
  std::string precision = "auto";

  void Bind(CommandLine& cl, CLI::App* sub) {
    g.max_new_tokens = 0;
    g.slots = 256;
    cl.Bind(sub, "--temperature", &g.sampling.temperature)->check(Temperature(true));
    cl.Bind(sub, "--top-k", &g.sampling.top_k)->check(kNonNegative);
    cl.Bind(sub, "--top-p", &g.sampling.top_p)->check(CLI::Range(1e-9, 1.0));
    cl.Bind(sub, "--max-new-tokens", &g.max_new_tokens)->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
    cl.Bind(sub, "--slots", &g.slots)->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
    cl.Bind(sub, "--threads", &threads)->check(CLI::Range(1, 1024));
    cl.Bind(sub, "--seed", &seed);
    cl.Bind(sub, "--device", &device);
    cl.Bind(sub, "--precision", &precision)->check(CLI::IsMember({"auto", "float32", "bf16"}));
  }
  // The dtype every model of the policy computes in; nullopt: the one its weights came in.
  std::optional<model::DType> DType() const {
    if (precision == "auto") return std::nullopt;
    return precision == "bf16" ? model::DType::kBF16 : model::DType::kF32;
  }
  model::GenerateOptions Options() const {
    model::GenerateOptions o = g;
    o.seed = seed;
    return o;
  }
};

// Multi-turn conversations with tools (--tools ENDPOINT and the format flags); --max-new-tokens
// is then the whole conversation's budget after the prompt, tool tokens included.
struct ToolFlags {
  std::string endpoint, format_mode = "auto";
  std::string chat_template = "auto", chat_template_vars;  // rl-rollout run's (generate has PromptFlags)
  ConversationOptions conversation;
  double timeout_s = 30, give_up_s = 60;

  void Bind(CommandLine& cl, CLI::App* sub) {
    ToolFormat& f = conversation.format;
    cl.Bind(sub, "--tools", &endpoint);
    cl.Bind(sub, "--max-turns", &conversation.max_turns)->check(CLI::Range(int64_t{1}, int64_t{1000}));
    cl.Bind(sub, "--tool-format", &format_mode)->check(CLI::IsMember({"auto", "template", "tags"}));
    cl.Bind(sub, "--call-open", &f.call_open);
    cl.Bind(sub, "--call-close", &f.call_close);
    cl.Bind(sub, "--result-open", &f.result_open);
    cl.Bind(sub, "--result-close", &f.result_close);
    cl.Bind(sub, "--default-tool", &f.default_tool);
    cl.Bind(sub, "--tool-error-reward", &conversation.tool_error_reward)->check(CLI::Range(-1e6, 1e6));
    cl.Bind(sub, "--max-result-tokens", &f.max_result_tokens)->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
    cl.Bind(sub, "--tool-timeout", &timeout_s)->check(CLI::Range(0.001, 86400.0));
  }
  bool enabled() const { return !endpoint.empty(); }
  // The tags (--tool-format, from encoder's chat template when it has one; encoder may be null),
  // checked against the vocabulary: a model that cannot call is a config error before any input
  // is read or row leased.
  Status ResolveFormat(const model::PromptEncoder* encoder, const model::ModelDir& dir) {
    RL_ASSIGN_OR_RETURN(conversation.format, ResolveToolFormat(format_mode, encoder, conversation.format));
    const ToolFormat& f = conversation.format;
    if (format_mode != "tags" && encoder != nullptr && encoder->has_template() && f.call_close != "</call>") {
      spdlog::info("tool calls in the chat template's format: {} ... {}, results {} ... {}", f.call_open, f.call_close,
                   nlohmann::json(f.result_open).dump(), nlohmann::json(f.result_close).dump());
    }
    return ResolveToolTokens(dir, f).status();
  }
  // The client of rl-env; the sender id is fresh (tool calls are not writes to be made once).
  std::unique_ptr<env::EnvClient> Client(const model::GenerateOptions& g) {
    conversation.generate = g;
    conversation.max_tokens = g.max_new_tokens;
    ClientOptions c;
    c.endpoint = endpoint;
    c.sender = NewSenderId("rl-rollout-tools");
    c.give_up_s = give_up_s;
    return std::make_unique<env::EnvClient>(c, static_cast<int64_t>(timeout_s * 1000));
  }
};

// A tensor-parallel rollout group (group_generate.h): --ranks N processes, rank 0 the
// rollout proper, the others its followers.
struct GroupFlags {
  int size = 1, rank = 0;
  std::string rendezvous, profile_path;
  double timeout_s = 120;
  double rejoin_s = 600;  // a follower without a leader (its store gone) for so long exits
  std::optional<dist::LatencyModel> profile;
  dist::LatencyCalibration calibration;  // the profile followed from batch to batch
  dist::GroupGenerateOptions options;

  void Bind(CommandLine& cl, CLI::App* sub) {
    cl.Bind(sub, "--ranks", &size)->check(CLI::Range(1, 64));
    cl.Bind(sub, "--rank", &rank)->check(CLI::Range(0, 63));
    cl.Bind(sub, "--rendezvous", &rendezvous);
    cl.Bind(sub, "--rejoin-timeout", &rejoin_s)->check(CLI::Range(1.0, 7.0 * 86400));
    cl.Bind(sub, "--adaptive-profile", &profile_path);
    cl.Bind(sub, "--check-every", &options.check_every)->check(CLI::Range(1, 1 << 16));
    cl.Bind(sub, "--switch-margin", &options.margin)->check(CLI::Range(0.0, 10.0));
  }
  bool enabled() const { return size > 1; }
  Status Check() {
    if (!enabled()) return Status::OK();
    if (rank >= size || rendezvous.empty()) {
      return Status::InvalidArgument("--ranks " + std::to_string(size) +
                                     " needs --rendezvous HOST:PORT and a --rank below it");
    }
    if (profile_path.empty()) return Status::OK();
    std::ifstream in(profile_path);
    if (!in) return Status::IOError("--adaptive-profile " + profile_path + ": cannot be read");
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return Status::DataError("--adaptive-profile " + profile_path + ": not JSON");
    auto m = dist::LatencyModel::FromJson(j);
    if (!m.ok()) return m.status().WithContext("--adaptive-profile " + profile_path);
    profile.emplace(std::move(*m));
    options.predictor = &*profile;
    options.calibration = &calibration;
    return Status::OK();
  }
  // The device of this rank's model: --device as OpenRankDevice reads it for rank r of a group
  // on one machine ("cuda": cuda:r modulo the GPUs this process sees).
  Result<c10::Device> Device(const std::string& name) const {
    return model::OpenRankDevice(name, enabled() ? rank : 0);
  }
  // This rank's options of the group; `device` is where its model lives: a GPU's collectives go there.
  // The group's name is the same on every rank whatever its --id (under rl-watchdog each rank is
  // an instance with its own RL_ID): its store, at --rendezvous, is the group's alone.
  dist::GroupOptions Options(const c10::Device& device) const {
    dist::GroupOptions g;
    if (device.is_cuda()) g.gpu = device.has_index() ? device.index() : 0;
    g.endpoint = rendezvous;
    g.rank = rank;
    g.size = size;
    g.name = "rollout";
    g.timeout_ms = static_cast<int>(timeout_s * 1000);
    g.idle_timeout_ms = static_cast<int>(options.idle_timeout_ms);  // followers wait for requests
    return g;
  }
};

// A follower of a rollout group: generates with the leader until it stops or the group breaks.
int RunFollower(GroupFlags& group, const std::string& model_dir, uint64_t seed, const std::string& device_name) {
  auto device = group.Device(device_name);
  if (!device.ok()) return Fail(kTool, device.status());
  auto dir = model::OpenModelDir(model_dir);
  if (!dir.ok()) return Fail(kTool, dir.status());
  auto whole = model::InitialModel(*dir, seed);  // its weights come from the leader
  if (!whole.ok()) return Fail(kTool, whole.status());
  if (Status s = whole->To(*device); !s.ok()) return Fail(kTool, s);
  // The same model through every group this rank joins: the group re-forms in place after a rank
  // dies, and only that rank starts again.
  Status s = dist::FollowGroup(group.Options(*device), static_cast<int64_t>(group.rejoin_s * 1000),
                               [&](dist::Group& joined) {
                                 spdlog::info("rank {} of a rollout group of {}: following on {}{}", group.rank,
                                              group.size, model::DeviceName(*device),
                                              joined.OnNccl() ? " (NCCL)" : "");
                                 return dist::RunGroupFollower(joined, *whole, group.options);
                               });
  return s.ok() ? kExitOk : Fail(kTool, s);
}

int RunGenerate(const SamplingFlags& f, const std::string& weights, const model::PromptFlags& prompt,
                ToolFlags& tools) {
  auto encoder = model::OpenPromptEncoder(prompt);
  if (!encoder.ok()) return Fail(kTool, encoder.status());
  auto device = model::OpenDevice(f.device);
  if (!device.ok()) return Fail(kTool, device.status());
  Policy policy(*device, f.DType());
  if (!weights.empty()) {
    if (Status s = policy.Load(weights); !s.ok()) return Fail(kTool, s);
  } else if (encoder->dir().has_weights) {
    auto m = model::LoadHfModel(prompt.model);
    if (!m.ok()) return Fail(kTool, m.status());
    if (Status s = policy.Use(std::move(*m), 0, prompt.model); !s.ok()) return Fail(kTool, s);
  } else {
    return Fail(kTool, Status::InvalidArgument(prompt.model + " has no weights: give --weights"));
  }
  if (Status s = model::CheckVocabulary(policy.model(), encoder->dir(), "--weights " + weights); !s.ok()) {
    return Fail(kTool, s);
  }
  GenerateJsonlOptions o;
  o.encoder = &*encoder;
  o.records = prompt.dataset;
  o.generate = f.Options();
  std::unique_ptr<env::EnvClient> env;
  if (tools.enabled()) {
    if (Status s = tools.ResolveFormat(&*encoder, encoder->dir()); !s.ok()) return Fail(kTool, s);
    env = tools.Client(o.generate);
    o.conversation = &tools.conversation;
    o.tools = [&env](const std::vector<env::ToolCall>& calls) { return env->Call(calls); };
  }
  GenerateJsonlStats stats;
  Status s = GenerateJsonl(policy.model(), o, std::cin, std::cout, &stats);
  if (tools.enabled() && s.ok()) spdlog::info("{} tool calls, {} of them errors", stats.tool_calls, stats.tool_errors);
  spdlog::info("{} responses, {} tokens in {:.2f} s of generation ({:.0f} tokens/s), version {}", stats.lines,
               stats.tokens, stats.generate_s, stats.generate_s > 0 ? stats.tokens / stats.generate_s : 0.0,
               policy.version());
  return s.ok() ? kExitOk : Fail(kTool, s);
}

int RunLoop(RolloutOptions o, const std::string& weights, WeightSyncOptions sync, const std::string& run_dir,
            const std::string& id, const std::string& model_dir, ToolFlags& tools, GroupFlags& group_flags,
            const std::string& device_name, std::optional<model::DType> dtype) {
  const model::SamplingOptions& sampling = o.generate.sampling;
  if (sampling.top_k != 0 || sampling.top_p != 1) {
    return Fail(kTool, Status::InvalidArgument(
                           "--top-k and --top-p are for rl-rollout generate: the trainer's ratio needs the "
                           "log-probabilities of the distribution sampled, which truncation changes"));
  }
  auto dir = model::OpenModelDir(model_dir);
  if (!dir.ok()) return Fail(kTool, dir.status());
  o.model = &*dir;
  std::unique_ptr<env::EnvClient> env;
  if (tools.enabled()) {
    // The rollout's prompts come encoded from the queue; the template is read for the tool format.
    auto vars = model::ParseChatTemplateVars(tools.chat_template_vars);
    if (!vars.ok()) return Fail(kTool, vars.status());
    auto encoder = model::PromptEncoder::Create(*dir, tools.chat_template, *vars);
    if (!encoder.ok()) return Fail(kTool, encoder.status());
    if (Status s = tools.ResolveFormat(&*encoder, *dir); !s.ok()) return Fail(kTool, s);
    env = tools.Client(o.generate);
    o.tools = env.get();
    o.conversation = &tools.conversation;
  }
  auto device = group_flags.Device(device_name);
  if (!device.ok()) return Fail(kTool, device.status());
  Policy policy(*device, dtype);
  if (!weights.empty()) {
    if (Status s = policy.Load(weights); !s.ok()) return Fail(kTool, s);
  }
  EventLog events;
  if (!run_dir.empty()) {
    if (Status s = events.Open(run_dir, "rollout", id); !s.ok()) return Fail(kTool, s);
    o.events = &events;
    events.Emit("start", {{"endpoint", o.client.endpoint}, {"checkpoint_dir", o.checkpoint_dir}, {"pid", ::getpid()},
                          {"ranks", group_flags.size}, {"adaptive", group_flags.options.predictor != nullptr},
                          {"precision", dtype ? model::DTypeName(*dtype) : "auto"}});
  }
  o.events = &events;  // a disabled log still keeps the phase the heartbeat reports
  const std::atomic<bool>& stop = InstallStopSignals();
  std::unique_ptr<WeightSync> weight_sync;
  if (!sync.sources.empty()) {
    sync.process_stop = &stop;
    sync.fallback_dir = o.checkpoint_dir;
    sync.id = id;
    sync.events = events.enabled() ? &events : nullptr;
    auto started = WeightSync::Start(sync, policy.loaded() ? std::optional<uint64_t>(policy.version()) : std::nullopt);
    if (!started.ok()) return Fail(kTool, started.status());
    weight_sync = std::move(*started);
    o.weights = weight_sync.get();
  }
  std::unique_ptr<dist::GroupHost> host;
  std::optional<dist::GroupLeader> leader;
  if (group_flags.enabled()) {
    const std::string device_label = model::DeviceName(*device);
    auto started = dist::GroupHost::Start(group_flags.Options(*device), [&](const dist::GroupChange& c) {
      events.Emit("group", {{"what", c.what}, {"epoch", c.epoch}, {"ranks", c.ranks}, {"device", device_label},
                            {"nccl", c.nccl}, {"error", c.why}});
    });
    if (!started.ok()) return Fail(kTool, started.status());
    host = std::move(*started);
    leader.emplace(host.get(), group_flags.options);
    o.group = &*leader;
    spdlog::info("leading a rollout group of {} ({}) on {}{}", group_flags.size,
                 group_flags.options.predictor ? "adaptive tensor parallelism" : "tensor parallel",
                 model::DeviceName(*device), host->group()->OnNccl() ? " (NCCL)" : "");
  }
  StopWatchdog watchdog(stop, o.wait_ms + 5000, kTool);
  o.watchdog = &watchdog;
  o.client.stop = &stop;  // a waiting get ends at once on a stop: the role holds nothing then
  RolloutStats stats;
  Status s = RunRollout(o, &policy, stop, &stats);
  if (leader) (void)leader->Stop();
  events.Emit("stop", {{"rows", stats.rows}, {"groups", stats.groups}, {"tokens", stats.tokens},
                       {"error", s.ok() ? "" : s.ToString()}});
  return s.ok() ? kExitOk : Fail(kTool, s);
}

int RunRandomModel(const std::string& model_dir, const std::string& config_text, uint64_t seed, const std::string& out) {
  if (model_dir.empty() && config_text.empty()) {
    return Fail(kTool, Status::InvalidArgument("random-model needs --model DIR (its config.json) or --model-config"));
  }
  auto config = config_text.empty() ? model::ReadHfConfig(model_dir) : model::ConfigFromString(config_text);
  if (!config.ok()) return Fail(kTool, config_text.empty() ? config.status() : config.status().WithContext("--model-config"));
  auto m = model::Transformer::Create(*config, seed);
  if (!m.ok()) return Fail(kTool, m.status());
  if (Status s = model::SaveModelFile(out, *m, 0); !s.ok()) return Fail(kTool, s);
  auto params = model::ParameterCount(*config);
  spdlog::info("wrote {} (version 0, {} parameters)", out, params.ok() ? *params : 0);
  return kExitOk;
}

}  // namespace

int RolloutMain(int argc, char** argv) {
  CommandLine cl(kTool, "rl-rollout: generates responses with per-token log-probabilities (see man rl-rollout)");
  std::string log_level = "info";
  cl.Bind(nullptr, "--log-level", &log_level);

  SamplingFlags run_f, gen_f;
  ToolFlags run_tools, gen_tools;
  RolloutOptions o;
  std::string connect = "tcp://127.0.0.1:5555", run_dir, id = "0", run_weights, gen_weights;
  double timeout_s = 60, lease_s = 120, wait_s = 5, progress_s = 10;
  CLI::App* run = cl.Sub("run", "generate for rows of task 'generate' from rl-queue until stopped");
  run_f.Bind(cl, run);
  run_tools.Bind(cl, run);
  cl.Bind(run, "--chat-template", &run_tools.chat_template);
  cl.Bind(run, "--chat-template-vars", &run_tools.chat_template_vars);
  cl.Bind(run, "--connect", &connect);
  cl.Bind(run, "--timeout", &timeout_s);
  cl.Bind(run, "--checkpoint-dir", &o.checkpoint_dir);
  cl.Bind(run, "--weights", &run_weights);
  std::string run_model;
  cl.Require(cl.Bind(run, "--model", &run_model));
  cl.Bind(run, "--count", &o.count)->check(CLI::Range(1, 100000))->description("rows per get (whole groups)");
  cl.Bind(run, "--lease", &lease_s)->check(kLeaseSeconds);
  cl.Bind(run, "--wait", &wait_s)->check(CLI::Range(0.0, 3600.0));
  cl.Bind(run, "--progress-interval", &progress_s)->check(kNonNegative);
  cl.Bind(run, "--run-dir", &run_dir);
  cl.Bind(run, "--id", &id);
  WeightSyncOptions sync;
  std::string weights_from;
  double poll_s = 0.02, stall_s = 5;
  cl.Bind(run, "--weights-from", &weights_from);
  cl.Bind(run, "--weights-bind", &sync.bind);
  cl.Bind(run, "--max-pulls", &sync.max_pulls)->check(CLI::Range(1, 1024));
  cl.Bind(run, "--poll-interval", &poll_s)->check(CLI::Range(0.01, 3600.0));
  cl.Bind(run, "--stall-timeout", &stall_s)->check(CLI::Range(0.05, 3600.0));
  cl.Bind(run, "--weights-timeout", &sync.fallback_s)->check(CLI::Range(0.1, 86400.0));
  std::string on_new_weights = "finish";
  cl.Bind(run, "--on-new-weights", &on_new_weights)->check(CLI::IsMember({"finish", "interrupt"}));
  cl.BindFlag(run, "--refill", &o.refill);
  bool record_routes = false;
  cl.BindFlag(run, "--record-routes", &record_routes);
  health::HeartbeatFlags heartbeat;
  heartbeat.Bind(cl, run);
  GroupFlags group_flags;
  group_flags.Bind(cl, run);

  CLI::App* gen = cl.Sub("generate", "responses for JSON lines {\"prompt\": ...} on stdin, as JSON lines on stdout");
  gen_f.Bind(cl, gen);
  gen_tools.Bind(cl, gen);
  cl.Bind(gen, "--weights", &gen_weights);
  model::PromptFlags gen_prompt;
  model::BindPromptFlags(cl, gen, &gen_prompt, false);

  std::string out, model_config, random_model;
  uint64_t model_seed = 0;
  CLI::App* random = cl.Sub("random-model", "write a model file with random weights (version 0), for tests and warm starts");
  cl.Require(cl.Bind(random, "--out", &out));
  cl.Bind(random, "--model", &random_model);
  cl.Bind(random, "--model-config", &model_config);
  cl.Bind(random, "--seed", &model_seed);

  if (auto code = cl.Parse(argc, argv)) return *code;
  if (Status s = InitLogging(kTool, log_level); !s.ok()) return Fail(kTool, s);
  sync.sources = weights::SplitEndpoints(weights_from);
  sync.poll_ms = static_cast<int>(poll_s * 1000);
  sync.stall_ms = static_cast<int>(stall_s * 1000);
  if (run->parsed()) {
    if (Status s = group_flags.Check(); !s.ok()) return Fail(kTool, s);
    auto when = ParseOnNewWeights(on_new_weights);
    if (!when.ok()) return Fail(kTool, when.status());
    o.on_new_weights = *when;
    if (o.on_new_weights == OnNewWeights::kInterrupt && group_flags.enabled()) {
      return Fail(kTool, Status::InvalidArgument("--on-new-weights interrupt is not supported with --ranks > 1 (a "
                                                 "rollout group generates as one; it switches at batch boundaries)"));
    }
  }
  if (run->parsed() && group_flags.rank > 0) {
    if (Status s = InitLogging(kTool, log_level); !s.ok()) return Fail(kTool, s);
    at::set_num_threads(run_f.threads);
    // A follower heartbeats too, so that a supervisor sees it and restarts it alone.
    auto beat = heartbeat.Start("rollout", id);
    if (!beat.ok()) return Fail(kTool, beat.status());
    return RunFollower(group_flags, run_model, run_f.seed, run_f.device);
  }
  if (run->parsed() && run_weights.empty() && o.checkpoint_dir.empty() && sync.sources.empty()) {
    std::cerr << "rl-rollout: run needs --weights or --checkpoint-dir (see rl-rollout --help)\n";
    return kExitUsage;
  }
  if (random->parsed()) return RunRandomModel(random_model, model_config, model_seed, out);
  SamplingFlags& f = run->parsed() ? run_f : gen_f;
  at::set_num_threads(f.threads);
  if (gen->parsed()) return RunGenerate(f, gen_weights, gen_prompt, gen_tools);
  o.generate = f.Options();
  o.generate.record_routes = record_routes;
  o.client.endpoint = connect;
  o.client.give_up_s = timeout_s;
  o.client.sender = NewSenderId("rl-rollout");
  o.lease_ms = static_cast<int64_t>(lease_s * 1000);
  o.holder = "rollout/" + id;
  o.wait_ms = static_cast<int64_t>(wait_s * 1000);
  o.progress_ms = static_cast<int64_t>(progress_s * 1000);
  auto beat = heartbeat.Start("rollout", id, {{"queue", connect}});
  if (!beat.ok()) return Fail(kTool, beat.status());
  run_tools.give_up_s = timeout_s;
  return RunLoop(o, run_weights, sync, run_dir, id, run_model, run_tools, group_flags, f.device, f.DType());
}

}  // namespace rl::rollout
