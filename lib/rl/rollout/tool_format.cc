#include "rl/rollout/tool_format.h"

#include <cctype>

namespace rl::rollout {
namespace {

// Marker strings no template writes of its own.
constexpr const char* kUser = "rl_marker_user_turn";
constexpr const char* kName = "rl_marker_tool_name";
constexpr const char* kArgument = "rl_marker_argument";
constexpr const char* kOutput = "rl_marker_tool_output";

bool Blank(const std::string& s) {
  for (unsigned char c : s) {
    if (!std::isspace(c)) return false;
  }
  return true;
}

// The end of the JSON object that opens at text[open] (braces counted outside strings); npos when
// it does not close.
size_t ObjectEnd(const std::string& text, size_t open) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = open; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}' && --depth == 0) {
      return i + 1;
    }
  }
  return std::string::npos;
}

// The text of each token of `text` (special tokens parsed, as the template's output is encoded).
Result<std::vector<std::string>> TokenTexts(const model::ModelDir& dir, const std::string& text) {
  model::EncodeOptions eo;
  eo.add_special_tokens = false;
  eo.parse_special_tokens = true;
  RL_ASSIGN_OR_RETURN(std::vector<int64_t> ids, dir.tokenizer->EncodeWith(text, eo));
  std::vector<std::string> texts;
  model::DecodeOptions d;
  d.skip_special_tokens = false;
  for (int64_t id : ids) {
    RL_ASSIGN_OR_RETURN(std::string t, dir.tokenizer->DecodeWith({id}, d));
    texts.push_back(std::move(t));
  }
  return texts;
}

}  // namespace

Result<ToolFormat> ToolFormatFromTemplate(const model::PromptEncoder& encoder, ToolFormat base) {
  if (!encoder.has_template()) return Status::Config("--tool-format template: the model has no chat template");
  const nlohmann::ordered_json call = {{"type", "function"},
                                       {"function", {{"name", kName}, {"arguments", {{"x", kArgument}}}}}};
  const nlohmann::ordered_json messages = {
      {{"role", "user"}, {"content", kUser}},
      {{"role", "assistant"}, {"content", ""}, {"tool_calls", nlohmann::ordered_json::array({call})}},
      {{"role", "tool"}, {"name", kName}, {"tool_call_id", "call_0"}, {"content", kOutput}}};
  auto rendered = encoder.Render(messages, true);
  if (!rendered.ok()) return rendered.status().WithContext("--tool-format template: rendering a tool call");
  const std::string& r = *rendered;
  const size_t user = r.find(kUser), name = r.find(kName);
  if (user == std::string::npos || name == std::string::npos || name < user) {
    return Status::Config("--tool-format template: the chat template does not render tool calls");
  }
  const size_t open = r.rfind('{', name);
  const size_t end = open == std::string::npos || open < user ? std::string::npos : ObjectEnd(r, open);
  const size_t output = end == std::string::npos ? std::string::npos : r.find(kOutput, end);
  if (output == std::string::npos) {
    return Status::Config("--tool-format template: the chat template does not render a tool's turn after its call");
  }
  // The opening tag: the last token before the call's JSON that is not white space.
  RL_ASSIGN_OR_RETURN(std::vector<std::string> before, TokenTexts(encoder.dir(), r.substr(user, open - user)));
  while (!before.empty() && Blank(before.back())) before.pop_back();
  // The closing tag: the first token after it that is not white space; the result's opening text
  // is the rest, up to the output.
  const std::string between = r.substr(end, output - end);
  RL_ASSIGN_OR_RETURN(std::vector<std::string> after, TokenTexts(encoder.dir(), between));
  size_t skip = 0, k = 0;
  while (k < after.size() && Blank(after[k])) skip += after[k++].size();
  if (before.empty() || k == after.size() || between.compare(skip, after[k].size(), after[k]) != 0) {
    return Status::Config("--tool-format template: no tags around the tool call in the chat template's output");
  }
  ToolFormat f = std::move(base);
  f.call_open = before.back();
  f.call_close = after[k];
  // A tag must be the template's own: text it writes for a plain answer too (a role header) would
  // make every answer a call.
  auto plain = encoder.Render({{{"role", "user"}, {"content", kUser}}, {{"role", "assistant"}, {"content", kUser}}},
                              false);
  if (!plain.ok()) return plain.status().WithContext("--tool-format template: rendering an answer");
  // Only the turns count: a system prompt listing the tools (Qwen's, with `tools` given) names the
  // tags as text.
  const size_t turns = plain->find(kUser);
  if (plain->find(f.call_open, turns == std::string::npos ? 0 : turns) != std::string::npos) {
    return Status::Config("--tool-format template: the chat template writes no tag of its own before a tool call "
                          "(the JSON follows '" + f.call_open + "'); give --tool-format tags and the tags");
  }
  f.result_open = between.substr(skip + f.call_close.size());
  f.result_close = r.substr(output + std::string(kOutput).size());
  return f;
}

Result<ToolFormat> ResolveToolFormat(const std::string& mode, const model::PromptEncoder* encoder, ToolFormat given) {
  if (mode == "tags") return given;
  if (mode != "template" && mode != "auto") {
    return Status::InvalidArgument("--tool-format: '" + mode + "' is not tags, template or auto");
  }
  if (encoder == nullptr || !encoder->has_template()) {
    if (mode == "auto") return given;
    return Status::Config("--tool-format template: the model has no chat template");
  }
  auto f = ToolFormatFromTemplate(*encoder, given);
  if (!f.ok() && mode == "auto") return given;
  return f;
}

}  // namespace rl::rollout
