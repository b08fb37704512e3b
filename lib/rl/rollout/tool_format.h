// Where the tags of a tool conversation come from (rl-rollout --tool-format):
//   tags      the ToolFormat given (--call-open, --call-close, --result-open, --result-close): a
//             documented tag pair for models whose chat template has no tool format (the demo's
//             <call> </call> <result> </result>)
//   template  from the model's chat template, so that a conversation is tokens the template
//             itself would render: a tool call is what the template writes around a call's JSON
//             (Qwen's and Hermes's <tool_call> ... </tool_call>), and a result is what it writes
//             for a `tool` message after that call up to the next assistant turn's generation
//             prompt (Qwen3: "<|im_end|>\n<|im_start|>user\n<tool_response>\n" OUTPUT
//             "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"). Found by rendering one
//             conversation with marker strings (a user turn, an assistant turn with one tool call,
//             the tool's turn) and reading the text around them.
//   auto      template when the model has a chat template that writes tool calls between tags,
//             else tags
// Thread safety: pure functions of their arguments.
#pragma once

#include <string>

#include "rl/core/status.h"
#include "rl/model/prompt_encoder.h"
#include "rl/rollout/conversation.h"

namespace rl::rollout {

// The tags `encoder`'s chat template writes, on top of `base` (its default tool and result limit
// kept). Config when there is no template, when it does not render a tool call and a tool turn,
// or when it writes no tag of its own before a call (Llama 3.1 writes the bare JSON: a call could
// not be told from an answer).
Result<ToolFormat> ToolFormatFromTemplate(const model::PromptEncoder& encoder, ToolFormat base);

// mode: "tags", "template" or "auto" (above); encoder may be null (no template: tags).
// InvalidArgument for another mode; Config when "template" cannot be had.
Result<ToolFormat> ResolveToolFormat(const std::string& mode, const model::PromptEncoder* encoder, ToolFormat given);

}  // namespace rl::rollout
