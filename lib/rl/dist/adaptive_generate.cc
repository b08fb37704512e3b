#include "rl/dist/adaptive_generate.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "rl/dist/replica.h"
#include "rl/model/device.h"
#include "rl/model/tensor_parallel.h"
#include "rl/model/torch_guard.h"

namespace rl::dist {
namespace {

using model::TorchGuard;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The loads of every rank: [pending, n, (length, budget) * slots] each.
Result<std::vector<ReplicaLoad>> ExchangeLoads(Group& group, const Replica& replica, int64_t slots,
                                               int64_t* pending_total, int64_t timeout_ms) {
  at::Tensor mine = at::zeros({2 + 2 * slots}, at::kLong);
  const auto load = replica.LengthsAndBudgets();
  mine[0] = replica.pending();
  mine[1] = static_cast<int64_t>(load.size());
  for (size_t i = 0; i < load.size(); ++i) {
    mine[2 + 2 * static_cast<int64_t>(i)] = load[i].first;
    mine[3 + 2 * static_cast<int64_t>(i)] = load[i].second;
  }
  std::vector<at::Tensor> all;
  RL_RETURN_IF_ERROR(group.AllGather(mine, &all, timeout_ms));
  std::vector<ReplicaLoad> loads;
  *pending_total = 0;
  for (const at::Tensor& t : all) {
    const int64_t* p = t.data_ptr<int64_t>();
    *pending_total += p[0];
    ReplicaLoad l;
    for (int64_t i = 0; i < p[1]; ++i) l.emplace_back(p[2 + 2 * i], p[3 + 2 * i]);
    loads.push_back(std::move(l));
  }
  return loads;
}

// Pads t along dim to `size` with zeros.
at::Tensor PadTo(const at::Tensor& t, int64_t dim, int64_t size) {
  if (t.size(dim) == size) return t.contiguous();
  std::vector<int64_t> shape = t.sizes().vec();
  shape[static_cast<size_t>(dim)] = size;
  at::Tensor out = at::zeros(shape, t.options());
  out.narrow(dim, 0, t.size(dim)).copy_(t);
  return out;
}

// Moves the unfinished sequences of the replicas of degree `from` into those of degree `to`:
// `place[k][i]` is the new replica of old replica k's i-th sequence (MergeInto). Over the whole
// group, so that sequences may move between any replicas; this rank keeps the sequences of its new
// replica (rank / to) and, of their KV cache, the key/value heads its new shard holds, which the
// old replica's rank holding them sends (every rank of an old replica holds the same sequences).
Status Merge(Group& group, Replica::Exported mine, int from, int to, const std::vector<std::vector<int>>& place,
             const model::ModelConfig& config, const c10::Device& device, bool recompute, Replica* merged,
             SwitchRecord* record) {
  // A fail point for drills: RL_FAILPOINT=adaptive-switch stops this process (SIGSTOP) as the
  // switch begins, so that a test can kill it in the middle of one.
  if (const char* f = std::getenv("RL_FAILPOINT"); f != nullptr && std::strcmp(f, "adaptive-switch") == 0) {
    std::raise(SIGSTOP);
  }
  const int rank = group.rank(), target = rank / to;
  int64_t n_max = 1;
  for (const auto& p : place) n_max = std::max<int64_t>(n_max, static_cast<int64_t>(p.size()));
  Clock::time_point t = Clock::now();
  // Metadata: prompt, token count and generated count per sequence; tokens, logprobs, logits.
  int64_t len_max = 1;
  for (const SequenceState& s : mine.sequences) len_max = std::max<int64_t>(len_max, s.tokens.size());
  at::Tensor len_t = at::tensor(std::vector<int64_t>{len_max}, at::kLong);
  std::vector<at::Tensor> lens;
  RL_RETURN_IF_ERROR(group.AllGather(len_t, &lens));
  for (const at::Tensor& l : lens) len_max = std::max(len_max, l.item<int64_t>());
  const int64_t vocab = config.vocab_size;
  at::Tensor meta = at::zeros({n_max, 3}, at::kLong), tokens = at::zeros({n_max, len_max}, at::kLong);
  at::Tensor logprobs = at::zeros({n_max, len_max}, at::kFloat), logits = at::zeros({n_max, vocab}, at::kFloat);
  for (size_t i = 0; i < mine.sequences.size(); ++i) {
    const SequenceState& s = mine.sequences[i];
    const auto row = static_cast<int64_t>(i);
    const auto len = static_cast<int64_t>(s.tokens.size());
    const auto gen = static_cast<int64_t>(s.generation.response_ids.size());
    meta[row][0] = s.prompt;
    meta[row][1] = len;
    meta[row][2] = gen;
    tokens[row].narrow(0, 0, len).copy_(at::tensor(s.tokens, at::kLong));
    logprobs[row].narrow(0, 0, gen).copy_(at::tensor(s.generation.logprobs, at::kFloat));
    logits[row].copy_(s.logits);
  }
  std::vector<at::Tensor> metas, all_tokens, all_logprobs, all_logits;
  RL_RETURN_IF_ERROR(group.AllGather(meta, &metas));
  RL_RETURN_IF_ERROR(group.AllGather(tokens, &all_tokens));
  RL_RETURN_IF_ERROR(group.AllGather(logprobs, &all_logprobs));
  RL_RETURN_IF_ERROR(group.AllGather(logits, &all_logits));
  // This rank's new replica's sequences, old replica by old replica, each from the old replica's
  // first rank.
  std::vector<std::pair<size_t, int64_t>> sources;  // (sending rank, row)
  std::vector<SequenceState> sequences;
  for (size_t k = 0; k < place.size(); ++k) {
    const size_t src = k * static_cast<size_t>(from);
    for (size_t i = 0; i < place[k].size(); ++i) {
      if (place[k][i] != target) continue;
      const auto row = static_cast<int64_t>(i);
      sources.emplace_back(src, row);
      SequenceState s;
      const int64_t* m = metas[src][row].data_ptr<int64_t>();
      s.prompt = m[0];
      const at::Tensor tk = all_tokens[src][row].narrow(0, 0, m[1]).contiguous();
      s.tokens.assign(tk.data_ptr<int64_t>(), tk.data_ptr<int64_t>() + m[1]);
      s.generation.response_ids.assign(s.tokens.end() - m[2], s.tokens.end());
      const at::Tensor lp = all_logprobs[src][row].narrow(0, 0, m[2]).contiguous();
      s.generation.logprobs.assign(lp.data_ptr<float>(), lp.data_ptr<float>() + m[2]);
      s.logits = all_logits[src][row].to(device, /*non_blocking=*/false, /*copy=*/true);
      sequences.push_back(std::move(s));
    }
  }
  record->other_s += Since(t);
  t = Clock::now();
  if (recompute) {
    RL_RETURN_IF_ERROR(merged->RecomputeActive(std::move(sequences)));
    model::Synchronize(device);  // the prefills' kernels, on a GPU
    record->state_s = Since(t);
    return Status::OK();
  }
  // The KV cache, layer by layer: gather every rank's valid entries, keep this rank's new heads.
  // They are [first, first + heads) of the whole model's; at degree `from` the old replica's rank
  // first / old_heads held them, from offset first % old_heads of its own.
  const int64_t heads = config.kv_heads() / to, first = heads * (rank % to);
  const int64_t old_heads = config.kv_heads() / from, holder = first / old_heads, offset = first % old_heads;
  std::vector<at::Tensor> keys, values;
  for (size_t l = 0; l < mine.keys.size(); ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      const at::Tensor& local = kv == 0 ? mine.keys[l] : mine.values[l];
      // In float32 (c10d's Gloo does not take bfloat16; the round trip is exact); PutActive
      // converts back to the cache's dtype.
      at::Tensor padded = PadTo(PadTo(local, 0, n_max), 2, len_max).to(at::kFloat);
      std::vector<at::Tensor> parts;
      RL_RETURN_IF_ERROR(group.AllGather(padded, &parts));
      std::vector<at::Tensor> kept;
      for (const auto& [src, row] : sources) {
        kept.push_back(parts[src + static_cast<size_t>(holder)].narrow(0, row, 1).narrow(1, offset, heads));
      }
      (kv == 0 ? keys : values).push_back(kept.empty() ? padded.narrow(0, 0, 0).narrow(1, 0, heads) : at::cat(kept, 0));
    }
  }
  RL_RETURN_IF_ERROR(merged->PutActive(std::move(sequences), keys, values));
  model::Synchronize(device);  // the copies into the new cache, on a GPU
  record->state_s = Since(t);
  return Status::OK();
}

// Every rank's finished responses onto every rank: each prompt's response is held by one rank
// (`owner`), the others contribute zeros to a sum.
Status ShareOutputs(Group& group, const std::vector<bool>& owned, std::vector<model::Generation>* out) {
  const auto p = static_cast<int64_t>(out->size());
  at::Tensor lens = at::zeros({p}, at::kLong), stops = at::zeros({p}, at::kLong);
  for (int64_t i = 0; i < p; ++i) {
    if (!owned[static_cast<size_t>(i)]) continue;
    lens[i] = static_cast<int64_t>((*out)[static_cast<size_t>(i)].response_ids.size());
    stops[i] = static_cast<int64_t>((*out)[static_cast<size_t>(i)].stop);
  }
  RL_RETURN_IF_ERROR(group.AllReduceSum(lens));
  RL_RETURN_IF_ERROR(group.AllReduceSum(stops));
  const int64_t width = std::max<int64_t>(1, p > 0 ? lens.max().item<int64_t>() : 1);
  at::Tensor ids = at::zeros({p, width}, at::kLong), lps = at::zeros({p, width}, at::kFloat);
  for (int64_t i = 0; i < p; ++i) {
    if (!owned[static_cast<size_t>(i)]) continue;
    const model::Generation& g = (*out)[static_cast<size_t>(i)];
    const auto n = static_cast<int64_t>(g.response_ids.size());
    if (n == 0) continue;
    ids[i].narrow(0, 0, n).copy_(at::tensor(g.response_ids, at::kLong));
    lps[i].narrow(0, 0, n).copy_(at::tensor(g.logprobs, at::kFloat));
  }
  RL_RETURN_IF_ERROR(group.AllReduceSum(ids));
  RL_RETURN_IF_ERROR(group.AllReduceSum(lps));
  for (int64_t i = 0; i < p; ++i) {
    model::Generation& g = (*out)[static_cast<size_t>(i)];
    const int64_t n = lens[i].item<int64_t>();
    const at::Tensor row = ids[i].narrow(0, 0, n).contiguous(), lrow = lps[i].narrow(0, 0, n).contiguous();
    g.response_ids.assign(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + n);
    g.logprobs.assign(lrow.data_ptr<float>(), lrow.data_ptr<float>() + n);
    g.stop = static_cast<model::StopReason>(stops[i].item<int64_t>());
  }
  return Status::OK();
}

// The decision at a check: the degree to widen to (0: stay) and the estimate it was taken on.
struct Decision {
  int to = 0;
  SwitchEstimate estimate;
};

Decision Decide(const AdaptiveOptions& o, const LatencyModel* predictor, const std::vector<int>& degrees, int tp,
                int n, int this_check, const std::vector<ReplicaLoad>& replicas) {
  Decision d;
  std::vector<int> wider;
  for (int t : degrees) {
    if (t > tp && t % tp == 0) wider.push_back(t);
  }
  if (wider.empty()) return d;
  const int64_t slots = o.generate.slots;
  if (o.force_switch_check >= 0) {
    if (this_check < o.force_switch_check) return d;
    d.to = wider.front();
    if (predictor != nullptr && predictor->Has(tp) && predictor->Has(d.to)) {
      d.estimate = predictor->EstimateSwitch(tp, d.to, replicas, n / d.to, slots * d.to);
    }
    return d;
  }
  double best = 0;
  for (int t : wider) {
    if (!predictor->Has(t)) continue;  // a degree the profile lacks is no candidate
    const SwitchEstimate e = predictor->EstimateSwitch(tp, t, replicas, n / t, slots * t);
    if (d.to == 0 || e.total_s() < best) {
      d.to = t;
      d.estimate = e;
      best = e.total_s();
    }
  }
  if (d.to != 0 && !(best < d.estimate.stay_s * (1 - o.margin))) d.to = 0;
  return d;
}

// Responses finished by this rank's replica (degree tp) so far move to `generations`; the
// replica's first rank speaks for them when they are shared.
void Collect(std::vector<model::Generation>* out, int tp, int rank, std::vector<model::Generation>* generations,
             std::vector<bool>* owned) {
  for (size_t i = 0; i < out->size(); ++i) {
    if ((*out)[i].response_ids.empty()) continue;
    (*generations)[i] = std::move((*out)[i]);
    (*out)[i] = model::Generation{};
    (*owned)[i] = rank % tp == 0;
  }
}

}  // namespace

