// The problems `rl-train make-data` writes, as JSON lines on a stream.
//   addition  {"answer": "0517", "prompt": "037+480="} (rl/task/addition.h)
//   words     {"prompt": ..., "answer": "19"}, and "response" (the worked solution ending in
//             "#### 19" or "\boxed{19}") when a response format is asked for (rl/task/word_problems.h)
//   multiply  {"prompt": "37*48=", "answer": "1776"}, and with response format "tools" the
//             response that calls the calculator (rl/task/multiply.h)
// Training problems are drawn with the seed; held_out gives the task's fixed held-out set instead
// (its first `count` problems, whatever the seed).
// Thread safety: a free function.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "rl/core/status.h"

namespace rl::task {

struct MakeDataOptions {
  std::string task = "addition";      // "addition", "words", "multiply" or "chain"
  size_t count = 10000;
  uint64_t seed = 1;
  bool held_out = false;
  std::string response_format = "none";  // words: "none", "gsm8k" or "boxed"; multiply: "none" or "tools"
  int64_t max_number = 0;                 // words only: every number at most this (0: no limit)
  std::string split = "numbers";          // words only: what is held out, "numbers" or "cast" (word_problems.h)
};

// InvalidArgument for an unknown task or format (or a format for addition); IOError when the
// stream fails.
Status WriteTaskData(const MakeDataOptions& options, std::ostream& out);

}  // namespace rl::task
