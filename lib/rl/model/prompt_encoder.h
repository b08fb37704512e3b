// PromptEncoder: dataset examples to the token ids a model continues, and responses to the ids
// it is trained to produce, the same way in every role (rl-train's feeder, SFT and evaluation).
//
// Chat template (--chat-template):
//   auto  the template of the model's tokenizer_config.json when it has one, else none
//   none  no template: the prompt text is encoded with the tokenizer's post-processor (Llama 3's
//         and the demo's put <bos> first), and <bos> is put first when tokenizer_config.json asks
//         for it (add_bos_token) and the post-processor did not. A messages record, or a system
//         prompt, needs a template: DataError.
//   FILE  a Jinja chat template read from FILE
// With a template, the conversation (the example's messages, else [{"role": "user", "content":
// prompt}]) is rendered as transformers' apply_chat_template renders it with
// add_generation_prompt=true, given bos_token, eos_token and pad_token and the extra
// `variables` (e.g. {"enable_thinking": false} for Qwen3), and the text is encoded with special
// tokens parsed and no post-processor, as transformers does.
// A response (SFT targets) is its text encoded with special tokens left as text, then <eos>:
// exactly what generation after the prompt produces when it ends.
// Thread safety: immutable after Create; any method may be called from any thread at once.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/chat/chat_template.h"
#include "rl/model/model_dir.h"
#include "rl/task/dataset.h"

namespace rl::model {

class PromptEncoder {
 public:
  // chat_template: "auto", "none" or a file name. variables: a JSON object (or null).
  // NotFound/IOError for a template file that cannot be read; DataError for one that does not parse.
  static Result<PromptEncoder> Create(const ModelDir& dir, const std::string& chat_template,
                                      const nlohmann::ordered_json& variables = nullptr);

  // The ids of the example's prompt (see the header).
  Result<std::vector<int64_t>> Prompt(const task::Example& e) const;
  // The prompt as text: the rendered conversation with a template, else the prompt itself.
  Result<std::string> PromptText(const task::Example& e) const;
  // Messages rendered by the template with the role's variables (what PromptText does for a
  // record): for the pieces of a conversation a record does not hold, such as a tool's turn.
  // Config without a template.
  Result<std::string> Render(const nlohmann::ordered_json& messages, bool add_generation_prompt) const;
  // The ids of a response the model should produce, <eos> last.
  Result<std::vector<int64_t>> Response(const std::string& text) const;
  // Response ids back to text, special tokens left out.
  Result<std::string> Decode(const std::vector<int64_t>& ids) const;

  bool has_template() const { return tpl_ != nullptr; }
  const ModelDir& dir() const { return *dir_; }

 private:
  std::shared_ptr<const ModelDir> dir_;
  std::shared_ptr<const chat::ChatTemplate> tpl_;  // null: none
  nlohmann::ordered_json variables_;
};

// The text a verifier and a person see as the example's question: its prompt, or the content
// of the last user message of a messages record.
std::string QuestionOf(const task::Example& e);

}  // namespace rl::model
