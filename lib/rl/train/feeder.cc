#include "rl/train/feeder.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <fstream>

#include "rl/model/tokenizer.h"

namespace rl::train {

Result<std::vector<Problem>> ReadProblems(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::IOError("cannot open " + path);
  std::vector<Problem> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string()) {
      return Status::DataError(path + ":" + std::to_string(n) + ": want a JSON object with a string \"prompt\"");
    }
    Problem p{j["prompt"].get<std::string>(), ""};
    for (const char* key : {"answer", "response"}) {
      if (j.contains(key) && j[key].is_string()) p.answer = j[key].get<std::string>();
    }
    out.push_back(std::move(p));
  }
  if (out.empty()) return Status::DataError(path + ": no prompts");
  return out;
}

Result<uint64_t> RowsInFlight(queue::QueueClient* client) {
  RL_ASSIGN_OR_RETURN(nlohmann::json stat, client->Stat());
  uint64_t rows = 0;
  for (const auto& t : stat.value("tasks", nlohmann::json::array())) {
    std::string name = t.value("name", "");
    if (name == "generate" || name == "reward" || name == "train") {
      rows += t.value("ready", uint64_t{0}) + t.value("leased", uint64_t{0});
    }
  }
  return rows;
}

Feeder::Feeder(ClientOptions options, std::vector<Problem> problems, int64_t group_size)
    : client_(std::move(options)), problems_(std::move(problems)), group_size_(group_size) {}

Result<uint64_t> Feeder::Cursor() {
  if (have_cursor_) return cursor_;
  RL_ASSIGN_OR_RETURN(std::optional<std::string> text, client_.MetaGet(kCursorKey));
  cursor_text_ = text.value_or("");
  cursor_ = 0;
  if (!cursor_text_.empty()) {
    try {
      cursor_ = std::stoull(cursor_text_);
    } catch (const std::exception&) {
      return Status::DataError(std::string("meta ") + kCursorKey + " is not a number: '" + cursor_text_ + "'");
    }
  }
  have_cursor_ = true;
  return cursor_;
}

Result<int64_t> Feeder::PutGroups(int64_t n) {
  RL_ASSIGN_OR_RETURN(uint64_t cursor, Cursor());
  model::CharTokenizer tok;
  queue::PutRequest req;
  for (int64_t g = 0; g < n; ++g) {
    const Problem& p = problems_[(cursor + g) % problems_.size()];
    RL_ASSIGN_OR_RETURN(std::vector<int64_t> ids, tok.Encode(p.prompt));
    ids.insert(ids.begin(), tok.bos_id());
    Tensor prompt_ids = Tensor::FromI64(ids);
    for (int64_t k = 0; k < group_size_; ++k) {
      req.rows.push_back({std::nullopt,
                          {{"prompt", p.prompt},
                           {"answer", p.answer},
                           {"prompt_ids", prompt_ids},
                           {"group", static_cast<int64_t>(cursor + g)}}});
    }
  }
  RL_ASSIGN_OR_RETURN(std::vector<uint64_t> rows, client_.PutOnce(cursor + 1, req));
  if (rows.size() % group_size_ != 0) {
    return Status::DataError("a put at cursor " + std::to_string(cursor) + " added " + std::to_string(rows.size()) +
                             " rows, not whole groups of " + std::to_string(group_size_));
  }
  return static_cast<int64_t>(rows.size()) / group_size_;
}

Status Feeder::AdvanceCursor(int64_t added) {
  RL_ASSIGN_OR_RETURN(uint64_t cursor, Cursor());
  std::string next = std::to_string(cursor + added);
  Status s = client_.MetaSet({kCursorKey, next, cursor_text_});
  have_cursor_ = false;  // re-read on a conflict; cheap either way
  if (s.ok()) {
    have_cursor_ = true;
    cursor_ = cursor + added;
    cursor_text_ = next;
  }
  return s;
}

Result<int64_t> Feeder::FeedTo(int64_t target_groups, int64_t max_per_put) {
  RL_ASSIGN_OR_RETURN(uint64_t rows, RowsInFlight(&client_));
  int64_t in_flight = static_cast<int64_t>(rows) / group_size_;
  int64_t added = 0;
  while (in_flight + added < target_groups) {
    int64_t n = std::min(max_per_put, target_groups - in_flight - added);
    RL_ASSIGN_OR_RETURN(int64_t put, PutGroups(n));
    RL_RETURN_IF_ERROR(AdvanceCursor(put));
    added += put;
  }
  return added;
}

}  // namespace rl::train
