#include "rl/model/prompt_encoder.h"

#include <filesystem>

#include "rl/core/fs.h"

namespace rl::model {
namespace {

nlohmann::ordered_json Conversation(const task::Example& e) {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (const task::Message& m : e.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
  if (e.messages.empty()) messages.push_back({{"role", "user"}, {"content", e.prompt}});
  return messages;
}

}  // namespace

Result<PromptEncoder> PromptEncoder::Create(const ModelDir& dir, const std::string& chat_template,
                                            const nlohmann::ordered_json& variables) {
  PromptEncoder p;
  p.dir_ = std::make_shared<const ModelDir>(dir);
  std::string source;
  if (chat_template == "auto") {
    source = dir.tokenizer_config.chat_template;
  } else if (chat_template != "none") {
    std::error_code ec;
    if (!std::filesystem::exists(chat_template, ec)) {
      return Status::NotFound("--chat-template: no file " + chat_template + " (or give auto or none)");
    }
    auto text = ReadFile(chat_template);
    if (!text.ok()) return text.status().WithContext("--chat-template");
    source = std::move(*text);
  }
  if (!source.empty()) {
    auto tpl = chat::ChatTemplate::Parse(source);
    if (!tpl.ok()) return tpl.status().WithContext(chat_template == "auto" ? dir.path + "/tokenizer_config.json" : chat_template);
    p.tpl_ = std::make_shared<const chat::ChatTemplate>(std::move(*tpl));
  }
  if (!variables.is_null() && !variables.is_object()) {
    return Status::InvalidArgument("chat template variables must be a JSON object");
  }
  p.variables_ = variables.is_null() ? nlohmann::ordered_json::object() : variables;
  return p;
}

Result<std::string> PromptEncoder::PromptText(const task::Example& e) const {
  if (!tpl_) {
    if (!e.messages.empty()) {
      return Status::DataError("a record of chat messages (or a system prompt) needs a chat template; "
                               "the model has none: give --chat-template FILE");
    }
    return e.prompt;
  }
  return Render(Conversation(e), true);
}

Result<std::string> PromptEncoder::Render(const nlohmann::ordered_json& messages, bool add_generation_prompt) const {
  if (!tpl_) return Status::Config("the model has no chat template");
  const tokenizer::TokenizerConfig& tc = dir_->tokenizer_config;
  chat::ChatOptions o;
  o.add_generation_prompt = add_generation_prompt;
  o.variables = {{"bos_token", tc.bos_token}, {"eos_token", tc.eos_token}, {"pad_token", tc.pad_token}};
  for (const auto& [k, v] : variables_.items()) o.variables[k] = v;
  return tpl_->Render(messages, o);
}

Result<std::vector<int64_t>> PromptEncoder::Prompt(const task::Example& e) const {
  RL_ASSIGN_OR_RETURN(std::string text, PromptText(e));
  const Tokenizer& tok = *dir_->tokenizer;
  EncodeOptions eo;
  if (tpl_) {
    eo.add_special_tokens = false;  // the template wrote every special token it wants
    eo.parse_special_tokens = true;
    return tok.EncodeWith(text, eo);
  }
  eo.add_special_tokens = true;
  eo.parse_special_tokens = false;  // a user's prompt text cannot forge a special token
  RL_ASSIGN_OR_RETURN(std::vector<int64_t> ids, tok.EncodeWith(text, eo));
  if (dir_->tokenizer_config.add_bos_token && dir_->bos_id >= 0 && (ids.empty() || ids.front() != dir_->bos_id)) {
    ids.insert(ids.begin(), dir_->bos_id);
  }
  return ids;
}

Result<std::vector<int64_t>> PromptEncoder::Response(const std::string& text) const {
  EncodeOptions eo;
  eo.add_special_tokens = false;
  eo.parse_special_tokens = false;
  RL_ASSIGN_OR_RETURN(std::vector<int64_t> ids, dir_->tokenizer->EncodeWith(text, eo));
  ids.push_back(dir_->eos_id);
  return ids;
}

Result<std::string> PromptEncoder::Decode(const std::vector<int64_t>& ids) const {
  return dir_->tokenizer->Decode(ids);
}

std::string QuestionOf(const task::Example& e) {
  if (!e.prompt.empty() || e.messages.empty()) return e.prompt;
  for (auto it = e.messages.rbegin(); it != e.messages.rend(); ++it) {
    if (it->role == "user") return it->content;
  }
  return e.messages.back().content;
}

}  // namespace rl::model
