#include "rl/model/tokenizer/processors.h"

#include "rl/core/json_field.h"
#include "rl/model/tokenizer/unicode.h"

namespace rl::tokenizer {
namespace {

using json = nlohmann::json;

Result<std::string> TypeOf(const json& j, const char* what) {
  auto t = j.is_object() ? j.find("type") : j.end();
  if (!j.is_object() || t == j.end() || !t->is_string()) {
    return Status::Config(std::string("tokenizer.json: ") + what + " has no \"type\"");
  }
  return t->get<std::string>();
}

// A [token, id] pair, as Roberta/BertProcessing spell cls and sep.
Result<int64_t> PairId(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_integer() || (*it)[1].get<int64_t>() < 0) {
    return Status::Config(std::string("tokenizer.json: post_processor ") + key + " is not [token, id]");
  }
  return (*it)[1].get<int64_t>();
}

// The ids of one TemplateProcessing special token, looked up in its special_tokens map.
Status TemplateIds(const json& special_tokens, const std::string& name, std::vector<int64_t>* out) {
  auto it = special_tokens.is_object() ? special_tokens.find(name) : special_tokens.end();
  if (it == special_tokens.end() || !it->is_object() || !it->contains("ids") || !(*it)["ids"].is_array()) {
    return Status::Config("tokenizer.json: TemplateProcessing names special token '" + name +
                          "' but special_tokens has no ids for it");
  }
  for (const auto& id : (*it)["ids"]) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) return Status::Config("tokenizer.json: TemplateProcessing id of '" + name + "' is not a number");
    out->push_back(id.get<int64_t>());
  }
  return Status::OK();
}

}  // namespace

Result<PostProcessor> PostProcessor::Load(const json& j) {
  PostProcessor p;
  if (!j.is_null()) RL_RETURN_IF_ERROR(p.LoadOne(j));
  return p;
}

Status PostProcessor::LoadOne(const json& j) {
  RL_ASSIGN_OR_RETURN(std::string type, TypeOf(j, "post_processor"));
  if (type == "ByteLevel") return Status::OK();
  if (type == "Sequence") {
    auto list = j.find("processors");
    if (list == j.end() || !list->is_array()) return Status::Config("tokenizer.json: post_processor Sequence has no \"processors\" list");
    for (const auto& item : *list) RL_RETURN_IF_ERROR(LoadOne(item));
    return Status::OK();
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    RL_ASSIGN_OR_RETURN(int64_t cls, PairId(j, "cls"));
    RL_ASSIGN_OR_RETURN(int64_t sep, PairId(j, "sep"));
    prefix_.push_back(cls);
    suffix_.insert(suffix_.begin(), sep);
    return Status::OK();
  }
  if (type != "TemplateProcessing") {
    return Status::Config("tokenizer.json: post_processor type '" + type + "' is not supported");
  }
  auto single = j.find("single");
  if (single == j.end() || !single->is_array()) return Status::Config("tokenizer.json: TemplateProcessing has no \"single\" list");
  const json special = j.contains("special_tokens") ? j["special_tokens"] : json::object();
  std::vector<int64_t> before, after;
  bool seen_sequence = false;
  for (const auto& piece : *single) {
    if (piece.is_object() && piece.contains("Sequence")) {
      const json& seq = piece["Sequence"];
      if (seen_sequence || !seq.is_object() || TextField(seq, "id") != "A") {
        return Status::Config("tokenizer.json: TemplateProcessing single template must hold $A once");
      }
      seen_sequence = true;
    } else if (piece.is_object() && piece.contains("SpecialToken") && piece["SpecialToken"].is_object() &&
               piece["SpecialToken"].contains("id") && piece["SpecialToken"]["id"].is_string()) {
      RL_RETURN_IF_ERROR(TemplateIds(special, piece["SpecialToken"]["id"].get<std::string>(),
                                     seen_sequence ? &after : &before));
    } else {
      return Status::Config("tokenizer.json: TemplateProcessing piece is neither Sequence nor SpecialToken");
    }
  }
  if (!seen_sequence) return Status::Config("tokenizer.json: TemplateProcessing single template has no $A");
  prefix_.insert(prefix_.end(), before.begin(), before.end());
  suffix_.insert(suffix_.begin(), after.begin(), after.end());
  return Status::OK();
}

Result<Decoder> Decoder::Load(const json& j) {
  Decoder d;
  if (j.is_null()) return d;
  RL_ASSIGN_OR_RETURN(std::string type, TypeOf(j, "decoder"));
  if (type != "ByteLevel") return Status::Config("tokenizer.json: decoder type '" + type + "' is not supported");
  d.byte_level_ = true;
  return d;
}

std::string Decoder::Decode(const std::vector<const std::string*>& tokens) const {
  std::string out;
  if (!byte_level_) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) out += ' ';
      out += *tokens[i];
    }
    return out;
  }
  std::string bytes;
  for (const std::string* token : tokens) {
    const size_t mark = bytes.size();
    bool all_mapped = true;
    for (size_t pos = 0; pos < token->size() && all_mapped;) {
      const int b = UnicodeToByte(NextCodePoint(*token, &pos));
      if (b < 0) all_mapped = false;
      else bytes.push_back(static_cast<char>(b));
    }
    if (!all_mapped) {  // tokenizers keeps such a token's own bytes
      bytes.resize(mark);
      bytes += *token;
    }
  }
  return Utf8Lossy(bytes);
}

}  // namespace rl::tokenizer
