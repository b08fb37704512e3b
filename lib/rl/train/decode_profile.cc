#include "rl/train/decode_profile.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>

#include "rl/core/fail.h"
#include "rl/core/json_field.h"
#include "rl/model/device.h"
#include "rl/model/hf_dir.h"
#include "rl/model/kv_cache.h"
#include "rl/model/model_dir.h"
#include "rl/model/model_file.h"
#include "rl/model/sampler.h"
#include "rl/model/torch_guard.h"
#include "rl/train/grpo_trainer.h"
#include "rl/train/torch_baseline.h"

namespace rl::train {

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void Progress(const std::string& line) { std::cerr << "rl-profile decode: " << line << std::endl; }

// The model to measure, with its context cut to what the run needs (the KV cache is sized by it).
Result<model::Transformer> LoadModelOnHost(const DecodeProfileOptions& o, const model::ModelDir& dir) {
  const int64_t context = o.prompt_tokens + o.max_new_tokens;
  if (o.weights.empty()) {
    RL_ASSIGN_OR_RETURN(model::Transformer m,
                        model::InitialModel(dir, o.seed, model::HfLoadOptions{model::DType::kF32, context}));
    return m;
  }
  RL_ASSIGN_OR_RETURN(model::LoadedModel loaded, model::LoadModelFile(o.weights));
  model::ModelConfig c = loaded.model.config();
  if (c.context() <= context) return loaded.model;
  c.rl_context = context;
  RL_ASSIGN_OR_RETURN(model::Transformer m, model::Transformer::Create(c, o.seed));
  RL_RETURN_IF_ERROR(m.LoadNamedParameters(loaded.model.NamedParameters()));
  return m;
}

// The model on the device and in the compute dtype of the run.
Result<model::Transformer> LoadModel(const DecodeProfileOptions& o, const model::ModelDir& dir,
                                     const c10::Device& device) {
  RL_ASSIGN_OR_RETURN(model::Transformer m, LoadModelOnHost(o, dir));
  if (o.bf16()) RL_RETURN_IF_ERROR(m.ToDType(model::DType::kBF16));
  RL_RETURN_IF_ERROR(m.To(device));
  return m;
}

// Best of `runs` timings of f.
template <typename F>
double Best(int runs, F f) {
  double best = 1e300;
  for (int i = 0; i < runs; ++i) {
    auto t = Clock::now();
    f();
    best = std::min(best, Since(t));
  }
  return best;
}

// A GPU's figures: reading and copying 512 MiB on the device, an 8192^3 matmul in `dtype`.
Result<MachineFigures> MeasureDevice(const c10::Device& device, at::ScalarType dtype) {
  return model::TorchGuard("device figures", [&]() -> Result<MachineFigures> {
    MachineFigures m;
    m.where = model::DeviceName(device);
    const at::Tensor x = at::ones({int64_t{128} << 20}, at::TensorOptions().dtype(at::kFloat).device(device));
    at::Tensor y = at::empty_like(x);
    const auto timed = [&](auto f) {
      f();
      model::Synchronize(device);
      return Best(3, [&] {
        f();
        model::Synchronize(device);
      });
    };
    m.read_gb_s = static_cast<double>(x.nbytes()) / timed([&] { (void)at::sum(x); }) / 1e9;
    m.copy_gb_s = 2.0 * static_cast<double>(x.nbytes()) / timed([&] { y.copy_(x); }) / 1e9;
    m.matmul_n = 8192;
    const auto options = at::TensorOptions().dtype(dtype).device(device);
    const at::Tensor a = at::rand({m.matmul_n, m.matmul_n}, options), b = at::rand({m.matmul_n, m.matmul_n}, options);
    m.matmul_gflop_s = 2.0 * std::pow(static_cast<double>(m.matmul_n), 3) / timed([&] { (void)at::mm(a, b); }) / 1e9;
    return m;
  });
}

Result<MachineFigures> MeasureMachine(at::ScalarType dtype) {
  return model::TorchGuard("machine figures", [&]() -> Result<MachineFigures> {
    MachineFigures m;
    {
      const at::Tensor x = at::ones({int64_t{128} << 20}, at::kFloat);  // 512 MiB
      double sink = 0;
      const double s = Best(3, [&] { sink += at::sum(x).item<double>(); });
      m.read_gb_s = static_cast<double>(x.nbytes()) / s / 1e9;
      (void)sink;
    }
    {
      const size_t n = size_t{256} << 20;
      std::unique_ptr<char[]> a(new char[n]), b(new char[n]);
      std::memset(a.get(), 1, n);
      std::memset(b.get(), 0, n);
      const double s = Best(3, [&] { std::memcpy(b.get(), a.get(), n); });
      m.copy_gb_s = 2.0 * static_cast<double>(n) / s / 1e9;
    }
    m.matmul_n = 2048;
    const at::Tensor a = at::rand({m.matmul_n, m.matmul_n}).to(dtype), b = at::rand({m.matmul_n, m.matmul_n}).to(dtype);
    (void)at::mm(a, b);
    const double s = Best(3, [&] { (void)at::mm(a, b); });
    m.matmul_gflop_s = 2.0 * std::pow(static_cast<double>(m.matmul_n), 3) / s / 1e9;
    return m;
  });
}

// Random prompts of prompt_tokens ids below the vocabulary (bos first when the model has one).
std::vector<std::vector<int64_t>> MakePrompts(const model::ModelDir& dir, int64_t vocab, int64_t count,
                                              const DecodeProfileOptions& o, std::mt19937_64* rng) {
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(count));
  for (auto& p : out) {
    for (int64_t i = 0; i < o.prompt_tokens; ++i) p.push_back(id(*rng));
    if (dir.bos_id >= 0) p[0] = dir.bos_id;
  }
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One generation as model::Generate runs it with every slot busy from start to end (a KV cache,
// ForwardStep over the prompts, then over each new token, the Sampler's draw after each), timed
// in two parts: the prefill up to the first sampled token, and the decode steps after it.
Result<std::pair<double, double>> TimeGeneration(const model::Transformer& m,
                                                 const std::vector<std::vector<int64_t>>& prompts,
                                                 int64_t new_tokens, uint64_t seed) {
  const int64_t b = static_cast<int64_t>(prompts.size()), p = static_cast<int64_t>(prompts[0].size());
  RL_ASSIGN_OR_RETURN(model::KvCache cache, model::KvCache::Create(m.config(), b, m.dtype(), 1, m.device()));
  RL_ASSIGN_OR_RETURN(model::Sampler sampler, model::Sampler::Create(model::SamplingOptions{}, seed));
  std::vector<int64_t> slots(static_cast<size_t>(b)), flat;
  for (int64_t i = 0; i < b; ++i) slots[static_cast<size_t>(i)] = i;
  for (const auto& prompt : prompts) flat.insert(flat.end(), prompt.begin(), prompt.end());
  return model::TorchGuard("decode profile", [&]() -> Result<std::pair<double, double>> {
    c10::NoGradGuard no_grad;
    auto start = Clock::now();
    // The last position's logits only, as model::Generate prefills (B x V, not B x P x V).
    RL_ASSIGN_OR_RETURN(at::Tensor logits, m.ForwardStep(at::tensor(flat, at::kLong).view({b, p}), slots, &cache,
                                                         /*last_only=*/true));
    RL_ASSIGN_OR_RETURN(model::Sample next, sampler.Draw(logits.select(1, 0)));
    const double prefill = Since(start);
    start = Clock::now();
    for (int64_t t = 1; t < new_tokens; ++t) {
      RL_ASSIGN_OR_RETURN(logits, m.ForwardStep(next.ids.unsqueeze(1), slots, &cache));
      RL_ASSIGN_OR_RETURN(next, sampler.Draw(logits.select(1, 0)));
      (void)next.logprobs.data_ptr<float>();  // as a rollout reads them
    }
    return std::make_pair(prefill, Since(start));
  });
}

// Prefill and decode figures of ours at each batch size, the median of o.runs runs each.
Status MeasureOurDecode(const model::Transformer& m, const std::vector<std::vector<int64_t>>& prompts,
                        const DecodeProfileOptions& o, DecodeReport* r) {
  RL_RETURN_IF_ERROR(TimeGeneration(m, {prompts[0]}, 2, o.seed).status());  // warm-up
  for (int64_t b : o.batches) {
    Progress("ours: batch " + std::to_string(b) + ", " + std::to_string(o.prompt_tokens) + " prompt and " +
             std::to_string(o.max_new_tokens) + " new tokens each");
    std::vector<std::vector<int64_t>> batch(prompts.begin(), prompts.begin() + b);
    std::vector<double> prefill, decode;
    model::ResetPeakDeviceBytes(m.device());
    for (int run = 0; run < o.runs; ++run) {
      RL_ASSIGN_OR_RETURN(auto t, TimeGeneration(m, batch, o.max_new_tokens, o.seed + static_cast<uint64_t>(run)));
      prefill.push_back(t.first);
      decode.push_back(t.second);
    }
    const std::optional<int64_t> peak = model::PeakDeviceBytes(m.device());
    r->figures.push_back({"prefill", b, b * o.prompt_tokens, Median(prefill), std::nullopt, peak, std::nullopt});
    r->figures.push_back({"decode", b, b * (o.max_new_tokens - 1), Median(decode), std::nullopt, peak, std::nullopt});
  }
  return Status::OK();
}

// The GRPO step's batch: random prompts and responses, old log-probabilities drawn in [-3, -0.5]
// (so that ratios differ from 1 and some clip), rewards 1 for every third sequence, groups of 8.
std::vector<Group> MakeTrainGroups(const std::vector<std::vector<int64_t>>& prompts, int64_t vocab,
                                   const DecodeProfileOptions& o, std::mt19937_64* rng) {
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  std::uniform_real_distribution<float> lp(-3.0f, -0.5f);
  std::vector<Group> groups;
  for (int64_t i = 0; i < o.sequences; ++i) {
    if (i % 8 == 0) groups.push_back({std::to_string(i / 8), {}});
    Sample s;
    s.prompt_ids = prompts[static_cast<size_t>(i) % prompts.size()];
    for (int64_t t = 0; t < o.max_new_tokens; ++t) {
      s.response_ids.push_back(id(*rng));
      s.logprobs.push_back(lp(*rng));
    }
    s.reward = i % 3 == 0 ? 1.0 : 0.0;
    groups.back().samples.push_back(std::move(s));
  }
  return groups;
}

nlohmann::json TrainSpec(const std::vector<Group>& groups, const GrpoOptions& go) {
  nlohmann::json tokens = nlohmann::json::array(), old = nlohmann::json::array(), rewards = nlohmann::json::array(),
                 sizes = nlohmann::json::array();
  for (const Group& g : groups) {
    sizes.push_back(g.samples.size());
    for (const Sample& s : g.samples) {
      std::vector<int64_t> ids = s.prompt_ids;
      ids.insert(ids.end(), s.response_ids.begin(), s.response_ids.end());
      tokens.push_back(ids);
      old.push_back(s.logprobs);
      rewards.push_back(s.reward);
    }
  }
  return {{"tokens", tokens}, {"old_logprobs", old}, {"rewards", rewards}, {"groups", sizes},
          {"clip", go.clip},  {"lr", go.schedule.lr},         {"grad_clip", go.grad_clip}};
}

Status MeasureOurTrain(const model::Transformer& m, const std::vector<Group>& groups, const GrpoOptions& go,
                       const DecodeProfileOptions& o, DecodeReport* r) {
  Progress("ours: one GRPO step over " + std::to_string(groups.size()) + " groups");
  int64_t tokens = 0, sequences = 0;
  for (const Group& g : groups) {
    for (const Sample& s : g.samples) tokens += static_cast<int64_t>(s.prompt_ids.size() + s.response_ids.size());
    sequences += static_cast<int64_t>(g.samples.size());
  }
  std::vector<double> seconds;
  StepStats stats;
  model::ResetPeakDeviceBytes(m.device());
  for (int run = 0; run < o.runs; ++run) {  // each run from the same weights
    RL_ASSIGN_OR_RETURN(model::Transformer copy, m.Clone());
    RL_ASSIGN_OR_RETURN(std::unique_ptr<GrpoTrainer> trainer, GrpoTrainer::Create(std::move(copy), std::nullopt, go));
    auto start = Clock::now();
    RL_RETURN_IF_ERROR(trainer->Accumulate(groups));
    RL_ASSIGN_OR_RETURN(stats, trainer->FinishStep());
    model::Synchronize(m.device());  // AdamW's last kernels may still be queued on a GPU
    seconds.push_back(Since(start));
  }
  r->figures.push_back({"train", sequences, tokens, Median(seconds), std::nullopt, model::PeakDeviceBytes(m.device()),
                        std::nullopt});
  r->loss_ours = stats.loss;
  r->grad_norm_ours = stats.grad_norm;
  return Status::OK();
}

// A directory of its own under $TMPDIR (or /tmp), removed when it goes out of scope.
class TempDir {
 public:
  static Result<TempDir> Create() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/rl-profile-decode.XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) return Status::IOError("cannot create a directory like " + tmpl);
    return TempDir(tmpl);
  }
  TempDir(TempDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  TempDir(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string p) : path_(std::move(p)) {}
  std::string path_;
};

// Torch's figures beside ours: the same weights (the directory's own when we load them unchanged,
// else exported to a temporary directory), the same shapes, the same training batch.
Status MeasureTorch(const model::Transformer& m, const model::ModelDir& dir, const DecodeProfileOptions& o,
                    int64_t vocab, const nlohmann::json& train, DecodeReport* r) {
  RL_ASSIGN_OR_RETURN(TempDir tmp, TempDir::Create());
  std::string weights_dir = dir.path;
  if (!o.weights.empty() || !dir.has_weights) {
    weights_dir = tmp.path() + "/model";
    Progress("exporting the weights for torch to " + weights_dir);
    RL_ASSIGN_OR_RETURN(model::Transformer host, m.Clone(c10::Device(c10::kCPU)));
    if (o.bf16()) RL_RETURN_IF_ERROR(host.ToDType(model::DType::kF32));  // torch rounds them itself
    RL_RETURN_IF_ERROR(model::SaveHfModel(weights_dir, host));
  }
  const nlohmann::json spec = {{"threads", o.threads},  {"seed", o.seed}, {"runs", o.runs},
                               {"batches", o.batches},  {"prompt_tokens", o.prompt_tokens},
                               {"new_tokens", o.max_new_tokens}, {"vocab", vocab},
                               {"bos", dir.bos_id},     {"check", true},
                               {"train", train},        {"device", model::DeviceName(m.device())},
                               {"dtype", o.bf16() ? "bfloat16" : "float32"}};
  Result<std::vector<nlohmann::json>> lines = RunTorchBaseline(weights_dir, spec, tmp.path());
  if (lines.status().code() == Code::kUnavailable) {
    r->torch_unavailable = lines.status().message();
    Progress("torch baseline not run: " + r->torch_unavailable);
    return Status::OK();
  }
  RL_RETURN_IF_ERROR(lines.status());
  for (const nlohmann::json& j : *lines) {
    const std::string fig = TextField(j, "figure");
    if (fig == "check") r->torch_check = NumberField(j, "max_abs_diff", -1.0);
    if (fig == "train") {
      r->loss_torch = NumberField(j, "loss", 0.0);
      r->grad_norm_torch = NumberField(j, "grad_norm", 0.0);
    }
    for (DecodeFigure& f : r->figures) {
      if (f.figure == fig && (fig == "train" || f.batch == IntField(j, "batch", -1))) {
        f.torch_s = NumberField(j, "seconds", 0.0);
        if (j.contains("peak_bytes") && j["peak_bytes"].is_number()) f.torch_peak_bytes = j["peak_bytes"].get<int64_t>();
      }
    }
  }
  for (const DecodeFigure& f : r->figures) {
    if (!f.torch_s) return Status::Internal("the torch baseline gave no " + f.figure + " figure");
  }
  return Status::OK();
}

void CountParameters(const model::Transformer& m, DecodeReport* r) {
  const model::ModelConfig& c = m.config();
  for (const auto& [name, t] : m.NamedParameters()) r->parameters += t.numel();
  const int64_t embed = c.vocab_size * c.hidden_size;
  const int64_t bytes = m.dtype() == model::DType::kF32 ? 4 : 2;
  r->matmul_parameters = r->parameters - (c.tie_word_embeddings ? 0 : embed);
  r->weight_bytes = r->matmul_parameters * bytes;
  // A token of a sparse layer multiplies by its k experts only; a step over a batch may read all.
  const int64_t idle = (c.moe.num_experts - c.moe.num_experts_per_tok) * 3 * c.hidden_size * c.moe.moe_intermediate_size;
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    if (c.SparseLayer(layer)) r->matmul_parameters -= idle;
  }
}

}  // namespace

