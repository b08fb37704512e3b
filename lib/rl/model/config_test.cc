#include "rl/model/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

namespace rl::model {
namespace {

// An excerpt of Llama 3.2 1B's config.json (sizes shrunk), with keys we do not read.
const char* const kLlama = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 64,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": false,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})";

// Qwen3 0.6B's config.json.
const char* const kQwen3 = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// Qwen2.5 0.5B's.
const char* const kQwen2 = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936})";

// Qwen3-30B-A3B's.
const char* const kQwen3Moe = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
  "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
  "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
  "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
  "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_scaling": null,
  "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// Mistral 7B v0.3's.
const char* const kMistral = R"({
  "architectures": ["MistralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
  "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.42.0.dev0",
  "use_cache": true, "vocab_size": 32768})";

// Mixtral 8x7B v0.1's.
const char* const kMixtral = R"({
  "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
  "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral",
  "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": false,
  "rms_norm_eps": 1e-05, "rope_theta": 1e6, "router_aux_loss_coef": 0.02, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.36.0.dev0",
  "use_cache": true, "vocab_size": 32000})";

ModelConfig Parse(const char* text) {
  auto c = ConfigFromString(text);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : ModelConfig();
}

// The text with `key` set to `value` (JSON text), or removed when value is empty.
std::string With(const char* text, const std::string& key, const std::string& value) {
  nlohmann::json j = nlohmann::json::parse(text);
  if (value.empty()) {
    j.erase(key);
  } else {
    j[key] = nlohmann::json::parse(value);
  }
  return j.dump();
}

