// librl_spm.so: SpmBackend over libsentencepiece (see spm_backend.h for why it is a module).
#include <sentencepiece_processor.h>

#include <algorithm>

#include "rl/model/tokenizer/spm_backend.h"

namespace rl::tokenizer {
namespace {

class Backend final : public SpmBackend {
 public:
  bool Load(std::string_view model, std::string* error) override {
    const auto st = sp_.LoadFromSerializedProto(absl::string_view(model.data(), model.size()));
    if (!st.ok()) *error = st.ToString();
    return st.ok();
  }
  bool Encode(std::string_view text, std::vector<int>* ids, std::string* error) const override {
    const auto st = sp_.Encode(absl::string_view(text.data(), text.size()), ids);
    if (!st.ok()) *error = st.ToString();
    return st.ok();
  }
  int PieceSize() const override { return sp_.GetPieceSize(); }
  std::string IdToPiece(int id) const override { return sp_.IdToPiece(id); }
  int PieceToId(std::string_view piece) const override {
    return sp_.PieceToId(absl::string_view(piece.data(), piece.size()));
  }
  bool IsControl(int id) const override { return sp_.IsControl(id); }
  bool IsUnknown(int id) const override { return sp_.IsUnknown(id); }
  bool IsByte(int id) const override { return sp_.IsByte(id); }
  int bos_id() const override { return sp_.bos_id(); }
  int eos_id() const override { return sp_.eos_id(); }
  int pad_id() const override { return sp_.pad_id(); }

 private:
  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace
}  // namespace rl::tokenizer

extern "C" __attribute__((visibility("default"))) rl::tokenizer::SpmBackend* rl_new_spm_backend() {
  return new rl::tokenizer::Backend();
}
