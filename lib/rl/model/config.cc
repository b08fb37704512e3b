#include "rl/model/config.h"

#include <algorithm>
#include <cmath>

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

Status CheckPositive(const char* name, double v) {
  if (!(v > 0) || !std::isfinite(v)) {
    return Status::Config(std::string("model config: ") + name + " must be a positive number");
  }
  return Status::OK();
}

Status CheckRope(const RopeScaling& r) {
  if (!r.llama3) return Status::OK();
  RL_RETURN_IF_ERROR(CheckPositive("rope_scaling.factor", r.factor));
  RL_RETURN_IF_ERROR(CheckPositive("rope_scaling.low_freq_factor", r.low_freq_factor));
  RL_RETURN_IF_ERROR(CheckPositive("rope_scaling.high_freq_factor", r.high_freq_factor));
  RL_RETURN_IF_ERROR(CheckRange("rope_scaling.original_max_position_embeddings",
                                r.original_max_position_embeddings));
  if (!(r.low_freq_factor < r.high_freq_factor)) {
    return Status::Config(
        "model config: rope_scaling.low_freq_factor must be below high_freq_factor");
  }
  return Status::OK();
}

Status CheckTokenId(const char* name, int64_t id, int64_t vocab) {
  if (id < 0 || id >= vocab) {
    return Status::Config(std::string("model config: ") + name + " " + std::to_string(id) +
                          " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  }
  return Status::OK();
}

}  // namespace

const char* ArchitectureName(Architecture a) {
  switch (a) {
    case Architecture::kQwen2:
      return "Qwen2ForCausalLM";
    case Architecture::kQwen3:
      return "Qwen3ForCausalLM";
    case Architecture::kQwen3Moe:
      return "Qwen3MoeForCausalLM";
    case Architecture::kMistral:
      return "MistralForCausalLM";
    case Architecture::kMixtral:
      return "MixtralForCausalLM";
    default:
      return "LlamaForCausalLM";
  }
}

const char* ModelTypeName(Architecture a) {
  switch (a) {
    case Architecture::kQwen2:
      return "qwen2";
    case Architecture::kQwen3:
      return "qwen3";
    case Architecture::kQwen3Moe:
      return "qwen3_moe";
    case Architecture::kMistral:
      return "mistral";
    case Architecture::kMixtral:
      return "mixtral";
    default:
      return "llama";
  }
}

const char* DTypeName(DType d) {
  switch (d) {
    case DType::kBF16:
      return "bfloat16";
    case DType::kF16:
      return "float16";
    default:
      return "float32";
  }
}

Result<DType> DTypeFromName(const std::string& name) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16}) {
    if (name == DTypeName(d)) return d;
  }
  return Status::Config("model config: dtype must be float32, bfloat16 or float16, got \"" + name +
                        "\"");
}

bool RopeScaling::operator==(const RopeScaling& o) const {
  return llama3 == o.llama3 && factor == o.factor && low_freq_factor == o.low_freq_factor &&
         high_freq_factor == o.high_freq_factor &&
         original_max_position_embeddings == o.original_max_position_embeddings;
}

bool MoeConfig::operator==(const MoeConfig& o) const {
  return num_experts == o.num_experts && num_experts_per_tok == o.num_experts_per_tok &&
         moe_intermediate_size == o.moe_intermediate_size && norm_topk_prob == o.norm_topk_prob &&
         decoder_sparse_step == o.decoder_sparse_step && mlp_only_layers == o.mlp_only_layers;
}

bool ModelConfig::SparseLayer(int64_t layer) const {
  if (!moe_family() || moe.num_experts <= 0) return false;
  if (std::find(moe.mlp_only_layers.begin(), moe.mlp_only_layers.end(), layer) !=
      moe.mlp_only_layers.end()) {
    return false;
  }
  return moe.decoder_sparse_step > 0 && (layer + 1) % moe.decoder_sparse_step == 0;
}

int64_t ModelConfig::SparseLayerCount() const {
  int64_t n = 0;
  for (int64_t i = 0; i < num_hidden_layers; ++i) n += SparseLayer(i) ? 1 : 0;
  return n;
}

