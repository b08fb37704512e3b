#include "rl/train/commands.h"

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <iostream>

#include "rl/core/event_log.h"
#include "rl/core/fs.h"
#include "rl/model/model_file.h"
#include "rl/task/make_data.h"
#include "rl/train/checkpoint.h"
#include "rl/train/evaluate.h"
#include "rl/train/export.h"
#include "rl/train/feeder.h"

namespace rl::train {
namespace {

Result<model::Transformer> StartingModel(const SftFlags& f) {
  if (!f.weights.empty()) {
    RL_ASSIGN_OR_RETURN(model::LoadedModel m, model::LoadModelFile(f.weights));
    return m.model;
  }
  RL_ASSIGN_OR_RETURN(model::ModelConfig config, model::ConfigFromString(f.model_config));
  return model::Transformer::Create(config, f.sft.seed);
}

}  // namespace

int RunSftCommand(const SftFlags& f, const std::atomic<bool>& stop) {
  at::set_num_threads(f.threads);
  auto data = ReadProblems(f.data);
  if (!data.ok()) return Fail(kTool, data.status());
  auto model = StartingModel(f);
  if (!model.ok()) return Fail(kTool, model.status());
  if (Status s = MakeDirs(f.checkpoint_dir); !s.ok()) return Fail(kTool, s);
  EventLog events;
  if (!f.run_dir.empty()) {
    if (Status s = events.Open(f.run_dir, "train", f.id); !s.ok()) return Fail(kTool, s);
  }
  events.SetPhase("train");
  events.Emit("sft-start", {{"examples", data->size()}, {"lr", f.sft.lr}, {"batch_size", f.sft.batch_size}});
  auto on_step = [&](const SftProgress& p) {
    if (!p.evaluated) return;
    events.SetStep(p.step);
    events.Emit("sft-eval", {{"loss", p.loss}, {"accuracy", p.accuracy}, {"seconds", p.seconds}});
    spdlog::info("sft step {} loss {:.4f} held-out greedy accuracy {:.3f} ({:.1f} s)", p.step, p.loss, p.accuracy,
                 p.seconds);
  };
  auto result = RunSft(&*model, *data, f.sft, on_step, stop);
  if (!result.ok()) return Fail(kTool, result.status());
  events.SetPhase("checkpoint");
  std::string path = WeightsPath(f.checkpoint_dir, 0);
  if (Status s = model::SaveModelFile(path, *model, 0); !s.ok()) return Fail(kTool, s);
  events.Emit("sft-done", {{"steps", result->steps}, {"accuracy", result->accuracy},
                           {"seconds", result->seconds}, {"reached", result->reached}, {"weights", path}});
  nlohmann::json line = {{"steps", result->steps}, {"accuracy", result->accuracy}, {"seconds", result->seconds},
                         {"reached", result->reached}, {"weights", path}};
  std::cout << line.dump() << std::endl;
  if (!result->reached && !stop) {
    spdlog::warn("held-out accuracy {:.3f} did not reach {:.3f} in {} steps", result->accuracy,
                 f.sft.target_accuracy, result->steps);
  }
  return kExitOk;
}

namespace {

// The newest checkpoint's policy (every step is checkpointed, and RunGrpo returns once the last is
// on disk), or the starting weights when no step was trained.
Result<model::LoadedModel> FinalVersion(const GrpoLoopOptions& o) {
  RL_ASSIGN_OR_RETURN(std::optional<Checkpoint> c, LoadNewestCheckpoint(o.checkpoint_dir));
  if (c && c->model) return model::LoadedModel{std::move(*c->model), c->version};
  return LoadAnyModelFile(o.weights.empty() ? WeightsPath(o.checkpoint_dir, 0) : o.weights);
}

Status ExportFinalVersion(const GrpoLoopOptions& o, const ExportOptions& x) {
  RL_ASSIGN_OR_RETURN(model::LoadedModel m, FinalVersion(o));
  RL_ASSIGN_OR_RETURN(ExportReport r, ExportHfDir(m, x));
  spdlog::info("exported version {} to {} ({})", r.version, x.out, model::DTypeName(r.dtype));
  return Status::OK();
}

}  // namespace

int RunGrpoCommand(GrpoFlags f, const std::atomic<bool>& stop) {
  at::set_num_threads(f.threads);
  GrpoLoopOptions& o = f.loop;
  if (Status s = ApplyMode(f.mode, &o); !s.ok()) return Fail(kTool, s);
  if (f.staleness && f.staleness->count() > 0) o.staleness = f.staleness_value;
  if (f.fraction && f.fraction->count() > 0) o.start_fraction = f.fraction_value;
  o.grpo.norm = f.loss_norm == "sequence" ? LossNorm::kSequence : LossNorm::kToken;
  o.regenerate_stale = f.stale_rows == "regenerate";
  ExportOptions x;
  x.out = f.export_dir;
  x.tokenizer_from = f.tokenizer_from;
  if (!x.out.empty()) {
    if (Status s = CheckExportTargets(x); !s.ok()) return Fail(kTool, s);  // before, not after, training
  }
  Status s = RunGrpo(o, stop);
  if (!s.ok()) return Fail(kTool, s);
  if (!x.out.empty()) {
    if (Status e = ExportFinalVersion(o, x); !e.ok()) return Fail(kTool, e);
  }
  return kExitOk;
}

int RunEvalCommand(const EvalFlags& f, std::ostream& out) {
  at::set_num_threads(f.threads);
  auto m = model::LoadModelFile(f.weights);
  if (!m.ok()) return Fail(kTool, m.status());
  auto acc = GreedyAccuracy(m->model, HeldOutSet(static_cast<size_t>(f.eval_size)));
  if (!acc.ok()) return Fail(kTool, acc.status());
  nlohmann::json line = {{"weights", f.weights}, {"version", m->version}, {"problems", f.eval_size},
                         {"accuracy", *acc}};
  out << line.dump() << std::endl;
  return kExitOk;
}

int RunExportCommand(const ExportFlags& f, std::ostream& out) {
  ExportOptions o;
  o.out = f.out;
  o.tokenizer_from = f.tokenizer_from;
  if (!f.dtype.empty()) {
    auto dtype = model::DTypeFromName(f.dtype);
    if (!dtype.ok()) return Fail(kTool, Status::InvalidArgument("--dtype: " + dtype.status().message()));
    o.dtype = *dtype;
  }
  auto m = LoadAnyModelFile(f.weights);
  if (!m.ok()) return Fail(kTool, m.status());
  auto r = ExportHfDir(*m, o);
  if (!r.ok()) return Fail(kTool, r.status());
  nlohmann::json line = {{"out", f.out}, {"version", r->version}, {"parameters", r->parameters},
                         {"dtype", model::DTypeName(r->dtype)}, {"files", r->files}};
  out << line.dump() << std::endl;
  return kExitOk;
}

int RunMakeData(const DataFlags& f, std::ostream& out) {
  task::MakeDataOptions o;
  o.task = f.task;
  o.count = static_cast<size_t>(f.problems);
  o.seed = f.seed;
  o.held_out = f.heldout;
  o.response_format = f.response_format;
  Status s = task::WriteTaskData(o, out);
  return s.ok() ? kExitOk : Fail(kTool, s);
}

}  // namespace rl::train
