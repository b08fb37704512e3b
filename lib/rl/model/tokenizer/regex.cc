#define PCRE2_CODE_UNIT_WIDTH 8
#include "rl/model/tokenizer/regex.h"

#include <pcre2.h>

namespace rl::tokenizer {
namespace {

std::string Pcre2Message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// Per-thread match data and JIT stack: a long run of spaces makes \s+(?!\S) backtrack deeply.
struct ThreadMatch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
  ThreadMatch() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~ThreadMatch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

}  // namespace

Result<std::shared_ptr<const Regex>> Regex::Compile(const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code == nullptr) {
    return Status::Config("tokenizer: bad regex /" + pattern + "/ at offset " +
                          std::to_string(offset) + ": " + Pcre2Message(error));
  }
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // without a JIT, the interpreter matches
  return std::shared_ptr<const Regex>(new Regex(code, pattern));
}

Regex::~Regex() { pcre2_code_free(code_); }

Status Regex::FindAll(std::string_view text,
                      const std::function<void(size_t, size_t)>& on_match) const {
  thread_local ThreadMatch m;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(code_, subject, text.size(), start, PCRE2_NO_UTF_CHECK, m.data,
                               m.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return Status::DataError("tokenizer: regex /" + pattern_ + "/ failed: " + Pcre2Message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(m.data);
    if (ov[1] > ov[0]) {
      on_match(ov[0], ov[1]);
      start = ov[1];
    } else {  // empty match: step over one character
      start = ov[0] + 1;
      while (start < text.size() && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) ++start;
    }
  }
  return Status::OK();
}

}  // namespace rl::tokenizer
