// GrpoTrainer's dumps (GrpoOptions::dump_dir, grpo_trainer.h): what each step's loss came from,
// written as safetensors for tests/reference/grpo_loss_reference.py to recompute independently.
// KeepForDump copies a held sample's rewards and per-token values as the batch is made; DumpBatch
// writes them once per step, DumpPiece the tensors and loss sums of every piece of every update.
#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include "rl/model/safetensors.h"
#include "rl/train/advantage.h"
#include "rl/train/grpo_trainer.h"

namespace rl::train {

void GrpoTrainer::KeepForDump(const Sample& s, int64_t group) {
  if (options_.dump_dir.empty()) return;
  dump_rewards_.push_back(static_cast<float>(s.reward));
  dump_groups_.push_back(static_cast<float>(group));
  dump_adv_.push_back(adv_.at(&s));
  const auto length = static_cast<int64_t>(s.response_ids.size());
  dump_turn_rewards_.push_back(TokenRewards(0.0, length, s.turn_ends, s.turn_rewards));
  dump_turn_ends_.push_back(TokenRewards(0.0, length, s.turn_ends, std::vector<float>(s.turn_ends.size(), 1.0f)));
  if (critic_) {
    dump_values_.push_back(values_.at(&s));
    dump_returns_.push_back(returns_.at(&s));
  }
}

namespace {
std::string DumpName(const std::string& dir, int64_t step, const std::string& rest) {
  return dir + "/step-" + std::to_string(step) + "-" + rest + ".safetensors";
}
at::Tensor Floats(const std::vector<float>& v) { return at::tensor(v, at::kFloat); }
// Rows of different lengths as one zero-padded [N, max length] matrix.
at::Tensor Padded(const std::vector<std::vector<float>>& rows) {
  size_t width = 1;
  for (const auto& r : rows) width = std::max(width, r.size());
  at::Tensor out = at::zeros({static_cast<int64_t>(rows.size()), static_cast<int64_t>(width)}, at::kFloat);
  auto acc = out.accessor<float, 2>();
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows[i].size(); ++j) acc[i][j] = rows[i][j];
  }
  return out;
}
std::string Num(double x) { return nlohmann::json(x).dump(); }
}  // namespace

Status GrpoTrainer::DumpPiece(model::NamedTensors tensors, const LossSums& sums, const Totals& critic) {
  model::Metadata m = {{"sum", Num(sums.sum.item<double>())}, {"tokens", Num(sums.tokens)},
                       {"sequences", Num(sums.sequences)},    {"clipped", Num(sums.clipped)},
                       {"kl", Num(sums.kl)},                  {"clip", Num(options_.clip)},
                       {"kl_coef", Num(options_.kl_coef)},    {"norm", std::to_string(static_cast<int>(options_.norm))},
                       {"kl_estimator", options_.kl_estimator == KlEstimator::kK2 ? "k2" : "k3"},
                       {"correction", std::to_string(static_cast<int>(options_.off.kind))},
                       {"cap", Num(options_.off.cap)},        {"weight_sum", Num(sums.weight_sum)},
                       {"weight_max", Num(sums.weight_max)},  {"capped", Num(sums.capped)}};
  if (critic_) {
    m["value_sum"] = Num(critic.value_loss);
    m["value_clipped"] = Num(critic.value_clipped);
    m["value_clip"] = Num(options_.value_clip);
  }
  const int64_t step = optimizer_->steps() / (options_.minibatches * options_.epochs);
  return model::WriteSafetensorsFile(
      DumpName(options_.dump_dir, step, "update-" + std::to_string(update_) + "-piece-" + std::to_string(dump_piece_++)),
      tensors, m);
}

Status GrpoTrainer::DumpBatch() {
  const int64_t step = optimizer_->steps() / (options_.minibatches * options_.epochs);
  std::vector<float> lengths;
  for (const auto& a : dump_adv_) lengths.push_back(static_cast<float>(a.size()));
  model::NamedTensors t = {{"rewards", Floats(dump_rewards_)},
                           {"group", Floats(dump_groups_)},
                           {"lengths", Floats(lengths)},
                           {"token_adv", Padded(dump_adv_)},
                           {"turn_rewards", Padded(dump_turn_rewards_)},
                           {"turn_ends", Padded(dump_turn_ends_)}};
  if (critic_) {
    t.push_back({"values", Padded(dump_values_)});
    t.push_back({"returns", Padded(dump_returns_)});
  }
  model::Metadata m = {{"advantage", AdvantageName(options_.advantage)},
                       {"gamma", Num(options_.gamma)},
                       {"lambda", Num(options_.lambda)}};
  return model::WriteSafetensorsFile(DumpName(options_.dump_dir, step, "batch"), t, m);
}

}  // namespace rl::train
