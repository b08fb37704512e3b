// Advantage estimators: how a batch's rewards become the advantage A of each response token.
//
// Rewards are outcome rewards, one per response (the verifier's score of the whole answer). With
// r_i the reward of response i, G its group (the responses to one prompt), T_i its length:
//   grpo                 A_i = (r_i - mean_G r) / (std_G r + 1e-4), std with n - 1 (GRPO,
//                        DeepSeekMath); 0 in a group of one
//   rloo                 A_i = r_i - mean_{j in G, j != i} r_j (REINFORCE leave-one-out,
//                        Ahmadian et al. 2024); 0 in a group of one
//   reinforce++          A_i = whiten(r_i) (REINFORCE++, Hu 2025: the return of every token is the
//                        outcome reward, normalised over the batch instead of per group)
//   reinforce++-baseline A_i = whiten(r_i - mean_G r) (REINFORCE++ with a group-mean baseline)
//   gae                  per token, from a critic's values V (PPO, Schulman et al. 2016):
//                          r_t = r_i at the last token of response i, 0 before it; V_{T_i} = 0
//                          delta_t = r_t + gamma V_{t+1} - V_t
//                          A_t = delta_t + gamma lambda A_{t+1}  (A_{T_i} = 0)
//                          return_t = A_t + V_t            (the critic's target)
//                        then A = whiten(A)
// Turn rewards (multi-turn rows: turn_rewards[k] for the turn whose model tokens end before
// turn_ends[k]; rl-rollout(1)). They add to the outcome reward r_i:
//   grpo   DeepSeekMath's process supervision: every turn reward of the group is normalised,
//          q = (q - mean) / (std + 1e-4) over all of them (std with n - 1; all 0 when the group
//          has fewer than two), and a token's advantage gains the sum of the normalised rewards of
//          the turns ending at or after it: A_t = A_i + sum_{k: end_k > t} q_k
//   gae    the token rewards: r_t = sum of the turn rewards of turns ending at t + (r_i at the
//          last token); the critic does the rest
//   others ignore them (rl-train warns once)
// A turn with an unknown end (-1) counts for nothing.
// whiten(x) = (x - mean) / sqrt(var + 1e-8) over every response token of the batch (a response's
// value counted once per token), var with n - 1, as verl's masked_whiten.
// The first three give every token of a response the same advantage; grpo and rloo need only the
// response's group, so a streaming trainer can use them on the groups it has; the others need
// the whole batch (reinforce++, whitening) or a critic (gae).
// Thread safety: free functions over values.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl::train {

enum class Advantage { kGrpo, kRloo, kReinforcePP, kReinforcePPBaseline, kGae };

// The names above; InvalidArgument otherwise.
Result<Advantage> ParseAdvantage(const std::string& name);
const char* AdvantageName(Advantage a);
// True for estimators whose advantages depend only on a response's own group.
bool PerGroup(Advantage a);
// True for estimators that compare a response with the rest of its group: a group whose rewards
// are all equal carries no signal for them (dynamic sampling drops such groups).
bool GroupRelative(Advantage a);

// GRPO's (r - mean) / (std + 1e-4) over one group.
std::vector<double> GroupAdvantages(const std::vector<double>& rewards);
// RLOO's r_i - mean of the others, over one group.
std::vector<double> LeaveOneOutAdvantages(const std::vector<double>& rewards);
// r_i - mean over one group.
std::vector<double> GroupCentred(const std::vector<double>& rewards);

// Data-parallel whitening: the batch is split over ranks, and whiten()'s mean and variance are
// those of the whole batch. The hook sums a few doubles over the ranks in place (every rank calls
// it the same number of times, twice per whitening: the token count and sum, then the squared
// deviations from the mean); empty: this process holds the whole batch.
using RankSumFn = std::function<Status(std::vector<double>*)>;

// whiten() of per-response values x_i weighted by lengths[i] tokens each. Responses without tokens
// get 0.
std::vector<double> WhitenPerResponse(const std::vector<double>& x, const std::vector<int64_t>& lengths);
Status WhitenPerResponse(std::vector<double>* x, const std::vector<int64_t>& lengths, const RankSumFn& sum);
// whiten() over token values, every vector one response's tokens. With `masks` (one per response;
// null or empty: every token), the mean and variance are those of the tokens with mask 1, the
// ones trained on: a multi-turn response's tool tokens (mask 0) would otherwise move both, though
// their advantages are never used (as verl's masked_whiten).
void WhitenTokens(std::vector<std::vector<float>>* x);
Status WhitenTokens(std::vector<std::vector<float>>* x, const RankSumFn& sum,
                    const std::vector<const std::vector<int64_t>*>& masks = {});

// GAE of one response of values.size() tokens whose outcome reward is `reward`; returns the
// advantages (not yet whitened) and writes the critic's targets to *returns.
std::vector<float> Gae(double reward, const std::vector<float>& values, double gamma, double lambda,
                       std::vector<float>* returns);
// The same over per-token rewards (TokenRewards), rewards.size() == values.size(). With a `mask`
// (empty: every token), tokens of mask 0 (a multi-turn response's tool results) are not steps:
// the recursion runs over the trained tokens alone, each one's next value that of the next trained
// token, as if the others were not there (as verl's GAE over a response mask), and a reward on
// one of them (the outcome of a conversation that ended on a call) counts at the trained token
// before it. Their own advantages and returns are those of the next trained token (unused).
std::vector<float> Gae(const std::vector<float>& rewards, const std::vector<float>& values, double gamma,
                       double lambda, std::vector<float>* returns, const std::vector<int64_t>& mask = {});

// The per-token rewards of a response of `length` tokens: its turn rewards at their turns' last
// tokens plus the outcome reward at the last token.
std::vector<float> TokenRewards(double outcome, int64_t length, const std::vector<int64_t>& turn_ends,
                                const std::vector<float>& turn_rewards);

// grpo's process term for one group (above): per response, one value per token.
std::vector<std::vector<float>> ProcessAdvantages(const std::vector<int64_t>& lengths,
                                                  const std::vector<std::vector<int64_t>>& turn_ends,
                                                  const std::vector<std::vector<float>>& turn_rewards);

}  // namespace rl::train
