#include "rl/model/config.h"

#include <nlohmann/json.hpp>

namespace rl::model {
namespace {

constexpr int64_t kMaxSize = int64_t{1} << 24;  // far above any model this toolkit trains

Status CheckRange(const char* name, int64_t v) {
  if (v <= 0 || v > kMaxSize) {
    return Status::Config(std::string("model config: ") + name + " must be in [1, " +
                          std::to_string(kMaxSize) + "], got " + std::to_string(v));
  }
  return Status::OK();
}

Result<int64_t> GetInt(const nlohmann::json& j, const char* key) {
  const auto& v = j.at(key);
  if (!v.is_number_integer()) {
    return Status::Config(std::string("model config: '") + key + "' must be an integer");
  }
  return v.get<int64_t>();
}

Result<std::string> GetString(const nlohmann::json& j, const char* key) {
  const auto& v = j.at(key);
  if (!v.is_string()) {
    return Status::Config(std::string("model config: '") + key + "' must be a string");
  }
  return v.get<std::string>();
}

Status ReadEnums(const nlohmann::json& j, ModelConfig* c) {
  if (j.contains("positions")) {
    RL_ASSIGN_OR_RETURN(std::string p, GetString(j, "positions"));
    if (p == "learned") {
      c->positions = Positions::kLearned;
    } else if (p == "rotary") {
      c->positions = Positions::kRotary;
    } else {
      return Status::Config("model config: positions must be \"learned\" or \"rotary\", got \"" +
                            p + "\"");
    }
  }
  if (j.contains("norm")) {
    RL_ASSIGN_OR_RETURN(std::string n, GetString(j, "norm"));
    if (n == "layernorm") {
      c->norm = Norm::kLayerNorm;
    } else if (n == "rmsnorm") {
      c->norm = Norm::kRmsNorm;
    } else {
      return Status::Config("model config: norm must be \"layernorm\" or \"rmsnorm\", got \"" + n +
                            "\"");
    }
  }
  return Status::OK();
}

}  // namespace

const char* PositionsName(Positions p) { return p == Positions::kRotary ? "rotary" : "learned"; }
const char* NormName(Norm n) { return n == Norm::kRmsNorm ? "rmsnorm" : "layernorm"; }

Status ModelConfig::Validate() const {
  RL_RETURN_IF_ERROR(CheckRange("vocab_size", vocab_size));
  RL_RETURN_IF_ERROR(CheckRange("d_model", d_model));
  RL_RETURN_IF_ERROR(CheckRange("n_layers", n_layers));
  RL_RETURN_IF_ERROR(CheckRange("n_heads", n_heads));
  RL_RETURN_IF_ERROR(CheckRange("context", context));
  RL_RETURN_IF_ERROR(CheckRange("mlp_ratio", mlp_ratio));
  if (d_model % n_heads != 0) {
    return Status::Config("model config: d_model " + std::to_string(d_model) +
                          " is not a multiple of n_heads " + std::to_string(n_heads));
  }
  if (positions == Positions::kRotary && head_dim() % 2 != 0) {
    return Status::Config("model config: rotary positions need an even head width, got " +
                          std::to_string(head_dim()));
  }
  return Status::OK();
}

bool ModelConfig::operator==(const ModelConfig& o) const {
  return vocab_size == o.vocab_size && d_model == o.d_model && n_layers == o.n_layers &&
         n_heads == o.n_heads && context == o.context && positions == o.positions &&
         norm == o.norm && tie_embeddings == o.tie_embeddings && mlp_ratio == o.mlp_ratio;
}

Result<int64_t> ParameterCount(const ModelConfig& c) {
  RL_RETURN_IF_ERROR(c.Validate());
  const int64_t d = c.d_model, hidden = c.mlp_ratio * c.d_model;
  const int64_t norm = c.norm == Norm::kLayerNorm ? 2 * d : d;
  // Each term is a product of two sizes below 2^24 (hidden < 2^48), so only the sums can overflow.
  int64_t hidden_d = 0;
  if (__builtin_mul_overflow(hidden, d, &hidden_d))
    return Status::Config("model config: too large");
  const int64_t terms_per_layer[] = {2 * norm, 3 * d * d + 3 * d, d * d + d, hidden_d + hidden,
                                     hidden_d + d};
  int64_t layer = 0, total = 0;
  for (int64_t t : terms_per_layer) {
    if (__builtin_add_overflow(layer, t, &layer)) return Status::Config("model config: too large");
  }
  const int64_t terms[] = {c.vocab_size * d, c.positions == Positions::kLearned ? c.context * d : 0,
                           norm, c.tie_embeddings ? 0 : c.vocab_size * d};
  if (__builtin_mul_overflow(layer, c.n_layers, &total)) {
    return Status::Config("model config: too large");
  }
  for (int64_t t : terms) {
    if (__builtin_add_overflow(total, t, &total)) return Status::Config("model config: too large");
  }
  return total;
}

nlohmann::json ConfigToJson(const ModelConfig& c) {
  return nlohmann::json{{"vocab_size", c.vocab_size}, {"d_model", c.d_model},
                        {"n_layers", c.n_layers},     {"n_heads", c.n_heads},
                        {"context", c.context},       {"positions", PositionsName(c.positions)},
                        {"norm", NormName(c.norm)},   {"tie_embeddings", c.tie_embeddings},
                        {"mlp_ratio", c.mlp_ratio}};
}

Result<ModelConfig> ConfigFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return Status::Config("model config: expected a JSON object");
  static const char* const kKnown[] = {"vocab_size",     "d_model", "n_layers",
                                       "n_heads",        "context", "positions",
                                       "tie_embeddings", "norm",    "mlp_ratio"};
  for (const auto& item : j.items()) {
    bool known = false;
    for (const char* k : kKnown) known = known || item.key() == k;
    if (!known) return Status::Config("model config: unknown key '" + item.key() + "'");
  }
  ModelConfig c;
  for (const char* key : {"vocab_size", "d_model", "n_layers", "n_heads", "context"}) {
    if (!j.contains(key)) return Status::Config(std::string("model config: missing '") + key + "'");
  }
  RL_ASSIGN_OR_RETURN(c.vocab_size, GetInt(j, "vocab_size"));
  RL_ASSIGN_OR_RETURN(c.d_model, GetInt(j, "d_model"));
  RL_ASSIGN_OR_RETURN(c.n_layers, GetInt(j, "n_layers"));
  RL_ASSIGN_OR_RETURN(c.n_heads, GetInt(j, "n_heads"));
  RL_ASSIGN_OR_RETURN(c.context, GetInt(j, "context"));
  if (j.contains("mlp_ratio")) {
    RL_ASSIGN_OR_RETURN(c.mlp_ratio, GetInt(j, "mlp_ratio"));
  }
  if (j.contains("tie_embeddings")) {
    if (!j.at("tie_embeddings").is_boolean()) {
      return Status::Config("model config: 'tie_embeddings' must be true or false");
    }
    c.tie_embeddings = j.at("tie_embeddings").get<bool>();
  }
  RL_RETURN_IF_ERROR(ReadEnums(j, &c));
  RL_RETURN_IF_ERROR(c.Validate());
  return c;
}

std::string ConfigToString(const ModelConfig& c) { return ConfigToJson(c).dump(); }

Result<ModelConfig> ConfigFromString(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Config("model config: not valid JSON");
  return ConfigFromJson(j);
}

}  // namespace rl::model
