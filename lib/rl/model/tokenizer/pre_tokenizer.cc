#include "rl/model/tokenizer/pre_tokenizer.h"

#include <algorithm>

namespace rl::tokenizer {
namespace {

using json = nlohmann::json;

// GPT-2's pattern, which ByteLevel applies when use_regex is true.
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

Result<std::string> TypeOf(const json& j, const char* what) {
  if (!j.is_object()) return Status::Config(std::string("tokenizer.json: ") + what + " is not an object");
  auto t = j.find("type");
  if (t == j.end() || !t->is_string()) {
    return Status::Config(std::string("tokenizer.json: ") + what + " has no \"type\"");
  }
  return t->get<std::string>();
}

Result<bool> BoolField(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return Status::Config(std::string("tokenizer.json: ") + key + " is not a boolean");
  return it->get<bool>();
}

// Quotes regex metacharacters so that a String pattern matches literally.
std::string QuoteLiteral(const std::string& s) { return "\\Q" + s + "\\E"; }

}  // namespace

Result<Normalizer> Normalizer::Load(const json& j) {
  Normalizer n;
  if (j.is_null()) return n;
  RL_ASSIGN_OR_RETURN(std::string type, TypeOf(j, "normalizer"));
  if (type == "Sequence") {
    auto list = j.find("normalizers");
    if (list == j.end() || !list->is_array()) return Status::Config("tokenizer.json: normalizer Sequence has no \"normalizers\" list");
    for (const auto& item : *list) {
      RL_ASSIGN_OR_RETURN(Normalizer inner, Load(item));
      n.forms_.insert(n.forms_.end(), inner.forms_.begin(), inner.forms_.end());
    }
    return n;
  }
  if (type == "NFC") n.forms_.push_back(NormalForm::kNfc);
  else if (type == "NFD") n.forms_.push_back(NormalForm::kNfd);
  else if (type == "NFKC") n.forms_.push_back(NormalForm::kNfkc);
  else if (type == "NFKD") n.forms_.push_back(NormalForm::kNfkd);
  else return Status::Config("tokenizer.json: normalizer type '" + type + "' is not supported");
  return n;
}

Result<std::string> Normalizer::Apply(std::string_view text) const {
  std::string out(text);
  for (NormalForm f : forms_) {
    RL_ASSIGN_OR_RETURN(out, Normalize(f, out));
  }
  return out;
}

Result<PreTokenizer> PreTokenizer::Load(const json& j) {
  PreTokenizer p;
  if (!j.is_null()) RL_RETURN_IF_ERROR(LoadStage(j, &p.stages_));
  return p;
}

Status PreTokenizer::LoadStage(const json& j, std::vector<Stage>* stages) {
  RL_ASSIGN_OR_RETURN(std::string type, TypeOf(j, "pre_tokenizer"));
  if (type == "Sequence") {
    auto list = j.find("pretokenizers");
    if (list == j.end() || !list->is_array()) return Status::Config("tokenizer.json: pre_tokenizer Sequence has no \"pretokenizers\" list");
    for (const auto& item : *list) RL_RETURN_IF_ERROR(LoadStage(item, stages));
    return Status::OK();
  }
  Stage s;
  if (type == "ByteLevel") {
    s.kind = Stage::kByteLevel;
    RL_ASSIGN_OR_RETURN(s.add_prefix_space, BoolField(j, "add_prefix_space", true));
    RL_ASSIGN_OR_RETURN(bool use_regex, BoolField(j, "use_regex", true));
    if (use_regex) {
      RL_ASSIGN_OR_RETURN(s.regex, Regex::Compile(kGpt2Pattern));
    }
  } else if (type == "Split") {
    s.kind = Stage::kSplit;
    auto pattern = j.find("pattern");
    if (pattern == j.end() || !pattern->is_object()) return Status::Config("tokenizer.json: Split has no pattern object");
    auto re = pattern->find("Regex");
    auto str = pattern->find("String");
    if (re != pattern->end() && re->is_string()) {
      RL_ASSIGN_OR_RETURN(s.regex, Regex::Compile(re->get<std::string>()));
    } else if (str != pattern->end() && str->is_string()) {
      RL_ASSIGN_OR_RETURN(s.regex, Regex::Compile(QuoteLiteral(str->get<std::string>())));
    } else {
      return Status::Config("tokenizer.json: Split pattern is neither {\"Regex\": ...} nor {\"String\": ...}");
    }
    auto behavior = j.find("behavior");
    const std::string b = behavior != j.end() && behavior->is_string() ? behavior->get<std::string>() : "";
    if (b == "Removed") s.behavior = Behavior::kRemoved;
    else if (b == "Isolated") s.behavior = Behavior::kIsolated;
    else if (b == "MergedWithPrevious") s.behavior = Behavior::kMergedWithPrevious;
    else if (b == "MergedWithNext") s.behavior = Behavior::kMergedWithNext;
    else if (b == "Contiguous") s.behavior = Behavior::kContiguous;
    else return Status::Config("tokenizer.json: Split behavior '" + b + "' is not supported");
    RL_ASSIGN_OR_RETURN(s.invert, BoolField(j, "invert", false));
  } else {
    return Status::Config("tokenizer.json: pre_tokenizer type '" + type + "' is not supported");
  }
  stages->push_back(std::move(s));
  return Status::OK();
}

// tokenizers' NormalizedString::split: matches and the gaps between them, shaped by behavior.
Status PreTokenizer::Split(const Stage& stage, const std::string& piece, std::vector<std::string>* out) {
  std::vector<std::pair<std::pair<size_t, size_t>, bool>> spans;  // (start, end), is_match
  size_t prev = 0;
  RL_RETURN_IF_ERROR(stage.regex->FindAll(piece, [&](size_t start, size_t end) {
    if (prev != start) spans.push_back({{prev, start}, false});
    spans.push_back({{start, end}, true});
    prev = end;
  }));
  if (prev != piece.size()) spans.push_back({{prev, piece.size()}, false});
  if (stage.invert) {
    for (auto& s : spans) s.second = !s.second;
  }
  // Exactly tokenizers' folds, MergedWithNext walking from the right.
  std::vector<std::pair<size_t, size_t>> parts;
  bool previous_match = false;
  if (stage.behavior == Behavior::kMergedWithNext) {
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
      if (it->second && !previous_match && !parts.empty()) parts.back().first = it->first.first;
      else parts.push_back(it->first);
      previous_match = it->second;
    }
    std::reverse(parts.begin(), parts.end());
  } else {
    for (const auto& [span, is_match] : spans) {
      const bool merge = !parts.empty() &&
          ((stage.behavior == Behavior::kContiguous && is_match == previous_match) ||
           (stage.behavior == Behavior::kMergedWithPrevious && is_match && !previous_match));
      if (stage.behavior == Behavior::kRemoved && is_match) {
        // dropped
      } else if (merge) {
        parts.back().second = span.second;
      } else {
        parts.push_back(span);
      }
      previous_match = is_match;
    }
  }
  for (const auto& [start, end] : parts) {
    if (end > start) out->push_back(piece.substr(start, end - start));
  }
  return Status::OK();
}

Status PreTokenizer::Apply(std::vector<std::string>* pieces) const {
  for (const Stage& stage : stages_) {
    std::vector<std::string> next;
    next.reserve(pieces->size());
    for (std::string& piece : *pieces) {
      if (stage.kind == Stage::kSplit) {
        RL_RETURN_IF_ERROR(Split(stage, piece, &next));
        continue;
      }
      if (stage.add_prefix_space && piece.compare(0, 1, " ") != 0) piece.insert(0, " ");
      const size_t first = next.size();
      if (stage.regex) {
        Stage isolated = stage;
        isolated.behavior = Behavior::kIsolated;
        RL_RETURN_IF_ERROR(Split(isolated, piece, &next));
      } else if (!piece.empty()) {
        next.push_back(std::move(piece));
      }
      for (size_t i = first; i < next.size(); ++i) {
        std::string mapped;
        mapped.reserve(next[i].size() * 2);
        for (char c : next[i]) mapped += ByteToUnicode(static_cast<uint8_t>(c));
        next[i] = std::move(mapped);
      }
    }
    *pieces = std::move(next);
  }
  return Status::OK();
}

}  // namespace rl::tokenizer
