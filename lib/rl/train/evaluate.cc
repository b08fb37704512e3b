#include "rl/train/evaluate.h"

#include "rl/model/generate.h"
#include "rl/model/tokenizer.h"

namespace rl::train {

Result<double> GreedyAccuracy(const model::Transformer& model, const std::vector<Problem>& problems) {
  if (problems.empty()) return 0.0;
  model::CharTokenizer tok;
  std::vector<std::vector<int64_t>> prompts, answers;
  for (const Problem& p : problems) {
    RL_ASSIGN_OR_RETURN(std::vector<int64_t> ids, tok.Encode(p.prompt));
    ids.insert(ids.begin(), tok.bos_id());
    prompts.push_back(std::move(ids));
    RL_ASSIGN_OR_RETURN(std::vector<int64_t> answer, tok.Encode(p.answer));
    answers.push_back(std::move(answer));
  }
  model::GenerateOptions o;
  o.max_new_tokens = 6;
  o.sampling.temperature = 0;
  o.slots = 64;
  o.eos_id = tok.eos_id();
  RL_ASSIGN_OR_RETURN(std::vector<model::Generation> gens, model::Generate(model, prompts, o));
  size_t correct = 0;
  for (size_t i = 0; i < gens.size(); ++i) correct += IsCorrectIds(gens[i].response_ids, answers[i], tok.eos_id());
  return static_cast<double>(correct) / static_cast<double>(gens.size());
}

}  // namespace rl::train
