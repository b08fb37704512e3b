#include "rl/dist/adaptive_generate.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "rl/dist/replica.h"
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

// Moves every rank's unfinished sequences into `merged` (a replica over all ranks, each holding
// its key/value heads). `counts[r]`: how many rank r has.
Status Merge(Group& group, Replica::Exported mine, const std::vector<int64_t>& counts,
             const model::ModelConfig& config, bool recompute, Replica* merged,
             SwitchRecord* record) {
  // A fail point for drills: RL_FAILPOINT=adaptive-switch stops this process (SIGSTOP) as the
  // switch begins, so that a test can kill it in the middle of one.
  if (const char* f = std::getenv("RL_FAILPOINT"); f != nullptr && std::strcmp(f, "adaptive-switch") == 0) {
    std::raise(SIGSTOP);
  }
  const int n = group.size();
  const int64_t n_max = *std::max_element(counts.begin(), counts.end());
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
  std::vector<SequenceState> sequences;
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < counts[static_cast<size_t>(r)]; ++i) {
      SequenceState s;
      const int64_t* m = metas[static_cast<size_t>(r)][i].data_ptr<int64_t>();
      s.prompt = m[0];
      const at::Tensor tk = all_tokens[static_cast<size_t>(r)][i].narrow(0, 0, m[1]).contiguous();
      s.tokens.assign(tk.data_ptr<int64_t>(), tk.data_ptr<int64_t>() + m[1]);
      s.generation.response_ids.assign(s.tokens.end() - m[2], s.tokens.end());
      const at::Tensor lp = all_logprobs[static_cast<size_t>(r)][i].narrow(0, 0, m[2]).contiguous();
      s.generation.logprobs.assign(lp.data_ptr<float>(), lp.data_ptr<float>() + m[2]);
      s.logits = all_logits[static_cast<size_t>(r)][i].clone();
      sequences.push_back(std::move(s));
    }
  }
  record->other_s += Since(t);
  t = Clock::now();
  if (recompute) {
    RL_RETURN_IF_ERROR(merged->RecomputeActive(std::move(sequences)));
    record->state_s = Since(t);
    return Status::OK();
  }
  // The KV cache, layer by layer: gather every rank's valid entries, keep this rank's heads.
  const int64_t heads = config.kv_heads() / n, first = heads * group.rank();
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
      for (int r = 0; r < n; ++r) {
        kept.push_back(parts[static_cast<size_t>(r)].narrow(0, 0, counts[static_cast<size_t>(r)])
                           .narrow(1, first, heads));
      }
      (kv == 0 ? keys : values).push_back(at::cat(kept, 0));
    }
  }
  RL_RETURN_IF_ERROR(merged->PutActive(std::move(sequences), keys, values));
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

}  // namespace

