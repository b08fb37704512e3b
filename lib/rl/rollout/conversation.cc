#include "rl/rollout/conversation.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "rl/core/clock.h"
#include "rl/wire/json_value.h"

namespace rl::rollout {
namespace {

Result<int64_t> SingleToken(const model::ModelDir& dir, const std::string& text, const char* what) {
  std::optional<int64_t> id = dir.tokenizer->TokenToId(text);
  if (!id) {
    return Status::Config(std::string(what) + " '" + text + "' is not a token of " + dir.path +
                          "'s vocabulary: a tool call could not be told from text");
  }
  return *id;
}

Result<std::vector<int64_t>> Ints(const Value* v, const char* name) {
  const Tensor* t = v ? std::get_if<Tensor>(v) : nullptr;
  if (!t || t->shape.size() != 1 || !(t->dtype == DType::kI64 || t->dtype == DType::kI32)) {
    return Status::DataError(std::string(name) + " is not a 1-D integer tensor");
  }
  return t->ToI64();
}

Result<int64_t> Int(const Value* v, const char* name) {
  if (!v || !std::holds_alternative<int64_t>(*v)) return Status::DataError(std::string(name) + " is not an integer");
  return std::get<int64_t>(*v);
}

}  // namespace

const std::vector<std::string> kProgressColumns = {"conv_ids",   "conv_logprobs",    "conv_mask",
                                                   "conv_versions", "conv_turns",    "conv_tool_calls",
                                                   "conv_tool_errors", "conv_answer_from", "conv_done",
                                                   "conv_turn_ends",   "conv_turn_rewards"};

Result<ToolTokens> ResolveToolTokens(const model::ModelDir& dir, const ToolFormat& format) {
  ToolTokens t;
  RL_ASSIGN_OR_RETURN(t.call_open, SingleToken(dir, format.call_open, "--call-open"));
  RL_ASSIGN_OR_RETURN(t.call_close, SingleToken(dir, format.call_close, "--call-close"));
  if (t.call_open == t.call_close) return Status::Config("--call-open and --call-close are the same token");
  // The result tags are encoded at every call: one the vocabulary cannot spell would fail the
  // first call of every run, after rows were leased, and again after each restart.
  const std::pair<const std::string*, const char*> tags[] = {{&format.result_open, "--result-open"},
                                                            {&format.result_close, "--result-close"}};
  for (const auto& [tag, flag] : tags) {
    auto ids = dir.tokenizer->EncodeWith(*tag, model::EncodeOptions());
    if (!ids.ok()) return Status::Config(std::string(flag) + " '" + *tag + "': " + ids.status().message());
  }
  return t;
}

int64_t Conversation::OldestVersion() const {
  int64_t oldest = -1;
  for (size_t i = 0; i < versions.size(); ++i) {
    if (mask[i] && (oldest < 0 || versions[i] < oldest)) oldest = versions[i];
  }
  return oldest;
}

std::vector<std::pair<std::string, Value>> ProgressColumns(const Conversation& c) {
  return {{"conv_ids", Tensor::FromI64(c.ids)},
          {"conv_logprobs", Tensor::FromF32(c.logprobs)},
          {"conv_mask", Tensor::FromI64(c.mask)},
          {"conv_versions", Tensor::FromI64(c.versions)},
          {"conv_turns", c.turns},
          {"conv_tool_calls", c.tool_calls},
          {"conv_tool_errors", c.tool_errors},
          {"conv_answer_from", c.answer_from},
          {"conv_done", static_cast<int64_t>(c.done ? 1 : 0)},
          {"conv_turn_ends", Tensor::FromI64(c.turn_ends)},
          {"conv_turn_rewards", Tensor::FromF32(c.turn_rewards)}};
}

Result<Conversation> FromProgress(std::vector<int64_t> prompt,
                                  const std::vector<std::pair<std::string, Value>>& columns, int64_t vocab_size) {
  Conversation c;
  c.prompt = std::move(prompt);
  const Value* ids = FindColumn(columns, "conv_ids");
  if (ids == nullptr) return c;
  RL_ASSIGN_OR_RETURN(c.ids, Ints(ids, "conv_ids"));
  RL_ASSIGN_OR_RETURN(c.mask, Ints(FindColumn(columns, "conv_mask"), "conv_mask"));
  RL_ASSIGN_OR_RETURN(c.versions, Ints(FindColumn(columns, "conv_versions"), "conv_versions"));
  const Value* lp = FindColumn(columns, "conv_logprobs");
  const Tensor* t = lp ? std::get_if<Tensor>(lp) : nullptr;
  if (!t || t->shape.size() != 1 || t->dtype != DType::kF32) return Status::DataError("conv_logprobs is not a 1-D f32 tensor");
  for (double x : t->ToF64()) {
    if (!std::isfinite(x)) return Status::DataError("conv_logprobs holds a value that is not finite");
    c.logprobs.push_back(static_cast<float>(x));
  }
  RL_ASSIGN_OR_RETURN(c.turns, Int(FindColumn(columns, "conv_turns"), "conv_turns"));
  RL_ASSIGN_OR_RETURN(c.tool_calls, Int(FindColumn(columns, "conv_tool_calls"), "conv_tool_calls"));
  RL_ASSIGN_OR_RETURN(c.tool_errors, Int(FindColumn(columns, "conv_tool_errors"), "conv_tool_errors"));
  RL_ASSIGN_OR_RETURN(c.answer_from, Int(FindColumn(columns, "conv_answer_from"), "conv_answer_from"));
  RL_ASSIGN_OR_RETURN(int64_t done, Int(FindColumn(columns, "conv_done"), "conv_done"));
  c.done = done != 0;
  const size_t n = c.ids.size();
  if (c.mask.size() != n || c.versions.size() != n || c.logprobs.size() != n) {
    return Status::DataError("conversation columns differ in length");
  }
  for (int64_t m : c.mask) {
    if (m != 0 && m != 1) return Status::DataError("conv_mask holds a value other than 0 and 1");
  }
  for (int64_t id : c.ids) {
    if (id < 0 || id >= vocab_size) {
      return Status::DataError("conv_ids holds " + std::to_string(id) + ", outside the vocabulary of " +
                               std::to_string(vocab_size));
    }
  }
  // Every turn's segment holds at least one model token (a segment is generated only with a
  // budget of one or more), so there are no more turns than tokens; bounding them also bounds
  // what an older row's missing turn columns are filled with.
  if (c.turns < 0 || c.turns > static_cast<int64_t>(n) || c.tool_calls < 0 || c.tool_calls > c.turns ||
      c.tool_errors < 0 || c.tool_errors > c.tool_calls || c.answer_from < 0 ||
      c.answer_from > static_cast<int64_t>(n)) {
    return Status::DataError("conversation counts out of range");
  }
  if (const Value* ends = FindColumn(columns, "conv_turn_ends")) {
    RL_ASSIGN_OR_RETURN(c.turn_ends, Ints(ends, "conv_turn_ends"));
    const Value* rw = FindColumn(columns, "conv_turn_rewards");
    const Tensor* r = rw ? std::get_if<Tensor>(rw) : nullptr;
    if (!r || r->shape.size() != 1 || r->dtype != DType::kF32) {
      return Status::DataError("conv_turn_rewards is not a 1-D f32 tensor");
    }
    for (double x : r->ToF64()) {
      if (!std::isfinite(x)) return Status::DataError("conv_turn_rewards holds a value that is not finite");
      c.turn_rewards.push_back(static_cast<float>(x));
    }
    if (static_cast<int64_t>(c.turn_ends.size()) != c.turns || c.turn_rewards.size() != c.turn_ends.size()) {
      return Status::DataError("conv_turn_ends and conv_turn_rewards must have one entry per turn");
    }
    for (int64_t e : c.turn_ends) {
      if (e < -1 || e > static_cast<int64_t>(n)) return Status::DataError("conv_turn_ends out of range");
    }
  } else {  // progress of an older rollout: the turns' ends are unknown, their rewards 0
    c.turn_ends.assign(static_cast<size_t>(c.turns), -1);
    c.turn_rewards.assign(static_cast<size_t>(c.turns), 0.0f);
  }
  return c;
}

int64_t ConversationRunner::Budget(const Conversation& c) const {
  const int64_t context = dir_.config.context();
  const int64_t used = static_cast<int64_t>(c.ids.size());
  int64_t room = context - static_cast<int64_t>(c.prompt.size()) - used;
  if (o_.max_tokens > 0) room = std::min(room, o_.max_tokens - used);
  return std::max<int64_t>(room, 0);
}

env::ToolCall ConversationRunner::ParseCall(const std::string& body) const {
  // Deeper than any call needs: the text goes whole to the default tool (never parsed, nor
  // dumped level by level).
  nlohmann::json j = JsonDepthWithin(body, kMaxJsonDepth) ? nlohmann::json::parse(body, nullptr, false)
                                                         : nlohmann::json();
  if (j.is_object() && j.contains("name") && j["name"].is_string()) {
    env::ToolCall call{j["name"].get<std::string>(), j.contains("arguments") ? j["arguments"].dump() : "{}"};
    return call;
  }
  return {o_.format.default_tool, nlohmann::json(body).dump()};
}

Result<std::vector<int64_t>> ConversationRunner::ResultTokens(const env::ToolResult& r) const {
  std::string text = r.ok ? r.output : "error: " + r.error;
  // Only the first max_result_tokens tokens are kept: encode no more text than they can span
  // (rl-env allows a megabyte of output, which took a quarter second to encode per call), cut at
  // a character's start. 64 bytes a token is beyond any vocabulary's tokens but runs of one byte.
  const size_t keep_bytes = static_cast<size_t>(std::max<int64_t>(o_.format.max_result_tokens, 0)) * 64 + 256;
  if (text.size() > keep_bytes) {
    size_t cut = keep_bytes;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text.resize(cut);
  }
  // The format's text is the configuration's (a template's <|im_start|> is that token); a tool's
  // output is not trusted: the text of a special token in it stays text, so that a tool cannot
  // end the tool's turn and write the model's.
  model::EncodeOptions trusted, untrusted;
  untrusted.parse_special_tokens = false;
  RL_ASSIGN_OR_RETURN(std::vector<int64_t> open, dir_.tokenizer->EncodeWith(o_.format.result_open, trusted));
  Result<std::vector<int64_t>> encoded = dir_.tokenizer->EncodeWith(text, untrusted);
  std::vector<int64_t> body;
  if (encoded.ok()) {
    body = std::move(*encoded);
  } else {
    // A vocabulary without every character (the demo's has digits and a few signs): keep the
    // characters it has, one UTF-8 character at a time, rather than lose the whole result.
    for (size_t i = 0; i < text.size();) {
      size_t n = 1;
      while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80) ++n;
      Result<std::vector<int64_t>> one = dir_.tokenizer->EncodeWith(text.substr(i, n), untrusted);
      if (one.ok()) {
        for (int64_t id : *one) {
          if (id != dir_.bos_id) body.push_back(id);
        }
      }
      i += n;
    }
  }
  RL_ASSIGN_OR_RETURN(std::vector<int64_t> close, dir_.tokenizer->EncodeWith(o_.format.result_close, trusted));
  // The post-processor may add <bos> to every encoding: inside a conversation it does not belong.
  for (auto* v : {&open, &close}) {
    if (!v->empty() && dir_.bos_id >= 0 && v->front() == dir_.bos_id) v->erase(v->begin());
  }
  const size_t room = static_cast<size_t>(std::max<int64_t>(o_.format.max_result_tokens, 0));
  if (encoded.ok() && !body.empty() && dir_.bos_id >= 0 && body.front() == dir_.bos_id) body.erase(body.begin());
  if (body.size() > room) body.resize(room);
  open.insert(open.end(), body.begin(), body.end());
  open.insert(open.end(), close.begin(), close.end());
  return open;
}

