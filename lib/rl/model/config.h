// ModelConfig: the shape of a decoder-only transformer, and its JSON form.
//
// The JSON form travels inside checkpoints ("rl_config" in the safetensors metadata) and in
// pipeline configs, so it is strict: unknown keys and wrong types are errors (Status::Config),
// and a config that parses is also Validate()d.
//   {"vocab_size": 15, "d_model": 128, "n_layers": 3, "n_heads": 4, "context": 32,
//    "positions": "rotary", "norm": "rmsnorm", "tie_embeddings": true, "mlp_ratio": 4}
// vocab_size, d_model, n_layers, n_heads and context are required; the rest have the defaults
// below.
// Thread safety: a value type; no shared state. This header does not include libtorch.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "rl/core/status.h"

namespace rl::model {

enum class Positions { kLearned, kRotary };
enum class Norm { kLayerNorm, kRmsNorm };

const char* PositionsName(Positions p);  // "learned", "rotary"
const char* NormName(Norm n);            // "layernorm", "rmsnorm"

struct ModelConfig {
  int64_t vocab_size = 0;
  int64_t d_model = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t context = 0;  // the most positions a sequence may hold (prompt + response)
  Positions positions = Positions::kLearned;
  Norm norm = Norm::kLayerNorm;
  bool tie_embeddings = true;  // the LM head reuses the token embedding matrix
  int64_t mlp_ratio = 4;       // the MLP's hidden width is mlp_ratio * d_model

  int64_t head_dim() const { return n_heads > 0 ? d_model / n_heads : 0; }

  // OK when every size is positive, d_model divides by n_heads, and rotary heads have an even
  // width. Also bounds each size so products cannot overflow (Config otherwise).
  Status Validate() const;

  bool operator==(const ModelConfig& o) const;
  bool operator!=(const ModelConfig& o) const { return !(*this == o); }
};

// The number of scalar parameters a model of this config holds, computed without building it (a
// loader compares it with a file before allocating). Config if the config is invalid or the count
// overflows int64.
Result<int64_t> ParameterCount(const ModelConfig& c);

nlohmann::json ConfigToJson(const ModelConfig& c);
Result<ModelConfig> ConfigFromJson(const nlohmann::json& j);

// The compact JSON text of a config, and its inverse (Config on bad text).
std::string ConfigToString(const ModelConfig& c);
Result<ModelConfig> ConfigFromString(const std::string& text);

}  // namespace rl::model
