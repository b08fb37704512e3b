// Fuzz entry point over the tokenizer loader: see targets.h. Kept apart from targets.cc so that
// the queue targets do not link the tokenizer library.
#include <string>
#include <string_view>
#include <vector>

#include "rl/model/tokenizer/hf_tokenizer.h"
#include "targets.h"

namespace rl::fuzz {

void FuzzTokenizer(const uint8_t* data, size_t size) {
  // "tokenizer.json text|#|text to encode": both parts come from the fuzzer.
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t at = all.find("|#|");
  const std::string_view json = all.substr(0, at);
  const std::string_view text = at == std::string_view::npos ? std::string_view() : all.substr(at + 3);
  auto tok = tokenizer::HfTokenizer::FromJson(json);
  if (!tok.ok()) return;
  for (bool special : {true, false}) {
    model::EncodeOptions o;
    o.parse_special_tokens = special;
    o.add_special_tokens = special;
    auto ids = (*tok)->EncodeWith(text, o);
    if (ids.ok()) (void)(*tok)->DecodeWith(*ids, {!special});
  }
  std::vector<int64_t> ids;  // the text's bytes as ids, in and out of range
  for (unsigned char c : text) ids.push_back(static_cast<int64_t>(c) - 8);
  (void)(*tok)->Decode(ids);
  for (int64_t id : ids) (void)(*tok)->IdToToken(id);
}

}  // namespace rl::fuzz
