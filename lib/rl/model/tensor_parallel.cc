#include "rl/model/tensor_parallel.h"

#include <ATen/ATen.h>

#include "rl/model/torch_guard.h"

namespace rl::model {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Mixtral's expert projection `proj` (w1, w2, w3): block_sparse_moe.experts.{e}.{proj}.weight.
bool IsMixtralExpert(const std::string& name, const char* proj) {
  return name.find(".experts.") != std::string::npos && EndsWith(name, std::string(".") + proj + ".weight");
}

}  // namespace

Status CheckTensorParallel(const ModelConfig& c, int64_t size) {
  if (size < 1) return Status::Config("tensor parallel: the size must be >= 1");
  const auto check = [&](int64_t n, const char* what) -> Status {
    if (n % size == 0) return Status::OK();
    return Status::Config("tensor parallel: " + std::string(what) + " (" + std::to_string(n) +
                          ") is not divisible by the tensor-parallel size " + std::to_string(size));
  };
  RL_RETURN_IF_ERROR(check(c.num_attention_heads, "num_attention_heads"));
  RL_RETURN_IF_ERROR(check(c.kv_heads(), "num_key_value_heads"));
  if (c.moe.num_experts > 0) RL_RETURN_IF_ERROR(check(c.moe.moe_intermediate_size, "moe_intermediate_size"));
  return check(c.intermediate_size, "intermediate_size");
}

int SplitDim(const std::string& name) {
  for (const char* rows : {"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias",
                           "v_proj.weight", "v_proj.bias", "gate_proj.weight", "up_proj.weight"}) {
    if (EndsWith(name, rows)) return 0;
  }
  if (IsMixtralExpert(name, "w1") || IsMixtralExpert(name, "w3")) return 0;
  if (EndsWith(name, "o_proj.weight") || EndsWith(name, "down_proj.weight") || IsMixtralExpert(name, "w2")) {
    return 1;
  }
  return -1;
}

at::Tensor ShardTensor(const std::string& name, const at::Tensor& full, int64_t rank, int64_t size) {
  if (size == 1) return full;
  const int dim = SplitDim(name);
  if (dim >= 0) {
    const int64_t part = full.size(dim) / size;
    return full.narrow(dim, rank * part, part).contiguous();
  }
  // The partial outputs of o_proj are summed: its bias must enter the sum once.
  if (EndsWith(name, "o_proj.bias") && rank != 0) return at::zeros_like(full);
  return full;
}

Result<NamedTensors> ShardNamedTensors(const NamedTensors& full, const ModelConfig& config,
                                       int64_t rank, int64_t size) {
  RL_RETURN_IF_ERROR(CheckTensorParallel(config, size));
  if (rank < 0 || rank >= size) {
    return Status::InvalidArgument("tensor parallel: rank " + std::to_string(rank) +
                                   " outside [0, " + std::to_string(size) + ")");
  }
  return TorchGuard("tensor parallel: shard", [&]() -> Result<NamedTensors> {
    NamedTensors out;
    out.reserve(full.size());
    for (const auto& [name, t] : full) out.emplace_back(name, ShardTensor(name, t, rank, size));
    return out;
  });
}

at::Tensor UnshardTensor(const std::string& name, const std::vector<at::Tensor>& shards) {
  const int dim = SplitDim(name);
  if (dim < 0 || shards.size() == 1) return shards.front();
  return at::cat(shards, dim);
}

}  // namespace rl::model
