#include "rl/model/tokenizer/spm_tokenizer.h"

#include <dlfcn.h>

#include <algorithm>
#include <limits>
#include <mutex>

#include "rl/model/tokenizer/spm_backend.h"
#include "rl/model/tokenizer/unicode.h"

namespace rl::tokenizer {
namespace {

// The byte a piece such as "<0x0A>" stands for (IsByte pieces are spelled so).
int ByteOfPiece(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = piece[i];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                         : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// librl_spm.so, loaded once (spm_backend.h says why it is not linked); its factory, or null with
// *error set.
NewSpmBackendFn LoadModule(std::string* error) {
  static std::once_flag once;
  static NewSpmBackendFn factory = nullptr;
  static std::string why;
  std::call_once(once, [] {
    void* lib = ::dlopen(RL_SPM_MODULE, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (lib == nullptr) {
      const char* e = ::dlerror();
      why = std::string("cannot load ") + RL_SPM_MODULE + ": " + (e ? e : "unknown error");
      return;
    }
    factory = reinterpret_cast<NewSpmBackendFn>(::dlsym(lib, kNewSpmBackendSymbol));
    if (factory == nullptr) why = std::string(RL_SPM_MODULE) + " has no " + kNewSpmBackendSymbol;
  });
  *error = why;
  return factory;
}

// sentencepiece's messages can span lines; ours are one line.
std::string OneLine(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

}  // namespace

SpmTokenizer::SpmTokenizer() = default;
SpmTokenizer::~SpmTokenizer() = default;

Result<std::shared_ptr<const SpmTokenizer>> SpmTokenizer::FromModel(std::string_view model, const SpmOptions& options) {
  if (model.empty()) return Status::Config("tokenizer.model: empty file");
  std::string error;
  NewSpmBackendFn factory = LoadModule(&error);
  if (factory == nullptr) return Status::IOError("tokenizer.model: " + error);
  std::shared_ptr<SpmTokenizer> t(new SpmTokenizer());
  t->sp_.reset(factory());
  if (!t->sp_->Load(model, &error)) {
    return Status::Config("tokenizer.model: not a SentencePiece model (" + OneLine(error) + ")");
  }
  t->vocab_size_ = t->sp_->PieceSize();
  if (t->vocab_size_ <= 0) return Status::Config("tokenizer.model: the model has no pieces");
  // The pieces and their kinds, read once: decoding and lookups need no call into the module.
  t->pieces_.resize(static_cast<size_t>(t->vocab_size_));
  t->kinds_.resize(static_cast<size_t>(t->vocab_size_));
  for (int id = 0; id < t->vocab_size_; ++id) {
    std::string piece = t->sp_->IdToPiece(id);
    const bool special = t->sp_->IsControl(id) || t->sp_->IsUnknown(id);
    t->kinds_[id] = special ? kSpecial : t->sp_->IsByte(id) ? kByte : kNormal;
    if (special && !piece.empty()) t->specials_.emplace_back(piece, id);
    t->ids_.emplace(piece, id);  // the first id of a piece wins, as PieceToId
    t->pieces_[id] = std::move(piece);
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
  if (t->add_bos_ && t->bos_id_ < 0) {
    return Status::Config("tokenizer.model: add_bos_token but the model has no bos piece");
  }
  if (t->add_eos_ && t->eos_id_ < 0) {
    return Status::Config("tokenizer.model: add_eos_token but the model has no eos piece");
  }
  return std::shared_ptr<const SpmTokenizer>(std::move(t));
}

Result<std::vector<int64_t>> SpmTokenizer::EncodeWith(std::string_view text,
                                                      const model::EncodeOptions& options) const {
  RL_RETURN_IF_ERROR(CheckEncoderInput(text));
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
  std::string error;
  if (!sp_->Encode(text, &out, &error)) return Status::DataError("tokenizer: sentencepiece: " + OneLine(error));
  ids->insert(ids->end(), out.begin(), out.end());
  return Status::OK();
}

Result<std::string> SpmTokenizer::DecodeWith(const std::vector<int64_t>& ids,
                                             const model::DecodeOptions& options) const {
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
    const size_t i = static_cast<size_t>(id);
    if (kinds_[i] == kSpecial && options.skip_special_tokens) continue;
    const std::string& piece = pieces_[i];
    if (kinds_[i] == kByte) {
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
  auto it = ids_.find(std::string(token));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> SpmTokenizer::IdToToken(int64_t id) const {
  if (id < 0 || id >= vocab_size_) return std::nullopt;
  return pieces_[static_cast<size_t>(id)];
}

bool SpmTokenizer::IsSpecial(int64_t id) const {
  return id >= 0 && id < vocab_size_ && kinds_[static_cast<size_t>(id)] == kSpecial;
}

}  // namespace rl::tokenizer
