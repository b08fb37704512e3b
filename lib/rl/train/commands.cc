#include "rl/train/commands.h"

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "rl/core/event_log.h"
#include "rl/core/fs.h"
#include "rl/core/json_field.h"
#include "rl/model/device.h"
#include "rl/model/hf_dir.h"
#include "rl/model/model_file.h"
#include "rl/task/make_data.h"
#include "rl/train/checkpoint.h"
#include "rl/train/data_parallel.h"
#include "rl/train/evaluate.h"
#include "rl/train/export.h"
#include "rl/train/feeder.h"

namespace rl::train {
namespace {

Result<model::Transformer> StartingModel(const SftFlags& f, const model::ModelDir& dir) {
  if (!f.weights.empty()) {
    RL_ASSIGN_OR_RETURN(model::LoadedModel m, model::LoadModelFile(f.weights));
    return m.model;
  }
  if (!f.model_config.empty()) {
    auto config = model::ConfigFromString(f.model_config);
    if (!config.ok()) return config.status().WithContext("--model-config");
    if (config->vocab_size < dir.tokenizer->vocab_size()) {
      return Status::Config("--model-config: vocab_size " + std::to_string(config->vocab_size) + " is below the " +
                            std::to_string(dir.tokenizer->vocab_size()) + " tokens of " + dir.path);
    }
    return model::Transformer::Create(*config, f.sft.seed);
  }
  if (!dir.has_weights) spdlog::info("{} has no weights: starting from a random initialisation (seed {})", dir.path, f.sft.seed);
  return model::InitialModel(dir, f.sft.seed);
}

// SFT records: prompt and response (--response-key), or messages ending in the reply.
task::DatasetOptions SftDatasetOptions(const SftFlags& f) {
  return SftRecordOptions(f.prompt.dataset, f.response_key, f.response_key_option && f.response_key_option->count() > 0);
}

struct HeldOut {
  std::unique_ptr<reward::Verifier> verifier;
  EvalSet set;
};

Result<std::optional<HeldOut>> OpenHeldOut(const std::string& path, const std::string& verifier,
                                           const model::PromptFlags& prompt, const model::PromptEncoder& encoder,
                                           int64_t size) {
  if (path.empty()) return std::optional<HeldOut>();
  HeldOut h;
  RL_ASSIGN_OR_RETURN(h.verifier, reward::MakeVerifier(verifier, 1e-6));
  RL_ASSIGN_OR_RETURN(h.set, LoadEvalSet(path, prompt.dataset, encoder, static_cast<size_t>(size)));
  return std::optional<HeldOut>(std::move(h));
}

// --lr-decay over a run of `horizon` steps (checked before any data or model is read).
Status ApplyLrDecay(const std::string& name, int64_t horizon, LrSchedule* s) {
  RL_ASSIGN_OR_RETURN(s->decay, ParseLrDecay(name));
  s->horizon = horizon;
  return ValidateLrSchedule(*s);
}

}  // namespace

int RunSftCommand(SftFlags f, const std::atomic<bool>& stop) {
  at::set_num_threads(f.threads);
  auto device = model::OpenDevice(f.device);
  if (!device.ok()) return Fail(kTool, device.status());
  f.sft.bf16 = f.precision == "bf16";
  if (Status s = ApplyLrDecay(f.lr_decay, f.sft.max_steps, &f.sft.schedule); !s.ok()) return Fail(kTool, s);
  auto encoder = model::OpenPromptEncoder(f.prompt);
  if (!encoder.ok()) return Fail(kTool, encoder.status());
  auto data = task::Dataset::Open(f.data, SftDatasetOptions(f));
  if (!data.ok()) return Fail(kTool, data.status());
  auto model = StartingModel(f, encoder->dir());
  if (!model.ok()) return Fail(kTool, model.status());
  if (Status s = model::CheckVocabulary(*model, encoder->dir(), "the starting model"); !s.ok()) return Fail(kTool, s);
  if (Status s = model->To(*device); !s.ok()) return Fail(kTool, s);
  std::optional<ToolResultTags> tags;
  if (!f.result_open.empty() || !f.result_close.empty()) {
    auto tag = [&](const std::string& text) -> Result<std::vector<int64_t>> {
      RL_ASSIGN_OR_RETURN(std::vector<int64_t> ids, encoder->dir().tokenizer->Encode(text));
      if (!ids.empty() && ids.front() == encoder->dir().bos_id) ids.erase(ids.begin());
      if (ids.empty()) return Status::InvalidArgument("--result-open and --result-close must both be given");
      return ids;
    };
    auto open = tag(f.result_open), close = tag(f.result_close);
    if (!open.ok()) return Fail(kTool, open.status());
    if (!close.ok()) return Fail(kTool, close.status());
    tags = ToolResultTags{*open, *close};
  }
  auto examples = EncodeSftData(data->get(), *encoder, model->config().context(), tags ? &*tags : nullptr);
  if (!examples.ok()) return Fail(kTool, examples.status());
  if (examples->too_long > 0) {
    spdlog::warn("{} of {} examples are longer than the context of {} tokens: left out", examples->too_long,
                 (*data)->size(), model->config().context());
  }
  auto held_out = OpenHeldOut(f.eval_data, f.verifier, f.prompt, *encoder, f.eval_size);
  if (!held_out.ok()) return Fail(kTool, held_out.status());
  SftEval eval{&*encoder, *held_out ? &(*held_out)->set : nullptr, *held_out ? (*held_out)->verifier.get() : nullptr};
  if (Status s = MakeDirs(f.checkpoint_dir); !s.ok()) return Fail(kTool, s);
  EventLog events;
  if (!f.run_dir.empty()) {
    if (Status s = events.Open(f.run_dir, "train", f.id); !s.ok()) return Fail(kTool, s);
  }
  events.SetPhase("train");
  events.Emit("sft-start",
              {{"examples", examples->samples.size()}, {"lr", f.sft.schedule.lr}, {"batch_size", f.sft.batch_size}});
  double said_s = 0;
  auto on_step = [&](const SftProgress& p) {
    if (!p.evaluated) {
      if (p.seconds - said_s >= 10) {  // long runs show progress between evaluations too
        spdlog::info("sft step {} loss {:.4f} ({:.1f} s, {:.2f} s/step)", p.step, p.loss, p.seconds, p.seconds / p.step);
        said_s = p.seconds;
      }
      return;
    }
    said_s = p.seconds;
    events.SetStep(p.step);
    events.Emit("sft-eval", {{"loss", p.loss}, {"accuracy", p.accuracy}, {"seconds", p.seconds}, {"lr", p.lr}});
    spdlog::info("sft step {} loss {:.4f} held-out greedy accuracy {:.3f} ({:.1f} s)", p.step, p.loss, p.accuracy,
                 p.seconds);
  };
  auto result = RunSft(&*model, *examples, encoder->dir().pad_id, eval.set ? &eval : nullptr, f.sft, on_step, stop);
  if (!result.ok()) return Fail(kTool, result.status());
  events.SetPhase("checkpoint");
  std::string path = WeightsPath(f.checkpoint_dir, 0);
  if (Status s = model::SaveModelFile(path, *model, 0); !s.ok()) return Fail(kTool, s);
  nlohmann::json line = {{"steps", result->steps}, {"seconds", result->seconds}, {"weights", path}};
  if (result->evaluated) {
    line["accuracy"] = result->accuracy;
    line["reached"] = result->reached;
  }
  events.Emit("sft-done", line);
  std::cout << line.dump() << std::endl;
  if (result->evaluated && !result->reached && !stop) {
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

// --world, --rank, --rendezvous or the environment torchrun and srun set (data_parallel.h).
// --critic-config is config.json text, or the path of a config.json or of a directory holding one.
Status ReadCriticConfig(std::string* config) {
  size_t first = config->find_first_not_of(" \t\r\n");
  if (config->empty() || (first != std::string::npos && (*config)[first] == '{')) return Status::OK();
  std::string path = *config;
  if (std::filesystem::is_directory(path)) path += "/config.json";
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return Status::Config("--critic-config: " + text.status().message());
  *config = std::move(*text);
  return Status::OK();
}

Status PlaceRank(const GrpoFlags& f, GrpoLoopOptions* o) {
  std::map<std::string, std::string> env;
  for (const char* k : {"WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_NTASKS",
                        "SLURM_PROCID", "SLURM_LOCALID"}) {
    if (const char* v = std::getenv(k)) env[k] = v;
  }
  RankPlace flags{o->world, o->rank, o->rendezvous};
  RL_ASSIGN_OR_RETURN(RankPlace p, ResolveRankPlace(flags, f.world && f.world->count() > 0,
                                                    f.rank && f.rank->count() > 0, env));
  o->world = p.world;
  o->rank = p.rank;
  o->rendezvous = p.rendezvous;
  // "--device cuda" in a world of ranks: each rank the GPU its local rank names, as torchrun and
  // srun mean it (device.h). Ranks that share a GPU still work (their group stages through host
  // memory) but compete for it.
  if (o->world > 1) {
    RL_ASSIGN_OR_RETURN(o->grpo.device, model::OpenRankDevice(f.device, p.local_rank));
  }
  if (o->world > 1) {
    // Each rank leases under its own holder name: ranks started with one --id take their rank.
    if (o->rank != 0 && o->id == "0") o->id = std::to_string(o->rank);
    // Every rank would write the same step-S files, each of its own part of the batch.
    if (!o->grpo.dump_dir.empty()) {
      return Status::InvalidArgument("--dump-dir is for one trainer: the ranks of --world " + std::to_string(o->world) +
                                     " would write over each other's files");
    }
  }
  return Status::OK();
}

}  // namespace

int RunGrpoCommand(GrpoFlags f, const std::atomic<bool>& stop) {
  at::set_num_threads(f.threads);
  GrpoLoopOptions& o = f.loop;
  auto device = model::OpenDevice(f.device);
  if (!device.ok()) return Fail(kTool, device.status());
  o.grpo.device = *device;
  o.grpo.bf16 = f.precision == "bf16";
  if (Status s = ApplyMode(f.mode, &o); !s.ok()) return Fail(kTool, s);
  if (f.staleness && f.staleness->count() > 0) o.staleness = f.staleness_value;
  if (f.fraction && f.fraction->count() > 0) o.start_fraction = f.fraction_value;
  auto norm = ParseLossNorm(f.loss_norm);
  if (!norm.ok()) return Fail(kTool, norm.status());
  o.grpo.norm = *norm;
  o.grpo.seed = o.seed;
  auto correction = ParseCorrection(f.correction);
  if (!correction.ok()) return Fail(kTool, correction.status());
  o.grpo.off.kind = *correction;
  auto advantage = ParseAdvantage(f.advantage);
  if (!advantage.ok()) return Fail(kTool, advantage.status());
  o.grpo.advantage = *advantage;
  auto kl = ParseKlEstimator(f.kl_estimator);
  if (!kl.ok()) return Fail(kTool, kl.status());
  o.grpo.kl_estimator = *kl;
  if (Status s = ValidateGrpoOptions(o.grpo); !s.ok()) return Fail(kTool, s);
  o.sft_response_key_given = f.response_key_option && f.response_key_option->count() > 0;
  if (o.sft_data.empty() != !(o.grpo.sft_coef > 0)) {
    return Fail(kTool, Status::InvalidArgument("--sft-data and --sft-coef (above 0) go together: the SFT mix "
                                               "needs both"));
  }
  if (!o.critic_config.empty() && o.grpo.advantage != Advantage::kGae) {
    return Fail(kTool, Status::InvalidArgument("--critic-config is the critic of --advantage gae"));
  }
  if (Status s = ReadCriticConfig(&o.critic_config); !s.ok()) return Fail(kTool, s);
  if (Status s = ApplyLrDecay(f.lr_decay, o.max_steps, &o.grpo.schedule); !s.ok()) return Fail(kTool, s);
  o.regenerate_stale = f.stale_rows == "regenerate";
  if (Status s = PlaceRank(f, &o); !s.ok()) return Fail(kTool, s);
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
  auto device = model::OpenDevice(f.device);
  if (!device.ok()) return Fail(kTool, device.status());
  auto encoder = model::OpenPromptEncoder(f.prompt);
  if (!encoder.ok()) return Fail(kTool, encoder.status());
  uint64_t version = 0;
  Result<model::Transformer> m = Status::NotFound("");
  if (!f.weights.empty()) {
    auto loaded = LoadAnyModelFile(f.weights);
    if (!loaded.ok()) return Fail(kTool, loaded.status());
    version = loaded->version;
    m = std::move(loaded->model);
  } else if (encoder->dir().has_weights) {
    m = model::LoadHfModel(f.prompt.model);
  } else {
    return Fail(kTool, Status::InvalidArgument("nothing to evaluate: " + f.prompt.model + " has no weights; give --weights"));
  }
  if (!m.ok()) return Fail(kTool, m.status());
  if (Status s = model::CheckVocabulary(*m, encoder->dir(), "--weights " + f.weights); !s.ok()) return Fail(kTool, s);
  if (Status s = m->To(*device); !s.ok()) return Fail(kTool, s);
  auto held_out = OpenHeldOut(f.data, f.verifier, f.prompt, *encoder, f.eval_size);
  if (!held_out.ok()) return Fail(kTool, held_out.status());
  auto r = Evaluate(*m, *encoder, (*held_out)->set, (*held_out)->verifier.get(), f.eval);
  if (!r.ok()) return Fail(kTool, r.status());
  nlohmann::json line = {{"weights", f.weights.empty() ? f.prompt.model : f.weights}, {"version", version},
                         {"data", f.data}, {"verifier", f.verifier}, {"problems", r->examples},
                         {"accuracy", r->pass_at_1}};
  if (r->k > 0) {
    line["k"] = r->k;
    line["mean_at_k"] = r->mean_at_k;
  }
  if (r->unscorable > 0) line["unscorable"] = r->unscorable;
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

int RunEncodeCommand(const model::PromptFlags& f, std::istream& in, std::ostream& out) {
  auto encoder = model::OpenPromptEncoder(f);
  if (!encoder.ok()) return Fail(kTool, encoder.status());
  task::DatasetOptions o = f.dataset;
  o.answer_key.clear();  // passed through
  std::string line;
  for (uint64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto e = task::ParseExample(line, o);
    Result<std::vector<int64_t>> ids = e.ok() ? encoder->Prompt(*e) : Result<std::vector<int64_t>>(e.status());
    if (!ids.ok()) return Fail(kTool, ids.status().WithContext("stdin line " + std::to_string(n)));
    auto j = nlohmann::ordered_json::parse(line);
    j["prompt_ids"] = *ids;
    out << JsonText(j) << "\n";
  }
  out.flush();
  return out ? kExitOk : Fail(kTool, Status::IOError("writing stdout failed"));
}

int RunMakeData(const DataFlags& f, std::ostream& out) {
  task::MakeDataOptions o;
  o.task = f.task;
  o.count = static_cast<size_t>(f.problems);
  o.seed = f.seed;
  o.held_out = f.heldout;
  o.response_format = f.response_format;
  o.max_number = f.max_number;
  o.split = f.split;
  Status s = task::WriteTaskData(o, out);
  return s.ok() ? kExitOk : Fail(kTool, s);
}

}  // namespace rl::train
