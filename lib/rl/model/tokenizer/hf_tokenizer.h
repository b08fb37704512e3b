// HfTokenizer: a Hugging Face tokenizer.json with a byte-level BPE model (Qwen2/Qwen3, Llama 3,
// GPT-2 style), encoding and decoding as the tokenizers library does:
//   added tokens found -> normalizer -> pre-tokenizer -> BPE -> post-processor template
//   ids -> tokens (added first, then the model's) -> decoder.
// Supported: model BPE; normalizers NFC/NFD/NFKC/NFKD/Sequence; pre-tokenizers Split/ByteLevel/
// Sequence; post-processors ByteLevel/TemplateProcessing/Roberta/Bert/Sequence; decoder
// ByteLevel. Anything else (WordPiece, Unigram, Metaspace, ...) is a Config error naming it.
// Where we part from tokenizers: Decode skips an id with no token as tokenizers does, but
// Encode refuses text that is not UTF-8, and a character the model cannot spell when it has no
// unk_token (tokenizers drops it), with a DataError.
// Thread safety: immutable after construction; any method may run from many threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "rl/model/tokenizer/added_vocabulary.h"
#include "rl/model/tokenizer/bpe.h"
#include "rl/model/tokenizer/pre_tokenizer.h"
#include "rl/model/tokenizer/processors.h"
#include "rl/model/tokenizer/tokenizer.h"

namespace rl::tokenizer {

// The tokens tokenizer_config.json names as pad, bos and eos ("" for none).
struct SpecialTokenNames {
  std::string pad, bos, eos;
};

class HfTokenizer final : public model::Tokenizer {
 public:
  // json_text: the content of a tokenizer.json. A name in names that is no token is a Config
  // error. Malformed or unsupported files give a one-line Config error.
  static Result<std::shared_ptr<const HfTokenizer>> FromJson(std::string_view json_text,
                                                             const SpecialTokenNames& names = {});

  Result<std::vector<int64_t>> Encode(std::string_view text) const override {
    return EncodeWith(text, model::EncodeOptions{});
  }
  Result<std::string> Decode(const std::vector<int64_t>& ids) const override {
    return DecodeWith(ids, model::DecodeOptions{});
  }
  Result<std::vector<int64_t>> EncodeWith(std::string_view text,
                                          const model::EncodeOptions& options) const override;
  Result<std::string> DecodeWith(const std::vector<int64_t>& ids,
                                 const model::DecodeOptions& options) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  int64_t pad_id() const override { return pad_id_; }
  int64_t bos_id() const override { return bos_id_; }
  int64_t eos_id() const override { return eos_id_; }
  std::optional<int64_t> TokenToId(std::string_view token) const override;
  std::optional<std::string> IdToToken(int64_t id) const override;
  bool IsSpecial(int64_t id) const override;

 private:
  HfTokenizer() = default;
  Status EncodePiece(std::string text, std::vector<int64_t>* ids) const;

  Bpe model_;
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  AddedVocabulary added_;
  PostProcessor post_processor_;
  Decoder decoder_;
  int64_t vocab_size_ = 0, pad_id_ = -1, bos_id_ = -1, eos_id_ = -1;
};

}  // namespace rl::tokenizer
