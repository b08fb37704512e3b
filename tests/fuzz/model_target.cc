// Fuzz entry point over the files and rows a model-holding role reads: see targets.h. Kept apart
// from targets.cc so that the queue's targets do not link libtorch.
#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "rl/model/config.h"
#include "rl/model/model_file.h"
#include "rl/model/safetensors.h"
#include "rl/model/transformer.h"
#include "rl/train/checkpoint.h"
#include "rl/train/grpo_loss.h"
#include "rl/train/sample.h"
#include "rl/wire/envelope.h"
#include "targets.h"

namespace rl::fuzz {
namespace {

// A model small enough to run for every input: 2 tokens of a decoded model, a batch of rows.
constexpr int64_t kMaxRunParameters = 1 << 16;

// Two tokens through a model: a config that validated and weights that loaded must compute.
void RunTwoTokens(const model::Transformer& m) {
  if (m.config().context() < 2) return;
  const int64_t last = m.config().vocab_size - 1;
  (void)m.Forward(at::tensor(std::vector<int64_t>{0, last}, at::kLong).unsqueeze(0));
}

void Safetensors(std::string_view bytes) { (void)model::DecodeSafetensors(bytes); }

void ModelFile(std::string_view bytes) {
  auto m = model::DecodeModel(bytes);
  if (!m.ok()) return;
  RunTwoTokens(m->model);
  (void)model::LoadModelWeights(bytes, &m->model);  // its own weights: loads again
}

void CheckpointFile(std::string_view bytes) {
  auto c = train::DecodeCheckpoint(std::string(bytes));
  if (c.ok() && c->model.has_value()) RunTwoTokens(*c->model);
}

// A config.json: validated, counted, and when small enough built and run.
void Config(std::string_view bytes) {
  auto c = model::ConfigFromString(std::string(bytes));
  if (!c.ok()) return;
  (void)model::ConfigToString(*c);
  auto count = model::ParameterCount(*c);
  if (!count.ok() || *count > kMaxRunParameters || c->context() > 4096) return;
  auto m = model::Transformer::Create(*c, 1);
  if (m.ok()) RunTwoTokens(*m);
}

// The trainer's model for rows: a Qwen3-MoE of 2 sparse layers, 4 experts, 2 per token.
const model::Transformer& RowModel() {
  static const model::Transformer m = [] {
    model::ModelConfig c;
    c.architecture = model::Architecture::kQwen3Moe;
    c.vocab_size = 32;
    c.hidden_size = 16;
    c.intermediate_size = 24;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 2;
    c.num_key_value_heads = 1;
    c.head_dim = 8;
    c.max_position_embeddings = 32;
    c.moe.num_experts = 4;
    c.moe.num_experts_per_tok = 2;
    c.moe.moe_intermediate_size = 8;
    c.moe.norm_topk_prob = true;
    return model::Transformer::Create(c, 1).value();
  }();
  return m;
}

// "get reply body|#|frame|#|...": a get reply from rl-queue as the trainer reads it, sorted as it
// sorts rows (with and without routing replay), and the first groups' tokens scored by the model
// with their routes replayed, as a step does.
void Rows(std::string_view bytes) {
  Message m;
  size_t start = 0;
  for (int part = 0;; ++part) {
    const size_t at = bytes.find("|#|", start);
    std::string frame(bytes.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (part == 0) m.body = std::move(frame);
    else m.blobs.push_back(std::move(frame));
    if (at == std::string_view::npos || part > 8) break;
    start = at + 3;
  }
  auto reply = queue::DecodeGetReply(m);
  if (!reply.ok()) return;
  (void)train::SortRows(reply->rows);
  const model::Transformer& net = RowModel();
  const train::SortedRows sorted = train::SortRows(reply->rows, train::RouteLimitsOf(net.config(), true));
  (void)train::TokenAgeOf(sorted.groups, 1);
  std::vector<const train::Sample*> batch;
  for (const train::Group& g : sorted.groups) {
    for (const train::Sample& s : g.samples) {
      if (batch.size() < 4 && s.prompt_ids.size() + s.response_ids.size() <= static_cast<size_t>(net.config().context()))
        batch.push_back(&s);
    }
  }
  if (batch.empty()) return;
  const train::TokenBatch t = train::MakeTokenBatch(batch, 0, {net.config().SparseLayerCount(), 2});
  at::Tensor own;
  (void)train::TokenLogprobs(net, t.tokens, t.mask, 1.0, t.routes, &own);
}

}  // namespace

void FuzzModelFiles(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t at = all.find("|#|");
  const std::string_view kind = all.substr(0, std::min(at, all.size()));
  const std::string_view rest = at == std::string_view::npos ? all : all.substr(at + 3);
  if (kind == "safetensors") return Safetensors(rest);
  if (kind == "model") return ModelFile(rest);
  if (kind == "checkpoint") return CheckpointFile(rest);
  if (kind == "config") return Config(rest);
  if (kind == "rows") return Rows(rest);
  Safetensors(all);
  ModelFile(all);
  CheckpointFile(all);
  Config(all);
  Rows(all);
}

}  // namespace rl::fuzz
