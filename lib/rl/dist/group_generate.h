// A rollout group: N processes that generate as one rollout, the first (the leader) talking to
// rl-queue and the weight channel as any rollout does, the others (followers) lending their cores
// to its generation through tensor parallelism.
//
// For each batch the leader broadcasts the request (prompts, generation options, the weight
// version) and, when the version changed since the group last saw it, every parameter of the
// whole model; then all ranks run AdaptiveGenerate together: one replica over all ranks (static
// tensor parallelism of degree N) or, given a decode profile, adaptive (N replicas merging into
// one for the long tail). Only the leader holds leases, so a rank dying mid-batch (a switch
// included) fails the batch on the others with Unavailable: the leader gives the lease back (or
// dies with it, and the lease expires), and nothing is lost or doubled. The group is formed once
// per process start; under rl-watchdog every rank of a broken group restarts and it re-forms.
// On GPUs every rank's model is on its GPU (a follower whose device is not the same kind as the
// leader's refuses the request with InvalidArgument); the weights and the tensor-parallel sums
// go GPU to GPU through NCCL where the group has it (Group::OnNccl), through host memory
// otherwise. The requests, loads and responses are small host tensors on Gloo.
// Thread safety: one thread per rank.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "rl/core/status.h"
#include "rl/dist/group.h"
#include "rl/dist/latency_model.h"
#include "rl/model/generate.h"
#include "rl/model/transformer.h"

namespace rl::dist {

struct GroupGenerateOptions {
  const LatencyModel* predictor = nullptr;  // adaptive when set, else static degree N
  // Follows the machine from batch to batch (AdaptiveOptions::calibration); the leader's decides.
  LatencyCalibration* calibration = nullptr;
  // The leader's are the group's: they travel in each request, so followers need not be given them.
  int check_every = 8;     // rounds between the coordinator's switch checks
  double margin = 0.05;    // switch only when it is predicted this fraction faster
  int64_t idle_timeout_ms = 24LL * 3600 * 1000;  // a follower waiting for the next request
};

class GroupLeader {
 public:
  GroupLeader(Group* group, GroupGenerateOptions options) : group_(group), options_(options) {}
  // model::Generate over the group. `version` names the weights of `model`; they are sent when
  // the followers do not hold them yet.
  Result<std::vector<model::Generation>> Generate(const model::Transformer& model, uint64_t version,
                                                  const std::vector<std::vector<int64_t>>& prompts,
                                                  const model::GenerateOptions& options,
                                                  model::GenerateStats* stats);
  // Tells the followers to return OK. Best effort (they may be gone).
  Status Stop();

 private:
  Group* group_;
  GroupGenerateOptions options_;
  bool sent_any_ = false;
  uint64_t sent_version_ = 0;
};

// A follower's loop: serves the leader's requests with `whole` (its weights replaced by those the
// leader sends) until the leader says stop (OK) or the group breaks (Unavailable).
Status RunGroupFollower(Group& group, model::Transformer whole, const GroupGenerateOptions& options);

}  // namespace rl::dist
