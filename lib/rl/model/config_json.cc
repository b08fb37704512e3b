// ModelConfig <-> config.json (the rules are in config.h).
#include <nlohmann/json.hpp>

#include "rl/model/config.h"

namespace rl::model {
namespace {

using nlohmann::json;

Status TypeError(const std::string& key, const char* what) {
  return Status::Config("model config: '" + key + "' must be " + what);
}

// Reads the keys of one config object, removing each key it reads from `rest`.
class Reader {
 public:
  explicit Reader(const json& j) : j_(j), rest_(j) {}

  bool Has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  const json& rest() const { return rest_; }

  Status Int(const std::string& key, bool required, int64_t* out) {
    rest_.erase(key);
    if (!Has(key)) return Missing(key, required);
    if (!j_.at(key).is_number_integer()) return TypeError(key, "an integer");
    *out = j_.at(key).get<int64_t>();
    return Status::OK();
  }
  // An optional size that, when given, must be positive (0 would mean "default" in ModelConfig).
  Status Size(const std::string& key, bool required, int64_t* out) {
    int64_t v = *out;
    RL_RETURN_IF_ERROR(Int(key, required, &v));
    if (Has(key) && v <= 0) return TypeError(key, "a positive integer");
    *out = v;
    return Status::OK();
  }
  Status Number(const std::string& key, double* out) {
    rest_.erase(key);
    if (!Has(key)) return Status::OK();
    if (!j_.at(key).is_number()) return TypeError(key, "a number");
    *out = j_.at(key).get<double>();
    return Status::OK();
  }
  Status Bool(const std::string& key, bool* out) {
    rest_.erase(key);
    if (!Has(key)) return Status::OK();
    if (!j_.at(key).is_boolean()) return TypeError(key, "true or false");
    *out = j_.at(key).get<bool>();
    return Status::OK();
  }
  // A key read by hand: not kept in `extra`.
  void Skip(const std::string& key) { rest_.erase(key); }
  Status String(const std::string& key, std::string* out) {
    rest_.erase(key);
    if (!Has(key)) return Status::OK();
    if (!j_.at(key).is_string()) return TypeError(key, "a string");
    *out = j_.at(key).get<std::string>();
    return Status::OK();
  }

