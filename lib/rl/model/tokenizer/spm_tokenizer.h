// SpmTokenizer: a SentencePiece tokenizer.model (Llama 2, Mistral 7B v0.1 and other BPE or
// Unigram models), encoded by libsentencepiece, with the behaviour of Hugging Face's Llama
// tokenizer (LlamaTokenizerFast with legacy=true) around it, so that a Llama 2 directory gives
// the same ids whichever of its two files, tokenizer.model or tokenizer.json, is read:
//   - Special tokens are the model's control pieces (<s>, </s>) and its unknown piece (<unk>).
//     With parse_special_tokens their text is that token (leftmost, longest first); the text
//     between them is encoded by SentencePiece piece by piece, each with its own dummy prefix
//     ("a<s>b" is "▁a" <s> "▁b"), as tokenizers does. Without it they are ordinary text.
//   - add_special_tokens puts bos first when add_bos, and eos last when add_eos.
//   - Decoding is tokenizers' Llama decoder: each piece's "▁" becomes a space, runs of byte
//     pieces (<0x0A>) become their bytes (a run that is not UTF-8 becomes one U+FFFD per byte),
//     and one leading space of the whole text is dropped (the dummy prefix). Special tokens are
//     skipped or written by name; an id outside the vocabulary is skipped.
// decode(encode(x)) == x for UTF-8 text without special tokens parsed when the model's
// normalizer is the identity (Llama 2's is); models that normalize (nmt_nfkc) change the text.
// Encode refuses text that is not UTF-8 (DataError), as HfTokenizer does.
// libsentencepiece is not linked but loaded on first use (spm_backend.h says why); a build
// without its module is an IOError here.
// Thread safety: immutable after construction; SentencePieceProcessor's const methods are
// thread-safe, so any method may run from many threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rl/model/tokenizer/hf_tokenizer.h"
#include "rl/model/tokenizer/tokenizer.h"

namespace rl::tokenizer {

class SpmBackend;  // spm_backend.h

struct SpmOptions {
  SpecialTokenNames names;  // pad, bos and eos by name ("" takes the model's own)
  bool add_bos = true;      // what add_special_tokens adds (LlamaTokenizer's defaults)
  bool add_eos = false;
};

class SpmTokenizer final : public model::Tokenizer {
 public:
  // model: the bytes of a tokenizer.model. A file that is not a SentencePiece model, or a name
  // in options.names that is no piece, is a one-line Config error.
  static Result<std::shared_ptr<const SpmTokenizer>> FromModel(std::string_view model, const SpmOptions& options = {});
  ~SpmTokenizer() override;

  Result<std::vector<int64_t>> Encode(std::string_view text) const override {
    return EncodeWith(text, model::EncodeOptions{});
  }
  Result<std::string> Decode(const std::vector<int64_t>& ids) const override {
    return DecodeWith(ids, model::DecodeOptions{});
  }
  Result<std::vector<int64_t>> EncodeWith(std::string_view text, const model::EncodeOptions& options) const override;
  Result<std::string> DecodeWith(const std::vector<int64_t>& ids, const model::DecodeOptions& options) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  int64_t pad_id() const override { return pad_id_; }
  int64_t bos_id() const override { return bos_id_; }
  int64_t eos_id() const override { return eos_id_; }
  std::optional<int64_t> TokenToId(std::string_view token) const override;
  std::optional<std::string> IdToToken(int64_t id) const override;
  bool IsSpecial(int64_t id) const override;

 private:
  SpmTokenizer();
  Status EncodePiece(std::string_view text, std::vector<int64_t>* ids) const;

  enum Kind : uint8_t { kNormal, kByte, kSpecial };  // special: control or unknown pieces
  std::unique_ptr<SpmBackend> sp_;
  std::vector<std::string> pieces_;  // by id
  std::vector<Kind> kinds_;          // by id
  std::unordered_map<std::string, int64_t> ids_;
  std::vector<std::pair<std::string, int64_t>> specials_;  // text and id, longest text first
  int64_t vocab_size_ = 0, pad_id_ = -1, bos_id_ = -1, eos_id_ = -1;
  bool add_bos_ = true, add_eos_ = false;
};

}  // namespace rl::tokenizer
