#include "rl/dist/adaptive_generate.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>

#include "rl/core/clock.h"
#include "rl/dist/adaptive_merge.h"
#include "rl/dist/adaptive_rule.h"
#include "rl/dist/replica.h"
#include "rl/model/device.h"
#include "rl/model/tensor_parallel.h"
#include "rl/model/torch_guard.h"

namespace rl::dist {
namespace {

using model::TorchGuard;

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


// The responses finished since they were last shared onto every rank: `unshared` are those this
// rank speaks for (its replica's first rank's; the others of the replica hold the same), already
// in *generations. Rows of (prompt, stop, length, routes), the tokens and log-probabilities after
// them, each rank's padded to the largest, and with `routes` (every rank alike) the recorded
// routes, each expert index a byte for up to 256 experts (config.ExpertIndexBytes): a quarter of
// int32's traffic, which at 48 sparse layers of 8 experts is 1.5 KB a token. Returns every
// prompt shared, in rank order.
Result<std::vector<int64_t>> ShareFinished(Group& group, std::vector<int64_t>* unshared,
                                           std::vector<model::Generation>* generations, bool routes,
                                           const model::ModelConfig& config) {
  std::vector<int64_t> shared;
  if (group.size() == 1) {
    shared.swap(*unshared);
    return shared;
  }
  int64_t tokens = 0, entries = 0;
  for (int64_t i : *unshared) {
    const model::Generation& g = (*generations)[static_cast<size_t>(i)];
    tokens += static_cast<int64_t>(g.response_ids.size());
    entries += static_cast<int64_t>(g.routes.size());
  }
  const auto count = static_cast<int64_t>(unshared->size());
  std::vector<at::Tensor> sizes;
  RL_RETURN_IF_ERROR(group.AllGather(at::tensor(std::vector<int64_t>{count, tokens, entries}, at::kLong), &sizes));
  int64_t rows_max = 1, tokens_max = 1, entries_max = 1;
  for (const at::Tensor& t : sizes) {
    rows_max = std::max(rows_max, t[0].item<int64_t>());
    tokens_max = std::max(tokens_max, t[1].item<int64_t>());
    entries_max = std::max(entries_max, t[2].item<int64_t>());
  }
  constexpr int64_t kRow = 4;  // prompt, stop, length, route entries
  at::Tensor rows = at::zeros({rows_max, kRow}, at::kLong), ids = at::zeros({tokens_max}, at::kLong);
  // Gloo all-gathers no int16, so more than 256 experts travel as int32.
  const at::ScalarType expert_type = config.ExpertIndexBytes() == 1 ? at::kByte : at::kInt;
  at::Tensor lps = at::zeros({tokens_max}, at::kFloat), experts = at::zeros({routes ? entries_max : 0}, expert_type);
  int64_t at = 0, at_routes = 0;
  for (int64_t k = 0; k < count; ++k) {
    const model::Generation& g = (*generations)[static_cast<size_t>((*unshared)[static_cast<size_t>(k)])];
    const auto n = static_cast<int64_t>(g.response_ids.size()), e = static_cast<int64_t>(g.routes.size());
    rows[k][0] = (*unshared)[static_cast<size_t>(k)];
    rows[k][1] = static_cast<int64_t>(g.stop);
    rows[k][2] = n;
    rows[k][3] = routes ? e : 0;
    if (routes && e > 0) experts.narrow(0, at_routes, e).copy_(at::tensor(g.routes, at::kInt));  // to expert_type
    at_routes += routes ? e : 0;
    if (n == 0) continue;
    ids.narrow(0, at, n).copy_(at::tensor(g.response_ids, at::kLong));
    lps.narrow(0, at, n).copy_(at::tensor(g.logprobs, at::kFloat));
    at += n;
  }
  std::vector<at::Tensor> all_rows, all_ids, all_lps, all_experts;
  RL_RETURN_IF_ERROR(group.AllGather(rows, &all_rows));
  RL_RETURN_IF_ERROR(group.AllGather(ids, &all_ids));
  RL_RETURN_IF_ERROR(group.AllGather(lps, &all_lps));
  if (routes) {
    RL_RETURN_IF_ERROR(group.AllGather(experts, &all_experts));
    for (at::Tensor& t : all_experts) t = t.to(at::kInt);
  }
  for (size_t r = 0; r < all_rows.size(); ++r) {
    const int64_t* row = all_rows[r].data_ptr<int64_t>();
    const int64_t* id = all_ids[r].data_ptr<int64_t>();
    const float* lp = all_lps[r].data_ptr<float>();
    const int32_t* ex = routes ? all_experts[r].data_ptr<int32_t>() : nullptr;
    int64_t from = 0, from_routes = 0;
    for (int64_t k = 0; k < sizes[r][0].item<int64_t>(); ++k, row += kRow) {
      if (row[0] < 0 || static_cast<size_t>(row[0]) >= generations->size() || row[2] < 0 || from + row[2] > tokens_max ||
          row[3] < 0 || (routes && from_routes + row[3] > entries_max)) {
        return Status::Internal("adaptive generate: a rank shared a response outside the stage");
      }
      shared.push_back(row[0]);
      if (static_cast<int>(r) != group.rank()) {
        model::Generation& g = (*generations)[static_cast<size_t>(row[0])];
        g.response_ids.assign(id + from, id + from + row[2]);
        g.logprobs.assign(lp + from, lp + from + row[2]);
        g.stop = static_cast<model::StopReason>(row[1]);
        if (routes) g.routes.assign(ex + from_routes, ex + from_routes + row[3]);
      }
      from += row[2];
      from_routes += row[3];
    }
  }
  unshared->clear();
  return shared;
}

// Refill at a check: rank 0 asks for up to `free` more prompts (none when `free` is 0) and every
// rank appends them to *prompts: [count, tokens] broadcast, then the lengths and the tokens.
// `failed` is rank 0's error so far (an on_finished that failed): count -1 says the stage is
// abandoned. Returns the count: rank 0 the error instead of -1.
Result<int64_t> TakeMorePrompts(Group& group, const AdaptiveOptions& o, const model::ModelConfig& config, int64_t free,
                                Status failed, std::vector<std::vector<int64_t>>* prompts) {
  std::vector<std::vector<int64_t>> more;
  if (group.rank() == 0 && failed.ok() && free > 0 && o.generate.more_prompts) {
    Result<std::vector<std::vector<int64_t>>> got = o.generate.more_prompts(free);
    if (got.ok()) {
      more = std::move(*got);
      failed = model::CheckGenerateRequest(config, more, o.generate);
    } else {
      failed = got.status();
    }
  }
  std::vector<int64_t> lengths, flat;
  for (const auto& p : more) {
    lengths.push_back(static_cast<int64_t>(p.size()));
    flat.insert(flat.end(), p.begin(), p.end());
  }
  at::Tensor head = at::tensor(std::vector<int64_t>{failed.ok() ? static_cast<int64_t>(more.size()) : -1,
                                                    static_cast<int64_t>(flat.size())}, at::kLong);
  RL_RETURN_IF_ERROR(group.Broadcast(head, 0));
  const int64_t count = head[0].item<int64_t>(), tokens = head[1].item<int64_t>();
  if (count < 0) {
    if (group.rank() == 0) return failed;
    return count;
  }
  if (count == 0) return count;
  at::Tensor len_t = group.rank() == 0 ? at::tensor(lengths, at::kLong) : at::zeros({count}, at::kLong);
  at::Tensor tok_t = group.rank() == 0 ? at::tensor(flat, at::kLong) : at::zeros({tokens}, at::kLong);
  RL_RETURN_IF_ERROR(group.Broadcast(len_t, 0));
  RL_RETURN_IF_ERROR(group.Broadcast(tok_t, 0));
  const int64_t* len = len_t.data_ptr<int64_t>();
  const int64_t* tok = tok_t.data_ptr<int64_t>();
  int64_t at = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (len[i] < 1 || at + len[i] > tokens) return Status::Internal("adaptive generate: added prompts overrun");
    prompts->emplace_back(tok + at, tok + at + len[i]);
    at += len[i];
  }
  return count;
}

// Responses finished by this rank's replica (degree tp) so far move to `generations`; those the
// replica's first rank speaks for when they are shared go to *unshared.
void Collect(std::vector<model::Generation>* out, int tp, int rank, std::vector<model::Generation>* generations,
             std::vector<int64_t>* unshared) {
  for (size_t i = 0; i < out->size(); ++i) {
    if ((*out)[i].response_ids.empty()) continue;
    (*generations)[i] = std::move((*out)[i]);
    (*out)[i] = model::Generation{};
    if (rank % tp == 0) unshared->push_back(static_cast<int64_t>(i));
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
  if (o.refill && !o.generate.max_new_tokens_each.empty()) {
    return Status::InvalidArgument("adaptive generate: refill takes no per-prompt budgets");
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
  // The stage's prompts: the caller's, then those a refill adds (the replicas point at them).
  std::vector<std::vector<int64_t>> all_prompts = prompts;
  // Responses finished by this rank's replica since the last switch, and those this rank speaks
  // for that the others have not been given yet.
  std::vector<model::Generation> out(prompts.size());
  std::vector<int64_t> unshared;
  const bool records_routes = o.generate.record_routes && whole.config().SparseLayerCount() > 0;
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
    RL_ASSIGN_OR_RETURN(Replica r, Replica::Create(shard ? shard.get() : &whole, slots * tp, &all_prompts,
                                                   &o.generate, o.generate.seed + static_cast<uint64_t>(me)));
    replica.emplace(std::move(r));
    for (size_t i = static_cast<size_t>(me); i < prompts.size(); i += static_cast<size_t>(replicas)) {
      replica->AddPending(static_cast<int64_t>(i));
    }
  }
  // To degree `to`, each unfinished sequence to its replica in `place`; returns how many
  // sequences each new replica holds.
  auto switch_to = [&](int to, const std::vector<std::vector<int>>& place, SwitchRecord record) -> Result<std::vector<int64_t>> {
    record.from = tp;
    record.to = to;
    record.began_ts = WallSeconds();
    Clock::time_point t = Clock::now();
    std::unique_ptr<model::Transformer> next_shard;
    if (to > 1) {
      RL_ASSIGN_OR_RETURN(model::Transformer s, whole.Shard(comms.at(to)));
      next_shard = std::make_unique<model::Transformer>(std::move(s));
    }
    model::Synchronize(whole.device());
    record.reshard_s = Since(t);
    t = Clock::now();
    RL_ASSIGN_OR_RETURN(Replica::Exported mine, replica->TakeActive());
    Collect(&out, tp, rank, &result.generations, &unshared);
    const uint64_t seed = o.generate.seed + 7919u * (result.switches.size() + 1) + static_cast<uint64_t>(rank / to);
    RL_ASSIGN_OR_RETURN(Replica next, Replica::Create(next_shard ? next_shard.get() : &whole, slots * to, &all_prompts,
                                                      &o.generate, seed));
    record.other_s = Since(t);
    RL_RETURN_IF_ERROR(TorchGuard("adaptive generate: switch", [&]() -> Status {
      return MoveSequences(group, std::move(mine), tp, to, place, whole.config(), whole.device(), record.recompute, &next,
                   &record);
    }));
    replica.emplace(std::move(next));
    shard = std::move(next_shard);
    tp = to;
    result.switches.push_back(record);
    std::vector<int64_t> held(static_cast<size_t>(n / to), 0);
    for (const auto& p : place) {
      for (int r : p) ++held[static_cast<size_t>(r)];
    }
    return held;
  };
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
    if (tp == n && !o.refill) {
      // One replica over every rank: the ranks move in lockstep and finish together.
      if (replica->done()) break;
      continue;
    }
    // Static replicas run on their own: they meet once, each when done (a replica done first
    // waits there for the others, as long as they take); with refill, at every check.
    if (!o.adaptive && !o.refill && !replica->done()) continue;
    // Adaptive ones meet every check_every rounds; a replica with nothing left idles to the next.
    if (round % o.check_every != 0 && !replica->done()) continue;
    if (replica->done()) round = (round + o.check_every - 1) / o.check_every * o.check_every;
    int64_t pending = 0;
    RL_ASSIGN_OR_RETURN(std::vector<ReplicaLoad> loads,
                        ExchangeLoads(group, *replica, slots * tp, &pending, o.adaptive ? 0 : o.idle_timeout_ms));
    const int this_check = check++;
    bool all_done = pending == 0;
    for (const ReplicaLoad& l : loads) all_done = all_done && l.empty();
    // Every rank of a replica reports its loads; its first rank's stand for it (pending counted
    // once per replica is not needed: any pending prompt stops a decision or a refill).
    std::vector<ReplicaLoad> by_replica;
    for (int k = 0; k < n / tp; ++k) by_replica.push_back(loads[static_cast<size_t>(k * tp)]);
    int64_t added = 0;
    if (o.refill) {
      Collect(&out, tp, rank, &result.generations, &unshared);
      Result<std::vector<int64_t>> shared = TorchGuard("adaptive generate: share", [&]() {
        return ShareFinished(group, &unshared, &result.generations, records_routes, whole.config());
      });
      if (!shared.ok()) return shared.status();
      Status failed = Status::OK();
      for (int64_t i : *shared) {
        if (rank != 0 || !o.generate.on_finished || !failed.ok()) break;
        failed = o.generate.on_finished(static_cast<size_t>(i), result.generations[static_cast<size_t>(i)]);
      }
      int64_t active = 0;
      for (const ReplicaLoad& l : by_replica) active += static_cast<int64_t>(l.size());
      const int64_t free = pending == 0 ? n * slots - active : 0;
      RL_ASSIGN_OR_RETURN(added, TorchGuard("adaptive generate: refill", [&]() {
                            return TakeMorePrompts(group, o, whole.config(), free, failed, &all_prompts);
                          }));
      if (added < 0) {  // rank 0 returned its error above
        result.abandoned = true;
        break;
      }
      out.resize(all_prompts.size());
      result.generations.resize(all_prompts.size());
      if (added > 0) ++result.refills;
    }
    if (all_done && added == 0) break;
    if (added > 0) {
      // New work: back to narrower replicas first (DecideNarrow), then the prompts to the emptiest.
      const auto first = static_cast<int64_t>(all_prompts.size()) - added;
      Decision d;
      d.to = tp;
      if (tp > o.start_tp) {
        ReplicaLoad fresh;
        for (int64_t i = first; i < static_cast<int64_t>(all_prompts.size()); ++i) {
          const auto len = static_cast<int64_t>(all_prompts[static_cast<size_t>(i)].size());
          fresh.emplace_back(len, std::max<int64_t>(0, std::min(o.generate.max_new_tokens, whole.config().context() - len)));
        }
        std::optional<LatencyModel> calibrated;
        if (o.predictor != nullptr && o.calibration != nullptr) calibrated = o.predictor->Scaled(o.calibration->scale());
        d = DecideNarrow(o, calibrated ? &*calibrated : o.predictor, degrees, tp, n, by_replica, fresh);
        // Rank 0's decision is the group's (the calibrations of the ranks differ).
        at::Tensor decided = at::tensor(std::vector<int64_t>{d.to, d.estimate.recompute ? 1 : 0}, at::kLong);
        RL_RETURN_IF_ERROR(group.Broadcast(decided, 0));
        d.to = static_cast<int>(decided[0].item<int64_t>());
        d.estimate.recompute = decided[1].item<int64_t>() != 0;
        if (d.to > tp || (d.to != tp && std::find(degrees.begin(), degrees.end(), d.to) == degrees.end())) {
          return Status::Internal("adaptive generate: rank 0 chose tp " + std::to_string(d.to) + " from tp " +
                                  std::to_string(tp) + " for new prompts");
        }
        if (d.to == tp) {
          StayRecord stay;
          stay.round = round;
          stay.ts = WallSeconds();
          stay.tp = tp;
          stay.to = d.weighed;
          for (const ReplicaLoad& l : by_replica) stay.sequences += static_cast<int64_t>(l.size());
          stay.added = added;
          stay.predicted = d.estimate;
          result.stays.push_back(stay);
        }
      }
      std::vector<int64_t> held;
      if (d.to < tp) {
        SwitchRecord record;
        record.round = round;
        record.predicted = d.estimate;
        record.recompute = o.move == AdaptiveOptions::Move::kRecompute ||
                           (o.move == AdaptiveOptions::Move::kAuto && d.estimate.recompute);
        for (const ReplicaLoad& l : by_replica) record.sequences += static_cast<int64_t>(l.size());
        RL_ASSIGN_OR_RETURN(held, switch_to(d.to, MergeInto(by_replica, n / d.to, slots * d.to), record));
      } else {
        for (const ReplicaLoad& l : by_replica) held.push_back(static_cast<int64_t>(l.size()));
      }
      const std::vector<int> dealt = Deal(held, added);
      for (int64_t i = 0; i < added; ++i) {
        if (dealt[static_cast<size_t>(i)] == rank / tp) replica->AddPending(first + i);
      }
      continue;
    }
    if (!o.adaptive || pending > 0) continue;
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
    record.predicted = d.estimate;
    record.recompute = o.move == AdaptiveOptions::Move::kRecompute ||
                       (o.move == AdaptiveOptions::Move::kAuto && d.estimate.recompute);
    for (const ReplicaLoad& l : by_replica) record.sequences += static_cast<int64_t>(l.size());
    RL_RETURN_IF_ERROR(switch_to(d.to, MergeInto(by_replica, n / d.to, slots * d.to), record).status());
  }
  Collect(&out, tp, rank, &result.generations, &unshared);
  if (!result.abandoned) {
    RL_ASSIGN_OR_RETURN(std::vector<int64_t> shared, TorchGuard("adaptive generate: share", [&]() {
                          return ShareFinished(group, &unshared, &result.generations, records_routes, whole.config());
                        }));
    (void)shared;  // with refill every response was shared (and told) at the last check
  }
  result.seconds = Since(start);
  return result;
}

}  // namespace rl::dist
