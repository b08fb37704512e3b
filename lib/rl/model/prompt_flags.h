// The command-line flags every role that turns dataset records into prompts shares (rl-train sft,
// grpo and eval, rl-rollout generate): --model, --chat-template, --chat-template-vars,
// --prompt-key, --messages-key, --system-prompt and, where answers are read, --answer-key.
// Thread safety: plain values and free functions.
#pragma once

#include <string>

#include "rl/core/options.h"
#include "rl/core/status.h"
#include "rl/model/prompt_encoder.h"
#include "rl/task/dataset.h"

namespace rl::model {

struct PromptFlags {
  std::string model;                 // --model DIR (env RL_MODEL)
  std::string chat_template = "auto";
  std::string chat_template_vars;    // a JSON object's text; empty: none
  task::DatasetOptions dataset;      // keys and system prompt of the records
};

// Binds the flags above on `sub`; --answer-key only when `answers`. --model is required.
void BindPromptFlags(CommandLine& cl, CLI::App* sub, PromptFlags* flags, bool answers);

// --chat-template-vars' text as a JSON object (empty: null); InvalidArgument otherwise.
Result<nlohmann::ordered_json> ParseChatTemplateVars(const std::string& text);

// Opens flags.model and makes its PromptEncoder. Errors name the flag or file at fault
// (--chat-template-vars that is not a JSON object is InvalidArgument).
Result<PromptEncoder> OpenPromptEncoder(const PromptFlags& flags);

}  // namespace rl::model
