// A rollout group that re-forms in place: when a rank dies, the others keep their process, their
// model and their connection to the rendezvous, and only the dead rank is started again; the group
// then forms anew (its next epoch) with the new rank. Meanwhile the leader generates alone (it
// holds the whole model), so the rollout slows down but never stops.
//
// Protocol, over the rendezvous store rank 0 hosts for its process's life (Rendezvous); every key
// is under the group's name, "<name>/":
//   nonce        set once by rank 0 when it starts hosting: a follower that finds another nonce
//                than it knew is talking to a restarted rank 0 (a fresh store, epochs from 1).
//   epoch        the epoch rank 0 forms now (1, 2, ...); the group of epoch E is the process
//                group named "<name>/e<E>" (Group::Join over the same store).
//   closed       the last epoch that is over for joining (formed, or failed to): a follower that
//                first meets this rank 0 joins only a later one, never a group already running.
//   wait/<r>     follower r is alive and waits to join the next epoch: set when it starts or its
//                group broke, deleted just before it joins. Rank 0 forms epoch E+1 once every
//                follower waits; a follower that waits while rank 0 still holds a group means its
//                rank restarted (the old process died), so rank 0 drops that group first.
//   stop         the leader stops: waiting followers return OK.
// A group breaks when a collective fails (a peer's connection closed, or a peer hung past the
// group's timeout). Each rank then drops the group, which closes its connections, so the ranks
// still blocked in it fail too and come back to wait. Rank 0 checks (Poll) between batches only.
// Thread safety: one thread per rank.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "rl/core/status.h"
#include "rl/dist/group.h"

namespace rl::dist {

// What rank 0 reports as its group changes: "formed" (epoch, ranks) or "lost" (epoch, why).
struct GroupChange {
  const char* what;  // "formed" or "lost"
  int64_t epoch;
  int ranks;
  bool nccl;        // "formed": the group's GPU tensors go through NCCL
  std::string why;  // "lost": the failure or the restarted rank
};

class GroupHost {
 public:
  // Hosts the rendezvous at base.endpoint and forms epoch 1, waiting for every follower up to
  // base.timeout_ms (as Group::Join does). base.name is the group's name; base.rank must be 0.
  static Result<std::unique_ptr<GroupHost>> Start(const GroupOptions& base,
                                                  std::function<void(const GroupChange&)> on_change = {});

  // The current group, or null while it is broken and not every follower is back.
  Group* group() { return group_ ? &*group_ : nullptr; }
  int64_t epoch() const { return epoch_; }

  // Between batches: where a restarted follower waits while a group is held, drops that group;
  // where no group is held and every follower waits, forms the next epoch (waiting up to the
  // group's timeout for them to join; a failure leaves no group). True when a group was formed:
  // its followers hold no weights yet. Unavailable only when the rendezvous itself fails.
  Result<bool> Poll();
  // The group failed with `why`: dropped (its connections close, so followers blocked in it fail).
  void Drop(const std::string& why);
  // Tells waiting followers to return OK (those in a group get GroupLeader::Stop), then waits up
  // to wait_ms for them to have read it. Best effort.
  void Stop(int64_t wait_ms = 1000);

 private:
  GroupHost(GroupOptions base, Rendezvous rendezvous, std::function<void(const GroupChange&)> on_change)
      : base_(std::move(base)), rendezvous_(std::move(rendezvous)), on_change_(std::move(on_change)) {}
  Status Form();
  std::string Key(const std::string& k) const { return base_.name + "/" + k; }

  GroupOptions base_;
  Rendezvous rendezvous_;
  std::function<void(const GroupChange&)> on_change_;
  std::optional<Group> group_;
  int64_t epoch_ = 0;
};

// A follower's side: joins each epoch rank 0 forms and runs serve(group) on it. serve returning
// OK (the leader said stop) ends the loop with OK; Unavailable (the group broke) drops the group
// and waits for the next epoch; another error ends the loop with it. Also OK when rank 0 says
// stop while this rank waits. Unavailable when rank 0's rendezvous was unreachable for
// rejoin_timeout_ms (rank 0 gone and not back); a rank 0 that answers is waited for as long as it
// runs. A restarted rank 0 is found by its new nonce and joined from its epoch 1.
Status FollowGroup(const GroupOptions& base, int64_t rejoin_timeout_ms,
                   const std::function<Status(Group&)>& serve);

}  // namespace rl::dist
