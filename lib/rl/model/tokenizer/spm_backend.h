// SpmBackend: the part of libsentencepiece that SpmTokenizer uses, behind an interface of our own,
// implemented in a module of its own (spm_module.cc, librl_spm.so) that is loaded with dlopen on
// first use, with RTLD_LOCAL | RTLD_DEEPBIND.
//
// Why not link libsentencepiece: Debian's libsentencepiece.so.0 carries its own copy of
// protobuf-lite and exports it (1602 google::protobuf symbols). A process that also holds
// libprotobuf.so.32 (libtorch brings it, through onnx) then crashes before main: libprotobuf's
// static initialisers bind to sentencepiece's copies. Loaded locally and bound deep, each library
// uses its own protobuf, and processes that never read a tokenizer.model never load it.
// Thread safety: a loaded backend's const methods may run from any thread at once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rl::tokenizer {

class SpmBackend {
 public:
  virtual ~SpmBackend() = default;
  // The model's bytes; false with *error set when they are not a SentencePiece model.
  virtual bool Load(std::string_view model, std::string* error) = 0;
  virtual bool Encode(std::string_view text, std::vector<int>* ids, std::string* error) const = 0;
  virtual int PieceSize() const = 0;
  virtual std::string IdToPiece(int id) const = 0;
  virtual int PieceToId(std::string_view piece) const = 0;
  virtual bool IsControl(int id) const = 0;
  virtual bool IsUnknown(int id) const = 0;
  virtual bool IsByte(int id) const = 0;
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;
  virtual int pad_id() const = 0;
};

// The module's one entry point (extern "C", found with dlsym).
using NewSpmBackendFn = SpmBackend* (*)();
constexpr const char* kNewSpmBackendSymbol = "rl_new_spm_backend";

}  // namespace rl::tokenizer
