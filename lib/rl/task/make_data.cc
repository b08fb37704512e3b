#include "rl/task/make_data.h"

#include <nlohmann/json.hpp>

#include "rl/task/addition.h"
#include "rl/task/jsonl.h"
#include "rl/task/multiply.h"
#include "rl/task/word_problems.h"

namespace rl::task {
namespace {

Status WriteAddition(const MakeDataOptions& o, std::ostream& out) {
  if (o.response_format != "none") {
    return Status::InvalidArgument("--response-format is for --task words, multiply or chain");
  }
  if (o.max_number != 0) return Status::InvalidArgument("--max-number is for --task words");
  if (o.split != "numbers") return Status::InvalidArgument("--split is for --task words");
  for (const Problem& p : o.held_out ? HeldOutSet(o.count) : MakeProblems(o.count, o.seed)) {
    out << nlohmann::json{{"prompt", p.prompt}, {"answer", p.answer}}.dump() << "\n";
  }
  return Status::OK();
}

Status WriteMultiply(const MakeDataOptions& o, std::ostream& out) {
  if (o.response_format != "none" && o.response_format != "tools") {
    return Status::InvalidArgument("--task " + o.task + " takes --response-format none or tools");
  }
  if (o.max_number != 0) return Status::InvalidArgument("--max-number is for --task words");
  if (o.split != "numbers") return Status::InvalidArgument("--split is for --task words");
  const bool chain = o.task == "chain";
  const uint64_t seed = o.held_out ? kHeldOutSeed : o.seed;
  for (const Problem& p : chain ? DrawChainProblems(o.count, seed, o.held_out)
                                : DrawMultiplyProblems(o.count, seed, o.held_out)) {
    nlohmann::ordered_json j = {{"prompt", p.prompt}, {"answer", p.answer}};
    if (o.response_format == "tools") j["response"] = chain ? ChainToolResponse(p) : MultiplyToolResponse(p);
    RL_RETURN_IF_ERROR(WriteJsonLine(out, j));
  }
  return Status::OK();
}

Status WriteWords(const MakeDataOptions& o, std::ostream& out) {
  RL_ASSIGN_OR_RETURN(ResponseFormat format, ParseResponseFormat(o.response_format));
  RL_ASSIGN_OR_RETURN(WordSplit split, ParseWordSplit(o.split));
  RL_ASSIGN_OR_RETURN(std::vector<WordProblem> problems,
                      o.held_out ? WordProblemsHeldOut(o.count, o.max_number, split)
                                 : DrawWordProblems(o.count, o.seed, false, o.max_number, split));
  for (const WordProblem& p : problems) {
    nlohmann::ordered_json j = {{"prompt", p.prompt}, {"answer", p.answer}};
    if (format != ResponseFormat::kNone) j["response"] = WordProblemResponse(p, format);
    RL_RETURN_IF_ERROR(WriteJsonLine(out, j));
  }
  return Status::OK();
}

}  // namespace

Status WriteTaskData(const MakeDataOptions& options, std::ostream& out) {
  Status s = options.task == "addition" ? WriteAddition(options, out)
             : options.task == "words"  ? WriteWords(options, out)
             : options.task == "multiply" || options.task == "chain" ? WriteMultiply(options, out)
                                        : Status::InvalidArgument("unknown task '" + options.task +
                                                                  "' (addition, words, multiply or chain)");
  RL_RETURN_IF_ERROR(s);
  out.flush();
  if (!out) return Status::IOError("write failed");
  return Status::OK();
}

}  // namespace rl::task