TEST(ModelConfigTest, ReadsRealConfigsOfEachFamily) {
  const ModelConfig llama = Parse(kLlama);
  EXPECT_EQ(llama.architecture, Architecture::kLlama);
  EXPECT_EQ(llama.kv_heads(), 8);
  EXPECT_EQ(llama.head_width(), 64);
  EXPECT_TRUE(llama.rope_scaling.llama3);
  EXPECT_EQ(llama.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(llama.eos_token_id, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(llama.torch_dtype, DType::kBF16);
  EXPECT_EQ(llama.context(), 131072);
  EXPECT_FALSE(llama.qkv_bias());
  const ModelConfig qwen2 = Parse(kQwen2);
  EXPECT_EQ(qwen2.head_width(), 64);
  EXPECT_TRUE(qwen2.qkv_bias());
  EXPECT_FALSE(qwen2.o_bias());
  const ModelConfig qwen3 = Parse(kQwen3);
  EXPECT_EQ(qwen3.head_width(), 128);  // not 1024 / 16
  EXPECT_TRUE(qwen3.qk_norm());
  EXPECT_EQ(qwen3.rope_theta, 1e6);
  EXPECT_FALSE(qwen3.SparseLayer(0));
}

TEST(ModelConfigTest, ReadsMistralAndMixtral) {
  const ModelConfig mistral = Parse(kMistral);
  EXPECT_EQ(mistral.architecture, Architecture::kMistral);
  EXPECT_FALSE(mistral.qkv_bias() || mistral.o_bias() || mistral.qk_norm());
  EXPECT_EQ(mistral.sliding_window, 0);
  // The published sizes: Mistral 7B 7.25B parameters, Mixtral 8x7B 46.7B.
  EXPECT_NEAR(static_cast<double>(ParameterCount(mistral).value()), 7.25e9, 0.01e9);
  const ModelConfig mixtral = Parse(kMixtral);
  EXPECT_EQ(mixtral.moe.num_experts, 8);
  EXPECT_EQ(mixtral.moe.num_experts_per_tok, 2);
  EXPECT_EQ(mixtral.moe.moe_intermediate_size, 14336);
  EXPECT_TRUE(mixtral.moe.norm_topk_prob);
  EXPECT_TRUE(mixtral.SparseLayer(0) && mixtral.SparseLayer(31));
  EXPECT_NEAR(static_cast<double>(ParameterCount(mixtral).value()), 46.7e9, 0.05e9);
  // Mistral 7B v0.1's window of 4096 under a context of 32768: attention here is full, so the
  // context must be cut to the window (rl_context), where the two are the same.
  const std::string windowed = With(kMistral, "sliding_window", "4096");
  EXPECT_EQ(ConfigFromString(windowed).status().code(), Code::kConfig);
  const ModelConfig cut = Parse(With(windowed.c_str(), "rl_context", "4096").c_str());
  EXPECT_EQ(cut.sliding_window, 4096);
  EXPECT_EQ(Parse(ConfigToString(cut).c_str()), cut);
  // A hand-built Mistral with biases is refused: transformers' has none.
  ModelConfig biased = mistral;
  biased.attention_bias = true;
  EXPECT_EQ(biased.Validate().code(), Code::kConfig);
  // Qwen2 and Qwen3 carry a sliding_window that only use_sliding_window turns on: kept, not read.
  EXPECT_EQ(Parse(kQwen2).sliding_window, 0);
}

TEST(ModelConfigTest, ReadsQwen3MoeWithItsExperts) {
  const ModelConfig c = Parse(kQwen3Moe);
  EXPECT_EQ(c.architecture, Architecture::kQwen3Moe);
  EXPECT_TRUE(c.qk_norm());
  EXPECT_EQ(c.moe.num_experts, 128);
  EXPECT_EQ(c.moe.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe.moe_intermediate_size, 768);
  EXPECT_TRUE(c.moe.norm_topk_prob);
  for (int64_t layer : {0, 1, 47}) EXPECT_TRUE(c.SparseLayer(layer));
  // The published size of Qwen3-30B-A3B: 30.5B parameters.
  auto count = ParameterCount(c);
  ASSERT_TRUE(count.ok());
  EXPECT_GT(*count, 30'450'000'000);
  EXPECT_LT(*count, 30'550'000'000);
  // Keys it does not read stay as they were; defaults of the optional ones follow HF.
  EXPECT_NE(c.extra.find("router_aux_loss_coef"), std::string::npos) << c.extra;
  const std::string bare = With(With(With(kQwen3Moe, "decoder_sparse_step", "").c_str(),
                                     "norm_topk_prob", "").c_str(), "mlp_only_layers", "null");
  const ModelConfig defaults = Parse(bare.c_str());
  EXPECT_EQ(defaults.moe.decoder_sparse_step, 1);
  EXPECT_FALSE(defaults.moe.norm_topk_prob);
  EXPECT_TRUE(defaults.moe.mlp_only_layers.empty());
  // Every other layer sparse, and of those layer 3 dense.
  const ModelConfig mixed =
      Parse(With(With(kQwen3Moe, "decoder_sparse_step", "2").c_str(), "mlp_only_layers", "[3]").c_str());
  EXPECT_EQ(mixed.moe.mlp_only_layers, std::vector<int64_t>{3});
  std::vector<int64_t> sparse;
  for (int64_t layer = 0; layer < 8; ++layer) {
    if (mixed.SparseLayer(layer)) sparse.push_back(layer);
  }
  EXPECT_EQ(sparse, (std::vector<int64_t>{1, 5, 7}));
  EXPECT_LT(ParameterCount(mixed).value(), *count);
  // A dense family keeps such keys verbatim and reads none of them.
  const ModelConfig dense = Parse(With(kQwen3, "num_experts", "8").c_str());
  EXPECT_EQ(dense.moe.num_experts, 0);
  EXPECT_NE(dense.extra.find("num_experts"), std::string::npos);
}

TEST(ModelConfigTest, JsonRoundTripKeepsUnknownKeys) {
  for (const char* text : {kLlama, kQwen2, kQwen3, kQwen3Moe, kMistral, kMixtral}) {
    const ModelConfig c = Parse(text);
    const ModelConfig back = Parse(ConfigToString(c).c_str());
    EXPECT_EQ(back, c);
    EXPECT_EQ(back.extra, c.extra);
    EXPECT_NE(c.extra.find("transformers_version"), std::string::npos) << c.extra;
  }
  ModelConfig limited = Parse(kQwen3);
  limited.rl_context = 64;
  const ModelConfig back = Parse(ConfigToString(limited).c_str());
  EXPECT_EQ(back.context(), 64);
  EXPECT_EQ(back, limited);
}

TEST(ModelConfigTest, DefaultsFollowHuggingFace) {
  const std::string text = R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 15,
      "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
      "num_attention_heads": 4, "max_position_embeddings": 32})";
  const ModelConfig c = Parse(text.c_str());
  EXPECT_EQ(c.kv_heads(), 4);
  EXPECT_EQ(c.head_width(), 16);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.rope_scaling.llama3);
  EXPECT_EQ(c.bos_token_id, -1);
  EXPECT_EQ(Parse(With(kLlama, "architectures", "").c_str()).architecture,
            Architecture::kLlama);  // model_type names it
}

TEST(ModelConfigTest, BadConfigsAreConfigErrorsNamingTheField) {
  const std::pair<std::string, std::string> bad[] = {
      {"not json", "not valid JSON"},
      {"[]", "JSON object"},
      {With(kLlama, "hidden_size", ""), "missing 'hidden_size'"},
      {With(With(kLlama, "architectures", "").c_str(), "model_type", ""), "architectures"},
      {With(kLlama, "architectures", R"(["GemmaForCausalLM"])"), "GemmaForCausalLM"},
      {With(kLlama, "model_type", R"("qwen2")"), "contradicts"},
      {With(kLlama, "hidden_size", "2048.5"), "'hidden_size' must be an integer"},
      {With(kLlama, "num_key_value_heads", "6"), "not a multiple of num_key_value_heads"},
      {With(kLlama, "num_key_value_heads", "0"), "num_key_value_heads"},
      {With(With(kLlama, "head_dim", "").c_str(), "num_attention_heads", "24"), "hidden_size"},
      {With(kLlama, "head_dim", "63"), "even head_dim"},
      {With(kLlama, "hidden_act", R"("gelu")"), "hidden_act \"gelu\""},
      {With(kLlama, "mlp_bias", "true"), "mlp_bias"},
      {With(kQwen2, "use_sliding_window", "true"), "use_sliding_window"},
      {With(kLlama, "rope_scaling", R"({"rope_type": "yarn", "factor": 4.0})"), "\"yarn\""},
      {With(kLlama, "rope_scaling", R"({"rope_type": "llama3", "factor": 8.0})"),
       "low_freq_factor"},
      {With(kLlama, "rope_scaling",
            R"({"type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 1,
                "original_max_position_embeddings": 8192})"),
       "below high_freq_factor"},
      {With(kLlama, "rope_theta", "-1"), "rope_theta"},
      {With(kLlama, "rms_norm_eps", R"("1e-5")"), "'rms_norm_eps' must be a number"},
      {With(kLlama, "tie_word_embeddings", "1"), "tie_word_embeddings"},
      {With(kLlama, "torch_dtype", R"("float64")"), "float64"},
      {With(kLlama, "eos_token_id", "128256"), "eos_token_id 128256 is outside"},
      {With(kLlama, "eos_token_id", R"(["x"])"), "eos_token_id"},
      {With(kLlama, "rl_context", "200000"), "exceeds max_position_embeddings"},
      {With(kQwen3, "head_dim", ""), "missing 'head_dim'"},
      {With(kLlama, "vocab_size", "0"), "vocab_size"},
      {With(kQwen3Moe, "num_experts", ""), "missing 'num_experts'"},
      {With(kQwen3Moe, "moe_intermediate_size", "0"), "moe_intermediate_size"},
      {With(kQwen3Moe, "num_experts_per_tok", "129"), "num_experts_per_tok must be in [1, num_experts 128]"},
      {With(kQwen3Moe, "decoder_sparse_step", "0"), "decoder_sparse_step"},
      {With(kQwen3Moe, "norm_topk_prob", "1"), "norm_topk_prob"},
      {With(kQwen3Moe, "mlp_only_layers", "[48]"), "mlp_only_layers holds 48"},
      {With(kQwen3Moe, "mlp_only_layers", R"(["0"])"), "mlp_only_layers"},
      {With(kQwen3Moe, "mlp_only_layers", "3"), "mlp_only_layers"},
      {With(kQwen3Moe, "model_type", R"("qwen3")"), "contradicts"},
      {With(kMixtral, "num_local_experts", ""), "missing 'num_local_experts'"},
      {With(kMixtral, "num_experts_per_tok", "9"), "num_experts_per_tok must be in [1, num_local_experts 8]"},
      {With(kMistral, "sliding_window", "0"), "sliding_window"},
      {With(kMistral, "sliding_window", "4096"), "sliding_window 4096 is shorter than the context 32768"},
  };
  for (const auto& [text, needle] : bad) {
    auto c = ConfigFromString(text);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().code(), Code::kConfig) << text;
    EXPECT_NE(c.status().message().find(needle), std::string::npos)
        << c.status().message() << " lacks " << needle;
    EXPECT_EQ(c.status().message().find('\n'), std::string::npos);
  }
}

