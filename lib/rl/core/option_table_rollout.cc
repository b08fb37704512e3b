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
      {"--temperature", "RL_TEMPERATURE",
       "sampling temperature; 0 is greedy (rl-train grpo and score: of the log-probabilities, the rollout's)",
       {"rl-rollout"}},
      {"--top-k", "RL_TOP_K", "sample among the k most likely tokens only (0: all)", {"rl-rollout"}},
      {"--top-p", "RL_TOP_P", "sample among the most likely tokens holding this much probability (1: all)",
       {"rl-rollout"}},
      {"--max-new-tokens", "RL_MAX_NEW_TOKENS", "most tokens per response (0: up to the model's context)",
       {"rl-rollout"}},
      {"--slots", "RL_SLOTS", "sequences decoded at once (continuous batching)", {"rl-rollout"}},
      {"--out", "", "file (rl-train export: directory) to write", {"rl-rollout random-model", "rl-train export"}},
      {"--tools", "RL_TOOLS", "rl-env endpoint: multi-turn conversations whose tool calls run there",
       {"rl-rollout run", "rl-rollout generate"}},
      {"--max-turns", "RL_MAX_TURNS", "generation segments per conversation (with --tools)",
       {"rl-rollout run", "rl-rollout generate"}},
      {"--tool-format", "RL_TOOL_FORMAT",
       "tool-call tags: auto (the chat template's when it has them, else the --call/--result flags), template, tags",
       {"rl-rollout run", "rl-rollout generate"}},
      {"--call-open", "RL_CALL_OPEN", "the token that opens a tool call (with --tools)",
       {"rl-rollout run", "rl-rollout generate"}},
      {"--call-close", "RL_CALL_CLOSE", "the token that closes a tool call and ends a segment (with --tools)",
       {"rl-rollout run", "rl-rollout generate"}},
      {"--result-open", "RL_RESULT_OPEN", "text before a tool's result (rl-train sft: such spans are not trained on)",
       {"rl-rollout run", "rl-rollout generate", "rl-train sft"}},
      {"--result-close", "RL_RESULT_CLOSE", "text after a tool's result (rl-train sft: such spans are not trained on)",
       {"rl-rollout run", "rl-rollout generate", "rl-train sft"}},
      {"--tool-error-reward", "RL_TOOL_ERROR_REWARD",
       "the reward of a turn whose tool call failed, e.g. -0.1 (with --tools; column turn_rewards)",
       {"rl-rollout run", "rl-rollout generate"}},
      {"--default-tool", "RL_DEFAULT_TOOL", "the tool a call that is not a JSON object goes to (with --tools)",
       {"rl-rollout run", "rl-rollout generate"}},
      {"--max-result-tokens", "RL_MAX_RESULT_TOKENS", "a tool's result is cut to this many tokens (with --tools)",
       {"rl-rollout run", "rl-rollout generate"}},
      {"--tool-timeout", "RL_TOOL_TIMEOUT", "seconds one round of tool calls may take in rl-env (with --tools)",
       {"rl-rollout run", "rl-rollout generate"}},
      {"--on-new-weights", "RL_ON_NEW_WEIGHTS",
       "when a new weight version arrives mid-batch: finish (the batch under the version it began with) or "
       "interrupt (switch at the next token, prefill live sequences again, record each token's version)",
       {"rl-rollout run"}},
      {"--precision", "RL_ROLLOUT_PRECISION",
       "the dtype the model computes in: auto (the one its weights come in), float32, or bf16 (each version cast "
       "as it is taken, as an engine serving a float32 trainer's weights in bfloat16 does)",
       {"rl-rollout run", "rl-rollout generate"}},
      {"--record-routes", "RL_RECORD_ROUTES",
       "a mixture of experts: write each row's routes (the experts every token used in every sparse layer), which "
       "rl-train grpo --routing-replay replays",
       {"rl-rollout run"}},
      {"--refill", "RL_REFILL",
       "keep the slots full: take more groups as sequences finish and put each group when it is done, instead of "
       "waiting for a batch's longest response (a rollout group: at its checks; with --tools: at turn boundaries)",
       {"rl-rollout run"}},
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
  AddTools(table, "--temperature", {"rl-train eval", "rl-train grpo", "rl-train score"});
  AddTools(table, "--progress-interval", {"rl-train score"});
  AddTools(table, "--verifier", {"rl-train sft", "rl-train grpo", "rl-train eval"});
  AddTools(table, "--slots", {"rl-train eval"});
  AddTools(table, "--weights", {"rl-profile decode"});
  AddTools(table, "--runs", {"rl-profile decode"});
  AddTools(table, "--model", {"rl-profile decode"});  // option_table.cc
  table->insert(table->end(), {
      {"--batches", "", "batch sizes to measure, e.g. 1,16,64", {"rl-profile decode"}},
      {"--prompt-tokens", "", "tokens of every prompt", {"rl-profile decode", "rl-profile adaptive"}},
  });
  // rl-profile adaptive: adaptive tensor parallelism (lib/rl/dist/adaptive_profile.h).
  const std::vector<std::string> adaptive = {"rl-profile adaptive"};
  AddTools(table, "--model", adaptive);
  AddTools(table, "--max-new-tokens", adaptive);
  AddTools(table, "--slots", adaptive);
  table->insert(table->end(), {
      {"--ranks", "",
       "processes in the group: rl-rollout's rollout group (tensor parallelism over them; 1: none), or the "
       "group rl-profile adaptive measures",
       {"rl-profile adaptive", "rl-rollout run"}},
      {"--rank", "",
       "this process's rank in the group (rl-rollout: 0 is the leader, which talks to the queue; rl-train: 0 "
       "checkpoints, default RANK or SLURM_PROCID)",
       {"rl-profile adaptive", "rl-rollout run"}},
      {"--rendezvous", "", "HOST:PORT of the group's c10d store (rank 0 listens there)", adaptive},
      {"--requests", "", "prompts in each workload", adaptive},
      {"--short-tokens", "", "typical length of a short response (the long ones run --max-new-tokens)",
       adaptive},
      {"--tail", "", "fraction of long responses in the long-tail workload", adaptive},
      {"--check-every", "", "decode rounds between a rollout group's checks (adaptive switches, refills)",
       {"rl-profile adaptive", "rl-rollout run"}},
      {"--switch-margin", "",
       "widen tensor parallelism only when a wider layout is predicted this fraction faster than staying "
       "(0.05: 5%)",
       {"rl-profile adaptive", "rl-rollout run"}},
      {"--steps", "", "decode steps timed per profile point", adaptive},
      {"--repeats", "", "runs of each configuration, taking turns; each reports its median time", adaptive},
      {"--load-only", "", "load the model and exit (times the restart of a naive switch)", adaptive},
      {"--profile-out", "", "write the measured decode profile (the predictor's input) to this JSON file",
       adaptive},
      {"--adaptive-profile", "",
       "decode profile (rl-profile adaptive --profile-out): switch tensor parallelism adaptively",
       {"rl-rollout run"}},
      {"--rejoin-timeout", "",
       "seconds a rollout group's rank above 0 waits for rank 0 to be reachable again before it exits 69 (the "
       "group re-forms in place when a rank restarts)",
       {"rl-rollout run"}},
  });
  AddTools(table, "--rendezvous", {"rl-rollout run"});
  // rl-train's data-parallel ranks (--world is in option_table_train.cc).
  AddTools(table, "--rank", {"rl-train grpo"});
  AddTools(table, "--rendezvous", {"rl-train grpo"});
}

}  // namespace rl
