// Options of the judge (rl-reward --judge, lib/rl/reward/judge.h) and of rl-profile colocation
// (lib/rl/reward/colocation.h), declared once (see option_table.cc for the shared ones). Flags
// declared elsewhere with the same meaning get these tools added to their entry instead.
#include "rl/core/options.h"

namespace rl {

void AppendJudgeOptions(std::vector<OptionSpec>* table) {
  const std::string coloc = "rl-profile colocation";
  const std::vector<std::string> judged = {"rl-reward run", "rl-reward score", coloc};
  AddTools(table, "--count", {"rl-reward score"});
  for (const char* flag : {"--model", "--weights", "--prompts", "--group-size", "--prompts-per-step", "--temperature",
                           "--max-new-tokens", "--steps"}) {
    AddTools(table, flag, {coloc});
  }
  table->insert(table->end(), {
      {"--judge", "RL_REWARD_JUDGE", "score with this judge model directory (a Hugging Face one, weights included)",
       judged},
      {"--judge-mode", "RL_JUDGE_MODE",
       "prob: the verdict token's probability after the judging prompt; generate: a greedy verdict a pattern extracts",
       judged},
      {"--judge-template", "RL_JUDGE_TEMPLATE", "judging prompt: text with {prompt}, {response} and {answer}", judged},
      {"--judge-verdict", "RL_JUDGE_VERDICT", "the token (prob) or text (generate) that means the response is correct",
       judged},
      {"--judge-threshold", "RL_JUDGE_THRESHOLD",
       "prob: reward 1 when the verdict's probability reaches this, else 0; 0: the probability is the reward", judged},
      {"--judge-pattern", "RL_JUDGE_PATTERN", "generate: PCRE2 pattern whose first match in the output is the verdict",
       judged},
      {"--judge-max-new-tokens", "RL_JUDGE_MAX_NEW_TOKENS", "generate: most tokens of the judge's output", judged},
      {"--cores", "", "two CPU cores, SAMPLER,JUDGE: partial colocation pins one role to each, full uses both",
       {coloc}},
      {"--reject-by", "",
       "reject groups by this rule verifier's rewards; the judge still scores every response (default: the judge's)",
       {coloc}},
      {"--micro-groups", "", "groups per micro-batch the sampler hands to the judge (partial colocation)", {coloc}},
  });
}

}  // namespace rl