TEST(ModelConfigTest, DemoConfigIsATinyTiedLlama) {
  const ModelConfig c = DemoConfig();
  ASSERT_TRUE(c.Validate().ok()) << c.Validate().ToString();
  EXPECT_EQ(c.context(), 32);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(Parse(ConfigToString(c).c_str()), c);
  auto count = ParameterCount(c);
  ASSERT_TRUE(count.ok());
  // 15*128 embedding + 128 norm + 3 * (2*128 norms + 2*128*128 q,o + 2*128*64 k,v + 3*128*344)
  EXPECT_EQ(*count, 15 * 128 + 128 + 3 * (256 + 32768 + 16384 + 132096));
}

TEST(ModelConfigTest, TheDemoModelDirectoryHoldsTheDemoConfig) {
  // share/models/addition-tiny is the demo model as a Hugging Face directory (config.json beside
  // the tokenizer files); it must not drift from DemoConfig().
  std::ifstream in(std::string(RL_SOURCE_DIR) + "/share/models/addition-tiny/config.json");
  ASSERT_TRUE(in) << "share/models/addition-tiny/config.json is missing";
  std::stringstream text;
  text << in.rdbuf();
  auto c = ConfigFromString(text.str());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c, DemoConfig()) << "want: " << ConfigToString(DemoConfig());
}

}  // namespace
}  // namespace rl::model
