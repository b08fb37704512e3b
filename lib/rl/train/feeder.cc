#include "rl/train/feeder.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "rl/core/json_field.h"

namespace rl::train {

Result<std::unique_ptr<PromptSource>> PromptSource::Open(const std::string& path, const task::DatasetOptions& options,
                                                       std::shared_ptr<const model::PromptEncoder> encoder) {
  auto source = std::make_unique<PromptSource>();
  RL_ASSIGN_OR_RETURN(source->data_, task::Dataset::Open(path, options));
  source->cursor_ = std::make_unique<task::DatasetCursor>(source->data_.get(), std::nullopt);
  source->encoder_ = std::move(encoder);
  return source;
}

Result<FedPrompt> PromptSource::At(uint64_t n) {
  RL_ASSIGN_OR_RETURN(task::Example e, cursor_->At(n));
  FedPrompt p;
  auto ids = encoder_->Prompt(e);
  if (!ids.ok()) return ids.status().WithContext(data_->path() + ":" + std::to_string(e.line));
  p.ids = std::move(*ids);
  p.prompt = model::QuestionOf(e);
  p.answer = std::move(e.answer);
  return p;
}

Result<uint64_t> RowsInFlight(queue::QueueClient* client) {
  RL_ASSIGN_OR_RETURN(nlohmann::json stat, client->Stat());
  uint64_t rows = 0;
  for (const auto& t : ArrayField(stat, "tasks")) {
    const std::string name = TextField(t, "name");
    if (name == "generate" || name == "reward" || name == "train") {
      rows += UintField(t, "ready", 0) + UintField(t, "leased", 0);
    }
  }
  return rows;
}

Feeder::Feeder(ClientOptions options, std::unique_ptr<PromptSource> source, int64_t group_size)
    : client_(std::move(options)), source_(std::move(source)), group_size_(group_size) {}

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
  queue::PutRequest req;
  for (int64_t g = 0; g < n; ++g) {
    RL_ASSIGN_OR_RETURN(FedPrompt p, source_->At(cursor + g));
    Tensor prompt_ids = Tensor::FromI64(p.ids);
    for (int64_t k = 0; k < group_size_; ++k) {
      req.rows.push_back({std::nullopt,
                          {{"prompt", p.prompt},
                           {"answer", p.answer},
                           {"prompt_ids", prompt_ids},
                           {"group", static_cast<int64_t>(cursor + g)},
                           {"min_version", min_version_}}});
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
