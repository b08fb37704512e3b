#include "rl/train/evaluate.h"

#include <spdlog/spdlog.h>

#include "rl/model/generate.h"

namespace rl::train {
namespace {

// The mean score of gens[i * per + j] over all i, j; per = responses per example.
Result<double> MeanScore(const std::vector<model::Generation>& gens, size_t per, const model::PromptEncoder& encoder,
                         const EvalSet& set, reward::Verifier* verifier, size_t* unscorable) {
  double total = 0;
  for (size_t i = 0; i < gens.size(); ++i) {
    const task::Example& e = set.examples[i / per];
    RL_ASSIGN_OR_RETURN(std::string text, encoder.Decode(gens[i].response_ids));
    Result<double> score = verifier->Score({model::QuestionOf(e), std::move(text), e.answer});
    if (score.ok()) {
      total += *score;
    } else {
      if (verifier->broken()) return score.status();
      if ((*unscorable)++ == 0) spdlog::warn("{}:{}: not scored: {}", set.path, e.line, score.status().message());
    }
  }
  return gens.empty() ? 0.0 : total / static_cast<double>(gens.size());
}

}  // namespace

Result<EvalSet> LoadEvalSet(const std::string& path, const task::DatasetOptions& options,
                            const model::PromptEncoder& encoder, size_t limit) {
  task::DatasetOptions o = options;
  if (o.answer_key.empty()) return Status::InvalidArgument("evaluation needs answers (--answer-key)");
  RL_ASSIGN_OR_RETURN(std::unique_ptr<task::Dataset> data, task::Dataset::Open(path, o));
  EvalSet set;
  set.path = path;
  for (size_t i = 0; i < std::min(limit, data->size()); ++i) {
    RL_ASSIGN_OR_RETURN(task::Example e, data->Read(i));
    auto ids = encoder.Prompt(e);
    if (!ids.ok()) return ids.status().WithContext(path + ":" + std::to_string(e.line));
    set.prompts.push_back(std::move(*ids));
    set.examples.push_back(std::move(e));
  }
  return set;
}

Result<EvalResult> Evaluate(const model::Transformer& model, const model::PromptEncoder& encoder, const EvalSet& set,
                            reward::Verifier* verifier, const EvalOptions& o) {
  EvalResult r;
  r.examples = set.examples.size();
  r.k = o.samples;
  if (set.examples.empty()) return r;
  const int64_t context = model.config().context();
  for (size_t i = 0; i < set.prompts.size(); ++i) {
    if (static_cast<int64_t>(set.prompts[i].size()) >= context) {
      return Status::DataError(set.path + ":" + std::to_string(set.examples[i].line) + ": the prompt (" +
                               std::to_string(set.prompts[i].size()) + " tokens) leaves no room in the model's " +
                               "context of " + std::to_string(context));
    }
  }
  model::GenerateOptions go;
  go.max_new_tokens = o.max_new_tokens > 0 ? o.max_new_tokens : model.config().context();
  go.slots = o.slots;
  go.eos_id = encoder.dir().eos_id;
  go.seed = o.seed;
  go.sampling.temperature = 0;
  RL_ASSIGN_OR_RETURN(std::vector<model::Generation> greedy, model::Generate(model, set.prompts, go));
  RL_ASSIGN_OR_RETURN(r.pass_at_1, MeanScore(greedy, 1, encoder, set, verifier, &r.unscorable));
  if (o.samples > 0) {
    std::vector<std::vector<int64_t>> prompts;
    for (const auto& p : set.prompts) prompts.insert(prompts.end(), static_cast<size_t>(o.samples), p);
    go.sampling.temperature = o.temperature;
    RL_ASSIGN_OR_RETURN(std::vector<model::Generation> sampled, model::Generate(model, prompts, go));
    RL_ASSIGN_OR_RETURN(r.mean_at_k, MeanScore(sampled, static_cast<size_t>(o.samples), encoder, set, verifier,
                                               &r.unscorable));
  }
  return r;
}

Result<double> GreedyAccuracy(const model::Transformer& model, const model::PromptEncoder& encoder, const EvalSet& set,
                              reward::Verifier* verifier, int64_t max_new_tokens) {
  EvalOptions o;
  o.max_new_tokens = max_new_tokens;
  RL_ASSIGN_OR_RETURN(EvalResult r, Evaluate(model, encoder, set, verifier, o));
  return r.pass_at_1;
}

}  // namespace rl::train
