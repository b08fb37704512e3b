#include "rl/model/tokenizer/spm_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <limits>

#include "rl/model/tokenizer/unicode.h"

namespace rl::tokenizer {
namespace {

// The byte a piece such as "<0x0A>" stands for (IsByte pieces are spelled so).
int ByteOfPiece(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = piece[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// sentencepiece's messages can span lines; ours are one line.
std::string OneLine(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

}  // namespace

SpmTokenizer::SpmTokenizer() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
SpmTokenizer::~SpmTokenizer() = default;

Result<std::shared_ptr<const SpmTokenizer>> SpmTokenizer::FromModel(std::string_view model, const SpmOptions& options) {
  std::shared_ptr<SpmTokenizer> t(new SpmTokenizer());
  if (model.empty()) return Status::Config("tokenizer.model: empty file");
  const auto st = t->sp_->LoadFromSerializedProto(absl::string_view(model.data(), model.size()));
  if (!st.ok()) return Status::Config("tokenizer.model: not a SentencePiece model (" + OneLine(st.ToString()) + ")");
  t->vocab_size_ = t->sp_->GetPieceSize();
  if (t->vocab_size_ <= 0) return Status::Config("tokenizer.model: the model has no pieces");
  for (int id = 0; id < t->vocab_size_; ++id) {
    if (t->sp_->IsControl(id) || t->sp_->IsUnknown(id)) {
      const std::string& piece = t->sp_->IdToPiece(id);
      if (!piece.empty()) t->specials_.emplace_back(piece, id);
    }
  }
  std::stable_sort(t->specials_.begin(), t->specials_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  const auto own = [&](int id) -> int64_t { return id >= 0 && id < t->vocab_size_ ? id : -1; };
  t->pad_id_ = own(t->sp_->pad_id());
  t->bos_id_ = own(t->sp_->bos_id());
  t->eos_id_ = own(t->sp_->eos_id());
  const std::pair<const std::string*, int64_t*> named[] = {
      {&options.names.pad, &t->pad_id_}, {&options.names.bos, &t->bos_id_}, {&options.names.eos, &t->eos_id_}};
  for (const auto& [name, id] : named) {
    if (name->empty()) continue;
    auto found = t->TokenToId(*name);
    if (!found) return Status::Config("tokenizer: special token '" + *name + "' is not in the vocabulary");
    *id = *found;
  }
  t->add_bos_ = options.add_bos;
  t->add_eos_ = options.add_eos;
  if (t->add_bos_ && t->bos_id_ < 0) return Status::Config("tokenizer.model: add_bos_token but the model has no bos piece");
  if (t->add_eos_ && t->eos_id_ < 0) return Status::Config("tokenizer.model: add_eos_token but the model has no eos piece");
  return std::shared_ptr<const SpmTokenizer>(std::move(t));
}

Result<std::vector<int64_t>> SpmTokenizer::EncodeWith(std::string_view text, const model::EncodeOptions& options) const {
  if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::DataError("tokenizer: text of " + std::to_string(text.size()) + " bytes is over 2 GiB");
  }
  const size_t bad = FindInvalidUtf8(text);
  if (bad != std::string_view::npos) {
    return Status::DataError("tokenizer: text is not valid UTF-8 at byte " + std::to_string(bad));
  }
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3 + 8);
  if (options.add_special_tokens && add_bos_) ids.push_back(bos_id_);
  if (!options.parse_special_tokens || specials_.empty()) {
    RL_RETURN_IF_ERROR(EncodePiece(text, &ids));
  } else {
    // Where each special text occurs next at or after `at`; a find is redone only once passed,
    // so the scan is linear in the text for each special.
    std::vector<size_t> next(specials_.size(), 0);
    std::vector<bool> fresh(specials_.size(), false);
    size_t at = 0;
    while (at < text.size()) {
      size_t best = std::string_view::npos, which = 0;
      for (size_t i = 0; i < specials_.size(); ++i) {
        if (!fresh[i] || (next[i] != std::string_view::npos && next[i] < at)) {
          next[i] = text.find(specials_[i].first, at);
          fresh[i] = true;
        }
        if (next[i] < best) best = next[i], which = i;  // ties: the longer one, listed first
      }
      if (best == std::string_view::npos) break;
      RL_RETURN_IF_ERROR(EncodePiece(text.substr(at, best - at), &ids));
      ids.push_back(specials_[which].second);
      at = best + specials_[which].first.size();
    }
    if (at < text.size()) RL_RETURN_IF_ERROR(EncodePiece(text.substr(at), &ids));
  }
  if (options.add_special_tokens && add_eos_) ids.push_back(eos_id_);
  return ids;
}

Status SpmTokenizer::EncodePiece(std::string_view text, std::vector<int64_t>* ids) const {
  if (text.empty()) return Status::OK();
  std::vector<int> out;
  const auto st = sp_->Encode(absl::string_view(text.data(), text.size()), &out);
  if (!st.ok()) return Status::DataError("tokenizer: sentencepiece: " + OneLine(st.ToString()));
  ids->insert(ids->end(), out.begin(), out.end());
  return Status::OK();
}

Result<std::string> SpmTokenizer::DecodeWith(const std::vector<int64_t>& ids, const model::DecodeOptions& options) const {
  static const std::string kMeta = "\xE2\x96\x81";  // U+2581, SentencePiece's space
  std::string text, bytes;
  const auto flush_bytes = [&] {
    if (bytes.empty()) return;
    if (FindInvalidUtf8(bytes) == std::string::npos) text += bytes;
    else for (size_t i = 0; i < bytes.size(); ++i) text += "\xEF\xBF\xBD";
    bytes.clear();
  };
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size_) continue;  // skipped, as tokenizers does
    const int i = static_cast<int>(id);
    if (IsSpecial(id) && options.skip_special_tokens) continue;
    const std::string& piece = sp_->IdToPiece(i);
    if (sp_->IsByte(i)) {
      const int b = ByteOfPiece(piece);
      if (b >= 0) { bytes.push_back(static_cast<char>(b)); continue; }
    }
    flush_bytes();
    for (size_t at = 0; at < piece.size();) {
      if (piece.compare(at, kMeta.size(), kMeta) == 0) { text += ' '; at += kMeta.size(); }
      else text += piece[at++];
    }
  }
  flush_bytes();
  if (!text.empty() && text[0] == ' ') text.erase(0, 1);  // the dummy prefix
  return text;
}

std::optional<int64_t> SpmTokenizer::TokenToId(std::string_view token) const {
  const int id = sp_->PieceToId(absl::string_view(token.data(), token.size()));
  if (id < 0 || id >= vocab_size_ || sp_->IdToPiece(id) != token) return std::nullopt;  // unknown pieces map to unk
  return id;
}

std::optional<std::string> SpmTokenizer::IdToToken(int64_t id) const {
  if (id < 0 || id >= vocab_size_) return std::nullopt;
  return sp_->IdToPiece(static_cast<int>(id));
}

bool SpmTokenizer::IsSpecial(int64_t id) const {
  if (id < 0 || id >= vocab_size_) return false;
  return sp_->IsControl(static_cast<int>(id)) || sp_->IsUnknown(static_cast<int>(id));
}

}  // namespace rl::tokenizer
