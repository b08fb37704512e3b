// rl-train score: the reference model of the KL term as a role of its own (ref_loop.h). A
// subcommand of rl-train rather than a tool of its own: it is the trainer's computation (the same
// batching, the same masked log-softmax at the same temperature) over the trainer's model files,
// so both come from one library and cannot drift apart.
#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include "rl/core/event_log.h"
#include "rl/core/signals.h"
#include "rl/core/stop_watchdog.h"
#include "rl/model/device.h"
#include "rl/model/hf_dir.h"
#include "rl/model/model_dir.h"
#include "rl/train/commands.h"
#include "rl/train/export.h"
#include "rl/train/ref_loop.h"

namespace rl::train {
namespace {

// The frozen reference: --weights (a model file or checkpoint), else the weights of --model.
Result<model::Transformer> ReferenceModel(const ScoreFlags& f, const model::ModelDir& dir) {
  if (!f.weights.empty()) {
    RL_ASSIGN_OR_RETURN(model::LoadedModel m, LoadAnyModelFile(f.weights));
    RL_RETURN_IF_ERROR(model::CheckVocabulary(m.model, dir, "--weights " + f.weights));
    spdlog::info("reference: {} (version {})", f.weights, m.version);
    return m.model;
  }
  if (!dir.has_weights) {
    return Status::InvalidArgument("no reference model: " + f.model + " has no weights; give --weights");
  }
  spdlog::info("reference: the weights of {}", f.model);
  return model::LoadHfModel(f.model);
}

}  // namespace

int RunScoreCommand(const ScoreFlags& f, const std::atomic<bool>& stop) {
  at::set_num_threads(f.threads);
  auto dir = model::OpenModelDir(f.model);
  if (!dir.ok()) return Fail(kTool, dir.status().WithContext("--model"));
  auto device = model::OpenDevice(f.device);
  if (!device.ok()) return Fail(kTool, device.status());
  auto reference = ReferenceModel(f, *dir);
  if (!reference.ok()) return Fail(kTool, reference.status());
  if (Status s = reference->To(*device); !s.ok()) return Fail(kTool, s);
  if (f.routing_replay && reference->config().SparseLayerCount() == 0) {
    return Fail(kTool, Status::InvalidArgument("--routing-replay: the reference is dense (no mixture-of-experts "
                                               "layers): there are no routes to replay"));
  }
  RefLoopOptions o;
  o.routing_replay = f.routing_replay;
  o.client.endpoint = f.connect;
  o.client.give_up_s = f.timeout_s;
  o.client.sender = NewSenderId("rl-train-score");
  o.task = f.task;
  o.count = f.count;
  o.micro_batch = f.micro_batch;
  o.temperature = f.temperature;
  o.pad_id = dir->pad_id;
  o.lease_ms = static_cast<int64_t>(f.lease_s * 1000);
  o.wait_ms = static_cast<int64_t>(f.wait_s * 1000);
  o.progress_ms = static_cast<int64_t>(f.progress_s * 1000);
  o.holder = "ref/" + f.id;
  EventLog events;
  if (!f.run_dir.empty()) {
    if (Status s = events.Open(f.run_dir, "ref", f.id); !s.ok()) return Fail(kTool, s);
    events.Emit("start", {{"endpoint", f.connect}, {"task", f.task}, {"temperature", f.temperature},
                          {"routing_replay", f.routing_replay}});
  }
  o.events = &events;  // a disabled log still keeps the phase the heartbeat reports
  StopWatchdog watchdog(stop, o.wait_ms + 5000, kTool);
  o.watchdog = &watchdog;
  o.client.stop = &stop;  // a waiting get ends at once on a stop: the role holds nothing then
  spdlog::info("scoring task '{}' of {} at temperature {} ({} threads)", f.task, f.connect, f.temperature, f.threads);
  RefStats stats;
  Status s = RunRefLoop(o, *reference, stop, &stats);
  events.Emit("stop", {{"rows", stats.rows}, {"failed", stats.failed}, {"dropped", stats.dropped}, {"lost", stats.lost},
                       {"unreplayable", stats.unreplayable},
                       {"error", s.ok() ? "" : s.ToString()}});
  return s.ok() ? kExitOk : Fail(kTool, s);
}

}  // namespace rl::train
