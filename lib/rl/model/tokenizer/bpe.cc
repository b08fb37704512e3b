#include "rl/model/tokenizer/bpe.h"

#include <queue>

#include "rl/model/tokenizer/unicode.h"

namespace rl::tokenizer {
namespace {

using json = nlohmann::json;

// An optional string field: absent or null gives "".
Result<std::string> OptionalString(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::string();
  if (!it->is_string()) return Status::Config(std::string("tokenizer.json: model.") + key + " is not a string");
  return it->get<std::string>();
}

Result<bool> OptionalBool(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  if (!it->is_boolean()) return Status::Config(std::string("tokenizer.json: model.") + key + " is not a boolean");
  return it->get<bool>();
}

}  // namespace

Result<Bpe> Bpe::Load(const json& model) {
  Bpe bpe;
  auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) {
    return Status::Config("tokenizer.json: model.vocab is missing or not an object");
  }
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (int64_t{1} << 31)) {
      return Status::Config("tokenizer.json: model.vocab['" + token + "'] is not an id");
    }
    const auto n = id.get<uint32_t>();
    bpe.vocab_[token] = n;
    if (n >= bpe.id_to_token_.size()) {
      bpe.id_to_token_.resize(n + 1);
      bpe.has_id_.resize(n + 1);
    }
    bpe.id_to_token_[n] = token;
    bpe.has_id_[n] = true;
  }
  RL_ASSIGN_OR_RETURN(bpe.prefix_, OptionalString(model, "continuing_subword_prefix"));
  RL_ASSIGN_OR_RETURN(bpe.suffix_, OptionalString(model, "end_of_word_suffix"));
  RL_ASSIGN_OR_RETURN(bpe.fuse_unk_, OptionalBool(model, "fuse_unk"));
  RL_ASSIGN_OR_RETURN(bpe.ignore_merges_, OptionalBool(model, "ignore_merges"));
  RL_ASSIGN_OR_RETURN(bool byte_fallback, OptionalBool(model, "byte_fallback"));
  if (byte_fallback) return Status::Config("tokenizer.json: BPE byte_fallback is not supported");
  auto dropout = model.find("dropout");
  if (dropout != model.end() && !dropout->is_null() &&
      !(dropout->is_number() && dropout->get<double>() == 0.0)) {
    return Status::Config("tokenizer.json: BPE dropout is not supported (encoding would be random)");
  }
  RL_ASSIGN_OR_RETURN(std::string unk, OptionalString(model, "unk_token"));
  if (!unk.empty()) {
    auto it = bpe.vocab_.find(unk);
    if (it == bpe.vocab_.end()) return Status::Config("tokenizer.json: unk_token '" + unk + "' is not in the vocabulary");
    bpe.unk_id_ = it->second;
  }
  bpe.char_id_.assign(512, -1);
  for (char32_t cp = 0; cp < 512; ++cp) {
    std::string c;
    AppendUtf8(cp, &c);
    auto it = bpe.vocab_.find(c);
    if (it != bpe.vocab_.end()) bpe.char_id_[cp] = static_cast<int32_t>(it->second);
  }
  auto merges = model.find("merges");
  if (merges == model.end() || merges->is_null()) {
    bpe.BuildMergeTable();
    return bpe;
  }
  if (!merges->is_array()) return Status::Config("tokenizer.json: model.merges is not an array");
  uint32_t rank = 0;
  for (const auto& m : *merges) {
    if (m.is_string()) {  // "a b"
      const std::string& s = m.get_ref<const std::string&>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return Status::Config("tokenizer.json: merge " + std::to_string(rank + 1) + " '" + s +
                              "' is not two tokens separated by one space");
      }
      RL_RETURN_IF_ERROR(bpe.AddMerge(s.substr(0, space), s.substr(space + 1), rank));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {  // [a, b]
      RL_RETURN_IF_ERROR(bpe.AddMerge(m[0].get<std::string>(), m[1].get<std::string>(), rank));
    } else {
      return Status::Config("tokenizer.json: merge " + std::to_string(rank + 1) +
                            " is neither \"a b\" nor [a, b]");
    }
    ++rank;
  }
  bpe.BuildMergeTable();
  return bpe;
}

void Bpe::BuildMergeTable() {
  size_t size = 16;
  while (size < merges_.size() * 2) size *= 2;
  table_.assign(size, Slot{});
  for (const auto& [key, merge] : merges_) {
    size_t i = Hash(key) & (size - 1);
    while (table_[i].key != kEmpty) i = (i + 1) & (size - 1);
    table_[i].key = key;
    table_[i].merge = merge;
  }
  merges_.clear();
}

