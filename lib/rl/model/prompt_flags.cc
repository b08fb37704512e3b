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

Result<nlohmann::ordered_json> ParseChatTemplateVars(const std::string& text) {
  if (text.empty()) return nlohmann::ordered_json();
  nlohmann::ordered_json vars = nlohmann::ordered_json::parse(text, nullptr, false);
  if (!vars.is_object()) {
    return Status::InvalidArgument("--chat-template-vars: want a JSON object, e.g. '{\"enable_thinking\": false}'");
  }
  return vars;
}

Result<PromptEncoder> OpenPromptEncoder(const PromptFlags& f) {
  RL_ASSIGN_OR_RETURN(nlohmann::ordered_json vars, ParseChatTemplateVars(f.chat_template_vars));
  RL_ASSIGN_OR_RETURN(ModelDir dir, OpenModelDir(f.model));
  return PromptEncoder::Create(dir, f.chat_template, vars);
}

}  // namespace rl::model
