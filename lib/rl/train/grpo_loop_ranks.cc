// The data-parallel half of the GRPO loop (grpo_loop.h, world > 1): forming the group, agreeing
// on the checkpoint to resume from, and collecting a step's batch as token-balanced parts.
#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>

#include "rl/model/device.h"
#include "rl/train/data_parallel.h"
#include "rl/train/grpo_loop_state.h"

namespace rl::train::loop {

Status GrpoLoop::JoinGroup() {
  dist::GroupOptions g;
  g.endpoint = o_.rendezvous;
  g.rank = o_.rank;
  g.size = o_.world;
  g.name = "rl-train/" + o_.group_epoch;
  g.timeout_ms = static_cast<int>(o_.group_timeout_s * 1000);
  if (o_.grpo.device.is_cuda()) g.gpu = o_.grpo.device.has_index() ? o_.grpo.device.index() : 0;
  spdlog::info("rank {} of {}: joining the trainer group '{}' at {}", o_.rank, o_.world, g.name, g.endpoint);
  auto joined = dist::Group::Join(g);
  if (!joined.ok()) {
    return joined.status().WithContext("the trainer group at " + o_.rendezvous + " did not form");
  }
  group_.emplace(std::move(*joined));
  events_.Emit("group", {{"rank", o_.rank}, {"world", o_.world}, {"name", g.name},
                         {"device", model::DeviceName(o_.grpo.device)}, {"nccl", group_->OnNccl()}});
  return Status::OK();
}

// Every rank resumes from the checkpoint rank 0 found (they share the checkpoint directory).
Status GrpoLoop::AgreeOnStart(const std::optional<Checkpoint>& ckpt) {
  at::Tensor step = at::full({1}, ckpt ? ckpt->step : int64_t{-1}, at::kLong);
  RL_RETURN_IF_ERROR(group_->Broadcast(step, 0));
  const int64_t want = step.item<int64_t>(), mine = ckpt ? ckpt->step : -1;
  if (want != mine) {
    return Status::Config("rank 0 resumes from checkpoint step " + std::to_string(want) + " but rank " +
                          std::to_string(o_.rank) + " finds step " + std::to_string(mine) + " in " + o_.checkpoint_dir +
                          ": the ranks need one shared --checkpoint-dir");
  }
  return Status::OK();
}

namespace {

// FNV-1a, 63 bits (the gather carries int64): `h` takes bytes as they come, Fingerprint a whole string.
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  int64_t Value() const { return static_cast<int64_t>(h >> 1); }
};

int64_t Fingerprint(const std::string& text) {
  Fnv f;
  f.Add(text.data(), text.size());
  return f.Value();
}

// The SFT mix's examples as encoded (token ids and loss masks), not the --sft-data path: each
// machine may keep the file elsewhere, and the same path may hold another file on another
// machine, or be encoded by another tokenizer.
std::string SftExamplesDigest(const GrpoOptions& g) {
  if (!g.sft_examples) return "none";
  Fnv f;  // streamed: hf-grpo's file is 100,000 examples, no copy of them is needed
  auto add = [&f](const std::vector<int64_t>& v) {
    const uint64_t n = v.size();  // the length first, so that no two lists hash alike by moving a boundary
    f.Add(&n, sizeof n);
    f.Add(v.data(), v.size() * sizeof(int64_t));
  };
  for (const Sample& s : *g.sft_examples) {
    add(s.prompt_ids);
    add(s.response_ids);
    add(s.loss_mask);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(f.Value()));
  return std::to_string(g.sft_examples->size()) + " examples, fingerprint " + hex;
}

// The flags every rank must share, by name: one rank training with another --lr or batch size
// would still all-reduce, silently, into a step nobody asked for.
std::vector<std::pair<const char*, std::string>> FlagsToAgreeOn(const GrpoLoopOptions& o) {
  const GrpoOptions& g = o.grpo;
  auto num = [](double v) { return std::to_string(v); };
  std::string freeze;
  for (const std::string& f : g.freeze) freeze += f + ",";
  // Addresses (--connect, --checkpoint-dir) may be spelled differently on each machine: the
  // checkpoint is compared by AgreeOnStart instead.
  return {{"--group-size", num(o.group_size)},
          {"--prompts-per-step", num(o.prompts_per_step)},
          {"--max-steps", num(o.max_steps)},
          {"--max-staleness", num(o.staleness)},
          {"--start-fraction", num(o.start_fraction)},
          {"--dynamic-sampling", num(o.dynamic_sampling)},
          {"--max-redraws", num(o.max_redraws)},
          {"--stale-rows", num(o.regenerate_stale)},
          {"--seed", num(static_cast<double>(o.seed))},
          {"--lr", num(g.schedule.lr)},
          {"--warmup-steps", num(g.schedule.warmup_steps)},
          {"--lr-decay", num(static_cast<int>(g.schedule.decay))},
          {"--min-lr-ratio", num(g.schedule.min_ratio)},
          {"--clip", num(g.clip)},
          {"--kl-coef", num(g.kl_coef)},
          {"--kl-estimator", num(static_cast<int>(g.kl_estimator))},
          {"--sft-coef", num(g.sft_coef)},
          {"--sft-batch", num(static_cast<double>(g.sft_batch))},
          {"--sft-data", SftExamplesDigest(g)},
          {"--grad-clip", num(g.grad_clip)},
          {"--loss-norm", num(static_cast<int>(g.norm))},
          {"--loss-norm-constant", num(g.norm_constant)},
          {"--temperature", num(g.temperature)},
          {"--correction", num(static_cast<int>(g.off.kind))},
          {"--correction-cap", num(g.off.cap)},
          {"--advantage", num(static_cast<int>(g.advantage))},
          {"--minibatches", num(static_cast<double>(g.minibatches))},
          {"--epochs", num(static_cast<double>(g.epochs))},
          {"--gamma", num(g.gamma)},
          {"--lambda", num(g.lambda)},
          {"--value-clip", num(g.value_clip)},
          {"--critic-lr", num(g.critic_lr)},
          // The critic's config.json as read, and the frozen parameters: another on one rank
          // would make its gradient bucket another size.
          {"--critic-config", o.critic_config},
          {"--freeze", freeze}};
}

}  // namespace

