#include "rl/model/tokenizer/load.h"

#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "rl/model/tokenizer/hf_tokenizer.h"

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
      if (t.is_object() && t.value("name", std::string()) == "default" && t.contains("template") &&
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

Result<LoadedTokenizer> LoadTokenizer(const std::string& dir) {
  const std::string json_path = dir + "/tokenizer.json";
  const std::string config_path = dir + "/tokenizer_config.json";
  if (!Exists(json_path)) {
    if (Exists(dir + "/tokenizer.model")) {
      return Status::Config("tokenizer: " + dir + " has only a SentencePiece tokenizer.model, which is not supported (convert it to tokenizer.json)");
    }
    return Status::NotFound("tokenizer: no tokenizer.json in " + dir);
  }
  LoadedTokenizer out;
  if (Exists(config_path)) {
    RL_ASSIGN_OR_RETURN(std::string text, ReadFile(config_path));
    auto c = ParseTokenizerConfig(text);
    if (!c.ok()) return c.status().WithContext(config_path);
    out.config = std::move(*c);
  }
  RL_ASSIGN_OR_RETURN(std::string text, ReadFile(json_path));
  auto t = HfTokenizer::FromJson(text, {out.config.pad_token, out.config.bos_token, out.config.eos_token});
  if (!t.ok() && t.status().code() == Code::kConfig) {  // name the file instead of "tokenizer.json"
    const std::string& m = t.status().message();
    const std::string prefix = "tokenizer.json: ";
    return Status::Config(json_path + ": " + (m.compare(0, prefix.size(), prefix) == 0 ? m.substr(prefix.size()) : m));
  }
  if (!t.ok()) return t.status();
  out.tokenizer = std::move(*t);
  return out;
}

}  // namespace rl::tokenizer
