// ModelConfig: the shape of a decoder-only language model, as a Hugging Face config.json states
// it, and its JSON form (which is that config.json text).
//
// Six families, chosen by config.json's "architectures" (or, when that is absent,
// "model_type"): LlamaForCausalLM (llama), MistralForCausalLM (mistral), Qwen2ForCausalLM
// (qwen2), Qwen3ForCausalLM (qwen3), Qwen3MoeForCausalLM (qwen3_moe), MixtralForCausalLM
// (mixtral).
// All are pre-norm decoders with RMSNorm, rotary positions (rotate-half layout), SwiGLU MLPs,
// grouped-query attention and a tied or untied LM head; they differ in the attention biases
// (Qwen2: q/k/v always; Mistral and Mixtral: never; the others: q/k/v/o when attention_bias),
// Qwen3's and Qwen3-MoE's RMSNorm on each head of q and k before the rotation, and the sparse
// MLPs of Qwen3-MoE and Mixtral: in a sparse layer a router picks each token's top k of
// num_experts SwiGLU experts and sums their outputs weighted by the router's softmax
// (renormalized over the k when norm_topk_prob; always for Mixtral, whose every layer is sparse
// with experts intermediate_size wide, named block_sparse_moe.experts.{e}.w1/w3/w2).
//
// Fields read (HF names and meanings; "req" = required):
//   vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
//   max_position_embeddings: positive integers, req.
//   num_key_value_heads (default num_attention_heads; must divide it),
//   head_dim (default hidden_size / num_attention_heads, which must then divide; req for qwen3;
//   must be even), rms_norm_eps (default 1e-6, > 0), rope_theta (default 10000, > 0),
//   rope_scaling: null, {"rope_type"|"type": "default"}, or {"rope_type"|"type": "llama3",
//   "factor", "low_freq_factor" < "high_freq_factor", "original_max_position_embeddings"},
//   tie_word_embeddings (default false), attention_bias (default false), mlp_bias (false only),
//   hidden_act ("silu" only), use_sliding_window (false only), torch_dtype or dtype ("float32",
//   "bfloat16", "float16"; default float32), bos_token_id (int or null), eos_token_id (int, list
//   of ints, or null; ids must be inside the vocabulary).
//   qwen3_moe only: num_experts, num_experts_per_tok (<= num_experts), moe_intermediate_size:
//   positive integers, req.; norm_topk_prob (default false), decoder_sparse_step (default 1,
//   positive: layer i is sparse when (i + 1) % step == 0), mlp_only_layers (default [], layer
//   indices that stay dense). router_aux_loss_coef and output_router_logits are kept, not read.
//   mixtral only: num_local_experts, num_experts_per_tok (<= it): positive integers, req.
//   mistral and mixtral: sliding_window (int or null): attention is full here, so a window must
//   not be shorter than the context bound (rl_context below may shorten that); attention_bias is
//   not read (transformers' Mistral has no biases).
//   rl_context (ours; default max_position_embeddings): the context bound the roles use, the most
//   positions one sequence (prompt + response) may hold, <= max_position_embeddings. KV caches
//   and rotary tables are sized by it, so a model with a 128K-position maximum can run with a
//   small cache. HF tools ignore the key.
// Any other key is kept verbatim (`extra`) and written back, but not interpreted. A missing
// required field, a wrong type, contradictory values or an unsupported value is a one-line
// Status::Config naming the field: never a guess.
//
// Thread safety: a value type; no shared state. This header does not include libtorch.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl::model {

enum class Architecture { kLlama, kQwen2, kQwen3, kQwen3Moe, kMistral, kMixtral };
// "LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
// "MistralForCausalLM", "MixtralForCausalLM".
const char* ArchitectureName(Architecture a);
// "llama", "qwen2", "qwen3", "qwen3_moe", "mistral", "mixtral".
const char* ModelTypeName(Architecture a);

// A floating-point dtype for weights on disk and for computation.
enum class DType { kF32, kBF16, kF16 };
const char* DTypeName(DType d);  // "float32", "bfloat16", "float16" (torch_dtype's spelling)
Result<DType> DTypeFromName(const std::string& name);  // Config for anything else

// Llama 3.1's frequency-dependent rotary scaling (rope_type "llama3").
struct RopeScaling {
  bool llama3 = false;  // false: plain rotary
  double factor = 0;
  double low_freq_factor = 0;
  double high_freq_factor = 0;
  int64_t original_max_position_embeddings = 0;
  bool operator==(const RopeScaling& o) const;
};