// One gather of a fingerprint of all the flags; only when they differ, one per flag to name it.
Status GrpoLoop::AgreeOnFlags() {
  const auto flags = FlagsToAgreeOn(o_);
  std::string all;
  for (const auto& [name, value] : flags) all += std::string(name) + "=" + value + "\n";
  RL_ASSIGN_OR_RETURN(std::vector<int64_t> prints, GatherCounts(*group_, Fingerprint(all)));
  if (std::all_of(prints.begin(), prints.end(), [&](int64_t p) { return p == prints[0]; })) return Status::OK();
  for (const auto& [name, value] : flags) {
    RL_ASSIGN_OR_RETURN(std::vector<int64_t> got, GatherCounts(*group_, Fingerprint(value)));
    for (size_t r = 1; r < got.size(); ++r) {
      if (got[r] != got[0]) {
        return Status::Config("rank " + std::to_string(r) + " was given another " + name + " than rank 0" +
                              (o_.rank == 0 || static_cast<int>(r) == o_.rank ? " (this rank's: " + value + ")" : "") +
                              ": the ranks of a trainer group need the same training flags");
      }
    }
  }
  return Status::Config("the ranks of the trainer group were given different training flags");
}

Result<bool> GrpoLoop::AnyRankStopped() {
  RL_ASSIGN_OR_RETURN(std::vector<double> any, SumOverRanks(*group_, {stop_ ? 1.0 : 0.0}));
  group_stopped_ = any[0] > 0;
  return group_stopped_;
}

// Rows go back to the queue, ready for the next get (nack).
Status GrpoLoop::GiveBack(const std::vector<Group>& groups, const char* why) {
  std::vector<uint64_t> rows;
  for (const Group& g : groups) {
    for (const Sample& s : g.samples) rows.push_back(s.index);
  }
  if (rows.empty()) return Status::OK();
  spdlog::debug("rank {}: giving back {} rows ({})", o_.rank, rows.size(), why);
  events_.Emit("give-back", {{"rows", rows.size()}, {"why", why}});
  return client_.Nack(kTrainTask, 0, rows).status();
}

