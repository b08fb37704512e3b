// Chat templates: renders the `chat_template` of a Hugging Face tokenizer_config.json for a
// conversation, byte for byte as transformers' apply_chat_template(tokenize=False) does.
//
// transformers renders with jinja2's ImmutableSandboxedEnvironment(trim_blocks=True,
// lstrip_blocks=True) plus the loopcontrols extension; its globals are raise_exception(msg) and
// strftime_now(fmt) (local time), its tojson filter is json.dumps(x, ensure_ascii=False,
// indent=None, separators=None, sort_keys=False), and the template sees messages, tools,
// documents, add_generation_prompt and the tokenizer's special tokens. This is a Jinja
// interpreter of its own (jinja_*.h) with those settings.
//
// Supported Jinja (what chat templates use; see jinja_parser.h, jinja_filters.h, jinja_methods.h):
//   {{ }} {% %} {# #}, whitespace control with - and +, {% raw %}
//   if/elif/else; for (tuple targets, dict items, inline if, else, loop.index/index0/revindex/
//   revindex0/first/last/length/previtem/nextitem/cycle); break/continue; set (name, tuple,
//   ns.attr, {% set x %}..{% endset %}); namespace(); macro and call with caller(); filter
//   blocks; with; generation (renders its body)
//   literals (strings with Python escapes, ints, floats, true/false/none, lists, tuples, dicts),
//   .attr, [key], slices [a:b:c], calls with keyword arguments, ~ + - * / // % **, comparisons,
//   in / not in, and/or/not, a if c else b, filters (|f(args)), tests (is [not] t)
// Not supported (an error, never silently different): recursive loops, *args/**kwargs in calls,
// string % formatting, str.format specs, extends/include/import/block, integers beyond 64 bits.
// Known differences: upper/lower/title/capitalize map only ASCII letters; a tuple prints as a
// list; select/map/reverse give lists where Jinja gives generators; an undefined value cannot
// be put in a dict literal (an error); a printed method shows as <function str.strip>.
// Bounds: 16 MiB of output, macros nested 64 deep, 10 million loop iterations per render,
// templates nested 128 deep; past one is an error.
//
// Man page section (for the tool that takes --chat-template):
//   CHAT TEMPLATES
//   The chat_template of tokenizer_config.json is rendered as transformers renders it
//   (Jinja2 with trim_blocks, lstrip_blocks and loop controls; raise_exception and
//   strftime_now; tojson without key sorting or HTML escaping). The Jinja subset covers
//   if/for/set/macro/call/filter/with/break/continue, namespace(), the usual expressions,
//   and the filters abs capitalize count default first float indent int items join last
//   length list lower map reject rejectattr replace reverse safe select selectattr sort string
//   title tojson trim upper; the tests defined undefined none string number integer float
//   boolean true false mapping iterable sequence callable odd even divisibleby eq/equalto ne lt
//   le gt ge in sameas lower upper; Python's str methods (strip lstrip rstrip split rsplit
//   splitlines startswith endswith replace upper lower title capitalize find count join
//   format ...) and dict methods (get items keys values). A template outside the subset, an
//   error raised by the template (raise_exception) or a misused undefined value fails with a
//   one-line message naming the template line.
//
// Thread safety: a ChatTemplate is immutable after Parse; Render may be called from many
// threads at once.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "rl/core/status.h"

namespace rl::chat {

namespace jinja {
struct Template;
}

struct ChatOptions {
  bool add_generation_prompt = false;
  // JSON schemas of the tools, or null: the template then sees `tools` as none, as with
  // transformers when no tools are passed. Same for documents.
  nlohmann::ordered_json tools;
  nlohmann::ordered_json documents;
  // More template variables, a JSON object: bos_token, eos_token, enable_thinking (Qwen3),
  // date_string (Llama 3.1), ... They override the variables above of the same name.
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
  // The clock strftime_now reads, in seconds since the epoch (shown in local time, as
  // transformers does); unset: the current time.
  std::optional<std::time_t> now;
  size_t max_output_bytes = 16u << 20;
};

class ChatTemplate {
 public:
  // A syntax error, an unknown filter or test, is a DataError "chat template line N: ...".
  static Result<ChatTemplate> Parse(const std::string& source);

  // Messages are a JSON array of objects (role, content, tool_calls, ...), with their keys in
  // the order the template should see them (parse with ordered_json). Errors are DataErrors
  // with a one-line message ("chat template line N: ..."; raise_exception's is
  // "chat template line N: raise_exception: MESSAGE"; newlines in it become \n); an output
  // above max_output_bytes, too many loop iterations or too deep macro recursion is TooLarge.
  Result<std::string> Render(const nlohmann::ordered_json& messages, const ChatOptions& options) const;

 private:
  std::shared_ptr<const jinja::Template> tpl_;
};

// Parses and renders in one call.
Result<std::string> RenderChat(const std::string& template_source, const nlohmann::ordered_json& messages,
                               const ChatOptions& options);

// The chat template of a tokenizer_config.json: its `chat_template` string, or from a list of
// {name, template} the one named `name` ("default" when empty). NotFound when there is none.
Result<std::string> ChatTemplateFromConfig(const nlohmann::ordered_json& config, const std::string& name = "");

}  // namespace rl::chat