Result<AdaptiveResult> AdaptiveGenerate(Group& group, const model::Transformer& whole,
                                        const std::vector<std::vector<int64_t>>& prompts,
                                        const AdaptiveOptions& o) {
  const int n = group.size(), rank = group.rank();
  if (o.start_tp != 1 && o.start_tp != n) {
    return Status::InvalidArgument("adaptive generate: start_tp must be 1 or the group's size " +
                                   std::to_string(n));
  }
  if (o.check_every < 1 || o.generate.slots < 1) {
    return Status::InvalidArgument("adaptive generate: check_every and slots must be >= 1");
  }
  if (o.adaptive && o.start_tp == 1 && n > 1 && o.predictor == nullptr && o.force_switch_check < 0) {
    return Status::InvalidArgument("adaptive generate: adaptive needs a predictor");
  }
  if (o.predictor != nullptr && o.adaptive && (!o.predictor->Has(1) || !o.predictor->Has(n))) {
    return Status::InvalidArgument("adaptive generate: the profile lacks tp 1 or tp " + std::to_string(n));
  }
  RL_RETURN_IF_ERROR(model::CheckTensorParallel(whole.config(), n));
  RL_RETURN_IF_ERROR(model::CheckGenerateRequest(whole.config(), prompts, o.generate));
  const Clock::time_point start = Clock::now();
  AdaptiveResult result;
  result.generations.resize(prompts.size());
  if (o.generate.max_new_tokens == 0 && o.generate.max_new_tokens_each.empty()) return result;
  // Responses finished by this rank's data-parallel replica, and by the replica over every rank.
  std::vector<model::Generation> dp_out(prompts.size()), merged_out(prompts.size());
  const int64_t slots = o.generate.slots;
  int tp = o.start_tp;
  // The tensor-parallel all-reduce is connected once, before anything is timed, and reused.
  model::TensorParallel tp_comm;
  if (n > 1) {
    RL_ASSIGN_OR_RETURN(tp_comm, group.TensorParallel());
  }
  std::optional<model::Transformer> shard;
  std::optional<Replica> replica;
  if (tp == 1) {
    RL_ASSIGN_OR_RETURN(Replica r, Replica::Create(&whole, slots, &prompts, &o.generate,
                                                   o.generate.seed + static_cast<uint64_t>(rank)));
    replica.emplace(std::move(r));
    for (size_t i = static_cast<size_t>(rank); i < prompts.size(); i += static_cast<size_t>(n)) {
      replica->AddPending(static_cast<int64_t>(i));
    }
  } else {
    RL_ASSIGN_OR_RETURN(model::Transformer s, whole.Shard(tp_comm));
    shard.emplace(std::move(s));
    RL_ASSIGN_OR_RETURN(Replica r, Replica::Create(&*shard, slots * n, &prompts, &o.generate,
                                                   o.generate.seed));
    replica.emplace(std::move(r));
    for (size_t i = 0; i < prompts.size(); ++i) replica->AddPending(static_cast<int64_t>(i));
  }
  int64_t round = 0;
  int check = 0;
  for (;;) {
    const bool merged_phase = tp == n && n > 1;
    if (!replica->done()) {
      const Clock::time_point t = Clock::now();
      RL_ASSIGN_OR_RETURN(RoundStats stats, replica->Round(tp == 1 ? &dp_out : &merged_out));
      result.trace.push_back({tp, stats.batch, stats.context_tokens, stats.prefills > 0, Since(t)});
    }
    ++round;
    if (merged_phase || n == 1) {
      // One replica over every rank: the ranks move in lockstep and finish together.
      if (replica->done()) break;
      continue;
    }
    // Static data-parallel replicas run on their own: they meet once, each when done (a rank done
    // first waits there for the others, as long as they take).
    if (!o.adaptive && !replica->done()) continue;
    // Adaptive ones meet every check_every rounds; a replica with nothing left idles to the next.
    if (round % o.check_every != 0 && !replica->done()) continue;
    if (replica->done()) round = (round + o.check_every - 1) / o.check_every * o.check_every;
    int64_t pending = 0;
    RL_ASSIGN_OR_RETURN(std::vector<ReplicaLoad> loads,
                        ExchangeLoads(group, *replica, slots, &pending, o.adaptive ? 0 : o.idle_timeout_ms));
    const int this_check = check++;
    bool all_done = pending == 0;
    for (const ReplicaLoad& l : loads) all_done = all_done && l.empty();
    if (all_done) break;
    if (!o.adaptive || pending > 0) continue;
    SwitchRecord record;
    record.round = round;
    record.from = 1;
    record.to = n;
    bool go = o.force_switch_check >= 0 && this_check >= o.force_switch_check;
    if (o.predictor != nullptr) {
      record.predicted = o.predictor->EstimateSwitch(1, n, loads);
      if (o.force_switch_check < 0) go = record.predicted.total_s() < record.predicted.stay_s * (1 - o.margin);
    }
    if (!go) continue;
    record.recompute = o.move == AdaptiveOptions::Move::kRecompute ||
                       (o.move == AdaptiveOptions::Move::kAuto && record.predicted.recompute);
    std::vector<int64_t> counts;
    for (const ReplicaLoad& l : loads) {
      counts.push_back(static_cast<int64_t>(l.size()));
      record.sequences += static_cast<int64_t>(l.size());
    }
    Clock::time_point t = Clock::now();
    RL_ASSIGN_OR_RETURN(model::Transformer s, whole.Shard(tp_comm));
    shard.emplace(std::move(s));
    record.reshard_s = Since(t);
    t = Clock::now();
    RL_ASSIGN_OR_RETURN(Replica::Exported mine, replica->TakeActive());
    RL_ASSIGN_OR_RETURN(Replica next, Replica::Create(&*shard, slots * n, &prompts, &o.generate,
                                                      o.generate.seed + 7919u * static_cast<uint64_t>(check)));
    record.other_s = Since(t);
    RL_RETURN_IF_ERROR(TorchGuard("adaptive generate: switch", [&]() -> Status {
      return Merge(group, std::move(mine), counts, whole.config(), record.recompute, &next, &record);
    }));
    replica.emplace(std::move(next));
    tp = n;
    result.switches.push_back(record);
  }
  // Responses finished before a switch are held by their replica's rank; those finished after it
  // by every rank (rank 0 speaks for them).
  std::vector<bool> owned(prompts.size(), false);
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (!dp_out[i].response_ids.empty()) {
      result.generations[i] = std::move(dp_out[i]);
      owned[i] = true;
    } else if (!merged_out[i].response_ids.empty()) {
      result.generations[i] = std::move(merged_out[i]);
      owned[i] = rank == 0;
    }
  }
  if (n > 1) {
    RL_RETURN_IF_ERROR(TorchGuard("adaptive generate: share", [&]() -> Status {
      return ShareOutputs(group, owned, &result.generations);
    }));
  }
  result.seconds = Since(start);
  return result;
}

}  // namespace rl::dist