Result<DecodeReport> MeasureDecode(const DecodeProfileOptions& o) {
  at::set_num_threads(o.threads);
  RL_ASSIGN_OR_RETURN(model::ModelDir dir, model::OpenModelDir(o.model));
  if (o.max_new_tokens < 2 || o.prompt_tokens < 1 || o.sequences < 1 || o.batches.empty()) {
    return Status::InvalidArgument("nothing to measure (--max-new-tokens must be at least 2)");
  }
  RL_ASSIGN_OR_RETURN(c10::Device device, model::OpenDevice(o.device));
  RL_ASSIGN_OR_RETURN(model::Transformer m, LoadModel(o, dir, device));
  if (m.config().context() < o.prompt_tokens + o.max_new_tokens) {
    return Status::InvalidArgument("--prompt-tokens + --max-new-tokens do not fit the model's context of " +
                                   std::to_string(m.config().context()));
  }
  DecodeReport r;
  r.model = o.model;
  r.architecture = model::ArchitectureName(m.config().architecture);
  CountParameters(m, &r);
  Progress("measuring memory bandwidth and matmul FLOP/s of " + model::DeviceName(device));
  if (device.is_cpu()) {
    RL_ASSIGN_OR_RETURN(r.machine, MeasureMachine(o.bf16() ? at::kBFloat16 : at::kFloat));
  } else {
    RL_ASSIGN_OR_RETURN(r.machine, MeasureDevice(device, o.bf16() ? at::kBFloat16 : at::kFloat));
  }
  const int64_t vocab = std::min(m.config().vocab_size, dir.tokenizer->vocab_size());
  std::mt19937_64 rng(o.seed);
  const int64_t most = std::max(*std::max_element(o.batches.begin(), o.batches.end()), o.sequences);
  const std::vector<std::vector<int64_t>> prompts = MakePrompts(dir, vocab, most, o, &rng);
  RL_RETURN_IF_ERROR(MeasureOurDecode(m, prompts, o, &r));
  GrpoOptions go;
  go.pad_id = dir.pad_id;
  go.device = device;
  go.bf16 = o.bf16();
  const std::vector<Group> groups = MakeTrainGroups(prompts, vocab, o, &rng);
  RL_RETURN_IF_ERROR(MeasureOurTrain(m, groups, go, o, &r));
  RL_RETURN_IF_ERROR(MeasureTorch(m, dir, o, vocab, TrainSpec(groups, go), &r));
  return r;
}

