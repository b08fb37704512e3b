#include "rl/model/tokenizer/added_vocabulary.h"

#include <algorithm>

#include "rl/model/tokenizer/unicode.h"

namespace rl::tokenizer {
namespace {

using json = nlohmann::json;

bool LastIsWord(std::string_view s) {
  if (s.empty()) return false;
  size_t start = s.size() - 1;
  while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
  size_t pos = start;
  return IsAlphanumeric(NextCodePoint(s, &pos));
}

bool FirstIsWord(std::string_view s) {
  size_t pos = 0;
  return !s.empty() && IsAlphanumeric(NextCodePoint(s, &pos));
}

// Where the whitespace that ends s begins.
size_t TrailingSpaceStart(std::string_view s) {
  size_t start = s.size();
  while (start > 0) {
    size_t at = start - 1;
    while (at > 0 && (static_cast<uint8_t>(s[at]) & 0xC0) == 0x80) --at;
    size_t pos = at;
    if (!IsWhitespace(NextCodePoint(s, &pos))) break;
    start = at;
  }
  return start;
}

// How many bytes of whitespace begin s.
size_t LeadingSpaceLength(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t next = pos;
    if (!IsWhitespace(NextCodePoint(s, &next))) break;
    pos = next;
  }
  return pos;
}

Result<AddedToken> ParseToken(const json& j) {
  AddedToken t;
  if (!j.is_object()) return Status::Config("tokenizer.json: an added token is not an object");
  auto id = j.find("id");
  auto content = j.find("content");
  if (id == j.end() || !id->is_number_integer() || id->get<int64_t>() < 0 || id->get<int64_t>() >= (int64_t{1} << 31)) {
    return Status::Config("tokenizer.json: an added token has no valid \"id\"");
  }
  if (content == j.end() || !content->is_string() || content->get_ref<const std::string&>().empty()) {
    return Status::Config("tokenizer.json: added token " + std::to_string(id->get<uint64_t>()) + " has no \"content\"");
  }
  t.id = id->get<int64_t>();
  t.content = content->get<std::string>();
  if (FindInvalidUtf8(t.content) != std::string::npos) return Status::Config("tokenizer.json: added token is not UTF-8");
  const std::pair<const char*, bool*> flags[] = {{"single_word", &t.single_word}, {"lstrip", &t.lstrip},
      {"rstrip", &t.rstrip}, {"normalized", &t.normalized}, {"special", &t.special}};
  for (const auto& [key, out] : flags) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_boolean()) return Status::Config("tokenizer.json: added token '" + t.content + "': " + key + " is not a boolean");
    *out = it->get<bool>();
  }
  return t;
}

}  // namespace

Result<AddedVocabulary> AddedVocabulary::Load(const json& j, const Bpe& model, const Normalizer& normalizer) {
  AddedVocabulary v;
  if (j.is_null()) return v;
  if (!j.is_array()) return Status::Config("tokenizer.json: added_tokens is not a list");
  const int64_t model_size = model.size();
  int64_t max_added = -1;
  for (const auto& item : j) {
    RL_ASSIGN_OR_RETURN(AddedToken t, ParseToken(item));
    auto known = v.by_content_.find(t.content);
    if (known != v.by_content_.end()) continue;  // tokenizers keeps the first
    // tokenizers' AddedVocabulary::add_tokens: the model's id, else after the largest so far.
    int64_t expected = max_added >= model_size || model_size == 0 ? max_added + 1 : model_size;
    if (max_added < 0) expected = model_size;
    if (auto in_model = model.TokenToId(t.content)) expected = *in_model;
    t.id = expected;  // tokenizers ignores the file's id (it only warns when they differ)
    max_added = std::max(max_added, expected);
    v.by_id_[t.id] = v.tokens_.size();
    v.by_content_[t.content] = v.tokens_.size();
    v.tokens_.push_back(std::move(t));
  }
  for (size_t i = 0; i < v.tokens_.size(); ++i) {
    Matcher& m = v.tokens_[i].normalized ? v.normalized_ : v.raw_;
    std::string text = v.tokens_[i].content;
    if (v.tokens_[i].normalized && !normalizer.empty()) {
      RL_ASSIGN_OR_RETURN(text, normalizer.Apply(text));
    }
    if (text.empty()) continue;
    m.patterns.push_back(i);
    m.texts.push_back(std::move(text));
  }
  v.BuildMatcher(&v.raw_);
  v.BuildMatcher(&v.normalized_);
  return v;
}

void AddedVocabulary::BuildMatcher(Matcher* m) const {
  m->by_first.assign(256, {});
  for (size_t p = 0; p < m->patterns.size(); ++p) {
    m->by_first[static_cast<uint8_t>(m->texts[p][0])].push_back(p);
  }
  for (auto& list : m->by_first) {
    std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) {
      return m->texts[a].size() > m->texts[b].size();
    });
  }
}

// tokenizers' AddedVocabulary::find_matches over one piece of text.
void AddedVocabulary::FindMatches(std::string_view text, const Matcher& m, bool parse_special,
                                  std::vector<Piece>* out) const {
  size_t emitted = 0;  // end of the last piece pushed
  size_t at = 0;       // where the next leftmost-longest search starts
  while (at < text.size() && !m.patterns.empty()) {
    size_t found = std::string_view::npos, which = 0;
    for (size_t i = at; i < text.size() && found == std::string_view::npos; ++i) {
      for (size_t p : m.by_first[static_cast<uint8_t>(text[i])]) {
        if (text.compare(i, m.texts[p].size(), m.texts[p]) == 0) {
          found = i;
          which = p;
          break;
        }
      }
    }
    if (found == std::string_view::npos) break;
    size_t start = found, stop = found + m.texts[which].size();
    at = stop;
    const AddedToken& t = tokens_[m.patterns[which]];
    if (t.special && !parse_special) continue;
    if (t.single_word && (LastIsWord(text.substr(0, start)) || FirstIsWord(text.substr(stop)))) continue;
    if (t.lstrip) start = std::max(TrailingSpaceStart(text.substr(0, start)), emitted);
    if (t.rstrip) stop += LeadingSpaceLength(text.substr(stop));
    if (emitted < start) out->push_back(Piece{std::string(text.substr(emitted, start - emitted)), -1});
    out->push_back(Piece{std::string(), t.id});
    emitted = stop;
  }
  if (emitted < text.size()) out->push_back(Piece{std::string(text.substr(emitted)), -1});
}

Result<std::vector<Piece>> AddedVocabulary::Split(std::string_view text, const Normalizer& normalizer,
                                                  bool parse_special) const {
  std::vector<Piece> raw;
  FindMatches(text, raw_, parse_special, &raw);
  std::vector<Piece> out;
  for (Piece& piece : raw) {
    if (piece.id >= 0) {
      out.push_back(std::move(piece));
      continue;
    }
    std::string normal = std::move(piece.text);
    if (!normalizer.empty()) {
      RL_ASSIGN_OR_RETURN(normal, normalizer.Apply(normal));
    }
    FindMatches(normal, normalized_, parse_special, &out);
  }
  return out;
}

const AddedToken* AddedVocabulary::ById(int64_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::ByContent(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

}  // namespace rl::tokenizer
