#include "rl/train/advantage.h"

#include <algorithm>
#include <cmath>

namespace rl::train {

Result<Advantage> ParseAdvantage(const std::string& name) {
  for (Advantage a : {Advantage::kGrpo, Advantage::kRloo, Advantage::kReinforcePP, Advantage::kReinforcePPBaseline,
                      Advantage::kGae}) {
    if (name == AdvantageName(a)) return a;
  }
  return Status::InvalidArgument("unknown advantage estimator '" + name +
                                 "' (grpo, rloo, reinforce++, reinforce++-baseline or gae)");
}

const char* AdvantageName(Advantage a) {
  switch (a) {
    case Advantage::kGrpo:
      return "grpo";
    case Advantage::kRloo:
      return "rloo";
    case Advantage::kReinforcePP:
      return "reinforce++";
    case Advantage::kReinforcePPBaseline:
      return "reinforce++-baseline";
    case Advantage::kGae:
      return "gae";
  }
  return "grpo";
}

bool PerGroup(Advantage a) { return a == Advantage::kGrpo || a == Advantage::kRloo; }

bool GroupRelative(Advantage a) {
  return a == Advantage::kGrpo || a == Advantage::kRloo || a == Advantage::kReinforcePPBaseline;
}

namespace {
double Mean(const std::vector<double>& x) {
  double sum = 0;
  for (double v : x) sum += v;
  return x.empty() ? 0 : sum / static_cast<double>(x.size());
}
}  // namespace

std::vector<double> GroupAdvantages(const std::vector<double>& rewards) {
  size_t n = rewards.size();
  std::vector<double> adv(n, 0.0);
  if (n < 2) return adv;
  double mean = Mean(rewards);
  double var = 0;
  for (double r : rewards) var += (r - mean) * (r - mean);
  double std = std::sqrt(var / static_cast<double>(n - 1));
  for (size_t i = 0; i < n; ++i) adv[i] = (rewards[i] - mean) / (std + 1e-4);
  return adv;
}

std::vector<double> LeaveOneOutAdvantages(const std::vector<double>& rewards) {
  size_t n = rewards.size();
  std::vector<double> adv(n, 0.0);
  if (n < 2) return adv;
  double sum = Mean(rewards) * static_cast<double>(n);
  for (size_t i = 0; i < n; ++i) adv[i] = rewards[i] - (sum - rewards[i]) / static_cast<double>(n - 1);
  return adv;
}

std::vector<double> GroupCentred(const std::vector<double>& rewards) {
  double mean = Mean(rewards);
  std::vector<double> out;
  for (double r : rewards) out.push_back(r - mean);
  return out;
}

namespace {
// Mean and 1/sqrt(var + 1e-8) of weighted values (weight: a token count), var with n - 1, over the
// values of every rank (two passes, as one process would make them: the mean, then the squared
// deviations from it).
struct Whitening {
  double mean = 0, scale = 1;
};
template <typename Each>
Result<Whitening> Measure(Each each, const RankSumFn& sum) {
  std::vector<double> first = {0, 0};  // n, sum
  each([&](double x, double w) {
    first[0] += w;
    first[1] += x * w;
  });
  if (sum) RL_RETURN_IF_ERROR(sum(&first));
  Whitening out;
  const double n = first[0];
  out.mean = n > 0 ? first[1] / n : 0;
  std::vector<double> ss = {0};
  each([&](double x, double w) { ss[0] += (x - out.mean) * (x - out.mean) * w; });
  // Every rank takes part in both sums, also one without values, so that the ranks' calls pair up.
  if (sum) RL_RETURN_IF_ERROR(sum(&ss));
  if (n <= 0) return Whitening{};
  double var = n > 1 ? ss[0] / (n - 1) : 0;
  out.scale = 1 / std::sqrt(var + 1e-8);
  return out;
}
}  // namespace

Status WhitenPerResponse(std::vector<double>* x, const std::vector<int64_t>& lengths, const RankSumFn& sum) {
  auto each = [&](auto add) {
    for (size_t i = 0; i < x->size(); ++i) add((*x)[i], static_cast<double>(lengths[i]));
  };
  RL_ASSIGN_OR_RETURN(Whitening w, Measure(each, sum));
  for (size_t i = 0; i < x->size(); ++i) (*x)[i] = lengths[i] > 0 ? ((*x)[i] - w.mean) * w.scale : 0.0;
  return Status::OK();
}

std::vector<double> WhitenPerResponse(const std::vector<double>& x, const std::vector<int64_t>& lengths) {
  std::vector<double> out = x;
  (void)WhitenPerResponse(&out, lengths, nullptr);  // alone, nothing can fail
  return out;
}

Status WhitenTokens(std::vector<std::vector<float>>* x, const RankSumFn& sum,
                    const std::vector<const std::vector<int64_t>*>& masks) {
  auto each = [&](auto add) {
    for (size_t i = 0; i < x->size(); ++i) {
      const std::vector<int64_t>* mask = i < masks.size() ? masks[i] : nullptr;
      const bool all = mask == nullptr || mask->empty();
      const std::vector<float>& seq = (*x)[i];
      for (size_t t = 0; t < seq.size(); ++t) {
        const bool trained = all || (t < mask->size() && (*mask)[t] != 0);
        add(seq[t], trained ? 1.0 : 0.0);
      }
    }
  };
  RL_ASSIGN_OR_RETURN(Whitening w, Measure(each, sum));
  for (auto& seq : *x) {
    for (float& v : seq) v = static_cast<float>((v - w.mean) * w.scale);
  }
  return Status::OK();
}

void WhitenTokens(std::vector<std::vector<float>>* x) { (void)WhitenTokens(x, nullptr); }

std::vector<float> Gae(double reward, const std::vector<float>& values, double gamma, double lambda,
                       std::vector<float>* returns) {
  return Gae(TokenRewards(reward, static_cast<int64_t>(values.size()), {}, {}), values, gamma, lambda, returns);
}

std::vector<float> Gae(const std::vector<float>& rewards, const std::vector<float>& values, double gamma,
                       double lambda, std::vector<float>* returns, const std::vector<int64_t>& mask) {
  const size_t n = values.size();
  std::vector<float> adv(n, 0.0f);
  returns->assign(n, 0.0f);
  double next_value = 0, next_adv = 0, carried = 0;
  for (size_t k = n; k-- > 0;) {
    double r = k < rewards.size() ? rewards[k] : 0.0;
    if (k < mask.size() && mask[k] == 0) {  // not a step: its reward goes to the trained token before
      carried += r;
      adv[k] = static_cast<float>(next_adv);
      (*returns)[k] = static_cast<float>(next_adv + next_value);
      continue;
    }
    r += carried;
    carried = 0;
    double delta = r + gamma * next_value - values[k];
    next_adv = delta + gamma * lambda * next_adv;
    next_value = values[k];
    adv[k] = static_cast<float>(next_adv);
    (*returns)[k] = static_cast<float>(next_adv + values[k]);
  }
  return adv;
}

std::vector<float> TokenRewards(double outcome, int64_t length, const std::vector<int64_t>& turn_ends,
                                const std::vector<float>& turn_rewards) {
  std::vector<float> r(static_cast<size_t>(std::max<int64_t>(length, 0)), 0.0f);
  if (r.empty()) return r;
  for (size_t k = 0; k < turn_ends.size() && k < turn_rewards.size(); ++k) {
    if (turn_ends[k] >= 1 && turn_ends[k] <= length) r[static_cast<size_t>(turn_ends[k] - 1)] += turn_rewards[k];
  }
  r.back() += static_cast<float>(outcome);
  return r;
}

std::vector<std::vector<float>> ProcessAdvantages(const std::vector<int64_t>& lengths,
                                                  const std::vector<std::vector<int64_t>>& turn_ends,
                                                  const std::vector<std::vector<float>>& turn_rewards) {
  std::vector<double> all;  // the group's turn rewards at known ends
  for (size_t i = 0; i < lengths.size(); ++i) {
    for (size_t k = 0; k < turn_ends[i].size(); ++k) {
      if (turn_ends[i][k] >= 1 && turn_ends[i][k] <= lengths[i]) all.push_back(turn_rewards[i][k]);
    }
  }
  double mean = Mean(all), std = 0;
  if (all.size() > 1) {
    double var = 0;
    for (double r : all) var += (r - mean) * (r - mean);
    std = std::sqrt(var / static_cast<double>(all.size() - 1));
  }
  std::vector<std::vector<float>> out(lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) {
    std::vector<double> at(static_cast<size_t>(std::max<int64_t>(lengths[i], 0)), 0.0);
    if (all.size() > 1) {
      for (size_t k = 0; k < turn_ends[i].size(); ++k) {
        const int64_t e = turn_ends[i][k];
        if (e >= 1 && e <= lengths[i]) at[static_cast<size_t>(e - 1)] += (turn_rewards[i][k] - mean) / (std + 1e-4);
      }
    }
    out[i].assign(at.size(), 0.0f);
    double suffix = 0;  // a token's advantage: the normalised rewards of the turns ending at or after it
    for (size_t t = at.size(); t-- > 0;) {
      suffix += at[t];
      out[i][t] = static_cast<float>(suffix);
    }
  }
  return out;
}

}  // namespace rl::train
