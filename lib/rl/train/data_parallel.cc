// Data-parallel GRPO helpers (data_parallel.h).
#include "rl/train/data_parallel.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <charconv>


namespace rl::train {

Result<std::vector<int64_t>> GatherCounts(dist::Group& group, int64_t value) {
  std::vector<at::Tensor> all;
  RL_RETURN_IF_ERROR(group.AllGather(at::full({1}, value, at::kLong), &all));
  std::vector<int64_t> out;
  for (const at::Tensor& t : all) out.push_back(t.item<int64_t>());
  return out;
}

Result<std::vector<uint64_t>> GatherIndices(dist::Group& group, const std::vector<uint64_t>& indices) {
  RL_ASSIGN_OR_RETURN(std::vector<int64_t> counts, GatherCounts(group, static_cast<int64_t>(indices.size())));
  const int64_t widest = std::max<int64_t>(1, *std::max_element(counts.begin(), counts.end()));
  at::Tensor mine = at::zeros({widest}, at::kLong);
  for (size_t i = 0; i < indices.size(); ++i) mine[static_cast<int64_t>(i)] = static_cast<int64_t>(indices[i]);
  std::vector<at::Tensor> all;
  RL_RETURN_IF_ERROR(group.AllGather(mine, &all));
  std::vector<uint64_t> out;
  for (size_t r = 0; r < all.size(); ++r) {
    auto a = all[r].accessor<int64_t, 1>();
    for (int64_t i = 0; i < counts[r]; ++i) out.push_back(static_cast<uint64_t>(a[i]));
  }
  return out;
}

Result<std::vector<double>> SumOverRanks(dist::Group& group, std::vector<double> values) {
  at::Tensor t = at::from_blob(values.data(), {static_cast<int64_t>(values.size())}, at::kDouble).clone();
  RL_RETURN_IF_ERROR(group.AllReduceSum(t));
  auto a = t.accessor<double, 1>();
  for (size_t i = 0; i < values.size(); ++i) values[i] = a[static_cast<int64_t>(i)];
  return values;
}

int64_t GroupsToGiveBack(const std::vector<int64_t>& got, int64_t excess, int rank) {
  for (int r = static_cast<int>(got.size()) - 1; r >= 0 && excess > 0; --r) {
    const int64_t give = std::min(excess, got[static_cast<size_t>(r)]);
    if (r == rank) return give;
    excess -= give;
  }
  return 0;
}

namespace {

Result<int> Integer(const std::string& name, const std::string& text) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return Status::InvalidArgument(name + " must be an integer, not '" + text + "'");
  }
  return v;
}

const std::string* Find(const std::map<std::string, std::string>& env, const char* key) {
  auto it = env.find(key);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

}  // namespace

Result<RankPlace> ResolveRankPlace(const RankPlace& flags, bool world_given, bool rank_given,
                                   const std::map<std::string, std::string>& env) {
  RankPlace p = flags;
  if (!world_given) {
    if (const std::string* w = Find(env, "WORLD_SIZE")) {
      RL_ASSIGN_OR_RETURN(p.world, Integer("WORLD_SIZE", *w));
    } else if (const std::string* n = Find(env, "SLURM_NTASKS")) {
      RL_ASSIGN_OR_RETURN(p.world, Integer("SLURM_NTASKS", *n));
    }
  }
  if (!rank_given) {
    if (const std::string* r = Find(env, "RANK")) {
      RL_ASSIGN_OR_RETURN(p.rank, Integer("RANK", *r));
    } else if (const std::string* r2 = Find(env, "SLURM_PROCID")) {
      RL_ASSIGN_OR_RETURN(p.rank, Integer("SLURM_PROCID", *r2));
    }
  }
  if (const std::string* l = Find(env, "LOCAL_RANK")) {
    RL_ASSIGN_OR_RETURN(p.local_rank, Integer("LOCAL_RANK", *l));
  } else if (const std::string* l2 = Find(env, "SLURM_LOCALID")) {
    RL_ASSIGN_OR_RETURN(p.local_rank, Integer("SLURM_LOCALID", *l2));
  }
  if (p.local_rank < -1 || p.local_rank > 127) {
    return Status::InvalidArgument("LOCAL_RANK must be 0 to 127, not " + std::to_string(p.local_rank));
  }
  if (p.rendezvous.empty()) {
    const std::string* addr = Find(env, "MASTER_ADDR");
    const std::string* port = Find(env, "MASTER_PORT");
    if (addr && port) p.rendezvous = *addr + ":" + *port;
  }
  if (p.world < 1 || p.world > 1024) {
    return Status::InvalidArgument("--world must be 1 to 1024, not " + std::to_string(p.world));
  }
  if (p.rank < 0 || p.rank >= p.world) {
    return Status::InvalidArgument("--rank " + std::to_string(p.rank) + " is outside the world of " +
                                   std::to_string(p.world) + " (ranks 0.." + std::to_string(p.world - 1) + ")");
  }
  if (p.world > 1) {
    const size_t colon = p.rendezvous.rfind(':');
    if (p.rendezvous.empty()) {
      return Status::InvalidArgument("--world " + std::to_string(p.world) +
                                     " needs --rendezvous HOST:PORT (or MASTER_ADDR and MASTER_PORT)");
    }
    const bool port = colon != std::string::npos && Integer("the port", p.rendezvous.substr(colon + 1)).ok();
    if (colon == 0 || !port) {
      return Status::InvalidArgument("--rendezvous must be HOST:PORT, not '" + p.rendezvous + "'");
    }
  }
  return p;
}

}  // namespace rl::train