const Bpe::Merge* Bpe::FindMerge(uint32_t a, uint32_t b) const {
  const uint64_t key = PairKey(a, b);
  const size_t mask = table_.size() - 1;
  for (size_t i = Hash(key) & mask;; i = (i + 1) & mask) {
    if (table_[i].key == key) return &table_[i].merge;
    if (table_[i].key == kEmpty) return nullptr;
  }
}

Status Bpe::AddMerge(const std::string& a, const std::string& b, uint32_t rank) {
  auto ia = vocab_.find(a);
  auto ib = vocab_.find(b);
  if (ia == vocab_.end() || ib == vocab_.end()) {
    return Status::Config("tokenizer.json: merge " + std::to_string(rank + 1) + " names '" +
                          (ia == vocab_.end() ? a : b) + "', which is not in the vocabulary");
  }
  std::string joined = a;
  joined += b.compare(0, prefix_.size(), prefix_) == 0 ? b.substr(prefix_.size()) : b;
  auto in = vocab_.find(joined);
  if (in == vocab_.end()) {
    return Status::Config("tokenizer.json: merge " + std::to_string(rank + 1) + " makes '" +
                          joined + "', which is not in the vocabulary");
  }
  merges_[PairKey(ia->second, ib->second)] = Merge{rank, in->second};  // a later duplicate wins
  return Status::OK();
}

std::optional<int64_t> Bpe::TokenToId(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* Bpe::IdToToken(int64_t id) const {
  if (id < 0 || id >= static_cast<int64_t>(id_to_token_.size()) || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

Status Bpe::Tokenize(std::string_view word, std::vector<int64_t>* ids) const {
  if (word.empty()) return Status::OK();
  if (ignore_merges_) {
    auto it = vocab_.find(std::string(word));
    if (it != vocab_.end()) {
      ids->push_back(it->second);
      return Status::OK();
    }
  }
  return MergeWord(word, ids);
}

Status Bpe::MergeWord(std::string_view word, std::vector<int64_t>* ids) const {
  struct Symbol {
    uint32_t id;
    int prev, next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  int64_t pending_unk = -1;  // an unk not yet pushed (fuse_unk grows it)
  std::string piece;
  const bool plain = prefix_.empty() && suffix_.empty();
  for (size_t pos = 0; pos < word.size();) {
    const size_t start = pos;
    const char32_t cp = NextCodePoint(word, &pos);
    if (plain && cp < 512 && char_id_[cp] >= 0) {  // the byte-level alphabet: no string lookup
      if (pending_unk >= 0) symbols.push_back({static_cast<uint32_t>(pending_unk), 0, 0, true});
      pending_unk = -1;
      symbols.push_back({static_cast<uint32_t>(char_id_[cp]), 0, 0, true});
      continue;
    }
    piece.assign(start == 0 || prefix_.empty() ? "" : prefix_);
    piece.append(word.substr(start, pos - start));
    if (pos == word.size()) piece += suffix_;
    auto it = vocab_.find(piece);
    if (it != vocab_.end()) {
      if (pending_unk >= 0) symbols.push_back({static_cast<uint32_t>(pending_unk), 0, 0, true});
      pending_unk = -1;
      symbols.push_back({it->second, 0, 0, true});
    } else if (unk_id_) {
      if (pending_unk >= 0 && !fuse_unk_) symbols.push_back({static_cast<uint32_t>(pending_unk), 0, 0, true});
      pending_unk = *unk_id_;
    } else {
      return Status::DataError("tokenizer: '" + piece + "' has no token and the model has no unk_token");
    }
  }
  if (pending_unk >= 0) symbols.push_back({static_cast<uint32_t>(pending_unk), 0, 0, true});
  const int n = static_cast<int>(symbols.size());
  for (int i = 0; i < n; ++i) {
    symbols[i].prev = i - 1;
    symbols[i].next = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    uint32_t rank;
    int pos;
    uint32_t new_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push_pair = [&](int left) {
    if (left < 0 || symbols[left].next < 0) return;
    const Merge* m = FindMerge(symbols[left].id, symbols[symbols[left].next].id);
    if (m != nullptr) queue.push({m->rank, left, m->new_id});
  };
  for (int i = 0; i + 1 < n; ++i) push_pair(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const Merge* m = FindMerge(left.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;  // stale entry
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    push_pair(left.prev);
    push_pair(top.pos);
  }
  for (const Symbol& s : symbols) {
    if (s.alive) ids->push_back(s.id);
  }
  return Status::OK();
}

}  // namespace rl::tokenizer