namespace {

Status CheckMoe(const ModelConfig& c) {
  const MoeConfig& m = c.moe;
  if (!c.moe_family()) {
    if (m.num_experts != 0) return Status::Config("model config: only qwen3_moe and mixtral have experts");
    return Status::OK();
  }
  if (c.architecture == Architecture::kMixtral &&
      (m.moe_intermediate_size != c.intermediate_size || !m.norm_topk_prob ||
       m.decoder_sparse_step != 1 || !m.mlp_only_layers.empty())) {
    return Status::Config(
        "model config: mixtral's experts are intermediate_size wide, renormalized, in every layer");
  }
  const char* experts = c.architecture == Architecture::kMixtral ? "num_local_experts" : "num_experts";
  RL_RETURN_IF_ERROR(CheckRange(experts, m.num_experts));
  RL_RETURN_IF_ERROR(CheckRange("moe_intermediate_size", m.moe_intermediate_size));
  RL_RETURN_IF_ERROR(CheckRange("decoder_sparse_step", m.decoder_sparse_step));
  if (m.num_experts_per_tok < 1 || m.num_experts_per_tok > m.num_experts) {
    return Status::Config(std::string("model config: num_experts_per_tok must be in [1, ") + experts + " " +
                          std::to_string(m.num_experts) + "], got " +
                          std::to_string(m.num_experts_per_tok));
  }
  for (int64_t layer : m.mlp_only_layers) {
    if (layer < 0 || layer >= c.num_hidden_layers) {
      return Status::Config("model config: mlp_only_layers holds " + std::to_string(layer) +
                            ", not a layer in [0, " + std::to_string(c.num_hidden_layers) + ")");
    }
  }
  return Status::OK();
}

}  // namespace

Status ModelConfig::Validate() const {
  if (num_key_value_heads < 0 || head_dim < 0 || rl_context < 0) {
    return Status::Config(
        "model config: num_key_value_heads, head_dim and rl_context must not be "
        "negative");
  }
  RL_RETURN_IF_ERROR(CheckRange("vocab_size", vocab_size));
  RL_RETURN_IF_ERROR(CheckRange("hidden_size", hidden_size));
  RL_RETURN_IF_ERROR(CheckRange("intermediate_size", intermediate_size));
  RL_RETURN_IF_ERROR(CheckRange("num_hidden_layers", num_hidden_layers));
  RL_RETURN_IF_ERROR(CheckRange("num_attention_heads", num_attention_heads));
  RL_RETURN_IF_ERROR(CheckRange("num_key_value_heads", kv_heads()));
  RL_RETURN_IF_ERROR(CheckRange("max_position_embeddings", max_position_embeddings));
  RL_RETURN_IF_ERROR(CheckRange("rl_context", context()));
  RL_RETURN_IF_ERROR(CheckPositive("rms_norm_eps", rms_norm_eps));
  RL_RETURN_IF_ERROR(CheckPositive("rope_theta", rope_theta));
  RL_RETURN_IF_ERROR(CheckRope(rope_scaling));
  RL_RETURN_IF_ERROR(CheckMoe(*this));
  if (num_attention_heads % kv_heads() != 0) {
    return Status::Config(
        "model config: num_attention_heads " + std::to_string(num_attention_heads) +
        " is not a multiple of num_key_value_heads " + std::to_string(kv_heads()));
  }
  if (head_dim <= 0 && hidden_size % num_attention_heads != 0) {
    return Status::Config("model config: hidden_size " + std::to_string(hidden_size) +
                          " is not a multiple of num_attention_heads " +
                          std::to_string(num_attention_heads) + " (and no head_dim is given)");
  }
  RL_RETURN_IF_ERROR(CheckRange("head_dim", head_width()));
  if (head_width() % 2 != 0) {
    return Status::Config("model config: rotary positions need an even head_dim, got " +
                          std::to_string(head_width()));
  }
  if (num_attention_heads * head_width() > kMaxSize) {
    return Status::Config("model config: num_attention_heads * head_dim is too large");
  }
  if (context() > max_position_embeddings) {
    return Status::Config("model config: rl_context " + std::to_string(context()) +
                          " exceeds max_position_embeddings " +
                          std::to_string(max_position_embeddings));
  }
  if (attention_bias && mistral_like()) {
    return Status::Config("model config: mistral and mixtral have no attention biases");
  }
  if (sliding_window < 0 || (sliding_window > 0 && !mistral_like())) {
    return Status::Config("model config: sliding_window is read for mistral and mixtral only");
  }
  if (sliding_window > 0 && sliding_window < context()) {
    return Status::Config("model config: sliding_window " + std::to_string(sliding_window) +
                          " is shorter than the context " + std::to_string(context()) +
                          " (attention here is full: set rl_context to at most the window)");
  }
  if (bos_token_id != -1)
    RL_RETURN_IF_ERROR(CheckTokenId("bos_token_id", bos_token_id, vocab_size));
  for (int64_t id : eos_token_id) RL_RETURN_IF_ERROR(CheckTokenId("eos_token_id", id, vocab_size));
  return Status::OK();
}