// Data-parallel: round after round, every rank takes its part of a token-balanced round of groups
// (the queue deals a round to `world` parts; each rank's get plans one or claims a part another
// rank's get reserved) and the ranks agree how many groups the step has. Groups past the step's
// size, and stale rows of a part reserved in an earlier round, go back to the queue.
Status GrpoLoop::CollectRanks(std::vector<uint64_t>* consumed, int64_t* samples) {
  const int64_t need = o_.prompts_per_step, world = o_.world;
  const int64_t start_groups = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(o_.start_fraction * need)));
  const int64_t min_version = static_cast<int64_t>(version_) - o_.staleness;
  std::vector<Group> pending;
  int64_t have = 0, dropped_rows = 0, mine = 0;
  bool out_of_redraws = false;
  ResetStep();
  while (have < need) {
    RL_RETURN_IF_ERROR(Feed(min_version));
    queue::GetRequest req = TrainGet((need - have + world - 1) / world * o_.group_size, min_version);  // per part
    req.balance = "response_ids";
    req.parts = static_cast<uint32_t>(world);
    // The queue serves a balanced get early once min x parts rows are ready: with min one group,
    // a step that lacked one group waited the whole get wait for a second that never came (0.19 s
    // a step with two ranks). One group is enough to deal a round (up to group_size ranks); the
    // ranks whose parts came out empty are answered at once (rl-protocol(7), empty parts).
    req.min = static_cast<uint32_t>(std::max<int64_t>(1, o_.group_size / world));
    RL_ASSIGN_OR_RETURN(queue::GetReply reply, client_.Get(req));
    std::vector<Group> fresh, stale;
    RL_ASSIGN_OR_RETURN(std::vector<Group> groups, TakeGroups(reply));
    // A part reserved in an earlier round is handed out as it was: its rows may have gone stale.
    for (Group& g : groups) {
      const bool old = std::any_of(g.samples.begin(), g.samples.end(),
                                   [&](const Sample& x) { return x.version < min_version; });
      (old ? stale : fresh).push_back(std::move(g));
    }
    RL_RETURN_IF_ERROR(GiveBack(stale, "stale"));
    RL_ASSIGN_OR_RETURN(std::vector<int64_t> got, GatherCounts(*group_, static_cast<int64_t>(fresh.size())));
    int64_t total = 0;
    for (int64_t n : got) total += n;
    const int64_t excess = std::max<int64_t>(0, have + total - need);
    const int64_t give = GroupsToGiveBack(got, excess, o_.rank);
    std::vector<Group> extra(fresh.end() - give, fresh.end());
    fresh.resize(fresh.size() - static_cast<size_t>(give));
    RL_RETURN_IF_ERROR(GiveBack(extra, "past the step's batch"));
    RL_ASSIGN_OR_RETURN(std::vector<double> sums,
                        SumOverRanks(*group_, {static_cast<double>(reply.dropped), static_cast<double>(reply.uniform),
                                               reply.uniform_sum, stop_ ? 1.0 : 0.0}));
    have += total - excess;
    dropped_rows += static_cast<int64_t>(sums[0]);
    uniform_rows_ += static_cast<uint64_t>(sums[1]);
    uniform_sum_ += sums[2];
    for (const Group& g : fresh) {
      for (const Sample& x : g.samples) consumed->push_back(x.index);
      mine += static_cast<int64_t>(g.samples.size());
    }
    pending.insert(pending.end(), std::make_move_iterator(fresh.begin()), std::make_move_iterator(fresh.end()));
    if (sums[3] > 0) {  // a rank was asked to stop: all leave now, the rows go back
      group_stopped_ = true;
      if (!consumed->empty()) (void)client_.Nack(kTrainTask, 0, *consumed);
      return Status::Timeout("stopped");
    }
    if (dropped_rows > o_.max_redraws * o_.group_size && !out_of_redraws) {
      out_of_redraws = true;  // every rank sees the same sums, so every rank comes here
      RL_RETURN_IF_ERROR(RedrawLimit(dropped_rows / o_.group_size, have * o_.group_size, *consumed));
    }
    const bool started = have >= start_groups || out_of_redraws;
    if (started) RL_RETURN_IF_ERROR(TrainIfEnough(&pending, have >= need || out_of_redraws));
    if (out_of_redraws) break;
  }
  *samples = mine;
  return Status::OK();
}

}  // namespace rl::train::loop
