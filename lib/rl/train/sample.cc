#include "rl/train/sample.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <map>

namespace rl::train {
namespace {

Status Missing(const queue::GotRow& row, const std::string& col, const std::string& want) {
  return Status::DataError("row " + std::to_string(row.index) + ": column '" + col + "' " + want);
}

Result<std::vector<int64_t>> IntTensor(const queue::GotRow& row, const std::string& col) {
  const Value* v = FindColumn(row.columns, col);
  const auto* t = v ? std::get_if<Tensor>(v) : nullptr;
  if (!t || (t->dtype != DType::kI64 && t->dtype != DType::kI32)) return Missing(row, col, "is not an integer tensor");
  return t->ToI64();
}

Result<double> Number(const queue::GotRow& row, const std::string& col) {
  const Value* v = FindColumn(row.columns, col);
  if (v && std::holds_alternative<double>(*v)) return std::get<double>(*v);
  if (v && std::holds_alternative<int64_t>(*v)) return static_cast<double>(std::get<int64_t>(*v));
  if (v && std::holds_alternative<bool>(*v)) return std::get<bool>(*v) ? 1.0 : 0.0;
  return Missing(row, col, "is not a number");
}

// The floats of a column that holds one per response token.
Result<std::vector<float>> PerTokenFloats(const queue::GotRow& row, const std::string& col, size_t tokens) {
  const Value* v = FindColumn(row.columns, col);
  const auto* t = v ? std::get_if<Tensor>(v) : nullptr;
  if (!t || (t->dtype != DType::kF32 && t->dtype != DType::kF64)) return Missing(row, col, "is not a float tensor");
  std::vector<float> out;
  for (double x : t->ToF64()) {
    // Checked as the float it trains as (-1e39 is -inf): one such value makes the loss NaN, and
    // the update with it every weight, masked position or not (NaN * 0 is NaN).
    out.push_back(static_cast<float>(x));
    if (!std::isfinite(out.back())) return Missing(row, col, "holds a value that is not a finite float");
  }
  if (out.size() != tokens) return Missing(row, col, "does not have one value per response token");
  return out;
}

}  // namespace

Status ReadRoutes(const queue::GotRow& row, const RouteLimits& limits, Sample* s) {
  const Value* v = FindColumn(row.columns, "routes");
  if (v == nullptr || limits.sparse_layers == 0) return Status::OK();
  const auto* t = std::get_if<Tensor>(v);
  const bool integer = t && (t->dtype == DType::kU8 || t->dtype == DType::kI16 || t->dtype == DType::kI32 ||
                             t->dtype == DType::kI64);
  if (!integer || t->shape.size() != 3 || !t->Validate().ok()) return Missing(row, "routes", "is not a 3-D integer tensor");
  const int64_t fed = static_cast<int64_t>(s->prompt_ids.size() + s->response_ids.size()) - 1;
  if (t->shape[1] != limits.sparse_layers || t->shape[2] != limits.per_token || t->shape[0] > fed) {
    return Missing(row, "routes", "is not [N <= " + std::to_string(fed) + ", " + std::to_string(limits.sparse_layers) +
                                      ", " + std::to_string(limits.per_token) + "] (tokens, this model's sparse layers, "
                                      "experts per token)");
  }
  const std::vector<int64_t> experts = t->ToI64();
  const size_t k = static_cast<size_t>(limits.per_token);
  for (size_t at = 0; at < experts.size(); at += k) {
    for (size_t i = at; i < at + k; ++i) {
      if (experts[i] < 0 || experts[i] >= limits.experts) {
        return Missing(row, "routes", "holds an expert outside [0, " + std::to_string(limits.experts) + ")");
      }
      if (std::find(experts.begin() + static_cast<std::ptrdiff_t>(at), experts.begin() + static_cast<std::ptrdiff_t>(i),
                    experts[i]) != experts.begin() + static_cast<std::ptrdiff_t>(i)) {
        return Missing(row, "routes", "names one expert twice for a token");
      }
    }
  }
  s->routes.assign(experts.begin(), experts.end());
  return Status::OK();
}

Status CheckTokens(const queue::GotRow& row, const Sample& s, const TokenLimits& limits) {
  const size_t total = s.prompt_ids.size() + s.response_ids.size();
  if (limits.context > 0 && total > static_cast<size_t>(limits.context)) {
    return Missing(row, "response_ids", "makes " + std::to_string(total) + " tokens with the prompt, more than the context of " +
                                            std::to_string(limits.context));
  }
  if (limits.vocab_size <= 0) return Status::OK();
  for (const std::vector<int64_t>* ids : {&s.prompt_ids, &s.response_ids}) {
    for (int64_t id : *ids) {
      if (id < 0 || id >= limits.vocab_size) {
        return Missing(row, ids == &s.prompt_ids ? "prompt_ids" : "response_ids",
                       "holds token " + std::to_string(id) + ", outside the vocabulary [0, " +
                           std::to_string(limits.vocab_size) + ")");
      }
    }
  }
  return Status::OK();
}

bool RoutesCoverTrainedTokens(const Sample& s, const RouteLimits& limits) {
  if (s.routes.empty() || limits.sparse_layers <= 0 || limits.per_token <= 0) return true;
  const int64_t n = static_cast<int64_t>(s.routes.size()) / (limits.sparse_layers * limits.per_token);
  const int64_t p = static_cast<int64_t>(s.prompt_ids.size());
  for (int64_t j = static_cast<int64_t>(s.response_ids.size()) - 1; j >= 0; --j) {
    if (!s.loss_mask.empty() && s.loss_mask[static_cast<size_t>(j)] == 0) continue;
    return p + j - 1 < n;  // the last trained token's position is the furthest one
  }
  return true;
}

std::string RefRoutingMismatch(const Sample& s, bool replay) {
  const bool policy_replays = replay && !s.routes.empty();
  if (s.ref_routing == "own" && policy_replays) {
    return "row " + std::to_string(s.index) + "'s ref_logprobs come from a reference that routed on its own "
           "(rl-train score without --routing-replay), while this trainer replays the row's routes";
  }
  if (s.ref_routing == "replayed" && !policy_replays) {
    return "row " + std::to_string(s.index) + "'s ref_logprobs come from a reference that replayed the row's "
           "routes (rl-train score --routing-replay), while this trainer routes on its own";
  }
  return "";
}

TokenLimits TokenLimitsOf(const model::ModelConfig& config) { return {config.vocab_size, config.context()}; }

RouteLimits RouteLimitsOf(const model::ModelConfig& config, bool replay) {
  if (!replay) return {};
  return {config.SparseLayerCount(), config.moe.num_experts_per_tok, config.moe.num_experts};
}

namespace {

// A row's Sample; a malformed routes column leaves its routes empty and says why in *routes_error
// (the row trains with its own routing: the column is a hint, the row's data is sound).
Result<Sample> SampleOf(const queue::GotRow& row, const RouteLimits& limits, const TokenLimits& tokens,
                        Status* routes_error) {
  Sample s;
  s.index = row.index;
  RL_ASSIGN_OR_RETURN(s.prompt_ids, IntTensor(row, "prompt_ids"));
  RL_ASSIGN_OR_RETURN(s.response_ids, IntTensor(row, "response_ids"));
  RL_RETURN_IF_ERROR(CheckTokens(row, s, tokens));
  RL_ASSIGN_OR_RETURN(s.logprobs, PerTokenFloats(row, "logprobs", s.response_ids.size()));
  if (FindColumn(row.columns, "ref_logprobs") != nullptr) {
    RL_ASSIGN_OR_RETURN(s.ref_logprobs, PerTokenFloats(row, "ref_logprobs", s.response_ids.size()));
  }
  if (const Value* r = FindColumn(row.columns, "ref_routing")) {  // a hint: any other value says nothing
    if (const auto* text = std::get_if<std::string>(r)) s.ref_routing = *text;
  }
  if (s.prompt_ids.empty()) return Missing(row, "prompt_ids", "is empty");
  *routes_error = ReadRoutes(row, limits, &s);  // leaves s.routes empty when it fails
  if (FindColumn(row.columns, "loss_mask") != nullptr) {
    RL_ASSIGN_OR_RETURN(s.loss_mask, IntTensor(row, "loss_mask"));
    if (s.loss_mask.size() != s.response_ids.size()) {
      return Missing(row, "loss_mask", "does not have one value per response token");
    }
    for (int64_t m : s.loss_mask) {
      if (m != 0 && m != 1) return Missing(row, "loss_mask", "holds a value other than 0 and 1");
    }
  }
  if (FindColumn(row.columns, "turn_ends") != nullptr || FindColumn(row.columns, "turn_rewards") != nullptr) {
    RL_ASSIGN_OR_RETURN(s.turn_ends, IntTensor(row, "turn_ends"));
    const Value* tr = FindColumn(row.columns, "turn_rewards");
    const auto* r = tr ? std::get_if<Tensor>(tr) : nullptr;
    if (!r || (r->dtype != DType::kF32 && r->dtype != DType::kF64)) {
      return Missing(row, "turn_rewards", "is not a float tensor");
    }
    for (double x : r->ToF64()) {
      if (!(std::fabs(x) <= kMaxReward)) return Missing(row, "turn_rewards", "holds a value that is not a reward");
      s.turn_rewards.push_back(static_cast<float>(x));
    }
    if (s.turn_rewards.size() != s.turn_ends.size()) return Missing(row, "turn_rewards", "differs from turn_ends in length");
    for (int64_t e : s.turn_ends) {
      if (e < -1 || e > static_cast<int64_t>(s.response_ids.size())) {
        return Missing(row, "turn_ends", "holds an end outside the response");
      }
    }
  }
  RL_ASSIGN_OR_RETURN(s.reward, Number(row, "reward"));
  // A NaN reward would make every advantage of its group NaN, and the step's update with them; so
  // would one whose square overflows the group's variance (1e200).
  if (!(std::fabs(s.reward) <= kMaxReward)) return Missing(row, "reward", "is not a reward (finite, at most 1e6 in size)");
  RL_ASSIGN_OR_RETURN(double version, Number(row, "version"));
  if (!(version >= 0 && version < 9.0e18)) return Missing(row, "version", "is not a version (0 or more)");
  s.version = static_cast<int64_t>(version);
  if (FindColumn(row.columns, "token_versions") != nullptr) {
    RL_ASSIGN_OR_RETURN(s.token_versions, IntTensor(row, "token_versions"));
    if (s.token_versions.size() != s.response_ids.size()) {
      return Missing(row, "token_versions", "does not have one value per response token");
    }
    for (size_t i = 0; i < s.token_versions.size(); ++i) {
      const bool model_token = s.loss_mask.empty() || s.loss_mask[i] == 1;
      if (model_token && s.token_versions[i] >= 0) s.version = std::min(s.version, s.token_versions[i]);
    }
  }
  return s;
}

}  // namespace

SortedRows SortRows(const std::vector<queue::GotRow>& rows, const RouteLimits& limits, const TokenLimits& tokens) {
  SortedRows out;
  std::vector<Group> all;
  std::vector<std::vector<uint64_t>> members;  // of each group in `all`, its rows' indices
  std::vector<bool> broken;                    // a group with a malformed row
  struct Unrouted {
    size_t group;
    uint64_t index;
    Status why;
  };
  std::vector<Unrouted> unrouted;  // rows whose routes alone are malformed
  std::map<std::string, size_t> where;
  auto note = [](Status* first, Status s) {
    if (first->ok()) *first = std::move(s);
  };
  for (const auto& row : rows) {
    const Value* g = FindColumn(row.columns, queue::kGroupColumn);
    std::string key = g ? queue::GroupKey(*g) : "";
    if (key.empty()) {  // belongs to no group: it alone is left out
      ++out.bad_rows;
      out.dropped.push_back(row.index);
      note(&out.error, Missing(row, queue::kGroupColumn, "is missing"));
      continue;
    }
    auto [it, fresh] = where.emplace(key, all.size());
    if (fresh) {
      all.push_back({key, {}});
      members.emplace_back();
      broken.push_back(false);
    }
    members[it->second].push_back(row.index);
    Status routes = Status::OK();
    Result<Sample> s = SampleOf(row, limits, tokens, &routes);
    if (!s.ok()) {
      ++out.bad_rows;
      broken[it->second] = true;
      note(&out.error, s.status());
      continue;
    }
    if (!routes.ok()) unrouted.push_back({it->second, row.index, routes});
    all[it->second].samples.push_back(std::move(*s));
  }
  for (Unrouted& u : unrouted) {  // of the groups kept: the others are not trained at all
    if (broken[u.group]) continue;
    out.unreplayable.push_back(u.index);
    note(&out.routes_error, std::move(u.why));
  }
  for (size_t i = 0; i < all.size(); ++i) {
    if (broken[i]) {
      out.dropped.insert(out.dropped.end(), members[i].begin(), members[i].end());
    } else {
      out.groups.push_back(std::move(all[i]));
    }
  }
  return out;
}

Result<std::vector<Group>> GroupsOf(const std::vector<queue::GotRow>& rows, const RouteLimits& limits,
                                    const TokenLimits& tokens) {
  SortedRows sorted = SortRows(rows, limits, tokens);
  if (!sorted.error.ok()) return sorted.error;
  if (!sorted.routes_error.ok()) return sorted.routes_error;
  return std::move(sorted.groups);
}

TokenAge TokenAgeOf(const std::vector<Group>& groups, int64_t version) {
  TokenAge a;
  for (const Group& g : groups) {
    for (const Sample& s : g.samples) {
      for (size_t i = 0; i < s.response_ids.size(); ++i) {
        if (!s.loss_mask.empty() && s.loss_mask[i] == 0) continue;
        ++a.tokens;
        a.older += (s.token_versions.empty() ? s.version : s.token_versions[i]) < version;
      }
    }
  }
  return a;
}

int64_t TrainedTokens(const Sample& s) {
  if (s.loss_mask.empty()) return static_cast<int64_t>(s.response_ids.size());
  return std::accumulate(s.loss_mask.begin(), s.loss_mask.end(), int64_t{0});
}

}  // namespace rl::train
