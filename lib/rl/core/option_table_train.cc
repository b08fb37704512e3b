// Options of rl-train, declared once (see option_table.cc for the shared ones).
#include "rl/core/options.h"

namespace rl {

void AppendTrainOptions(std::vector<OptionSpec>* table) {
  const std::string sft = "rl-train sft", grpo = "rl-train grpo", data = "rl-train make-data",
                    eval = "rl-train eval", xport = "rl-train export";
  AddTools(table, "--task", {data});  // option_table.cc
  table->insert(table->end(), {
      {"--batch-size", "RL_TRAIN_BATCH_SIZE", "SFT sequences per step", {sft}},
      {"--clip", "RL_TRAIN_CLIP", "PPO clip range of the importance ratio", {grpo}},
      {"--collapse-drop", "RL_TRAIN_COLLAPSE_DROP",
       "warn of a collapse when held-out accuracy (or mean reward) falls this far below its best", {grpo}},
      {"--data", "RL_TRAIN_DATA", "SFT data: JSON lines of {\"prompt\", \"response\" or \"answer\"}", {sft}},
      {"--dynamic-sampling", "RL_TRAIN_DYNAMIC_SAMPLING",
       "drop groups whose rewards are all equal and feed more prompts (true/false)", {grpo}},
      {"--dtype", "", "dtype of the exported tensors: float32, bfloat16 or float16 (default: the model's)",
       {xport}},
      {"--eval-every", "RL_TRAIN_EVAL_EVERY", "steps between held-out greedy evaluations", {sft, grpo}},
      {"--eval-size", "RL_TRAIN_EVAL_SIZE", "problems in the fixed held-out set", {sft, grpo, eval}},
      {"--grad-clip", "RL_TRAIN_GRAD_CLIP", "clip the global gradient norm to this (0: off)", {sft, grpo}},
      {"--export-dir", "RL_TRAIN_EXPORT_DIR",
       "after the last step, write the final version as a Hugging Face model directory here", {grpo}},
      {"--group-size", "RL_TRAIN_GROUP_SIZE", "responses per prompt (G): rows fed per prompt", {grpo}},
      {"--keep-checkpoints", "RL_TRAIN_KEEP", "checkpoints and weight versions kept on disk", {grpo}},
      {"--kl-coef", "RL_TRAIN_KL_COEF", "weight of the KL term to the version-0 reference model (0: off)", {grpo}},
      {"--lease-seconds", "RL_TRAIN_LEASE", "lease on the rows of a batch being trained", {grpo}},
      {"--loss-norm", "RL_TRAIN_LOSS_NORM", "loss normalisation: token (token mean) or sequence", {grpo}},
      {"--lr", "RL_TRAIN_LR", "learning rate (AdamW)", {sft, grpo}},
      {"--max-staleness", "RL_TRAIN_MAX_STALENESS",
       "k: train on rows generated with version >= current - k (overrides --mode)", {grpo}},
      {"--max-steps", "RL_TRAIN_MAX_STEPS", "stop after this many steps (grpo: 0 runs until stopped)", {sft, grpo}},
      {"--micro-batch", "RL_TRAIN_MICRO_BATCH", "sequences per forward/backward pass", {grpo}},
      {"--mode", "RL_TRAIN_MODE", "sync (k=0, f=1), semi-sync (k=1, f=0.5) or async (k=1, f=0)", {grpo}},
      {"--model-config", "RL_TRAIN_MODEL_CONFIG", "model config as JSON, for a model trained from scratch", {sft}},
      {"--problems", "", "problems to write", {data}},
      {"--prompts", "RL_TRAIN_PROMPTS", "prompts to feed: JSON lines of {\"prompt\", \"answer\"}", {grpo}},
      {"--response-format", "",
       "words: add an SFT \"response\" ending in \"#### n\" (gsm8k) or \"\\boxed{n}\" (boxed); none: no response",
       {data}},
      {"--prompts-per-step", "RL_TRAIN_PROMPTS_PER_STEP", "groups (prompts) per training batch", {grpo}},
      {"--sequences", "", "sequences in the measured GRPO step", {"rl-profile decode"}},
      {"--stale-rows", "RL_TRAIN_STALE_ROWS", "rows older than the staleness bound: regenerate or drop", {grpo}},
      {"--start-fraction", "RL_TRAIN_START_FRACTION",
       "f: fraction of a batch that must have arrived before training on it starts (overrides --mode)", {grpo}},
      {"--target-accuracy", "RL_TRAIN_TARGET_ACCURACY", "stop SFT when held-out greedy accuracy reaches this", {sft}},
      {"--tokenizer-from", "RL_TRAIN_TOKENIZER_FROM",
       "directory whose tokenizer files (tokenizer.json, ...) are copied into the exported one", {xport, grpo}},
      {"--warmup-steps", "RL_TRAIN_WARMUP_STEPS", "steps over which the learning rate ramps up linearly to --lr", {grpo}},
      {"--weight-decay", "RL_TRAIN_WEIGHT_DECAY", "AdamW decoupled weight decay", {sft, grpo}},
  });
}

}  // namespace rl
