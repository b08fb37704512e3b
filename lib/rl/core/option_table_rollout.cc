// Options of rl-rollout and rl-reward, declared once (see option_table.cc for the shared ones).
// Flags that rl-queue or rl-train already declare with the same meaning (--count, --lease,
// --wait, --task, --model-config) are not declared twice: these tools are added to the existing
// entry's list instead (AppendTrainOptions runs first).
#include "rl/core/options.h"

namespace rl {
void AppendRolloutOptions(std::vector<OptionSpec>* table) {
  AddTools(table, "--count", {"rl-rollout run", "rl-reward run", "rl-reward make-data"});
  AddTools(table, "--lease", {"rl-rollout run", "rl-reward run"});
  AddTools(table, "--wait", {"rl-rollout run", "rl-reward run"});
  AddTools(table, "--task", {"rl-reward make-data"});
  AddTools(table, "--seed", {"rl-reward make-data"});
  AddTools(table, "--model-config", {"rl-rollout random-model"});  // option_table_train.cc
  table->insert(table->end(), {
      // rl-rollout
      {"--temperature", "RL_TEMPERATURE", "sampling temperature; 0 is greedy", {"rl-rollout"}},
      {"--top-k", "RL_TOP_K", "sample among the k most likely tokens only (0: all)", {"rl-rollout"}},
      {"--top-p", "RL_TOP_P", "sample among the most likely tokens holding this much probability (1: all)",
       {"rl-rollout"}},
      {"--max-new-tokens", "RL_MAX_NEW_TOKENS", "most tokens per response (0: up to the model's context)",
       {"rl-rollout"}},
      {"--slots", "RL_SLOTS", "sequences decoded at once (continuous batching)", {"rl-rollout"}},
      {"--out", "", "file (rl-train export: directory) to write", {"rl-rollout random-model", "rl-train export"}},
      {"--progress-interval", "RL_PROGRESS_INTERVAL", "seconds between progress lines on stderr (0: none)",
       {"rl-rollout run", "rl-reward run"}},

      // rl-reward
      {"--verifier", "RL_VERIFIER", "rule-based verifier: addition, exact, numeric or math",
       {"rl-reward run", "rl-reward score"}},
      {"--tolerance", "RL_TOLERANCE", "largest absolute difference the numeric verifier accepts",
       {"rl-reward run", "rl-reward score"}},
      {"--exec", "RL_REWARD_EXEC", "score with this shell command: one JSON request per line in, one reply out",
       {"rl-reward run", "rl-reward score"}},
      {"--exec-timeout", "RL_EXEC_TIMEOUT", "seconds the --exec command may take for one reply",
       {"rl-reward run", "rl-reward score"}},
      {"--heldout", "", "the fixed held-out set instead of training prompts",
       {"rl-reward make-data", "rl-train make-data"}},
  });
  // rl-profile decode measures generation with the same knobs.
  AddTools(table, "--max-new-tokens", {"rl-profile decode", "rl-train eval", "rl-train grpo", "rl-train sft"});
  AddTools(table, "--temperature", {"rl-train eval", "rl-train grpo"});
  AddTools(table, "--verifier", {"rl-train sft", "rl-train grpo", "rl-train eval"});
  AddTools(table, "--slots", {"rl-train eval"});
  AddTools(table, "--weights", {"rl-profile decode"});
  AddTools(table, "--runs", {"rl-profile decode"});
  AddTools(table, "--model", {"rl-profile decode"});  // option_table.cc
  table->insert(table->end(), {
      {"--batches", "", "batch sizes to measure, e.g. 1,16,64", {"rl-profile decode"}},
      {"--prompt-tokens", "", "tokens of every prompt", {"rl-profile decode"}},
  });
}

}  // namespace rl
