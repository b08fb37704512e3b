#include "rl/task/dataset.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <utility>

#include "rl/core/log.h"

namespace rl::task {
namespace {

using Json = nlohmann::ordered_json;
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
constexpr int kWarnings = 10;  // skipped lines logged one by one; the rest only counted

const char* TypeName(const Json& j) { return j.type_name(); }

// The value at `key`: the key itself, else a path through nested objects ("extra.question").
const Json* Find(const Json& j, const std::string& key) {
  auto it = j.find(key);
  if (it != j.end()) return &*it;
  const Json* at = &j;
  size_t start = 0;
  while (start <= key.size()) {
    size_t dot = key.find('.', start);
    if (dot == std::string::npos) dot = key.size();
    if (!at->is_object()) return nullptr;
    auto next = at->find(key.substr(start, dot - start));
    if (next == at->end()) return nullptr;
    at = &*next;
    start = dot + 1;
  }
  return at == &j ? nullptr : at;
}

Result<std::string> StringAt(const Json& j, const std::string& key) {
  const Json* v = Find(j, key);
  if (!v) return Status::DataError("no \"" + key + "\"");
  if (!v->is_string()) return Status::DataError("\"" + key + "\" is not a string (it is " + TypeName(*v) + ")");
  return v->get<std::string>();
}

Result<std::string> AnswerAt(const Json& j, const std::string& key) {
  const Json* v = Find(j, key);
  if (!v) return Status::DataError("no \"" + key + "\"");
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number()) return JsonNumberText(*v);
  return Status::DataError("\"" + key + "\" is not a string or a number (it is " + TypeName(*v) + ")");
}

Result<std::vector<Message>> MessagesAt(const Json& j, const std::string& key) {
  const Json* v = Find(j, key);
  if (!v) return Status::DataError("no \"" + key + "\"");
  if (!v->is_array()) return Status::DataError("\"" + key + "\" is not a list (it is " + TypeName(*v) + ")");
  std::vector<Message> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& m = (*v)[i];
    std::string where = "\"" + key + "\"[" + std::to_string(i) + "]";
    if (!m.is_object()) return Status::DataError(where + " is not an object (it is " + TypeName(m) + ")");
    auto role = StringAt(m, "role");
    if (!role.ok()) return Status::DataError(where + ": " + role.status().message());
    auto content = StringAt(m, "content");
    if (!content.ok()) return Status::DataError(where + ": " + content.status().message());
    out.push_back({std::move(*role), std::move(*content)});
  }
  if (out.empty()) return Status::DataError("\"" + key + "\" is empty");
  return out;
}

Status FillResponse(const Json& j, const DatasetOptions& o, Example* e) {
  if (!o.response_key.empty()) {
    if (!o.require_response && !Find(j, o.response_key)) return Status::OK();
    RL_ASSIGN_OR_RETURN(e->response, StringAt(j, o.response_key));
  } else if (!e->messages.empty() && e->messages.back().role == "assistant") {
    e->response = std::move(e->messages.back().content);
    e->messages.pop_back();
    if (e->messages.empty()) return Status::DataError("\"" + o.messages_key + "\" has no message before the response");
  } else if (o.require_response) {
    return Status::DataError("\"" + o.messages_key + "\" does not end with an assistant message");
  }
  return Status::OK();
}

void AddSystemPrompt(const DatasetOptions& o, Example* e) {
  if (o.system_prompt.empty()) return;
  if (e->messages.empty()) {
    e->messages = {{"system", o.system_prompt}, {"user", e->prompt}};
  } else if (e->messages.front().role != "system") {
    e->messages.insert(e->messages.begin(), {"system", o.system_prompt});
  }
}

}  // namespace

std::string JsonNumberText(const Json& v) {
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::nearbyint(d) == d && std::fabs(d) < 9007199254740992.0) return std::to_string(static_cast<int64_t>(d));
  }
  return v.dump();  // integers as digits, other doubles in the shortest form that reads back
}

Result<Example> ParseExample(std::string_view line, const DatasetOptions& o) {
  Json j;
  try {
    j = Json::parse(line.begin(), line.end());
  } catch (const Json::parse_error& err) {
    return Status::DataError("not JSON (error at byte " + std::to_string(err.byte) + ")");
  } catch (const std::exception& err) {
    return Status::DataError("not JSON");
  }
  if (!j.is_object()) return Status::DataError(std::string("not a JSON object (it is ") + TypeName(j) + ")");
  Example e;
  if (o.messages_key.empty()) {
    RL_ASSIGN_OR_RETURN(e.prompt, StringAt(j, o.prompt_key));
  } else {
    RL_ASSIGN_OR_RETURN(e.messages, MessagesAt(j, o.messages_key));
  }
  if (!o.answer_key.empty()) {
    RL_ASSIGN_OR_RETURN(e.answer, AnswerAt(j, o.answer_key));
  }
  RL_RETURN_IF_ERROR(FillResponse(j, o, &e));
  AddSystemPrompt(o, &e);
  return e;
}

