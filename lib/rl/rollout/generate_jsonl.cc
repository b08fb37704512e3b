#include "rl/rollout/generate_jsonl.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "rl/core/clock.h"
#include "rl/core/json_field.h"

namespace rl::rollout {
namespace {

using Json = nlohmann::ordered_json;

struct Pending {
  Json input;
  std::vector<int64_t> ids;
};

Result<Pending> ParseLine(const std::string& line, const GenerateJsonlOptions& o, int64_t context) {
  Pending p;
  task::DatasetOptions records = o.records;
  records.answer_key.clear();  // passed through, not needed
  RL_ASSIGN_OR_RETURN(task::Example e, task::ParseExample(line, records));
  p.input = Json::parse(line, nullptr, false);
  RL_ASSIGN_OR_RETURN(p.ids, o.encoder->Prompt(e));
  if (static_cast<int64_t>(p.ids.size()) >= context) {
    return Status::DataError("the prompt leaves no room in the model's context of " + std::to_string(context));
  }
  return p;
}

class Runner {
 public:
  Runner(const model::Transformer& model, const GenerateJsonlOptions& o, std::ostream& out, GenerateJsonlStats* stats)
      : model_(model), o_(o), out_(out), stats_(stats) {}

  Status Run(std::istream& in) {
    std::string line;
    size_t n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      Result<Pending> p = ParseLine(line, o_, model_.config().context());
      if (!p.ok()) {
        RL_RETURN_IF_ERROR(Flush());
        return Status::DataError("stdin line " + std::to_string(n) + ": " + p.status().message());
      }
      pending_.push_back(std::move(*p));
      if (pending_.size() >= o_.chunk) RL_RETURN_IF_ERROR(Flush());
    }
    return Flush();
  }

 private:
  Status Flush() {
    if (pending_.empty()) return Status::OK();
    if (o_.conversation) return FlushConversations();
    std::vector<std::vector<int64_t>> prompts;
    for (const Pending& p : pending_) prompts.push_back(p.ids);
    model::GenerateOptions go = o_.generate;
    go.eos_id = o_.encoder->dir().eos_id;
    if (go.max_new_tokens <= 0) go.max_new_tokens = model_.config().context();
    go.seed = o_.generate.seed + chunks_++;
    model::GenerateStats gs;
    int64_t start = MonoMillis();
    RL_ASSIGN_OR_RETURN(std::vector<model::Generation> gens, model::Generate(model_, prompts, go, &gs));
    stats_->generate_s += (MonoMillis() - start) / 1000.0;
    stats_->tokens += static_cast<uint64_t>(gs.new_tokens);
    for (size_t i = 0; i < gens.size(); ++i) {
      Json j = std::move(pending_[i].input);
      RL_ASSIGN_OR_RETURN(std::string text, o_.encoder->Decode(gens[i].response_ids));
      j["response"] = text;
      j["response_ids"] = gens[i].response_ids;
      j["logprobs"] = gens[i].logprobs;
      out_ << JsonText(j) << "\n";
    }
    out_.flush();
    if (!out_) return Status::IOError("writing stdout failed");
    stats_->lines += gens.size();
    pending_.clear();
    return Status::OK();
  }

  Status FlushConversations() {
    RL_ASSIGN_OR_RETURN(ToolTokens tokens, ResolveToolTokens(o_.encoder->dir(), o_.conversation->format));
    ConversationRunner runner(o_.encoder->dir(), *o_.conversation, tokens);
    std::vector<Conversation> convs(pending_.size());
    std::vector<Conversation*> all;
    for (size_t i = 0; i < pending_.size(); ++i) {
      convs[i].prompt = pending_[i].ids;
      all.push_back(&convs[i]);
    }
    TurnStats ts;
    RL_RETURN_IF_ERROR(runner.Finish(model_, 0, all, o_.tools, o_.generate.seed + chunks_++, &ts));
    stats_->generate_s += ts.generate_s;
    stats_->tokens += static_cast<uint64_t>(ts.new_tokens);
    stats_->tool_calls += static_cast<uint64_t>(ts.tool_calls);
    stats_->tool_errors += static_cast<uint64_t>(ts.tool_errors);
    for (size_t i = 0; i < convs.size(); ++i) {
      Json j = std::move(pending_[i].input);
      RL_ASSIGN_OR_RETURN(j["response"], runner.Answer(convs[i]));
      RL_ASSIGN_OR_RETURN(j["transcript"], runner.Transcript(convs[i]));
      j["response_ids"] = convs[i].ids;
      j["logprobs"] = convs[i].logprobs;
      j["loss_mask"] = convs[i].mask;
      j["turns"] = convs[i].turns;
      j["tool_calls"] = convs[i].tool_calls;
      j["tool_errors"] = convs[i].tool_errors;
      j["turn_ends"] = convs[i].turn_ends;
      j["turn_rewards"] = convs[i].turn_rewards;
      out_ << JsonText(j) << "\n";
    }
    out_.flush();
    if (!out_) return Status::IOError("writing stdout failed");
    stats_->lines += convs.size();
    pending_.clear();
    return Status::OK();
  }

  const model::Transformer& model_;
  const GenerateJsonlOptions& o_;
  std::ostream& out_;
  GenerateJsonlStats* stats_;
  std::vector<Pending> pending_;
  uint64_t chunks_ = 0;
};

}  // namespace

Status GenerateJsonl(const model::Transformer& model, const GenerateJsonlOptions& options, std::istream& in,
                     std::ostream& out, GenerateJsonlStats* stats) {
  GenerateJsonlStats local;
  Runner r(model, options, out, stats ? stats : &local);
  return r.Run(in);
}

}  // namespace rl::rollout
