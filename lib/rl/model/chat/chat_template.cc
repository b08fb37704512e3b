#include "rl/model/chat/chat_template.h"

#include <ctime>
#include <vector>

#include "rl/core/json_field.h"
#include "rl/model/chat/jinja_eval.h"
#include "rl/model/chat/jinja_parser.h"

namespace rl::chat {
namespace {

using jinja::Json;
using jinja::Kwargs;
using jinja::Value;

// "chat template line N: ..." on one line.
Status Tidy(const Status& st) {
  std::string m = "chat template " + st.message();
  std::string one;
  for (char c : m) {
    if (c == '\n') one += "\\n";
    else if (c != '\r') one.push_back(c);
  }
  return Status::FromWire(static_cast<int>(st.code()), one);
}

Result<Value> RaiseException(std::vector<Value>& args, Kwargs& kwargs) {
  std::string msg = args.empty() ? "" : jinja::PyStr(args[0]);
  return Status::DataError("raise_exception: " + msg);
}

Value StrftimeNow(std::optional<std::time_t> fixed) {
  return Value::FromFunction("strftime_now", [fixed](std::vector<Value>& args, Kwargs& kwargs) -> Result<Value> {
    if (args.size() != 1 || !args[0].is_string() || !kwargs.empty())
      return Status::DataError("strftime_now takes one format string");
    std::time_t t = fixed ? *fixed : std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    const std::string& fmt = args[0].str();
    if (fmt.empty()) return Value(std::string());
    for (size_t size = 256; size <= (1u << 16); size *= 4) {
      std::string buf(size, '\0');
      size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
      if (n > 0) return Value(buf.substr(0, n));
    }
    return Value(std::string());
  });
}

}  // namespace

Result<ChatTemplate> ChatTemplate::Parse(const std::string& source) {
  auto tpl = jinja::Parse(source);
  if (!tpl.ok()) return Tidy(tpl.status());
  ChatTemplate out;
  out.tpl_ = std::move(tpl).value();
  return out;
}

Result<std::string> ChatTemplate::Render(const nlohmann::ordered_json& messages, const ChatOptions& options) const {
  if (!options.variables.is_object()) return Status::InvalidArgument("chat template variables must be a JSON object");
  jinja::Variables vars;
  vars.emplace_back("raise_exception", Value::FromFunction("raise_exception", RaiseException));
  vars.emplace_back("strftime_now", StrftimeNow(options.now));
  vars.emplace_back("messages", Value(messages));
  vars.emplace_back("tools", Value(options.tools));
  vars.emplace_back("documents", Value(options.documents));
  vars.emplace_back("add_generation_prompt", Value(Json(options.add_generation_prompt)));
  for (const auto& [k, v] : options.variables.items()) vars.emplace_back(k, Value(v));
  jinja::RenderLimits limits;
  limits.max_output_bytes = options.max_output_bytes;
  auto text = jinja::Render(*tpl_, vars, limits);
  if (!text.ok()) return Tidy(text.status());
  return text;
}

Result<std::string> RenderChat(const std::string& template_source, const nlohmann::ordered_json& messages,
                               const ChatOptions& options) {
  RL_ASSIGN_OR_RETURN(ChatTemplate tpl, ChatTemplate::Parse(template_source));
  return tpl.Render(messages, options);
}

Result<std::string> ChatTemplateFromConfig(const nlohmann::ordered_json& config, const std::string& name) {
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return Status::NotFound("tokenizer config has no chat_template");
  if (it->is_string()) return it->get<std::string>();
  std::string want = name.empty() ? "default" : name;
  if (it->is_array()) {
    for (const auto& t : *it) {
      if (t.is_object() && TextField(t, "name") == want && t.contains("template") && t["template"].is_string())
        return t["template"].get<std::string>();
    }
    return Status::NotFound("tokenizer config has no chat template named '" + want + "'");
  }
  return Status::DataError("tokenizer config: chat_template is neither a string nor a list");
}

}  // namespace rl::chat
