#include "rl/dist/reforming_group.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

namespace rl::dist {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kPollEvery = std::chrono::milliseconds(50);    // a waiting follower reads the store
constexpr auto kRetryEvery = std::chrono::milliseconds(200);  // and looks for a rank 0 that is gone

int64_t MsLeft(Clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
}

std::string FormatSeconds(int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(ms) / 1000);
  return buf;
}

std::string EpochName(const std::string& name, int64_t epoch) { return name + "/e" + std::to_string(epoch); }

// An epoch as the store holds it (decimal); 0 for anything else, which no follower joins.
int64_t ParseEpoch(const std::string& s) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoll(s);
}

}  // namespace

Result<std::unique_ptr<GroupHost>> GroupHost::Start(const GroupOptions& base,
                                                    std::function<void(const GroupChange&)> on_change) {
  if (base.rank != 0) return Status::InvalidArgument("rollout group: only rank 0 hosts the rendezvous");
  RL_ASSIGN_OR_RETURN(Rendezvous rendezvous, Rendezvous::Open(base.endpoint, /*host=*/true, base.timeout_ms));
  std::unique_ptr<GroupHost> host(new GroupHost(base, std::move(rendezvous), std::move(on_change)));
  // A nonce of this store's life: a follower of a rank 0 that restarted must not wait for an
  // epoch beyond the old store's.
  std::random_device device;
  const uint64_t nonce = (static_cast<uint64_t>(device()) << 32) ^ device() ^
                         static_cast<uint64_t>(Clock::now().time_since_epoch().count()) ^ ::getpid();
  RL_RETURN_IF_ERROR(host->rendezvous_.Set(host->Key("nonce"), std::to_string(nonce)));
  if (base.size > 1) RL_RETURN_IF_ERROR(host->Form());
  return host;
}

Status GroupHost::Form() {
  ++epoch_;
  RL_RETURN_IF_ERROR(rendezvous_.Set(Key("epoch"), std::to_string(epoch_)));
  GroupOptions o = base_;
  o.name = EpochName(base_.name, epoch_);
  auto joined = Group::Join(o, rendezvous_);
  // Formed or failed, this epoch is over for joining: a follower that arrives from now on waits
  // for the next (were it to join this one, it would dial ranks that moved on).
  RL_RETURN_IF_ERROR(rendezvous_.Set(Key("closed"), std::to_string(epoch_)));
  if (!joined.ok()) return joined.status();
  group_.emplace(std::move(*joined));
  if (on_change_) on_change_({"formed", epoch_, base_.size, group_->OnNccl(), ""});
  return Status::OK();
}

Result<bool> GroupHost::Poll() {
  if (base_.size == 1) return false;
  std::vector<int> waiting;
  for (int r = 1; r < base_.size; ++r) {
    RL_ASSIGN_OR_RETURN(auto found, rendezvous_.Find(Key("wait/" + std::to_string(r))));
    if (found) waiting.push_back(r);
  }
  if (group_ && !waiting.empty()) {
    // A follower of the group held waits to join: its rank restarted, so the group is broken even
    // where no collective has failed yet.
    Drop("rank " + std::to_string(waiting[0]) + " restarted");
  }
  if (group_ || static_cast<int>(waiting.size()) != base_.size - 1) return false;
  spdlog::info("rollout group: every rank waits; forming epoch {}", epoch_ + 1);
  if (Status s = Form(); !s.ok()) {
    spdlog::warn("rollout group: epoch {} did not form: {}", epoch_, s.ToString());
    group_.reset();
    if (on_change_) on_change_({"lost", epoch_, base_.size, false, s.ToString()});
    return false;
  }
  return true;
}

void GroupHost::Drop(const std::string& why) {
  if (!group_) return;
  spdlog::warn("rollout group: epoch {} broke ({}); generating alone until every rank is back", epoch_, why);
  group_.reset();  // closes its connections: followers blocked in it fail and come back
  if (on_change_) on_change_({"lost", epoch_, base_.size, false, why});
}

void GroupHost::Stop(int64_t wait_ms) {
  if (base_.size == 1 || !rendezvous_.Set(Key("stop"), "1").ok()) return;
  const auto deadline = Clock::now() + std::chrono::milliseconds(wait_ms);
  while (MsLeft(deadline) > 0) {
    bool any = false;
    for (int r = 1; r < base_.size && !any; ++r) {
      auto found = rendezvous_.Find(Key("wait/" + std::to_string(r)));
      any = !found.ok() || found->has_value();
    }
    if (!any) return;
    std::this_thread::sleep_for(kPollEvery / 2);
  }
}