std::vector<int> TensorParallelDegrees(const model::ModelConfig& config, int ranks) {
  std::vector<int> out;
  for (int t = 1; t <= ranks; ++t) {
    if (ranks % t == 0 && (t == 1 || model::CheckTensorParallel(config, t).ok())) out.push_back(t);
  }
  return out;
}

Result<AdaptiveResult> AdaptiveGenerate(Group& group, const model::Transformer& whole,
                                        const std::vector<std::vector<int64_t>>& prompts,
                                        const AdaptiveOptions& o) {
  const int n = group.size(), rank = group.rank();
  if (o.start_tp < 1 || n % o.start_tp != 0) {
    return Status::InvalidArgument("adaptive generate: start_tp must divide the group's size " +
                                   std::to_string(n));
  }
  if (o.check_every < 1 || o.generate.slots < 1) {
    return Status::InvalidArgument("adaptive generate: check_every and slots must be >= 1");
  }
  if (o.adaptive && o.start_tp < n && o.predictor == nullptr && o.force_switch_check < 0) {
    return Status::InvalidArgument("adaptive generate: adaptive needs a predictor");
  }
  if (o.predictor != nullptr && o.adaptive && o.start_tp < n && !o.predictor->Has(o.start_tp)) {
    return Status::InvalidArgument("adaptive generate: the profile lacks tp " + std::to_string(o.start_tp));
  }
  RL_RETURN_IF_ERROR(model::CheckTensorParallel(whole.config(), o.start_tp));
  RL_RETURN_IF_ERROR(model::CheckGenerateRequest(whole.config(), prompts, o.generate));
  const Clock::time_point start = Clock::now();
  AdaptiveResult result;
  result.generations.resize(prompts.size());
  if (o.generate.max_new_tokens == 0 && o.generate.max_new_tokens_each.empty()) return result;
  // The degrees this stage may take, and their communication groups: made once (kept in `group`
  // for later stages), before anything is timed.
  std::vector<int> degrees;
  for (int t : TensorParallelDegrees(whole.config(), n)) {
    if (t >= o.start_tp && (o.adaptive || t == o.start_tp)) degrees.push_back(t);
  }
  std::map<int, model::TensorParallel> comms;
  for (int t : degrees) {
    if (t == 1) continue;
    RL_ASSIGN_OR_RETURN(Group g, group.TensorParallelGroup(t));
    RL_ASSIGN_OR_RETURN(comms[t], g.TensorParallel());
  }
  // Responses finished by this rank's replica since the last switch, and those collected so far.
  std::vector<model::Generation> out(prompts.size());
  std::vector<bool> owned(prompts.size(), false);
  const int64_t slots = o.generate.slots;
  int tp = o.start_tp;
  // The shard the replica decodes with (none at degree 1: the whole model); held by pointer, as
  // the replica points at it.
  std::unique_ptr<model::Transformer> shard;
  if (tp > 1) {
    RL_ASSIGN_OR_RETURN(model::Transformer s, whole.Shard(comms.at(tp)));
    shard = std::make_unique<model::Transformer>(std::move(s));
  }
  std::optional<Replica> replica;
  {
    const int replicas = n / tp, me = rank / tp;
    RL_ASSIGN_OR_RETURN(Replica r, Replica::Create(shard ? shard.get() : &whole, slots * tp, &prompts, &o.generate,
                                                   o.generate.seed + static_cast<uint64_t>(me)));
    replica.emplace(std::move(r));
    for (size_t i = static_cast<size_t>(me); i < prompts.size(); i += static_cast<size_t>(replicas)) {
      replica->AddPending(static_cast<int64_t>(i));
    }
  }
  int64_t round = 0;
  int check = 0;
  for (;;) {
    if (!replica->done()) {
      const Clock::time_point t = Clock::now();
      RL_ASSIGN_OR_RETURN(RoundStats stats, replica->Round(&out));
      // A GPU round returns with its last kernels queued: the calibration compares whole rounds.
      if (o.predictor != nullptr) model::Synchronize(whole.device());
      RoundTrace r{tp, stats.batch, stats.context_tokens, stats.prefills > 0, Since(t)};
      if (o.predictor != nullptr && o.predictor->Has(tp) && !r.prefill && r.batch > 0) {
        const double profiled = o.predictor->Step(tp, r.batch, r.context_tokens);
        r.predicted = profiled * (o.calibration != nullptr ? o.calibration->scale() : 1.0);
        if (o.calibration != nullptr) o.calibration->Observe(profiled, r.seconds);
      }
      result.trace.push_back(r);
    }
    ++round;
    if (tp == n) {
      // One replica over every rank: the ranks move in lockstep and finish together.
      if (replica->done()) break;
      continue;
    }
    // Static replicas run on their own: they meet once, each when done (a replica done first
    // waits there for the others, as long as they take).
    if (!o.adaptive && !replica->done()) continue;
    // Adaptive ones meet every check_every rounds; a replica with nothing left idles to the next.
    if (round % o.check_every != 0 && !replica->done()) continue;
    if (replica->done()) round = (round + o.check_every - 1) / o.check_every * o.check_every;
    int64_t pending = 0;
    RL_ASSIGN_OR_RETURN(std::vector<ReplicaLoad> loads,
                        ExchangeLoads(group, *replica, slots * tp, &pending, o.adaptive ? 0 : o.idle_timeout_ms));
    const int this_check = check++;
    bool all_done = pending == 0;
    for (const ReplicaLoad& l : loads) all_done = all_done && l.empty();
    if (all_done) break;
    if (!o.adaptive || pending > 0) continue;
    // Every rank of a replica reports its loads; its first rank's stand for it (pending counted
    // once per replica is not needed: any pending prompt stops the decision).
    std::vector<ReplicaLoad> by_replica;
    for (int k = 0; k < n / tp; ++k) by_replica.push_back(loads[static_cast<size_t>(k * tp)]);
    // The profile as the calibration has followed the machine so far.
    std::optional<LatencyModel> calibrated;
    if (o.predictor != nullptr && o.calibration != nullptr) calibrated = o.predictor->Scaled(o.calibration->scale());
    Decision d = Decide(o, calibrated ? &*calibrated : o.predictor, degrees, tp, n, this_check, by_replica);
    // Rank 0's decision is the group's.
    at::Tensor decided = at::tensor(std::vector<int64_t>{d.to, d.estimate.recompute ? 1 : 0}, at::kLong);
    RL_RETURN_IF_ERROR(group.Broadcast(decided, 0));
    d.to = static_cast<int>(decided[0].item<int64_t>());
    d.estimate.recompute = decided[1].item<int64_t>() != 0;
    if (d.to == 0) continue;
    if (d.to <= tp || n % d.to != 0 || comms.count(d.to) == 0) {
      return Status::Internal("adaptive generate: rank 0 chose tp " + std::to_string(d.to) + " from tp " +
                              std::to_string(tp));
    }
    SwitchRecord record;
    record.round = round;
    record.from = tp;
    record.to = d.to;
    record.predicted = d.estimate;
    record.recompute = o.move == AdaptiveOptions::Move::kRecompute ||
                       (o.move == AdaptiveOptions::Move::kAuto && d.estimate.recompute);
    for (const ReplicaLoad& l : by_replica) record.sequences += static_cast<int64_t>(l.size());
    const std::vector<std::vector<int>> place = MergeInto(by_replica, n / d.to, slots * d.to);
    Clock::time_point t = Clock::now();
    RL_ASSIGN_OR_RETURN(model::Transformer s, whole.Shard(comms.at(d.to)));
    auto next_shard = std::make_unique<model::Transformer>(std::move(s));
    model::Synchronize(whole.device());
    record.reshard_s = Since(t);
    t = Clock::now();
    RL_ASSIGN_OR_RETURN(Replica::Exported mine, replica->TakeActive());
    Collect(&out, tp, rank, &result.generations, &owned);
    const uint64_t seed = o.generate.seed + 7919u * (result.switches.size() + 1) + static_cast<uint64_t>(rank / d.to);
    RL_ASSIGN_OR_RETURN(Replica next, Replica::Create(next_shard.get(), slots * d.to, &prompts, &o.generate, seed));
    record.other_s = Since(t);
    RL_RETURN_IF_ERROR(TorchGuard("adaptive generate: switch", [&]() -> Status {
      return Merge(group, std::move(mine), tp, d.to, place, whole.config(), whole.device(), record.recompute, &next,
                   &record);
    }));
    replica.emplace(std::move(next));
    shard = std::move(next_shard);
    tp = d.to;
    result.switches.push_back(record);
  }
  Collect(&out, tp, rank, &result.generations, &owned);
  if (n > 1) {
    RL_RETURN_IF_ERROR(TorchGuard("adaptive generate: share", [&]() -> Status {
      return ShareOutputs(group, owned, &result.generations);
    }));
  }
  result.seconds = Since(start);
  return result;
}

}  // namespace rl::dist
