// The judge's two modes over one loaded model; see judge.h.
#include "rl/reward/judge.h"

#include <torch/torch.h>

#include <algorithm>
#include <cctype>

#include "rl/core/log.h"
#include "rl/model/device.h"
#include "rl/model/generate.h"
#include "rl/model/hf_dir.h"
#include "rl/model/model_dir.h"
#include "rl/model/prompt_encoder.h"
#include "rl/model/tokenizer/regex.h"
#include "rl/model/torch_guard.h"
#include "rl/reward/judge_prompt.h"

namespace rl::reward {
namespace {

std::string Trimmed(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// A missing judge is a configuration error of this role (exit 78), not bad row data.
Status AsConfig(const Status& s) {
  if (s.code() == Code::kNotFound) return Status::Config("--judge " + s.message());
  return s;
}

class Judge final : public JudgeVerifier {
 public:
  Judge(JudgeOptions o, JudgePrompt prompt, model::PromptEncoder encoder, model::Transformer model)
      : o_(std::move(o)), prompt_(std::move(prompt)), encoder_(std::move(encoder)), model_(std::move(model)) {}

  Status Prepare() {
    const model::ModelDir& dir = encoder_.dir();
    if (o_.mode == "prob") {
      model::EncodeOptions eo;
      eo.add_special_tokens = false;
      auto encoded = dir.tokenizer->EncodeWith(o_.verdict, eo);
      if (!encoded.ok()) {  // a character the vocabulary lacks (the demo's has no space): a setting, not data
        return Status::Config("--judge-verdict '" + o_.verdict + "' cannot be encoded by the judge's tokenizer: " +
                              encoded.status().message());
      }
      const std::vector<int64_t>& ids = *encoded;
      if (ids.size() != 1) {
        return Status::Config("--judge-verdict '" + o_.verdict + "' is " + std::to_string(ids.size()) +
                              " tokens of the judge's tokenizer; prob mode needs exactly one");
      }
      verdict_id_ = ids[0];
      return Status::OK();
    }
    RL_ASSIGN_OR_RETURN(pattern_, tokenizer::Regex::Compile(o_.pattern));
    return Status::OK();
  }

  Result<double> Score(const RewardRequest& req) override { return ScoreBatch({req})[0]; }

  std::vector<Result<double>> ScoreBatch(const std::vector<RewardRequest>& reqs) override {
    auto scored = o_.mode == "prob" ? Probabilities(reqs) : Verdicts(reqs);
    if (!scored.ok()) return std::vector<Result<double>>(reqs.size(), scored.status());
    if (o_.mode == "prob" && o_.threshold > 0) {
      for (Result<double>& r : *scored) {
        if (r.ok()) r = *r >= o_.threshold ? 1.0 : 0.0;
      }
    }
    return std::move(*scored);
  }

  Result<std::vector<Result<double>>> Probabilities(const std::vector<RewardRequest>& reqs) override {
    std::vector<Result<double>> out(reqs.size(), Status::Internal("not scored"));
    std::vector<std::vector<int64_t>> prompts;
    std::vector<size_t> rows;  // prompts[k] is reqs[rows[k]]
    Encode(reqs, /*room=*/1, &out, &prompts, &rows);
    if (prompts.empty()) return out;
    size_t width = 0;
    for (const auto& p : prompts) width = std::max(width, p.size() + 1);
    const int64_t b = static_cast<int64_t>(prompts.size()), t = static_cast<int64_t>(width);
    auto logp = model::TorchGuard("judge forward", [&]() -> Result<at::Tensor> {
      c10::NoGradGuard no_grad;
      at::Tensor tokens = torch::full({b, t}, encoder_.dir().pad_id, torch::kInt64);
      at::Tensor mask = torch::zeros({b, t - 1}, torch::kInt64);
      auto tok = tokens.accessor<int64_t, 2>();
      auto m = mask.accessor<int64_t, 2>();
      for (int64_t i = 0; i < b; ++i) {
        const auto& p = prompts[i];
        for (size_t j = 0; j < p.size(); ++j) tok[i][j] = p[j];
        tok[i][p.size()] = verdict_id_;  // the next token whose probability is asked
        m[i][p.size() - 1] = 1;
      }
      RL_ASSIGN_OR_RETURN(at::Tensor lp, model_.MaskedTokenLogprobs(tokens, mask));
      return lp.sum(1).exp().to(at::kCPU).contiguous();
    });
    if (!logp.ok()) return logp.status();
    auto p = logp->accessor<float, 1>();
    for (size_t k = 0; k < rows.size(); ++k) out[rows[k]] = static_cast<double>(p[k]);
    return out;
  }

  uint64_t unparsed() const override { return unparsed_; }

 private:
  // Encodes each request's judging prompt; those that leave less than `room` positions in the
  // context fail alone (DataError) in *out, the others go to *prompts with their row in *rows.
  void Encode(const std::vector<RewardRequest>& reqs, int64_t room, std::vector<Result<double>>* out,
              std::vector<std::vector<int64_t>>* prompts, std::vector<size_t>* rows) const {
    const int64_t context = model_.config().context();
    for (size_t i = 0; i < reqs.size(); ++i) {
      task::Example e;
      e.prompt = prompt_.Render(reqs[i]);
      Result<std::vector<int64_t>> ids = encoder_.Prompt(e);
      if (ids.ok() && (ids->empty() || static_cast<int64_t>(ids->size()) + room > context)) {
        ids = Status::DataError("judging prompt of " + std::to_string(ids->size()) +
                                " tokens leaves no room in the judge's " + std::to_string(context) + "-token context");
      }
      if (!ids.ok()) {
        (*out)[i] = ids.status();
        continue;
      }
      prompts->push_back(std::move(*ids));
      rows->push_back(i);
    }
  }

  Result<std::vector<Result<double>>> Verdicts(const std::vector<RewardRequest>& reqs) {
    std::vector<Result<double>> out(reqs.size(), Status::Internal("not scored"));
    std::vector<std::vector<int64_t>> prompts;
    std::vector<size_t> rows;
    Encode(reqs, o_.max_new_tokens, &out, &prompts, &rows);
    if (prompts.empty()) return out;
    model::GenerateOptions g;
    g.max_new_tokens = o_.max_new_tokens;
    g.sampling.temperature = 0;  // greedy: the same row gets the same verdict
    g.slots = static_cast<int64_t>(prompts.size());
    g.eos_id = encoder_.dir().eos_id;
    RL_ASSIGN_OR_RETURN(std::vector<model::Generation> gens, model::Generate(model_, prompts, g));
    const std::string want = Trimmed(o_.verdict);
    for (size_t k = 0; k < rows.size(); ++k) {
      RL_ASSIGN_OR_RETURN(std::string text, encoder_.Decode(gens[k].response_ids));
      std::string found;
      bool matched = false;
      RL_RETURN_IF_ERROR(pattern_->FindAll(text, [&](size_t b, size_t e) {
        if (!matched) found = text.substr(b, e - b);
        matched = true;
      }));
      if (!matched) {
        ++unparsed_;
        spdlog::debug("judge: no verdict in '{}'", text);
      }
      out[rows[k]] = matched && Trimmed(found) == want ? 1.0 : 0.0;
    }
    return out;
  }

  JudgeOptions o_;
  JudgePrompt prompt_;
  model::PromptEncoder encoder_;
  model::Transformer model_;
  int64_t verdict_id_ = -1;
  std::shared_ptr<const tokenizer::Regex> pattern_;
  uint64_t unparsed_ = 0;
};

}  // namespace

Result<std::unique_ptr<JudgeVerifier>> JudgeVerifier::Open(const JudgeOptions& o) {
  if (o.mode != "prob" && o.mode != "generate") {
    return Status::InvalidArgument("--judge-mode must be prob or generate, not '" + o.mode + "'");
  }
  if (o.threshold < 0 || o.threshold > 1) return Status::InvalidArgument("--judge-threshold must be in [0, 1]");
  if (o.max_new_tokens < 1) return Status::InvalidArgument("--judge-max-new-tokens must be at least 1");
  RL_ASSIGN_OR_RETURN(JudgePrompt prompt, JudgePrompt::Parse(o.prompt_template));
  Result<model::ModelDir> dir = model::OpenModelDir(o.dir);
  if (!dir.ok()) return AsConfig(dir.status());
  if (!dir->has_weights) {
    return Status::Config("--judge " + o.dir + ": no model.safetensors: a judge needs trained weights");
  }
  RL_ASSIGN_OR_RETURN(model::PromptEncoder encoder, model::PromptEncoder::Create(*dir, "auto"));
  RL_ASSIGN_OR_RETURN(c10::Device device, model::OpenDevice(o.device));
  Result<model::Transformer> model = model::LoadHfModel(o.dir);
  if (!model.ok()) return AsConfig(model.status());
  RL_RETURN_IF_ERROR(model::CheckVocabulary(*model, *dir, "--judge " + o.dir));
  RL_RETURN_IF_ERROR(model->To(device));
  auto judge = std::make_unique<Judge>(o, std::move(prompt), std::move(encoder), std::move(*model));
  RL_RETURN_IF_ERROR(judge->Prepare());
  return std::unique_ptr<JudgeVerifier>(std::move(judge));
}

}  // namespace rl::reward
