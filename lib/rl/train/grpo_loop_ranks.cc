// The data-parallel half of the GRPO loop (grpo_loop.h, world > 1): forming the group, agreeing
// on the checkpoint to resume from, and collecting a step's batch as token-balanced parts.
#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <iterator>

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
  spdlog::info("rank {} of {}: joining the trainer group '{}' at {}", o_.rank, o_.world, g.name, g.endpoint);
  auto joined = dist::Group::Join(g);
  if (!joined.ok()) {
    return joined.status().WithContext("the trainer group at " + o_.rendezvous + " did not form");
  }
  group_.emplace(std::move(*joined));
  events_.Emit("group", {{"rank", o_.rank}, {"world", o_.world}, {"name", g.name}});
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
  step_groups_.clear();
  train_s_ = 0;
  token_age_ = {};
  uniform_rows_ = 0;
  uniform_sum_ = 0;
  Phase("waiting-for-data");
  while (have < need) {
    if (feeder_) {
      feeder_->set_min_version(std::max<int64_t>(0, min_version));
      RL_RETURN_IF_ERROR(feeder_->FeedTo(o_.prompts_per_step * (1 + o_.staleness), o_.prompts_per_step).status());
    }
    queue::GetRequest req;
    req.task = kTrainTask;
    req.count = static_cast<uint32_t>((need - have + world - 1) / world * o_.group_size);  // per part
    req.min = static_cast<uint32_t>(o_.group_size);
    req.balance = "response_ids";
    req.parts = static_cast<uint32_t>(world);
    req.lease_ms = static_cast<int64_t>(o_.lease_s * 1000);
    req.wait_ms = kGetWaitMs;
    req.holder = Holder();
    req.groups = true;
    req.also = {"loss_mask", "token_versions"};
    req.has_min_version = true;
    req.min_version = min_version;
    req.regenerate_stale = o_.regenerate_stale;
    if (o_.dynamic_sampling) req.drop_uniform = "reward";
    RL_ASSIGN_OR_RETURN(queue::GetReply reply, client_.Get(req));
    std::vector<Group> fresh, stale;
    auto groups = GroupsOf(reply.rows);
    if (!groups.ok()) {
      std::vector<uint64_t> bad;
      for (const auto& r : reply.rows) bad.push_back(r.index);
      spdlog::error("dropping {} rows of task train: {}", bad.size(), groups.status().message());
      events_.Emit("bad-rows", {{"rows", bad.size()}, {"error", groups.status().message()}});
      RL_RETURN_IF_ERROR(client_.Ack(kTrainTask, reply.lease, bad).status());
    } else {
      // A part reserved in an earlier round is handed out as it was: its rows may have gone stale.
      for (Group& g : *groups) {
        const bool old = std::any_of(g.samples.begin(), g.samples.end(),
                                     [&](const Sample& x) { return x.version < min_version; });
        (old ? stale : fresh).push_back(std::move(g));
      }
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
    int64_t pending_rows = 0;
    for (const Group& g : pending) pending_rows += static_cast<int64_t>(g.samples.size());
    const bool started = have >= start_groups || out_of_redraws;
    if (started && !pending.empty() && (pending_rows >= o_.grpo.micro_batch || have >= need || out_of_redraws)) {
      TrainPending(&pending);
      RL_RETURN_IF_ERROR(train_status_);
    }
    if (out_of_redraws) break;
  }
  *samples = mine;
  return Status::OK();
}

}  // namespace rl::train::loop