profile::Subcommand AddDecodeProfile(CommandLine& cl) {
  auto o = std::make_shared<DecodeProfileOptions>();
  CLI::App* app = cl.Sub("decode",
                         "prefill, decode and GRPO-step tokens/s of a model directory beside python3-torch on the "
                         "same weights, and beside the machine's bandwidth and FLOP/s");
  cl.Require(cl.Bind(app, "--model", &o->model));
  cl.Bind(app, "--weights", &o->weights);
  cl.Bind(app, "--batches", &o->batches)->delimiter(',')->check(CLI::Range(int64_t{1}, int64_t{1} << 12));
  cl.Bind(app, "--prompt-tokens", &o->prompt_tokens)->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cl.Bind(app, "--max-new-tokens", &o->max_new_tokens)->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  cl.Bind(app, "--sequences", &o->sequences)->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  cl.Bind(app, "--runs", &o->runs)->check(CLI::Range(1, 100));
  cl.Bind(app, "--threads", &o->threads)->check(CLI::Range(1, 256));
  cl.Bind(app, "--device", &o->device);
  cl.Bind(app, "--precision", &o->precision)->check(CLI::IsMember({"float32", "bf16"}));
  cl.Bind(app, "--seed", &o->seed);
  cl.BindFlag(app, "--json", &o->json);
  return {app, [o]() -> int {
            auto report = MeasureDecode(*o);
            if (!report.ok()) return Fail("rl-profile", report.status());
            if (o->json) {
              std::cout << DecodeReportJson(*report, *o).dump() << std::endl;
            } else {
              PrintDecodeReport(*report, *o);
            }
            return kExitOk;
          }};
}

}  // namespace rl::train
