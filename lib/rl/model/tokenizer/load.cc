#include "rl/model/tokenizer/load.h"

#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "rl/core/json_field.h"
#include "rl/model/tokenizer/hf_tokenizer.h"
#include "rl/model/tokenizer/spm_tokenizer.h"

namespace rl::tokenizer {
namespace {

using json = nlohmann::json;

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("tokenizer: cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::IOError("tokenizer: error reading " + path);
  return ss.str();
}

// A token named as "text" or as {"content": "text", ...}.
Result<std::string> TokenName(const json& root, const char* key) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return Status::Config(std::string("tokenizer_config.json: ") + key + " is neither a string nor {\"content\": ...}");
}

Result<bool> Bool(const json& root, const char* key) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) return false;
  if (!it->is_boolean()) return Status::Config(std::string("tokenizer_config.json: ") + key + " is not a boolean");
  return it->get<bool>();
}

Result<std::string> ChatTemplate(const json& root) {
  auto it = root.find("chat_template");
  if (it == root.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const auto& t : *it) {
      if (t.is_object() && TextField(t, "name") == "default" && t.contains("template") &&
          t["template"].is_string()) {
        return t["template"].get<std::string>();
      }
    }
    return Status::Config("tokenizer_config.json: chat_template list has no template named \"default\"");
  }
  return Status::Config("tokenizer_config.json: chat_template is neither a string nor a list");
}

}  // namespace

Result<TokenizerConfig> ParseTokenizerConfig(std::string_view json_text) {
  json root = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return Status::Config("tokenizer_config.json: not a JSON object");
  TokenizerConfig c;
  RL_ASSIGN_OR_RETURN(c.bos_token, TokenName(root, "bos_token"));
  RL_ASSIGN_OR_RETURN(c.eos_token, TokenName(root, "eos_token"));
  RL_ASSIGN_OR_RETURN(c.pad_token, TokenName(root, "pad_token"));
  RL_ASSIGN_OR_RETURN(c.add_bos_token, Bool(root, "add_bos_token"));
  RL_ASSIGN_OR_RETURN(c.add_eos_token, Bool(root, "add_eos_token"));
  RL_ASSIGN_OR_RETURN(c.chat_template, ChatTemplate(root));
  auto m = root.find("model_max_length");
  if (m != root.end() && !m->is_null()) {
    if (!m->is_number()) return Status::Config("tokenizer_config.json: model_max_length is not a number");
    const double v = m->get<double>();
    if (v < 1) return Status::Config("tokenizer_config.json: model_max_length is below 1");
    if (v < 1e18) c.model_max_length = m->is_number_integer() ? m->get<int64_t>() : static_cast<int64_t>(v);
  }
  return c;
}

namespace {

// "dir/file: message" for a Config error whose message starts "file: ".
Status NameFile(const Status& s, const std::string& dir, const std::string& file) {
  if (s.code() != Code::kConfig) return s;
  const std::string& m = s.message();
  const std::string prefix = file + ": ";
  const std::string rest = m.compare(0, prefix.size(), prefix) == 0 ? m.substr(prefix.size()) : m;
  return Status::Config(dir + "/" + file + ": " + rest);
}

// Whether the tokenizer_config.json text sets `key` (to anything but null).
bool Sets(const std::string& config_text, const char* key) {
  json root = json::parse(config_text, nullptr, /*allow_exceptions=*/false);
  return root.is_object() && root.contains(key) && !root[key].is_null();
}

}  // namespace

Result<LoadedTokenizer> LoadTokenizer(const std::string& dir) {
  const std::string json_path = dir + "/tokenizer.json";
  const std::string model_path = dir + "/tokenizer.model";
  const std::string config_path = dir + "/tokenizer_config.json";
  const bool has_json = Exists(json_path), has_model = Exists(model_path);
  if (!has_json && !has_model) return Status::NotFound("tokenizer: no tokenizer.json or tokenizer.model in " + dir);
  LoadedTokenizer out;
  std::string config_text;
  if (Exists(config_path)) {
    RL_ASSIGN_OR_RETURN(config_text, ReadFile(config_path));
    auto c = ParseTokenizerConfig(config_text);
    if (!c.ok()) return c.status().WithContext(config_path);
    out.config = std::move(*c);
  }
  const TokenizerConfig& c = out.config;
  Status json_error;
  if (has_json) {
    RL_ASSIGN_OR_RETURN(std::string text, ReadFile(json_path));
    auto t = HfTokenizer::FromJson(text, {c.pad_token, c.bos_token, c.eos_token});
    if (t.ok()) {
      out.tokenizer = std::move(*t);
      return out;
    }
    json_error = NameFile(t.status(), dir, "tokenizer.json");
    if (!has_model || json_error.code() != Code::kConfig) return json_error;
  }
  RL_ASSIGN_OR_RETURN(std::string model, ReadFile(model_path));
  if (!Sets(config_text, "add_bos_token")) out.config.add_bos_token = true;  // LlamaTokenizer's defaults
  if (!Sets(config_text, "add_eos_token")) out.config.add_eos_token = false;
  SpmOptions o;
  o.names = {c.pad_token, c.bos_token, c.eos_token};
  o.add_bos = c.add_bos_token;
  o.add_eos = c.add_eos_token;
  auto t = SpmTokenizer::FromModel(model, o);
  if (!t.ok() && has_json) {
    return Status::Config(json_error.message() + "; and " + NameFile(t.status(), dir, "tokenizer.model").message());
  }
  if (!t.ok()) return NameFile(t.status(), dir, "tokenizer.model");
  out.tokenizer = std::move(*t);
  return out;
}

}  // namespace rl::tokenizer
