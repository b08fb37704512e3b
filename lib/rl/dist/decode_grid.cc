#include "rl/dist/decode_grid.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "rl/dist/adaptive_generate.h"
#include "rl/dist/replica.h"
#include "rl/model/device.h"
#include "rl/model/kv_cache.h"
#include "rl/model/tensor_parallel.h"
#include "rl/model/torch_guard.h"

namespace rl::dist {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Starts `batch` sequences of `length` random tokens in a Replica (a prefill each) and times
// `steps` of its rounds: the very work a round of generation does (forward step, sampling, the
// bookkeeping), so that the profile predicts what AdaptiveGenerate measures. Returns (median
// round seconds, mean prefill seconds per sequence).
Result<std::pair<double, double>> TimePoint(const model::Transformer& m, int64_t batch, int64_t length,
                                            int steps, at::Generator& gen) {
  const std::vector<std::vector<int64_t>> no_prompts;
  model::GenerateOptions go;
  go.sampling.temperature = 0;
  go.max_new_tokens = steps + 1;  // no sequence finishes while timed
  RL_ASSIGN_OR_RETURN(Replica replica, Replica::Create(&m, batch, &no_prompts, &go, 1));
  std::vector<SequenceState> sequences;
  for (int64_t s = 0; s < batch; ++s) {
    const at::Tensor ids = at::randint(m.config().vocab_size, {length}, gen, at::kLong);
    sequences.push_back(SequenceState{0, std::vector<int64_t>(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + length),
                                      {}, {}});
  }
  // On a GPU each timing waits for the kernels it queued (model::Synchronize; a no-op on the CPU).
  auto t = Clock::now();
  RL_RETURN_IF_ERROR(replica.RecomputeActive(std::move(sequences)));
  model::Synchronize(m.device());
  const double prefill = Since(t) / static_cast<double>(batch);
  std::vector<model::Generation> out(1);
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    t = Clock::now();
    RL_ASSIGN_OR_RETURN(RoundStats stats, replica.Round(&out));
    (void)stats;
    model::Synchronize(m.device());
    times.push_back(Since(t));
  }
  std::sort(times.begin(), times.end());
  return std::make_pair(times[times.size() / 2], prefill);
}

}  // namespace

std::vector<int> ProfiledDegrees(const model::ModelConfig& config, int ranks) {
  std::vector<int> out;
  for (int t : TensorParallelDegrees(config, ranks)) {
    if ((t & (t - 1)) == 0 || t == ranks) out.push_back(t);
  }
  return out;
}

Result<LatencyModel> MeasureDecodeGrid(Group& group, const model::Transformer& whole,
                                       const DecodeGridOptions& o) {
  const int n = group.size();
  const int64_t context = whole.config().context();
  std::vector<DecodePoint> decode;
  std::vector<PrefillPoint> prefill;
  SwitchCosts costs;
  RL_RETURN_IF_ERROR(model::TorchGuard("decode grid", [&]() -> Status {
    c10::NoGradGuard no_grad;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(o.seed + static_cast<uint64_t>(group.rank()));
    for (int tp : ProfiledDegrees(whole.config(), n)) {
      // The degree's communication group (made once, kept in `group`, as AdaptiveGenerate uses).
      std::unique_ptr<model::Transformer> shard;
      if (tp > 1) {
        RL_ASSIGN_OR_RETURN(Group g, group.TensorParallelGroup(tp));
        RL_ASSIGN_OR_RETURN(model::TensorParallel tp_comm, g.TensorParallel());
        auto t = Clock::now();
        RL_ASSIGN_OR_RETURN(model::Transformer s, whole.Shard(tp_comm));
        model::Synchronize(whole.device());
        costs.reshard_s = std::max(costs.reshard_s, Since(t));
        shard = std::make_unique<model::Transformer>(std::move(s));
      }
      const model::Transformer& m = shard ? *shard : whole;
      for (int64_t b : o.batches) {
        for (int64_t len : o.lengths) {
          if (len + o.steps + 1 > context) continue;  // not feasible in this context
          const int64_t batch = b * tp;
          RL_RETURN_IF_ERROR(group.Barrier());  // replicas measure at once, as they would run
          RL_ASSIGN_OR_RETURN(auto figures, TimePoint(m, batch, len, o.steps, gen));
          // The timed rounds run at lengths len .. len+steps-1: their middle is the point's.
          decode.push_back({tp, batch, batch * (len + (o.steps - 1) / 2), figures.first});
          prefill.push_back({tp, len, figures.second});
        }
      }
    }
    // All-gather bandwidth: bytes each rank receives per second, for 16 MiB per rank, from where
    // the KV cache a switch moves lives (on a GPU the staging through host memory included).
    const at::Tensor block = at::ones({int64_t{4} << 20}, at::TensorOptions().dtype(at::kFloat).device(whole.device()));
    std::vector<at::Tensor> parts;
    RL_RETURN_IF_ERROR(group.AllGather(block, &parts));  // warm up the connections
    auto t = Clock::now();
    RL_RETURN_IF_ERROR(group.AllGather(block, &parts));
    costs.gather_bytes_per_s = static_cast<double>(block.nbytes()) * (n - 1) / std::max(Since(t), 1e-9);
    const model::ModelConfig& c = whole.config();
    // As a switch moves it: in float32 whatever the model's dtype (adaptive_merge.cc, MoveSequences).
    costs.kv_bytes_per_token = 2 * c.num_hidden_layers * c.kv_heads() * c.head_width() * int64_t{4};
    // The ranks' figures averaged, so that every rank holds the same model.
    std::vector<double> all;
    for (const auto& d : decode) all.push_back(d.seconds);
    for (const auto& p : prefill) all.push_back(p.seconds);
    all.push_back(costs.reshard_s);
    all.push_back(costs.gather_bytes_per_s);
    at::Tensor sum = at::tensor(all, at::kDouble);
    RL_RETURN_IF_ERROR(group.AllReduceSum(sum));
    sum = sum / n;
    const double* s = sum.data_ptr<double>();
    size_t k = 0;
    for (auto& d : decode) d.seconds = s[k++];
    for (auto& p : prefill) p.seconds = s[k++];
    costs.reshard_s = s[k++];
    costs.gather_bytes_per_s = s[k++];
    return Status::OK();
  }));
  return LatencyModel::Create(std::move(decode), std::move(prefill), costs);
}

}  // namespace rl::dist