Result<std::string> ConversationRunner::Answer(const Conversation& c) const {
  std::vector<int64_t> last(c.ids.begin() + c.answer_from, c.ids.end());
  return dir_.tokenizer->Decode(last);
}

Result<std::string> ConversationRunner::Transcript(const Conversation& c) const {
  return dir_.tokenizer->Decode(c.ids);
}

Status ConversationRunner::Turn(const model::Transformer& model, uint64_t version,
                                const std::vector<Conversation*>& active, const ToolRunner& tools, uint64_t seed,
                                TurnStats* stats) {
  std::vector<Conversation*> going;
  std::vector<std::vector<int64_t>> prompts;
  model::GenerateOptions go = o_.generate;
  go.eos_id = dir_.eos_id;
  go.stop_ids = {tokens_.call_close};
  go.seed = seed;
  go.version = static_cast<int64_t>(version);
  go.max_new_tokens_each.clear();
  for (Conversation* c : active) {
    if (c->done) continue;
    if (Budget(*c) < 1 || c->turns >= o_.max_turns) {
      c->done = true;
      continue;
    }
    going.push_back(c);
    std::vector<int64_t> p = c->prompt;
    p.insert(p.end(), c->ids.begin(), c->ids.end());
    prompts.push_back(std::move(p));
    go.max_new_tokens_each.push_back(Budget(*c));
  }
  if (going.empty()) return Status::OK();
  int64_t start = MonoMillis();
  model::GenerateStats gs;
  RL_ASSIGN_OR_RETURN(std::vector<model::Generation> gens, generate_ ? generate_(model, version, prompts, go, &gs)
                                                                      : model::Generate(model, prompts, go, &gs));
  stats->generate_s += (MonoMillis() - start) / 1000.0;
  stats->segments += static_cast<int64_t>(gens.size());
  stats->new_tokens += gs.new_tokens;
  stats->switching.switches += gs.switches;
  stats->switching.interrupted += gs.interrupted;
  stats->switching.reprefill_tokens += gs.reprefill_tokens;
  stats->switching.switch_s += gs.switch_s;

  // The calls the segments closed, then their results: nothing changes until both are in hand.
  std::vector<env::ToolCall> calls;
  std::vector<size_t> calling;
  for (size_t i = 0; i < gens.size(); ++i) {
    const model::Generation& g = gens[i];
    if (g.stop != model::StopReason::kStop) continue;
    // The call is what follows the segment's last opening tag (all of the segment without one).
    auto open = std::find(g.response_ids.rbegin(), g.response_ids.rend(), tokens_.call_open);
    std::vector<int64_t> inside(open == g.response_ids.rend() ? g.response_ids.begin() : open.base(),
                                g.response_ids.end() - 1);
    RL_ASSIGN_OR_RETURN(std::string body, dir_.tokenizer->Decode(inside));
    calls.push_back(ParseCall(body));
    calling.push_back(i);
  }
  std::vector<env::ToolResult> results;
  if (!calls.empty()) {
    start = MonoMillis();
    RL_ASSIGN_OR_RETURN(results, tools(calls));
    stats->tools_s += (MonoMillis() - start) / 1000.0;
    if (results.size() != calls.size()) return Status::Internal("rl-env answered a different number of calls");
  }
  std::vector<std::vector<int64_t>> appended(gens.size());
  for (size_t k = 0; k < calling.size(); ++k) {
    RL_ASSIGN_OR_RETURN(appended[calling[k]], ResultTokens(results[k]));
  }

  size_t k = 0;
  for (size_t i = 0; i < gens.size(); ++i) {
    Conversation& c = *going[i];
    const model::Generation& g = gens[i];
    c.answer_from = static_cast<int64_t>(c.ids.size());
    if (!g.routes.empty()) c.routes = g.routes;
    for (size_t j = 0; j < g.response_ids.size(); ++j) {
      c.ids.push_back(g.response_ids[j]);
      c.logprobs.push_back(g.logprobs[j]);
      c.mask.push_back(1);
      c.versions.push_back(g.versions.empty() ? static_cast<int64_t>(version) : g.versions[j]);
    }
    ++c.turns;
    c.turn_ends.push_back(static_cast<int64_t>(c.ids.size()));
    if (g.stop != model::StopReason::kStop) {
      c.turn_rewards.push_back(0);
      c.done = true;  // an answer (eos), or out of room
      continue;
    }
    const env::ToolResult& r = results[k++];
    c.turn_rewards.push_back(static_cast<float>(r.ok ? r.reward.value_or(0.0) : o_.tool_error_reward));
    ++c.tool_calls;
    stats->tool_calls += 1;
    if (!r.ok) {
      ++c.tool_errors;
      stats->tool_errors += 1;
    }
    std::vector<int64_t>& tool = appended[i];
    const int64_t room = Budget(c);
    if (static_cast<int64_t>(tool.size()) > room) tool.resize(static_cast<size_t>(room));
    for (int64_t id : tool) {
      c.ids.push_back(id);
      c.logprobs.push_back(0);
      c.mask.push_back(0);
      c.versions.push_back(-1);
    }
    stats->tool_tokens += static_cast<int64_t>(tool.size());
    c.answer_from = static_cast<int64_t>(c.ids.size());
    if (Budget(c) < 1 || c.turns >= o_.max_turns) c.done = true;
  }
  return Status::OK();
}

Status ConversationRunner::Finish(const model::Transformer& model, uint64_t version,
                                  const std::vector<Conversation*>& all, const ToolRunner& tools, uint64_t seed,
                                  TurnStats* stats) {
  for (int64_t turn = 0; turn <= o_.max_turns; ++turn) {
    bool any = std::any_of(all.begin(), all.end(), [](const Conversation* c) { return !c->done; });
    if (!any) break;
    RL_RETURN_IF_ERROR(Turn(model, version, all, tools, seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(turn), stats));
  }
  return Status::OK();
}

}  // namespace rl::rollout
