#include "rl/model/tokenizer/hf_tokenizer.h"

#include <limits>

#include "rl/model/tokenizer/unicode.h"

namespace rl::tokenizer {
namespace {

using json = nlohmann::json;

const json& Field(const json& root, const char* key) {
  static const json kNull;
  auto it = root.find(key);
  return it == root.end() ? kNull : *it;
}

}  // namespace

Result<std::shared_ptr<const HfTokenizer>> HfTokenizer::FromJson(std::string_view json_text,
                                                                 const SpecialTokenNames& names) {
  json root = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Status::Config("tokenizer.json: not valid JSON");
  if (!root.is_object()) return Status::Config("tokenizer.json: not a JSON object");
  const json& model = Field(root, "model");
  if (!model.is_object()) return Status::Config("tokenizer.json: no \"model\" object");
  const json& type = Field(model, "type");
  if (!type.is_null() && !type.is_string()) return Status::Config("tokenizer.json: model.type is not a string");
  // Files from before "type" was written hold a BPE model when they have merges.
  const std::string model_type = type.is_string() ? type.get<std::string>() : model.contains("merges") ? "BPE" : "";
  if (model_type != "BPE") {
    return Status::Config("tokenizer.json: model type '" + model_type + "' is not supported (only BPE)");
  }
  std::shared_ptr<HfTokenizer> t(new HfTokenizer());
  RL_ASSIGN_OR_RETURN(t->model_, Bpe::Load(model));
  RL_ASSIGN_OR_RETURN(t->normalizer_, Normalizer::Load(Field(root, "normalizer")));
  RL_ASSIGN_OR_RETURN(t->pre_tokenizer_, PreTokenizer::Load(Field(root, "pre_tokenizer")));
  RL_ASSIGN_OR_RETURN(t->post_processor_, PostProcessor::Load(Field(root, "post_processor")));
  RL_ASSIGN_OR_RETURN(t->decoder_, Decoder::Load(Field(root, "decoder")));
  RL_ASSIGN_OR_RETURN(t->added_, AddedVocabulary::Load(Field(root, "added_tokens"), t->model_, t->normalizer_));
  t->vocab_size_ = t->model_.max_id() + 1;
  for (const AddedToken& a : t->added_.tokens()) t->vocab_size_ = std::max(t->vocab_size_, a.id + 1);
  for (const auto& list : {t->post_processor_.prefix(), t->post_processor_.suffix()}) {
    for (int64_t id : list) {
      if (!t->IdToToken(id)) return Status::Config("tokenizer.json: post_processor adds id " + std::to_string(id) + ", which is no token");
    }
  }
  const std::pair<const std::string*, int64_t*> specials[] = {
      {&names.pad, &t->pad_id_}, {&names.bos, &t->bos_id_}, {&names.eos, &t->eos_id_}};
  for (const auto& [name, id] : specials) {
    if (name->empty()) continue;
    auto found = t->TokenToId(*name);
    if (!found) return Status::Config("tokenizer: special token '" + *name + "' is not in the vocabulary");
    *id = *found;
  }
  return std::shared_ptr<const HfTokenizer>(std::move(t));
}

Result<std::vector<int64_t>> HfTokenizer::EncodeWith(std::string_view text,
                                                     const model::EncodeOptions& options) const {
  RL_RETURN_IF_ERROR(CheckEncoderInput(text));
  RL_ASSIGN_OR_RETURN(std::vector<Piece> pieces, added_.Split(text, normalizer_, options.parse_special_tokens));
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3 + 8);
  if (options.add_special_tokens) ids = post_processor_.prefix();
  for (Piece& piece : pieces) {
    if (piece.id >= 0) ids.push_back(piece.id);
    else RL_RETURN_IF_ERROR(EncodePiece(std::move(piece.text), &ids));
  }
  if (options.add_special_tokens) ids.insert(ids.end(), post_processor_.suffix().begin(), post_processor_.suffix().end());
  return ids;
}

Status HfTokenizer::EncodePiece(std::string text, std::vector<int64_t>* ids) const {
  std::vector<std::string> words;
  words.push_back(std::move(text));
  RL_RETURN_IF_ERROR(pre_tokenizer_.Apply(&words));
  for (const std::string& w : words) RL_RETURN_IF_ERROR(model_.Tokenize(w, ids));
  return Status::OK();
}

Result<std::string> HfTokenizer::DecodeWith(const std::vector<int64_t>& ids,
                                            const model::DecodeOptions& options) const {
  std::vector<const std::string*> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    if (const AddedToken* a = added_.ById(id)) {
      if (!(options.skip_special_tokens && a->special)) tokens.push_back(&a->content);
    } else if (const std::string* s = model_.IdToToken(id)) {
      tokens.push_back(s);
    }  // an id with no token is skipped, as tokenizers does
  }
  return decoder_.Decode(tokens);
}

std::optional<int64_t> HfTokenizer::TokenToId(std::string_view token) const {
  if (const AddedToken* a = added_.ByContent(token)) return a->id;
  return model_.TokenToId(token);
}

std::optional<std::string> HfTokenizer::IdToToken(int64_t id) const {
  if (const AddedToken* a = added_.ById(id)) return a->content;
  if (const std::string* s = model_.IdToToken(id)) return *s;
  return std::nullopt;
}

bool HfTokenizer::IsSpecial(int64_t id) const {
  const AddedToken* a = added_.ById(id);
  return a != nullptr && a->special;
}

}  // namespace rl::tokenizer