Json ExampleToJson(const Example& e) {
  Json j = Json::object();
  if (e.prompt.empty() && !e.messages.empty()) {
    j["messages"] = Json::array();
    for (const Message& m : e.messages) j["messages"].push_back({{"role", m.role}, {"content", m.content}});
  } else {
    j["prompt"] = e.prompt;
  }
  if (!e.answer.empty()) j["answer"] = e.answer;
  if (!e.response.empty()) j["response"] = e.response;
  return j;
}

Result<std::unique_ptr<Dataset>> Dataset::Open(const std::string& path, const DatasetOptions& options) {
  if (options.require_response && options.response_key.empty() && options.messages_key.empty()) {
    return Status::InvalidArgument("a response needs a response key or a messages key");
  }
  std::unique_ptr<Dataset> d(new Dataset(path, options));
  d->in_.open(path, std::ios::binary);
  if (!d->in_) return Status::IOError(path + ": cannot open: " + std::strerror(errno));
  RL_RETURN_IF_ERROR(d->Scan());
  return d;
}

Status Dataset::Scan() {
  LineReader reader(&in_, options_.max_line_bytes);
  std::string line;
  for (;;) {
    RL_ASSIGN_OR_RETURN(LineReader::Got got, reader.Next(&line));
    if (got == LineReader::Got::kEnd) break;
    std::string where = path_ + ":" + std::to_string(reader.line_number()) + ": ";
    Status s;
    if (got == LineReader::Got::kTooLong) {
      s = Status::DataError("line longer than " + std::to_string(options_.max_line_bytes) + " bytes");
    } else if (line.find_first_not_of(" \t\r\f\v") == std::string::npos) {
      continue;
    } else {
      s = ParseExample(line, options_).status();
    }
    if (s.ok()) {
      offsets_.push_back(reader.line_offset());
      lines_.push_back(reader.line_number());
      continue;
    }
    if (!options_.skip_malformed) return Status::DataError(where + s.message());
    if (++skipped_ <= kWarnings) spdlog::warn("skipping {}{}", where, s.message());
  }
  if (skipped_ > 0) spdlog::warn("{}: skipped {} malformed lines, kept {} examples", path_, skipped_, offsets_.size());
  if (offsets_.empty()) return Status::DataError(path_ + ": no examples");
  return Status::OK();
}

Result<Example> Dataset::Read(size_t index) {
  if (index >= offsets_.size()) return Status::InvalidArgument("example " + std::to_string(index) + " of " + path_ + " does not exist");
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(offsets_[index]));
  LineReader reader(&in_, options_.max_line_bytes, lines_[index], offsets_[index], 4096);
  std::string line;
  RL_ASSIGN_OR_RETURN(LineReader::Got got, reader.Next(&line));
  std::string where = path_ + ":" + std::to_string(lines_[index]) + ": ";
  if (got != LineReader::Got::kLine) return Status::DataError(where + "changed since it was opened");
  Result<Example> e = ParseExample(line, options_);
  if (!e.ok()) return Status::DataError(where + e.status().message() + " (changed since it was opened?)");
  e->line = lines_[index];
  return e;
}

std::vector<size_t> ShuffledOrder(size_t size, uint64_t seed, uint64_t epoch) {
  std::vector<size_t> order(size);
  for (size_t i = 0; i < size; ++i) order[i] = i;
  uint64_t state = seed + epoch * kGolden;
  auto next = [&state] {
    uint64_t z = (state += kGolden);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  for (size_t i = size; i-- > 1;) std::swap(order[i], order[next() % (i + 1)]);
  return order;
}

DatasetCursor::DatasetCursor(Dataset* dataset, std::optional<uint64_t> seed) : dataset_(dataset), seed_(seed) {}

size_t DatasetCursor::IndexAt(uint64_t n) {
  uint64_t size = dataset_->size(), epoch = n / size;
  if (!seed_) return static_cast<size_t>(n % size);
  if (epoch != epoch_) {
    order_ = ShuffledOrder(static_cast<size_t>(size), *seed_, epoch);
    epoch_ = epoch;
  }
  return order_[n % size];
}

Result<Example> DatasetCursor::At(uint64_t n) { return dataset_->Read(IndexAt(n)); }

}  // namespace rl::task