 private:
  static Status Missing(const std::string& key, bool required) {
    if (!required) return Status::OK();
    return Status::Config("model config: missing '" + key + "'");
  }
  const json& j_;
  json rest_;
};

Result<Architecture> ReadArchitecture(Reader* r, const json& j) {
  std::string model_type;
  RL_RETURN_IF_ERROR(r->String("model_type", &model_type));
  std::string name;
  if (j.contains("architectures")) {
    const json& a = j.at("architectures");
    if (!a.is_array() || a.size() != 1 || !a[0].is_string()) {
      return TypeError("architectures", "a list of one name");
    }
    name = a[0].get<std::string>();
  }
  for (Architecture arch : {Architecture::kLlama, Architecture::kQwen2, Architecture::kQwen3,
                            Architecture::kQwen3Moe, Architecture::kMistral, Architecture::kMixtral}) {
    const bool by_name = name == ArchitectureName(arch);
    if (!by_name && !(name.empty() && model_type == ModelTypeName(arch))) continue;
    if (!model_type.empty() && model_type != ModelTypeName(arch)) {
      return Status::Config("model config: model_type \"" + model_type + "\" contradicts " +
                            "architectures \"" + name + "\"");
    }
    return arch;
  }
  if (name.empty() && model_type.empty())
    return Status::Config("model config: missing 'architectures'");
  return Status::Config("model config: unsupported architecture \"" +
                        (name.empty() ? model_type : name) +
                        "\" (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, " +
                        "Qwen3ForCausalLM, Qwen3MoeForCausalLM, MixtralForCausalLM are)");
}

Status ReadRope(const json& j, const char* key, RopeScaling* out, double* theta) {
  if (!j.contains(key) || j.at(key).is_null()) return Status::OK();
  const json& r = j.at(key);
  const std::string k = key;
  if (!r.is_object()) return TypeError(k, "an object or null");
  if (r.contains("rope_theta")) {
    if (!r.at("rope_theta").is_number()) return TypeError(k + ".rope_theta", "a number");
    *theta = r.at("rope_theta").get<double>();
  }
  const char* type_key = r.contains("rope_type") ? "rope_type" : "type";
  if (!r.contains(type_key)) return Status::Config("model config: " + k + " lacks 'rope_type'");
  if (!r.at(type_key).is_string()) return TypeError(k + "." + type_key, "a string");
  const std::string type = r.at(type_key).get<std::string>();
  if (type == "default") return Status::OK();
  if (type != "llama3") {
    return Status::Config("model config: " + k + " type \"" + type +
                          "\" is not supported (only \"llama3\" and \"default\" are)");
  }
  out->llama3 = true;
  const std::pair<const char*, double*> numbers[] = {{"factor", &out->factor},
                                                     {"low_freq_factor", &out->low_freq_factor},
                                                     {"high_freq_factor", &out->high_freq_factor}};
  for (const auto& [name, dest] : numbers) {
    if (!r.contains(name)) return Status::Config("model config: " + k + " lacks '" + name + "'");
    if (!r.at(name).is_number()) return TypeError(k + "." + name, "a number");
    *dest = r.at(name).get<double>();
  }
  const char* omp = "original_max_position_embeddings";
  if (!r.contains(omp)) return Status::Config("model config: " + k + " lacks '" + omp + "'");
  if (!r.at(omp).is_number_integer()) return TypeError(k + "." + omp, "an integer");
  out->original_max_position_embeddings = r.at(omp).get<int64_t>();
  return Status::OK();
}

// bos_token_id: int or null; eos_token_id: int, list of ints, or null.
Status ReadTokenIds(Reader* r, const json& j, ModelConfig* c) {
  RL_RETURN_IF_ERROR(r->Int("bos_token_id", false, &c->bos_token_id));
  if (!j.contains("eos_token_id") || j.at("eos_token_id").is_null()) return Status::OK();
  const json& e = j.at("eos_token_id");
  if (e.is_number_integer()) {
    c->eos_token_id = {e.get<int64_t>()};
    return Status::OK();
  }
  if (!e.is_array()) return TypeError("eos_token_id", "an integer or a list of integers");
  for (const json& id : e) {
    if (!id.is_number_integer())
      return TypeError("eos_token_id", "an integer or a list of integers");
    c->eos_token_id.push_back(id.get<int64_t>());
  }
  return Status::OK();
}

// Keys checked for an unsupported value but kept in `extra` as they are.
Status CheckUnsupported(const json& j) {
  const auto is_true = [&](const char* key) {
    return j.contains(key) && j.at(key).is_boolean() && j.at(key).get<bool>();
  };
  for (const char* key : {"use_sliding_window", "mlp_bias"}) {
    if (j.contains(key) && !j.at(key).is_null() && !j.at(key).is_boolean()) {
      return TypeError(key, "true or false");
    }
    if (is_true(key)) {
      return Status::Config(std::string("model config: ") + key + " true is not supported");
    }
  }
  return Status::OK();
}

// Qwen3-MoE's keys (config.h). mlp_only_layers: a list of integers, or null for none.
Status ReadMoe(Reader* r, const json& j, MoeConfig* m) {
  RL_RETURN_IF_ERROR(r->Size("num_experts", true, &m->num_experts));
  RL_RETURN_IF_ERROR(r->Size("num_experts_per_tok", true, &m->num_experts_per_tok));
  RL_RETURN_IF_ERROR(r->Size("moe_intermediate_size", true, &m->moe_intermediate_size));
  RL_RETURN_IF_ERROR(r->Size("decoder_sparse_step", false, &m->decoder_sparse_step));
  RL_RETURN_IF_ERROR(r->Bool("norm_topk_prob", &m->norm_topk_prob));
  r->Skip("mlp_only_layers");
  if (!j.contains("mlp_only_layers") || j.at("mlp_only_layers").is_null()) return Status::OK();
  const json& layers = j.at("mlp_only_layers");
  if (!layers.is_array()) return TypeError("mlp_only_layers", "a list of layer indices");
  for (const json& layer : layers) {
    if (!layer.is_number_integer()) return TypeError("mlp_only_layers", "a list of layer indices");
    m->mlp_only_layers.push_back(layer.get<int64_t>());
  }
  return Status::OK();
}

// Mixtral's keys: its experts are what the rest of its config implies (config.h).
Status ReadMixtral(Reader* r, ModelConfig* c) {
  MoeConfig& m = c->moe;
  RL_RETURN_IF_ERROR(r->Size("num_local_experts", true, &m.num_experts));
  RL_RETURN_IF_ERROR(r->Size("num_experts_per_tok", true, &m.num_experts_per_tok));
  m.moe_intermediate_size = c->intermediate_size;
  m.norm_topk_prob = true;
  return Status::OK();
}

Status ReadFields(Reader* r, const json& j, ModelConfig* c) {
  RL_RETURN_IF_ERROR(r->Int("vocab_size", true, &c->vocab_size));
  RL_RETURN_IF_ERROR(r->Int("hidden_size", true, &c->hidden_size));
  RL_RETURN_IF_ERROR(r->Int("intermediate_size", true, &c->intermediate_size));
  RL_RETURN_IF_ERROR(r->Int("num_hidden_layers", true, &c->num_hidden_layers));
  RL_RETURN_IF_ERROR(r->Int("num_attention_heads", true, &c->num_attention_heads));
  RL_RETURN_IF_ERROR(r->Int("max_position_embeddings", true, &c->max_position_embeddings));
  RL_RETURN_IF_ERROR(r->Size("num_key_value_heads", false, &c->num_key_value_heads));
  RL_RETURN_IF_ERROR(r->Size("head_dim", c->qk_norm(), &c->head_dim));  // Qwen3's, required
  RL_RETURN_IF_ERROR(r->Size("rl_context", false, &c->rl_context));
  RL_RETURN_IF_ERROR(r->Number("rms_norm_eps", &c->rms_norm_eps));
  RL_RETURN_IF_ERROR(r->Number("rope_theta", &c->rope_theta));
  RL_RETURN_IF_ERROR(r->Bool("tie_word_embeddings", &c->tie_word_embeddings));
  if (c->reads_attention_bias()) RL_RETURN_IF_ERROR(r->Bool("attention_bias", &c->attention_bias));
  if (c->mistral_like()) RL_RETURN_IF_ERROR(r->Size("sliding_window", false, &c->sliding_window));
  std::string act = "silu", dtype;
  RL_RETURN_IF_ERROR(r->String("hidden_act", &act));
  if (act != "silu") {
    return Status::Config("model config: hidden_act \"" + act + "\" is not supported (only silu)");
  }
  RL_RETURN_IF_ERROR(r->String("dtype", &dtype));  // the newer spelling of torch_dtype
  RL_RETURN_IF_ERROR(r->String("torch_dtype", &dtype));
  if (!dtype.empty()) {
    RL_ASSIGN_OR_RETURN(c->torch_dtype, DTypeFromName(dtype));
  }
  RL_RETURN_IF_ERROR(ReadRope(j, "rope_scaling", &c->rope_scaling, &c->rope_theta));
  RL_RETURN_IF_ERROR(ReadRope(j, "rope_parameters", &c->rope_scaling, &c->rope_theta));
  RL_RETURN_IF_ERROR(ReadTokenIds(r, j, c));
  if (c->architecture == Architecture::kQwen3Moe) RL_RETURN_IF_ERROR(ReadMoe(r, j, &c->moe));
  if (c->architecture == Architecture::kMixtral) RL_RETURN_IF_ERROR(ReadMixtral(r, c));
  return CheckUnsupported(j);
}

}  // namespace

json ConfigToJson(const ModelConfig& c) {
  json j = json::parse(c.extra, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) j = json::object();
  j["architectures"] = json::array({ArchitectureName(c.architecture)});
  j["model_type"] = ModelTypeName(c.architecture);
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.kv_heads();
  j["head_dim"] = c.head_width();
  j["max_position_embeddings"] = c.max_position_embeddings;
  if (c.context() != c.max_position_embeddings) j["rl_context"] = c.context();
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = nullptr;
  if (c.rope_scaling.llama3) {
    const RopeScaling& r = c.rope_scaling;
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", r.factor},
                         {"low_freq_factor", r.low_freq_factor},
                         {"high_freq_factor", r.high_freq_factor},
                         {"original_max_position_embeddings", r.original_max_position_embeddings}};
  }
  j["hidden_act"] = "silu";
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (c.reads_attention_bias()) j["attention_bias"] = c.attention_bias;
  if (c.mistral_like()) {
    j["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
  }
  if (c.architecture == Architecture::kMixtral) {
    j["num_local_experts"] = c.moe.num_experts;
    j["num_experts_per_tok"] = c.moe.num_experts_per_tok;
  }
  if (c.architecture == Architecture::kQwen3Moe) {
    const MoeConfig& m = c.moe;
    j["num_experts"] = m.num_experts;
    j["num_experts_per_tok"] = m.num_experts_per_tok;
    j["moe_intermediate_size"] = m.moe_intermediate_size;
    j["norm_topk_prob"] = m.norm_topk_prob;
    j["decoder_sparse_step"] = m.decoder_sparse_step;
    j["mlp_only_layers"] = m.mlp_only_layers;
  }
  j["torch_dtype"] = DTypeName(c.torch_dtype);
  if (c.bos_token_id >= 0) j["bos_token_id"] = c.bos_token_id;
  if (c.eos_token_id.size() == 1) j["eos_token_id"] = c.eos_token_id[0];
  if (c.eos_token_id.size() > 1) j["eos_token_id"] = c.eos_token_id;
  return j;
}

Result<ModelConfig> ConfigFromJson(const json& j) {
  if (!j.is_object()) return Status::Config("model config: expected a JSON object");
  Reader r(j);
  ModelConfig c;
  RL_ASSIGN_OR_RETURN(c.architecture, ReadArchitecture(&r, j));
  RL_RETURN_IF_ERROR(ReadFields(&r, j, &c));
  json rest = r.rest();
  for (const char* key : {"architectures", "rope_scaling", "rope_parameters", "eos_token_id"}) {
    rest.erase(key);
  }
  c.extra = rest.dump();
  RL_RETURN_IF_ERROR(c.Validate());
  return c;
}

std::string ConfigToString(const ModelConfig& c) { return ConfigToJson(c).dump(); }

Result<ModelConfig> ConfigFromString(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Config("model config: not valid JSON");
  return ConfigFromJson(j);
}

}  // namespace rl::model
