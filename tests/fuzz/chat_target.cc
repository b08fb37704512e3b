// Fuzz entry point over chat templates: see targets.h. Kept apart from targets.cc, as the
// tokenizer's is, so that the queue targets do not link the chat library.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "rl/model/chat/chat_template.h"
#include "targets.h"

namespace rl::fuzz {
namespace {

// What a template sees when the input brings no messages of its own: every role and field the
// chat templates of real models read (tool calls, tool results, reasoning, a system prompt).
const char kConversation[] = R"([
  {"role": "system", "content": "Be brief."},
  {"role": "user", "content": "What is 2 + 3?"},
  {"role": "assistant", "content": "", "reasoning_content": "add them",
   "tool_calls": [{"type": "function", "function": {"name": "calc", "arguments": {"expression": "2+3"}}}]},
  {"role": "tool", "name": "calc", "content": "5"},
  {"role": "assistant", "content": "5"}])";

const char kTools[] = R"([{"type": "function", "function": {"name": "calc", "description": "integer arithmetic",
  "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}])";

}  // namespace

int FuzzChatTemplate(const uint8_t* data, size_t size) {
  // "template|#|messages as JSON": both parts come from the fuzzer; messages that are not a
  // JSON array are the fixed conversation above.
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t at = all.find("|#|");
  const std::string source(all.substr(0, at));
  auto tpl = chat::ChatTemplate::Parse(source);
  if (!tpl.ok()) return 0;
  nlohmann::ordered_json messages;
  if (at != std::string_view::npos) {
    messages = nlohmann::ordered_json::parse(all.substr(at + 3), nullptr, /*allow_exceptions=*/false);
  }
  if (!messages.is_array()) messages = nlohmann::ordered_json::parse(kConversation);
  chat::ChatOptions o;
  o.now = 1700000000;  // strftime_now: the same output for the same input
  o.max_output_bytes = 1 << 20;  // keeps each run fast; the limit itself is what is tested
  o.variables = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"enable_thinking", false}};
  int rendered = 0;
  for (bool prompt : {false, true}) {
    o.add_generation_prompt = prompt;
    o.tools = prompt ? nlohmann::ordered_json::parse(kTools) : nlohmann::ordered_json();
    rendered += tpl->Render(messages, o).ok() ? 1 : 0;
  }
  return rendered;
}

}  // namespace rl::fuzz
