#include "rl/dist/decode_grid.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>

#include "rl/model/kv_cache.h"
#include "rl/model/tensor_parallel.h"
#include "rl/model/torch_guard.h"

namespace rl::dist {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Prefills `batch` random prefixes of `length` tokens and times `steps` decode steps. Returns
// (median step seconds, mean prefill seconds per sequence).
Result<std::pair<double, double>> TimePoint(const model::Transformer& m, int64_t batch, int64_t length,
                                            int steps, at::Generator& gen) {
  RL_ASSIGN_OR_RETURN(model::KvCache cache, model::KvCache::Create(m.config(), batch, m.dtype(),
                                                                   m.tensor_parallel().size));
  const int64_t vocab = m.config().vocab_size;
  double prefill = 0;
  std::vector<int64_t> slots;
  for (int64_t s = 0; s < batch; ++s) {
    const at::Tensor prompt = at::randint(vocab, {1, length}, gen, at::kLong);
    const auto t = Clock::now();
    RL_ASSIGN_OR_RETURN(at::Tensor logits, m.ForwardStep(prompt, {s}, &cache, /*last_only=*/true));
    (void)logits.argmax(-1);
    prefill += Since(t);
    slots.push_back(s);
  }
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    const at::Tensor next = at::randint(vocab, {batch, 1}, gen, at::kLong);
    const auto t = Clock::now();
    RL_ASSIGN_OR_RETURN(at::Tensor logits, m.ForwardStep(next, slots, &cache));
    (void)logits.argmax(-1);
    times.push_back(Since(t));
  }
  std::sort(times.begin(), times.end());
  return std::make_pair(times[times.size() / 2], prefill / static_cast<double>(batch));
}

}  // namespace

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
    RL_ASSIGN_OR_RETURN(model::TensorParallel tp_comm, group.TensorParallel());
    auto t = Clock::now();
    RL_ASSIGN_OR_RETURN(model::Transformer shard, whole.Shard(tp_comm));
    costs.reshard_s = Since(t);
    for (int tp : {1, n}) {
      if (tp == 1 && n == 1 && !decode.empty()) break;
      const model::Transformer& m = tp == 1 ? whole : shard;
      for (int64_t b : o.batches) {
        for (int64_t len : o.lengths) {
          if (len + o.steps + 1 > context) continue;  // not feasible in this context
          const int64_t batch = tp == 1 ? b : b * n;
          RL_RETURN_IF_ERROR(group.Barrier());  // replicas measure at once, as they would run
          RL_ASSIGN_OR_RETURN(auto figures, TimePoint(m, batch, len, o.steps, gen));
          decode.push_back({tp, batch, batch * len, figures.first});
          prefill.push_back({tp, len, figures.second});
        }
      }
    }
    // All-gather bandwidth: bytes each rank receives per second, for 16 MiB per rank.
    const at::Tensor block = at::ones({int64_t{4} << 20}, at::kFloat);
    std::vector<at::Tensor> parts;
    RL_RETURN_IF_ERROR(group.AllGather(block, &parts));  // warm up the connections
    t = Clock::now();
    RL_RETURN_IF_ERROR(group.AllGather(block, &parts));
    costs.gather_bytes_per_s = static_cast<double>(block.nbytes()) * (n - 1) / std::max(Since(t), 1e-9);
    const model::ModelConfig& c = whole.config();
    costs.kv_bytes_per_token = 2 * c.num_hidden_layers * c.kv_heads() * c.head_width() *
                               static_cast<int64_t>(at::elementSize(model::ScalarTypeOf(whole.dtype())));
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