bool ModelConfig::operator==(const ModelConfig& o) const {
  return architecture == o.architecture && vocab_size == o.vocab_size &&
         hidden_size == o.hidden_size && intermediate_size == o.intermediate_size &&
         num_hidden_layers == o.num_hidden_layers && num_attention_heads == o.num_attention_heads &&
         kv_heads() == o.kv_heads() && head_width() == o.head_width() &&
         max_position_embeddings == o.max_position_embeddings && context() == o.context() &&
         rms_norm_eps == o.rms_norm_eps && rope_theta == o.rope_theta &&
         rope_scaling == o.rope_scaling && tie_word_embeddings == o.tie_word_embeddings &&
         attention_bias == o.attention_bias && moe == o.moe &&
         sliding_window == o.sliding_window && torch_dtype == o.torch_dtype &&
         bos_token_id == o.bos_token_id && eos_token_id == o.eos_token_id;
}

Result<int64_t> ParameterCount(const ModelConfig& c) {
  RL_RETURN_IF_ERROR(c.Validate());
  // Every factor is below 2^24, so each product of two is below 2^48; the products of three
  // (experts * d * width) and with the layer count, and the sums, are checked.
  const int64_t d = c.hidden_size, q = c.num_attention_heads * c.head_width();
  const int64_t kv = c.kv_heads() * c.head_width();
  const Status too_large = Status::Config("model config: too large");
  int64_t sparse_mlp = 0;  // router [E, D] and E experts of 3 * D * moe_intermediate_size
  if (__builtin_mul_overflow(3 * d * c.moe.moe_intermediate_size + d, c.moe.num_experts, &sparse_mlp)) {
    return too_large;
  }
  const int64_t layer_terms[] = {2 * d,  // input_layernorm, post_attention_layernorm
                                 d * q,
                                 d * kv,
                                 d * kv,
                                 q * d,  // q, k, v, o
                                 c.qkv_bias() ? q + 2 * kv : 0,
                                 c.o_bias() ? d : 0,
                                 c.qk_norm() ? 2 * c.head_width() : 0};
  int64_t layer = 0, total = 0;
  for (int64_t t : layer_terms) {
    if (__builtin_add_overflow(layer, t, &layer)) return too_large;
  }
  if (__builtin_mul_overflow(layer, c.num_hidden_layers, &total)) return too_large;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const int64_t mlp = c.SparseLayer(i) ? sparse_mlp : 3 * d * c.intermediate_size;
    if (__builtin_add_overflow(total, mlp, &total)) return too_large;
  }
  const int64_t terms[] = {c.vocab_size * d, d, c.tie_word_embeddings ? 0 : c.vocab_size * d};
  for (int64_t t : terms) {
    if (__builtin_add_overflow(total, t, &total)) return too_large;
  }
  return total;
}

ModelConfig DemoConfig() {
  ModelConfig c;
  c.architecture = Architecture::kLlama;
  c.vocab_size = 15;
  c.hidden_size = 128;
  c.intermediate_size = 344;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 32;
  c.max_position_embeddings = 32;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = true;
  c.bos_token_id = 1;
  c.eos_token_id = {2};
  return c;
}

}  // namespace rl::model
