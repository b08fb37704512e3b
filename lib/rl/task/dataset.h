// Datasets of examples in JSON lines (GSM8K, MATH, DeepScaleR style): one JSON object a line,
// read into Examples with a prompt string or a list of chat messages, a reference answer, and for
// SFT a response.
//
// Keys (DatasetOptions, for the flags --prompt-key, --messages-key, --answer-key, --response-key):
//   prompt    a string at prompt_key (default "prompt"); a key with dots ("extra.question") is
//             looked up as it is first, then as a path through nested objects.
//   messages  instead, when messages_key is set: a list of {"role": string, "content": string}.
//   answer    a string, or a number written canonically (integers as digits, 2.0 as "2", other
//             numbers in the shortest form that reads back the same, 0.1 as "0.1"); required
//             unless answer_key is empty (then not read).
//   response  SFT: a string at response_key; when response_key is empty, a messages list that
//             ends with an "assistant" message gives that message (taken off the list).
//             Required when require_response.
//   system    system_prompt, when set, is the first message: of a messages list unless that
//             already starts with a "system" message of its own (the record's wins), and of a
//             prompt record as [system, {"role": "user", "content": prompt}].
// Lines of white space only are skipped. A line that is not a JSON object, lacks a key, has a
// value of the wrong type or is longer than max_line_bytes (default 16 MiB) is malformed: Open
// fails with DataError "FILE:LINE: reason" (tools exit 65), or, with skip_malformed, the line is
// skipped, counted (skipped()) and the first ones logged as warnings. A file with no example is
// a DataError.
//
// Reading: Open streams the file once, checks every line and keeps only the byte offset of each
// example; Read(i) reads example i again from the file. The trainer's data cursor is an index n
// into an endless stream of examples (DatasetCursor): epoch e = n / size covers every example
// once, in file order, or with a seed, in the order of a Fisher-Yates shuffle of epoch e
// (ShuffledOrder), so reading can start at any n and gives the same examples every time.
// Thread safety: a Dataset and a DatasetCursor are used by one thread at a time.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rl/core/status.h"
#include "rl/task/jsonl.h"

namespace rl::task {

struct Message {
  std::string role, content;
  bool operator==(const Message& o) const { return role == o.role && content == o.content; }
};

struct Example {
  std::string prompt;             // a prompt record's text; empty for a messages record
  std::vector<Message> messages;  // a messages record's (system prompt first); see the header
  std::string answer;             // the reference answer; empty when not read
  std::string response;           // the SFT response; empty when none
  uint64_t line = 0;              // line of the file, from 1
};

struct DatasetOptions {
  std::string prompt_key = "prompt";
  std::string messages_key;  // set: records are chat messages instead of a prompt
  std::string answer_key = "answer";
  std::string response_key;
  bool require_response = false;
  std::string system_prompt;
  bool skip_malformed = false;
  size_t max_line_bytes = kMaxLineBytes;
};

// A JSON number as an answer's text: integers as digits, 2.0 as "2", other numbers in the
// shortest form that reads back the same ("0.1", "1e+300").
// REQUIRES: j.is_number().
std::string JsonNumberText(const nlohmann::ordered_json& j);
// One line (without its '\n') into an Example; DataError with the reason ("no \"answer\"").
Result<Example> ParseExample(std::string_view line, const DatasetOptions& options);
// The example as a JSON object: "prompt" or "messages", then "answer" and "response" when set.
nlohmann::ordered_json ExampleToJson(const Example& e);

class Dataset {
 public:
  // Reads and checks every line of `path` (see the header).
  static Result<std::unique_ptr<Dataset>> Open(const std::string& path, const DatasetOptions& options);

  size_t size() const { return offsets_.size(); }
  uint64_t skipped() const { return skipped_; }
  const std::string& path() const { return path_; }
  // Example `index` (< size()) of the file, read again from disk.
  Result<Example> Read(size_t index);

 private:
  Dataset(std::string path, DatasetOptions options) : path_(std::move(path)), options_(std::move(options)) {}
  Status Scan();

  std::string path_;
  DatasetOptions options_;
  std::ifstream in_;
  std::vector<uint64_t> offsets_;  // byte offset of each example's line
  std::vector<uint64_t> lines_;    // its line number
  uint64_t skipped_ = 0;
};

// The order of the examples in epoch `epoch`: a Fisher-Yates shuffle of 0..size-1, drawing
// j = x % (i + 1) for i = size-1 down to 1, x the outputs of splitmix64 started at state
// seed + epoch * 0x9E3779B97F4A7C15 (mod 2^64).
std::vector<size_t> ShuffledOrder(size_t size, uint64_t seed, uint64_t epoch);

class DatasetCursor {
 public:
  // REQUIRES: *dataset outlives the cursor. No seed: file order in every epoch.
  DatasetCursor(Dataset* dataset, std::optional<uint64_t> seed);
  // The example at stream position n: example order[n % size] of epoch n / size.
  Result<Example> At(uint64_t n);
  // Which example of the file stream position n is.
  size_t IndexAt(uint64_t n);

 private:
  Dataset* dataset_;
  std::optional<uint64_t> seed_;
  uint64_t epoch_ = UINT64_MAX;
  std::vector<size_t> order_;  // of epoch_
};

}  // namespace rl::task