Status FollowGroup(const GroupOptions& base, int64_t rejoin_timeout_ms,
                   const std::function<Status(Group&)>& serve) {
  if (base.rank < 1 || base.rank >= base.size) {
    return Status::InvalidArgument("rollout group: a follower's rank is in [1, ranks)");
  }
  const std::string prefix = base.name + "/";
  const std::string wait_key = prefix + "wait/" + std::to_string(base.rank);
  std::optional<Rendezvous> store;
  std::string nonce;
  int64_t done = 0;  // the last epoch of this store this rank was in (or failed to join)
  bool waiting = false;
  auto deadline = Clock::now() + std::chrono::milliseconds(rejoin_timeout_ms);
  Status last_error = Status::Unavailable("no leader at " + base.endpoint);
  bool stopped = false;  // the leader said stop
  for (;;) {
    if (MsLeft(deadline) <= 0) {
      return Status::Unavailable("rollout group: rank 0 unreachable for " + FormatSeconds(rejoin_timeout_ms) + " s (" +
                                 last_error.message() + ")");
    }
    // Where the store is gone (rank 0 died), connect again: a restarted rank 0 hosts a new one.
    if (!store) {
      if (!Rendezvous::Listening(base.endpoint, 1000)) {
        last_error = Status::Unavailable("nothing listens at " + base.endpoint);
        std::this_thread::sleep_for(kRetryEvery);
        continue;
      }
      auto opened = Rendezvous::Open(base.endpoint, /*host=*/false, base.timeout_ms);
      if (!opened.ok()) {
        last_error = opened.status();
        std::this_thread::sleep_for(kRetryEvery);
        continue;
      }
      store.emplace(std::move(*opened));
      waiting = false;
    }
    Status s = [&]() -> Status {
      RL_ASSIGN_OR_RETURN(auto found_nonce, store->Find(prefix + "nonce"));
      if (!found_nonce) return Status::OK();  // rank 0 is starting: not yet
      if (*found_nonce != nonce) {  // a rank 0 not met before: join from the epoch it forms now
        nonce = *found_nonce;
        RL_ASSIGN_OR_RETURN(auto closed, store->Find(prefix + "closed"));
        done = closed ? ParseEpoch(*closed) : 0;
      }
      if (!waiting) {
        RL_RETURN_IF_ERROR(store->Set(wait_key, std::to_string(::getpid())));
        waiting = true;
      }
      RL_ASSIGN_OR_RETURN(auto stop, store->Find(prefix + "stop"));
      if (stop) {
        (void)store->Delete(wait_key);
        stopped = true;
        return Status::OK();
      }
      RL_ASSIGN_OR_RETURN(auto found_epoch, store->Find(prefix + "epoch"));
      const int64_t epoch = found_epoch ? ParseEpoch(*found_epoch) : 0;
      if (epoch <= done) return Status::OK();
      // Joining: no longer waiting (rank 0 sees a waiting rank in a held group as a restart).
      RL_RETURN_IF_ERROR(store->Delete(wait_key));
      waiting = false;
      done = epoch;
      GroupOptions o = base;
      o.name = EpochName(base.name, epoch);
      auto joined = Group::Join(o, *store);
      if (!joined.ok()) {
        if (joined.status().code() != Code::kUnavailable && joined.status().code() != Code::kTimeout) {
          return joined.status();
        }
        spdlog::warn("rollout group: rank {} could not join epoch {}: {}", base.rank, epoch, joined.status().ToString());
        return Status::OK();
      }
      spdlog::info("rollout group: rank {} joined epoch {}", base.rank, epoch);
      Status served = serve(*joined);
      if (served.ok()) {
        stopped = true;
        return Status::OK();
      }
      if (served.code() != Code::kUnavailable) return served;
      spdlog::warn("rollout group: epoch {} broke ({}); rank {} waits for the next", epoch, served.message(),
                   base.rank);
      return Status::OK();
    }();
    if (stopped) return Status::OK();
    if (s.code() == Code::kUnavailable) {  // the store failed: its server (rank 0) is gone
      last_error = s;
      store.reset();
      continue;
    }
    if (!s.ok()) return s;
    // Only a rank 0 that is gone (its store with it) for so long ends the wait: a live one forms
    // the next epoch once every rank is back.
    deadline = Clock::now() + std::chrono::milliseconds(rejoin_timeout_ms);
    std::this_thread::sleep_for(kPollEvery);
  }
}

}  // namespace rl::dist
