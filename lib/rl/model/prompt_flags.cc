#include "rl/model/prompt_flags.h"

#include <nlohmann/json.hpp>

namespace rl::model {

void BindPromptFlags(CommandLine& cl, CLI::App* sub, PromptFlags* f, bool answers) {
  cl.Require(cl.Bind(sub, "--model", &f->model));
  cl.Bind(sub, "--chat-template", &f->chat_template);
  cl.Bind(sub, "--chat-template-vars", &f->chat_template_vars);
  cl.Bind(sub, "--prompt-key", &f->dataset.prompt_key);
  cl.Bind(sub, "--messages-key", &f->dataset.messages_key);
  cl.Bind(sub, "--system-prompt", &f->dataset.system_prompt);
  if (answers) cl.Bind(sub, "--answer-key", &f->dataset.answer_key);
}

Result<PromptEncoder> OpenPromptEncoder(const PromptFlags& f) {
  nlohmann::ordered_json vars;
  if (!f.chat_template_vars.empty()) {
    vars = nlohmann::ordered_json::parse(f.chat_template_vars, nullptr, false);
    if (!vars.is_object()) {
      return Status::InvalidArgument("--chat-template-vars: want a JSON object, e.g. '{\"enable_thinking\": false}'");
    }
  }
  RL_ASSIGN_OR_RETURN(ModelDir dir, OpenModelDir(f.model));
  return PromptEncoder::Create(dir, f.chat_template, vars);
}

}  // namespace rl::model