// The sparse MLPs of Qwen3-MoE and Mixtral (num_experts 0: none, every layer dense). Mixtral's are
// what its config implies: intermediate_size wide, renormalized, every layer, none dense.
struct MoeConfig {
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;  // k: the experts each token is routed to
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;  // the k routing weights renormalized to sum to 1
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  bool operator==(const MoeConfig& o) const;
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // 0 when built by hand: same as num_attention_heads
  int64_t head_dim = 0;             // 0 when built by hand: hidden_size / num_attention_heads
  int64_t max_position_embeddings = 0;
  int64_t rl_context = 0;  // 0: max_position_embeddings
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  MoeConfig moe;               // qwen3_moe and mixtral only
  int64_t sliding_window = 0;  // mistral and mixtral: 0 for none (null)
  DType torch_dtype = DType::kF32;
  int64_t bos_token_id = -1;          // -1: none
  std::vector<int64_t> eos_token_id;  // empty: none
  std::string extra = "{}";           // the keys not listed above, as a compact JSON object

  // The sizes with defaults applied (use these, not the raw fields).
  int64_t kv_heads() const {
    return num_key_value_heads > 0 ? num_key_value_heads : num_attention_heads;
  }
  int64_t head_width() const {
    if (head_dim > 0) return head_dim;
    return num_attention_heads > 0 ? hidden_size / num_attention_heads : 0;
  }
  // The context bound: the most positions one sequence (prompt + response) may hold.
  int64_t context() const { return rl_context > 0 ? rl_context : max_position_embeddings; }
  bool qkv_bias() const { return architecture == Architecture::kQwen2 || attention_bias; }
  bool o_bias() const { return architecture != Architecture::kQwen2 && attention_bias; }
  // The families whose config.json says attention_bias (Qwen2 has q/k/v biases, Mistral none).
  bool reads_attention_bias() const {
    return architecture != Architecture::kQwen2 && architecture != Architecture::kMistral &&
           architecture != Architecture::kMixtral;
  }
  bool mistral_like() const {
    return architecture == Architecture::kMistral || architecture == Architecture::kMixtral;
  }
  bool moe_family() const {
    return architecture == Architecture::kQwen3Moe || architecture == Architecture::kMixtral;
  }
  bool qk_norm() const {
    return architecture == Architecture::kQwen3 || architecture == Architecture::kQwen3Moe;
  }
  // Layer `layer`'s MLP is a routed mixture of experts: every layer of Mixtral; Qwen3-MoE's every
  // decoder_sparse_step-th outside mlp_only_layers.
  bool SparseLayer(int64_t layer) const;
  // How many layers are sparse (0 for a dense model): the S of routing replay's [.., S, k] routes.
  int64_t SparseLayerCount() const;
  // Bytes that hold any expert index: 1 up to 256 experts, 2 up to 32768, else 4. Routes travel
  // that narrow (the routes column, a rollout group's shared responses): a byte, not an int32, for
  // every expert of every sparse layer of every token.
  int ExpertIndexBytes() const {
    return moe.num_experts <= 256 ? 1 : moe.num_experts <= 32768 ? 2 : 4;
  }

  // OK when every size is in range and the sizes agree (see the file comment). Also bounds each
  // size so that products cannot overflow.
  Status Validate() const;

  // Every field but `extra`, sizes compared with defaults applied.
  bool operator==(const ModelConfig& o) const;
  bool operator!=(const ModelConfig& o) const { return !(*this == o); }
};

// The number of scalar parameters a model of this config holds, computed without building it (a
// loader compares it with a file before allocating). Config if the config is invalid or the count
// overflows int64.
Result<int64_t> ParameterCount(const ModelConfig& c);

// config.json as an object: `extra`'s keys, then every field above under its HF name
// ("architectures", "model_type" and "hidden_act": "silu" included); rl_context only when it
// differs from max_position_embeddings.
nlohmann::json ConfigToJson(const ModelConfig& c);
Result<ModelConfig> ConfigFromJson(const nlohmann::json& j);

// The compact JSON text of a config (a loadable config.json), and its inverse (Config on bad text).
std::string ConfigToString(const ModelConfig& c);
Result<ModelConfig> ConfigFromString(const std::string& text);

// The demo's model: a tiny Llama (hidden 128, 3 layers, 4 heads, 2 KV heads, intermediate 344,
// tied embeddings, context 32) over the 15-token character vocabulary (bos 1, eos 2).
ModelConfig DemoConfig();

}  // namespace rl::model
