// Feeder: puts the prompts of a JSON-lines dataset into rl-queue, exactly once across restarts
// of rl-train, and keeps the data cursor (prompts fed so far) in rl-queue metadata.
//
// Each prompt becomes one group of `group_size` rows, all put in one request:
//   prompt (string: the question, model::QuestionOf), answer (string),
//   prompt_ids (i64 tensor: model::PromptEncoder's ids, chat template applied),
//   group (int: the prompt's position in the stream, cursor + i)
//   min_version (int: the oldest weight version the trainer will take rows of when they come
//                back, set_min_version; rl-rollout waits a while for it rather than generate
//                rows that would only be regenerated)
// Prompt n of the stream is example n % size of the file, in file order (the file is read again
// after its end). A record the encoder cannot take stops the feeder with DataError FILE:LINE.
// Exactly once: a put of the groups starting at cursor c goes out under request id c + 1 from a
// sender id that is stable across restarts (e.g. "rl-train-feeder:<id>"), and only then is the
// cursor moved from c to c + n with compare-and-set. A feeder killed between the two repeats the
// put under the same request id after its restart; the server answers it from its record of the
// sender's last mutation without adding rows, and the cursor moves by the number of groups that
// first put really added (read from the reply, not assumed).
// Thread safety: one Feeder per thread (it owns a QueueClient).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/prompt_encoder.h"
#include "rl/queue/client.h"
#include "rl/task/dataset.h"

namespace rl::train {

constexpr char kCursorKey[] = "train.cursor";
constexpr char kStepKey[] = "train.step";
constexpr char kVersionKey[] = "train.version";
// The newest version rl-train has served over UCX, set before any puller can have it: a version
// served but never checkpointed is known to a restarted trainer, which then does not reuse its number.
constexpr char kServedKey[] = "train.served";

struct FedPrompt {
  std::string prompt, answer;
  std::vector<int64_t> ids;
};

// The examples of a dataset file as the feeder puts them.
class PromptSource {
 public:
  // Opens (and checks) the file; answers are required unless options.answer_key is empty.
  static Result<std::unique_ptr<PromptSource>> Open(const std::string& path, const task::DatasetOptions& options,
                                                    std::shared_ptr<const model::PromptEncoder> encoder);
  // Stream position n: example n % size.
  Result<FedPrompt> At(uint64_t n);
  size_t size() const { return data_->size(); }

 private:
  std::unique_ptr<task::Dataset> data_;
  std::unique_ptr<task::DatasetCursor> cursor_;
  std::shared_ptr<const model::PromptEncoder> encoder_;
};

// Rows of the pipeline still on their way to the trainer: ready or leased in the tasks
// generate, reward and train (tasks that do not exist count 0).
Result<uint64_t> RowsInFlight(queue::QueueClient* client);

class Feeder {
 public:
  // REQUIRES: options.sender is stable across restarts of this feeder and used by nothing else.
  Feeder(ClientOptions options, std::unique_ptr<PromptSource> source, int64_t group_size);

  // Adds groups until at least target_groups are in flight, at most max_per_put per put.
  // Returns the groups added.
  Result<int64_t> FeedTo(int64_t target_groups, int64_t max_per_put);

  // The two halves of one feeding round, public for tests that "crash" between them.
  // Puts n groups at the current cursor; returns the groups the put added (its first effect).
  Result<int64_t> PutGroups(int64_t n);
  // Moves the cursor by `added` with compare-and-set.
  Status AdvanceCursor(int64_t added);

  // The min_version column of the rows fed from now on (default 0).
  void set_min_version(int64_t v) { min_version_ = v; }

  // The cursor as last read from or written to rl-queue.
  Result<uint64_t> Cursor();
  queue::QueueClient& client() { return client_; }

 private:
  queue::QueueClient client_;
  std::unique_ptr<PromptSource> source_;
  int64_t group_size_;
  int64_t min_version_ = 0;
  bool have_cursor_ = false;
  uint64_t cursor_ = 0;
  std::string cursor_text_;  // "" when the key is not set yet
};

}  // namespace rl::train
